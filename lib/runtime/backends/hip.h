// The HIP backend: HSACO code objects (plans compiled for an hsaco profile
// such as targets/amd-mi300x.yaml) run through the HIP runtime's module API
// on an AMD GPU. The runtime, libamdhip64.so, is opened at run time, so a
// binary built without ROCm starts anywhere and says so with a typed
// Capability error. Buffers are device memory (hipMalloc); a kernel is a
// module loaded from its code object, after the backend has checked that
// the object is one and is for the device's gfx arch; a program is a list of
// launches on one stream, captured once as a HIP graph and replayed by every
// run (or launched in order), and waited for. Untested on AMD hardware: the
// unit tests run it on a fake runtime (docs/runtime.md).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ir/diag.h"
#include "runtime/backend.h"

namespace poot::rt {

struct HipOptions {
  // Which device: its ordinal, or a piece of its name or slug
  // (case-insensitive). Empty: the POOT_HIP_DEVICE environment variable,
  // read the same way; when that is unset too, device 0.
  std::string device;
  // Capture each program as a HIP graph and replay it with one
  // hipGraphLaunch (where the runtime has the graph entry points; without
  // them the backend launches in order and replayFallback() says why).
  // False: every run launches the program's dispatches one by one.
  bool replay = true;
};

Expected<std::unique_ptr<Backend>> createHipBackend(const HipOptions& opts = {});

// The runtime's entry point exported under `name` ("hipMalloc"), or nullptr
// where the runtime lacks it.
using HipSymbols = std::function<void*(const char* name)>;
// A backend over the entry points `symbols` resolves instead of those of
// libamdhip64.so (the unit tests' fake runtime), hipInit'ed for this backend.
Expected<std::unique_ptr<Backend>> createHipBackend(const HipOptions& opts, const HipSymbols& symbols);

// The profile-style name of a device HIP calls `name`: as cudaSlug, starting
// "amd-": "AMD Instinct MI300X" -> "amd-instinct-mi300x".
std::string hipSlug(const std::string& name);

}  // namespace poot::rt

// The CUDA backend: PTX kernels (plans compiled for a ptx profile such as
// targets/nvidia-h200.yaml) run through the CUDA driver API. The driver,
// libcuda.so.1, is opened at run time, so a binary built on a host without
// CUDA starts anywhere and says so with a typed Capability error. Buffers
// are device memory (cuMemAlloc); a kernel is a module JIT-compiled from its
// PTX; a program is a list of launches on one stream, recorded once as a
// CUDA graph and replayed by every run (or, without graphs or replay,
// launched in order by every run), and waited for.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ir/diag.h"
#include "runtime/backend.h"

namespace poot::rt {

struct CudaOptions {
  // Which device: its ordinal, or a piece of its name or slug
  // (case-insensitive). Empty: the POOT_CUDA_DEVICE environment variable,
  // read the same way; when that is unset too, device 0.
  std::string device;
  // Record each program as a CUDA graph and replay it with one cuGraphLaunch
  // (where the driver has graphs: CUDA 11.4 and newer; without them the
  // backend launches in order and replayFallback() says why). False: every
  // run launches the program's dispatches one by one, in order.
  bool replay = true;
};

Expected<std::unique_ptr<Backend>> createCudaBackend(const CudaOptions& opts = {});

// The driver's entry point exported under `name` ("cuMemAlloc_v2"), or
// nullptr where the driver lacks it.
using CudaSymbols = std::function<void*(const char* name)>;
// A backend over the entry points `symbols` resolves instead of those of
// libcuda.so.1 (the unit tests' fake driver), cuInit'ed for this backend.
Expected<std::unique_ptr<Backend>> createCudaBackend(const CudaOptions& opts, const CudaSymbols& symbols);

// The profile-style name of a device the driver calls `name`: lower case,
// runs of other characters as one '-', always starting "nvidia-" once:
// "NVIDIA H200" -> "nvidia-h200", "Tesla V100-SXM2-16GB" ->
// "nvidia-tesla-v100-sxm2-16gb".
std::string cudaSlug(const std::string& name);

}  // namespace poot::rt

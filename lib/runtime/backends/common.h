// What the GPU backends share: the profile-style slug of a device name (all
// three), and for those that open a vendor driver (CUDA, HIP) the choice of
// a device by ordinal or name, the check of a byte range against a buffer's
// size and what a function's attributes say of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "runtime/backend.h"

namespace poot::rt {

// `name` lower case, runs of other characters as one '-', parenthesized
// parts dropped: "NVIDIA H200 (rev 1)" -> "nvidia-h200"; empty when nothing
// is left.
std::string nameSlug(const std::string& name);

// nameSlug(name), starting "VENDOR-" once: ("NVIDIA H200", "nvidia") ->
// "nvidia-h200", ("AMD Instinct MI300X", "amd") -> "amd-instinct-mi300x";
// "VENDOR-gpu" when nothing is left.
std::string deviceSlug(const std::string& name, const std::string& vendor);

// The index in `names` of the device `want` picks: an ordinal, else the
// first name holding `want` (case-insensitive) or whose slug it is; 0 when
// `want` is empty. A Capability "Device" error naming `backend` and listing
// the devices when none matches.
Expected<int> pickDeviceByName(const std::vector<std::string>& names, const std::string& want,
                               const std::string& vendor, const char* backend);

// An Io error, named for `backend`, saying [offset, offset + bytes) is not
// inside buffer `buffer` of `size` bytes.
Error outsideBuffer(const char* backend, BufferId buffer, int64_t size, int64_t offset, int64_t bytes);

// Whether `buffer` is one of `buffers` (each with its size in `bytes`) and
// [offset, offset + bytes) lies inside it; an Io error otherwise.
template <class Buf>
Status checkBufferRange(const char* backend, const std::vector<Buf>& buffers, BufferId buffer, int64_t offset,
                        int64_t bytes) {
  if (buffer < 0 || size_t(buffer) >= buffers.size())
    return makeError(ErrorKind::Io, {}, std::string(backend) + ": no buffer " + std::to_string(buffer));
  int64_t size = buffers[size_t(buffer)].bytes;
  if (offset < 0 || bytes < 0 || offset + bytes > size) return outsideBuffer(backend, buffer, size, offset, bytes);
  return ok();
}

// What a backend checks of a kernel before building it: 1 to
// info.maxWorkgroupSize threads a workgroup and at most
// info.workgroupMemoryBytes of workgroup memory (Capability errors,
// "WorkgroupSize" and "WorkgroupMemory").
Status checkKernelLimits(const DeviceInfo& info, const std::string& entry, int64_t workgroupSize,
                         int64_t workgroupMemory);

// Whether a dispatch's kernel is one of `kernels` (each with its binding
// count in `bindings`), binds as many buffers as it takes, and each binding
// lies inside its buffer at an offset that is a multiple of `alignment`;
// an Io error, named for `backend`, otherwise.
template <class Kern, class Buf>
Status checkDispatch(const char* backend, const DispatchCommand& d, const std::vector<Kern>& kernels,
                     const std::vector<Buf>& buffers, int64_t alignment) {
  auto fail = [&](const std::string& msg) { return makeError(ErrorKind::Io, {}, std::string(backend) + ": " + msg); };
  if (d.kernel < 0 || size_t(d.kernel) >= kernels.size()) return fail("no kernel " + std::to_string(d.kernel));
  int takes = kernels[size_t(d.kernel)].bindings;
  if (int(d.bindings.size()) != takes)
    return fail("a dispatch binds " + std::to_string(d.bindings.size()) + " buffers, its kernel takes " +
                std::to_string(takes));
  for (const BufferRange& b : d.bindings) {
    if (auto s = checkBufferRange(backend, buffers, b.buffer, b.offset, b.bytes); !s) return s;
    if (b.offset % alignment)
      return fail("binding offset " + std::to_string(b.offset) + " is not a multiple of " + std::to_string(alignment));
  }
  return ok();
}

// A CUDA or HIP function's KernelStats, from the function attributes both
// APIs number alike (cuda.h's CUfunction_attribute, which HIP's
// hipFunction_attribute repeats): NUM_REGS (4) and LOCAL_SIZE_BYTES (3), a
// thread's; SHARED_SIZE_BYTES (1), the static bytes, to which
// `dynamicShared` (what its launches pass) is added; and
// MAX_THREADS_PER_BLOCK (0), listed by its name. `attribute(&value, attr,
// name)` reads one, `name` being `prefix` and the attribute's ("NUM_REGS"),
// and `resident(&blocks)` the blocks a compute unit holds at the kernel's
// block size; each returns the API's failure as an error.
template <class Attribute, class Resident>
Expected<KernelStats> functionStats(const std::string& prefix, int64_t dynamicShared, Attribute attribute,
                                    Resident resident) {
  struct Want {
    int attr;
    const char* name;
    int value = 0;
  };
  Want want[] = {{4, "NUM_REGS"}, {3, "LOCAL_SIZE_BYTES"}, {1, "SHARED_SIZE_BYTES"}, {0, "MAX_THREADS_PER_BLOCK"}};
  for (Want& w : want)
    if (Status s = attribute(&w.value, w.attr, prefix + w.name); !s) return s.error();
  int blocks = 0;
  if (Status s = resident(&blocks); !s) return s.error();
  auto [registers, local, shared, threads] = want;
  KernelStats stats;
  stats.registers = registers.value;
  stats.localBytes = local.value;
  stats.workgroupMemoryBytes = shared.value + dynamicShared;
  stats.residentWorkgroups = blocks;
  stats.driver = {{prefix + threads.name, std::to_string(threads.value)}};
  return stats;
}

}  // namespace poot::rt

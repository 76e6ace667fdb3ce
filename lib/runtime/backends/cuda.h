// The CUDA backend: PTX kernels (plans compiled for a ptx profile such as
// targets/nvidia-h200.yaml) run through the CUDA driver API. The driver,
// libcuda.so.1, is opened at run time, so a binary built on a host without
// CUDA starts anywhere and says so with a typed Capability error. Buffers
// are device memory (cuMemAlloc); a kernel is a module JIT-compiled from its
// PTX; a program is a list of launches on one stream, run in order and
// waited for.
#pragma once

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
};

Expected<std::unique_ptr<Backend>> createCudaBackend(const CudaOptions& opts = {});

// The profile-style name of a device the driver calls `name`: lower case,
// runs of other characters as one '-', always starting "nvidia-" once:
// "NVIDIA H200" -> "nvidia-h200", "Tesla V100-SXM2-16GB" ->
// "nvidia-tesla-v100-sxm2-16gb".
std::string cudaSlug(const std::string& name);

}  // namespace poot::rt

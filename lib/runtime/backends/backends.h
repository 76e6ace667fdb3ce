// Opening a backend by the name the tools take (--backend): "vulkan",
// "cuda" and "hip".
#pragma once

#include <memory>
#include <string>

#include "ir/diag.h"
#include "runtime/backend.h"

namespace poot::rt {

// `device` picks the device as VulkanOptions::device, CudaOptions::device or
// HipOptions::device does (empty: the default); `replay` is
// CudaOptions::replay or HipOptions::replay (Vulkan always replays its
// command buffers).
Expected<std::unique_ptr<Backend>> openBackend(const std::string& name, const std::string& device,
                                               bool replay = true);

}  // namespace poot::rt

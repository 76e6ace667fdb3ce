// Opening a backend by the name the tools take (--backend): "vulkan" and
// "cuda"; "hip" is a name of the contract that this build does not have
// yet, refused as a capability.
#pragma once

#include <memory>
#include <string>

#include "ir/diag.h"
#include "runtime/backend.h"

namespace poot::rt {

// `device` picks the device as VulkanOptions::device or CudaOptions::device
// does (empty: the default); `replay` is CudaOptions::replay (Vulkan always
// replays its command buffers).
Expected<std::unique_ptr<Backend>> openBackend(const std::string& name, const std::string& device,
                                               bool replay = true);

}  // namespace poot::rt

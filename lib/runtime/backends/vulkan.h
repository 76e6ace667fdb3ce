// The Vulkan backend: Vulkan 1.2 (or newer) compute through the system's
// loader, which is opened at run time (libvulkan.so.1), so a binary built
// here starts on a host without Vulkan and says so with a typed Capability
// error. Buffers live in host-visible, coherent memory (simple, and what
// lavapipe has anyway); storage buffer i of a kernel is set 0, binding i;
// every recorded program is one command buffer, replayed as it is.
#pragma once

#include <memory>
#include <string>

#include "ir/diag.h"
#include "runtime/backend.h"

namespace poot::rt {

struct VulkanOptions {
  // Which physical device: its index in the driver's list, or a piece of its
  // name or slug (case-insensitive). Empty: the POOT_VULKAN_DEVICE
  // environment variable, read the same way; when that is unset too, the
  // first discrete GPU, else the first integrated GPU, else the first device.
  std::string device;
};

Expected<std::unique_ptr<Backend>> createVulkanBackend(const VulkanOptions& opts = {});

}  // namespace poot::rt

// The Vulkan backend: Vulkan 1.2 (or newer) compute through the system's
// loader, which is opened at run time (libvulkan.so.1), so a binary built
// here starts on a host without Vulkan and says so with a typed Capability
// error. Storage buffer i of a kernel is set 0, binding i; every recorded
// program is one command buffer, replayed as it is, and timed on the device
// by two timestamps where its queue takes them.
//
// Memory is chosen per device (vulkan.cpp says how in full). Buffers are
// mapped, and upload is a memcpy, only where host-visible coherent memory is
// also device-local and its heap is large: at least half of the largest
// device-local heap (lavapipe, integrated GPUs, discrete GPUs with a
// resizable BAR; a discrete GPU's uncached BAR is never read by the host:
// downloads are staged there). Everywhere else (a discrete GPU with the usual 256 MiB
// BAR) buffers live in device-local memory that the host cannot see, and
// upload and download go through a host-visible staging buffer and
// vkCmdCopyBuffer, in chunks of at most 64 MiB, so kernels never read their
// buffers across PCIe. VulkanOptions::staging or POOT_VULKAN_STAGING=1 forces
// the staging path on any device (the tests run it on lavapipe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ir/diag.h"
#include "runtime/backend.h"

// The vendor properties that count a device's compute units (vulkan_core.h).
struct VkPhysicalDeviceShaderSMBuiltinsPropertiesNV;
struct VkPhysicalDeviceShaderCorePropertiesAMD;

namespace poot::rt {

struct VulkanOptions {
  // Which physical device: its index in the driver's list, or a piece of its
  // name or slug (case-insensitive). Empty: the POOT_VULKAN_DEVICE
  // environment variable, read the same way; when that is unset too, the
  // first discrete GPU, else the first integrated GPU, else the first device.
  std::string device;
  // Keep buffers in device-local memory and move bytes through staging
  // copies even where mapped device memory would do. False: the
  // POOT_VULKAN_STAGING environment variable decides (set and neither empty
  // nor "0": staging), else the device does.
  bool staging = false;
  // The most bytes one staging copy moves (the staging buffer holds two such
  // chunks, so the host fills one while the device copies the other); 0:
  // 64 MiB.
  int64_t stagingChunkBytes = 0;
};

Expected<std::unique_ptr<Backend>> createVulkanBackend(const VulkanOptions& opts = {});

// A device's compute units as its vendor extension reports them, 0 when it
// reports none (core Vulkan has no such count): the SM count of
// VK_NV_shader_sm_builtins, else the CUs per shader array x arrays per
// engine x shader engines of VK_AMD_shader_core_properties. A null pointer
// stands for an extension the device does not offer. The backend's
// DeviceInfo::computeUnits is this figure, 0 included.
int64_t vulkanComputeUnits(const VkPhysicalDeviceShaderSMBuiltinsPropertiesNV* nv,
                           const VkPhysicalDeviceShaderCorePropertiesAMD* amd);

// How a backend from createVulkanBackend holds its buffers.
struct VulkanMemoryChoice {
  bool staging = false;       // device-local buffers; upload and download are staging copies
  bool stagedReads = false;   // downloads go through staging (always when staging)
  int64_t chunkBytes = 0;     // the most bytes one staging copy moves
  std::string summary;        // one line naming the memory types and heaps, for messages
};
// For any other backend: staging false and an empty summary.
VulkanMemoryChoice vulkanMemoryChoice(const Backend& backend);

// What a backend from createVulkanBackend does to keep kernels inside their
// memory: "robustBufferAccess[, robustBufferAccess2], local indices bounded",
// "no robustBufferAccess on the device, local indices bounded", or
// "none: POOT_VULKAN_ROBUST=0". Empty for any other backend.
std::string vulkanRobustness(const Backend& backend);

}  // namespace poot::rt

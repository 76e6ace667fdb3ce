// Dispatches on the backend name; each backend checks its own driver.
#include "runtime/backends/backends.h"

#include "runtime/backends/cuda.h"
#include "runtime/backends/hip.h"
#include "runtime/backends/vulkan.h"

namespace poot::rt {

Expected<std::unique_ptr<Backend>> openBackend(const std::string& name, const std::string& device, bool replay) {
  if (name == "vulkan") return createVulkanBackend(VulkanOptions{device});
  if (name == "cuda") return createCudaBackend(CudaOptions{device, replay});
  if (name == "hip") return createHipBackend(HipOptions{device, replay});
  return makeError(ErrorKind::Usage, {}, "unknown backend '" + name + "' (backends: vulkan, cuda, hip)");
}

}  // namespace poot::rt

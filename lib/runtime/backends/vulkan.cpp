// The Vulkan backend. The loader is dlopen'ed and every entry point fetched
// through vkGetInstanceProcAddr / vkGetDeviceProcAddr (VK_NO_PROTOTYPES), so
// nothing links against Vulkan. Creation picks a physical device (an index or
// a name piece from the options or POOT_VULKAN_DEVICE, else discrete before
// integrated before anything), one queue family with compute, and enables
// what kernels may use where the device has it: 8- and 16-bit storage buffer
// access, shaderInt64, shaderInt16, shaderInt8 and shaderFloat16. Each buffer
// has its own host-visible, coherent allocation, mapped for its lifetime, so
// upload and download are memcpy; sizes round up to 256 bytes, so a 0-byte
// buffer and a binding rounded up to 4 bytes at a 256-aligned offset stay in
// bounds. A kernel is a shader module, a set layout of N storage buffers, a
// pipeline layout and a compute pipeline. A program owns a descriptor pool
// with one set per dispatch and one command buffer: a barrier from host and
// transfer writes, then each dispatch followed by a global shader-write ->
// shader-read/write barrier, then a barrier to host and transfer reads.
// Running it submits with a fence and waits.
#define VK_NO_PROTOTYPES
#include "runtime/backends/vulkan.h"

#include <vulkan/vulkan.h>

#include <dlfcn.h>

#include <mutex>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace poot::rt {

namespace {

#define POOT_VK_INSTANCE_FNS(X)                                                                         \
  X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                                       \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2)                                     \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice)  \
  X(vkGetDeviceProcAddr)

#define POOT_VK_DEVICE_FNS(X)                                                                            \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkCreateBuffer) X(vkDestroyBuffer)        \
  X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory)            \
  X(vkMapMemory) X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout)         \
  X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                  \
  X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool)  \
  X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) X(vkCreateCommandPool) X(vkDestroyCommandPool)   \
  X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer)      \
  X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdDispatch) X(vkCmdPipelineBarrier)               \
  X(vkCmdCopyBuffer) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences)             \
  X(vkResetFences)

#define POOT_VK_DECLARE(name) PFN_##name name = nullptr;

struct Fns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PFN_vkCreateInstance vkCreateInstance = nullptr;
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion = nullptr;
  POOT_VK_INSTANCE_FNS(POOT_VK_DECLARE)
  POOT_VK_DEVICE_FNS(POOT_VK_DECLARE)
};

Error unavailable(const std::string& why) {
  Error e = makeError(ErrorKind::Capability, {}, "vulkan is not available: " + why);
  e.capability = "Vulkan";
  return e;
}

Error failed(const char* call, VkResult r) {
  return makeError(ErrorKind::Io, {}, std::string("vulkan: ") + call + " failed (VkResult " + std::to_string(int(r)) + ")");
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(uint8_t(c)));
  return s;
}

// "NVIDIA H200 (rev 1)" -> "nvidia-h200"; lavapipe by its driver.
std::string slugOf(const std::string& name, VkDriverId driver) {
  if (driver == VK_DRIVER_ID_MESA_LLVMPIPE) return "lavapipe";
  std::string out;
  int depth = 0;
  for (char c : name) {
    if (c == '(') ++depth;
    else if (c == ')') depth = std::max(0, depth - 1);
    else if (depth == 0 && std::isalnum(uint8_t(c))) out += char(std::tolower(uint8_t(c)));
    else if (depth == 0 && !out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "vulkan-device" : out;
}

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct Buf {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  uint8_t* mapped = nullptr;
  int64_t bytes = 0;  // as allocated, rounded
};

struct Kern {
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout setLayout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  int bindings = 0;
};

struct Prog {
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VkCommandBuffer commands = VK_NULL_HANDLE;
};

class VulkanBackend final : public Backend {
 public:
  ~VulkanBackend() override;

  Status init(const VulkanOptions& opts);

  const DeviceInfo& info() const override { return info_; }
  Expected<BufferId> allocate(int64_t bytes) override;
  Status upload(BufferId buffer, int64_t offset, const void* data, int64_t bytes) override;
  Status download(BufferId buffer, int64_t offset, void* data, int64_t bytes) override;
  Status copy(BufferId src, BufferId dst, int64_t bytes) override;
  Expected<KernelId> createKernel(const std::vector<uint8_t>& blob, const std::string& entry, int64_t workgroupSize,
                                  int64_t workgroupMemory, int bindings) override;
  Expected<ProgramId> record(const std::vector<DispatchCommand>& dispatches) override;
  Status run(ProgramId program) override;

 private:
  Status loadLoader();
  Status openLoader();
  Status pickDevice(const VulkanOptions& opts);
  Status createDevice();
  Status checkRange(BufferId buffer, int64_t offset, int64_t bytes) const;
  Expected<VkCommandBuffer> newCommands();
  Status submit(VkCommandBuffer commands);
  void barrier(VkCommandBuffer c, VkPipelineStageFlags src, VkAccessFlags srcAccess, VkPipelineStageFlags dst,
               VkAccessFlags dstAccess);

  void* lib_ = nullptr;
  Fns f_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  uint32_t memoryType_ = 0;
  VkCommandPool commandPool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  uint32_t apiVersion_ = 0;
  // Features the device has, enabled at creation.
  VkPhysicalDeviceFeatures2 features_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features features11_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features features12_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  DeviceInfo info_;
  std::vector<Buf> buffers_;
  std::vector<Kern> kernels_;
  std::vector<Prog> programs_;
};

VulkanBackend::~VulkanBackend() {
  if (device_) {
    f_.vkDeviceWaitIdle(device_);
    for (Prog& p : programs_) {
      f_.vkFreeCommandBuffers(device_, commandPool_, 1, &p.commands);
      f_.vkDestroyDescriptorPool(device_, p.pool, nullptr);
    }
    for (Kern& k : kernels_) {
      f_.vkDestroyPipeline(device_, k.pipeline, nullptr);
      f_.vkDestroyPipelineLayout(device_, k.layout, nullptr);
      f_.vkDestroyDescriptorSetLayout(device_, k.setLayout, nullptr);
      f_.vkDestroyShaderModule(device_, k.module, nullptr);
    }
    for (Buf& b : buffers_) {
      f_.vkDestroyBuffer(device_, b.buffer, nullptr);
      f_.vkFreeMemory(device_, b.memory, nullptr);  // unmaps too
    }
    if (fence_) f_.vkDestroyFence(device_, fence_, nullptr);
    if (commandPool_) f_.vkDestroyCommandPool(device_, commandPool_, nullptr);
    f_.vkDestroyDevice(device_, nullptr);
  }
  // The instance and the loader stay: loadLoader shares them with every
  // backend of the process.
}

// One loader and one VkInstance per process, made by the first backend and
// kept until exit: sessions gain nothing from instances of their own, and
// destroying one makes the loader unload the driver, whose leftovers (Mesa's
// lavapipe leaves some) then show as leaks under LeakSanitizer.
Status VulkanBackend::loadLoader() {
  struct Shared {
    void* lib;
    VkInstance instance;
    Fns f;  // the loader's and the instance's entry points
    uint32_t apiVersion;
  };
  static std::mutex mutex;
  static const Shared* shared = nullptr;  // never freed, like the instance
  std::lock_guard<std::mutex> lock(mutex);
  if (!shared) {
    if (auto s = openLoader(); !s) return s;
    shared = new Shared{lib_, instance_, f_, apiVersion_};
    return ok();
  }
  lib_ = shared->lib;
  instance_ = shared->instance;
  f_ = shared->f;
  apiVersion_ = shared->apiVersion;
  return ok();
}

Status VulkanBackend::openLoader() {
  lib_ = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib_) return unavailable(std::string("cannot load libvulkan.so.1 (") + dlerror() + ")");
  f_.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib_, "vkGetInstanceProcAddr"));
  if (!f_.vkGetInstanceProcAddr) return unavailable("libvulkan.so.1 has no vkGetInstanceProcAddr");
  f_.vkCreateInstance =
      reinterpret_cast<PFN_vkCreateInstance>(f_.vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkCreateInstance"));
  f_.vkEnumerateInstanceVersion = reinterpret_cast<PFN_vkEnumerateInstanceVersion>(
      f_.vkGetInstanceProcAddr(VK_NULL_HANDLE, "vkEnumerateInstanceVersion"));
  if (!f_.vkCreateInstance || !f_.vkEnumerateInstanceVersion)
    return unavailable("the vulkan loader is older than 1.1");

  uint32_t loader = 0;
  f_.vkEnumerateInstanceVersion(&loader);
  if (loader < VK_API_VERSION_1_2)
    return unavailable("the vulkan loader reports " + std::to_string(VK_API_VERSION_MAJOR(loader)) + "." +
                       std::to_string(VK_API_VERSION_MINOR(loader)) + ", 1.2 is needed");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "poot";
  app.pEngineName = "poot";
  app.apiVersion = loader >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2;
  VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ci.pApplicationInfo = &app;
  if (VkResult r = f_.vkCreateInstance(&ci, nullptr, &instance_); r != VK_SUCCESS) {
    instance_ = VK_NULL_HANDLE;
    return r == VK_ERROR_INCOMPATIBLE_DRIVER
               ? unavailable("no installed vulkan driver could create an instance (VK_LOADER_DEBUG=error says why)")
               : failed("vkCreateInstance", r);
  }
  apiVersion_ = app.apiVersion;
#define POOT_VK_LOAD_INSTANCE(name)                                                                   \
  f_.name = reinterpret_cast<PFN_##name>(f_.vkGetInstanceProcAddr(instance_, #name));                 \
  if (!f_.name) return unavailable("the vulkan loader has no " #name);
  POOT_VK_INSTANCE_FNS(POOT_VK_LOAD_INSTANCE)
#undef POOT_VK_LOAD_INSTANCE
  return ok();
}

Status VulkanBackend::pickDevice(const VulkanOptions& opts) {
  uint32_t n = 0;
  f_.vkEnumeratePhysicalDevices(instance_, &n, nullptr);
  std::vector<VkPhysicalDevice> devices(n);
  if (n) f_.vkEnumeratePhysicalDevices(instance_, &n, devices.data());
  if (devices.empty()) return unavailable("the driver lists no vulkan device");

  std::vector<VkPhysicalDeviceProperties> props(n);
  std::vector<VkPhysicalDeviceVulkan12Properties> props12(n);
  for (uint32_t i = 0; i < n; ++i) {
    props12[i] = VkPhysicalDeviceVulkan12Properties{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
    VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    p2.pNext = &props12[i];
    f_.vkGetPhysicalDeviceProperties2(devices[i], &p2);
    props[i] = p2.properties;
  }

  std::string want = opts.device;
  if (want.empty())
    if (const char* env = std::getenv("POOT_VULKAN_DEVICE")) want = env;
  int64_t chosen = -1;
  if (!want.empty()) {
    bool index = std::all_of(want.begin(), want.end(), [](char c) { return std::isdigit(uint8_t(c)); });
    for (uint32_t i = 0; i < n && chosen < 0; ++i) {
      std::string name = props[i].deviceName;
      if (index ? std::to_string(i) == want
                : lower(name).find(lower(want)) != std::string::npos || slugOf(name, props12[i].driverID) == lower(want))
        chosen = i;
    }
    if (chosen < 0) {
      std::string names;
      for (uint32_t i = 0; i < n; ++i) names += (i ? ", " : "") + std::to_string(i) + ": " + props[i].deviceName;
      Error e = makeError(ErrorKind::Capability, {}, "no vulkan device matches '" + want + "' (devices: " + names + ")");
      e.capability = "Device";
      return e;
    }
  } else {
    for (VkPhysicalDeviceType type : {VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU, VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU})
      for (uint32_t i = 0; i < n && chosen < 0; ++i)
        if (props[i].deviceType == type) chosen = i;
    if (chosen < 0) chosen = 0;
  }

  physical_ = devices[size_t(chosen)];
  const VkPhysicalDeviceProperties& p = props[size_t(chosen)];
  const VkPhysicalDeviceVulkan12Properties& p12 = props12[size_t(chosen)];
  if (p.apiVersion < VK_API_VERSION_1_2) {
    Error e = makeError(ErrorKind::Capability, {},
                        std::string("vulkan device '") + p.deviceName + "' reports version " +
                            std::to_string(VK_API_VERSION_MAJOR(p.apiVersion)) + "." +
                            std::to_string(VK_API_VERSION_MINOR(p.apiVersion)) + ", 1.2 is needed");
    e.capability = "Device";
    return e;
  }
  apiVersion_ = std::min(apiVersion_, p.apiVersion);
  // Every kernel declares SignedZeroInfNanPreserve for f32: masked keys are
  // -inf and NaN must propagate, which a driver may otherwise optimize away.
  if (!p12.shaderSignedZeroInfNanPreserveFloat32) {
    Error e = makeError(ErrorKind::Capability, {},
                        std::string("vulkan device '") + p.deviceName +
                            "' does not preserve f32 infinities and NaN (shaderSignedZeroInfNanPreserveFloat32), "
                            "which the kernels rely on");
    e.capability = "Device";
    return e;
  }

  VkPhysicalDeviceVulkan11Properties p11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &p11;
  f_.vkGetPhysicalDeviceProperties2(physical_, &p2);

  const VkPhysicalDeviceLimits& l = p.limits;
  info_.name = p.deviceName;
  info_.slug = slugOf(info_.name, p12.driverID);
  info_.target = Target::Spirv;
  info_.arch = "vulkan1." + std::to_string(std::min<uint32_t>(VK_API_VERSION_MINOR(apiVersion_), 3));
  info_.driver = std::string(p12.driverName) + " " + p12.driverInfo;
  info_.workgroupMemoryBytes = l.maxComputeSharedMemorySize;
  info_.maxWorkgroupSize = std::min<int64_t>(l.maxComputeWorkGroupInvocations, l.maxComputeWorkGroupSize[0]);
  info_.subgroupSize = p11.subgroupSize;
  for (int k = 0; k < 3; ++k) info_.gridLimits[k] = l.maxComputeWorkGroupCount[k];
  info_.bindingAlignment = int64_t(std::max<VkDeviceSize>(l.minStorageBufferOffsetAlignment, 1));
  // Vulkan does not report a count of compute units; lavapipe runs one
  // worker thread per CPU core (LP_NUM_THREADS overrides it).
  info_.computeUnits = 1;
  if (p12.driverID == VK_DRIVER_ID_MESA_LLVMPIPE) {
    const char* threads = std::getenv("LP_NUM_THREADS");
    info_.computeUnits = threads && std::atoi(threads) > 0 ? std::atoi(threads)
                                                            : std::max(1u, std::thread::hardware_concurrency());
  }

  VkPhysicalDeviceMemoryProperties mem;
  f_.vkGetPhysicalDeviceMemoryProperties(physical_, &mem);
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info_.memoryBytes = std::max<int64_t>(info_.memoryBytes, int64_t(mem.memoryHeaps[h].size));
  info_.maxBindingBytes = std::min<int64_t>(l.maxStorageBufferRange, info_.memoryBytes);

  const VkMemoryPropertyFlags want_flags = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  bool found = false;
  for (uint32_t t = 0; t < mem.memoryTypeCount && !found; ++t)
    if ((mem.memoryTypes[t].propertyFlags & want_flags) == want_flags) memoryType_ = t, found = true;
  if (!found) return unavailable(info_.name + " has no host-visible coherent memory");
  return ok();
}

Status VulkanBackend::createDevice() {
  uint32_t n = 0;
  f_.vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  f_.vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, families.data());
  bool found = false;
  for (uint32_t i = 0; i < n && !found; ++i)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family_ = i, found = true;
  if (!found) return unavailable(info_.name + " has no compute queue");

  // Query, then enable exactly what the device has among what kernels use.
  VkPhysicalDeviceVulkan11Features has11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features has12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 has{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  has.pNext = &has11;
  has11.pNext = &has12;
  f_.vkGetPhysicalDeviceFeatures2(physical_, &has);
  features11_.storageBuffer16BitAccess = has11.storageBuffer16BitAccess;
  features12_.storageBuffer8BitAccess = has12.storageBuffer8BitAccess;
  features12_.shaderFloat16 = has12.shaderFloat16;
  features12_.shaderInt8 = has12.shaderInt8;
  features_.features.shaderInt64 = has.features.shaderInt64;
  features_.features.shaderInt16 = has.features.shaderInt16;
  features_.pNext = &features11_;
  features11_.pNext = &features12_;
  info_.f16Storage = has11.storageBuffer16BitAccess;
  info_.f16Arith = has11.storageBuffer16BitAccess && has12.shaderFloat16;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  q.queueFamilyIndex = family_;
  q.queueCount = 1;
  q.pQueuePriorities = &priority;
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.pNext = &features_;
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &q;
  if (VkResult r = f_.vkCreateDevice(physical_, &ci, nullptr, &device_); r != VK_SUCCESS) {
    device_ = VK_NULL_HANDLE;
    return failed("vkCreateDevice", r);
  }
  // Destroying needs the device functions: load them before anything can fail.
#define POOT_VK_LOAD_DEVICE(name) f_.name = reinterpret_cast<PFN_##name>(f_.vkGetDeviceProcAddr(device_, #name));
  POOT_VK_DEVICE_FNS(POOT_VK_LOAD_DEVICE)
#undef POOT_VK_LOAD_DEVICE
#define POOT_VK_CHECK_DEVICE(name) \
  if (!f_.name) return unavailable("the vulkan driver has no " #name);
  POOT_VK_DEVICE_FNS(POOT_VK_CHECK_DEVICE)
#undef POOT_VK_CHECK_DEVICE
  f_.vkGetDeviceQueue(device_, family_, 0, &queue_);

  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = family_;
  if (VkResult r = f_.vkCreateCommandPool(device_, &pool, nullptr, &commandPool_); r != VK_SUCCESS)
    return failed("vkCreateCommandPool", r);
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  if (VkResult r = f_.vkCreateFence(device_, &fence, nullptr, &fence_); r != VK_SUCCESS)
    return failed("vkCreateFence", r);
  return ok();
}

Status VulkanBackend::init(const VulkanOptions& opts) {
  if (auto s = loadLoader(); !s) return s;
  if (auto s = pickDevice(opts); !s) return s;
  return createDevice();
}

Expected<BufferId> VulkanBackend::allocate(int64_t bytes) {
  Buf b;
  b.bytes = roundUp(std::max<int64_t>(bytes, 1), 256);
  VkBufferCreateInfo ci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  ci.size = VkDeviceSize(b.bytes);
  ci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  ci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (VkResult r = f_.vkCreateBuffer(device_, &ci, nullptr, &b.buffer); r != VK_SUCCESS)
    return failed("vkCreateBuffer", r);
  VkMemoryRequirements req;
  f_.vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = memoryType_;
  if (!(req.memoryTypeBits & (1u << memoryType_))) {
    f_.vkDestroyBuffer(device_, b.buffer, nullptr);
    return unavailable("storage buffers cannot live in host-visible memory on " + info_.name);
  }
  VkResult r = f_.vkAllocateMemory(device_, &ai, nullptr, &b.memory);
  if (r == VK_SUCCESS) r = f_.vkBindBufferMemory(device_, b.buffer, b.memory, 0);
  void* mapped = nullptr;
  if (r == VK_SUCCESS) r = f_.vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &mapped);
  if (r != VK_SUCCESS) {
    f_.vkDestroyBuffer(device_, b.buffer, nullptr);
    if (b.memory) f_.vkFreeMemory(device_, b.memory, nullptr);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
      Error e = makeError(ErrorKind::Capability, {},
                          "cannot allocate a buffer of " + std::to_string(bytes) + " bytes on " + info_.name);
      e.capability = "MemoryBudget";
      return e;
    }
    return failed("vkAllocateMemory", r);
  }
  b.mapped = static_cast<uint8_t*>(mapped);
  buffers_.push_back(b);
  return BufferId(buffers_.size() - 1);
}

Status VulkanBackend::checkRange(BufferId buffer, int64_t offset, int64_t bytes) const {
  if (buffer < 0 || size_t(buffer) >= buffers_.size())
    return makeError(ErrorKind::Io, {}, "vulkan: no buffer " + std::to_string(buffer));
  if (offset < 0 || bytes < 0 || offset + bytes > buffers_[size_t(buffer)].bytes)
    return makeError(ErrorKind::Io, {},
                     "vulkan: bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                         ") are outside buffer " + std::to_string(buffer) + " of " +
                         std::to_string(buffers_[size_t(buffer)].bytes) + " bytes");
  return ok();
}

Status VulkanBackend::upload(BufferId buffer, int64_t offset, const void* data, int64_t bytes) {
  if (auto s = checkRange(buffer, offset, bytes); !s) return s;
  if (bytes) std::memcpy(buffers_[size_t(buffer)].mapped + offset, data, size_t(bytes));
  return ok();
}

Status VulkanBackend::download(BufferId buffer, int64_t offset, void* data, int64_t bytes) {
  if (auto s = checkRange(buffer, offset, bytes); !s) return s;
  if (bytes) std::memcpy(data, buffers_[size_t(buffer)].mapped + offset, size_t(bytes));
  return ok();
}

void VulkanBackend::barrier(VkCommandBuffer c, VkPipelineStageFlags src, VkAccessFlags srcAccess,
                            VkPipelineStageFlags dst, VkAccessFlags dstAccess) {
  VkMemoryBarrier m{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  m.srcAccessMask = srcAccess;
  m.dstAccessMask = dstAccess;
  f_.vkCmdPipelineBarrier(c, src, dst, 0, 1, &m, 0, nullptr, 0, nullptr);
}

Expected<VkCommandBuffer> VulkanBackend::newCommands() {
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = commandPool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer c = VK_NULL_HANDLE;
  if (VkResult r = f_.vkAllocateCommandBuffers(device_, &ai, &c); r != VK_SUCCESS)
    return failed("vkAllocateCommandBuffers", r);
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  if (VkResult r = f_.vkBeginCommandBuffer(c, &bi); r != VK_SUCCESS) {
    f_.vkFreeCommandBuffers(device_, commandPool_, 1, &c);
    return failed("vkBeginCommandBuffer", r);
  }
  barrier(c, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
          VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT |
              VK_ACCESS_SHADER_WRITE_BIT);
  return c;
}

Status VulkanBackend::submit(VkCommandBuffer c) {
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &c;
  if (VkResult r = f_.vkQueueSubmit(queue_, 1, &si, fence_); r != VK_SUCCESS) return failed("vkQueueSubmit", r);
  VkResult r = f_.vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX);
  f_.vkResetFences(device_, 1, &fence_);
  return r == VK_SUCCESS ? ok() : Status(failed("vkWaitForFences", r));
}

Status VulkanBackend::copy(BufferId src, BufferId dst, int64_t bytes) {
  if (auto s = checkRange(src, 0, bytes); !s) return s;
  if (auto s = checkRange(dst, 0, bytes); !s) return s;
  if (bytes == 0) return ok();
  auto c = newCommands();
  if (!c) return c.error();
  VkBufferCopy region{0, 0, VkDeviceSize(bytes)};
  f_.vkCmdCopyBuffer(*c, buffers_[size_t(src)].buffer, buffers_[size_t(dst)].buffer, 1, &region);
  barrier(*c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
          VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  Status s = ok();
  if (VkResult r = f_.vkEndCommandBuffer(*c); r != VK_SUCCESS) s = failed("vkEndCommandBuffer", r);
  if (s) s = submit(*c);
  f_.vkFreeCommandBuffers(device_, commandPool_, 1, &*c);
  return s;
}

Expected<KernelId> VulkanBackend::createKernel(const std::vector<uint8_t>& blob, const std::string& entry,
                                               int64_t workgroupSize, int64_t /*workgroupMemory: in the module*/,
                                               int bindings) {
  if (blob.empty() || blob.size() % 4 != 0 || blob[0] != 0x03 || blob[1] != 0x02 || blob[2] != 0x23 ||
      blob[3] != 0x07)
    return makeError(ErrorKind::Format, {}, "kernel '" + entry + "' is not a spir-v module (" +
                                                std::to_string(blob.size()) + " bytes)");
  if (workgroupSize < 1 || workgroupSize > info_.maxWorkgroupSize) {
    Error e = makeError(ErrorKind::Capability, {},
                        "kernel '" + entry + "' runs " + std::to_string(workgroupSize) + " threads a workgroup, " +
                            info_.name + " holds " + std::to_string(info_.maxWorkgroupSize));
    e.capability = "WorkgroupSize";
    return e;
  }
  Kern k;
  k.bindings = bindings;
  auto release = [&] {
    if (k.pipeline) f_.vkDestroyPipeline(device_, k.pipeline, nullptr);
    if (k.layout) f_.vkDestroyPipelineLayout(device_, k.layout, nullptr);
    if (k.setLayout) f_.vkDestroyDescriptorSetLayout(device_, k.setLayout, nullptr);
    if (k.module) f_.vkDestroyShaderModule(device_, k.module, nullptr);
  };
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  std::vector<uint32_t> words(blob.size() / 4);
  std::memcpy(words.data(), blob.data(), blob.size());
  mi.codeSize = blob.size();
  mi.pCode = words.data();
  if (VkResult r = f_.vkCreateShaderModule(device_, &mi, nullptr, &k.module); r != VK_SUCCESS)
    return failed("vkCreateShaderModule", r);

  std::vector<VkDescriptorSetLayoutBinding> lb(static_cast<size_t>(bindings));
  for (int i = 0; i < bindings; ++i) {
    lb[size_t(i)] = VkDescriptorSetLayoutBinding{};
    lb[size_t(i)].binding = uint32_t(i);
    lb[size_t(i)].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    lb[size_t(i)].descriptorCount = 1;
    lb[size_t(i)].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = uint32_t(bindings);
  li.pBindings = lb.data();
  VkResult r = f_.vkCreateDescriptorSetLayout(device_, &li, nullptr, &k.setLayout);
  if (r != VK_SUCCESS) return release(), failed("vkCreateDescriptorSetLayout", r);
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &k.setLayout;
  r = f_.vkCreatePipelineLayout(device_, &pl, nullptr, &k.layout);
  if (r != VK_SUCCESS) return release(), failed("vkCreatePipelineLayout", r);
  VkComputePipelineCreateInfo pi{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  pi.stage = VkPipelineShaderStageCreateInfo{VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  pi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pi.stage.module = k.module;
  pi.stage.pName = entry.c_str();
  pi.layout = k.layout;
  r = f_.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &pi, nullptr, &k.pipeline);
  if (r != VK_SUCCESS) return release(), failed(("vkCreateComputePipelines for '" + entry + "'").c_str(), r);
  kernels_.push_back(k);
  return KernelId(kernels_.size() - 1);
}

Expected<ProgramId> VulkanBackend::record(const std::vector<DispatchCommand>& dispatches) {
  uint32_t descriptors = 0;
  for (const DispatchCommand& d : dispatches) {
    if (d.kernel < 0 || size_t(d.kernel) >= kernels_.size())
      return makeError(ErrorKind::Io, {}, "vulkan: no kernel " + std::to_string(d.kernel));
    if (int(d.bindings.size()) != kernels_[size_t(d.kernel)].bindings)
      return makeError(ErrorKind::Io, {}, "vulkan: a dispatch binds " + std::to_string(d.bindings.size()) +
                                              " buffers, its kernel takes " +
                                              std::to_string(kernels_[size_t(d.kernel)].bindings));
    for (const BufferRange& b : d.bindings) {
      if (auto s = checkRange(b.buffer, b.offset, roundUp(std::max<int64_t>(b.bytes, 4), 4)); !s) return s.error();
      if (b.offset % info_.bindingAlignment)
        return makeError(ErrorKind::Io, {}, "vulkan: binding offset " + std::to_string(b.offset) +
                                                " is not a multiple of " + std::to_string(info_.bindingAlignment));
    }
    descriptors += uint32_t(d.bindings.size());
  }

  Prog p;
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(descriptors, 1u)};
  VkDescriptorPoolCreateInfo pc{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pc.maxSets = std::max<uint32_t>(uint32_t(dispatches.size()), 1);
  pc.poolSizeCount = 1;
  pc.pPoolSizes = &size;
  if (VkResult r = f_.vkCreateDescriptorPool(device_, &pc, nullptr, &p.pool); r != VK_SUCCESS)
    return failed("vkCreateDescriptorPool", r);
  auto c = newCommands();
  if (!c) {
    f_.vkDestroyDescriptorPool(device_, p.pool, nullptr);
    return c.error();
  }
  p.commands = *c;
  programs_.push_back(p);  // owned from here on, released with the backend

  for (const DispatchCommand& d : dispatches) {
    const Kern& k = kernels_[size_t(d.kernel)];
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = p.pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &k.setLayout;
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (VkResult r = f_.vkAllocateDescriptorSets(device_, &ai, &set); r != VK_SUCCESS)
      return failed("vkAllocateDescriptorSets", r);
    std::vector<VkDescriptorBufferInfo> infos(d.bindings.size());
    std::vector<VkWriteDescriptorSet> writes(d.bindings.size());
    for (size_t i = 0; i < d.bindings.size(); ++i) {
      const BufferRange& b = d.bindings[i];
      infos[i] = {buffers_[size_t(b.buffer)].buffer, VkDeviceSize(b.offset),
                  VkDeviceSize(roundUp(std::max<int64_t>(b.bytes, 4), 4))};
      writes[i] = VkWriteDescriptorSet{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[i].dstSet = set;
      writes[i].dstBinding = uint32_t(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    f_.vkUpdateDescriptorSets(device_, uint32_t(writes.size()), writes.data(), 0, nullptr);
    f_.vkCmdBindPipeline(p.commands, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
    f_.vkCmdBindDescriptorSets(p.commands, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0, 1, &set, 0, nullptr);
    f_.vkCmdDispatch(p.commands, uint32_t(d.grid[0]), uint32_t(d.grid[1]), uint32_t(d.grid[2]));
    barrier(p.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }
  barrier(p.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
          VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  if (VkResult r = f_.vkEndCommandBuffer(p.commands); r != VK_SUCCESS) return failed("vkEndCommandBuffer", r);
  return ProgramId(programs_.size() - 1);
}

Status VulkanBackend::run(ProgramId program) {
  if (program < 0 || size_t(program) >= programs_.size())
    return makeError(ErrorKind::Io, {}, "vulkan: no program " + std::to_string(program));
  return submit(programs_[size_t(program)].commands);
}

}  // namespace

Expected<std::unique_ptr<Backend>> createVulkanBackend(const VulkanOptions& opts) {
  auto b = std::make_unique<VulkanBackend>();
  if (auto s = b->init(opts); !s) return s.error();
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace poot::rt

// The Vulkan backend. The loader is dlopen'ed and every entry point fetched
// through vkGetInstanceProcAddr / vkGetDeviceProcAddr (VK_NO_PROTOTYPES), so
// nothing links against Vulkan. Creation picks a physical device (an index or
// a name piece from the options or POOT_VULKAN_DEVICE, else discrete before
// integrated before anything), one queue family with compute, and enables
// what kernels may use where the device has it: 8- and 16-bit storage buffer
// access, shaderInt64, shaderInt16, shaderInt8 and shaderFloat16.
//
// Robust buffer access. Where the device has robustBufferAccess it is
// enabled, and with it robustBufferAccess2 where the device offers
// VK_EXT_robustness2 with that feature: a kernel that indexes past a range
// bound to it (a plan edited with care can make one) reads zeros or values
// from inside its own bindings and its stores there are dropped, instead of
// reaching other memory (robustBufferAccess alone allows any value from the
// buffer's memory; the 2 variant makes reads zero and bounds by the exact
// range). Nothing in Vulkan bounds a kernel's own arrays (workgroup,
// function and private memory), so every module's indices into them are
// clamped before the driver sees it (spirv_bounds.h). POOT_VULKAN_ROBUST=0
// leaves all three off, to measure what they cost; vulkanRobustness() says
// what was enabled.
//
// Kernel statistics. Where the device offers
// VK_KHR_pipeline_executable_properties with its pipelineExecutableInfo
// feature, both are enabled, every pipeline is created with
// VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR (which, the specification
// says, must not affect the compiled pipeline; it may cost creation time or
// the driver's pipeline caching) and kernelStats() lists each statistic of
// the pipeline's executables by the driver's own name, the NVIDIA driver's
// register count and shared memory also as the common figures. Elsewhere
// (lavapipe in Mesa 22) kernelStats() is a Capability "KernelStats" error
// saying what the driver lacks.
//
// Memory. Only memory types whose flags are among DEVICE_LOCAL, HOST_VISIBLE,
// HOST_COHERENT and HOST_CACHED are used (never protected, lazily allocated
// or AMD device-coherent ones). The rule, per device:
//  - Mapped, when some type is DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT and
//    its heap holds at least half of the largest DEVICE_LOCAL heap: lavapipe
//    and integrated GPUs (one heap, all of it host-visible) and discrete GPUs
//    with a resizable BAR (the H200's driver exposes its whole memory so).
//    Each buffer has its own allocation of that type, mapped for its
//    lifetime; upload is a memcpy, and so is download, except on a discrete
//    GPU whose type is not HOST_CACHED: uncached reads across PCIe crawl
//    (about 20 MB/s on an H200), so there downloads go through staging.
//  - Staging, everywhere else (a discrete GPU whose host-visible device
//    memory is the usual 256 MiB BAR, or none), and whenever
//    VulkanOptions::staging or POOT_VULKAN_STAGING (set, neither empty nor
//    "0") asks for it: each buffer has its own DEVICE_LOCAL allocation (types
//    the host cannot see first, in the driver's order; on out-of-memory the
//    next device-local type is tried), never mapped. Upload copies the bytes
//    into a host-visible coherent staging buffer (HOST_CACHED and not
//    device-local preferred) and vkCmdCopyBuffer's them into place; download
//    the reverse, with a transfer-write -> host-read barrier before the host
//    reads. Bytes move in chunks of at most 64 MiB (VulkanOptions::
//    stagingChunkBytes), through two slots of one staging buffer, each with
//    its own command buffer and fence, so the host fills or drains one chunk
//    while the device copies the other; the staging buffer is made on first
//    use, grown up to two chunks when a larger move needs it, and kept. Both
//    return once every copy has finished.
// Without any device-local type, buffers are mapped host-visible coherent
// memory (forcing staging then stages into it). Sizes round up to 256 bytes,
// so a 0-byte buffer and a binding rounded up to 4 bytes at a 256-aligned
// offset stay in bounds; out-of-memory is a MemoryBudget Capability error.
//
// A kernel is a shader module, a set layout of N storage buffers, a pipeline
// layout and a compute pipeline. A program owns a descriptor pool with one
// set per dispatch and one command buffer, recorded once by record() and
// submitted as it is by every run() (nothing in it depends on the data): a
// barrier from host and transfer writes, then each dispatch followed by a
// global shader-write -> shader-read/write barrier, then a barrier to host
// and transfer reads. Where the queue family takes timestamps, the program
// also owns a query pool of two, reset and written at the top of the command
// buffer and written again at its bottom; run() reads them for
// lastRunDeviceSeconds(). A profiled program (recordProfiled) also writes
// one at the bottom of the pipe after each dispatch, before its barrier:
// dispatch i's time is from timestamp i to i + 1. Running it submits with a fence and waits. Staging
// copies and device copies start with the same barrier from host, transfer
// and shader writes.
#define VK_NO_PROTOTYPES
#include "runtime/backends/vulkan.h"
#include "runtime/spirv_bounds.h"

#include <vulkan/vulkan.h>

#include <dlfcn.h>

#include <mutex>
#include <optional>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "runtime/backends/common.h"

namespace poot::rt {

namespace {

#define POOT_VK_INSTANCE_FNS(X)                                                                         \
  X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                                       \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures2)                                     \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice)  \
  X(vkGetDeviceProcAddr) X(vkEnumerateDeviceExtensionProperties)

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
  X(vkResetFences) X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkCmdResetQueryPool) X(vkCmdWriteTimestamp)     \
  X(vkGetQueryPoolResults)

// The entry points of VK_KHR_pipeline_executable_properties, loaded where it is enabled.
#define POOT_VK_STATISTICS_FNS(X) X(vkGetPipelineExecutablePropertiesKHR) X(vkGetPipelineExecutableStatisticsKHR)

#define POOT_VK_DECLARE(name) PFN_##name name = nullptr;

struct Fns {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PFN_vkCreateInstance vkCreateInstance = nullptr;
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion = nullptr;
  POOT_VK_INSTANCE_FNS(POOT_VK_DECLARE)
  POOT_VK_DEVICE_FNS(POOT_VK_DECLARE)
  POOT_VK_STATISTICS_FNS(POOT_VK_DECLARE)
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
  std::string out = nameSlug(name);
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
  // The command buffer's first and last, where the queue takes them; a
  // profiled program's also one after each dispatch (queries 1 .. n).
  VkQueryPool timestamps = VK_NULL_HANDLE;
  uint32_t queries = 0;
  bool profiled = false;
};

class VulkanBackend final : public Backend {
 public:
  ~VulkanBackend() override;

  Status init(const VulkanOptions& opts);

  const DeviceInfo& info() const override { return info_; }
  const std::string& robustness() const { return robustness_; }
  VulkanMemoryChoice memoryChoice() const { return {!mapped_, !mappedReads_, chunkBytes_, memorySummary_}; }
  Expected<BufferId> allocate(int64_t bytes) override;
  Status upload(BufferId buffer, int64_t offset, const void* data, int64_t bytes) override;
  Status download(BufferId buffer, int64_t offset, void* data, int64_t bytes) override;
  Status copy(BufferId src, BufferId dst, int64_t bytes) override;
  Expected<KernelId> createKernel(const std::vector<uint8_t>& blob, const std::string& entry, int64_t workgroupSize,
                                  int64_t workgroupMemory, int bindings, bool waitsForPrevious) override;
  Expected<ProgramId> record(const std::vector<DispatchCommand>& dispatches) override;
  Status run(ProgramId program) override;
  std::optional<double> lastRunDeviceSeconds() const override { return lastRun_; }
  Expected<ProgramId> recordProfiled(const std::vector<DispatchCommand>& dispatches) override;
  std::vector<double> lastRunDispatchSeconds() const override { return lastDispatches_; }
  Expected<KernelStats> kernelStats(KernelId kernel) override;
  Submission submission() const override { return Submission::Replay; }

 private:
  Status loadLoader();
  Status openLoader();
  Status pickDevice(const VulkanOptions& opts);
  Status createDevice();
  Expected<ProgramId> recordProgram(const std::vector<DispatchCommand>& dispatches, bool profiled);
  Status checkRange(BufferId buffer, int64_t offset, int64_t bytes) const;
  Expected<VkCommandBuffer> newCommands();
  Status submit(VkCommandBuffer commands);
  Status chooseMemory(const VulkanOptions& opts, const VkPhysicalDeviceMemoryProperties& mem, bool discrete);
  Status ensureStaging(int64_t bytes);
  Status stageSubmit(int slot, VkBuffer src, VkDeviceSize srcOffset, VkBuffer dst, VkDeviceSize dstOffset,
                     VkDeviceSize bytes, bool toHost);
  Status waitSlot(int slot);
  Status drainSlots(Status s);
  Status stagedUpload(const Buf& b, int64_t offset, const uint8_t* data, int64_t bytes);
  Status stagedDownload(const Buf& b, int64_t offset, uint8_t* data, int64_t bytes);
  void barrier(VkCommandBuffer c, VkPipelineStageFlags src, VkAccessFlags srcAccess, VkPipelineStageFlags dst,
               VkAccessFlags dstAccess);

  void* lib_ = nullptr;
  Fns f_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  // Memory (the header comment says how it is chosen): the types a buffer
  // may take, in order; whether buffers are mapped and downloads memcpy.
  std::vector<uint32_t> bufferTypes_;
  bool mapped_ = false;
  bool mappedReads_ = false;
  std::vector<uint32_t> stagingTypes_;
  int64_t chunkBytes_ = 0;
  std::string memorySummary_;
  // The staging buffer, made on first use: two slots of slotBytes_ each, and
  // per slot a command buffer, a fence and whether a copy is in flight.
  Buf stage_;
  int64_t slotBytes_ = 0;
  VkCommandBuffer slotCommands_[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};
  VkFence slotFences_[2] = {VK_NULL_HANDLE, VK_NULL_HANDLE};
  bool slotBusy_[2] = {false, false};
  VkCommandPool commandPool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  uint32_t apiVersion_ = 0;
  // Nanoseconds per timestamp tick, 0 when the queue family takes no
  // timestamps; the bits a timestamp holds.
  double timestampNs_ = 0;
  uint64_t timestampMask_ = 0;
  std::optional<double> lastRun_;
  std::vector<double> lastDispatches_;
  // Why kernelStats() cannot say, after "its driver": empty where pipelines
  // capture statistics.
  std::string noStatistics_;
  // Features the device has, enabled at creation.
  VkPhysicalDeviceFeatures2 features_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features features11_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features features12_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR featuresExecutable_{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceRobustness2FeaturesEXT featuresRobust2_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ROBUSTNESS_2_FEATURES_EXT};
  bool hasRobustness2_ = false;  // the device offers VK_EXT_robustness2
  bool boundIndices_ = true;     // kernels' local indices bounded (spirv_bounds.h)
  std::string robustness_;       // what createDevice enabled, for vulkanRobustness()
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
      if (p.timestamps) f_.vkDestroyQueryPool(device_, p.timestamps, nullptr);
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
    if (stage_.buffer) f_.vkDestroyBuffer(device_, stage_.buffer, nullptr);
    if (stage_.memory) f_.vkFreeMemory(device_, stage_.memory, nullptr);
    for (int i = 0; i < 2; ++i) {
      if (slotCommands_[i]) f_.vkFreeCommandBuffers(device_, commandPool_, 1, &slotCommands_[i]);
      if (slotFences_[i]) f_.vkDestroyFence(device_, slotFences_[i], nullptr);
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

  // Core Vulkan has no count of compute units; NVIDIA's and AMD's drivers
  // give one through their own extension, asked for only where offered.
  uint32_t extensionCount = 0;
  f_.vkEnumerateDeviceExtensionProperties(physical_, nullptr, &extensionCount, nullptr);
  std::vector<VkExtensionProperties> extensions(extensionCount);
  if (extensionCount) f_.vkEnumerateDeviceExtensionProperties(physical_, nullptr, &extensionCount, extensions.data());
  auto offered = [&](const char* name) {
    return std::any_of(extensions.begin(), extensions.end(),
                       [&](const VkExtensionProperties& e) { return std::strcmp(e.extensionName, name) == 0; });
  };
  VkPhysicalDeviceVulkan11Properties p11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV nv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  VkPhysicalDeviceShaderCorePropertiesAMD amd{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
  bool hasNv = offered(VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  bool hasAmd = offered(VK_AMD_SHADER_CORE_PROPERTIES_EXTENSION_NAME);
  hasRobustness2_ = offered(VK_EXT_ROBUSTNESS_2_EXTENSION_NAME);
  if (!offered(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME))
    noStatistics_ = "does not offer " VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &p11;
  if (hasNv) nv.pNext = std::exchange(p2.pNext, &nv);
  if (hasAmd) amd.pNext = std::exchange(p2.pNext, &amd);
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
  // A kernel's bindings are storage buffers of one set, in one stage.
  info_.maxBindings = std::min({int64_t(l.maxPerStageDescriptorStorageBuffers), int64_t(l.maxDescriptorSetStorageBuffers),
                                int64_t(l.maxPerStageResources)});
  timestampNs_ = l.timestampPeriod;  // 0 again in createDevice when the queue family takes none
  info_.computeUnits = vulkanComputeUnits(hasNv ? &nv : nullptr, hasAmd ? &amd : nullptr);

  VkPhysicalDeviceMemoryProperties mem;
  f_.vkGetPhysicalDeviceMemoryProperties(physical_, &mem);
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info_.memoryBytes = std::max<int64_t>(info_.memoryBytes, int64_t(mem.memoryHeaps[h].size));
  info_.maxBindingBytes = std::min<int64_t>(l.maxStorageBufferRange, info_.memoryBytes);

  return chooseMemory(opts, mem, p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU);
}

// "143771 MiB" (rounded down), or "1024 bytes" below 1 MiB.
std::string mib(VkDeviceSize bytes) {
  return bytes < (1u << 20) ? std::to_string(bytes) + " bytes" : std::to_string(bytes >> 20) + " MiB";
}

// The rule in the header comment.
Status VulkanBackend::chooseMemory(const VulkanOptions& opts, const VkPhysicalDeviceMemoryProperties& mem,
                                   bool discrete) {
  const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  const VkMemoryPropertyFlags host = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags cached = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  VkDeviceSize largestLocal = 0;
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      largestLocal = std::max(largestLocal, mem.memoryHeaps[h].size);
  auto flags = [&](uint32_t t) { return mem.memoryTypes[t].propertyFlags; };
  auto heap = [&](uint32_t t) { return mem.memoryHeaps[mem.memoryTypes[t].heapIndex].size; };
  std::vector<uint32_t> mappable, hidden, visible, staging[3];
  for (uint32_t t = 0; t < mem.memoryTypeCount; ++t) {
    VkMemoryPropertyFlags f = flags(t);
    if (f & ~(local | host | cached)) continue;  // protected, lazily allocated, AMD device-coherent
    if ((f & (local | host)) == (local | host) && 2 * heap(t) >= largestLocal) mappable.push_back(t);
    if ((f & local) && !(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) hidden.push_back(t);
    if ((f & local) && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) visible.push_back(t);
    if ((f & host) == host) staging[(f & local) ? 2 : (f & cached) ? 0 : 1].push_back(t);
  }
  std::vector<uint32_t> hostTypes;
  for (auto& v : staging) hostTypes.insert(hostTypes.end(), v.begin(), v.end());
  if (hostTypes.empty()) return unavailable(info_.name + " has no host-visible coherent memory");
  stagingTypes_ = hostTypes;
  const uint32_t stagingType = hostTypes[0];

  bool force = opts.staging;
  if (!force)
    if (const char* env = std::getenv("POOT_VULKAN_STAGING")) force = *env && std::string(env) != "0";
  chunkBytes_ = opts.stagingChunkBytes > 0 ? roundUp(opts.stagingChunkBytes, 256) : int64_t(64) << 20;

  auto describe = [&](uint32_t t) {
    VkMemoryPropertyFlags f = flags(t);
    std::string s = "type " + std::to_string(t) + " (";
    s += (f & local) ? "device-local" : "host";
    if (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) s += ", host-visible";
    if (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) s += ", cached";
    return s + ", heap " + std::to_string(mem.memoryTypes[t].heapIndex) + " of " + mib(heap(t)) + ")";
  };
  if (!mappable.empty() && !force) {
    mapped_ = true;
    bufferTypes_ = mappable;
    mappedReads_ = !discrete || (flags(mappable[0]) & cached);
    memorySummary_ = "mapped: buffers in " + describe(mappable[0]);
    if (!mappedReads_) memorySummary_ += ", downloads staged through " + describe(stagingType);
  } else if (!hidden.empty() || !visible.empty()) {
    bufferTypes_ = hidden;
    bufferTypes_.insert(bufferTypes_.end(), visible.begin(), visible.end());
    memorySummary_ = "staging: buffers in " + describe(bufferTypes_[0]) + ", staged through " + describe(stagingType);
  } else if (!force) {  // no device-local memory at all
    mapped_ = mappedReads_ = true;
    bufferTypes_ = hostTypes;
    memorySummary_ = "mapped: buffers in " + describe(hostTypes[0]) + ", the device has no device-local memory";
  } else {
    bufferTypes_ = hostTypes;
    memorySummary_ = "staging: buffers in " + describe(hostTypes[0]) + ", staged through " + describe(stagingType);
  }
  if (!mapped_ || !mappedReads_) memorySummary_ += ", " + mib(VkDeviceSize(chunkBytes_)) + " chunks";
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
  uint32_t bits = families[family_].timestampValidBits;
  if (bits == 0) timestampNs_ = 0;
  timestampMask_ = bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;

  // Query, then enable exactly what the device has among what kernels use.
  VkPhysicalDeviceVulkan11Features has11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features has12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR hasExecutable{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceFeatures2 has{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  has.pNext = &has11;
  has11.pNext = &has12;
  if (noStatistics_.empty()) has12.pNext = &hasExecutable;
  VkPhysicalDeviceRobustness2FeaturesEXT hasRobust2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ROBUSTNESS_2_FEATURES_EXT};
  if (hasRobustness2_) hasRobust2.pNext = std::exchange(has.pNext, &hasRobust2);
  f_.vkGetPhysicalDeviceFeatures2(physical_, &has);
  features11_.storageBuffer16BitAccess = has11.storageBuffer16BitAccess;
  features12_.storageBuffer8BitAccess = has12.storageBuffer8BitAccess;
  features12_.shaderFloat16 = has12.shaderFloat16;
  features12_.shaderInt8 = has12.shaderInt8;
  features_.features.shaderInt64 = has.features.shaderInt64;
  features_.features.shaderInt16 = has.features.shaderInt16;
  features_.pNext = &features11_;
  features11_.pNext = &features12_;
  // Kernel statistics, where the device has them (the file comment).
  if (noStatistics_.empty() && !hasExecutable.pipelineExecutableInfo)
    noStatistics_ = "offers " VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME
                    " without its pipelineExecutableInfo feature";
  std::vector<const char*> extensions;
  if (noStatistics_.empty()) {
    extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    featuresExecutable_.pipelineExecutableInfo = VK_TRUE;
    features12_.pNext = &featuresExecutable_;
  }
  // Robust buffer access (the file comment): a kernel's access outside the
  // ranges bound to it cannot reach other memory.
  bool robust = true;
  if (const char* env = std::getenv("POOT_VULKAN_ROBUST")) robust = std::string(env) != "0";
  if (robust && has.features.robustBufferAccess) {
    features_.features.robustBufferAccess = VK_TRUE;
    robustness_ = "robustBufferAccess";
    if (hasRobustness2_ && hasRobust2.robustBufferAccess2) {
      extensions.push_back(VK_EXT_ROBUSTNESS_2_EXTENSION_NAME);
      featuresRobust2_.robustBufferAccess2 = VK_TRUE;
      featuresRobust2_.pNext = std::exchange(features_.pNext, &featuresRobust2_);
      robustness_ += ", robustBufferAccess2";
    }
  } else {
    robustness_ = robust ? "no robustBufferAccess on the device" : "none: POOT_VULKAN_ROBUST=0";
  }
  boundIndices_ = robust;
  if (robust) robustness_ += ", local indices bounded";
  // Our SPIR-V writer lowers no two-byte select; bf16 is stored as 16-bit
  // integers (widened by a shift, narrowed with rounding), so it needs only
  // 16-bit storage access.
  info_.f16.storage = has11.storageBuffer16BitAccess;
  info_.bf16.storage = has11.storageBuffer16BitAccess;
  info_.f16.arith = has11.storageBuffer16BitAccess && has12.shaderFloat16;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo q{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  q.queueFamilyIndex = family_;
  q.queueCount = 1;
  q.pQueuePriorities = &priority;
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.pNext = &features_;
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &q;
  ci.enabledExtensionCount = uint32_t(extensions.size());
  ci.ppEnabledExtensionNames = extensions.data();
  if (VkResult r = f_.vkCreateDevice(physical_, &ci, nullptr, &device_); r != VK_SUCCESS) {
    device_ = VK_NULL_HANDLE;
    return failed("vkCreateDevice", r);
  }
  // Destroying needs the device functions: load them before anything can fail.
#define POOT_VK_LOAD_DEVICE(name) f_.name = reinterpret_cast<PFN_##name>(f_.vkGetDeviceProcAddr(device_, #name));
  POOT_VK_DEVICE_FNS(POOT_VK_LOAD_DEVICE)
  if (noStatistics_.empty()) {
    POOT_VK_STATISTICS_FNS(POOT_VK_LOAD_DEVICE)
  }
#undef POOT_VK_LOAD_DEVICE
#define POOT_VK_CHECK_DEVICE(name) \
  if (!f_.name) return unavailable("the vulkan driver has no " #name);
  POOT_VK_DEVICE_FNS(POOT_VK_CHECK_DEVICE)
#undef POOT_VK_CHECK_DEVICE
#define POOT_VK_CHECK_STATISTICS(name) \
  if (noStatistics_.empty() && !f_.name) noStatistics_ = "has no " #name;
  POOT_VK_STATISTICS_FNS(POOT_VK_CHECK_STATISTICS)
#undef POOT_VK_CHECK_STATISTICS
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

Error outOfMemory(const std::string& what, int64_t bytes, const std::string& device) {
  Error e = makeError(ErrorKind::Capability, {}, "cannot allocate " + what + " of " + std::to_string(bytes) +
                                                     " bytes on " + device);
  e.capability = "MemoryBudget";
  return e;
}

bool isOutOfMemory(VkResult r) { return r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY; }

// A buffer of `bytes` (already rounded) in the first of `types` that it may
// take and that has room, mapped when `map`; on failure nothing is left.
// `what` names it in the out-of-memory error.
Expected<Buf> makeBuffer(const Fns& f, VkDevice device, const std::vector<uint32_t>& types, int64_t bytes,
                         VkBufferUsageFlags usage, bool map, const std::string& what, int64_t asked,
                         const std::string& deviceName) {
  Buf b;
  b.bytes = bytes;
  VkBufferCreateInfo ci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  ci.size = VkDeviceSize(b.bytes);
  ci.usage = usage;
  ci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  if (VkResult r = f.vkCreateBuffer(device, &ci, nullptr, &b.buffer); r != VK_SUCCESS)
    return isOutOfMemory(r) ? outOfMemory(what, asked, deviceName) : failed("vkCreateBuffer", r);
  VkMemoryRequirements req;
  f.vkGetBufferMemoryRequirements(device, b.buffer, &req);
  VkResult r = VK_ERROR_UNKNOWN;
  bool allowed = false;
  for (uint32_t t : types) {
    if (!(req.memoryTypeBits & (1u << t))) continue;
    allowed = true;
    VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = t;
    r = f.vkAllocateMemory(device, &ai, nullptr, &b.memory);
    if (r == VK_SUCCESS || !isOutOfMemory(r)) break;
    b.memory = VK_NULL_HANDLE;  // out of room there: the next type
  }
  if (!allowed) {
    f.vkDestroyBuffer(device, b.buffer, nullptr);
    return unavailable("no memory type chosen on " + deviceName + " can hold " + what);
  }
  const char* call = "vkAllocateMemory";
  if (r == VK_SUCCESS) call = "vkBindBufferMemory", r = f.vkBindBufferMemory(device, b.buffer, b.memory, 0);
  void* mapped = nullptr;
  if (r == VK_SUCCESS && map) call = "vkMapMemory", r = f.vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &mapped);
  if (r != VK_SUCCESS) {
    f.vkDestroyBuffer(device, b.buffer, nullptr);
    if (b.memory) f.vkFreeMemory(device, b.memory, nullptr);
    if (isOutOfMemory(r)) return outOfMemory(what, asked, deviceName);
    return failed(call, r);
  }
  b.mapped = static_cast<uint8_t*>(mapped);
  return b;
}

Expected<BufferId> VulkanBackend::allocate(int64_t bytes) {
  auto b = makeBuffer(f_, device_, bufferTypes_, roundUp(std::max<int64_t>(bytes, 1), 256),
                      VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                          VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                      mapped_, "a buffer", bytes, info_.name);
  if (!b) return b.error();
  buffers_.push_back(*b);
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
  if (!bytes) return ok();
  const Buf& b = buffers_[size_t(buffer)];
  if (b.mapped) {
    std::memcpy(b.mapped + offset, data, size_t(bytes));
    return ok();
  }
  return stagedUpload(b, offset, static_cast<const uint8_t*>(data), bytes);
}

Status VulkanBackend::download(BufferId buffer, int64_t offset, void* data, int64_t bytes) {
  if (auto s = checkRange(buffer, offset, bytes); !s) return s;
  if (!bytes) return ok();
  const Buf& b = buffers_[size_t(buffer)];
  if (b.mapped && mappedReads_) {
    std::memcpy(data, b.mapped + offset, size_t(bytes));
    return ok();
  }
  return stagedDownload(b, offset, static_cast<uint8_t*>(data), bytes);
}

// The staging buffer, with room for two slots of min(bytes, chunk) each
// (rounded up to 256, and at least 1 MiB unless the chunk is smaller). Grows
// by replacing the buffer: no slot is busy between moves.
Status VulkanBackend::ensureStaging(int64_t bytes) {
  int64_t want = std::min(chunkBytes_, roundUp(std::max<int64_t>(bytes, int64_t(1) << 20), 256));
  if (slotBytes_ >= want) return ok();
  int64_t slot = want;
  for (int i = 0; i < 2; ++i) {
    if (!slotFences_[i]) {
      VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
      if (VkResult r = f_.vkCreateFence(device_, &fi, nullptr, &slotFences_[i]); r != VK_SUCCESS) {
        slotFences_[i] = VK_NULL_HANDLE;
        return failed("vkCreateFence", r);
      }
    }
    if (!slotCommands_[i]) {
      VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
      ai.commandPool = commandPool_;
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      if (VkResult r = f_.vkAllocateCommandBuffers(device_, &ai, &slotCommands_[i]); r != VK_SUCCESS) {
        slotCommands_[i] = VK_NULL_HANDLE;
        return failed("vkAllocateCommandBuffers", r);
      }
    }
  }
  auto b = makeBuffer(f_, device_, stagingTypes_, 2 * slot,
                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, true, "a staging buffer",
                      2 * slot, info_.name);
  if (!b) return b.error();
  if (stage_.buffer) f_.vkDestroyBuffer(device_, stage_.buffer, nullptr);
  if (stage_.memory) f_.vkFreeMemory(device_, stage_.memory, nullptr);
  stage_ = *b;
  slotBytes_ = slot;
  return ok();
}

// Records and submits one copy on a slot's command buffer and fence, without
// waiting. It starts with the barrier every command buffer here starts with
// (so the copy follows earlier host, transfer and shader writes, and earlier
// reads of what it overwrites); a copy towards the host ends with a barrier
// that makes its writes visible to host reads.
Status VulkanBackend::stageSubmit(int slot, VkBuffer src, VkDeviceSize srcOffset, VkBuffer dst,
                                  VkDeviceSize dstOffset, VkDeviceSize bytes, bool toHost) {
  VkCommandBuffer c = slotCommands_[slot];
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  if (VkResult r = f_.vkBeginCommandBuffer(c, &bi); r != VK_SUCCESS) return failed("vkBeginCommandBuffer", r);
  barrier(c, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
          VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  VkBufferCopy region{srcOffset, dstOffset, bytes};
  f_.vkCmdCopyBuffer(c, src, dst, 1, &region);
  if (toHost)
    barrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
            VK_ACCESS_HOST_READ_BIT);
  if (VkResult r = f_.vkEndCommandBuffer(c); r != VK_SUCCESS) return failed("vkEndCommandBuffer", r);
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &c;
  if (VkResult r = f_.vkQueueSubmit(queue_, 1, &si, slotFences_[slot]); r != VK_SUCCESS)
    return failed("vkQueueSubmit", r);
  slotBusy_[slot] = true;
  return ok();
}

Status VulkanBackend::waitSlot(int slot) {
  if (!slotBusy_[slot]) return ok();
  slotBusy_[slot] = false;
  VkResult r = f_.vkWaitForFences(device_, 1, &slotFences_[slot], VK_TRUE, UINT64_MAX);
  f_.vkResetFences(device_, 1, &slotFences_[slot]);
  return r == VK_SUCCESS ? ok() : Status(failed("vkWaitForFences", r));
}

// Waits for both slots, so nothing is in flight when a move returns; the
// first failure wins.
Status VulkanBackend::drainSlots(Status s) {
  for (int i = 0; i < 2; ++i) {
    Status w = waitSlot(i);
    if (s && !w) s = w;
  }
  return s;
}

// Chunk i goes through slot i % 2: the host copies chunk i into its slot
// while the device still copies chunk i - 1 out of the other.
Status VulkanBackend::stagedUpload(const Buf& b, int64_t offset, const uint8_t* data, int64_t bytes) {
  if (auto s = ensureStaging(bytes); !s) return s;
  Status s = ok();
  for (int64_t done = 0, i = 0; done < bytes && s; ++i) {
    int slot = int(i % 2);
    int64_t n = std::min(slotBytes_, bytes - done);
    s = waitSlot(slot);
    if (!s) break;
    std::memcpy(stage_.mapped + slot * slotBytes_, data + done, size_t(n));
    s = stageSubmit(slot, stage_.buffer, VkDeviceSize(slot * slotBytes_), b.buffer, VkDeviceSize(offset + done),
                    VkDeviceSize(n), false);
    done += n;
  }
  return drainSlots(s);
}

// The device copies chunk i + 1 into one slot while the host copies chunk i
// out of the other.
Status VulkanBackend::stagedDownload(const Buf& b, int64_t offset, uint8_t* data, int64_t bytes) {
  if (auto s = ensureStaging(bytes); !s) return s;
  int64_t chunks = (bytes + slotBytes_ - 1) / slotBytes_;
  auto start = [&](int64_t i) {
    int64_t at = i * slotBytes_;
    return stageSubmit(int(i % 2), b.buffer, VkDeviceSize(offset + at), stage_.buffer,
                       VkDeviceSize((i % 2) * slotBytes_), VkDeviceSize(std::min(slotBytes_, bytes - at)), true);
  };
  Status s = start(0);
  for (int64_t i = 0; i < chunks && s; ++i) {
    if (i + 1 < chunks) s = start(i + 1);
    if (!s) break;
    s = waitSlot(int(i % 2));
    if (!s) break;
    int64_t at = i * slotBytes_;
    std::memcpy(data + at, stage_.mapped + (i % 2) * slotBytes_, size_t(std::min(slotBytes_, bytes - at)));
  }
  return drainSlots(s);
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
                                               int bindings, bool /*waitsForPrevious: a barrier orders dispatches*/) {
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
  if (boundIndices_) {
    auto bounded = boundLocalIndices(words);
    if (!bounded) return makeError(ErrorKind::Format, {}, "kernel '" + entry + "': " + bounded.error().message);
    words = bounded.take();
  }
  mi.codeSize = 4 * words.size();
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
  if (noStatistics_.empty()) pi.flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  r = f_.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &pi, nullptr, &k.pipeline);
  if (r != VK_SUCCESS) return release(), failed(("vkCreateComputePipelines for '" + entry + "'").c_str(), r);
  kernels_.push_back(k);
  return KernelId(kernels_.size() - 1);
}

// A statistic's value as text.
std::string statisticValue(const VkPipelineExecutableStatisticKHR& s) {
  switch (s.format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: return s.value.b32 ? "true" : "false";
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: return std::to_string(s.value.i64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: return std::to_string(s.value.u64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: {
      char text[32];
      std::snprintf(text, sizeof text, "%g", s.value.f64);
      return text;
    }
    default: return "(format " + std::to_string(int(s.format)) + ")";
  }
}

// Every statistic of every executable of the kernel's pipeline (a compute
// pipeline has one; were there several, each name would start with its
// executable's). Two of the NVIDIA driver's are the common figures too:
// "Register Count", a thread's registers, and "Shared Memory Size", the
// workgroup's shared memory (docs/runtime.md, "poot kernels", says how they
// were checked against CUDA's; its "Local Memory Size" is not a thread's
// local bytes, so it stays a statistic only).
Expected<KernelStats> VulkanBackend::kernelStats(KernelId kernel) {
  if (kernel < 0 || size_t(kernel) >= kernels_.size())
    return makeError(ErrorKind::Io, {}, "vulkan: no kernel " + std::to_string(kernel));
  if (!noStatistics_.empty()) {
    Error e = makeError(ErrorKind::Capability, {},
                        "vulkan device '" + info_.name + "' does not report kernel statistics: its driver (" +
                            info_.driver + ") " + noStatistics_);
    e.capability = "KernelStats";
    return e;
  }
  VkPipelineInfoKHR pipeline{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pipeline.pipeline = kernels_[size_t(kernel)].pipeline;
  uint32_t n = 0;
  if (VkResult r = f_.vkGetPipelineExecutablePropertiesKHR(device_, &pipeline, &n, nullptr); r != VK_SUCCESS)
    return failed("vkGetPipelineExecutablePropertiesKHR", r);
  std::vector<VkPipelineExecutablePropertiesKHR> executables(
      n, VkPipelineExecutablePropertiesKHR{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR});
  if (VkResult r = f_.vkGetPipelineExecutablePropertiesKHR(device_, &pipeline, &n, executables.data());
      r != VK_SUCCESS)
    return failed("vkGetPipelineExecutablePropertiesKHR", r);
  KernelStats stats;
  for (uint32_t i = 0; i < n; ++i) {
    VkPipelineExecutableInfoKHR executable{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    executable.pipeline = pipeline.pipeline;
    executable.executableIndex = i;
    uint32_t m = 0;
    if (VkResult r = f_.vkGetPipelineExecutableStatisticsKHR(device_, &executable, &m, nullptr); r != VK_SUCCESS)
      return failed("vkGetPipelineExecutableStatisticsKHR", r);
    std::vector<VkPipelineExecutableStatisticKHR> list(
        m, VkPipelineExecutableStatisticKHR{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    if (VkResult r = f_.vkGetPipelineExecutableStatisticsKHR(device_, &executable, &m, list.data()); r != VK_SUCCESS)
      return failed("vkGetPipelineExecutableStatisticsKHR", r);
    std::string prefix = n > 1 ? std::string(executables[i].name) + ": " : "";
    for (const VkPipelineExecutableStatisticKHR& s : list) {
      stats.driver.emplace_back(prefix + s.name, statisticValue(s));
      const std::string& name = stats.driver.back().first;
      bool integer = s.format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR ||
                     s.format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR;
      int64_t value =
          s.format == VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR ? s.value.i64 : int64_t(s.value.u64);
      if (integer && name == "Register Count") stats.registers = value;
      if (integer && name == "Shared Memory Size") stats.workgroupMemoryBytes = value;
    }
  }
  return stats;
}

Expected<ProgramId> VulkanBackend::record(const std::vector<DispatchCommand>& dispatches) {
  return recordProgram(dispatches, false);
}

Expected<ProgramId> VulkanBackend::recordProfiled(const std::vector<DispatchCommand>& dispatches) {
  if (timestampNs_ == 0) {
    Error e = makeError(ErrorKind::Capability, {}, "vulkan: device '" + info_.name + "' takes no timestamps on its compute queue");
    e.capability = "Profile";
    return e;
  }
  return recordProgram(dispatches, true);
}

Expected<ProgramId> VulkanBackend::recordProgram(const std::vector<DispatchCommand>& dispatches, bool profiled) {
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
  auto release = [&](Error e) {
    if (p.timestamps) f_.vkDestroyQueryPool(device_, p.timestamps, nullptr);
    f_.vkDestroyDescriptorPool(device_, p.pool, nullptr);
    return e;
  };
  p.profiled = profiled;
  if (timestampNs_ > 0) {
    p.queries = profiled ? uint32_t(dispatches.size()) + 2 : 2;
    VkQueryPoolCreateInfo qc{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qc.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qc.queryCount = p.queries;
    if (VkResult r = f_.vkCreateQueryPool(device_, &qc, nullptr, &p.timestamps); r != VK_SUCCESS)
      return release(failed("vkCreateQueryPool", r));
  }
  auto c = newCommands();
  if (!c) return release(c.error());
  p.commands = *c;
  programs_.push_back(p);  // owned from here on, released with the backend
  if (p.timestamps) {
    f_.vkCmdResetQueryPool(p.commands, p.timestamps, 0, p.queries);
    f_.vkCmdWriteTimestamp(p.commands, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, p.timestamps, 0);
  }

  uint32_t query = 1;
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
    // The bottom of the pipe: taken once the dispatch (and all before it) has ended.
    if (profiled) f_.vkCmdWriteTimestamp(p.commands, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p.timestamps, query++);
    barrier(p.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }
  barrier(p.commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
          VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  if (p.timestamps) f_.vkCmdWriteTimestamp(p.commands, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, p.timestamps, p.queries - 1);
  if (VkResult r = f_.vkEndCommandBuffer(p.commands); r != VK_SUCCESS) return failed("vkEndCommandBuffer", r);
  return ProgramId(programs_.size() - 1);
}

Status VulkanBackend::run(ProgramId program) {
  if (program < 0 || size_t(program) >= programs_.size())
    return makeError(ErrorKind::Io, {}, "vulkan: no program " + std::to_string(program));
  lastRun_.reset();
  lastDispatches_.clear();
  const Prog& p = programs_[size_t(program)];
  if (auto s = submit(p.commands); !s) return s;
  if (!p.timestamps) return ok();
  std::vector<uint64_t> ticks(p.queries);
  if (VkResult r = f_.vkGetQueryPoolResults(device_, p.timestamps, 0, p.queries, ticks.size() * sizeof ticks[0],
                                            ticks.data(), sizeof ticks[0], VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
      r != VK_SUCCESS)
    return failed("vkGetQueryPoolResults", r);
  auto seconds = [&](size_t from, size_t to) {
    return double((ticks[to] - ticks[from]) & timestampMask_) * timestampNs_ * 1e-9;
  };
  lastRun_ = seconds(0, p.queries - 1);
  if (p.profiled)
    for (size_t i = 1; i + 1 < p.queries; ++i) lastDispatches_.push_back(seconds(i - 1, i));
  return ok();
}

}  // namespace

int64_t vulkanComputeUnits(const VkPhysicalDeviceShaderSMBuiltinsPropertiesNV* nv,
                           const VkPhysicalDeviceShaderCorePropertiesAMD* amd) {
  if (nv && nv->shaderSMCount) return nv->shaderSMCount;
  if (amd)
    return int64_t(amd->computeUnitsPerShaderArray) * amd->shaderArraysPerEngineCount * amd->shaderEngineCount;
  return 0;
}

VulkanMemoryChoice vulkanMemoryChoice(const Backend& backend) {
  if (auto* v = dynamic_cast<const VulkanBackend*>(&backend)) return v->memoryChoice();
  return {};
}

std::string vulkanRobustness(const Backend& backend) {
  if (auto* v = dynamic_cast<const VulkanBackend*>(&backend)) return v->robustness();
  return "";
}

Expected<std::unique_ptr<Backend>> createVulkanBackend(const VulkanOptions& opts) {
  auto b = std::make_unique<VulkanBackend>();
  if (auto s = b->init(opts); !s) return s.error();
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace poot::rt

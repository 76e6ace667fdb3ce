// vkstream: streaming bandwidth of Vulkan compute kernels under different ways
// of allocating and binding their buffers, timed with GPU timestamps. It is
// independent of poot; NOTES.md says why it exists and how to read its table.
//
// Every configuration allocates its buffers afresh, fills the inputs with a
// known pattern and the outputs with NaN (on the device, transfer commands
// only), records one command buffer (timestamp at the top, dispatches, a
// timestamp at the bottom) and submits it warmup + runs times, each submit
// waited on its own. Then it reads back sampled output elements through a
// small host-visible staging buffer and checks them, and prints one TSV row.
// A configuration the device cannot hold (out of memory, a range past the
// device's limits) prints a row that says so instead.
//
// A configuration may also do one or more things the way poot's Vulkan
// backend (lib/runtime/backends/vulkan.cpp) does them instead (struct
// Variant): inputs mapped and written by the host before every run, the
// device and pipelines made with poot's features and flags, poot's SPIR-V
// for the add kernel, poot's command buffer. The poot test runs them one at
// a time and all together; the other tests take them from the flags.
#include <vulkan/vulkan.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shaders.h"  // copy_spv, add_spv: xxd -i of the glslangValidator output

namespace {

constexpr VkDeviceSize kMiB = VkDeviceSize(1) << 20;
constexpr VkDeviceSize k2MiB = 2 * kMiB;
// The input pattern repeats with a prime period of floats, so an element read
// from the wrong index (off by a power of two, another buffer) shows.
constexpr uint32_t kPeriod = 1048573;
constexpr VkDeviceSize kTileBytes = VkDeviceSize(kPeriod) * 4;
constexpr uint32_t kSamples = 64;       // checked elements per output buffer
constexpr uint32_t kReadbackFloats = 1024;

// A configuration that cannot run here; its row says why.
struct Skip {
  std::string why;
};

void check(VkResult r, const char* what) {
  if (r == VK_SUCCESS) return;
  if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
    throw Skip{std::string("out of memory in ") + what};
  throw std::runtime_error(std::string(what) + " failed: VkResult " + std::to_string(int(r)));
}

VkDeviceSize roundUp(VkDeviceSize v, VkDeviceSize to) { return (v + to - 1) / to * to; }

float pattern(uint64_t k) { return float((uint32_t(k % kPeriod) * 2654435761u) >> 12); }  // exact, < 2^20

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    size_t comma = s.find(',', at);
    if (comma == std::string::npos) comma = s.size();
    if (comma > at) out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

std::string flagNames(VkMemoryPropertyFlags f) {
  static const std::pair<VkMemoryPropertyFlags, const char*> names[] = {
      {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "DL"},      {VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, "HV"},
      {VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, "HC"},     {VK_MEMORY_PROPERTY_HOST_CACHED_BIT, "HCa"},
      {VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT, "LAZY"}, {VK_MEMORY_PROPERTY_PROTECTED_BIT, "PROT"}};
  std::string s;
  for (auto& [bit, name] : names)
    if (f & bit) s += (s.empty() ? "" : "|") + std::string(name);
  if (f & ~VkMemoryPropertyFlags(0x3f)) s += (s.empty() ? "" : "|") + std::string("other");
  return s.empty() ? "0" : s;
}

// How a configuration departs from vkstream's own way towards poot's backend.
struct Variant {
  bool mapUpload = false;   // buffers mapped for their lifetime, inputs memcpy'd from host memory before every run
  bool pootDevice = false;  // the device and its pipelines made with poot's features, extension and flags
  bool spv = false;         // the add kernel from the --spv module instead of the built-in one
  bool pootCmd = false;     // poot's command buffer instead of vkstream's
  double idleMs = 0;        // the host sleeps this long before every run
  std::string name() const {
    std::string s;
    auto add = [&](bool on, const char* what) {
      if (on) s += (s.empty() ? "" : "+") + std::string(what);
    };
    if (mapUpload && pootDevice && spv && pootCmd) {
      s = "as-poot";
    } else {
      add(mapUpload, "map-upload"), add(pootDevice, "poot-device"), add(spv, "spv"), add(pootCmd, "poot-cmd");
    }
    if (idleMs > 0) {
      char idle[48];
      std::snprintf(idle, sizeof idle, "idle%.0fms", idleMs);
      add(true, idle);
    }
    return s.empty() ? "base" : s;
  }
};

struct Options {
  std::vector<std::string> tests = {"size", "range", "robust", "footprint", "chain"};
  std::vector<std::string> kernels = {"copy", "add"};
  std::vector<uint64_t> sizes = {64, 128, 256, 512, 1024, 2048};  // MiB per buffer
  bool sizesGiven = false;
  uint64_t maxMiB = 0;                                               // 0: no cap
  std::vector<std::string> allocs = {"plain", "dedicated", "pool", "round2m"};
  std::vector<uint32_t> types;  // empty: every device-local type buffers may use
  std::vector<int> extraK = {0, 2, 8};
  uint64_t extraMiB = 1024, smallMiB = 128;
  int runs = 20, warmup = 3;
  uint32_t wgs = 0;  // 0: one thread per element, else a grid-stride loop over this many workgroups
  bool robust = false;
  int device = -1;
  Variant variant;  // for every test but poot
  std::string spvPath, spvEntry;
};

enum class Alloc { Plain, Dedicated, Pool, Round2M };
const char* allocName(Alloc a) {
  switch (a) {
    case Alloc::Plain: return "plain";
    case Alloc::Dedicated: return "dedicated";
    case Alloc::Pool: return "pool";
    case Alloc::Round2M: return "round2m";
  }
  return "?";
}
Alloc parseAlloc(const std::string& s) {
  for (Alloc a : {Alloc::Plain, Alloc::Dedicated, Alloc::Pool, Alloc::Round2M})
    if (s == allocName(a)) return a;
  throw std::runtime_error("unknown allocation variant " + s);
}

struct Config {
  std::string test, kernel = "copy";
  uint64_t mib = 128;
  Alloc alloc = Alloc::Plain;
  uint32_t type = 0;
  bool whole = false;  // descriptor range VK_WHOLE_SIZE instead of the exact size
  int extraK = 0;      // extra buffers of Options::extraMiB, allocated but not used by the timed dispatches
  bool extraTouched = true;
  int chain = 1;  // dispatches in the command buffer
  bool barrier = true, same = false;
  Variant variant;
};

// An external add kernel (--spv), as poot's code generator writes one: three
// storage buffers at set 0 (a, b, c), no push constants, the workgroup size
// and the element count n baked in. It computes element
// (wg.y * GX + wg.x) * 256 + local_index when that is below n, with GX also
// baked in, so it runs on a one-row grid of ceil(n / 256) workgroups.
struct Module {
  std::string path, entry;
  std::vector<uint32_t> words;
  uint32_t version = 0;               // the header's, e.g. 0x10500 for SPIR-V 1.5
  uint32_t localSize[3] = {0, 0, 0};  // the entry point's LocalSize
  uint64_t bound = 0;                 // the constant the first integer less-than compares with: n
};

// Reads the module and the few facts above from it; `entry` empty takes its
// first GLCompute entry point.
Module loadModule(const std::string& path, const std::string& entry) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Module m;
  m.path = path, m.entry = entry;
  m.words.resize(bytes.size() / 4);
  std::memcpy(m.words.data(), bytes.data(), m.words.size() * 4);
  if (bytes.size() % 4 || m.words.size() < 5 || m.words[0] != 0x07230203u)
    throw std::runtime_error(path + " is not a little-endian SPIR-V module");
  m.version = m.words[1];
  std::vector<uint32_t> ints;                            // ids of 32-bit integer types
  std::vector<std::pair<uint32_t, uint32_t>> constants;  // id, value
  std::vector<std::pair<uint32_t, std::string>> entries;  // GLCompute entry points: id, name
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> localSizes;  // id, LocalSize x y z
  for (size_t at = 5; at < m.words.size();) {
    const uint32_t* w = &m.words[at];
    uint32_t count = w[0] >> 16, op = w[0] & 0xffff;
    if (count == 0 || at + count > m.words.size()) throw std::runtime_error(path + " is truncated");
    if (op == 21 && count >= 4 && w[2] == 32) ints.push_back(w[1]);  // OpTypeInt
    if (op == 43 && count == 4 && std::count(ints.begin(), ints.end(), w[1]))  // OpConstant
      constants.push_back({w[2], w[3]});
    if (op == 15 && count >= 4 && w[1] == 5) {  // OpEntryPoint GLCompute
      const char* name = reinterpret_cast<const char*>(&w[3]);
      entries.push_back({w[2], std::string(name, strnlen(name, (count - 3) * 4))});
    }
    if (op == 16 && count == 6 && w[2] == 17) localSizes.push_back({w[1], {w[3], w[4], w[5]}});  // LocalSize
    if ((op == 176 || op == 177) && count == 5 && !m.bound)  // OpULessThan, OpSLessThan
      for (auto& [id, value] : constants)
        if (id == w[4]) m.bound = value;
    at += count;
  }
  uint32_t id = 0;
  for (auto& [eid, name] : entries)
    if (m.entry.empty() ? !id : name == m.entry) id = eid, m.entry = name;
  if (!id) throw std::runtime_error(path + " has no GLCompute entry point" + (entry.empty() ? "" : " '" + entry + "'"));
  for (auto& [eid, size] : localSizes)
    if (eid == id) std::copy(size.begin(), size.end(), m.localSize);
  if (m.localSize[0] != 256 || m.localSize[1] != 1 || m.localSize[2] != 1)
    throw std::runtime_error(path + ": the entry point's workgroup is not 256 x 1 x 1 (LocalSize)");
  if (!m.bound) throw std::runtime_error(path + ": no bounds check against a constant element count found");
  return m;
}

// The instance and the physical device: what every device made on it shares.
struct Gpu {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice pd = VK_NULL_HANDLE;
  uint32_t api = 0, family = 0;
  VkPhysicalDeviceProperties props{};
  VkPhysicalDeviceMemoryProperties mem{};
  VkDeviceSize maxAlloc = ~VkDeviceSize(0);
  double tickNs = 0;
  uint64_t tickMask = 0;
  bool robustSupported = false;
  ~Gpu() {
    if (instance) vkDestroyInstance(instance, nullptr);
  }
};

// A pipeline and what binding it takes.
struct Kernel {
  VkPipeline pipeline;
  VkPipelineLayout layout;
  bool push;  // takes the element count as a push constant (the built-in kernels)
};

// A logical device with what every configuration uses: a queue, two command
// buffers (timed, one-off), a timestamp query pool, both pipelines (and the
// --spv one), a descriptor pool, and a host-visible staging buffer holding
// the pattern tile followed by the readback area.
//
// A poot device is made the way poot's backend makes its own: through
// VkPhysicalDeviceFeatures2 with shaderInt64, shaderInt16,
// storageBuffer16BitAccess, storageBuffer8BitAccess, shaderFloat16 and
// shaderInt8 where the device has them, and, where it offers
// VK_KHR_pipeline_executable_properties with pipelineExecutableInfo, that
// extension and feature enabled and every pipeline created with
// VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR. Otherwise every feature is
// off but robustBufferAccess when asked.
struct Dev {
  const Gpu& g;
  bool robust, poot;
  bool statistics = false;  // pipelines capture statistics (a poot device that offers them)
  const Module* module;
  VkDevice dev = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  VkCommandPool cmdPool = VK_NULL_HANDLE;
  VkCommandBuffer timed = VK_NULL_HANDLE, once = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkQueryPool queries = VK_NULL_HANDLE;
  VkDescriptorSetLayout setLayout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline copy = VK_NULL_HANDLE, add = VK_NULL_HANDLE;
  VkPipelineLayout extLayout = VK_NULL_HANDLE;  // the --spv module's: the same set, no push constants
  VkPipeline ext = VK_NULL_HANDLE;
  VkDescriptorPool descPool = VK_NULL_HANDLE;
  VkBuffer staging = VK_NULL_HANDLE;
  VkDeviceMemory stagingMem = VK_NULL_HANDLE;
  float* mapped = nullptr;

  Dev(const Gpu& gpu, bool robustAccess, bool pootDevice, const Module* spv);
  ~Dev();
  Kernel kernel(const std::string& name, bool external) const {
    if (name == "add" && external) return {ext, extLayout, false};
    return {name == "add" ? add : copy, layout, true};
  }
  std::string statisticsOf(VkPipeline p) const;
  void submitWait(VkCommandBuffer c) {
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &c;
    check(vkQueueSubmit(queue, 1, &si, fence), "vkQueueSubmit");
    check(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    check(vkResetFences(dev, 1, &fence), "vkResetFences");
  }
  void begin(VkCommandBuffer c) {
    check(vkResetCommandBuffer(c, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    check(vkBeginCommandBuffer(c, &bi), "vkBeginCommandBuffer");
  }
};

void barrier(VkCommandBuffer c, VkPipelineStageFlags src, VkAccessFlags srcAccess, VkPipelineStageFlags dst,
             VkAccessFlags dstAccess) {
  VkMemoryBarrier m{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  m.srcAccessMask = srcAccess;
  m.dstAccessMask = dstAccess;
  vkCmdPipelineBarrier(c, src, dst, 0, 1, &m, 0, nullptr, 0, nullptr);
}

uint32_t stagingType(const Gpu& g) {
  const VkMemoryPropertyFlags hv = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int best = -1, bestScore = -1;
  for (uint32_t t = 0; t < g.mem.memoryTypeCount; ++t) {
    VkMemoryPropertyFlags f = g.mem.memoryTypes[t].propertyFlags;
    if ((f & hv) != hv || (f & VK_MEMORY_PROPERTY_PROTECTED_BIT)) continue;
    int score = ((f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) ? 2 : 0) + ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ? 0 : 1);
    if (score > bestScore) best = int(t), bestScore = score;
  }
  if (best < 0) throw std::runtime_error("no host-visible coherent memory type");
  return uint32_t(best);
}

std::vector<uint32_t> wordsOf(const unsigned char* spv, unsigned len) {
  std::vector<uint32_t> words(len / 4);
  std::memcpy(words.data(), spv, words.size() * 4);
  return words;
}

VkPipeline makePipeline(VkDevice dev, VkPipelineLayout layout, const std::vector<uint32_t>& words, const char* entry,
                        VkPipelineCreateFlags flags) {
  VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  mi.codeSize = words.size() * 4;
  mi.pCode = words.data();
  VkShaderModule module;
  check(vkCreateShaderModule(dev, &mi, nullptr, &module), "vkCreateShaderModule");
  VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
  ci.flags = flags;
  ci.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
  ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  ci.stage.module = module;
  ci.stage.pName = entry;
  ci.layout = layout;
  VkPipeline p;
  VkResult r = vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, nullptr, &p);
  vkDestroyShaderModule(dev, module, nullptr);
  check(r, "vkCreateComputePipelines");
  return p;
}

bool offers(const Gpu& g, const char* extension) {
  uint32_t n = 0;
  vkEnumerateDeviceExtensionProperties(g.pd, nullptr, &n, nullptr);
  std::vector<VkExtensionProperties> exts(n);
  vkEnumerateDeviceExtensionProperties(g.pd, nullptr, &n, exts.data());
  for (auto& e : exts)
    if (std::strcmp(e.extensionName, extension) == 0) return true;
  return false;
}

Dev::Dev(const Gpu& gpu, bool robustAccess, bool pootDevice, const Module* spv)
    : g(gpu), robust(robustAccess), poot(pootDevice), module(spv) {
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = g.family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkPhysicalDeviceFeatures features{};  // everything off, robustBufferAccess included unless asked
  features.robustBufferAccess = robust ? VK_TRUE : VK_FALSE;
  VkDeviceCreateInfo di{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  di.queueCreateInfoCount = 1;
  di.pQueueCreateInfos = &qi;
  di.pEnabledFeatures = &features;
  // A poot device: the struct comment (lib/runtime/backends/vulkan.cpp, createDevice).
  VkPhysicalDeviceVulkan11Features has11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features has12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR hasExec{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceFeatures2 has{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features want11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features want12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR wantExec{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceFeatures2 want{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  const char* statisticsExtension = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
  if (poot) {
    if (g.api < VK_API_VERSION_1_2) throw std::runtime_error("a poot device needs Vulkan 1.2");
    const bool offered = offers(g, statisticsExtension);
    has.pNext = &has11;
    has11.pNext = &has12;
    if (offered) has12.pNext = &hasExec;
    vkGetPhysicalDeviceFeatures2(g.pd, &has);
    want11.storageBuffer16BitAccess = has11.storageBuffer16BitAccess;
    want12.storageBuffer8BitAccess = has12.storageBuffer8BitAccess;
    want12.shaderFloat16 = has12.shaderFloat16;
    want12.shaderInt8 = has12.shaderInt8;
    want.features.shaderInt64 = has.features.shaderInt64;
    want.features.shaderInt16 = has.features.shaderInt16;
    want.features.robustBufferAccess = features.robustBufferAccess;
    want.pNext = &want11;
    want11.pNext = &want12;
    statistics = offered && hasExec.pipelineExecutableInfo;
    if (statistics) {
      wantExec.pipelineExecutableInfo = VK_TRUE;
      want12.pNext = &wantExec;
      di.enabledExtensionCount = 1;
      di.ppEnabledExtensionNames = &statisticsExtension;
    }
    di.pNext = &want;
    di.pEnabledFeatures = nullptr;
    static bool told = false;
    if (!told) {
      told = true;
      std::printf("# poot device: shaderInt64 %u, shaderInt16 %u, storageBuffer16BitAccess %u, "
                  "storageBuffer8BitAccess %u, shaderFloat16 %u, shaderInt8 %u; %s\n",
                  want.features.shaderInt64, want.features.shaderInt16, want11.storageBuffer16BitAccess,
                  want12.storageBuffer8BitAccess, want12.shaderFloat16, want12.shaderInt8,
                  statistics ? "VK_KHR_pipeline_executable_properties enabled, pipelines capture statistics"
                  : offered  ? "no pipelineExecutableInfo feature, pipelines capture no statistics"
                             : "VK_KHR_pipeline_executable_properties not offered, pipelines capture no statistics");
    }
  }
  check(vkCreateDevice(g.pd, &di, nullptr, &dev), "vkCreateDevice");
  vkGetDeviceQueue(dev, g.family, 0, &queue);

  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = g.family;
  check(vkCreateCommandPool(dev, &pi, nullptr, &cmdPool), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = cmdPool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 2;
  VkCommandBuffer cbs[2];
  check(vkAllocateCommandBuffers(dev, &ai, cbs), "vkAllocateCommandBuffers");
  timed = cbs[0], once = cbs[1];
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(dev, &fi, nullptr, &fence), "vkCreateFence");
  VkQueryPoolCreateInfo qpi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
  qpi.queryType = VK_QUERY_TYPE_TIMESTAMP;
  qpi.queryCount = 2;
  check(vkCreateQueryPool(dev, &qpi, nullptr, &queries), "vkCreateQueryPool");

  VkDescriptorSetLayoutBinding bindings[3];
  for (uint32_t i = 0; i < 3; ++i)
    bindings[i] = {i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
  VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  li.bindingCount = 3;
  li.pBindings = bindings;
  check(vkCreateDescriptorSetLayout(dev, &li, nullptr, &setLayout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, 4};
  VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pli.setLayoutCount = 1;
  pli.pSetLayouts = &setLayout;
  pli.pushConstantRangeCount = 1;
  pli.pPushConstantRanges = &push;
  check(vkCreatePipelineLayout(dev, &pli, nullptr, &layout), "vkCreatePipelineLayout");
  const VkPipelineCreateFlags flags = statistics ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR : 0;
  copy = makePipeline(dev, layout, wordsOf(copy_spv, copy_spv_len), "main", flags);
  add = makePipeline(dev, layout, wordsOf(add_spv, add_spv_len), "main", flags);
  if (module) {
    pli.pushConstantRangeCount = 0;
    check(vkCreatePipelineLayout(dev, &pli, nullptr, &extLayout), "vkCreatePipelineLayout");
    ext = makePipeline(dev, extLayout, module->words, module->entry.c_str(), flags);
  }
  if (statistics) {
    static bool told = false;
    if (!told) {
      told = true;
      std::printf("# statistics of the built-in add: %s\n", statisticsOf(add).c_str());
      if (ext) std::printf("# statistics of %s: %s\n", module->entry.c_str(), statisticsOf(ext).c_str());
    }
  }
  VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 32};
  VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  dpi.maxSets = 8;
  dpi.poolSizeCount = 1;
  dpi.pPoolSizes = &ps;
  check(vkCreateDescriptorPool(dev, &dpi, nullptr, &descPool), "vkCreateDescriptorPool");

  // Staging: the pattern tile, then the readback area.
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = kTileBytes + kReadbackFloats * 4;
  bi.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  check(vkCreateBuffer(dev, &bi, nullptr, &staging), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, staging, &req);
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = stagingType(g);
  check(vkAllocateMemory(dev, &mai, nullptr, &stagingMem), "vkAllocateMemory");
  check(vkBindBufferMemory(dev, staging, stagingMem, 0), "vkBindBufferMemory");
  void* p;
  check(vkMapMemory(dev, stagingMem, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
  mapped = static_cast<float*>(p);
  for (uint32_t k = 0; k < kPeriod; ++k) mapped[k] = pattern(k);
}

Dev::~Dev() {
  if (!dev) return;
  vkDeviceWaitIdle(dev);
  vkDestroyBuffer(dev, staging, nullptr);
  vkFreeMemory(dev, stagingMem, nullptr);
  vkDestroyDescriptorPool(dev, descPool, nullptr);
  vkDestroyPipeline(dev, copy, nullptr);
  vkDestroyPipeline(dev, add, nullptr);
  if (ext) vkDestroyPipeline(dev, ext, nullptr);
  if (extLayout) vkDestroyPipelineLayout(dev, extLayout, nullptr);
  vkDestroyPipelineLayout(dev, layout, nullptr);
  vkDestroyDescriptorSetLayout(dev, setLayout, nullptr);
  vkDestroyQueryPool(dev, queries, nullptr);
  vkDestroyFence(dev, fence, nullptr);
  vkDestroyCommandPool(dev, cmdPool, nullptr);
  vkDestroyDevice(dev, nullptr);
}

// "name=value, ..." for every statistic of every executable of a pipeline
// that captured them.
std::string Dev::statisticsOf(VkPipeline p) const {
  auto properties = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(dev, "vkGetPipelineExecutablePropertiesKHR"));
  auto statistics = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(dev, "vkGetPipelineExecutableStatisticsKHR"));
  if (!properties || !statistics) return "the driver has no vkGetPipelineExecutable*KHR";
  VkPipelineInfoKHR pi{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  pi.pipeline = p;
  uint32_t n = 0;
  check(properties(dev, &pi, &n, nullptr), "vkGetPipelineExecutablePropertiesKHR");
  std::string out;
  for (uint32_t i = 0; i < n; ++i) {
    VkPipelineExecutableInfoKHR ei{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    ei.pipeline = p;
    ei.executableIndex = i;
    uint32_t m = 0;
    check(statistics(dev, &ei, &m, nullptr), "vkGetPipelineExecutableStatisticsKHR");
    std::vector<VkPipelineExecutableStatisticKHR> list(m, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    check(statistics(dev, &ei, &m, list.data()), "vkGetPipelineExecutableStatisticsKHR");
    for (auto& st : list) {
      std::string value;
      switch (st.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: value = std::to_string(st.value.b32); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: value = std::to_string(st.value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: value = std::to_string(st.value.u64); break;
        default: value = std::to_string(st.value.f64); break;
      }
      out += (out.empty() ? "" : ", ") + std::string(st.name) + "=" + value;
    }
  }
  return out.empty() ? "none" : out;
}

// `count` buffers of `bytes` each, allocated the way `alloc` says, in memory
// type `type`; with `map`, each allocation is mapped (for the set's lifetime:
// freeing unmaps) and `ptrs` points at each buffer's bytes.
struct Buffers {
  VkDevice dev;
  VkDeviceSize bytes = 0;
  std::vector<VkBuffer> bufs;
  std::vector<VkDeviceMemory> mems;
  std::vector<uint8_t*> ptrs;
  explicit Buffers(VkDevice d) : dev(d) {}
  Buffers(const Buffers&) = delete;
  ~Buffers() {
    for (VkBuffer b : bufs) vkDestroyBuffer(dev, b, nullptr);
    for (VkDeviceMemory m : mems) vkFreeMemory(dev, m, nullptr);
  }
};

VkBuffer newBuffer(VkDevice dev, VkDeviceSize bytes) {
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  bi.size = bytes;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer b;
  check(vkCreateBuffer(dev, &bi, nullptr, &b), "vkCreateBuffer");
  return b;
}

void allocate(const Gpu& g, VkDevice dev, VkDeviceSize size, uint32_t type, const void* next, VkDeviceMemory* out) {
  if (size > g.maxAlloc)
    throw Skip{"allocation of " + std::to_string(size / kMiB) + " MiB is past maxMemoryAllocationSize"};
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.pNext = next;
  ai.allocationSize = size;
  ai.memoryTypeIndex = type;
  check(vkAllocateMemory(dev, &ai, nullptr, out), "vkAllocateMemory");
}

uint8_t* mapMemory(VkDevice dev, VkDeviceMemory mem) {
  void* p;
  check(vkMapMemory(dev, mem, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
  return static_cast<uint8_t*>(p);
}

std::unique_ptr<Buffers> makeBuffers(const Gpu& g, VkDevice dev, size_t count, VkDeviceSize bytes, Alloc alloc,
                                     uint32_t type, bool map = false) {
  auto set = std::make_unique<Buffers>(dev);
  set->bytes = bytes;
  std::vector<VkMemoryRequirements> reqs;
  for (size_t i = 0; i < count; ++i) {
    set->bufs.push_back(newBuffer(dev, bytes));
    reqs.emplace_back();
    vkGetBufferMemoryRequirements(dev, set->bufs.back(), &reqs.back());
    if (!(reqs.back().memoryTypeBits & (1u << type)))
      throw Skip{"memory type " + std::to_string(type) + " is not allowed for these buffers"};
  }
  if (alloc == Alloc::Pool) {  // one allocation, each buffer at an offset aligned to 2 MiB
    std::vector<VkDeviceSize> offsets;
    VkDeviceSize end = 0;
    for (auto& r : reqs) {
      offsets.push_back(roundUp(end, std::max(r.alignment, k2MiB)));
      end = offsets.back() + r.size;
    }
    set->mems.emplace_back();
    allocate(g, dev, roundUp(end, k2MiB), type, nullptr, &set->mems.back());
    uint8_t* base = map ? mapMemory(dev, set->mems[0]) : nullptr;
    for (size_t i = 0; i < count; ++i) {
      check(vkBindBufferMemory(dev, set->bufs[i], set->mems[0], offsets[i]), "vkBindBufferMemory");
      if (map) set->ptrs.push_back(base + offsets[i]);
    }
    return set;
  }
  for (size_t i = 0; i < count; ++i) {
    VkMemoryDedicatedAllocateInfo dedicated{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO};
    dedicated.buffer = set->bufs[i];
    VkDeviceSize size = alloc == Alloc::Round2M ? roundUp(reqs[i].size, k2MiB) : reqs[i].size;
    set->mems.emplace_back();
    allocate(g, dev, size, type, alloc == Alloc::Dedicated ? &dedicated : nullptr, &set->mems.back());
    check(vkBindBufferMemory(dev, set->bufs[i], set->mems.back(), 0), "vkBindBufferMemory");
    if (map) set->ptrs.push_back(mapMemory(dev, set->mems.back()));
  }
  return set;
}

// Fills `buf` with the pattern shifted by `shift` floats: element i holds
// pattern(i + shift). The first tile comes from staging, then the filled
// prefix is doubled in place (device-local copies only).
void recordPatternFill(Dev& d, VkCommandBuffer c, const std::vector<std::pair<VkBuffer, uint32_t>>& bufs,
                       VkDeviceSize bytes) {
  for (auto& [buf, shift] : bufs) {
    VkDeviceSize s = VkDeviceSize(shift % kPeriod) * 4;
    VkBufferCopy r[2] = {{s, 0, std::min(kTileBytes - s, bytes)}, {0, kTileBytes - s, 0}};
    if (bytes > kTileBytes - s) r[1].size = std::min(s, bytes - (kTileBytes - s));
    vkCmdCopyBuffer(c, d.staging, buf, r[1].size ? 2 : 1, r);
  }
  for (VkDeviceSize have = kTileBytes; have < bytes; have *= 2) {
    barrier(c, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
    VkBufferCopy r{0, have, std::min(have, bytes - have)};
    for (auto& [buf, shift] : bufs) vkCmdCopyBuffer(c, buf, buf, 1, &r);
  }
}

struct Row {
  double allocMs = 0;  // host time to create, allocate and bind the timed buffers
  double hostMs = 0;   // median host time spent before each timed run (the map-upload memcpy, the idle sleep)
  double firstMs = 0, medMs = 0, minMs = 0, maxMs = 0, gbps = 0;
  std::string check;
};

// The input data of --map-upload: array `which` (0 or 1) of at least
// `floats` random floats, made once and kept. They are multiples of 2^-21 in
// [-1, 1), so that the sum of any two is exact.
const std::vector<float>& hostData(int which, uint64_t floats) {
  static std::vector<float> data[2];
  std::vector<float>& v = data[which];
  v.reserve(floats);
  for (uint64_t i = v.size(); i < floats; ++i) {  // splitmix64 of the index
    uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull + uint64_t(which) * 0xd1b54a32d192ed03ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    v.push_back(float(int32_t(z >> 42) - (1 << 21)) * (1.0f / (1 << 21)));
  }
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One configuration: allocate, fill, time, verify.
Row measure(Dev& d, const Options& o, const Config& cfg) {
  const Gpu& g = d.g;
  const Variant& v = cfg.variant;
  if (v.pootDevice != d.poot) throw std::logic_error("a configuration ran on the wrong device");
  const bool isAdd = cfg.kernel == "add";
  const bool external = v.spv && isAdd;  // --spv replaces the add kernel only
  const uint32_t inputs = isAdd ? 2 : 1, perPair = inputs + 1;
  const uint32_t pairs = cfg.same ? 1 : uint32_t(cfg.chain);
  const VkDeviceSize bytes = cfg.mib * kMiB;
  const uint64_t floats = bytes / 4;
  const uint64_t n = bytes / (isAdd ? 4 : 16);  // elements the kernel walks
  if (n >= (uint64_t(1) << 31)) throw Skip{"buffer too large for 32-bit indexing"};
  const VkDeviceSize range = cfg.whole ? VK_WHOLE_SIZE : bytes;
  if (bytes > g.props.limits.maxStorageBufferRange)
    throw Skip{"buffer past maxStorageBufferRange " + std::to_string(g.props.limits.maxStorageBufferRange)};
  uint64_t groups = (n + 255) / 256;
  if (o.wgs) groups = std::min<uint64_t>(groups, o.wgs);
  const uint32_t gx = uint32_t(std::min<uint64_t>(groups, g.props.limits.maxComputeWorkGroupCount[0]));
  const uint64_t gy = (groups + gx - 1) / gx;
  if (gy > g.props.limits.maxComputeWorkGroupCount[1]) throw Skip{"grid past maxComputeWorkGroupCount"};
  if (external) {
    if (!d.ext) throw Skip{"no --spv module given"};
    if (n != d.module->bound)
      throw Skip{"the --spv module adds " + std::to_string(d.module->bound) + " floats, this row " + std::to_string(n)};
    if (o.wgs || gy != 1) throw Skip{"the --spv module needs one workgroup per 256 floats, in one row"};
  }
  const VkMemoryPropertyFlags coherent = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  if (v.mapUpload && (g.mem.memoryTypes[cfg.type].propertyFlags & coherent) != coherent)
    throw Skip{"map-upload needs a host-visible coherent memory type"};

  Row row;
  auto t0 = std::chrono::steady_clock::now();
  auto set = makeBuffers(g, d.dev, size_t(pairs) * perPair, bytes, cfg.alloc, cfg.type, v.mapUpload);
  row.allocMs = msSince(t0);
  std::unique_ptr<Buffers> extra;
  if (cfg.extraK) extra = makeBuffers(g, d.dev, size_t(cfg.extraK), o.extraMiB * kMiB, cfg.alloc, cfg.type);
  auto in = [&](uint32_t p, uint32_t q) { return set->bufs[p * perPair + q]; };
  auto out = [&](uint32_t p) { return set->bufs[p * perPair + inputs]; };
  auto shift = [&](uint32_t p, uint32_t q) { return (p * perPair + q) * 100003u; };
  // With map-upload, before run r, input q of every pair gets host array q
  // from float kShift * r on, so the inputs change every run.
  constexpr uint64_t kShift = 16;  // 64 bytes: the source stays aligned
  const int last = o.warmup + o.runs - 1;
  const float* host[2] = {nullptr, nullptr};
  if (v.mapUpload)
    for (int q = 0; q < 2; ++q) host[q] = hostData(q, floats + kShift * uint64_t(last)).data();

  // Inputs get the pattern (unless the host writes them before every run),
  // outputs NaN, extra buffers zeros.
  d.begin(d.once);
  std::vector<std::pair<VkBuffer, uint32_t>> fills;
  for (uint32_t p = 0; p < pairs; ++p) {
    for (uint32_t q = 0; q < inputs && !v.mapUpload; ++q) fills.push_back({in(p, q), shift(p, q)});
    vkCmdFillBuffer(d.once, out(p), 0, VK_WHOLE_SIZE, 0xffffffffu);
  }
  if (!fills.empty()) recordPatternFill(d, d.once, fills, bytes);
  if (extra && cfg.extraTouched)
    for (VkBuffer b : extra->bufs) vkCmdFillBuffer(d.once, b, 0, VK_WHOLE_SIZE, 0);
  check(vkEndCommandBuffer(d.once), "vkEndCommandBuffer");
  d.submitWait(d.once);

  // Descriptor sets, one per pair.
  check(vkResetDescriptorPool(d.dev, d.descPool, 0), "vkResetDescriptorPool");
  std::vector<VkDescriptorSet> sets(pairs);
  std::vector<VkDescriptorSetLayout> layouts(pairs, d.setLayout);
  VkDescriptorSetAllocateInfo dai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  dai.descriptorPool = d.descPool;
  dai.descriptorSetCount = pairs;
  dai.pSetLayouts = layouts.data();
  check(vkAllocateDescriptorSets(d.dev, &dai, sets.data()), "vkAllocateDescriptorSets");
  for (uint32_t p = 0; p < pairs; ++p) {
    // copy leaves binding 2 unused; it gets the output too so that every binding is valid.
    VkDescriptorBufferInfo infos[3] = {{in(p, 0), 0, range},
                                       {isAdd ? in(p, 1) : out(p), 0, range},
                                       {out(p), 0, range}};
    VkWriteDescriptorSet w[3];
    for (uint32_t i = 0; i < 3; ++i) {
      w[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      w[i].dstSet = sets[p];
      w[i].dstBinding = i;
      w[i].descriptorCount = 1;
      w[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      w[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(d.dev, 3, w, 0, nullptr);
  }

  // The timed command buffer, recorded once. vkstream's own: a timestamp, a
  // barrier from host and transfer writes, each dispatch followed by a
  // compute -> compute barrier (unless cfg.barrier is off). poot's program
  // (lib/runtime/backends/vulkan.cpp, newCommands and record): the barrier
  // every command buffer of poot's starts with, from host, transfer and
  // shader writes; then the query reset and a timestamp; then per dispatch
  // the pipeline, the set, the dispatch and a compute -> compute barrier.
  // Both end with a barrier to host and transfer reads and a timestamp.
  const Kernel k = d.kernel(cfg.kernel, external);
  const uint32_t n32 = uint32_t(n);
  VkCommandBuffer c = d.timed;
  d.begin(c);
  if (v.pootCmd) {
    barrier(c, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
            VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT |
                VK_ACCESS_SHADER_WRITE_BIT);
    vkCmdResetQueryPool(c, d.queries, 0, 2);
    vkCmdWriteTimestamp(c, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, d.queries, 0);
  } else {
    vkCmdResetQueryPool(c, d.queries, 0, 2);
    vkCmdWriteTimestamp(c, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, d.queries, 0);
    barrier(c, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
            VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
    if (k.push) vkCmdPushConstants(c, k.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &n32);
  }
  for (int i = 0; i < cfg.chain; ++i) {
    if (v.pootCmd) vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, k.pipeline);
    vkCmdBindDescriptorSets(c, VK_PIPELINE_BIND_POINT_COMPUTE, k.layout, 0, 1, &sets[uint32_t(i) % pairs], 0, nullptr);
    if (v.pootCmd && k.push) vkCmdPushConstants(c, k.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &n32);
    vkCmdDispatch(c, gx, uint32_t(gy), 1);
    if (cfg.barrier)
      barrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
              VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  }
  barrier(c, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
          VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  vkCmdWriteTimestamp(c, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d.queries, 1);
  check(vkEndCommandBuffer(c), "vkEndCommandBuffer");

  std::vector<double> ms, hostMs;
  for (int r = 0; r <= last; ++r) {
    auto h0 = std::chrono::steady_clock::now();
    if (v.mapUpload)
      for (uint32_t p = 0; p < pairs; ++p)
        for (uint32_t q = 0; q < inputs; ++q) std::memcpy(set->ptrs[p * perPair + q], host[q] + kShift * r, bytes);
    if (v.idleMs > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(v.idleMs));
    const double h = msSince(h0);
    d.submitWait(c);
    uint64_t ticks[2];
    check(vkGetQueryPoolResults(d.dev, d.queries, 0, 2, sizeof ticks, ticks, sizeof ticks[0],
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
          "vkGetQueryPoolResults");
    double t = double((ticks[1] - ticks[0]) & g.tickMask) * g.tickNs * 1e-6;
    if (r == 0) row.firstMs = t;
    if (r >= o.warmup) ms.push_back(t), hostMs.push_back(h);
  }
  row.medMs = median(ms);
  row.hostMs = median(hostMs);
  row.minMs = *std::min_element(ms.begin(), ms.end());
  row.maxMs = *std::max_element(ms.begin(), ms.end());
  row.gbps = double(bytes) * perPair * cfg.chain / (row.medMs * 1e-3) / 1e9;

  // Verify sampled floats of every output: the ends, both sides of the
  // pattern's period, and pseudo-random ones, against what the inputs held
  // in the last run.
  std::vector<uint64_t> idx = {0, 1, 2, 3, 4, 5, kPeriod - 1, kPeriod, kPeriod + 1};
  for (uint64_t k = 1; k <= 8; ++k) idx.push_back(floats - k);
  uint64_t x = 0x9e3779b97f4a7c15ull ^ floats;
  while (idx.size() < kSamples) idx.push_back((x = x * 6364136223846793005ull + 1442695040888963407ull) >> 33);
  for (auto& i : idx) i %= floats;
  auto input = [&](uint32_t p, uint32_t q, uint64_t i) {
    return v.mapUpload ? host[q][kShift * uint64_t(last) + i] : pattern(i + shift(p, q));
  };
  d.begin(d.once);
  std::vector<VkBufferCopy> regions;
  for (uint32_t p = 0; p < pairs; ++p) {
    regions.clear();
    for (uint32_t s = 0; s < kSamples; ++s)
      regions.push_back({idx[s] * 4, kTileBytes + VkDeviceSize(p * kSamples + s) * 4, 4});
    vkCmdCopyBuffer(d.once, out(p), d.staging, uint32_t(regions.size()), regions.data());
  }
  barrier(d.once, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
  check(vkEndCommandBuffer(d.once), "vkEndCommandBuffer");
  d.submitWait(d.once);
  int bad = 0;
  std::string first;
  for (uint32_t p = 0; p < pairs; ++p)
    for (uint32_t s = 0; s < kSamples; ++s) {
      uint64_t i = idx[s];
      float want = input(p, 0, i);
      if (isAdd) want += input(p, 1, i);
      float got = d.mapped[kTileBytes / 4 + p * kSamples + s];
      if (got != want && !bad++)
        first = "out " + std::to_string(p) + " float " + std::to_string(i) + ": " + std::to_string(got) +
                ", want " + std::to_string(want);
    }
  row.check = bad ? "FAIL " + std::to_string(bad) + " of " + std::to_string(pairs * kSamples) + " (" + first + ")"
                  : "ok " + std::to_string(pairs * kSamples);
  return row;
}

void header() {
  std::printf("test\tkernel\tMiB\talloc\ttype\trange\trobust\textra\tchain\tvariant\talloc_ms\thost_ms\tfirst_ms\t"
              "med_ms\tmin_ms\tmax_ms\tGB/s\tcheck\n");
}

// Runs one configuration and prints its row (or why it could not run).
int failures = 0;
std::optional<Row> runRow(Dev& d, const Options& o, const Config& cfg) {
  std::string extra = cfg.extraK ? std::to_string(cfg.extraK) + "x" + std::to_string(o.extraMiB) + "MiB" +
                                       (cfg.extraTouched ? "" : "-untouched")
                                 : "0";
  std::string chain = cfg.chain == 1 ? "1"
                                     : std::to_string(cfg.chain) + (cfg.same ? "same" : "distinct") +
                                           (cfg.barrier ? "+barrier" : "-nobarrier");
  std::printf("%s\t%s\t%llu\t%s\t%u:%s\t%s\t%s\t%s\t%s\t%s\t", cfg.test.c_str(), cfg.kernel.c_str(),
              (unsigned long long)cfg.mib, allocName(cfg.alloc), cfg.type,
              flagNames(d.g.mem.memoryTypes[cfg.type].propertyFlags).c_str(), cfg.whole ? "whole" : "exact",
              d.robust ? "on" : "off", extra.c_str(), chain.c_str(), cfg.variant.name().c_str());
  std::fflush(stdout);
  std::optional<Row> r;
  try {
    r = measure(d, o, cfg);
    if (r->check.rfind("FAIL", 0) == 0) ++failures;
    std::printf("%.1f\t%.1f\t%.4f\t%.4f\t%.4f\t%.4f\t%.1f\t%s\n", r->allocMs, r->hostMs, r->firstMs, r->medMs,
                r->minMs, r->maxMs, r->gbps, r->check.c_str());
  } catch (const Skip& s) {
    std::printf("-\t-\t-\t-\t-\t-\t-\tskipped: %s\n", s.why.c_str());
  }
  std::fflush(stdout);
  return r;
}

// Device-local memory types that buffers may use (probed with a small buffer).
std::vector<uint32_t> localTypes(const Gpu& g, VkDevice dev) {
  VkBuffer b = newBuffer(dev, kMiB);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, b, &req);
  vkDestroyBuffer(dev, b, nullptr);
  std::vector<uint32_t> out;
  for (uint32_t t = 0; t < g.mem.memoryTypeCount; ++t) {
    VkMemoryPropertyFlags f = g.mem.memoryTypes[t].propertyFlags;
    if ((f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) && (req.memoryTypeBits & (1u << t)) &&
        !(f & (VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT)))
      out.push_back(t);
  }
  return out;
}

// poot's choice: a DEVICE_LOCAL|HOST_VISIBLE|HOST_COHERENT type whose heap
// holds at least half the largest device-local heap, else the first
// device-local type.
uint32_t pootType(const Gpu& g, const std::vector<uint32_t>& types) {
  const VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  VkDeviceSize largest = 0;
  for (uint32_t h = 0; h < g.mem.memoryHeapCount; ++h)
    if (g.mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) largest = std::max(largest, g.mem.memoryHeaps[h].size);
  for (uint32_t t : types)
    if ((g.mem.memoryTypes[t].propertyFlags & want) == want &&
        2 * g.mem.memoryHeaps[g.mem.memoryTypes[t].heapIndex].size >= largest)
      return t;
  return types.at(0);
}

void describe(Gpu& g, VkDevice dev, const Options& o, const std::vector<uint64_t>& sizes) {
  const auto& p = g.props;
  uint32_t v = p.driverVersion;
  char driver[64];
  if (p.vendorID == 0x10de)
    std::snprintf(driver, sizeof driver, "%u.%u.%u", v >> 22, (v >> 14) & 0xff, (v >> 6) & 0xff);
  else
    std::snprintf(driver, sizeof driver, "%u.%u.%u", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
                  VK_API_VERSION_PATCH(v));
  VkPhysicalDeviceVulkan12Properties p12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  if (g.api >= VK_API_VERSION_1_2) p2.pNext = &p12;
  vkGetPhysicalDeviceProperties2(g.pd, &p2);
  std::printf("# device: %s (vendor 0x%04x, device 0x%04x, type %d)\n", p.deviceName, p.vendorID, p.deviceID,
              int(p.deviceType));
  std::printf("# driver version: %s (raw 0x%08x)", driver, v);
  if (g.api >= VK_API_VERSION_1_2) std::printf(", %s %s", p12.driverName, p12.driverInfo);
  std::printf("\n# apiVersion: device %u.%u.%u, used %u.%u\n", VK_API_VERSION_MAJOR(p.apiVersion),
              VK_API_VERSION_MINOR(p.apiVersion), VK_API_VERSION_PATCH(p.apiVersion), VK_API_VERSION_MAJOR(g.api),
              VK_API_VERSION_MINOR(g.api));
  std::printf("# queue family %u; timestamps: %.3f ns per tick, valid bits mask 0x%llx\n", g.family, g.tickNs,
              (unsigned long long)g.tickMask);
  std::printf("# limits: maxStorageBufferRange %u, maxMemoryAllocationSize %llu MiB, maxComputeWorkGroupCount "
              "%u x %u, robustBufferAccess %s\n",
              p.limits.maxStorageBufferRange, (unsigned long long)(g.maxAlloc / kMiB),
              p.limits.maxComputeWorkGroupCount[0], p.limits.maxComputeWorkGroupCount[1],
              g.robustSupported ? "supported" : "unsupported");
  for (uint32_t h = 0; h < g.mem.memoryHeapCount; ++h)
    std::printf("# heap %u: %llu MiB%s\n", h, (unsigned long long)(g.mem.memoryHeaps[h].size / kMiB),
                (g.mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? " DEVICE_LOCAL" : "");
  for (uint32_t t = 0; t < g.mem.memoryTypeCount; ++t)
    std::printf("# type %u: %s, heap %u\n", t, flagNames(g.mem.memoryTypes[t].propertyFlags).c_str(),
                g.mem.memoryTypes[t].heapIndex);
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(g.pd, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> exts(count);
  vkEnumerateDeviceExtensionProperties(g.pd, nullptr, &count, exts.data());
  std::string memExts;
  for (auto& e : exts)
    if (std::strstr(e.extensionName, "memory") || std::strstr(e.extensionName, "robust"))
      memExts += std::string(memExts.empty() ? "" : " ") + e.extensionName;
  std::printf("# memory/robustness extensions: %s\n", memExts.empty() ? "none" : memExts.c_str());
  std::vector<uint64_t> all = sizes;
  all.push_back(o.extraMiB);
  all.push_back(o.smallMiB);
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  for (uint64_t mib : all) {
    VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bi.size = mib * kMiB;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    VkBuffer b;
    if (VkResult r = vkCreateBuffer(dev, &bi, nullptr, &b); r != VK_SUCCESS) {
      std::printf("# buffer %llu MiB: vkCreateBuffer failed (%d)\n", (unsigned long long)mib, int(r));
      continue;
    }
    VkMemoryDedicatedRequirements ded{VK_STRUCTURE_TYPE_MEMORY_DEDICATED_REQUIREMENTS};
    VkMemoryRequirements2 req{VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2};
    req.pNext = &ded;
    VkBufferMemoryRequirementsInfo2 ri{VK_STRUCTURE_TYPE_BUFFER_MEMORY_REQUIREMENTS_INFO_2};
    ri.buffer = b;
    vkGetBufferMemoryRequirements2(dev, &ri, &req);
    std::printf("# buffer %llu MiB: requirements size %llu, alignment %llu, memoryTypeBits 0x%x, "
                "prefersDedicated %u, requiresDedicated %u\n",
                (unsigned long long)mib, (unsigned long long)req.memoryRequirements.size,
                (unsigned long long)req.memoryRequirements.alignment, req.memoryRequirements.memoryTypeBits,
                ded.prefersDedicatedAllocation, ded.requiresDedicatedAllocation);
    vkDestroyBuffer(dev, b, nullptr);
  }
}

void initGpu(Gpu& g, const Options& o) {
  uint32_t loader = VK_API_VERSION_1_0;
  vkEnumerateInstanceVersion(&loader);
  if (loader < VK_API_VERSION_1_1) throw std::runtime_error("the Vulkan loader is older than 1.1");
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "vkstream";
  app.apiVersion = std::min<uint32_t>(loader, VK_API_VERSION_1_3);
  VkInstanceCreateInfo ii{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ii.pApplicationInfo = &app;
  check(vkCreateInstance(&ii, nullptr, &g.instance), "vkCreateInstance");
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(g.instance, &n, nullptr);
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(g.instance, &n, pds.data());
  if (pds.empty()) throw std::runtime_error("no Vulkan device");
  for (uint32_t i = 0; i < n; ++i) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pds[i], &p);
    std::printf("# physical device %u: %s\n", i, p.deviceName);
  }
  if (o.device >= int(n)) throw std::runtime_error("no device " + std::to_string(o.device));
  g.pd = o.device >= 0 ? pds[size_t(o.device)] : pds[0];
  if (o.device < 0)
    for (VkPhysicalDevice pd : pds) {
      VkPhysicalDeviceProperties p;
      vkGetPhysicalDeviceProperties(pd, &p);
      if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU) {
        g.pd = pd;
        break;
      }
    }
  vkGetPhysicalDeviceProperties(g.pd, &g.props);
  g.api = std::min(app.apiVersion, g.props.apiVersion);
  if (g.api < VK_API_VERSION_1_1) throw std::runtime_error("the device is older than Vulkan 1.1");
  vkGetPhysicalDeviceMemoryProperties(g.pd, &g.mem);
  VkPhysicalDeviceMaintenance3Properties m3{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  VkPhysicalDeviceProperties2 p2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  p2.pNext = &m3;
  vkGetPhysicalDeviceProperties2(g.pd, &p2);
  g.maxAlloc = m3.maxMemoryAllocationSize;
  VkPhysicalDeviceFeatures f;
  vkGetPhysicalDeviceFeatures(g.pd, &f);
  g.robustSupported = f.robustBufferAccess;

  vkGetPhysicalDeviceQueueFamilyProperties(g.pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> fams(n);
  vkGetPhysicalDeviceQueueFamilyProperties(g.pd, &n, fams.data());
  bool found = false;
  for (uint32_t i = 0; i < n && !found; ++i)
    if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) g.family = i, found = true;
  if (!found) throw std::runtime_error("no compute queue");
  uint32_t bits = fams[g.family].timestampValidBits;
  if (bits == 0 || g.props.limits.timestampPeriod <= 0)
    throw std::runtime_error("the compute queue family takes no timestamps");
  g.tickMask = bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
  g.tickNs = g.props.limits.timestampPeriod;
}

template <class T>
std::vector<T> numbers(const std::string& s) {
  std::vector<T> out;
  for (auto& w : split(s)) out.push_back(T(std::stoull(w)));
  return out;
}

void usage() {
  std::printf(
      "usage: vkstream [options]\n"
      "  --tests LIST     of size,range,robust,footprint,chain,poot (default all but poot)\n"
      "  --kernels LIST   of copy,add (default both)\n"
      "  --sizes LIST     MiB per buffer (default 64,128,256,512,1024,2048; the poot test's 512)\n"
      "  --max-mib N      drop sizes above N and cap --small-mib to N\n"
      "  --allocs LIST    of plain,dedicated,pool,round2m (default all)\n"
      "  --types LIST     memory type indices for the size test (default every device-local one)\n"
      "  --small-mib N    buffer size of the footprint and chain tests (default 128)\n"
      "  --extra-mib N    size of each extra buffer in the footprint test (default 1024)\n"
      "  --extra-k LIST   extra buffer counts in the footprint test (default 0,2,8)\n"
      "  --runs N         timed runs per configuration (default 20), --warmup N (default 3)\n"
      "  --wgs N          launch N workgroups that loop over the buffer (default 0: one thread per element)\n"
      "  --robust         make every test's device with robustBufferAccess on\n"
      "  --device N       physical device index (default the first discrete GPU, else the first)\n"
      "Doing things as poot's Vulkan backend does (every test but poot, which sets them row by row):\n"
      "  --map-upload     buffers mapped for their lifetime; inputs memcpy'd from host memory before every run\n"
      "                   (needs a host-visible coherent type)\n"
      "  --poot-device    poot's device features and extension; pipelines capture statistics\n"
      "  --spv FILE       the add kernel from FILE, as poot's code generator writes it; also the poot test's\n"
      "  --entry NAME     its entry point (default its first GLCompute one)\n"
      "  --poot-cmd       poot's command buffer\n"
      "  --as-poot        all four\n"
      "  --idle-ms X      sleep X ms before every run\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto next = [&]() -> std::string {
        if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
        return argv[++i];
      };
      if (a == "--tests") o.tests = split(next());
      else if (a == "--kernels") o.kernels = split(next());
      else if (a == "--sizes") o.sizes = numbers<uint64_t>(next()), o.sizesGiven = true;
      else if (a == "--max-mib") o.maxMiB = std::stoull(next());
      else if (a == "--allocs") o.allocs = split(next());
      else if (a == "--types") o.types = numbers<uint32_t>(next());
      else if (a == "--small-mib") o.smallMiB = std::stoull(next());
      else if (a == "--extra-mib") o.extraMiB = std::stoull(next());
      else if (a == "--extra-k") o.extraK = numbers<int>(next());
      else if (a == "--runs") o.runs = std::stoi(next());
      else if (a == "--warmup") o.warmup = std::stoi(next());
      else if (a == "--wgs") o.wgs = uint32_t(std::stoul(next()));
      else if (a == "--robust") o.robust = true;
      else if (a == "--device") o.device = std::stoi(next());
      else if (a == "--map-upload") o.variant.mapUpload = true;
      else if (a == "--poot-device") o.variant.pootDevice = true;
      else if (a == "--spv") o.spvPath = next(), o.variant.spv = true;
      else if (a == "--entry") o.spvEntry = next();
      else if (a == "--poot-cmd") o.variant.pootCmd = true;
      else if (a == "--as-poot") o.variant.mapUpload = o.variant.pootDevice = o.variant.spv = o.variant.pootCmd = true;
      else if (a == "--idle-ms") o.variant.idleMs = std::stod(next());
      else if (a == "-h" || a == "--help") return usage(), 0;
      else throw std::runtime_error("unknown option " + a + " (--help lists them)");
    }
    if (o.runs < 1 || o.warmup < 0) throw std::runtime_error("--runs must be at least 1");
    for (auto& k : o.kernels)
      if (k != "copy" && k != "add") throw std::runtime_error("unknown kernel " + k);
    std::vector<Alloc> allocs;
    for (auto& a : o.allocs) allocs.push_back(parseAlloc(a));
    std::vector<uint64_t> sizes;
    for (uint64_t s : o.sizes)
      if (!o.maxMiB || s <= o.maxMiB) sizes.push_back(s);
    if (o.maxMiB) o.smallMiB = std::min(o.smallMiB, o.maxMiB);
    if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end() || !o.smallMiB || !o.extraMiB)
      throw std::runtime_error("sizes must be at least 1 MiB");
    if (o.variant.spv && o.spvPath.empty()) throw std::runtime_error("--as-poot needs --spv FILE");
    if (!o.spvEntry.empty() && o.spvPath.empty()) throw std::runtime_error("--entry needs --spv FILE");
    std::optional<Module> module;
    if (!o.spvPath.empty()) module = loadModule(o.spvPath, o.spvEntry);
    const Module* spv = module ? &*module : nullptr;

    auto start = std::chrono::steady_clock::now();
    Gpu g;
    initGpu(g, o);
    auto dev = std::make_unique<Dev>(g, o.robust, o.variant.pootDevice, spv);
    describe(g, dev->dev, o, sizes);
    if (spv)
      std::printf("# --spv %s: SPIR-V %u.%u, entry %s, workgroup %u x %u x %u, "
                  "adds %llu floats (%.3f MiB per buffer)\n",
                  spv->path.c_str(), (spv->version >> 16) & 0xff, (spv->version >> 8) & 0xff, spv->entry.c_str(),
                  spv->localSize[0], spv->localSize[1], spv->localSize[2], (unsigned long long)spv->bound,
                  double(spv->bound) * 4 / kMiB);
    if (std::any_of(o.tests.begin(), o.tests.end(), [](const std::string& t) { return t != "poot"; }))
      std::printf("# variant of every test but poot: %s\n", o.variant.name().c_str());
    std::vector<uint32_t> local = localTypes(g, dev->dev);
    if (local.empty()) throw std::runtime_error("buffers may use no device-local memory type");
    std::vector<uint32_t> types = o.types.empty() ? local : o.types;
    for (uint32_t t : types)
      if (t >= g.mem.memoryTypeCount) throw std::runtime_error("no memory type " + std::to_string(t));
    const uint32_t dflt = pootType(g, local);
    std::string list;
    for (uint32_t t : local) list += (list.empty() ? "" : ",") + std::to_string(t);
    std::printf("# device-local types buffers may use: %s; poot's choice (the default outside the size test): %u\n",
                list.c_str(), dflt);
    std::printf("# %d timed runs after %d warm-up per row; %s; GB/s = bytes read + written / median\n", o.runs,
                o.warmup, o.wgs ? ("grid-stride over " + std::to_string(o.wgs) + " workgroups").c_str()
                                : "one thread per element");
    if (sizes.empty()) std::printf("# no --sizes left under --max-mib: the size, range and robust tests have no rows\n");
    header();

    for (const std::string& test : o.tests) {
      Config base;
      base.test = test;
      base.type = dflt;
      base.variant = o.variant;
      if (test == "size") {
        for (auto& k : o.kernels)
          for (uint64_t s : sizes)
            for (Alloc a : allocs)
              for (uint32_t t : types) {
                Config c = base;
                c.kernel = k, c.mib = s, c.alloc = a, c.type = t;
                runRow(*dev, o, c);
              }
      } else if (test == "range") {
        for (auto& k : o.kernels)
          for (uint64_t s : sizes) {
            Config c = base;
            c.kernel = k, c.mib = s, c.whole = true;
            runRow(*dev, o, c);
          }
      } else if (test == "robust") {
        if (o.robust) continue;  // every test already runs with it
        if (!g.robustSupported) {
          std::printf("# robust: skipped, the device does not support robustBufferAccess\n");
          continue;
        }
        dev.reset();
        Dev robust(g, true, o.variant.pootDevice, spv);
        for (auto& k : o.kernels)
          for (uint64_t s : sizes) {
            Config c = base;
            c.kernel = k, c.mib = s;
            runRow(robust, o, c);
          }
      } else if (test == "footprint") {
        for (Alloc a : allocs) {
          for (int k : o.extraK) {
            Config c = base;
            c.mib = o.smallMiB, c.alloc = a, c.extraK = k;
            runRow(*dev, o, c);
          }
          Config c = base;  // the most extra buffers again, allocated but never written
          c.mib = o.smallMiB, c.alloc = a, c.extraTouched = false;
          for (int k : o.extraK) c.extraK = std::max(c.extraK, k);
          if (c.extraK) runRow(*dev, o, c);
        }
      } else if (test == "chain") {
        for (Alloc a : allocs)
          for (bool same : {false, true})
            for (bool bar : {true, false}) {
              Config c = base;
              c.mib = o.smallMiB, c.alloc = a, c.chain = 4, c.same = same, c.barrier = bar;
              runRow(*dev, o, c);
            }
      } else if (test == "poot") {
        // The add kernel the vkstream way, then each of poot's ways alone,
        // then all four, then the host idle as long as map-upload's memcpy.
        std::vector<uint64_t> pootSizes = o.sizesGiven ? sizes : std::vector<uint64_t>{512};
        if (!o.sizesGiven && o.maxMiB && o.maxMiB < 512) pootSizes.clear();
        if (pootSizes.empty()) std::printf("# poot: no size left under --max-mib\n");
        dev.reset();
        Dev plain(g, o.robust, false, spv), poot(g, o.robust, true, spv);
        for (uint64_t s : pootSizes) {
          std::vector<Variant> rows(7);
          rows[1].mapUpload = true;
          rows[2].pootDevice = true;
          rows[3].spv = true;
          rows[4].pootCmd = true;
          rows[5].mapUpload = rows[5].pootDevice = rows[5].spv = rows[5].pootCmd = true;
          for (size_t i = 0; i < rows.size(); ++i) {
            Config c = base;
            c.kernel = "add", c.mib = s, c.variant = rows[i];
            std::optional<Row> r = runRow(c.variant.pootDevice ? poot : plain, o, c);
            if (i == 1) rows[6].idleMs = r ? std::max(1.0, r->hostMs) : 50;
          }
        }
      } else {
        throw std::runtime_error("unknown test " + test);
      }
      if (!dev) dev = std::make_unique<Dev>(g, o.robust, o.variant.pootDevice, spv);
    }
    dev.reset();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("# done in %.1f s, %d verification failure(s)\n", secs, failures);
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "vkstream: %s\n", e.what());
    return 2;
  } catch (const Skip& s) {
    std::fflush(stdout);
    std::fprintf(stderr, "vkstream: %s\n", s.why.c_str());
    return 2;
  }
}

// The text of poot probe's profile: YAML written directly (poot does not
// link yaml-cpp) in the field order of docs/device-profile.md, with comments
// that say where each figure came from in the API that was asked (Vulkan,
// CUDA or HIP).
#include "profile_text.h"

#include <utility>

namespace poot {

namespace {

// Where each figure comes from, in the words of the API asked.
struct Sources {
  const char *arch, *units, *memory, *workgroup, *subgroup, *grid, *buffer, *bindings, *heap, *floats;
};

const Sources& sourcesOf(rt::Target t) {
  static const Sources vulkan{
      "# The newest Vulkan version both the loader and the device report.\n",
      "# From the vendor extension: shaderSMCount (VK_NV_shader_sm_builtins), or\n"
      "# computeUnitsPerShaderArray x shaderArraysPerEngineCount x shaderEngineCount\n"
      "# (VK_AMD_shader_core_properties).\n",
      "# maxComputeSharedMemorySize.\n",
      "# min(maxComputeWorkGroupInvocations, maxComputeWorkGroupSize.x).\n",
      "# subgroupSize.\n",
      "# maxComputeWorkGroupCount.\n",
      "# maxStorageBufferRange, at most memory_bytes.\n",
      "# min(maxPerStageDescriptorStorageBuffers, maxDescriptorSetStorageBuffers, maxPerStageResources).\n",
      "# The largest device-local memory heap.\n",
      "# f16 storage from storageBuffer16BitAccess, arith from shaderFloat16 too;\n"
      "# bf16 storage (as 16-bit integers) from storageBuffer16BitAccess.\n"};
  static const Sources cuda{
      "# CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR.\n",
      "# CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT.\n",
      "# CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN.\n",
      "# min(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X).\n",
      "# CU_DEVICE_ATTRIBUTE_WARP_SIZE.\n",
      "# CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, _Y and _Z.\n",
      "# CUDA sets no allocation limit below the device memory.\n",
      "# 4 KiB of kernel parameters over 8-byte pointers.\n",
      "# cuDeviceTotalMem.\n",
      "# NVPTX loads, stores, converts and selects both; arith where the hardware has it\n"
      "# (f16 from sm_53, bf16 from sm_80).\n"};
  static const Sources hip{
      "# gcnArchName (hipGetDevicePropertiesR0600), without its feature flags.\n",
      "# hipDeviceAttributeMultiprocessorCount.\n",
      "# hipDeviceAttributeMaxSharedMemoryPerBlock.\n",
      "# min(hipDeviceAttributeMaxThreadsPerBlock, hipDeviceAttributeMaxBlockDimX).\n",
      "# hipDeviceAttributeWarpSize.\n",
      "# hipDeviceAttributeMaxGridDimX, Y and Z (x within 2^32 - 1 work-items).\n",
      "# HIP sets no allocation limit below the device memory.\n",
      "# 4 KiB of kernel arguments over 8-byte pointers.\n",
      "# hipDeviceTotalMem.\n",
      "# The AMDGPU backend lowers every operation on both.\n"};
  return t == rt::Target::Ptx ? cuda : t == rt::Target::Hsaco ? hip : vulkan;
}

// The compute_units field, with where its figure came from; "unknown" when
// the device reports none, which pootc refuses until someone writes it.
std::string computeUnitsText(const rt::DeviceInfo& d) {
  if (d.computeUnits <= 0)
    return "# Unknown: core Vulkan has no count of compute units, and this driver offers neither\n"
           "# VK_NV_shader_sm_builtins nor VK_AMD_shader_core_properties. pootc refuses the profile until\n"
           "# the device's count (SMs, CUs, cores; lavapipe: its worker threads) replaces 'unknown'.\n"
           "compute_units: unknown\n";
  return sourcesOf(d.target).units + ("compute_units: " + std::to_string(d.computeUnits) + "\n");
}

std::string opsText(const rt::TwoByteOps& o) {
  std::string out;
  for (auto [on, name] : {std::pair{o.storage, "storage"}, {o.arith, "arith"}, {o.select, "select"}})
    if (on) out += (out.empty() ? "" : ", ") + std::string(name);
  return "[" + out + "]";
}

}  // namespace

std::string profileText(const rt::DeviceInfo& d) {
  auto n = [](int64_t v) { return std::to_string(v); };
  const Sources& from = sourcesOf(d.target);
  std::string out;
  out += "# Written by poot probe from the live device: " + d.name + ",\n";
  out += "# driver " + d.driver + ".\n";
  out += "name: " + d.slug + "\n";
  out += std::string("target: ") + rt::targetName(d.target) + "\n";
  out += from.arch;
  out += "arch: " + d.arch + "\n";
  out += computeUnitsText(d);
  out += from.memory;
  out += "workgroup_memory_bytes: " + n(d.workgroupMemoryBytes) + "\n";
  out += from.workgroup;
  out += "max_workgroup_size: " + n(d.maxWorkgroupSize) + "\n";
  out += from.subgroup;
  out += "subgroup_size: " + n(d.subgroupSize) + "\n";
  out += from.grid;
  out += "grid_limits:\n";
  out += "  x: " + n(d.gridLimits[0]) + "\n";
  out += "  y: " + n(d.gridLimits[1]) + "\n";
  out += "  z: " + n(d.gridLimits[2]) + "\n";
  out += from.buffer;
  out += "max_buffer_bytes: " + n(d.maxBindingBytes) + "\n";
  out += from.bindings;
  out += "max_bindings: " + n(d.maxBindings) + "\n";
  out += from.heap;
  out += "memory_bytes: " + n(d.memoryBytes) + "\n";
  out += from.floats;
  out += "two_byte_floats:\n";
  out += "  f16: " + opsText(d.f16) + "\n";
  out += "  bf16: " + opsText(d.bf16) + "\n";
  if (!d.matrixOps.empty()) {
    out += d.target == rt::Target::Hsaco ? "# MFMA of 16 x 16 x 16 (CDNA 2 and 3).\nmatrix_multiply: ["
                                     : "# mma.sync shapes, from compute capability 8.0.\nmatrix_multiply: [";
    for (size_t i = 0; i < d.matrixOps.size(); ++i) out += std::string(i ? ", " : "") + matrixShape(d.matrixOps[i]).name;
    out += "]\n";
  }
  // The one optional figure a driver cannot give: left for the user.
  out += "# memory_bandwidth_bytes_per_s: the rate a device-to-device copy reaches here, bytes read plus\n"
         "# written a second; probe measures nothing. With it, pootc inspect prints each step's floor.\n";
  return out;
}

}  // namespace poot

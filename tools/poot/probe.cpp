// poot probe: a device profile from the live device's DeviceInfo, written as
// YAML text directly (poot does not link yaml-cpp) in the field order of
// docs/device-profile.md, with comments that say where each figure came
// from, atomically.
#include <string>

#include "ir/io.h"
#include "runtime/backends/backends.h"
#include "tool.h"

namespace poot {

namespace {

// The compute_units field, with where its figure came from; "unknown" when
// the device reports none, which pootc refuses until someone writes it.
std::string computeUnitsText(const rt::DeviceInfo& d) {
  if (d.computeUnits <= 0)
    return "# Unknown: core Vulkan has no count of compute units, and this driver offers neither\n"
           "# VK_NV_shader_sm_builtins nor VK_AMD_shader_core_properties. pootc refuses the profile until\n"
           "# the device's count (SMs, CUs, cores; lavapipe: its worker threads) replaces 'unknown'.\n"
           "compute_units: unknown\n";
  std::string from = d.target == rt::Target::Ptx
                         ? "# The multiprocessor count.\n"
                         : "# From the vendor extension: shaderSMCount (VK_NV_shader_sm_builtins), or\n"
                           "# computeUnitsPerShaderArray x shaderArraysPerEngineCount x shaderEngineCount\n"
                           "# (VK_AMD_shader_core_properties).\n";
  return from + "compute_units: " + std::to_string(d.computeUnits) + "\n";
}

std::string profileText(const rt::DeviceInfo& d) {
  auto n = [](int64_t v) { return std::to_string(v); };
  std::string f16 = d.f16Arith ? "[storage, arith]" : d.f16Storage ? "[storage]" : "[]";
  std::string out;
  out += "# Written by poot probe from the live device: " + d.name + ",\n";
  out += "# driver " + d.driver + ".\n";
  out += "name: " + d.slug + "\n";
  out += std::string("target: ") + rt::targetName(d.target) + "\n";
  out += "# The newest Vulkan version both the loader and the device report.\n";
  out += "arch: " + d.arch + "\n";
  out += computeUnitsText(d);
  out += "# maxComputeSharedMemorySize.\n";
  out += "workgroup_memory_bytes: " + n(d.workgroupMemoryBytes) + "\n";
  out += "# min(maxComputeWorkGroupInvocations, maxComputeWorkGroupSize.x).\n";
  out += "max_workgroup_size: " + n(d.maxWorkgroupSize) + "\n";
  out += "# subgroupSize.\n";
  out += "subgroup_size: " + n(d.subgroupSize) + "\n";
  out += "# maxComputeWorkGroupCount.\n";
  out += "grid_limits:\n";
  out += "  x: " + n(d.gridLimits[0]) + "\n";
  out += "  y: " + n(d.gridLimits[1]) + "\n";
  out += "  z: " + n(d.gridLimits[2]) + "\n";
  out += "# maxStorageBufferRange, at most memory_bytes.\n";
  out += "max_buffer_bytes: " + n(d.maxBindingBytes) + "\n";
  out += "# min(maxPerStageDescriptorStorageBuffers, maxDescriptorSetStorageBuffers, maxPerStageResources).\n";
  out += "max_bindings: " + n(d.maxBindings) + "\n";
  out += "# The largest device-local memory heap.\n";
  out += "memory_bytes: " + n(d.memoryBytes) + "\n";
  out += "# f16 storage from storageBuffer16BitAccess, arith from shaderFloat16 too; no bf16.\n";
  out += "two_byte_floats:\n";
  out += "  f16: " + f16 + "\n";
  out += "  bf16: []\n";
  return out;
}

}  // namespace

int runProbe(const ProbeOptions& opts) {
  auto backend = rt::openBackend(opts.backend, opts.device);
  if (!backend) return report(backend.error());
  if (auto s = writeFileAtomic(opts.output, profileText((*backend)->info())); !s) return report(s.error());
  return 0;
}

}  // namespace poot

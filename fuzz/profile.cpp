// libFuzzer target: any text given to the device profile loader must give a
// profile or a typed error, never a crash or an uncaught exception; a profile
// that loads must hold the figures the planner divides by and compares with.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "plan/profile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto p = poot::parseProfile(text, "fuzz.yaml");
  if (!p) return 0;
  if (p->name.empty() || p->subgroup_size < 1 || p->max_workgroup_size < p->subgroup_size ||
      p->workgroup_memory_bytes < 1 || p->max_buffer_bytes > p->memory_bytes || p->max_bindings < 1)
    std::abort();
  for (int64_t g : p->grid_limits)
    if (g < 1) std::abort();
  return 0;
}

// The SPIR-V validator plugin: SPIRV-Tools' validator behind one C entry
// point, built as a module that the runtime opens with dlopen
// (runtime/spirv_validator.h), so that poot and libpoot link no SPIRV-Tools
// and still validate every SPIR-V blob of a plan before a driver sees it.
// It links Debian's static libSPIRV-Tools.a (built position-independent)
// into itself and exports nothing else.
#include <spirv-tools/libspirv.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

// 0: the module is valid for Vulkan 1.2 (the environment pootc validates
// its own output for); 1: it is not, and `message` holds why (NUL-ended,
// cut to `capacity`).
extern "C" __attribute__((visibility("default"))) int poot_spirv_validate_v1(const uint32_t* words, size_t count,
                                                                               char* message, size_t capacity) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_2);
  std::string messages;
  tools.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t& pos, const char* m) {
    if (!messages.empty()) messages += "; ";
    messages += "word " + std::to_string(pos.index) + ": " + m;
  });
  bool valid = tools.Validate(words, count);
  if (capacity > 0) {
    size_t n = std::min(messages.size(), capacity - 1);
    std::memcpy(message, messages.data(), n);
    message[n] = 0;
  }
  return valid ? 0 : 1;
}

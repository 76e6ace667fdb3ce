// validate() and disassemble() through SPIRV-Tools: the validator for the
// Vulkan 1.2 environment with its messages gathered into one Verify error,
// and the disassembler with friendly names.
#include <spirv-tools/libspirv.hpp>

#include <string>

#include "codegen/spirv/spirv.h"

namespace poot::spirv {

Status validate(const std::vector<uint32_t>& words) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_2);
  std::string messages;
  tools.SetMessageConsumer([&](spv_message_level_t, const char*, const spv_position_t& pos, const char* m) {
    if (!messages.empty()) messages += "; ";
    messages += "word " + std::to_string(pos.index) + ": " + m;
  });
  if (tools.Validate(words)) return ok();
  return makeError(ErrorKind::Verify, Loc{"spir-v"}, "invalid module: " + messages);
}

std::string disassemble(const std::vector<uint32_t>& words) {
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_2);
  std::string text;
  if (!tools.Disassemble(words, &text, SPV_BINARY_TO_TEXT_OPTION_FRIENDLY_NAMES | SPV_BINARY_TO_TEXT_OPTION_INDENT))
    return "<not a spir-v module>\n";
  return text;
}

}  // namespace poot::spirv

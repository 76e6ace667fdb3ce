// The binary writer: the five header words (magic, version 1.5, generator 0,
// the id bound, schema 0) and then each section's words in the order of the
// logical layout. Words are host order, as SPIRV-Tools and Vulkan take them.
#include "codegen/spirv/module.h"

namespace poot::spirv {

Words Module::write() const {
  Words out = {SpvMagicNumber, 0x00010500u, 0u, bound(), 0u};
  for (const Words* sec : {&s.capabilities, &s.extensions, &s.imports, &s.memoryModel, &s.entryPoints,
                           &s.executionModes, &s.debug, &s.annotations, &s.globals, &s.functions})
    out.insert(out.end(), sec->begin(), sec->end());
  return out;
}

}  // namespace poot::spirv

// SPIR-V validation at load, without linking SPIRV-Tools: the validator
// lives in a plugin (spirv_validator/plugin.cpp, poot-spirv-validate.so)
// that is opened with dlopen the first time a SPIR-V blob is read. Where it
// is looked for, in order:
//   - POOT_SPIRV_VALIDATOR: a path to the plugin, which must then load (a
//     Capability error otherwise), or "off" to read plans without it;
//   - beside the running executable, then in ../lib/poot/ from it (where
//     `cmake --install` puts it beside bin/poot);
//   - where this build tree built it.
// Where none is found, SPIR-V blobs get only the structural check of
// kernel_blob.h, and spirvValidator() says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/diag.h"

namespace poot::rt {

// Validates a SPIR-V module (little-endian words as bytes) for Vulkan 1.2.
// ok() also where no plugin was found (see spirvValidator()).
Status validateSpirv(const std::vector<uint8_t>& blob);

// Which plugin validates ("/path/poot-spirv-validate.so"), or "none: " and
// why SPIR-V is not validated.
std::string spirvValidator();

}  // namespace poot::rt

// Linking an AMDGPU relocatable object into an HSACO code object: the
// object goes to a temporary file and `ld.lld -shared` (the path the build
// configured as POOT_LD_LLD) links it; both temporary files are removed.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/diag.h"

namespace poot::llvmgen {

// An Io error naming the command and its output when ld.lld is missing or
// fails.
Expected<std::vector<uint8_t>> linkHsaco(std::string_view object);

}  // namespace poot::llvmgen

// Linking an AMDGPU relocatable object into an HSACO code object with lld as
// a library, in this process (no ld.lld process per kernel): the same link
// as `ld.lld -shared`, through temporary files that are removed afterwards.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/diag.h"

namespace poot::llvmgen {

// An Io error naming the link's arguments and lld's messages when it fails.
Expected<std::vector<uint8_t>> linkHsaco(const std::vector<uint8_t>& object);

}  // namespace poot::llvmgen

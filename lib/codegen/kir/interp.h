// The KIR interpreter: runs a kernel on the CPU, the reference for what KIR
// means (kir.h states it) and how generators are tested without a GPU. Each
// workgroup runs its threads in lockstep over the structured body (a For
// runs until no active thread continues, an If masks threads), so a Barrier
// is a plain point in the order; workgroups run one after another. Loads and
// stores outside [0, elems) of a buffer or shared array are errors, not
// undefined behaviour, so a generator's out-of-bounds access fails its test.
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/kir/kir.h"
#include "ir/diag.h"

namespace poot::kir {

// Runs k over gridX = k.gridX by gridY workgroups. buffers[i] is binding i:
// at least k.buffers[i].elems * elemBytes(elem) bytes, little-endian. Two
// bindings may point at one vector (a buffer read and written in place).
Status interpret(const Kernel& k, int64_t gridY, const std::vector<std::vector<uint8_t>*>& buffers);

}  // namespace poot::kir

// Indices into a kernel's own memory, bounded. Robust buffer access (the
// Vulkan backend enables it) keeps a kernel inside the storage buffers bound
// to it; nothing in Vulkan keeps it inside its own arrays. An index past a
// workgroup array writes wherever the driver placed what follows (lavapipe
// crashed running a forged plan's gemv whose partial-sum index had been
// moved half a gigabyte out: fuzz/README.md), and so would one past a
// function or private array.
//
// boundLocalIndices rewrites a module so that every index an access chain
// takes into an array, vector or matrix held in any storage class but the
// storage buffers (StorageBuffer, Uniform: robust buffer access bounds
// those) is at most the last element: an index that is not a constant
// within range is replaced by GLSL.std.450 UMin(index, length - 1), so a
// negative one, read as unsigned, clamps too. For an index in range the
// kernel computes what it did. It refuses, as a Format error, what it cannot
// follow: an access chain through a pointer whose type it does not know, a
// pointer made by OpUndef or OpConstantNull, a struct member index that is
// not a constant within the struct, an array whose length is not an integer
// constant, an index that is not an integer scalar.
//
// The module must have passed checkKernelBlob (kernel_blob.h): its framing
// holds, its addressing is Logical and it has no pointer access chains.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/diag.h"

namespace poot::rt {

Expected<std::vector<uint32_t>> boundLocalIndices(const std::vector<uint32_t>& words);

}  // namespace poot::rt

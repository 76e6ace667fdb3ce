// The SPIR-V writer's first layer: one walk over a KIR kernel that decides
// what the module must declare (the Int64 capability, 8- and 16-bit storage
// access, Float16 for an f16 workgroup array) and refuses what has no Vulkan
// lowering here (float Rem, Pow on integers, bitwise operations on floats,
// arithmetic on two-byte types, any bf16 left by a caller that did not run
// kir::legalize, a loop step or workgroup size that does not fit a 32-bit
// literal). The emitter trusts what it returns.
#pragma once

#include "codegen/kir/kir.h"
#include "ir/diag.h"

namespace poot::spirv {

struct Needs {
  bool int64 = false;      // an i64 value or buffer: Int64
  bool storage8 = false;   // a u8 or i8 buffer: StorageBuffer8BitAccess
  bool storage16 = false;  // an f16 or u16 buffer: StorageBuffer16BitAccess
  bool float16 = false;    // an f16 workgroup array: Float16
};

// The kernel's needs, or a Verify error naming the entry and the instruction.
Expected<Needs> legalize(const kir::Kernel& k);

}  // namespace poot::spirv

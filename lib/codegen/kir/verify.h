// The KIR verifier: what every emitter may assume. Operand counts and types
// per opcode (f16 and bf16 only in storage, conversion to and from f32,
// select and workgroup arrays), every operand defined earlier in an
// enclosing block (no use of a value outside the block that defines it), buffer, shared array and
// variable indices in range, no store to a buffer not marked written, a
// barrier never inside a For or If whose condition is a per-thread value
// (Local or anything derived from it). Generators' tests run it on every
// kernel; the codegen driver runs it before emitting.
#pragma once

#include <string>

#include "codegen/kir/kir.h"
#include "ir/diag.h"

namespace poot::kir {

// Ok, or a Verify error naming the kernel's entry and the instruction.
Status verify(const Kernel& k);

}  // namespace poot::kir

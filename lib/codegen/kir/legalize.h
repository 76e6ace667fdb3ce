// KIR legalization: rewrites a verified kernel in place so that it uses only
// what its target's emitter lowers, keeping kir.h's meaning bit for bit. The
// codegen driver runs it on every kernel for its target just before
// emission. For SPIR-V (no VK_KHR_shader_bfloat16 use yet) every bf16 becomes
// its bit pattern: bf16 buffers u16, bf16 values and workgroup arrays i32
// holding the 16 bits, a conversion to f32 a shift into the high half, one
// from f32 round to nearest even in integer arithmetic (a NaN keeps its sign
// and top payload bits and is made quiet). f16 stays, but a conversion from
// f32 first rounds its operand to an f16 value in f32 and integer
// arithmetic (Vulkan fixes a conversion's rounding mode only where it is
// stored, and a driver may flush f16 subnormals), so the one SPIR-V converts
// is exact. LLVM has half and bfloat with both conversions, so PTX and HSACO
// kernels pass unchanged.
#pragma once

#include "codegen/kir/kir.h"
#include "plan/profile.h"

namespace poot::kir {

// The kernel, ready for t's emitter. A bf16 workgroup array lowered to i32
// takes 4 bytes an element, so sharedBytes() may grow.
void legalize(Kernel& k, Target t);

}  // namespace poot::kir

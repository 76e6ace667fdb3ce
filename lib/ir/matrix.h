// The matrix-multiply instructions poot knows, one row each: what a device
// profile lists under matrix_multiply (plan/profile.h, in order of
// preference), what a schedule names (plan.h) and what KIR's Mma takes
// (kir.h, which gives each its lane layout). Every one is a warp's
// D = A * B + C for an m x k A, a k x n B and m x n f32 C and D, A and B of
// the operand dtype (tf32: f32 values with the low 13 mantissa bits zero);
// "warp" is the op's threads: 32 (PTX's mma.sync), 64 (a wave of AMD's
// MFMA, v_mfma_f32_16x16x16_bf16 and _f16 on CDNA 2 and 3) or 128 (a
// warpgroup's wgmma, operands from workgroup memory).
// A new instruction is one row here, its lane layout in kir.h and the
// interpreter, and its lowering in each emitter that has it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/types.h"

namespace poot {

enum class MatrixOp : uint8_t { M16N8K8Tf32, M16N8K16Bf16, M16N8K16F16, M64NK16Bf16, M64NK16F16, M16N16K16Bf16, M16N16K16F16 };

struct MatrixShape {
  MatrixOp op;
  const char* name;  // as profiles and schedules spell it: "m16n8k16.bf16"
  int64_t m, n, k;   // n: the most columns, for a warpgroup's row
  DType operand;     // A's and B's dtype (tf32: F32)
  int64_t aRegs, bRegs;  // operands of A and B a lane holds (C and D: 4 f32); 0 from workgroup memory
  int64_t threads;   // 32: a warp's; 64: a wave64's; 128: a warpgroup's
};

const std::vector<MatrixShape>& matrixShapes();
const MatrixShape& matrixShape(MatrixOp op);
std::optional<MatrixOp> matrixOpNamed(const std::string& name);
// "m16n8k8.tf32, m16n8k16.bf16, ...": every name, for messages.
std::string matrixOpNames();
// Whether the AMD arch ("gfx942") has the wave ops' MFMA: CDNA 2 (gfx90a)
// and CDNA 3 (gfx940 to gfx942); gfx908 lacks the bf16 form.
bool hasWaveMatrixOps(const std::string& gfxArch);

}  // namespace poot

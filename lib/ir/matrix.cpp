#include "ir/matrix.h"

namespace poot {

const std::vector<MatrixShape>& matrixShapes() {
  static const std::vector<MatrixShape> shapes = {
      {MatrixOp::M16N8K8Tf32, "m16n8k8.tf32", 16, 8, 8, DType::F32, 4, 2, 32},
      {MatrixOp::M16N8K16Bf16, "m16n8k16.bf16", 16, 8, 16, DType::BF16, 8, 4, 32},
      {MatrixOp::M16N8K16F16, "m16n8k16.f16", 16, 8, 16, DType::F16, 8, 4, 32},
      {MatrixOp::M64NK16Bf16, "m64nNk16.bf16", 64, 256, 16, DType::BF16, 0, 0, 128},
      {MatrixOp::M64NK16F16, "m64nNk16.f16", 64, 256, 16, DType::F16, 0, 0, 128},
      {MatrixOp::M16N16K16Bf16, "m16n16k16.bf16", 16, 16, 16, DType::BF16, 4, 4, 64},
      {MatrixOp::M16N16K16F16, "m16n16k16.f16", 16, 16, 16, DType::F16, 4, 4, 64},
  };
  return shapes;
}

const MatrixShape& matrixShape(MatrixOp op) { return matrixShapes()[size_t(op)]; }

std::optional<MatrixOp> matrixOpNamed(const std::string& name) {
  for (const MatrixShape& s : matrixShapes())
    if (name == s.name) return s.op;
  return std::nullopt;
}

bool hasWaveMatrixOps(const std::string& gfxArch) {
  return gfxArch == "gfx90a" || gfxArch == "gfx940" || gfxArch == "gfx941" || gfxArch == "gfx942";
}

std::string matrixOpNames() {
  std::string out;
  for (const MatrixShape& s : matrixShapes()) out += std::string(out.empty() ? "" : ", ") + s.name;
  return out;
}

}  // namespace poot

// Picks the generator for a request: attention forms by op, everything else
// by the schedule kind the planner chose (schedule.h lists the kinds).
#include "codegen/gen/generators.h"

namespace poot {

Expected<kir::Kernel> generateKernel(const GenInput& in) {
  const KernelRequest& r = in.request;
  if (r.op == Op::Attention) return genAttention(in);
  if (r.op == Op::SelectedAttention) return genSelectedAttention(in);
  const std::string& kind = r.schedule.kind;
  if (kind == "elementwise" || kind == "in-place") return genElementwise(in);
  if (kind == "reduce") return genReduce(in);
  if (kind == "fused" || kind == "fused-rows") return genFused(in);
  if (kind == "gemv-mma") return genGemvMma(in);
  if (kind == "gemv" || kind == "gemm" || kind == "gemm-mma" || kind == "matmul-combine") return genMatMul(in);
  if (kind == "rows") return genRows(in);
  if (kind == "guard") return genGuard(in);
  return makeError(ErrorKind::Capability, {}, "no generator for schedule " + kind + " of op " + opName(r.op));
}

}  // namespace poot

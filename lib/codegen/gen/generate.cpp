// The generator registry: one line a kernel family (plan/family.h), its
// kind and what it serves, and the generator that writes its kernels.
#include <algorithm>

#include "codegen/gen/generators.h"

namespace poot {

namespace {

constexpr Generator kGenerators[] = {
    {"decode-mma", Serves::Attention, genDecodeMma},
    {"decode", Serves::Attention, genDecode},
    {"prefill-mma", Serves::Attention, genPrefillMma},
    {"prefill", Serves::Attention, genPrefill},
    {"split-kv-partials", Serves::Attention, genSplitKvPartials},
    {"split-kv-combine", Serves::Attention, genSplitKvCombine},
    {"streaming", Serves::Attention, genStreaming},
    {"streaming", Serves::SelectedAttention, genSelectedAttention},
    {"gemv-mma", Serves::MatMul, genGemvMma},
    {"gemv", Serves::MatMul, genGemv},
    {"gemm-mma", Serves::MatMul, genGemmMma},
    {"gemm", Serves::MatMul, genGemm},
    {"matmul-combine", Serves::MatMul, genMatMulCombine},
    {"routed-gemv", Serves::RoutedExperts, genRoutedGemv},
    {"elementwise", Serves::OtherOps, genElementwise},
    {"in-place", Serves::OtherOps, genElementwise},
    {"reduce", Serves::OtherOps, genReduce},
    {"fused", Serves::OtherOps, genFused},
    {"fused-rows", Serves::OtherOps, genFused},
    {"rows", Serves::OtherOps, genRows},
    {"sample", Serves::OtherOps, genSample},
    {"guard", Serves::OtherOps, genGuard},
};

}  // namespace

std::span<const Generator> generators() { return kGenerators; }

Expected<kir::Kernel> generateKernel(const GenInput& in) {
  const KernelRequest& r = in.request;
  const Serves serves = servesOf(r.op);
  auto it = std::find_if(std::begin(kGenerators), std::end(kGenerators),
                         [&](const Generator& g) { return g.kind == r.schedule.kind && g.serves == serves; });
  if (it == std::end(kGenerators))
    return makeError(ErrorKind::Capability, {},
                     "no generator for schedule " + r.schedule.kind + " of op " + opName(r.op));
  return it->generate(in);
}

}  // namespace poot

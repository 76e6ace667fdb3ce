// The kernel generators: one KernelRequest (plan.h) in, one KIR kernel out.
// A request fixes every shape, attribute and the schedule, so a generator
// bakes them in as constants. The kernel's buffers are the dispatch's
// bindings in order: what it reads, then what it writes (plan.h, Dispatch):
// for most requests the eqn's operands then its results; split-KV partials
// read the operands and write the scratch; the combine reads the scratch and
// writes the results. generateKernel picks the generator of the request's
// kernel family (plan/family.h) from the registry, generators().
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "codegen/kir/kir.h"
#include "ir/diag.h"
#include "plan/family.h"
#include "plan/plan.h"
#include "plan/profile.h"

namespace poot {

struct GenInput {
  const KernelRequest& request;
  const DeviceProfile& device;
  std::string entry;
  std::array<int64_t, 3> grid;  // the grid every dispatch of this kernel launches
};

using GenerateFn = Expected<kir::Kernel> (*)(const GenInput& in);

// One line of the generator registry: the family (plan/family.h) by its kind
// and what it serves, and its generator. Every family of kernelFamilies()
// has one line, and every line a family (test/unit/family_test.cpp).
struct Generator {
  std::string_view kind;
  Serves serves;
  GenerateFn generate;
};
std::span<const Generator> generators();

// The generator of the request's family (its schedule kind and op), or a
// capability error naming them.
Expected<kir::Kernel> generateKernel(const GenInput& in);

// The generators (gen/<family>.cpp):
// Attention, every key form (dense, split, paged), mask, softcap, ALiBi and
// live bound, one generator a family: streaming, split-kv-partials and
// split-kv-combine (attention.cpp), decode, decode-mma, prefill, prefill-mma.
Expected<kir::Kernel> genStreaming(const GenInput& in);
Expected<kir::Kernel> genSplitKvPartials(const GenInput& in);
Expected<kir::Kernel> genSplitKvCombine(const GenInput& in);
Expected<kir::Kernel> genDecode(const GenInput& in);
Expected<kir::Kernel> genDecodeMma(const GenInput& in);
Expected<kir::Kernel> genPrefill(const GenInput& in);
Expected<kir::Kernel> genPrefillMma(const GenInput& in);
// SelectedAttention: the block-selected streaming form.
Expected<kir::Kernel> genSelectedAttention(const GenInput& in);
// Every "elementwise" and "in-place" request: data movement and creation
// (Iota, Constant, Broadcast, Transpose, Slice, Concat, Gather,
// DynamicSlice, DynamicUpdateSlice, ScatterUpdate, Convert, Reshape),
// unary, binary, compare, select and Rope.
Expected<kir::Kernel> genElementwise(const GenInput& in);
Expected<kir::Kernel> genReduce(const GenInput& in);          // ReduceSum/Max/Min
Expected<kir::Kernel> genFused(const GenInput& in);           // fusion groups: fused, fused-rows
Expected<kir::Kernel> genGemv(const GenInput& in);            // gemv (matmul.cpp)
Expected<kir::Kernel> genGemm(const GenInput& in);            // gemm (matmul.cpp)
Expected<kir::Kernel> genGemmMma(const GenInput& in);         // gemm-mma (matmul.cpp)
Expected<kir::Kernel> genMatMulCombine(const GenInput& in);   // matmul-combine (matmul.cpp)
Expected<kir::Kernel> genGemvMma(const GenInput& in);         // gemv-mma
Expected<kir::Kernel> genRoutedGemv(const GenInput& in);      // RoutedExperts: routed-gemv (experts.cpp)
Expected<kir::Kernel> genRows(const GenInput& in);            // TopK, BlockTopK
Expected<kir::Kernel> genSample(const GenInput& in);          // Sample
Expected<kir::Kernel> genGuard(const GenInput& in);           // IndexGuard

}  // namespace poot

// The kernel generators: one KernelRequest (plan.h) in, one KIR kernel out.
// A request fixes every shape, attribute and the schedule, so a generator
// bakes them in as constants. The kernel's buffers are the dispatch's
// bindings in order: what it reads, then what it writes (plan.h, Dispatch):
// for most requests the eqn's operands then its results; split-KV partials
// read the operands and write the scratch; the combine reads the scratch and
// writes the results. generateKernel picks the generator by op and schedule;
// each family lives in its own file.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "codegen/kir/kir.h"
#include "ir/diag.h"
#include "plan/plan.h"
#include "plan/profile.h"

namespace poot {

struct GenInput {
  const KernelRequest& request;
  const DeviceProfile& device;
  std::string entry;
  std::array<int64_t, 3> grid;  // the grid every dispatch of this kernel launches
};

Expected<kir::Kernel> generateKernel(const GenInput& in);

// The families (gen/<family>.cpp):
// Attention: streaming, decode, split-kv-partials and split-kv-combine schedules,
// every key form (dense, split, paged), mask, softcap, ALiBi and live bound.
Expected<kir::Kernel> genAttention(const GenInput& in);
// SelectedAttention: the block-selected streaming form.
Expected<kir::Kernel> genSelectedAttention(const GenInput& in);
// Every "elementwise" request: data movement and creation (Iota, Constant,
// Broadcast, Transpose, Slice, Concat, Gather, DynamicSlice,
// DynamicUpdateSlice, ScatterUpdate, Convert, Reshape), unary, binary,
// compare, select and Rope.
Expected<kir::Kernel> genElementwise(const GenInput& in);
Expected<kir::Kernel> genReduce(const GenInput& in);   // ReduceSum/Max/Min
Expected<kir::Kernel> genFused(const GenInput& in);    // fusion groups: fused, fused-rows
Expected<kir::Kernel> genMatMul(const GenInput& in);   // gemv, gemm, matmul-combine
Expected<kir::Kernel> genGemvMma(const GenInput& in);  // gemv-mma
Expected<kir::Kernel> genRows(const GenInput& in);     // TopK, BlockTopK
Expected<kir::Kernel> genGuard(const GenInput& in);    // IndexGuard

}  // namespace poot

// The pass pipeline, in order: canonicalize -> rope -> ranges ->
// attention-rewrite -> selection -> matmul-operands -> cleanup -> guards-first
// -> fuse.
// Recognition passes need canonical chains; the attention rewrite needs RoPE
// already formed (so its q and k chains end in one eqn) and the value ranges
// that prove lengths and maps; selection runs on what attention left;
// matmul-operands folds weight transposes only once both have read the
// MatMul(q, Transpose(k)) chains they match; cleanup
// removes what the rewrites orphaned; guards-first orders the graph for the
// validation channel (guards before any state write) once no rewrite is
// left; fuse, last, only tags eqns with the kernel that runs them and gives
// fusible readers their own copies of small tables, placed right before
// them, which keeps every guard where guards-first put it.
#include "passes/pass.h"

namespace poot {

const std::vector<Pass>& pipeline() {
  static const std::vector<Pass> passes = {
      {"canonicalize", "fold constants, shorten reshape/broadcast/transpose chains, merge common eqns, drop dead ones",
       runCanonicalize},
      {"rope", "replace the tracer's rotary-embedding chains (rotate-half, interleaved) with Rope", runRope},
      {"ranges", "compute the value ranges of integer values (slots, guards with a witness) for the passes after it",
       runRanges},
      {"attention-rewrite", "replace the tracer's attention chains with Attention (dense, split, paged key; live bound)",
       runAttentionRewrite},
      {"selection", "replace the sparse indexer's block selection and its attention with BlockTopK and SelectedAttention",
       runSelection},
      {"matmul-operands",
       "fold a Transpose of the last two axes and a widening Convert into the MatMul that reads them",
       runMatMulOperands},
      {"cleanup", "remove eqns whose results reach no output, state or validation", runCleanup},
      {"guards-first", "move index guards and what they need ahead of every other eqn", runGuardsFirst},
      {"fuse", "group elementwise chains and the row reductions feeding them into one kernel each", runFuse},
  };
  return passes;
}

const Pass* findPass(const std::string& name) {
  for (const Pass& p : pipeline())
    if (name == p.name) return &p;
  return nullptr;
}

void PassContext::remark(const char* pass, const Graph& g, const Eqn& anchor, std::string message) {
  std::string name = anchor.results.empty() ? "" : "%" + g.value(anchor.results[0]).name;
  remarks.push_back(Remark{pass, anchor.loc, std::move(name), std::move(message)});
}

Status runPipeline(Graph& g, PassContext& ctx, const PipelineOptions& opts) {
  for (const Pass& p : pipeline()) {
    auto changed = p.run(g, ctx);
    if (!changed) return changed.error();
    if (auto s = verify(g); !s)
      return makeError(s.error().kind, s.error().loc,
                       std::string("internal: pass '") + p.name + "' broke the graph: " + s.error().message);
    if (opts.afterPass) opts.afterPass(p, g, *changed);
    if (opts.stopAfter == p.name) break;
  }
  return ok();
}

}  // namespace poot

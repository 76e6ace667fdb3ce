// ranges: computes the value ranges of the graph (lib/analysis/ranges.h)
// into the PassContext, for the passes after it: the attention rewrite proves
// a live length 1 <= len <= Lk and a paged read map within the pool from
// them. It never changes the graph. rangesFor is how a later pass asks for
// them: when the graph changed since (or the pass runs on its own, as in a
// unit test), the ranges are computed again.
#include "passes/pass.h"

namespace poot {

const ValueRanges& rangesFor(const Graph& g, PassContext& ctx) {
  if (!ctx.ranges || !ctx.ranges->isFor(g)) ctx.ranges = computeRanges(g);
  return *ctx.ranges;
}

Expected<bool> runRanges(Graph& g, PassContext& ctx) {
  ctx.ranges = computeRanges(g);
  return false;
}

}  // namespace poot

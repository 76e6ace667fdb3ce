// Read-only pattern helpers of the attention rewrite and the selection pass:
// what defines a value, splat constants, reshapes that only add or drop unit
// axes, Iota index vectors, the GQA repeat_kv chain, the paged view (Gather
// through the read map, then Transpose) and the live predicate t < len[b].
// Each recognizes exactly the primitive chains lib/trace/ops.cpp emits (with
// the equivalent spellings noted at each helper) and never edits the graph.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace poot::match {

// The eqn defining v, or nullptr for a parameter.
const Eqn* def(const Graph& g, ValueId v);
// The eqn defining v when it is an `op`, else nullptr.
const Eqn* defOp(const Graph& g, ValueId v, Op op);

// The users of every value (rewrite.h's computeUsers), with lookups.
struct Users {
  const Graph& g;
  std::vector<std::vector<int32_t>> of;
  explicit Users(const Graph& graph);
  // The first eqn (in graph order) that uses v with op `op` and for which
  // `accept` holds; nullptr when none does.
  template <class F>
  const Eqn* find(ValueId v, Op op, F accept) const {
    for (int32_t i : of[size_t(v)]) {
      const Eqn& e = g.eqns[size_t(i)];
      if (e.op == op && accept(e)) return &e;
    }
    return nullptr;
  }
};

// Whether two shapes hold the same non-unit sizes in the same order, so a
// Reshape between them only adds or drops axes of size 1.
bool isUnitReshape(const Shape& a, const Shape& b);
// Follows Reshape eqns that only add or drop unit axes back to their source.
ValueId peelUnitReshapes(const Graph& g, ValueId v);
// The same, stopping at the first value of the given shape (or where the
// unit reshapes end).
ValueId peelTo(const Graph& g, ValueId v, const Shape& shape);

// The value of a splat constant: a Constant (through Reshape and Broadcast)
// whose values are all equal.
std::optional<double> splat(const Graph& g, ValueId v);

// n when v is, through unit reshapes, an integer Iota counting 0..n-1 along
// its only axis longer than 1 (or a single element, n = 1).
std::optional<int64_t> iotaLength(const Graph& g, ValueId v);

// The GQA repeat: x = Reshape(Broadcast(Reshape(base [B,H,T,D]) [B,H,1,T,D])
// [B,H,n,T,D]) [B,H*n,T,D]. Without the chain, {x, 1}.
struct Repeat {
  ValueId base;
  int64_t n;
};
Repeat repeatOf(const Graph& g, ValueId x);

// The paged view of a pool: Transpose(Gather(pool [S,H,D], read [B,T],
// axis 0) [B,T,H,D], perm [0,2,1,3]) [B,H,T,D].
struct PagedView {
  ValueId pool, read;
};
std::optional<PagedView> pagedView(const Graph& g, ValueId x);

// The live predicate: cond bool of rank 4 with B on axis 0, Lk on `keyAxis`
// and 1 elsewhere, a unit reshape of active [B, Lk] = Lt(kpos [1, Lk],
// len [B, 1]) (or Gt(len, kpos)) where kpos is an Iota 0..Lk-1 and len [B] an
// integer value. Returns len.
std::optional<ValueId> liveLength(const Graph& g, ValueId cond, int keyAxis, int64_t B, int64_t Lk);

// A Select(cond, x, c) keeping x where cond holds and the splat constant c
// elsewhere.
struct SelectOf {
  ValueId cond, kept;
  double other;
};
std::optional<SelectOf> selectOf(const Graph& g, ValueId v);

// The in-graph causal mask of the dense families (lib/trace/ops.cpp
// buildMask), seen from the scores [B, H, Lq, Lk] it is added to:
//   mask = Select(visible, 0, -inf), through unit reshapes and broadcasts,
//   visible = Le(kpos, qpos) (or Ge(qpos, kpos)), optionally And-ed with the
//   window Gt(kpos, Sub(qpos, W)) (or Lt(Sub(qpos, W), kpos)) with W a splat
//   integer >= 1, in either order,
// where kpos is an i32 Iota counting the keys (its axis lands on the key axis
// of the scores) and qpos an i32 value whose non-unit axes land only on the
// batch and query axes (the same value in both compares). Axes are followed
// through the implicit broadcasting of Add, Select and the compares, Broadcast
// eqns and reshapes that only add or drop unit axes, so a mask that means
// something else under broadcasting is never taken for a causal one.
struct CausalMask {
  ValueId positions = -1;  // qpos as the graph has it
  bool perBatch = false;   // an axis of positions lands on the batch axis (size B)
  bool perQuery = false;   // one lands on the query axis (size Lq); after perBatch's
  int64_t window = 0;      // 0: none
};
struct CausalMatch {
  std::optional<CausalMask> mask;
  std::string why;  // when mask is empty: which check declined
};
CausalMatch causalMask(const Graph& g, ValueId mask, const Shape& scores);

// The one axis (normalized) named by an eqn's `axis` attribute for a value
// of the given rank.
std::optional<int64_t> axisOf(const Eqn& e, int64_t rank);

}  // namespace poot::match

// Read-only pattern helpers of the attention rewrite and the selection pass:
// what defines a value, splat constants, reshapes that only add or drop unit
// axes, Iota index vectors, the GQA repeat_kv chain, the paged view (Gather
// through the read map, then Transpose) and the live predicate t < len[b].
// Each recognizes exactly the primitive chains lib/trace/ops.cpp emits (with
// the equivalent spellings noted at each helper) and never edits the graph.
#pragma once

#include <cstdint>
#include <optional>
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

// The one axis (normalized) named by an eqn's `axis` attribute for a value
// of the given rank.
std::optional<int64_t> axisOf(const Eqn& e, int64_t rank);

}  // namespace poot::match

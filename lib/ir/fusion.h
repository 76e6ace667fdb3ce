// Fusion groups: eqns that carry the same `fusion` attribute (ops.h,
// fusibleOp) run as one kernel. The graph means exactly what it means
// without the tags (the oracle ignores them); a tag only says which eqns one
// kernel computes, so the values a group uses only inside itself get no
// buffer. The fuse pass (passes/fuse.cpp) forms the groups; these are the
// rules every group keeps, which the verifier checks, so a tagged graph
// written by hand is held to them too:
//   - a member has one result, which is not a state's new value nor a
//     validation witness (a two-byte float member computes in f32 and its
//     kernel rounds its result to the dtype, as the oracle rounds it);
//   - but the root of a group without reductions may write a state in
//     place: a DynamicUpdateSlice whose result is the new value of the
//     state it reads (writesInPlace; a ScatterUpdate stays its own kernel). The members then compute its update;
//     the state and the start are inputs, the group's space is the
//     update's shape, and the root's result (the state) is an output of
//     the state's shape;
//   - the group runs where its last member (its root) stands: a member's
//     result read by an eqn outside the group is read after the root;
//   - its outputs (member results read outside the group or exported) all
//     have the root's shape, or, in a row group, the row shape or one value
//     a row;
//   - a group with reductions is a row group: each reduces the last axis
//     with keepdim, in a float dtype (f32 partials) or i32, an operand of the one row shape S =
//     [R..., N]; every
//     member computed from a reduction is elementwise (unary, binary,
//     compare, select, convert) or another reduction, with a result that
//     broadcasts to S, so a reduction's value is the same for every element
//     of its row (softmax: a max, then a sum of exp(x - max));
//   - a group of MatMuls is a product group: every member reads the same
//     a [..., M, K] and a b of rank 2 (a weight), all with the same transpose_b
//     and the same dtypes of b and of the result, and every member's result
//     is an output (one kernel may compute the products side by side, so
//     the one read of a serves them all and their columns fill one launch:
//     the planner does so for a gemv, docs/planner.md).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/graph.h"

namespace poot {

struct FusionGroup {
  int64_t id = 0;
  std::vector<int32_t> members;  // eqn indices, increasing; the last is the root
  std::vector<ValueId> inputs;   // values members read that no member defines, in first-use order
  std::vector<ValueId> outputs;  // member results read outside the group or exported, in eqn order
  bool rows = false;             // it has reductions
  bool products = false;         // its members are MatMuls (a product group)
  Shape space;                   // rows: S; otherwise the root's result shape

  int32_t root() const { return members.back(); }
};

// The eqn's fusion id, or -1 when it has none.
int64_t fusionId(const Eqn& e);

// What checking a group needs of its graph, gathered once: each value's
// readers, and which values leave the graph or may not be members' results.
struct FusionContext {
  explicit FusionContext(const Graph& g);
  const Graph& g;
  std::vector<std::vector<int32_t>> users;  // value -> eqns reading it, increasing
  std::vector<uint8_t> exported;            // outputs
  std::vector<uint8_t> forbidden;           // states' new values, validation witnesses
};

// Given a group's members (sorted), fills in rows, space, inputs and
// outputs and checks the rules above; the fuse pass asks this of every
// group it considers, the verifier of every group the graph has.
Status completeGroup(const FusionContext& c, FusionGroup& grp);

// Every group of g, ordered by root, or the first rule one of them breaks
// (located at the eqn that breaks it).
Expected<std::vector<FusionGroup>> fusionGroups(const Graph& g);

// Whether an eqn's result has its operand's row-major layout, so it can be
// the same memory (a view, plan/buffers.h): a Reshape always; a Broadcast
// that adds no elements (only axes of size 1); a Transpose that keeps the
// order of the axes larger than 1.
bool keepsLayout(const Graph& g, const Eqn& e);

// Whether e is a DynamicUpdateSlice or ScatterUpdate whose result is the
// new value of the state it reads (operand 0): its buffer is the state's
// (donated, plan/buffers.h), so only the updated elements need writing.
bool writesInPlace(const Graph& g, const Eqn& e);

// Whether op is a reduction (ReduceSum, ReduceMax, ReduceMin): the op
// table's Reduce class.
inline bool isReduction(Op op) { return opInfo(op).cls == OpClass::Reduce; }

// Whether `s` broadcasts to `to` (numpy rules, aligned at the right).
bool broadcastsTo(const Shape& s, const Shape& to);
// S with its last axis 1: the shape of one value a row.
Shape rowShape(const Shape& s);

}  // namespace poot

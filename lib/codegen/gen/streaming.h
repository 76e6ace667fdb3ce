// The streaming attention body that the Attention and SelectedAttention
// generators share (private to gen/): each lane's online-softmax state
// (o[dv], m, l) in workgroup memory, the lane loop that folds keys into it,
// and the fold that merges several such states (the lanes of a workgroup, or
// the split-KV partials of a row) into an output. A key whose score is -inf
// adds exactly zero weight and its value row is never read; a state that saw
// no key is the neutral (0, -inf, 0) and weighs exactly zero in a fold; a
// fold of only neutral states is 0 / 0 = NaN, as the oracle's softmax gives.
#pragma once

#include <cstdint>
#include <functional>

#include "codegen/kir/builder.h"
#include "ir/diag.h"
#include "ir/ops.h"
#include "plan/plan.h"

namespace poot::attn {

using kir::Builder;
using kir::V;

// How the lane loop reads key t (i32) of the current row: where it lives
// (an i32 the other two are handed, computed once per key: a pool row, or a
// key row of the dense layout), its final score (f32, after scale, softcap
// and mask) and element d of its value row.
struct KeyReader {
  std::function<V(V t)> row;
  std::function<V(V t, V row)> score;
  std::function<V(V row, V d)> value;
};

// `count` states, state i read through m(i), l(i) and o(i, c).
struct States {
  int64_t count;
  std::function<V(V i)> m, l;
  std::function<V(V i, V c)> o;
};

// One workgroup's lane states: o[lanes][dv], m[lanes], l[lanes] in workgroup
// memory, lanes * (dv + 2) floats, exactly the streaming schedule's memory.
class LaneStates {
 public:
  LaneStates(Builder& b, int64_t lanes, int64_t dv);

  // This lane's state to the neutral (0, -inf, 0).
  void begin(V lane);
  // The lane loop: keys t = lo + lane, lo + lane + lanes, ... while t < hi,
  // each folded into this lane's state by the online softmax update.
  void stream(V lo, V hi, const KeyReader& keys);
  // This lane's m and l to workgroup memory, then the workgroup's barrier.
  void publish();

  // The lanes' states, to fold after publish().
  States states();

 private:
  Builder& b_;
  int64_t lanes_, dv_;
  int32_t o_, m_, l_;       // the shared arrays
  int32_t mv_ = -1, lv_ = -1;  // this lane's running m and l (variables)
  V lane_ = -1;
};

// The fold of `s` as thread `lane` of `lanes` emits it: M = max m_i, weights
// f_i = exp(m_i - M) (exactly 0 for a state with m_i = -inf), den = sum l_i f_i,
// and for each channel c = lane, lane + lanes, ... < dv, num = sum o_i[c] f_i,
// handed to channel(c, num, den). Returns M and den.
struct Folded {
  V max, den;
};
Folded foldStates(Builder& b, const States& s, V lane, int64_t lanes, int64_t dv,
                  const std::function<void(V c, V num, V den)>& channel);

// The fold written out normalized: out[at + c] = num / den for the thread's
// channels.
void foldInto(Builder& b, const States& s, V lane, int64_t lanes, int64_t dv, int32_t out, V at);

// sum x[xAt + d] * y[yAt + d] over d in [0, n), sequential from acc (f32).
V dotProduct(Builder& b, int32_t x, V xAt, int32_t y, V yAt, int64_t n, V acc);

// Loads an integer element, clamps it into [lo, hi] in its own width and
// gives it as i32 (index operands: len, read, ids, qpos).
V loadIndex(Builder& b, int32_t buffer, V index, int64_t lo, int64_t hi);

// The score transform both ops share: dot * scale, then cap * tanh(s / cap)
// when the request has a softcap, in the oracle's order.
V transformScore(Builder& b, const KernelRequest& r, V dot);

// The request's attributes, read as the type rules read them.
inline TypeQuery attrsOf(const KernelRequest& r) { return TypeQuery{r.operands, &r.attrs, r.results}; }

}  // namespace poot::attn

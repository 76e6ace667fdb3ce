// How the shared streaming body is written in KIR. Each lane keeps its
// running m and l in variables and its o row in workgroup memory; publish()
// stores m and l beside it. The online update runs only for a key whose
// score is not -inf (a NaN score passes and makes l NaN, which no later key
// and no fold weight can undo, so the row is NaN as in the oracle), so the
// rescale exp(m - m_new) is 0 while the lane has seen nothing and never the
// NaN of exp(-inf - -inf). The fold of many states recomputes each state's
// weight per channel rather than holding it: the workgroup memory is
// exactly the lane states the planner sized; a fold of few holds them in
// registers.
#include "codegen/gen/streaming.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "plan/schedule.h"

namespace poot::attn {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kFoldUnroll = 16;  // foldStates: states read at once
}  // namespace

LaneStates::LaneStates(Builder& b, int64_t lanes, int64_t dv) : b_(b), lanes_(lanes), dv_(dv) {
  o_ = b.shared("o", kir::Scalar::F32, lanes * dv);
  m_ = b.shared("m", kir::Scalar::F32, lanes);
  l_ = b.shared("l", kir::Scalar::F32, lanes);
}

void LaneStates::begin(V lane) {
  lane_ = lane;
  V row = b_.mul(lane, b_.i32(dv_));
  b_.forRange(b_.i32(0), b_.i32(dv_), 1, [&](V d) { b_.sharedStore(o_, b_.add(row, d), b_.f32(0)); });
  mv_ = b_.var(kir::Scalar::F32, b_.f32(-kInf));
  lv_ = b_.var(kir::Scalar::F32, b_.f32(0));
}

void LaneStates::stream(V lo, V hi, const KeyReader& keys) {
  b_.forRange(b_.add(lo, lane_), hi, lanes_, [&](V t) {
    V at = keys.row(t);
    V s = keys.score(t, at);
    b_.ifThen(b_.ne(s, b_.f32(-kInf)), [&] {
      V m = b_.get(mv_);
      V mNew = b_.max(m, s);
      V rescale = b_.exp(b_.sub(m, mNew));
      V w = b_.exp(b_.sub(s, mNew));
      b_.set(lv_, b_.add(b_.mul(b_.get(lv_), rescale), w));
      V row = b_.mul(lane_, b_.i32(dv_));
      b_.forRange(b_.i32(0), b_.i32(dv_), 1, [&](V d) {
        V cell = b_.add(row, d);
        V o = b_.sharedLoad(o_, cell);
        b_.sharedStore(o_, cell, b_.add(b_.mul(o, rescale), b_.mul(w, keys.value(at, d))));
      });
      b_.set(mv_, mNew);
    });
  });
}

void LaneStates::publish() {
  b_.sharedStore(m_, lane_, b_.get(mv_));
  b_.sharedStore(l_, lane_, b_.get(lv_));
  b_.barrier();
}

States LaneStates::states() {
  return States{lanes_, [this](V i) { return b_.sharedLoad(m_, i); }, [this](V i) { return b_.sharedLoad(l_, i); },
                [this](V i, V c) { return b_.sharedLoad(o_, b_.add(b_.mul(i, b_.i32(dv_)), c)); }};
}

Folded foldStates(Builder& b, const States& s, V lane, int64_t lanes, int64_t dv,
                  const std::function<void(V c, V num, V den)>& channel) {
  auto weightOf = [&](V m, V M) { return b.select(b.eq(m, b.f32(-kInf)), b.f32(0), b.exp(b.sub(m, M))); };
  V M = -1, total = -1;
  std::function<V(V c)> numerator;  // channel c's weighted sum over the states
  std::vector<V> held;              // few states: each one's weight
  if (s.count <= kFoldUnroll) {
    // Few states (a split-KV combine's splits, a decode's key slices):
    // straight-line code that reads each m and l once and holds each weight,
    // so the loads are in flight together and no channel recomputes an exp
    // (the combine of 16 splits ran 974 instructions a warp, most of them
    // the 48 exps, in 9.4 us at B 1 x 64k).
    std::vector<V> m;
    M = b.f32(-kInf);
    for (int64_t i = 0; i < s.count; ++i) m.push_back(s.m(b.i32(i))), M = b.max(M, m.back());
    total = b.f32(0);
    for (int64_t i = 0; i < s.count; ++i) {
      held.push_back(weightOf(m[size_t(i)], M));
      total = b.add(total, b.mul(s.l(b.i32(i)), held.back()));
    }
    numerator = [&](V c) {
      V num = b.f32(0);
      for (int64_t i = 0; i < s.count; ++i) num = b.add(num, b.mul(s.o(b.i32(i), c), held[size_t(i)]));
      return num;
    };
  } else {
    // Many (the streaming lanes): loops kFoldUnroll states a step, so that
    // the loads of each step are in flight together, each weight recomputed
    // where it is used.
    int32_t mx = b.var(kir::Scalar::F32, b.f32(-kInf));
    b.forUnrolled(s.count, kFoldUnroll, [&](V i) { b.set(mx, b.max(b.get(mx), s.m(i))); });
    M = b.get(mx);
    int32_t den = b.var(kir::Scalar::F32, b.f32(0));
    b.forUnrolled(s.count, kFoldUnroll,
                  [&](V i) { b.set(den, b.add(b.get(den), b.mul(s.l(i), weightOf(s.m(i), M)))); });
    total = b.get(den);
    numerator = [&](V c) {
      int32_t num = b.var(kir::Scalar::F32, b.f32(0));
      b.forUnrolled(s.count, kFoldUnroll,
                    [&](V j) { b.set(num, b.add(b.get(num), b.mul(s.o(j, c), weightOf(s.m(j), M)))); });
      return b.get(num);
    };
  }
  // A lane's channels one after another without a loop; a lane past dv
  // skips its channel (the interpreter's tests would run its copies too).
  for (int64_t i = 0; i < ceilDiv(dv, lanes); ++i) {
    V c = b.add(lane, b.i32(i * lanes));
    auto fold = [&] { channel(c, numerator(c), total); };
    if (dv % lanes == 0) fold();
    else b.ifThen(b.lt(c, b.i32(dv)), fold);
  }
  return Folded{M, total};
}

void foldInto(Builder& b, const States& s, V lane, int64_t lanes, int64_t dv, int32_t out, V at) {
  foldStates(b, s, lane, lanes, dv, [&](V c, V num, V den) { b.store(out, b.add(at, c), b.div(num, den)); });
}

V dotProduct(Builder& b, int32_t x, V xAt, int32_t y, V yAt, int64_t n, V acc) {
  int32_t sum = b.var(kir::Scalar::F32, acc);
  b.forRange(b.i32(0), b.i32(n), 1, [&](V d) {
    b.set(sum, b.add(b.get(sum), b.mul(b.load(x, b.add(xAt, d)), b.load(y, b.add(yAt, d)))));
  });
  return b.get(sum);
}

V loadIndex(Builder& b, int32_t buffer, V index, int64_t lo, int64_t hi) {
  V x = b.load(buffer, index);
  kir::Scalar t = b.typeOf(x);
  x = b.min(b.max(x, b.constant(t, double(lo))), b.constant(t, double(hi)));
  return b.convert(x, kir::Scalar::I32);
}

V transformScore(Builder& b, const KernelRequest& r, V dot) {
  TypeQuery q = attrsOf(r);
  V s = b.mul(dot, b.f32(q.attrFloat("scale")));
  if (q.attr("softcap")) {
    V cap = b.f32(q.attrFloat("softcap"));
    s = b.mul(b.tanh(b.div(s, cap)), cap);
  }
  return s;
}

}  // namespace poot::attn

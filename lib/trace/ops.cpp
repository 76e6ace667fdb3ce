// The primitive decompositions of ops.h. Attention is one core
// (attention_core) fed by cache_update, which hides the KV layout (fixed
// DynamicUpdateSlice or paged ScatterUpdate + Gather) and the live row
// selects; the named forms only check their precondition and call it. Masks
// and the live length are built once per step and shared by every layer.
// Constants are f32 unless the value they combine with has another dtype.
// Names and eqn order must not depend on the compiler, so no call here passes
// two eqn-building expressions as arguments of one call (their evaluation
// order is unspecified): each is built into a local first.
#include "trace/ops.h"

#include <cmath>
#include <limits>
#include <numbers>

#include "ir/budget.h"

namespace poot::trace::ops {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A rank-0 constant in x's dtype.
ValueId scalarLike(Builder& b, ValueId x, double v) { return b.scalar(v, b.dtype(x)); }

ValueId castTo(Builder& b, ValueId x, DType t) { return b.dtype(x) == t ? x : b.convert(x, t); }

// The last '.'-separated part of a value's name: "layers.0.k_cache" -> "k_cache".
std::string lastPart(const Builder& b, ValueId v) {
  if (v < 0) return "cache";
  const std::string& n = b.graph().value(v).name;
  size_t dot = n.rfind('.');
  return dot == std::string::npos ? n : n.substr(dot + 1);
}

bool paged(const Step& s) { return s.spec.kv == KvLayout::Paged; }

void checkSpec(Builder& b, const StepSpec& sp) {
  auto usage = [&](std::string m) { b.fail(std::move(m), ErrorKind::Usage); };
  if (sp.batch < 1) usage("--batch must be at least 1, got " + std::to_string(sp.batch));
  if (sp.tokens < 1) usage("--tokens must be at least 1, got " + std::to_string(sp.tokens));
  if (sp.capacity < 1) usage("--capacity must be at least 1, got " + std::to_string(sp.capacity));
  if (sp.tokens > sp.capacity)
    usage("--tokens " + std::to_string(sp.tokens) + " is more than the capacity " + std::to_string(sp.capacity));
  if (sp.kv == KvLayout::Paged && sp.capacity % kBlockSize != 0)
    usage("--capacity " + std::to_string(sp.capacity) + " must be a multiple of the paged block size " +
          std::to_string(kBlockSize));
  if (sp.poolSlots < 0) usage("the pool must have at least 1 slot, got " + std::to_string(sp.poolSlots));
  if (sp.sequences > 0 && (sp.kv != KvLayout::Paged || sp.tokens != 1 || sp.sequences > sp.batch))
    usage("a mixed step is paged, one token a row, over at most as many sequences as tokens");
}

// len = pos + L for every batch row (each row's own pos when paged),
// bounded by IndexGuard{1, cap} whose witness is a validation output;
// active[b, t] = t < len[b].
void declareLive(Builder& b, Step& s) {
  const StepSpec& sp = s.spec;
  ValueId sum = b.add(s.pos, b.scalar(double(sp.tokens), DType::I32));
  ValueId len = b.name(paged(s) ? sum : b.broadcast(sum, {sp.batch}), "len");
  std::vector<ValueId> g = b.indexGuard(len, 1, sp.capacity);
  s.len = b.name(g[0], "len.guarded");
  b.validation(b.name(g[1], "len.ok"));
  ValueId kpos = b.reshape(b.name(b.iota(Type{DType::I32, {sp.capacity}}, 0), "kpos"), {1, sp.capacity});
  s.active = b.name(b.lt(kpos, b.reshape(s.len, {sp.batch, 1})), "active");
}

}  // namespace

Step begin_step(Builder& b, const StepSpec& spec) {
  Step s;
  s.spec = spec;
  const bool mixed = spec.sequences > 0;
  if (s.spec.poolSlots == 0) s.spec.poolSlots = (mixed ? spec.sequences : spec.batch) * spec.capacity;
  checkSpec(b, s.spec);
  const StepSpec& sp = s.spec;
  Shape posShape = paged(s) ? Shape{sp.batch} : Shape{};
  s.pos = b.slot("pos", Type{DType::I32, posShape}, 0, std::max<int64_t>(0, sp.capacity - sp.tokens));
  if (paged(s)) {
    s.write = b.slot("write", Type{DType::I32, {sp.batch * sp.tokens}}, -1, sp.poolSlots - 1);
    s.read = b.slot("read", Type{DType::I32, {mixed ? sp.sequences : sp.batch, sp.capacity}}, 0, sp.poolSlots - 1);
  }
  if (paged(s) && mixed) {
    ValueId row = b.slot("row", Type{DType::I32, {sp.batch}}, 0, sp.sequences - 1);
    s.read = b.name(b.gather(s.read, row, 0), "read.tokens");
    s.sample = b.slot("sample", Type{DType::I32, {sp.sequences}}, 0, sp.batch - 1);
  }
  ValueId rows = b.name(b.iota(Type{DType::I32, {sp.tokens}}, 0), "rows");
  if (paged(s)) {
    ValueId start = b.reshape(s.pos, {sp.batch, 1});
    ValueId offsets = b.reshape(rows, {1, sp.tokens});
    s.positions = b.name(b.add(offsets, start), "positions");
  } else {
    s.positions = b.name(b.add(rows, s.pos), "positions");
  }
  if (sp.live) declareLive(b, s);
  return s;
}

Shape query_column(const Step& s) {
  return paged(s) ? Shape{s.spec.batch, s.spec.tokens, 1} : Shape{s.spec.tokens, 1};
}

// ----- KV caches -----

ValueId declare_cache(Builder& b, const Step& s, const std::string& name, int64_t heads, int64_t dim) {
  const StepSpec& sp = s.spec;
  Shape shape = paged(s) ? Shape{sp.poolSlots, heads, dim} : Shape{sp.batch, heads, sp.capacity, dim};
  return b.state(name, Type{sp.kvDtype, shape});
}

namespace {

// Fixed: the new rows at slot `pos` of the position axis; the view is the cache.
ValueId writeFixed(Builder& b, Step& s, ValueId cache, ValueId rows, const std::string& local) {
  ValueId next = b.name(b.dynamicUpdateSlice(cache, rows, s.pos, 2), local);
  b.stateOut(cache, next);
  return next;
}

// Paged: the rows scattered into the pool through `write`, then every
// batch row's positions gathered back through `read` as [B, H, cap, D].
ValueId writePaged(Builder& b, Step& s, ValueId pool, ValueId rows, const std::string& local) {
  const StepSpec& sp = s.spec;
  int64_t heads = b.dim(rows, 1), dim = b.dim(rows, 3);
  ValueId byToken = b.transpose(rows, {0, 2, 1, 3});
  ValueId flat = b.reshape(byToken, {sp.batch * sp.tokens, heads, dim});
  ValueId next = b.name(b.scatterUpdate(pool, s.write, flat), local);
  b.stateOut(pool, next);
  ValueId gathered = b.gather(next, s.read, 0);  // [B, cap, H, D]
  return b.name(b.transpose(gathered, {0, 2, 1, 3}), local + "_view");
}

}  // namespace

ValueId cache_update(Builder& b, Step& s, ValueId cache, ValueId rows) {
  std::string local = lastPart(b, cache);
  DType dt = b.dtype(rows);
  rows = castTo(b, rows, s.spec.kvDtype);
  ValueId view = paged(s) ? writePaged(b, s, cache, rows, local) : writeFixed(b, s, cache, rows, local);
  if (s.len != kNone) {
    // A true select, so a NaN in an unused row cannot reach the output.
    ValueId active = b.reshape(s.active, {s.spec.batch, 1, s.spec.capacity, 1});
    view = b.name(b.select(active, view, scalarLike(b, view, 0.0)), local + "_live");
  }
  return castTo(b, view, dt);
}

KvCache declare_kv(Builder& b, const Step& s, const std::string& prefix, int64_t kvHeads, int64_t keyDim,
                   int64_t valueDim) {
  const char* suffix = paged(s) ? "_pool" : "_cache";
  return KvCache{declare_cache(b, s, prefix + "k" + suffix, kvHeads, keyDim),
                 declare_cache(b, s, prefix + "v" + suffix, kvHeads, valueDim)};
}

SplitKvCache declare_split_kv(Builder& b, const Step& s, const std::string& prefix, int64_t heads, int64_t nopeDim,
                              int64_t ropeDim, int64_t valueDim) {
  const char* suffix = paged(s) ? "_pool" : "_cache";
  return SplitKvCache{declare_cache(b, s, prefix + "k_nope" + suffix, heads, nopeDim),
                      declare_cache(b, s, prefix + "k_pe" + suffix, 1, ropeDim),
                      declare_cache(b, s, prefix + "v" + suffix, heads, valueDim)};
}

// ----- attention -----

ValueId repeat_kv(Builder& b, ValueId x, int64_t n_rep) {
  if (n_rep == 1) return x;
  int64_t B = b.dim(x, 0), H = b.dim(x, 1), T = b.dim(x, 2), D = b.dim(x, 3);
  ValueId r = b.reshape(x, {B, H, 1, T, D});
  ValueId bc = b.broadcast(r, {B, H, n_rep, T, D});
  return b.reshape(bc, {B, H * n_rep, T, D});
}

namespace {

bool needsMask(const Step& s, const AttentionSpec& spec) {
  bool causalRows = spec.causal && (s.len == kNone || s.spec.tokens > 1);
  return causalRows || spec.window > 0 || spec.bias != kNone;
}

// visible[j, t] as bool[L, cap] (paged: bool[B, L, cap], each row's own
// positions): t <= pos + j (causal) and t > pos + j - window.
ValueId visibility(Builder& b, Step& s, const AttentionSpec& spec) {
  const StepSpec& sp = s.spec;
  ValueId kpos = b.reshape(b.iota(Type{DType::I32, {sp.capacity}}, 0), {1, sp.capacity});
  ValueId qpos = b.reshape(s.positions, query_column(s));
  ValueId visible = kNone;
  if (spec.causal) visible = b.le(kpos, qpos);
  if (spec.window > 0) {
    ValueId start = b.sub(qpos, b.scalar(double(spec.window), DType::I32));
    ValueId inWindow = b.gt(kpos, start);
    visible = visible == kNone ? inWindow : b.logicalAnd(visible, inWindow);
  }
  return visible;
}

ValueId buildMask(Builder& b, Step& s, const AttentionSpec& spec) {
  const StepSpec& sp = s.spec;
  ValueId mask = kNone;
  if (ValueId visible = visibility(b, s, spec); visible != kNone) {
    ValueId zero = b.scalar(0.0, sp.dtype);
    ValueId hidden = b.scalar(-kInf, sp.dtype);
    ValueId row = b.select(visible, zero, hidden);
    mask = b.reshape(row, {paged(s) ? sp.batch : 1, 1, sp.tokens, sp.capacity});
  }
  if (spec.bias != kNone) {
    ValueId bias = castTo(b, spec.bias, sp.dtype);
    mask = mask == kNone ? bias : b.add(mask, bias);  // head axis becomes Hq
  }
  Shape want{sp.batch, b.dim(mask, 1), sp.tokens, sp.capacity};
  if (b.shape(mask) != want) mask = b.broadcast(mask, want);
  return mask;
}

}  // namespace

ValueId attention_mask(Builder& b, Step& s, const AttentionSpec& spec) {
  if (!needsMask(s, spec)) return kNone;
  int64_t window = spec.window > 0 ? spec.window : 0;
  auto key = std::make_tuple(spec.causal ? window : -1 - window, spec.bias);
  if (auto it = s.masks.find(key); it != s.masks.end()) return it->second;
  std::string name = "mask" + (window > 0 ? ".window" + std::to_string(window) : std::string()) +
                     (spec.causal ? "" : ".noncausal");
  TopLevel top(b);  // shared by every layer, so named outside any
  ValueId mask = b.name(buildMask(b, s, spec), name);
  s.masks[key] = mask;
  return mask;
}

namespace {

// Max-subtracted softmax over the last axis.
ValueId softmax(Builder& b, ValueId scores) {
  ValueId m = b.reduceMax(scores, -1, true);
  ValueId xs = b.sub(scores, m);
  ValueId ex = b.exp(xs);
  ValueId sum = b.reduceSum(ex, -1, true);
  return b.name(b.div(ex, sum), "probs");
}

}  // namespace

ValueId attention_core(Builder& b, Step& s, ValueId q, ValueId k, ValueId v, const AttentionSpec& spec) {
  int64_t hq = b.dim(q, 1), hkv = b.dim(k, 1);
  if (hkv < 1 || hq % hkv != 0) {
    b.fail("tracing attention: " + std::to_string(hkv) + " key heads do not divide " + std::to_string(hq) +
           " query heads");
    hkv = hq;
  }
  ValueId kx = repeat_kv(b, k, hq / hkv);
  ValueId vx = repeat_kv(b, v, hq / hkv);
  ValueId kt = b.transpose(kx, {0, 1, 3, 2});
  ValueId scores = b.name(b.matmul(q, kt), "scores");
  scores = b.mul(scores, scalarLike(b, scores, spec.scale));
  if (spec.softcap) scores = softcap(b, scores, *spec.softcap);
  if (ValueId mask = attention_mask(b, s, spec); mask != kNone) scores = b.add(scores, mask);
  if (s.len != kNone) {
    ValueId active = b.reshape(s.active, {s.spec.batch, 1, 1, s.spec.capacity});
    scores = b.select(active, scores, scalarLike(b, scores, -kInf));
  }
  // The softmax runs in f32 whatever the scores' dtype, as transformers
  // computes it (softmax(..., dtype=torch.float32).to(query.dtype)).
  ValueId probs = castTo(b, softmax(b, castTo(b, scores, DType::F32)), b.dtype(scores));
  return b.name(b.matmul(probs, vx), "out");
}

ValueId attention(Builder& b, Step& s, ValueId q, ValueId kNew, ValueId vNew, const KvCache& cache,
                  const AttentionSpec& spec) {
  ValueId k = cache_update(b, s, cache.k, kNew);
  ValueId v = cache_update(b, s, cache.v, vNew);
  return attention_core(b, s, q, k, v, spec);
}

ValueId attention_masked(Builder& b, Step& s, ValueId q, ValueId kNew, ValueId vNew, const KvCache& cache,
                         const AttentionSpec& spec) {
  if (s.spec.tokens != 1 || s.spec.live)
    b.fail("tracing: attention_masked is the decode form (one token, no live bound)");
  return attention(b, s, q, kNew, vNew, cache, spec);
}

ValueId attention_prefill(Builder& b, Step& s, ValueId q, ValueId kNew, ValueId vNew, const KvCache& cache,
                          const AttentionSpec& spec) {
  if (s.spec.live) b.fail("tracing: attention_prefill takes a step without a live bound (use attention_live)");
  return attention(b, s, q, kNew, vNew, cache, spec);
}

ValueId attention_live(Builder& b, Step& s, ValueId q, ValueId kNew, ValueId vNew, const KvCache& cache,
                       const AttentionSpec& spec) {
  if (!s.spec.live) b.fail("tracing: attention_live needs a live step (StepSpec::live)");
  return attention(b, s, q, kNew, vNew, cache, spec);
}

ValueId attention_split(Builder& b, Step& s, ValueId q, ValueId kNope, ValueId kPe, ValueId vNew,
                        const SplitKvCache& cache, const AttentionSpec& spec) {
  ValueId kn = cache_update(b, s, cache.kNope, kNope);
  ValueId kp = cache_update(b, s, cache.kPe, kPe);
  ValueId v = cache_update(b, s, cache.v, vNew);
  Shape shared = b.shape(kn);
  shared.back() = b.dim(kp, -1);
  ValueId key = b.name(b.concat({kn, b.broadcast(kp, shared)}, -1), "key");
  return attention_core(b, s, q, key, v, spec);
}

std::vector<double> alibi_slopes(int64_t heads) {
  int64_t p = 1;
  while (p * 2 <= heads) p *= 2;
  std::vector<double> slopes;
  for (int64_t i = 1; i <= p; ++i) slopes.push_back(std::exp2(-8.0 * double(i) / double(p)));
  for (int64_t i = 1; int64_t(slopes.size()) < heads; ++i)
    slopes.push_back(std::exp2(-4.0 * double(2 * i - 1) / double(p)));
  return slopes;
}

ValueId alibi_bias(Builder& b, const Step& s, int64_t heads) {
  if (!b.reserve(mulBytes(heads, 8), "the alibi slopes of " + std::to_string(heads) + " heads")) return kNone;
  ValueId slopes = b.constant(Type{DType::F32, {1, heads, 1, 1}}, alibi_slopes(heads));
  ValueId t = b.iota(Type{DType::F32, {1, 1, 1, s.spec.capacity}}, 3);
  return b.name(b.mul(slopes, t), "alibi");
}

// ----- rotary embedding -----

std::vector<double> rope_inv_freq(double theta, int64_t dim) {
  std::vector<double> f;
  for (int64_t i = 0; i < dim / 2; ++i) f.push_back(std::pow(theta, -double(2 * i) / double(dim)));
  return f;
}

std::vector<double> rope_llama3_scale(std::vector<double> invFreq, double factor, double lowFreqFactor,
                                      double highFreqFactor, double originalMaxPositions) {
  double lowWavelen = originalMaxPositions / lowFreqFactor;
  double highWavelen = originalMaxPositions / highFreqFactor;
  for (double& f : invFreq) {
    double wavelen = 2 * std::numbers::pi / f;
    if (wavelen > lowWavelen) {
      f = f / factor;
    } else if (wavelen >= highWavelen) {
      double smooth = (originalMaxPositions / wavelen - lowFreqFactor) / (highFreqFactor - lowFreqFactor);
      f = (1 - smooth) * f / factor + smooth * f;
    }
  }
  return invFreq;
}

RopeTables rope_tables(Builder& b, const Step& s, const std::vector<double>& invFreq, double attentionScaling) {
  int64_t half = int64_t(invFreq.size()), L = s.spec.tokens;
  Shape column = paged(s) ? Shape{s.spec.batch, 1, L, 1} : Shape{L, 1};
  ValueId pos = b.reshape(b.convert(s.positions, DType::F32), column);
  ValueId inv = b.name(b.constant(Type{DType::F32, {1, half}}, invFreq), "rope.inv_freq");
  ValueId freqs = b.name(b.mul(pos, inv), "rope.freqs");
  RopeTables t;
  t.cos = b.cos(freqs);
  t.sin = b.sin(freqs);
  if (attentionScaling != 1.0) {
    t.cos = b.mul(t.cos, b.scalar(attentionScaling));
    t.sin = b.mul(t.sin, b.scalar(attentionScaling));
  }
  b.name(t.cos, "rope.cos");
  b.name(t.sin, "rope.sin");
  return t;
}

namespace {

// x * cat(cos, cos) + cat(-x2, x1) * cat(sin, sin)
ValueId ropeHalf(Builder& b, ValueId x, ValueId cos, ValueId sin) {
  int64_t d = b.dim(x, -1), h = d / 2;
  ValueId x1 = b.slice(x, -1, 0, h);
  ValueId x2 = b.slice(x, -1, h, d);
  ValueId rotated = b.concat({b.neg(x2), x1}, -1);
  ValueId cosFull = b.concat({cos, cos}, -1);
  ValueId sinFull = b.concat({sin, sin}, -1);
  ValueId xc = b.mul(x, cosFull);
  ValueId rs = b.mul(rotated, sinFull);
  return b.add(xc, rs);
}

// pairs (x0, x1) = (x[2i], x[2i+1]) -> (x0 c - x1 s, x1 c + x0 s)
ValueId ropeInterleaved(Builder& b, ValueId x, ValueId cos, ValueId sin) {
  Shape shape = b.shape(x), pairs = shape;
  pairs.back() /= 2;
  pairs.push_back(2);
  ValueId xp = b.reshape(x, pairs);
  ValueId x0 = b.slice(xp, -1, 0, 1);
  ValueId x1 = b.slice(xp, -1, 1, 2);
  Shape cs = b.shape(cos);
  cs.push_back(1);
  ValueId c = b.reshape(cos, cs);
  ValueId s = b.reshape(sin, cs);
  ValueId x0c = b.mul(x0, c);
  ValueId x1s = b.mul(x1, s);
  ValueId o0 = b.sub(x0c, x1s);
  ValueId x1c = b.mul(x1, c);
  ValueId x0s = b.mul(x0, s);
  ValueId o1 = b.add(x1c, x0s);
  return b.reshape(b.concat({o0, o1}, -1), shape);
}

}  // namespace

ValueId rope(Builder& b, ValueId x, const RopeTables& t, RopeStyle style) {
  if (b.dim(x, -1) % 2 != 0) b.fail("tracing rope: the head width " + std::to_string(b.dim(x, -1)) + " is odd");
  ValueId cos = castTo(b, t.cos, b.dtype(x)), sin = castTo(b, t.sin, b.dtype(x));
  ValueId out = style == RopeStyle::Half ? ropeHalf(b, x, cos, sin) : ropeInterleaved(b, x, cos, sin);
  return b.name(out, "rope");
}

// ----- around attention -----

ValueId weight(Builder& b, const Step& s, const std::string& name, Shape shape) {
  return b.weight(name, Type{s.spec.weightDtype, std::move(shape)});
}

ValueId embedding(Builder& b, ValueId table, ValueId tokens, DType dt) {
  return b.name(castTo(b, b.gather(table, tokens, 0), dt), "embed");
}

ValueId rms_norm(Builder& b, ValueId x, ValueId w, double eps, bool unitOffset) {
  DType dt = b.dtype(x);
  ValueId xf = castTo(b, x, DType::F32);
  ValueId sum = b.reduceSum(b.mul(xf, xf), -1, true);
  ValueId mean = b.div(sum, b.scalar(double(b.dim(x, -1))));
  ValueId r = b.rsqrt(b.add(mean, b.scalar(eps)));
  ValueId wf = castTo(b, w, DType::F32);
  if (unitOffset) wf = b.add(wf, b.scalar(1.0));
  return b.name(castTo(b, b.mul(b.mul(xf, r), wf), dt), "norm");
}

ValueId layer_norm(Builder& b, ValueId x, ValueId w, ValueId bias, double eps) {
  DType dt = b.dtype(x);
  ValueId xf = castTo(b, x, DType::F32);
  ValueId n = b.scalar(double(b.dim(x, -1)));
  ValueId mean = b.div(b.reduceSum(xf, -1, true), n);
  ValueId centered = b.sub(xf, mean);
  ValueId var = b.div(b.reduceSum(b.mul(centered, centered), -1, true), n);
  ValueId r = b.rsqrt(b.add(var, b.scalar(eps)));
  ValueId normed = b.mul(centered, r);
  ValueId y = b.mul(normed, castTo(b, w, DType::F32));
  if (bias != kNone) y = b.add(y, castTo(b, bias, DType::F32));
  return b.name(castTo(b, y, dt), "norm");
}

ValueId linear(Builder& b, ValueId x, ValueId w, ValueId bias) {
  ValueId wx = castTo(b, w, b.dtype(x));
  ValueId y = b.matmul(x, b.transpose(wx, {1, 0}));
  if (bias != kNone) y = b.add(y, castTo(b, bias, b.dtype(y)));
  return y;
}

ValueId silu(Builder& b, ValueId x) { return b.mul(x, b.sigmoid(x)); }

ValueId gelu(Builder& b, ValueId x, bool tanhApprox) {
  ValueId inner;
  if (tanhApprox) {
    ValueId cube = b.mul(b.mul(x, x), x);
    ValueId arg = b.add(x, b.mul(cube, scalarLike(b, x, 0.044715)));
    inner = b.tanh(b.mul(arg, scalarLike(b, x, std::sqrt(2.0 / std::numbers::pi))));
  } else {
    inner = b.erf(b.mul(x, scalarLike(b, x, 1.0 / std::numbers::sqrt2)));
  }
  ValueId half = b.mul(x, scalarLike(b, x, 0.5));
  return b.mul(half, b.add(inner, scalarLike(b, x, 1.0)));
}

ValueId activation(Builder& b, ValueId x, Activation act) {
  switch (act) {
    case Activation::Silu: return silu(b, x);
    case Activation::Gelu: return gelu(b, x, false);
    case Activation::GeluTanh: return gelu(b, x, true);
  }
  return x;
}

ValueId glu_mlp(Builder& b, ValueId x, ValueId gate, ValueId up, ValueId down, Activation act) {
  ValueId g = b.name(activation(b, linear(b, x, gate), act), "gate");
  ValueId u = b.name(linear(b, x, up), "up");
  return b.name(linear(b, b.mul(g, u), down), "down");
}

ValueId mlp(Builder& b, ValueId x, ValueId up, ValueId upBias, ValueId down, ValueId downBias, Activation act) {
  ValueId h = b.name(activation(b, linear(b, x, up, upBias), act), "up");
  return b.name(linear(b, h, down, downBias), "down");
}

ValueId softcap(Builder& b, ValueId x, double cap) {
  ValueId c = scalarLike(b, x, cap);
  return b.mul(b.tanh(b.div(x, c)), c);
}

ValueId split_heads(Builder& b, ValueId x, int64_t heads, int64_t headDim) {
  ValueId r = b.reshape(x, {b.dim(x, 0), b.dim(x, 1), heads, headDim});
  return b.transpose(r, {0, 2, 1, 3});
}

ValueId merge_heads(Builder& b, ValueId x) {
  ValueId t = b.transpose(x, {0, 2, 1, 3});
  return b.reshape(t, {b.dim(t, 0), b.dim(t, 1), b.dim(t, 2) * b.dim(t, 3)});
}

ValueId logits(Builder& b, const Step& s, ValueId x, ValueId head, std::optional<double> finalSoftcap) {
  if (s.sample != kNone) x = b.name(b.gather(x, s.sample, 0), "sampled");
  ValueId y = castTo(b, linear(b, x, head), DType::F32);
  if (finalSoftcap) y = softcap(b, y, *finalSoftcap);
  b.nameExact(y, "logits");
  b.output(y);
  if (s.spec.nextToken) {
    Shape rows(b.shape(y).begin(), b.shape(y).end() - 1);
    std::vector<ValueId> params;
    for (const SampleParam& p : kSampleParams) params.push_back(b.input(p.name, Type{p.dtype, rows}));
    // The penalties, a list a sequence (the logits' first axis): the
    // repetition penalty, then the seen tokens and their penalties, S =
    // capacity entries, as many distinct tokens as a sequence can hold.
    const Shape sequences = {b.shape(y)[0]}, lists = {b.shape(y)[0], s.spec.capacity};
    for (const SampleParam& p : kSamplePenalties)
      params.push_back(b.input(p.name, Type{p.dtype, &p == &kSamplePenalties[0] ? sequences : lists}));
    b.output(b.nameExact(b.sample(y, params), "next"));
  }
  return y;
}

}  // namespace poot::trace::ops

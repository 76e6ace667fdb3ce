// attention-rewrite: recognizes the primitive attention chain the tracer
// emits (lib/trace/ops.cpp attention_core; the seed's "The attention rewrite
// pass") and replaces it by one Attention eqn. The chain, anchored at its
// score matmul:
//   scores = MatMul(q, Transpose(repeat_kv(k))), Mul by the scale, optional
//   softcap Div -> Tanh -> Mul, optional Add of the mask, for a live step a
//   Select of the scores at t >= len to -inf, then ReduceMax -> Sub -> Exp ->
//   ReduceSum -> Div and MatMul(p, repeat_kv(v)).
// Decode and prefill are the same op. The key comes in three forms: dense
// (the cache value), split (MLA's Concat(k_nope, Broadcast(k_pe)), kept as
// two operands) and paged (the pools and the read map, when every word of the
// map is proved a slot of the pool); a live step's row and score selects
// become the live bound len when 1 <= len <= Lk is proved (lib/analysis
// ranges, with the witness rule). The mask becomes mask=causal when it is the
// in-graph causal mask (match::causalMask: Select(t <= qpos [and t > qpos -
// W], 0, -inf)): the Attention then takes the query positions i32 [B, Lq]
// (the graph's positions reshaped and broadcast, built once per positions
// value) and a `window` attribute instead of the [B, Hm, Lq, Lk] mask, so the
// mask is never built; any other mask stays additive, with a remark saying
// which check declined it. Matching reads the graph only and returns either
// the Attention eqn's operands and attributes or the one check that declined,
// which becomes a remark at the score matmul; the rewrite then inserts the
// Attention (and the mask's or the positions' Reshape/Broadcast) before the
// chain's last matmul and replaces its uses. The old chain is left to
// cleanup.
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "ir/text.h"
#include "passes/attention_match.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace poot {

namespace {

constexpr const char* kPass = "attention-rewrite";
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string str(int64_t v) { return std::to_string(v); }
std::string name(const Graph& g, ValueId v) { return "%" + g.value(v).name; }

// ---------------------------------------------------------------- matching

enum class KeyForm { Dense, Split, Paged };

const char* keyName(KeyForm k) { return k == KeyForm::Split ? "split" : k == KeyForm::Paged ? "paged" : "dense"; }

// One Attention eqn, as match found it: operands (-1 when the form has
// none), attributes and the sizes of its type rule.
struct Chain {
  ValueId out = -1;  // the chain's last MatMul(p, v), replaced by the Attention
  Loc loc;           // the score matmul's
  ValueId q = -1, k = -1, kShared = -1, v = -1, read = -1, mask = -1, len = -1;
  KeyForm key = KeyForm::Dense;
  double scale = 1;
  std::optional<double> softcap;
  int64_t nRep = 1;
  int64_t B = 0, Hq = 0, Lq = 0, Lk = 0, Dk = 0, Dv = 0, Hm = 1;
  std::optional<match::CausalMask> causal;  // the mask recognized as causal
  std::string additiveWhy;                  // else why the mask stays additive
};

// The chain, or why it declined (one check, as the remark says it).
struct Match {
  std::optional<Chain> chain;
  std::string why;
};

// What follows the score matmul, up to the matmul with the values.
struct ScorePath {
  double scale = 1;
  std::optional<double> softcap;
  ValueId mask = -1;       // Add(scores, mask): the graph's mask value
  ValueId scoreCond = -1;  // Select(cond, scores, -inf)
  ValueId out = -1;        // MatMul(p, vx)
  ValueId vx = -1;
};

bool lastAxisKeepdim(const Graph& g, const Eqn& e) {
  auto axis = match::axisOf(e, g.type(e.operands[0]).rank());
  const AttrValue* keep = e.attr("keepdim");
  return axis && *axis == g.type(e.operands[0]).rank() - 1 && keep && std::get<bool>(*keep);
}

// The operand of a binary eqn that is not x.
ValueId otherOperand(const Eqn& e, ValueId x) { return e.operands[0] == x ? e.operands[1] : e.operands[0]; }

// Walks from the scores through the score transform, the mask and the live
// select to the softmax and the value matmul. Returns "" or why it stopped.
std::string walkScores(const match::Users& u, ValueId scores, ScorePath& p) {
  const Graph& g = u.g;
  const Type& st = g.type(scores);
  ValueId cur = scores;
  Type kept = st;  // the type the next steps keep: the scores', then the softmax's
  auto keepsType = [&](const Eqn& e) { return g.type(e.results[0]) == kept; };
  auto any = [](const Eqn&) { return true; };

  if (const Eqn* m = u.find(cur, Op::Mul, [&](const Eqn& e) {
        return keepsType(e) && match::splat(g, otherOperand(e, cur)).has_value();
      })) {
    p.scale = *match::splat(g, otherOperand(*m, cur));
    if (!std::isfinite(p.scale)) return "the score scale " + formatNumber(p.scale) + " is not finite";
    cur = m->results[0];
  }
  // softcap: Div(s, c) -> Tanh -> Mul(., c)
  if (const Eqn* d = u.find(cur, Op::Div, [&](const Eqn& e) {
        return e.operands[0] == cur && keepsType(e) && match::splat(g, e.operands[1]).has_value();
      })) {
    double c = *match::splat(g, d->operands[1]);
    const Eqn* t = u.find(d->results[0], Op::Tanh, any);
    const Eqn* m = t ? u.find(t->results[0], Op::Mul, [&](const Eqn& e) {
                         return keepsType(e) && match::splat(g, otherOperand(e, t->results[0])) == c;
                       })
                     : nullptr;
    if (m) {
      if (!(c > 0 && std::isfinite(c))) return "the softcap " + formatNumber(c) + " is not positive and finite";
      p.softcap = c;
      cur = m->results[0];
    }
  }
  // the mask and the live select, in either order
  for (int i = 0; i < 2; ++i) {
    const Eqn* a = p.mask >= 0 ? nullptr : u.find(cur, Op::Add, [&](const Eqn& e) {
      return keepsType(e) && otherOperand(e, cur) != cur;
    });
    if (a) {
      p.mask = otherOperand(*a, cur);
      cur = a->results[0];
      continue;
    }
    const Eqn* s = p.scoreCond >= 0 ? nullptr : u.find(cur, Op::Select, [&](const Eqn& e) {
      return e.operands[1] == cur && keepsType(e) && match::splat(g, e.operands[2]) == -kInf;
    });
    if (!s) break;
    p.scoreCond = s->operands[0];
    cur = s->results[0];
  }
  // A two-byte chain computes its softmax in f32, as the reference
  // implementations do (transformers: softmax(..., dtype=float32).to(dtype)):
  // Convert(scores, f32), the softmax, Convert(probs, the scores' dtype).
  const Eqn* widen = st.dtype == DType::F32 ? nullptr : u.find(cur, Op::Convert, [&](const Eqn& e) {
    return g.type(e.results[0]).dtype == DType::F32;
  });
  if (widen) cur = widen->results[0];
  kept = g.type(cur);
  // softmax: ReduceMax -> Sub -> Exp -> ReduceSum -> Div
  const Eqn* mx = u.find(cur, Op::ReduceMax, [&](const Eqn& e) { return lastAxisKeepdim(g, e); });
  const Eqn* sub = mx ? u.find(cur, Op::Sub, [&](const Eqn& e) {
                         return e.operands[0] == cur && e.operands[1] == mx->results[0] && keepsType(e);
                       })
                      : nullptr;
  const Eqn* ex = sub ? u.find(sub->results[0], Op::Exp, any) : nullptr;
  const Eqn* sum = ex ? u.find(ex->results[0], Op::ReduceSum, [&](const Eqn& e) { return lastAxisKeepdim(g, e); })
                      : nullptr;
  const Eqn* div = sum ? u.find(ex->results[0], Op::Div, [&](const Eqn& e) {
                           return e.operands[0] == ex->results[0] && e.operands[1] == sum->results[0] && keepsType(e);
                         })
                       : nullptr;
  if (!div) return "no max-subtracted softmax over the keys follows the scores";
  ValueId probs = div->results[0];
  if (widen) {
    const Eqn* narrow = u.find(probs, Op::Convert, [&](const Eqn& e) { return g.type(e.results[0]).dtype == st.dtype; });
    if (!narrow) return std::string("the f32 softmax is not converted back to the scores' ") + dtypeName(st.dtype);
    probs = narrow->results[0];
  }
  const Eqn* pv = u.find(probs, Op::MatMul, [&](const Eqn& e) { return e.operands[0] == probs; });
  if (!pv) return "the softmax does not feed a matmul with the values";
  p.out = pv->results[0];
  p.vx = pv->operands[1];
  return "";
}

// A key or value part in its [B, H, Lk, D] view, with the live row select
// Select(active [B,1,Lk,1], view, 0) stripped when there is one.
struct Part {
  ValueId view = -1;
  ValueId len = -1;  // the select's live length
};

Part livePart(const Graph& g, ValueId x, int64_t B, int64_t Lk) {
  if (auto s = match::selectOf(g, x); s && s->other == 0)
    if (auto len = match::liveLength(g, s->cond, 2, B, Lk)) return Part{s->kept, *len};
  return Part{x, -1};
}

// The key's parts: split (MLA) when it is Concat(k_nope, Broadcast(k_pe
// [B,1,Lk,s])) along the last axis, else one part.
struct KeyParts {
  bool split = false;
  Part k, shared;
};

KeyParts keyParts(const Graph& g, ValueId key, int64_t B, int64_t Lk) {
  KeyParts kp;
  const Eqn* cat = match::defOp(g, key, Op::Concat);
  const Eqn* bc = cat && cat->operands.size() == 2 && match::axisOf(*cat, 4) == 3
                      ? match::defOp(g, cat->operands[1], Op::Broadcast)
                      : nullptr;
  const Shape& keyShape = g.type(key).shape;
  const Shape* shared = bc ? &g.type(bc->operands[0]).shape : nullptr;
  if (shared && *shared == Shape{B, 1, Lk, keyShape[3] - g.type(cat->operands[0]).shape[3]}) {
    kp.split = true;
    kp.k = livePart(g, cat->operands[0], B, Lk);
    kp.shared = livePart(g, bc->operands[0], B, Lk);
  } else {
    kp.k = livePart(g, key, B, Lk);
  }
  return kp;
}

// The live bound: every part and the scores selected by t < len with one
// len, or none of them. Returns "" and sets c.len, or why not.
std::string liveBound(const Graph& g, const KeyParts& kp, const Part& v, const ScorePath& p, Chain& c) {
  ValueId scoreLen = -1;
  if (p.scoreCond >= 0) {
    auto len = match::liveLength(g, p.scoreCond, 3, c.B, c.Lk);
    if (!len) return "the scores are selected to -inf by a condition that is not the live bound t < len";
    scoreLen = *len;
  }
  std::vector<ValueId> lens = {kp.k.len, v.len, scoreLen};
  if (kp.split) lens.push_back(kp.shared.len);
  bool any = false, all = true;
  for (ValueId l : lens) {
    any = any || l >= 0;
    all = all && l >= 0 && l == scoreLen;
  }
  if (any && !all) return "the live selects guard only some of the key rows, value rows and scores";
  c.len = all ? scoreLen : -1;
  return "";
}

// Sets the key and value operands: the paged pools and read map when both
// views gather through one read map of the right type, else the views.
void keyOperands(const Graph& g, const KeyParts& kp, const Part& v, Chain& c) {
  c.v = v.view;
  c.k = kp.k.view;
  if (kp.split) {
    c.key = KeyForm::Split;
    c.kShared = kp.shared.view;
    return;
  }
  auto pk = match::pagedView(g, kp.k.view), pvw = match::pagedView(g, v.view);
  if (!pk || !pvw || pk->read != pvw->read) return;
  const Type &read = g.type(pk->read), &kpool = g.type(pk->pool), &vpool = g.type(pvw->pool);
  if (read.dtype != DType::I32 || read.shape != Shape{c.B, c.Lk} || kpool.shape[0] != vpool.shape[0]) return;
  c.key = KeyForm::Paged;
  c.k = pk->pool;
  c.v = pvw->pool;
  c.read = pk->read;
}

// "key" or "value" [B, Hkv, Lk, D] against the query: the typing rule's
// checks, worded for what the matmul did instead.
std::string checkHeads(const Graph& g, const char* what, ValueId x, int64_t heads, const Chain& c) {
  const Type& t = g.type(x);
  if (t.rank() != 4 || t.shape[2] != c.Lk) return std::string("the ") + what + " " + t.str() + " is not [B, Hkv, Lk, D]";
  if (t.shape[0] != c.B)
    return std::string("the matmul broadcasts the ") + what + " " + t.str() + " over " + str(c.B) +
           " batch rows: the op cannot type it";
  if (heads * c.nRep == c.Hq) return "";
  if (heads == 1 && c.nRep == 1)
    return std::string("a single ") + what + " head is broadcast by the matmul to " + str(c.Hq) +
           " query heads, not repeated: the op cannot type it";
  return std::string("the ") + what + "'s " + str(heads) + " heads repeated " + str(c.nRep) + " times are not the " +
         str(c.Hq) + " query heads";
}

std::string checkTypes(const Graph& g, Chain& c) {
  int64_t hkv;
  if (c.key == KeyForm::Paged) {
    hkv = g.type(c.k).shape[1];
    if (hkv * c.nRep != c.Hq || g.type(c.v).shape[1] != hkv)
      return "the pools' " + str(hkv) + " heads repeated " + str(c.nRep) + " times are not the " + str(c.Hq) +
             " query heads";
    if (g.type(c.k).shape[2] != c.Dk) return "the key pool " + g.type(c.k).str() + " does not have the key width " + str(c.Dk);
    c.Dv = g.type(c.v).shape[2];
    return "";
  }
  hkv = g.type(c.k).rank() == 4 ? g.type(c.k).shape[1] : 0;
  if (auto e = checkHeads(g, "key", c.k, hkv, c); !e.empty()) return e;
  if (auto e = checkHeads(g, "value", c.v, g.type(c.v).rank() == 4 ? g.type(c.v).shape[1] : 0, c); !e.empty()) return e;
  if (g.type(c.v).shape[1] != hkv) return "the key and the value have different head counts";
  c.Dv = g.type(c.v).shape[3];
  return "";
}

// The mask must broadcast to [B, Hm, Lq, Lk] with Hm 1 or Hq; the rewrite
// reshapes and broadcasts it to exactly that.
std::string checkMask(const Graph& g, Chain& c) {
  if (c.mask < 0) return "";
  const Type& m = g.type(c.mask);
  std::string bad = "the mask " + m.str() + " does not broadcast to [" + str(c.B) + ", 1 or " + str(c.Hq) + ", " +
                    str(c.Lq) + ", " + str(c.Lk) + "]";
  if (m.rank() > 4) return bad;
  Shape s(size_t(4 - m.rank()), 1);
  s.insert(s.end(), m.shape.begin(), m.shape.end());
  int64_t want[4] = {c.B, c.Hq, c.Lq, c.Lk};
  for (int i = 0; i < 4; ++i)
    if (s[size_t(i)] != 1 && s[size_t(i)] != want[i]) return bad;
  c.Hm = s[1];
  return "";
}

// B * Hq * Lq workgroups, along x up to its limit, then folded onto a 2-D grid.
std::string checkGrid(const PassContext& ctx, const Chain& c) {
  int64_t x = ctx.gridLimits[0], y = ctx.gridLimits[1];
  __int128 w = __int128(c.B) * c.Hq * c.Lq;
  if (w <= x || (w + x - 1) / x <= y) return "";
  return "the launch of " + str(int64_t(w)) + " workgroups (B * Hq * Lq) does not fit the device's grid of " + str(x) +
         " x " + str(y);
}

std::string rangeStr(const ValueRanges& r, ValueId v) {
  auto i = r.get(v);
  return i ? i->str() : "unknown";
}

// Whether the mask is the in-graph causal mask; sets c.causal, or
// c.additiveWhy. The graph computes qpos - W in i32, the kernel never does:
// the two agree only when that difference is proved not to wrap.
void recognizeCausal(const Graph& g, const ValueRanges& r, ValueId scores, Chain& c) {
  if (c.mask < 0) return;
  match::CausalMatch m = match::causalMask(g, c.mask, g.type(scores).shape);
  if (!m.mask) {
    c.additiveWhy = m.why;
    return;
  }
  if (m.mask->window > 0 &&
      !r.proves(m.mask->positions, int64_t(std::numeric_limits<int32_t>::min()) + m.mask->window,
                std::numeric_limits<int32_t>::max())) {
    c.additiveWhy = "cannot prove " + name(g, m.mask->positions) + " - " + str(m.mask->window) +
                    " does not wrap in i32: its range is " + rangeStr(r, m.mask->positions);
    return;
  }
  c.causal = m.mask;
}

// The proofs the live and paged forms need, from the value ranges.
std::string checkProofs(const Graph& g, const ValueRanges& r, const Chain& c) {
  if (c.len >= 0) {
    const Type& t = g.type(c.len);
    if (t.dtype != DType::I32) return "the live length " + name(g, c.len) + " is " + t.str() + ", not i32[" + str(c.B) + "]";
    if (!r.proves(c.len, 1, c.Lk))
      return "cannot prove 1 <= " + name(g, c.len) + " <= " + str(c.Lk) + ": its range is " + rangeStr(r, c.len) +
             " (a guard's clamp counts only when its witness is a declared validation output)";
  }
  if (c.read >= 0) {
    int64_t slots = g.type(c.k).shape[0];
    if (!r.proves(c.read, 0, slots - 1))
      return "cannot prove every word of the read map " + name(g, c.read) + " is a slot of the pool [0, " +
             str(slots) + "): its range is " + rangeStr(r, c.read);
  }
  return "";
}

// Whether e is the score matmul of a candidate chain: a float rank-4
// MatMul(q, Transpose(k, perm [0, 1, 3, 2])).
bool isScoreMatMul(const Graph& g, const Eqn& e) {
  if (e.op != Op::MatMul || e.operands.size() != 2) return false;
  const Type& t = g.type(e.results[0]);
  if (t.rank() != 4 || !isFloat(t.dtype)) return false;
  const Eqn* tr = match::defOp(g, e.operands[1], Op::Transpose);
  return tr && std::get<std::vector<int64_t>>(*tr->attr("perm")) == std::vector<int64_t>{0, 1, 3, 2};
}

Match declined(std::string why) { return Match{std::nullopt, std::move(why)}; }

Match matchChain(const match::Users& u, const ValueRanges& ranges, const PassContext& ctx, const Eqn& anchor) {
  const Graph& g = u.g;
  Chain c;
  c.loc = anchor.loc;
  c.q = anchor.operands[0];
  ValueId scores = anchor.results[0];
  const Shape& ss = g.type(scores).shape;
  const Type& qt = g.type(c.q);
  c.B = ss[0], c.Hq = ss[1], c.Lq = ss[2], c.Lk = ss[3];
  if (qt.rank() != 4 || qt.shape[0] != c.B || qt.shape[1] != c.Hq)
    return declined("the matmul broadcasts the query " + qt.str() + " to the scores " + g.type(scores).str() +
                    ": the op cannot type it");
  c.Dk = qt.shape[3];

  ScorePath p;
  if (auto why = walkScores(u, scores, p); !why.empty()) return declined(why);
  c.out = p.out;
  c.scale = p.scale;
  c.softcap = p.softcap;
  c.mask = p.mask;

  ValueId kx = match::defOp(g, anchor.operands[1], Op::Transpose)->operands[0];
  match::Repeat rk = match::repeatOf(g, kx), rv = match::repeatOf(g, p.vx);
  if (rk.n != rv.n)
    return declined("the key is repeated " + str(rk.n) + " times but the value " + str(rv.n) + " times");
  c.nRep = rk.n;
  KeyParts kp = keyParts(g, rk.base, c.B, c.Lk);
  Part vp = livePart(g, rv.base, c.B, c.Lk);
  if (auto why = liveBound(g, kp, vp, p, c); !why.empty()) return declined(why);
  keyOperands(g, kp, vp, c);

  if (auto why = checkTypes(g, c); !why.empty()) return declined(why);
  if (auto why = checkMask(g, c); !why.empty()) return declined(why);
  if (g.type(c.out) != Type{qt.dtype, {c.B, c.Hq, c.Lq, c.Dv}})
    return declined("the value matmul gives " + g.type(c.out).str() + ", not [B, Hq, Lq, Dv]");
  for (ValueId v : {c.k, c.kShared, c.v})
    if (v >= 0 && g.type(v).dtype != qt.dtype)
      return declined(std::string("the query is ") + dtypeName(qt.dtype) + " but a key or value operand is " +
                      dtypeName(g.type(v).dtype));
  if (auto why = checkGrid(ctx, c); !why.empty()) return declined(why);
  if (auto why = checkProofs(g, ranges, c); !why.empty()) return declined(why);
  recognizeCausal(g, ranges, scores, c);
  return Match{c, ""};
}

// ---------------------------------------------------------------- rewriting

// "layers.0.attn.out" -> "layers.0.attn.": the scope new values are named in.
std::string scopeOf(const std::string& name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot + 1);
}

// Inserts eqns at `at` (advancing it) that bring the mask to [B, Hm, Lq, Lk].
ValueId fitMask(Graph& g, size_t& at, const Chain& c, const std::string& scope) {
  ValueId m = c.mask;
  Shape want{c.B, c.Hm, c.Lq, c.Lk};
  const Type mt = g.type(m);
  if (mt.shape == want) return m;
  if (mt.rank() < 4) {
    Shape padded(size_t(4 - mt.rank()), 1);
    padded.insert(padded.end(), mt.shape.begin(), mt.shape.end());
    insertEqn(g, at, Op::Reshape, {m}, {}, {{scope + "attn_mask", Type{mt.dtype, padded}}}, c.loc);
    m = g.eqns[at++].results[0];
    if (padded == want) return m;
  }
  insertEqn(g, at, Op::Broadcast, {m}, {}, {{scope + "attn_mask", Type{mt.dtype, want}}}, c.loc);
  return g.eqns[at++].results[0];
}

// The query positions of a causal mask as i32 [B, Lq]: the graph's positions
// (their non-unit axes on the batch and query axes, in that order) reshaped
// to [B or 1, Lq or 1] and broadcast. Built once per positions value and
// shape (memo), before the first Attention that takes them.
ValueId fitPositions(Graph& g, size_t& at, const Chain& c, std::map<std::pair<ValueId, Shape>, ValueId>& memo) {
  const match::CausalMask& m = *c.causal;
  Shape want{c.B, c.Lq};
  auto key = std::make_pair(m.positions, want);
  if (auto it = memo.find(key); it != memo.end() && g.value(it->second).def < int32_t(at)) return it->second;
  ValueId p = m.positions;
  Shape packed{m.perBatch ? c.B : 1, m.perQuery ? c.Lq : 1};
  std::string base = g.value(p).name + ".qpos";
  if (g.type(p).shape != packed) {
    insertEqn(g, at, Op::Reshape, {p}, {}, {{base, Type{DType::I32, packed}}}, c.loc);
    p = g.eqns[at++].results[0];
  }
  if (packed != want) {
    insertEqn(g, at, Op::Broadcast, {p}, {}, {{base, Type{DType::I32, want}}}, c.loc);
    p = g.eqns[at++].results[0];
  }
  memo[key] = p;
  return p;
}

void rewrite(Graph& g, const Chain& c, std::map<std::pair<ValueId, Shape>, ValueId>& positions) {
  size_t at = size_t(g.value(c.out).def);
  std::string scope = scopeOf(g.value(c.out).name);
  std::vector<ValueId> operands = {c.q, c.k};
  if (c.kShared >= 0) operands.push_back(c.kShared);
  operands.push_back(c.v);
  if (c.read >= 0) operands.push_back(c.read);
  if (c.causal) operands.push_back(fitPositions(g, at, c, positions));
  else if (c.mask >= 0) operands.push_back(fitMask(g, at, c, scope));
  if (c.len >= 0) operands.push_back(c.len);
  Attrs attrs = {{"scale", c.scale},
                 {"n_rep", c.nRep},
                 {"key", std::string(keyName(c.key))},
                 {"mask", std::string(c.causal ? "causal" : c.mask >= 0 ? "additive" : "none")},
                 {"bound", std::string(c.len >= 0 ? "live" : "capacity")}};
  if (c.softcap) attrs.push_back({"softcap", *c.softcap});
  if (c.causal && c.causal->window > 0) attrs.push_back({"window", c.causal->window});
  sortAttrs(opInfo(Op::Attention), attrs);
  Type result = g.type(c.out);
  insertEqn(g, at, Op::Attention, std::move(operands), std::move(attrs), {{scope + "attention", result}}, c.loc);
  replaceAllUses(g, c.out, g.eqns[at].results[0]);
}

}  // namespace

Expected<bool> runAttentionRewrite(Graph& g, PassContext& ctx) {
  const ValueRanges& ranges = rangesFor(g, ctx);
  std::vector<ValueId> anchors;
  for (const Eqn& e : g.eqns)
    if (isScoreMatMul(g, e)) anchors.push_back(e.results[0]);
  bool changed = false;
  std::map<std::pair<ValueId, Shape>, ValueId> positions;
  for (ValueId scores : anchors) {
    match::Users users(g);
    const Eqn& anchor = g.eqns[size_t(g.value(scores).def)];
    Match m = matchChain(users, ranges, ctx, anchor);
    if (!m.chain) {
      ctx.remark(kPass, g, anchor, m.why);
      continue;
    }
    if (!m.chain->additiveWhy.empty()) ctx.remark(kPass, g, anchor, "the mask stays additive: " + m.chain->additiveWhy);
    rewrite(g, *m.chain, positions);
    changed = true;
  }
  return changed;
}

}  // namespace poot

// routed-experts: forms RoutedExperts from the mixture of experts the
// DeepSeek-V2 tracer writes as primitives (lib/trace/deepseek_v2.cpp):
//   logits = MatMul(hf, Transpose(wf))     hf = h or Convert(h) to f32,
//                                          wf = W or Convert(W) to f32
//   scores = softmax(logits) over the last axis (Div(Exp(Sub(l, ReduceMax(l))),
//            ReduceSum(..))), or Sigmoid(logits)
//   vals, idx = TopK(scores){k};  w = vals, or Mul(vals, s) with s a splat
//   R = ReduceSum(Select(Eq(Reshape(idx), Iota(E)), Reshape(w), 0)){axis -2}
//   Rd = R, or Convert(R) to h's dtype
//   expert e: y_e = MatMul(Mul(Mul(g, Sigmoid(g)), u), Transpose(Wd_e)),
//             g = MatMul(h, Transpose(Wg_e)), u = MatMul(h, Transpose(Wu_e)),
//             each W the weight or Convert(weight) to f32 (the op takes
//             the weight: a bf16 checkpoint's experts stay bf16)
//   routed = y_0 * Rd[0:1] + y_1 * Rd[1:2] + ... (added in expert order)
// The TopK is the anchor: every TopK whose indices are compared with an Iota
// and selected (the routing spread) is a candidate, and one that does not
// match keeps its primitives with a remark naming the check that declined.
// The RoutedExperts is inserted before the last Add and takes its uses and
// name; the primitives stay the op's reference semantics (the oracle states
// them; routed-experts-dense writes them back when no kernel takes the op).
// The shared experts stay the primitive MLP beside it.
#include <array>
#include <string>

#include "passes/attention_match.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace poot {

namespace {

constexpr const char* kPass = "routed-experts";

using match::defOp;

// What match found: the formed eqn's operands and attributes.
struct Routed {
  ValueId out = -1;  // the last Add, replaced
  std::vector<ValueId> operands;
  Attrs attrs;
};

struct Match {
  std::optional<Routed> routed;
  std::string why;
};


// The operands of a commutative binary eqn as (a, b) with pred(a) true.
template <class P>
bool orderBy(const Eqn& e, P pred, ValueId& a, ValueId& b) {
  for (int i = 0; i < 2; ++i)
    if (pred(e.operands[size_t(i)])) {
      a = e.operands[size_t(i)];
      b = e.operands[size_t(1 - i)];
      return true;
    }
  return false;
}

// v = Convert(x) to f32 gives x; anything else gives v.
ValueId unwiden(const Graph& g, ValueId v) {
  const Eqn* c = defOp(g, v, Op::Convert);
  return c && g.type(v).dtype == DType::F32 ? c->operands[0] : v;
}

// The W of MatMul(x, Transpose(W){perm [1, 0]}) (no transpose_b), and x.
struct Linear {
  ValueId x = -1, w = -1;
};
std::optional<Linear> linearOf(const Graph& g, ValueId v) {
  const Eqn* mm = defOp(g, v, Op::MatMul);
  if (!mm || flagAttr(mm->attrs, "transpose_b")) return std::nullopt;
  const Eqn* t = defOp(g, mm->operands[1], Op::Transpose);
  if (!t || g.type(t->operands[0]).rank() != 2) return std::nullopt;
  return Linear{mm->operands[0], t->operands[0]};
}

// The scoring of the router logits: softmax over the last axis or sigmoid.
struct Scoring {
  const char* name;
  ValueId logits;
};
std::optional<Scoring> scoringOf(const Graph& g, ValueId scores) {
  if (const Eqn* s = defOp(g, scores, Op::Sigmoid)) return Scoring{"sigmoid", s->operands[0]};
  const Eqn* div = defOp(g, scores, Op::Div);
  if (!div) return std::nullopt;
  const Eqn* ex = defOp(g, div->operands[0], Op::Exp);
  const Eqn* sum = defOp(g, div->operands[1], Op::ReduceSum);
  int64_t rank = g.type(scores).rank();
  auto lastKept = [&](const Eqn* r) { return match::axisOf(*r, rank) == rank - 1 && flagAttr(r->attrs, "keepdim"); };
  if (!ex || !sum || sum->operands[0] != div->operands[0] || !lastKept(sum)) return std::nullopt;
  const Eqn* sub = defOp(g, ex->operands[0], Op::Sub);
  if (!sub) return std::nullopt;
  const Eqn* max = defOp(g, sub->operands[1], Op::ReduceMax);
  if (!max || max->operands[0] != sub->operands[0] || !lastKept(max)) return std::nullopt;
  return Scoring{"softmax", sub->operands[0]};
}

// x when v = Mul(x, Sigmoid(x)), in either order.
std::optional<ValueId> siluOf(const Graph& g, ValueId v) {
  const Eqn* m = defOp(g, v, Op::Mul);
  if (!m) return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    ValueId x = m->operands[size_t(i)];
    const Eqn* sg = defOp(g, m->operands[size_t(1 - i)], Op::Sigmoid);
    if (sg && sg->operands[0] == x) return x;
  }
  return std::nullopt;
}

// Expert e's weights {Wg, Wu, Wd} from y = MatMul(Mul(silu(g), u), Transpose(Wd)),
// g = MatMul(h, Transpose(Wg)), u = MatMul(h, Transpose(Wu)); empty when y is
// not that gated MLP of h.
std::optional<std::array<ValueId, 3>> expertOf(const Graph& g, ValueId y, ValueId h) {
  auto down = linearOf(g, y);
  const Eqn* mid = down ? defOp(g, down->x, Op::Mul) : nullptr;
  if (!mid) return std::nullopt;
  ValueId act, upv;
  if (!orderBy(*mid, [&](ValueId v) { return siluOf(g, v).has_value(); }, act, upv)) return std::nullopt;
  auto gate = linearOf(g, *siluOf(g, act)), up = linearOf(g, upv);
  if (!gate || !up || gate->x != h || up->x != h) return std::nullopt;
  return std::array<ValueId, 3>{unwiden(g, gate->w), unwiden(g, up->w), unwiden(g, down->w)};
}

std::string str(int64_t v) { return std::to_string(v); }

// Whether e is a candidate: a TopK whose indices, through a Reshape, are
// compared for equality with an Iota and the comparison selects.
bool isCandidate(const Graph& g, const match::Users& users, const Eqn& e) {
  if (e.op != Op::TopK) return false;
  const Eqn* col = users.find(e.results[1], Op::Reshape, [](const Eqn&) { return true; });
  if (!col) return false;
  const Eqn* eq = users.find(col->results[0], Op::Eq, [&](const Eqn& c) {
    return match::iotaLength(g, c.operands[c.operands[0] == col->results[0] ? 1 : 0]).has_value();
  });
  return eq && users.find(eq->results[0], Op::Select, [](const Eqn&) { return true; });
}

Match matchRouted(const Graph& g, const match::Users& users, const Eqn& topk) {
  auto no = [](std::string why) { return Match{std::nullopt, std::move(why)}; };
  ValueId scores = topk.operands[0], vals = topk.results[0], idx = topk.results[1];
  const Type& st = g.type(scores);
  int64_t E = st.shape.back(), k = std::get<int64_t>(*topk.attr("k")), rank = st.rank();
  if (st.dtype != DType::F32) return no("the router scores " + st.str() + " are not f32");
  if (defOp(g, scores, Op::Select)) return no("the scores are masked before the top-k (group-limited routing is not formed)");
  auto scoring = scoringOf(g, scores);
  if (!scoring) return no("the top-k reads neither a softmax over the last axis nor a sigmoid");
  auto router = linearOf(g, scoring->logits);
  if (!router) return no("the router logits are not MatMul(h, Transpose(W))");
  ValueId h = unwiden(g, router->x), routerW = unwiden(g, router->w);

  // The routing weights w: vals, or vals times a splat scale.
  double scale = 1.0;
  ValueId w = vals;
  if (const Eqn* mul = users.find(vals, Op::Mul, [&](const Eqn& m) {
        ValueId a, s;
        return orderBy(m, [&](ValueId v) { return v == vals; }, a, s) && match::splat(g, s).has_value();
      })) {
    scale = *match::splat(g, mul->operands[mul->operands[0] == vals ? 1 : 0]);
    w = mul->results[0];
  }
  // The spread R = ReduceSum(Select(Eq(Reshape(idx), Iota(E)), Reshape(w), 0)) over the k axis.
  const Eqn* rsum = nullptr;
  for (int32_t ci : users.of[size_t(idx)]) {
    const Eqn& col = g.eqns[size_t(ci)];
    if (col.op != Op::Reshape) continue;
    for (int32_t qi : users.of[size_t(col.results[0])]) {
      const Eqn& eq = g.eqns[size_t(qi)];
      ValueId c, iota;
      if (eq.op != Op::Eq || !orderBy(eq, [&](ValueId v) { return v == col.results[0]; }, c, iota) ||
          match::iotaLength(g, iota) != E)
        continue;
      const Eqn* sel = users.find(eq.results[0], Op::Select, [&](const Eqn& s) {
        return s.operands[0] == eq.results[0] && match::peelUnitReshapes(g, s.operands[1]) == w &&
               match::splat(g, s.operands[2]) == 0.0;
      });
      if (!sel) continue;
      rsum = users.find(sel->results[0], Op::ReduceSum, [&](const Eqn& r) {
        return match::axisOf(r, rank + 1) == rank - 1 && !flagAttr(r.attrs, "keepdim");
      });
    }
  }
  if (!rsum) return no("the top-k weights are not spread over the " + str(E) + " experts as Select(Eq(idx, Iota), w, 0) summed over k");
  ValueId R = rsum->results[0];
  const Type& ht = g.type(h);
  if (const Eqn* cv = users.find(R, Op::Convert, [&](const Eqn& c) { return g.type(c.results[0]).dtype == ht.dtype; });
      cv && ht.dtype != DType::F32)
    R = cv->results[0];

  // Expert e's output times its slice Rd[e:e+1], added in expert order.
  std::vector<ValueId> scaled(size_t(E), -1), outputs(size_t(E), -1), operands{h, routerW};
  for (int32_t si : users.of[size_t(R)]) {
    const Eqn& s = g.eqns[size_t(si)];
    auto axis = s.op == Op::Slice ? match::axisOf(s, rank) : std::nullopt;
    if (axis != rank - 1 || std::get<int64_t>(*s.attr("limit")) != std::get<int64_t>(*s.attr("start")) + 1) continue;
    int64_t e = std::get<int64_t>(*s.attr("start"));
    const Eqn* m = users.find(s.results[0], Op::Mul, [](const Eqn&) { return true; });
    if (!m || e < 0 || e >= E || scaled[size_t(e)] >= 0) continue;
    scaled[size_t(e)] = m->results[0];
    outputs[size_t(e)] = m->operands[m->operands[0] == s.results[0] ? 1 : 0];
  }
  for (int64_t e = 0; e < E; ++e) {
    if (scaled[size_t(e)] < 0) return no("expert " + str(e) + "'s routing weight does not scale an output");
    auto ws = expertOf(g, outputs[size_t(e)], h);
    if (!ws) return no("expert " + str(e) + "'s output is not the gated MLP MatMul(silu(h Wg^T) * (h Wu^T), Transpose(Wd)) of the router's h");
    operands.insert(operands.end(), ws->begin(), ws->end());
  }
  ValueId acc = scaled[0];
  for (int64_t e = 1; e < E; ++e) {
    const Eqn* add = users.find(acc, Op::Add, [&](const Eqn& a) {
      ValueId x, y;
      return orderBy(a, [&](ValueId v) { return v == acc; }, x, y) && y == scaled[size_t(e)];
    });
    if (!add) return no("expert " + str(e) + "'s scaled output is not added to the sum of experts 0.." + str(e - 1));
    acc = add->results[0];
  }
  Attrs attrs{{"experts", E},         {"k", k},     {"scoring", std::string(scoring->name)},
              {"renormalize", false}, {"scale", scale}, {"activation", std::string("silu")}};
  TypeQuery q;
  for (ValueId v : operands) q.operands.push_back(g.type(v));
  q.attrs = &attrs;
  TypeResult r = checkEqn(Op::RoutedExperts, q);
  if (!r.error.empty()) return no("the formed RoutedExperts does not type: " + r.error);
  if (r.types[0] != g.type(acc)) return no("the formed RoutedExperts gives " + r.types[0].str() + ", the chain " + g.type(acc).str());
  return Match{Routed{acc, std::move(operands), std::move(attrs)}, {}};
}

}  // namespace

Expected<bool> runRoutedExperts(Graph& g, PassContext& ctx) {
  std::vector<Routed> found;
  {
    match::Users users(g);
    for (const Eqn& e : g.eqns) {
      if (!isCandidate(g, users, e)) continue;
      Match m = matchRouted(g, users, e);
      if (m.routed) found.push_back(std::move(*m.routed));
      else ctx.remark(kPass, g, e, m.why);
    }
  }
  for (Routed& r : found) {
    size_t at = size_t(g.value(r.out).def);
    insertEqn(g, at, Op::RoutedExperts, std::move(r.operands), std::move(r.attrs),
              {{g.value(r.out).name + ".routed", g.type(r.out)}}, g.eqns[at].loc);
    ValueId op = g.eqns[at].results[0];
    bool exported = isExported(g, r.out);
    replaceAllUses(g, r.out, op);  // a fresh result can always take the uses
    if (!exported) std::swap(g.value(r.out).name, g.value(op).name);
  }
  if (found.empty()) return false;
  eraseDeadEqns(g);
  return true;
}

}  // namespace poot

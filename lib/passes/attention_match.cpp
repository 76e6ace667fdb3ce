// The pattern helpers of attention_match.h. Every helper only reads the
// graph; shapes are checked as well as ops, so a helper never accepts a chain
// whose broadcasting would make it mean something else.
#include "passes/attention_match.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "passes/rewrite.h"

namespace poot::match {

const Eqn* def(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (val.storage != Storage::Result || val.def < 0) return nullptr;
  return &g.eqns[size_t(val.def)];
}

const Eqn* defOp(const Graph& g, ValueId v, Op op) {
  const Eqn* e = def(g, v);
  return e && e->op == op ? e : nullptr;
}

Users::Users(const Graph& graph) : g(graph), of(computeUsers(graph)) {}

namespace {

Shape nonUnit(const Shape& s) {
  Shape out;
  for (int64_t d : s)
    if (d != 1) out.push_back(d);
  return out;
}

}  // namespace

bool isUnitReshape(const Shape& a, const Shape& b) { return nonUnit(a) == nonUnit(b); }

ValueId peelUnitReshapes(const Graph& g, ValueId v) {
  while (const Eqn* e = defOp(g, v, Op::Reshape)) {
    if (!isUnitReshape(g.type(e->operands[0]).shape, g.type(v).shape)) break;
    v = e->operands[0];
  }
  return v;
}

ValueId peelTo(const Graph& g, ValueId v, const Shape& shape) {
  while (g.type(v).shape != shape) {
    const Eqn* e = defOp(g, v, Op::Reshape);
    if (!e || !isUnitReshape(g.type(e->operands[0]).shape, g.type(v).shape)) break;
    v = e->operands[0];
  }
  return v;
}

std::optional<double> splat(const Graph& g, ValueId v) {
  while (const Eqn* e = def(g, v)) {
    if (e->op == Op::Reshape || e->op == Op::Broadcast) {
      v = e->operands[0];
      continue;
    }
    if (e->op != Op::Constant) return std::nullopt;
    const auto& vals = std::get<std::vector<double>>(*e->attr("value"));
    if (vals.empty()) return std::nullopt;
    double first = vals[0];
    bool same = std::all_of(vals.begin(), vals.end(), [&](double x) {
      return x == first || (x != x && first != first);
    });
    if (!same) return std::nullopt;
    return first;
  }
  return std::nullopt;
}

std::optional<int64_t> axisOf(const Eqn& e, int64_t rank) {
  const AttrValue* a = e.attr("axis");
  if (!a || !std::holds_alternative<int64_t>(*a)) return std::nullopt;
  return normalizeAxis(std::get<int64_t>(*a), rank);
}

std::optional<int64_t> iotaLength(const Graph& g, ValueId v) {
  const Eqn* e = defOp(g, peelUnitReshapes(g, v), Op::Iota);
  if (!e || !isInt(g.type(e->results[0]).dtype)) return std::nullopt;
  const Shape& s = g.type(e->results[0]).shape;
  auto axis = axisOf(*e, int64_t(s.size()));
  if (!axis) return std::nullopt;
  for (size_t i = 0; i < s.size(); ++i)
    if (int64_t(i) != *axis && s[i] != 1) return std::nullopt;
  return s[size_t(*axis)];
}

Repeat repeatOf(const Graph& g, ValueId x) {
  const Eqn* outer = defOp(g, x, Op::Reshape);
  if (!outer) return {x, 1};
  const Eqn* bc = defOp(g, outer->operands[0], Op::Broadcast);
  if (!bc) return {x, 1};
  const Eqn* inner = defOp(g, bc->operands[0], Op::Reshape);
  if (!inner) return {x, 1};
  ValueId base = inner->operands[0];
  const Shape &s = g.type(base).shape, &r = g.type(inner->results[0]).shape, &b = g.type(bc->results[0]).shape,
              &o = g.type(x).shape;
  if (s.size() != 4 || r.size() != 5 || b.size() != 5) return {x, 1};
  int64_t B = s[0], H = s[1], T = s[2], D = s[3], n = b[2];
  if (r != Shape{B, H, 1, T, D} || b != Shape{B, H, n, T, D} || o != Shape{B, H * n, T, D}) return {x, 1};
  return {base, n};
}

std::optional<PagedView> pagedView(const Graph& g, ValueId x) {
  const Eqn* t = defOp(g, x, Op::Transpose);
  if (!t || std::get<std::vector<int64_t>>(*t->attr("perm")) != std::vector<int64_t>{0, 2, 1, 3}) return std::nullopt;
  const Eqn* gather = defOp(g, t->operands[0], Op::Gather);
  if (!gather) return std::nullopt;
  ValueId pool = gather->operands[0], read = gather->operands[1];
  if (g.type(pool).rank() != 3 || g.type(read).rank() != 2 || axisOf(*gather, 3) != 0) return std::nullopt;
  return PagedView{pool, read};
}

std::optional<ValueId> liveLength(const Graph& g, ValueId cond, int keyAxis, int64_t B, int64_t Lk) {
  const Type& ct = g.type(cond);
  if (ct.dtype != DType::Bool || ct.rank() != 4) return std::nullopt;
  for (int i = 0; i < 4; ++i) {
    int64_t want = i == 0 ? B : i == keyAxis ? Lk : 1;
    if (ct.shape[size_t(i)] != want) return std::nullopt;
  }
  ValueId active = peelTo(g, cond, Shape{B, Lk});
  if (g.type(active).shape != Shape{B, Lk}) return std::nullopt;
  const Eqn* cmp = def(g, active);
  if (!cmp || (cmp->op != Op::Lt && cmp->op != Op::Gt)) return std::nullopt;
  ValueId kpos = cmp->operands[cmp->op == Op::Lt ? 0 : 1], lenCol = cmp->operands[cmp->op == Op::Lt ? 1 : 0];
  if (g.type(kpos).shape != Shape{1, Lk} || iotaLength(g, kpos) != Lk) return std::nullopt;
  if (g.type(lenCol).shape != Shape{B, 1}) return std::nullopt;
  ValueId len = peelTo(g, lenCol, Shape{B});
  if (g.type(len).shape != Shape{B} || !isInt(g.type(len).dtype)) return std::nullopt;
  return len;
}

std::optional<SelectOf> selectOf(const Graph& g, ValueId v) {
  const Eqn* s = defOp(g, v, Op::Select);
  if (!s) return std::nullopt;
  auto c = splat(g, s->operands[2]);
  if (!c || g.type(s->operands[1]) != g.type(v)) return std::nullopt;
  return SelectOf{s->operands[0], s->operands[1], *c};
}

namespace {

// The score axis (0 batch, 1 head, 2 query, 3 key) each axis of a value lands
// on under broadcasting, -1 for a unit axis (the value is constant along it).
using Axes = std::vector<int>;

// The axes of an operand broadcast (right-aligned, numpy style) into a result
// whose axes are `out`; empty when the operand has the larger rank.
std::optional<Axes> operandAxes(const Shape& operand, const Axes& out) {
  if (operand.size() > out.size()) return std::nullopt;
  Axes a(operand.size(), -1);
  size_t off = out.size() - operand.size();
  for (size_t i = 0; i < operand.size(); ++i) a[i] = operand[i] == 1 ? -1 : out[off + i];
  return a;
}

// A value and its axes.
struct View {
  ValueId v = -1;
  Axes axes;
};

// Follows Broadcast eqns and unit reshapes back to their source, carrying the
// axes along (a unit reshape keeps the non-unit axes in order).
View peelViews(const Graph& g, View x) {
  while (const Eqn* e = def(g, x.v)) {
    ValueId src = e->operands.empty() ? -1 : e->operands[0];
    const Shape& to = g.type(x.v).shape;
    if (e->op == Op::Broadcast) {
      auto a = operandAxes(g.type(src).shape, x.axes);
      if (!a) break;
      x = View{src, *a};
      continue;
    }
    if (e->op == Op::Reshape && isUnitReshape(g.type(src).shape, to)) {
      Axes kept;
      for (size_t i = 0; i < to.size(); ++i)
        if (to[i] != 1) kept.push_back(x.axes[i]);
      const Shape& from = g.type(src).shape;
      Axes a(from.size(), -1);
      for (size_t i = 0, k = 0; i < from.size(); ++i)
        if (from[i] != 1) a[i] = kept[k++];
      x = View{src, a};
      continue;
    }
    break;
  }
  return x;
}

// Operand i of e (whose result has axes `out`), peeled.
std::optional<View> operandView(const Graph& g, const Eqn& e, size_t i, const Axes& out) {
  auto a = operandAxes(g.type(e.operands[i]).shape, out);
  if (!a) return std::nullopt;
  return peelViews(g, View{e.operands[i], *a});
}

// Whether x is an i32 Iota counting the keys: its axis lands on the key axis
// and every other axis of it is a unit axis.
bool isKeyIota(const Graph& g, const View& x) {
  const Eqn* e = defOp(g, x.v, Op::Iota);
  if (!e || g.type(x.v).dtype != DType::I32) return false;
  const Shape& s = g.type(x.v).shape;
  auto axis = axisOf(*e, int64_t(s.size()));
  if (!axis || x.axes[size_t(*axis)] != 3) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (int64_t(i) != *axis && s[i] != 1) return false;
  return true;
}

// The query positions of a compare: i32, constant over heads and keys. The
// first one seen is kept in `m` (with its axes); later ones must be it.
std::string positionsOf(const Graph& g, const View& p, CausalMask& m, Axes& seen) {
  if (g.type(p.v).dtype != DType::I32)
    return std::string("the query positions are ") + dtypeName(g.type(p.v).dtype) + ", not i32";
  for (int a : p.axes)
    if (a == 1 || a == 3) return std::string("the positions the keys are compared with vary over the ") +
                                 (a == 1 ? "heads" : "keys");
  if (m.positions >= 0) return m.positions == p.v && seen == p.axes ? "" : "the causal and the window bounds compare the keys with different positions";
  m.positions = p.v;
  seen = p.axes;
  for (int a : p.axes) {
    m.perBatch = m.perBatch || a == 0;
    m.perQuery = m.perQuery || a == 2;
  }
  return "";
}

const std::string kNotCausal = "the visible keys are not t <= qpos (and t > qpos - window)";

// Le(kpos, qpos) or Ge(qpos, kpos), whose result has axes `out`.
std::string causalBound(const Graph& g, const Eqn& e, const Axes& out, CausalMask& m, Axes& seen) {
  size_t ik = e.op == Op::Le ? 0 : 1;
  auto k = operandView(g, e, ik, out), p = operandView(g, e, 1 - ik, out);
  if (!k || !p || !isKeyIota(g, *k)) return kNotCausal;
  return positionsOf(g, *p, m, seen);
}

// Gt(kpos, Sub(qpos, W)) or Lt(Sub(qpos, W), kpos), whose result has axes `out`.
std::string windowBound(const Graph& g, const Eqn& e, const Axes& out, CausalMask& m, Axes& seen) {
  size_t ik = e.op == Op::Gt ? 0 : 1;
  auto k = operandView(g, e, ik, out), z = operandView(g, e, 1 - ik, out);
  if (!k || !z || !isKeyIota(g, *k)) return kNotCausal;
  const Eqn* sub = defOp(g, z->v, Op::Sub);
  if (!sub) return kNotCausal;
  auto w = splat(g, sub->operands[1]);
  if (!w || *w < 1 || *w != std::floor(*w) || *w > double(std::numeric_limits<int32_t>::max()))
    return "the window is not a splat integer in [1, 2^31 - 1]";
  auto p = operandView(g, *sub, 0, z->axes);
  if (!p) return kNotCausal;
  m.window = int64_t(*w);
  return positionsOf(g, *p, m, seen);
}

}  // namespace

CausalMatch causalMask(const Graph& g, ValueId mask, const Shape& scores) {
  auto no = [](std::string why) { return CausalMatch{std::nullopt, std::move(why)}; };
  Axes scoreAxes;
  for (size_t i = 0; i < scores.size(); ++i) scoreAxes.push_back(scores[i] == 1 ? -1 : int(i));
  auto top = operandAxes(g.type(mask).shape, scoreAxes);
  if (!top || scores.size() != 4) return no("the mask does not broadcast to the scores");
  View mv = peelViews(g, View{mask, *top});
  const Eqn* sel = defOp(g, mv.v, Op::Select);
  if (!sel || splat(g, sel->operands[1]) != 0.0 ||
      splat(g, sel->operands[2]) != -std::numeric_limits<double>::infinity()) {
    const Eqn* e = def(g, mv.v);
    return no(std::string("it is not Select(visible, 0, -inf) but ") +
              (e ? std::string(opName(e->op)) : "the parameter %" + g.value(mv.v).name));
  }
  auto cond = operandView(g, *sel, 0, mv.axes);
  if (!cond) return no(kNotCausal);
  CausalMask m;
  Axes seen;
  const Eqn* e = def(g, cond->v);
  std::vector<std::pair<const Eqn*, Axes>> bounds;
  if (e && e->op == Op::And) {
    for (size_t i = 0; i < 2; ++i) {
      auto x = operandView(g, *e, i, cond->axes);
      if (!x) return no(kNotCausal);
      bounds.push_back({def(g, x->v), x->axes});
    }
  } else {
    bounds.push_back({e, cond->axes});
  }
  bool causal = false, window = false;
  for (const auto& [b, axes] : bounds) {
    std::string why = kNotCausal;
    if (b && (b->op == Op::Le || b->op == Op::Ge) && !causal) {
      why = causalBound(g, *b, axes, m, seen);
      causal = true;
    } else if (b && (b->op == Op::Gt || b->op == Op::Lt) && !window) {
      why = windowBound(g, *b, axes, m, seen);
      window = true;
    }
    if (!why.empty()) return no(why);
  }
  if (!causal) return no("a window without the causal bound t <= qpos is not a causal mask");
  return CausalMatch{m, ""};
}

}  // namespace poot::match

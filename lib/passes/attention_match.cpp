// The pattern helpers of attention_match.h. Every helper only reads the
// graph; shapes are checked as well as ops, so a helper never accepts a chain
// whose broadcasting would make it mean something else.
#include "passes/attention_match.h"

#include <algorithm>

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

}  // namespace poot::match

// rope: recognizes the rotary-embedding chains the tracer emits
// (lib/trace/ops.cpp, ops::rope) and replaces each with one Rope eqn, so the
// attention rewrite finds q and k each made by a single eqn. Two styles:
//   half:        x * C + Concat(Neg(Slice(x)[D/2:D]), Slice(x)[0:D/2]) * S,
//                anchored at the rotate-half Concat;
//   interleaved: P = Reshape(x) to [..., D/2, 2], x0 = P[..., 0:1], x1 = P[..., 1:2],
//                Reshape(Concat(x0 * c - x1 * s, x1 * c + x0 * s)) back to [..., D],
//                anchored at the pair Reshape.
// Multiplications and the final Add may take their operands in either order.
// Rope takes cos and sin D/2 wide (docs/graph-format.md). The half chain's
// tables are D wide: Concat(t, t) gives t, the narrower table the tracer built
// them from; a Constant of two equal halves (what canonicalize folds
// Concat(t, t) of a constant t into) gives a new Constant of one half; a
// width-1 (or scalar) table is kept as it is. Anything else declines, since
// halves that cannot be proven equal would change the result. The interleaved
// chain's tables end in a unit pair axis, dropped by taking the Reshape's
// operand, a new Constant, or a new Reshape; when canonicalize merged the pair
// Reshape with a Reshape before it, x is made again as a Reshape of the
// merged operand. One anchor may carry several chains (canonicalize merges
// the rotations of one x roped with two table pairs): each forms its Rope.
// An anchor with no chain is left as it is with a remark naming the first
// failing check. The Rope takes the chain result's uses and name. Products,
// sums and differences are the ones the chain computes, so at f32 the Rope
// is exact; at two-byte dtypes the chain rounds each product and the Rope
// does not.
#include <bit>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "passes/pass.h"
#include "passes/rewrite.h"

namespace poot {

namespace {

using Users = std::vector<std::vector<int32_t>>;

const Eqn* defOf(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  return val.storage == Storage::Result && val.def >= 0 ? &g.eqns[size_t(val.def)] : nullptr;
}

int64_t intAttr(const Eqn& e, const char* name) { return std::get<int64_t>(*e.attr(name)); }

// Whether a Slice or Concat works on the last axis of its operands.
bool onLastAxis(const Graph& g, const Eqn& e) {
  int64_t rank = g.type(e.operands[0]).rank();
  auto a = normalizeAxis(intAttr(e, "axis"), rank);
  return a && *a == rank - 1;
}

// x when v = Slice(x) over [start, limit) of x's last axis, else -1.
ValueId sliceOf(const Graph& g, ValueId v, int64_t start, int64_t limit) {
  const Eqn* d = defOf(g, v);
  if (!d || d->op != Op::Slice || !onLastAxis(g, *d)) return -1;
  return intAttr(*d, "start") == start && intAttr(*d, "limit") == limit ? d->operands[0] : -1;
}

// The operand of a binary eqn that is not `known` (known itself for op(known, known)).
ValueId otherOperand(const Eqn& e, ValueId known) { return e.operands[0] == known ? e.operands[1] : e.operands[0]; }

bool hasOperand(const Eqn& e, ValueId v) { return e.operands[0] == v || e.operands[1] == v; }

// The eqns of op `op` that use v, in order.
std::vector<const Eqn*> usersOf(const Graph& g, const Users& users, ValueId v, Op op) {
  std::vector<const Eqn*> out;
  for (int32_t i : users[size_t(v)])
    if (g.eqns[size_t(i)].op == op) out.push_back(&g.eqns[size_t(i)]);
  return out;
}

// A Rope operand: an existing value, or one the rewrite makes from `v`
// (a Constant of `values`, or a Reshape of v), of type `type`.
struct Operand {
  enum Kind { Existing, NewConstant, NewReshape } kind = Existing;
  ValueId v = -1;
  Type type;
  std::vector<double> values;
  const char* suffix = ".half";  // the made value is named after v with this suffix
};

Operand existing(const Graph& g, ValueId v) { return Operand{Operand::Existing, v, g.type(v), {}}; }

struct Match {
  const char* style = nullptr;
  Operand x, cos, sin;
  ValueId out = -1;  // the chain's result, replaced by the Rope
};

// The D/2-wide table of a half chain's D-wide table t, into `out`; the
// reason it cannot be had otherwise.
std::string halfTable(const Graph& g, ValueId t, const char* which, Operand& out) {
  const Type& ty = g.type(t);
  if (ty.rank() == 0 || ty.shape.back() == 1) {
    out = existing(g, t);
    return "";
  }
  const Eqn* d = defOf(g, t);
  if (d && d->op == Op::Concat && d->operands.size() == 2 && d->operands[0] == d->operands[1] && onLastAxis(g, *d)) {
    out = existing(g, d->operands[0]);
    return "";
  }
  std::string what = std::string("the ") + which + " table " + ty.str();
  if (!d || d->op != Op::Constant)
    return what + " is not Concat(t, t) of one half-width table t, nor a Constant of two equal halves";
  int64_t D = ty.shape.back(), H = D / 2;
  Type ht = ty;
  ht.shape.back() = H;
  const auto& full = std::get<std::vector<double>>(*d->attr("value"));
  if (full.size() == 1) {  // a splat stays a splat
    out = Operand{Operand::NewConstant, t, ht, full};
    return "";
  }
  std::vector<double> half;
  for (size_t row = 0; row < full.size(); row += size_t(D))
    for (int64_t j = 0; j < H; ++j) {
      double a = full[row + size_t(j)], b = full[row + size_t(H + j)];
      if (std::bit_cast<uint64_t>(a) != std::bit_cast<uint64_t>(b)) return what + " is a Constant whose two halves differ";
      half.push_back(a);
    }
  out = Operand{Operand::NewConstant, t, ht, std::move(half)};
  return "";
}

// The table of an interleaved chain without its unit pair axis, into `out`.
std::string pairTable(const Graph& g, ValueId c, const char* which, Operand& out) {
  const Type& ty = g.type(c);
  if (ty.rank() == 0) {
    out = existing(g, c);
    return "";
  }
  if (ty.shape.back() != 1)
    return std::string("the ") + which + " table " + ty.str() + " does not end in a unit axis over the pair";
  Type ht{ty.dtype, Shape(ty.shape.begin(), ty.shape.end() - 1)};
  const Eqn* d = defOf(g, c);
  if (d && d->op == Op::Reshape && g.type(d->operands[0]) == ht)
    out = existing(g, d->operands[0]);
  else if (d && d->op == Op::Constant)
    out = Operand{Operand::NewConstant, c, ht, std::get<std::vector<double>>(*d->attr("value"))};
  else
    out = Operand{Operand::NewReshape, c, ht, {}};
  return "";
}

// Whether Rope(x, cos, sin){style} types (as x, by its rule); the rule's message if not.
std::string ropeTypes(const Match& m) {
  Attrs attrs{Attr{"style", std::string(m.style)}};
  TypeQuery q;
  q.operands = {m.x.type, m.cos.type, m.sin.type};
  q.attrs = &attrs;
  TypeResult r = checkEqn(Op::Rope, q);
  return r.error.empty() ? "" : "the formed Rope does not type: " + r.error;
}

// ---------------------------------------------------------------- rotate-half

// A candidate: Concat(Neg(..), ..) of two operands along the last axis.
bool isHalfCandidate(const Graph& g, const Eqn& e) {
  if (e.op != Op::Concat || e.operands.size() != 2 || !onLastAxis(g, e)) return false;
  const Eqn* n = defOf(g, e.operands[0]);
  return n && n->op == Op::Neg;
}

// The chain from rotated * sin (the Mul `mulSin`) through an Add with x * cos.
std::string completeHalf(const Graph& g, ValueId x, ValueId rotated, const Eqn& mulSin, const Eqn& add, Match& m) {
  ValueId rs = mulSin.results[0], xc = otherOperand(add, rs);
  const Eqn* mulCos = defOf(g, xc);
  if (!mulCos || mulCos->op != Op::Mul || !hasOperand(*mulCos, x))
    return "the other operand of the Add is not x times a cos table";
  const Type& xt = g.type(x);
  for (ValueId v : {rs, xc, add.results[0]})
    if (g.type(v) != xt) return "the tables widen x " + xt.str() + " to " + g.type(v).str();
  if (auto why = halfTable(g, otherOperand(*mulCos, x), "cos", m.cos); !why.empty()) return why;
  if (auto why = halfTable(g, otherOperand(mulSin, rotated), "sin", m.sin); !why.empty()) return why;
  m.style = "half";
  m.x = existing(g, x);
  m.out = add.results[0];
  return ropeTypes(m);
}

// Every chain through the rotate-half Concat `cat` (one per table pair, when
// canonicalize merged the rotations of one x), into `found`; when there is
// none, the reason of the first branch that failed.
std::string matchHalf(const Graph& g, const Users& users, const Eqn& cat, std::vector<Match>& found) {
  ValueId rotated = cat.results[0];
  const Type& rt = g.type(rotated);
  int64_t D = rt.shape.back(), H = D / 2;
  if (D % 2 != 0) return "the rotated value " + rt.str() + " has an odd last axis";
  ValueId x = sliceOf(g, defOf(g, cat.operands[0])->operands[0], H, D);
  if (x < 0 || g.type(x) != rt)
    return "operand 1 of the rotate-half Concat is not Neg(Slice(x)[" + std::to_string(H) + ":" + std::to_string(D) +
           "]) of an x " + rt.str();
  if (sliceOf(g, cat.operands[1], 0, H) != x)
    return "operand 2 of the rotate-half Concat is not Slice(x)[0:" + std::to_string(H) + "] of the same x";
  std::string why;  // the first branch's failure
  for (const Eqn* mulSin : usersOf(g, users, rotated, Op::Mul)) {
    auto adds = usersOf(g, users, mulSin->results[0], Op::Add);
    if (adds.empty() && why.empty()) why = "rotated * sin feeds no Add";
    for (const Eqn* add : adds) {
      Match m;
      std::string w = completeHalf(g, x, rotated, *mulSin, *add, m);
      if (w.empty()) found.push_back(m);
      else if (why.empty()) why = w;
    }
  }
  if (!found.empty()) return "";
  return why.empty() ? "the rotated half feeds no Mul by a sin table" : why;
}

// ---------------------------------------------------------------- interleaved

// A candidate: a Reshape to [..., 2] that some last-axis Slice reads.
bool isInterleavedCandidate(const Graph& g, const Users& users, const Eqn& e) {
  if (e.op != Op::Reshape) return false;
  const Type& t = g.type(e.results[0]);
  if (t.rank() < 2 || t.shape.back() != 2) return false;
  for (const Eqn* s : usersOf(g, users, e.results[0], Op::Slice))
    if (onLastAxis(g, *s)) return true;
  return false;
}

// The chain from even = x0 * c - x1 * s (the Sub `even`) through
// odd = x1 * c + x0 * s, their Concat and the Reshape back to [..., D].
std::string completeInterleaved(const Graph& g, const Users& users, const Eqn& pairs, ValueId x0, ValueId x1,
                                const Eqn& even, ValueId c, Match& m) {
  const Eqn* x1s = defOf(g, even.operands[1]);
  if (!x1s || x1s->op != Op::Mul || !hasOperand(*x1s, x1))
    return "the Sub's second operand is not element 1 of the pairs times a sin table";
  ValueId s = otherOperand(*x1s, x1);
  const Eqn* odd = nullptr;
  for (const Eqn* mul : usersOf(g, users, x1, Op::Mul)) {
    if (otherOperand(*mul, x1) != c) continue;
    for (const Eqn* add : usersOf(g, users, mul->results[0], Op::Add)) {
      const Eqn* x0s = defOf(g, otherOperand(*add, mul->results[0]));
      if (!odd && x0s && x0s->op == Op::Mul && hasOperand(*x0s, x0) && otherOperand(*x0s, x0) == s) odd = add;
    }
  }
  if (!odd) return "no Add forms element 1 times the cos table plus element 0 times the sin table";
  for (ValueId v : {even.results[0], odd->results[0]})
    if (g.type(v) != g.type(x0)) return "the tables widen the pair elements " + g.type(x0).str() + " to " + g.type(v).str();
  const Eqn* cat = nullptr;
  for (const Eqn* e : usersOf(g, users, even.results[0], Op::Concat))
    if (!cat && e->operands.size() == 2 && e->operands[0] == even.results[0] && e->operands[1] == odd->results[0] &&
        onLastAxis(g, *e))
      cat = e;
  if (!cat) return "the rotated elements are not concatenated back into pairs";
  const Type& pt = g.type(pairs.results[0]);
  Type xt{pt.dtype, Shape(pt.shape.begin(), pt.shape.end() - 1)};
  xt.shape.back() *= 2;
  const Eqn* back = nullptr;
  for (const Eqn* e : usersOf(g, users, cat->results[0], Op::Reshape))
    if (!back && g.type(e->results[0]) == xt) back = e;
  if (!back) return "the rotated pairs are not reshaped back to " + xt.str();
  if (auto why = pairTable(g, c, "cos", m.cos); !why.empty()) return why;
  if (auto why = pairTable(g, s, "sin", m.sin); !why.empty()) return why;
  ValueId y = pairs.operands[0];
  m.style = "interleaved";
  m.x = g.type(y) == xt ? existing(g, y) : Operand{Operand::NewReshape, y, xt, {}, ".rows"};
  m.out = back->results[0];
  return ropeTypes(m);
}

// Every chain through the pair Reshape `pairs` (one per table pair), into
// `found`; when there is none, the reason of the first branch that failed.
std::string matchInterleaved(const Graph& g, const Users& users, const Eqn& pairs, std::vector<Match>& found) {
  ValueId p = pairs.results[0];
  ValueId x0 = -1, x1 = -1;
  for (const Eqn* s : usersOf(g, users, p, Op::Slice)) {
    if (x0 < 0 && sliceOf(g, s->results[0], 0, 1) == p) x0 = s->results[0];
    if (x1 < 0 && sliceOf(g, s->results[0], 1, 2) == p) x1 = s->results[0];
  }
  if (x0 < 0 || x1 < 0) return "the pair reshape " + g.type(p).str() + " is not sliced into its elements 0 and 1";
  std::string why;  // the first branch's failure
  for (const Eqn* mul : usersOf(g, users, x0, Op::Mul))
    for (const Eqn* sub : usersOf(g, users, mul->results[0], Op::Sub)) {
      if (sub->operands[0] != mul->results[0]) continue;
      Match m;
      std::string w = completeInterleaved(g, users, pairs, x0, x1, *sub, otherOperand(*mul, x0), m);
      if (w.empty()) found.push_back(m);
      else if (why.empty()) why = w;
    }
  if (!found.empty()) return "";
  return why.empty() ? "no Sub takes element 0 of the pairs times a cos table as its first operand" : why;
}

// ---------------------------------------------------------------- rewrite

struct Rewriter {
  Graph& g;
  std::map<ValueId, ValueId> replaced;  // a chain's result -> its Rope
  std::map<std::tuple<int, ValueId, std::string>, ValueId> made;

  ValueId resolve(ValueId v) const {
    for (auto it = replaced.find(v); it != replaced.end(); it = replaced.find(v)) v = it->second;
    return v;
  }

  // The operand's value, made just before eqn `at` when it is new (and
  // reused when an earlier rewrite made the same one before `at`).
  ValueId materialize(const Operand& o, size_t& at, const Loc& loc) {
    ValueId src = resolve(o.v);
    if (o.kind == Operand::Existing) return src;
    auto key = std::make_tuple(int(o.kind), src, o.type.str());  // the same source made the same way
    if (auto it = made.find(key); it != made.end() && g.value(it->second).def < int32_t(at)) return it->second;
    std::string name = g.value(src).name + o.suffix;
    if (o.kind == Operand::NewConstant)
      insertEqn(g, at, Op::Constant, {}, {Attr{"value", o.values}}, {{name, o.type}}, loc);
    else
      insertEqn(g, at, Op::Reshape, {src}, {}, {{name, o.type}}, loc);
    ValueId v = g.eqns[at++].results[0];
    made[key] = v;
    return v;
  }

  // Inserts the Rope before the chain's last eqn; the Rope takes over the
  // chain result's uses and its name.
  void apply(const Match& m) {
    size_t at = size_t(g.value(m.out).def);
    Loc loc = g.eqns[at].loc;
    ValueId x = materialize(m.x, at, loc);
    ValueId cos = materialize(m.cos, at, loc);
    ValueId sin = materialize(m.sin, at, loc);
    insertEqn(g, at, Op::Rope, {x, cos, sin}, {Attr{"style", std::string(m.style)}},
              {{g.value(m.out).name + ".rope", g.type(m.out)}}, loc);
    ValueId rope = g.eqns[at].results[0];
    bool exported = isExported(g, m.out);
    replaceAllUses(g, m.out, rope);  // a fresh result can always take the uses
    if (!exported) std::swap(g.value(m.out).name, g.value(rope).name);
    replaced[m.out] = rope;
  }
};

}  // namespace

Expected<bool> runRope(Graph& g, PassContext& ctx) {
  Users users = computeUsers(g);
  std::vector<Match> matches;
  std::set<ValueId> claimed;  // a chain result two candidates would share goes to the first
  for (const Eqn& e : g.eqns) {
    bool half = isHalfCandidate(g, e);
    if (!half && !isInterleavedCandidate(g, users, e)) continue;
    std::vector<Match> found;
    std::string why = half ? matchHalf(g, users, e, found) : matchInterleaved(g, users, e, found);
    for (const Match& m : found)
      if (claimed.insert(m.out).second) matches.push_back(m);
    if (!why.empty()) ctx.remark("rope", g, e, std::string(half ? "rotate-half" : "interleaved") + " chain: " + why);
  }
  if (matches.empty()) return false;
  Rewriter rw{g, {}, {}};
  for (const Match& m : matches) rw.apply(m);
  eraseDeadEqns(g);
  return true;
}

}  // namespace poot

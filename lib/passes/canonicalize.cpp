// canonicalize: the first pass, which puts the traced graph into the one form
// the recognition passes match. To a fixed point it folds constants (an eqn
// whose operands are all Constant eqns and whose single result has at most
// 4096 elements becomes a Constant with the oracle's exact values), shortens
// Reshape, Broadcast and Transpose chains (two in a row become one; one to
// its operand's own type, or an identity permutation, becomes the operand),
// merges common subexpressions (same op, operands, attributes and result
// types: the later eqn's uses go to the first), and removes dead eqns. It
// keeps the chains later passes recognize: Iota is never folded (masks are
// built on it), a Transpose that feeds a MatMul is not merged into the
// Transpose before it (the seed's MatMul(q, Transpose(k_exp)) stays whole),
// and no rule looks across a Broadcast into a Reshape, so the GQA repeat
// (Reshape -> Broadcast -> Reshape) and the rope chains survive. Every sweep
// runs in eqn order, so equal graphs give equal graphs, and edits are made in
// place or through replaceAllUses, so surviving values keep their names.
#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>

#include "oracle/interp.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace poot {

namespace {

constexpr int64_t kMaxFoldElements = 4096;
constexpr int kMaxRounds = 1000;  // each round shrinks the graph; this only guards a bug

const Eqn* defOf(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  return val.storage == Storage::Result && val.def >= 0 ? &g.eqns[size_t(val.def)] : nullptr;
}

bool isConstant(const Graph& g, ValueId v) {
  const Eqn* d = defOf(g, v);
  return d && d->op == Op::Constant;
}

// ---------------------------------------------------------------- folding

// The value list of e evaluated by the oracle on its Constant operands, one
// value when every element is the same (a splat); nullopt when the oracle
// refuses (an index out of range, an integer division by zero: left for the
// run to report) or an i64 value has no exact double.
std::optional<std::vector<double>> evaluateOnConstants(const Graph& g, const Eqn& e) {
  Graph one;
  one.name = "fold";
  std::vector<ValueId> operands;
  for (ValueId v : e.operands) {
    std::string name = "c" + std::to_string(operands.size());
    operands.push_back(one.addEqn(Op::Constant, {}, defOf(g, v)->attrs, {{name, g.type(v)}}).results[0]);
  }
  ValueId r = one.addEqn(e.op, operands, e.attrs, {{"r", g.type(e.results[0])}}).results[0];
  auto ev = evaluate(one, {});
  if (!ev) return std::nullopt;
  const Tensor& t = ev->values[size_t(r)];
  std::vector<double> vals(size_t(t.size()));
  bool splat = true;
  for (int64_t i = 0; i < t.size(); ++i) {
    double v = t.get(i);
    if (t.dtype() == DType::I64 && std::fabs(v) > 9007199254740992.0) return std::nullopt;  // 2^53
    vals[size_t(i)] = v;
    splat = splat && std::bit_cast<uint64_t>(v) == std::bit_cast<uint64_t>(vals[0]);
  }
  if (splat && !vals.empty()) vals.resize(1);
  return vals;
}

// Folds every foldable eqn in place: it becomes a Constant of its own type, so
// its result keeps its id and name.
bool foldConstants(Graph& g) {
  bool changed = false;
  for (Eqn& e : g.eqns) {
    if (e.op == Op::Constant || e.operands.empty() || e.results.size() != 1) continue;
    if (numel(g.type(e.results[0]).shape) > kMaxFoldElements) continue;
    bool allConstant = true;
    for (ValueId v : e.operands) allConstant = allConstant && isConstant(g, v);
    if (!allConstant) continue;
    auto vals = evaluateOnConstants(g, e);
    if (!vals) continue;
    e.op = Op::Constant;
    e.operands.clear();
    e.attrs = {Attr{"value", std::move(*vals)}};
    changed = true;
  }
  return changed;
}

// ---------------------------------------------------------------- shape chains

bool feedsMatMul(const Graph& g, ValueId v) {
  for (const Eqn& e : g.eqns)
    if (e.op == Op::MatMul && (e.operands[0] == v || e.operands[1] == v)) return true;
  return false;
}

// Whether the eqn `op(x) {attrs} : declared` passes the op's type rule, so a
// rewritten eqn is checked before it is made.
bool typesAs(const Graph& g, Op op, ValueId x, const Attrs& attrs, const Type& declared) {
  TypeQuery q;
  q.operands = {g.type(x)};
  q.attrs = &attrs;
  q.declared = {declared};
  TypeResult r = checkEqn(op, q);
  return r.error.empty() && r.types.size() == 1 && r.types[0] == declared;
}

const std::vector<int64_t>& permOf(const Eqn& e) { return std::get<std::vector<int64_t>>(*e.attr("perm")); }

// Reshape(Reshape(x)) -> Reshape(x); Broadcast(Broadcast(x)) -> Broadcast(x);
// Transpose(Transpose(x)) -> Transpose(x) with the composed permutation;
// Reshape or Broadcast to x's own type, and an identity Transpose, -> x.
bool simplifyShapes(Graph& g) {
  bool changed = false;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    Eqn& e = g.eqns[i];
    if (e.op != Op::Reshape && e.op != Op::Broadcast && e.op != Op::Transpose) continue;
    ValueId r = e.results[0];
    const Eqn* inner = defOf(g, e.operands[0]);
    if (inner && inner->op == e.op) {
      ValueId x = inner->operands[0];
      Attrs attrs = e.attrs;
      if (e.op == Op::Transpose) {
        const std::vector<int64_t>&outer = permOf(e), &first = permOf(*inner);
        std::vector<int64_t> perm(outer.size());
        for (size_t j = 0; j < outer.size(); ++j) perm[j] = first[size_t(outer[j])];
        attrs = {Attr{"perm", perm}};
      }
      if ((e.op != Op::Transpose || !feedsMatMul(g, r)) && typesAs(g, e.op, x, attrs, g.type(r))) {
        e.operands[0] = x;
        e.attrs = std::move(attrs);
        changed = true;
      }
    }
    bool identity = e.op == Op::Transpose ? std::is_sorted(permOf(e).begin(), permOf(e).end())
                                          : g.type(e.operands[0]) == g.type(r);
    if (identity && canReplace(g, r, e.operands[0])) {
      replaceAllUses(g, r, e.operands[0]);  // e is left for eraseDeadEqns
      changed = true;
    }
  }
  return changed;
}

}  // namespace

Expected<bool> runCanonicalize(Graph& g, PassContext&) {
  bool any = false;
  for (int round = 0; round < kMaxRounds; ++round) {
    // Dead eqns go after every step, so no step sees what an earlier one orphaned.
    bool changed = eraseDeadEqns(g);
    for (bool (*step)(Graph&) : {foldConstants, simplifyShapes, eliminateCommon}) {
      changed |= step(g);
      changed |= eraseDeadEqns(g);
    }
    if (!changed) return any;
    any = true;
  }
  return makeError(ErrorKind::Verify, g.loc, "internal: canonicalize did not reach a fixed point");
}

}  // namespace poot

// Collecting the fusion groups of a graph and checking the rules of
// fusion.h, one group at a time in root order.
#include "ir/fusion.h"

#include <algorithm>
#include <functional>
#include <map>

namespace poot {

namespace {

Error broken(const Eqn& e, int64_t id, const std::string& why) {
  return makeError(ErrorKind::Verify, e.loc, "fusion group " + std::to_string(id) + ": " + why);
}

bool elementwise(Op op) { return (op >= Op::Exp && op <= Op::Select) || op == Op::Convert; }

// A member's result read outside the group before its root runs, if any.
Status readAfterRoot(const FusionContext& c, const FusionGroup& grp, ValueId r,
                     const std::function<bool(int32_t)>& member) {
  const Graph& g = c.g;
  for (int32_t u : c.users[size_t(r)])
    if (!member(u) && u < grp.root())
      return broken(g.eqns[size_t(u)], grp.id, "%" + g.value(r).name + " is read here, before the group's root %" +
                                                   g.value(g.eqns[size_t(grp.root())].results[0]).name + " runs");
  return ok();
}

// The product group rules (fusion.h); inputs are a, then each member's b.
Status completeProducts(const FusionContext& c, FusionGroup& grp) {
  const Graph& g = c.g;
  const Eqn& first = g.eqns[size_t(grp.members[0])];
  auto member = [&](int32_t eqn) { return std::binary_search(grp.members.begin(), grp.members.end(), eqn); };
  grp.products = true;
  grp.inputs = {first.operands[0]};
  for (int32_t m : grp.members) {
    const Eqn& e = g.eqns[size_t(m)];
    if (e.op != Op::MatMul) return broken(e, grp.id, std::string(opName(e.op)) + " in a group of MatMuls");
    if (e.operands[0] != first.operands[0])
      return broken(e, grp.id, "the products of a group read one a; this one reads %" +
                                   g.value(e.operands[0]).name + ", the first %" + g.value(first.operands[0]).name);
    const Type &b = g.type(e.operands[1]), &r = g.type(e.results[0]);
    if (b.rank() != 2) return broken(e, grp.id, "a grouped product reads a weight b of rank 2, not " + b.str());
    if (flagAttr(e.attrs, "transpose_b") != flagAttr(first.attrs, "transpose_b") ||
        b.dtype != g.type(first.operands[1]).dtype || r.dtype != g.type(first.results[0]).dtype)
      return broken(e, grp.id, "the products of a group share transpose_b and the dtypes of b and of the result");
    if (c.forbidden[size_t(e.results[0])])
      return broken(e, grp.id, "a member's result is a state's new value or a validation witness");
    if (auto s = readAfterRoot(c, grp, e.results[0], member); !s) return s;
    grp.inputs.push_back(e.operands[1]);
    grp.outputs.push_back(e.results[0]);
  }
  return ok();
}

}  // namespace

int64_t fusionId(const Eqn& e) {
  const AttrValue* v = e.attr("fusion");
  return v && attrKindOf(*v) == AttrKind::Int ? std::get<int64_t>(*v) : -1;
}

bool broadcastsTo(const Shape& s, const Shape& to) {
  if (s.size() > to.size()) return false;
  size_t lead = to.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] != 1 && s[d] != to[lead + d]) return false;
  return true;
}

Shape rowShape(const Shape& s) {
  Shape r = s;
  if (!r.empty()) r.back() = 1;
  return r;
}

FusionContext::FusionContext(const Graph& graph)
    : g(graph), users(graph.values.size()), exported(graph.values.size(), 0), forbidden(graph.values.size(), 0) {
  for (size_t i = 0; i < g.eqns.size(); ++i)
    for (ValueId v : g.eqns[i].operands)
      if (users[size_t(v)].empty() || users[size_t(v)].back() != int32_t(i)) users[size_t(v)].push_back(int32_t(i));
  for (const Export& x : g.outputs) exported[size_t(x.value)] = 1;
  for (const StateOut& s : g.stateOuts) forbidden[size_t(s.value)] = 1;
  for (const Export& x : g.validations) forbidden[size_t(x.value)] = 1;
}

bool keepsLayout(const Graph& g, const Eqn& e) {
  if (e.operands.size() != 1 || e.results.size() != 1) return false;
  const Type& in = g.type(e.operands[0]);
  const Type& out = g.type(e.results[0]);
  if (in.dtype != out.dtype || numel(in.shape) != numel(out.shape)) return false;
  switch (e.op) {
    case Op::Reshape:
    case Op::Broadcast: return true;
    case Op::Transpose: {
      const AttrValue* perm = e.attr("perm");
      if (!perm || attrKindOf(*perm) != AttrKind::Ints) return false;
      int64_t prev = -1;
      for (int64_t a : std::get<std::vector<int64_t>>(*perm)) {
        if (a < 0 || a >= in.rank()) return false;
        if (in.shape[size_t(a)] == 1) continue;
        if (a < prev) return false;
        prev = a;
      }
      return true;
    }
    default: return false;
  }
}

bool writesInPlace(const Graph& g, const Eqn& e) {
  if (e.op != Op::DynamicUpdateSlice && e.op != Op::ScatterUpdate) return false;
  for (const StateOut& s : g.stateOuts)
    if (s.value == e.results[0] && s.state == e.operands[0]) return true;
  return false;
}

Status completeGroup(const FusionContext& c, FusionGroup& grp) {
  const Graph& g = c.g;
  const int64_t id = grp.id;
  auto member = [&](int32_t eqn) { return std::binary_search(grp.members.begin(), grp.members.end(), eqn); };
  auto defined = [&](ValueId v) { return g.value(v).def >= 0 && member(g.value(v).def); };
  const Eqn& rootEqn = g.eqns[size_t(grp.root())];
  grp.rows = false;
  grp.products = false;
  grp.inputs.clear();
  grp.outputs.clear();
  if (g.eqns[size_t(grp.members[0])].op == Op::MatMul) return completeProducts(c, grp);
  const bool inPlace = rootEqn.op == Op::DynamicUpdateSlice && writesInPlace(g, rootEqn);
  for (int32_t m : grp.members) {
    const Eqn& e = g.eqns[size_t(m)];
    bool root = m == grp.root();
    if ((!fusibleOp(e.op) && !(root && inPlace)) || e.results.size() != 1)
      return broken(e, id, std::string(opName(e.op)) + " cannot run in a fused kernel" +
                               (e.op == Op::DynamicUpdateSlice ? " but as its root, writing the state it reads" : ""));
    if (c.forbidden[size_t(e.results[0])] && !(root && inPlace))
      return broken(e, id, "a member's result is a state's new value or a validation witness");
  }
  // An in-place root's space is its update's (operand 1); its state
  // (operand 0) is a state value, never a member's result.
  grp.space = g.type(inPlace ? rootEqn.operands[1] : rootEqn.results[0]).shape;
  for (int32_t m : grp.members) {
    const Eqn& e = g.eqns[size_t(m)];
    if (!isReduction(e.op)) continue;
    const Shape& s = g.type(e.operands[0]).shape;
    int64_t axis = std::get<int64_t>(*e.attr("axis"));
    if (s.empty() || *normalizeAxis(axis, int64_t(s.size())) != int64_t(s.size()) - 1 ||
        !std::get<bool>(*e.attr("keepdim")))
      return broken(e, id, "a fused reduction reduces the last axis with keepdim");
    DType t = g.type(e.results[0]).dtype;
    if (!isFloat(t) && t != DType::I32)
      return broken(e, id, "a fused reduction is a float (its partials are f32 in workgroup memory) or i32, not " +
                               std::string(dtypeName(t)));
    if (grp.rows && s != grp.space)
      return broken(e, id, "its reductions read " + shapeStr(grp.space) + " and " + shapeStr(s) + "; a group has one row shape");
    if (inPlace) return broken(e, id, "a group that writes a state in place has no reductions");
    grp.rows = true;
    grp.space = s;
  }
  std::vector<ValueId> derived;  // member results computed from a reduction
  auto isDerived = [&](ValueId v) { return std::find(derived.begin(), derived.end(), v) != derived.end(); };
  for (int32_t m : grp.members) {
    const Eqn& e = g.eqns[size_t(m)];
    ValueId r = e.results[0];
    bool fromReduction = isReduction(e.op);
    for (ValueId v : e.operands) {
      if (!defined(v)) {
        if (std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end()) grp.inputs.push_back(v);
      } else if (isDerived(v)) {
        fromReduction = true;
        if (!(elementwise(e.op) || isReduction(e.op)) || !broadcastsTo(g.type(r).shape, grp.space))
          return broken(e, id, std::string(opName(e.op)) + " " + g.type(r).str() +
                                   " is computed from a reduction, so it must be elementwise (or a reduction) and "
                                   "broadcast to the row shape " + shapeStr(grp.space));
      }
    }
    if (fromReduction) derived.push_back(r);
    if (auto s = readAfterRoot(c, grp, r, member); !s) return s;
    bool outside = c.exported[size_t(r)] != 0;
    for (int32_t u : c.users[size_t(r)]) outside |= !member(u);
    if (!outside) continue;
    const Shape& s = g.type(r).shape;
    bool fits = grp.rows ? (s == grp.space || s == rowShape(grp.space))
                         : s == grp.space || (inPlace && m == grp.root());  // the state written in place
    if (!fits)
      return broken(e, id, "output %" + g.value(r).name + " " + g.type(r).str() + " must have the shape " +
                               shapeStr(grp.space) + (grp.rows ? " or " + shapeStr(rowShape(grp.space)) : ""));
    grp.outputs.push_back(r);
  }
  if (grp.outputs.empty()) return broken(rootEqn, id, "no member's result is read outside the group");
  return ok();
}

Expected<std::vector<FusionGroup>> fusionGroups(const Graph& g) {
  std::map<int64_t, FusionGroup> byId;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    const Eqn& e = g.eqns[i];
    if (!e.attr("fusion")) continue;
    int64_t id = fusionId(e);
    if (id < 0) return broken(e, id, "a fusion id is not negative");
    FusionGroup& grp = byId[id];
    grp.id = id;
    grp.members.push_back(int32_t(i));
  }
  std::vector<FusionGroup> out;
  if (byId.empty()) return out;
  FusionContext c(g);
  for (auto& [id, grp] : byId) {
    if (auto s = completeGroup(c, grp); !s) return s.error();
    out.push_back(std::move(grp));
  }
  std::sort(out.begin(), out.end(), [](const FusionGroup& a, const FusionGroup& b) { return a.root() < b.root(); });
  return out;
}

}  // namespace poot

// Shared graph edits of the passes; see rewrite.h.
#include "passes/rewrite.h"


namespace poot {

std::vector<std::vector<int32_t>> computeUsers(const Graph& g) {
  std::vector<std::vector<int32_t>> users(g.values.size());
  for (size_t i = 0; i < g.eqns.size(); ++i)
    for (ValueId v : g.eqns[i].operands) {
      auto& u = users[size_t(v)];
      if (u.empty() || u.back() != int32_t(i)) u.push_back(int32_t(i));
    }
  return users;
}

bool isExported(const Graph& g, ValueId v) {
  for (const Export& o : g.outputs)
    if (o.value == v) return true;
  for (const Export& w : g.validations)
    if (w.value == v) return true;
  for (const StateOut& s : g.stateOuts)
    if (s.value == v) return true;
  return false;
}

bool replaceAllUses(Graph& g, ValueId from, ValueId to) {
  if (from == to) return true;
  bool exported = isExported(g, from);
  if (exported && (g.value(to).storage != Storage::Result || isExported(g, to))) return false;
  for (Eqn& e : g.eqns)
    for (ValueId& v : e.operands)
      if (v == from) v = to;
  if (exported) {
    for (Export& o : g.outputs)
      if (o.value == from) o.value = to;
    for (Export& w : g.validations)
      if (w.value == from) w.value = to;
    for (StateOut& s : g.stateOuts)
      if (s.value == from) s.value = to;
    std::string name = g.value(from).name;
    g.value(from).name = freshName(g, name + ".replaced");
    g.value(to).name = name;
  }
  return true;
}

std::string freshName(const Graph& g, const std::string& base) {
  // A scan per candidate, no set of every name: passes call this once per
  // inserted eqn, and the base name is almost always free.
  auto used = [&](const std::string& name) {
    for (const Value& v : g.values)
      if (v.name == name) return true;
    return false;
  };
  if (!used(base)) return base;
  for (int i = 1;; ++i) {
    std::string name = base + "." + std::to_string(i);
    if (!used(name)) return name;
  }
}

int32_t insertEqn(Graph& g, size_t pos, Op op, std::vector<ValueId> operands, Attrs attrs,
                  const std::vector<std::pair<std::string, Type>>& results, Loc loc) {
  std::vector<std::pair<std::string, Type>> named;
  for (const auto& [name, type] : results) named.push_back({freshName(g, name), type});
  g.addEqn(op, std::move(operands), std::move(attrs), named, loc);
  Eqn e = std::move(g.eqns.back());
  g.eqns.pop_back();
  g.eqns.insert(g.eqns.begin() + std::ptrdiff_t(pos), std::move(e));
  g.reindex();
  return int32_t(pos);
}

bool eraseDeadEqns(Graph& g) {
  std::vector<bool> live(g.values.size());
  for (const Export& o : g.outputs) live[size_t(o.value)] = true;
  for (const Export& w : g.validations) live[size_t(w.value)] = true;
  for (const StateOut& s : g.stateOuts) live[size_t(s.value)] = true;
  std::vector<bool> keep(g.eqns.size());
  for (size_t i = g.eqns.size(); i-- > 0;) {
    const Eqn& e = g.eqns[i];
    for (ValueId r : e.results) keep[i] = keep[i] || live[size_t(r)];
    if (keep[i])
      for (ValueId v : e.operands) live[size_t(v)] = true;
  }
  std::vector<Eqn> kept;
  for (size_t i = 0; i < g.eqns.size(); ++i)
    if (keep[i]) kept.push_back(std::move(g.eqns[i]));
  bool changed = kept.size() != g.eqns.size();
  g.eqns = std::move(kept);
  g.reindex();
  return changed;
}

}  // namespace poot

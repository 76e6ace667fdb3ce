// Shared graph edits of the passes; see rewrite.h.
#include "passes/rewrite.h"

#include <bit>
#include <map>

namespace poot {

namespace {

// The key two eqns share exactly when they compute the same thing: op,
// operands, attributes (floats by their bits, so 0 and -0 differ) and result types.
std::string keyOf(const Graph& g, const Eqn& e) {
  std::string k = opName(e.op);
  k += '(';
  for (ValueId v : e.operands) k += std::to_string(v) + ',';
  k += "){";
  auto bits = [](double d) { return std::to_string(std::bit_cast<uint64_t>(d)); };
  for (const Attr& a : e.attrs) {
    k += a.name + '=';
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, double>) k += bits(v);
          else if constexpr (std::is_same_v<T, std::string>) k += v;
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            for (int64_t x : v) k += std::to_string(x) + ' ';
          else if constexpr (std::is_same_v<T, std::vector<double>>)
            for (double x : v) k += bits(x) + ' ';
          else k += std::to_string(v);  // int64_t, bool
        },
        a.value);
    k += ';';
  }
  k += "}:";
  for (ValueId r : e.results) k += g.type(r).str() + ',';
  return k;
}

}  // namespace


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

bool canReplace(const Graph& g, ValueId from, ValueId to) {
  return !isExported(g, from) || (g.value(to).storage == Storage::Result && !isExported(g, to));
}

// Each eqn equal to an earlier one has its uses moved to the earlier one's
// results (skipped when two exported values would have to become one).
bool eliminateCommon(Graph& g) {
  bool changed = false;
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    auto [it, fresh] = first.emplace(keyOf(g, g.eqns[i]), i);
    if (fresh) continue;
    const Eqn &e = g.eqns[i], &keep = g.eqns[it->second];
    bool replaceable = true;
    for (size_t j = 0; j < e.results.size(); ++j)
      replaceable = replaceable && canReplace(g, e.results[j], keep.results[j]);
    if (!replaceable) continue;
    for (size_t j = 0; j < e.results.size(); ++j) replaceAllUses(g, e.results[j], keep.results[j]);
    changed = true;
  }
  return changed;
}

}  // namespace poot

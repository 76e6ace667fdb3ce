// guards-first: moves every IndexGuard, with the eqns its operand needs,
// ahead of all other eqns (each group keeping its order), so a plan computes
// its validation witnesses before any dispatch writes a state in place. The
// runtime then runs that prefix, reads the witnesses, and stops a failing step
// before any output is published or any KV cache changes (the seed's
// validation channel, kept on a GPU without copying the state). A guard whose
// cone itself writes a state stays where it is (moving that write could put
// it before a read of the old state); the runtime falls back to restoring a
// copy of the state for such a plan.
#include <vector>

#include "passes/pass.h"

namespace poot {

namespace {

// The eqns `guard` needs, itself included, or empty when one of them writes a state.
std::vector<bool> coneOf(const Graph& g, size_t guard, const std::vector<bool>& writesState) {
  std::vector<bool> needed(g.values.size(), false), cone(g.eqns.size(), false);
  for (size_t i = guard + 1; i-- > 0;) {
    const Eqn& e = g.eqns[i];
    bool in = i == guard;
    for (ValueId r : e.results) in |= needed[size_t(r)];
    if (!in) continue;
    if (writesState[i]) return {};
    cone[i] = true;
    for (ValueId v : e.operands) needed[size_t(v)] = true;
  }
  return cone;
}

}  // namespace

Expected<bool> runGuardsFirst(Graph& g, PassContext&) {
  std::vector<bool> writesState(g.eqns.size(), false);
  std::vector<int32_t> defOf(g.values.size(), -1);
  for (size_t i = 0; i < g.eqns.size(); ++i)
    for (ValueId r : g.eqns[i].results) defOf[size_t(r)] = int32_t(i);
  for (const StateOut& s : g.stateOuts)
    if (defOf[size_t(s.value)] >= 0) writesState[size_t(defOf[size_t(s.value)])] = true;

  std::vector<bool> first(g.eqns.size(), false);
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    if (g.eqns[i].op != Op::IndexGuard) continue;
    std::vector<bool> cone = coneOf(g, i, writesState);
    for (size_t j = 0; j < cone.size(); ++j) first[j] = first[j] || cone[j];
  }
  std::vector<Eqn> order;
  order.reserve(g.eqns.size());
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < g.eqns.size(); ++i)
      if (first[i] == (pass == 0)) order.push_back(g.eqns[i]);
  bool changed = false;
  for (size_t i = 0, k = 0; i < g.eqns.size(); ++i)
    if (first[i]) changed |= i != k++;
  if (!changed) return false;
  g.eqns = std::move(order);
  g.reindex();
  return true;
}

}  // namespace poot

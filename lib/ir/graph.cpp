// Graph construction helpers.
#include "ir/graph.h"

#include <algorithm>
#include <set>

namespace poot {

const char* storageName(Storage s) {
  static const char* names[] = {"result", "input", "weight", "state", "slot"};
  return names[int(s)];
}

const AttrValue* Eqn::attr(std::string_view name) const {
  for (const Attr& a : attrs)
    if (a.name == name) return &a.value;
  return nullptr;
}

ValueId Graph::addParam(std::string name, Type type, Storage storage, Loc loc) {
  ValueId id = ValueId(values.size());
  values.push_back(Value{std::move(name), std::move(type), storage, 0, 0, -1, std::move(loc)});
  params.push_back(id);
  return id;
}

Eqn& Graph::addEqn(Op op, std::vector<ValueId> operands, Attrs attrs,
                   const std::vector<std::pair<std::string, Type>>& results, Loc loc) {
  Eqn e{op, std::move(operands), {}, std::move(attrs), loc, loc};
  for (const auto& [name, type] : results) {
    e.results.push_back(ValueId(values.size()));
    values.push_back(Value{name, type, Storage::Result, 0, 0, int32_t(eqns.size()), loc});
  }
  eqns.push_back(std::move(e));
  return eqns.back();
}

void Graph::reindex() {
  for (Value& v : values)
    if (v.storage == Storage::Result) v.def = -1;
  for (size_t i = 0; i < eqns.size(); ++i)
    for (ValueId r : eqns[i].results) values[size_t(r)].def = int32_t(i);
}

int64_t gatherBound(const Graph& g, ValueId v) {
  int64_t bound = 0;
  std::vector<ValueId> work{v};
  std::set<ValueId> seen{v};
  while (!work.empty()) {
    ValueId x = work.back();
    work.pop_back();
    for (const Eqn& e : g.eqns)
      for (size_t i = 0; i < e.operands.size(); ++i) {
        if (e.operands[i] != x) continue;
        if (e.op == Op::Gather && i == 1) {
          const Type& table = g.type(e.operands[0]);
          int64_t n = table.shape[size_t(*normalizeAxis(std::get<int64_t>(*e.attr("axis")), table.rank()))];
          bound = bound ? std::min(bound, n) : n;
        }
        bool moves = e.op == Op::Reshape || e.op == Op::Broadcast || e.op == Op::Transpose || e.op == Op::Slice ||
                     e.op == Op::Concat || e.op == Op::Convert || (e.op == Op::DynamicSlice && i == 0);
        if (moves && isInt(g.type(e.results[0]).dtype) && seen.insert(e.results[0]).second) work.push_back(e.results[0]);
      }
  }
  return bound;
}

}  // namespace poot

// Graph construction helpers.
#include "ir/graph.h"

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

}  // namespace poot

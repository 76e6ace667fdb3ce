// The verifier. It assumes nothing about where the graph came from (text,
// binary file or a pass), so every index is range-checked before use.
#include <cctype>
#include <set>

#include "ir/fusion.h"
#include "ir/graph.h"

namespace poot {

namespace {

constexpr int64_t kMaxElements = int64_t(1) << 48;

Error at(const Loc& loc, std::string msg) { return makeError(ErrorKind::Verify, loc, std::move(msg)); }

std::string ref(const Graph& g, ValueId v) { return "%" + g.value(v).name; }

Status checkType(const Type& t, const Loc& loc, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : t.shape) {
    if (d < 1) return at(loc, what + " has a dimension " + std::to_string(d) + "; dimensions must be 1 or more");
    if (n > kMaxElements / d) return at(loc, what + " has more than 2^48 elements");
    n *= d;
  }
  return ok();
}

// Value and graph names must print as tokens of the text form.
bool validName(const std::string& s, bool graphName) {
  if (s.empty()) return false;
  if (graphName && !(std::isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

Status checkNames(const Graph& g) {
  if (!validName(g.name, true) || g.name == "inf" || g.name == "nan")
    return at(g.loc, "graph name '" + g.name + "' is not an identifier");
  std::set<std::string> seen;
  auto check = [&](ValueId id) -> Status {
    const Value& v = g.value(id);
    if (!validName(v.name, false)) return at(v.loc, "value name '" + v.name + "' is not a valid name");
    if (!seen.insert(v.name).second) return at(v.loc, "value name '%" + v.name + "' is used twice");
    return ok();
  };
  for (ValueId id : g.params)
    if (auto s = check(id); !s) return s;
  for (const Eqn& e : g.eqns)
    for (ValueId r : e.results)
      if (auto s = check(r); !s) return s;
  return ok();
}

Status checkParams(const Graph& g) {
  std::vector<int> listed(g.values.size());
  for (ValueId id : g.params) {
    if (id < 0 || size_t(id) >= g.values.size()) return at(g.loc, "a parameter refers to no value");
    if (listed[size_t(id)]++) return at(g.value(id).loc, "parameter %" + g.value(id).name + " is listed twice");
  }
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].storage != Storage::Result && !listed[i])
      return at(g.values[i].loc, "%" + g.values[i].name + " has storage " + storageName(g.values[i].storage) +
                                     " but is not a parameter");
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    if (v.storage == Storage::Result) return at(v.loc, "parameter %" + v.name + " has no storage class");
    if (auto s = checkType(v.type, v.loc, "%" + v.name); !s) return s;
    if (v.storage == Storage::Slot) {
      if (!isInt(v.type.dtype)) return at(v.loc, "slot %" + v.name + " must have an integer dtype, not " + dtypeName(v.type.dtype));
      if (v.lo > v.hi) return at(v.loc, "slot %" + v.name + " has an empty range [" + std::to_string(v.lo) + ", " + std::to_string(v.hi) + "]");
      if (!fitsDType(double(v.lo), v.type.dtype) || !fitsDType(double(v.hi), v.type.dtype))
        return at(v.loc, "slot %" + v.name + " range does not fit " + dtypeName(v.type.dtype));
    }
  }
  return ok();
}

Status checkEqns(const Graph& g) {
  std::vector<bool> defined(g.values.size());
  for (ValueId id : g.params) defined[size_t(id)] = true;
  auto valid = [&](ValueId v) { return v >= 0 && size_t(v) < g.values.size(); };
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    const Eqn& e = g.eqns[i];
    TypeQuery q;
    q.attrs = &e.attrs;
    for (ValueId v : e.operands) {
      if (!valid(v)) return at(e.loc, "operand refers to no value");
      if (!defined[size_t(v)]) return at(e.loc, "operand " + ref(g, v) + " is used before it is defined");
      q.operands.push_back(g.type(v));
    }
    for (ValueId r : e.results) {
      if (!valid(r) || g.value(r).storage != Storage::Result || g.value(r).def != int32_t(i))
        return at(e.loc, "result is not owned by this eqn");
      if (defined[size_t(r)]) return at(g.value(r).loc, ref(g, r) + " is defined twice");
      if (auto s = checkType(g.type(r), e.typeLoc, ref(g, r)); !s) return s;
      q.declared.push_back(g.type(r));
    }
    const OpInfo& info = opInfo(e.op);
    if (int(e.results.size()) != info.results)
      return at(e.loc, std::string(info.name) + " has " + std::to_string(info.results) + " results, " +
                           std::to_string(e.results.size()) + " named");
    TypeResult r = checkEqn(e.op, q);
    if (!r.error.empty()) return at(e.loc, r.error);
    for (size_t k = 0; k < r.types.size(); ++k)
      if (r.types[k] != q.declared[k])
        return at(e.typeLoc, "declared type " + q.declared[k].str() + " of " + ref(g, e.results[k]) + " does not match " +
                                 info.name + "'s result type " + r.types[k].str());
    for (ValueId r2 : e.results) defined[size_t(r2)] = true;
  }
  return ok();
}

Status checkInterface(const Graph& g) {
  // A value leaving the graph must exist: a parameter or a current eqn's result.
  auto valid = [&](ValueId v) {
    if (v < 0 || size_t(v) >= g.values.size()) return false;
    const Value& x = g.value(v);
    return x.storage != Storage::Result || (x.def >= 0 && size_t(x.def) < g.eqns.size());
  };
  std::set<ValueId> outs;
  for (const Export& o : g.outputs) {
    if (!valid(o.value)) return at(o.loc, "output refers to no value");
    if (!outs.insert(o.value).second) return at(o.loc, ref(g, o.value) + " is declared an output twice");
  }
  std::set<ValueId> written, newValues;
  for (const StateOut& s : g.stateOuts) {
    if (!valid(s.state) || !valid(s.value)) return at(s.loc, "state_out refers to no value");
    const Value& st = g.value(s.state);
    if (st.storage != Storage::State) return at(s.loc, ref(g, s.state) + " is not a state");
    if (!written.insert(s.state).second) return at(s.loc, "state " + ref(g, s.state) + " has two state_out values");
    if (!newValues.insert(s.value).second)
      return at(s.loc, ref(g, s.value) + " is the new value of two states; each state needs its own");
    if (g.value(s.value).storage != Storage::Result)
      return at(s.loc, "the new value of " + ref(g, s.state) + " must be computed by an eqn");
    if (g.type(s.value) != st.type)
      return at(s.loc, "state_out " + ref(g, s.value) + " has type " + g.type(s.value).str() + " but state " +
                           ref(g, s.state) + " has " + st.type.str());
  }
  for (ValueId id : g.params)
    if (g.value(id).storage == Storage::State && !written.count(id))
      return at(g.value(id).loc, "state %" + g.value(id).name + " has no state_out");
  std::set<ValueId> witnesses;
  for (const Export& w : g.validations) {
    if (!valid(w.value)) return at(w.loc, "validation refers to no value");
    if (g.type(w.value) != Type{DType::Bool, {}})
      return at(w.loc, "validation " + ref(g, w.value) + " must be bool[], not " + g.type(w.value).str());
    if (!witnesses.insert(w.value).second) return at(w.loc, ref(g, w.value) + " is declared a validation twice");
  }
  for (const Eqn& e : g.eqns)
    if (e.op == Op::IndexGuard && !witnesses.count(e.results[1]))
      return at(e.loc, "the witness " + ref(g, e.results[1]) + " of this IndexGuard is not declared a validation output");
  if (g.outputs.empty()) return at(g.loc, "graph '" + g.name + "' has no output");
  return ok();
}

}  // namespace

Status verify(const Graph& g) {
  if (auto s = checkParams(g); !s) return s;
  if (auto s = checkNames(g); !s) return s;
  if (auto s = checkEqns(g); !s) return s;
  if (auto s = checkInterface(g); !s) return s;
  if (auto groups = fusionGroups(g); !groups) return groups.error();
  return ok();
}

}  // namespace poot

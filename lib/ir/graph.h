// The graph: values, eqns and the graph's interface. A value is either a
// parameter of the graph (input, weight, state, slot), declared with its
// storage class, or the result of exactly one eqn. Eqns are kept in execution
// order and only use values defined before them. The interface lists which
// values leave the graph: outputs, the new value of each state (written in
// place over its state_in), and validation witnesses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace poot {

using ValueId = int32_t;

enum class Storage : uint8_t {
  Result,  // defined by an eqn
  Input,   // bound per call
  Weight,  // bound once
  State,   // persists across calls; its state_out is written over it in place
  Slot,    // per-call integers with a declared range (pos, len, paged maps)
};

const char* storageName(Storage s);

struct Value {
  std::string name;  // without the leading %
  Type type;
  Storage storage = Storage::Result;
  int64_t lo = 0, hi = 0;  // a Slot's declared range, inclusive
  int32_t def = -1;        // index of the defining eqn, for Storage::Result
  Loc loc;                 // where it was declared or defined
};

struct Eqn {
  Op op;
  std::vector<ValueId> operands;
  std::vector<ValueId> results;
  Attrs attrs;
  Loc loc;      // the op name
  Loc typeLoc;  // the declared result type

  const AttrValue* attr(std::string_view name) const;
};

struct StateOut {
  ValueId state;  // the State parameter
  ValueId value;  // its new value
  Loc loc;
};

struct Export {
  ValueId value;
  Loc loc;
};

struct Graph {
  std::string name;
  Loc loc;  // the graph's header line
  std::vector<Value> values;
  std::vector<ValueId> params;  // in declaration order
  std::vector<Eqn> eqns;        // in execution order
  std::vector<Export> outputs;
  std::vector<StateOut> stateOuts;
  std::vector<Export> validations;

  const Value& value(ValueId id) const { return values[size_t(id)]; }
  Value& value(ValueId id) { return values[size_t(id)]; }
  const Type& type(ValueId id) const { return value(id).type; }

  ValueId addParam(std::string name, Type type, Storage storage, Loc loc = {});
  // Appends an eqn; its result values are created with the given names and types.
  Eqn& addEqn(Op op, std::vector<ValueId> operands, Attrs attrs, const std::vector<std::pair<std::string, Type>>& results,
              Loc loc = {});
  // Renumbers eqn indices after eqns were erased, dropped or reordered;
  // results of erased eqns are left with def = -1 and are never printed.
  void reindex();
};

// The size of the smallest axis that value v is gathered along, following v
// through the ops that only move its elements (into a Reshape, Broadcast,
// Transpose, Slice, Concat or integer Convert, or as a DynamicSlice's
// source): every element of v must lie in [0, bound) for those Gathers to
// read inside their tables. 0 when v reaches no Gather's indices.
int64_t gatherBound(const Graph& g, ValueId v);

// Checks every rule of the IR: value types, each eqn against the op table and
// its type rule, definition before use, storage rules (slot ranges, one
// state_out per state of the same type, validation values are bool, every
// IndexGuard witness is declared a validation output) and that the graph has
// an output. The first violation is returned, located at the input.
Status verify(const Graph& g);

}  // namespace poot

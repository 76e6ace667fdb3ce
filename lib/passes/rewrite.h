// Graph queries and edits shared by the passes: who uses a value, whether it
// leaves the graph, replacing a value everywhere while the graph's interface
// keeps its names, inserting an eqn at a position, fresh names, and removing
// dead eqns. Passes match first (read-only) and then edit through these.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace poot {

// For every value, the indices of the eqns that use it as an operand, in order
// (an eqn using a value twice is listed once).
std::vector<std::vector<int32_t>> computeUsers(const Graph& g);

// Whether v is an output, the new value of a state, or a validation witness.
bool isExported(const Graph& g, ValueId v);

// Replaces every use of `from` (operands and exports) by `to`. When `from` is
// exported, `to` takes its name, so outputs keep their names; this is refused
// (false, nothing changed) when `to` is a parameter or exported itself, since
// it cannot take a second name. `from`'s eqn is left for eraseDeadEqns.
bool replaceAllUses(Graph& g, ValueId from, ValueId to);

// Whether `from` can be replaced by `to` everywhere (see replaceAllUses).
bool canReplace(const Graph& g, ValueId from, ValueId to);

// Common subexpressions: each eqn equal to an earlier one (op, operands,
// attributes, floats by their bits, and result types) has its uses moved to
// the earlier one's results, unless two exported values would have to become
// one. Returns whether any moved; the copies are left for eraseDeadEqns.
bool eliminateCommon(Graph& g);

// A name not used by any value: `base`, else `base.1`, `base.2`, ...
std::string freshName(const Graph& g, const std::string& base);

// Inserts an eqn at position `pos` (0 = first) with fresh results named from
// `names`, and renumbers; returns the new eqn's index.
int32_t insertEqn(Graph& g, size_t pos, Op op, std::vector<ValueId> operands, Attrs attrs,
                  const std::vector<std::pair<std::string, Type>>& results, Loc loc);

// Removes every eqn none of whose results is used by a remaining eqn or
// exported, to a fixed point. Returns whether any eqn went.
bool eraseDeadEqns(Graph& g);

}  // namespace poot

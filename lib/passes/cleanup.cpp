// cleanup: dead-code elimination, last in the pipeline, removing what the
// rewrites orphaned. An eqn is live when one of its results is an output, the
// new value of a state, a validation witness, or an operand of a live eqn.
// Parameters stay: they are the graph's calling convention even when unused.
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace poot {

Expected<bool> runCleanup(Graph& g, PassContext&) { return eraseDeadEqns(g); }

}  // namespace poot

// The buffer plan: after planGraph has chosen the kernels and dispatches, give
// every graph value and every declared scratch a Buffer, place the temporaries
// in one arena by liveness, and fill each dispatch's bindings. The rules
// (docs/plan-file.md states them in words):
//  - parameters (inputs, weights, states, slots) and the values that leave the
//    graph (outputs, validation witnesses) get buffers of their own, outside
//    the arena: they are bound by the caller or read after the run;
//  - a state's new value (its state_out) has no buffer of its own: the eqn that
//    produces it writes into the state's buffer (donated, in place), and no eqn
//    after it may still read the old value;
//  - a Reshape, and a Transpose or Broadcast that keeps the row-major layout
//    (it only moves or adds axes of size 1), is a View of its operand's buffer
//    unless its result leaves the graph; a view needs no dispatch, so those are
//    dropped (and kernels left without a dispatch with them, the others
//    renumbered in order, their `<op>_<kind>_<index>` entries renamed to match);
//  - every other result is a Temp and every declared scratch a Scratch in the
//    arena, live from its defining eqn to its last reader (a scratch: its own
//    eqn only); the arena is colored greedily by size, largest first, each
//    buffer at the best-fitting gap among the buffers whose lifetimes overlap
//    it; offsets are 256-byte aligned.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/diag.h"
#include "plan/plan.h"
#include "plan/profile.h"

namespace poot {

// Arena offsets are multiples of this, and every arena buffer takes a multiple
// of it.
constexpr int64_t kArenaAlign = 256;

// Fills p.buffers, p.arenaBytes and every dispatch's bindings (the buffers of
// its reads, then of its writes); drops the dispatches of view eqns and the
// kernels no dispatch uses any more (recomputing p.key). Fails (Verify) when a
// state's old value is read after its new value was written in place.
Status planBuffers(Plan& p);

// BufferBytes (a Capability error): every weight within the device's
// single-buffer limit (max_buffer_bytes), which the runtime would otherwise
// refuse only at run time, after the plan was built and shipped; the error
// names the first weight (in buffer order) that is too large, usually an
// embedding table. Such a weight is refused, not split: a weight binds
// whole, as the checkpoint stores it. (Other buffers over the limit are the
// runtime's check.) Call it after planBuffers.
Status checkWeightBytes(const Plan& p, const DeviceProfile& d);

// The buffer that holds each value of p.source after planBuffers (indexed by
// ValueId; -1 for values without one, such as results of erased eqns). A
// state_out value maps to its state's buffer.
std::vector<int32_t> valueBuffers(const Plan& p);

// What one step of the plan reads at most from its weights and its states:
// every buffer once, but a weight that only Gathers read only the slices
// their indices select (an embedding table, read at the step's tokens), and
// an expert's weights of a RoutedExperts the share its tokens may select
// (k of the experts a token, at most all of them). At the device's memory
// bandwidth these bytes are the step's floor.
struct StepReads {
  int64_t weightBytes = 0;
  int64_t stateBytes = 0;
};
StepReads stepReads(const Plan& p);

}  // namespace poot

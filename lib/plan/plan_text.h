// A plan as text, for people and for tests: what `pootc compile
// --emit=plan-text` writes and what `pootc inspect PLAN` prints from a plan
// file (inspect reads the file with the runtime's reader and prints it through
// these same functions, so the two agree by construction). The text lists the
// device and key, every buffer, the arena map (offset, bytes, lifetime), the
// kernels with their requests and schedules, the dispatches in order, and the
// slots, outputs and validation witnesses. JSON carries the same, and the dot
// form draws the arena over time for Graphviz. All of it is deterministic.
#pragma once

#include <string>

#include "plan/plan.h"

namespace poot {

const char* bufferRoleName(BufferRole r);  // "input", "weight", ..., "view"

std::string printPlan(const Plan& p);
std::string printPlanJson(const Plan& p);
// The arena as boxes in (eqn, offset) space: one box per arena buffer, as wide
// as its lifetime and as tall as its bytes; render with `neato -n2 -Tsvg`.
std::string printArenaDot(const Plan& p);

}  // namespace poot

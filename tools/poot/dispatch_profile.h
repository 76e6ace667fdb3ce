// poot run --profile: where a step's device time goes, dispatch by
// dispatch, from steps the Session timed one dispatch at a time
// (Session::step with profile, Backend::recordProfiled).
#pragma once

#include <vector>

#include "runtime/plan_reader.h"

namespace poot {

// Prints, for each dispatch in plan order, its median device time over
// `steps` (each a step's StepResult::dispatchSeconds), its share of the sum
// of the medians, and beside it the kernel's op and schedule, its grid, the
// bytes its bindings span and, for a MatMul, its FLOPs with the rates they
// give; then the same summed by op and schedule, largest first: a table on
// stdout, or with --diagnostics=json one JSON object a dispatch, one a group
// and one for the whole (docs/runtime.md, "Profiling").
void printDispatchProfile(const rt::PlanFile& plan, const std::vector<std::vector<double>>& steps);

}  // namespace poot

// Writing a plan file (.plan, schemas/plan.fbs): the one FlatBuffer the
// runtime loads. The compiler only writes plans; reading them back is the
// runtime's job (lib/runtime/plan_reader.h), so the runtime never links this
// library. The bytes depend only on the plan: the same plan gives the same
// file, byte for byte. docs/plan-file.md describes the format.
#pragma once

#include <cstdint>
#include <string>

#include "ir/diag.h"
#include "plan/plan.h"

namespace poot {

// The schema version this writer produces (Plan.version in the file). A
// reader refuses any other.
constexpr uint32_t kPlanFileVersion = 1;

// Serializes a plan after planBuffers: buffers, kernels with their requests,
// dispatches, slots, outputs, validation witnesses and the source graph
// (as .pgb bytes). Value indices are those of the embedded graph, which
// numbers parameters first, then each eqn's results in order.
std::string writePlan(const Plan& p);

// writePlan, then writeFileAtomic (no partial file on failure).
Status writePlanFile(const Plan& p, const std::string& path);

}  // namespace poot

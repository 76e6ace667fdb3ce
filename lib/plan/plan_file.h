// Writing a plan file (.plan, schemas/plan.fbs): the one FlatBuffer the
// runtime loads. The compiler only writes plans; reading them back is the
// runtime's job (lib/runtime/plan_reader.h), so the runtime never links this
// library. The bytes depend only on the plan: the same plan gives the same
// file, byte for byte, and the file carries a checksum over all of its bytes
// (sealPlanChecksum). docs/plan-file.md describes the format.
#pragma once

#include <cstdint>
#include <string>

#include "ir/diag.h"
#include "plan/plan.h"

namespace poot {

// The schema version this writer produces (Plan.version in the file). A
// reader refuses any other.
constexpr uint32_t kPlanFileVersion = 2;

// Serializes a plan after planBuffers: buffers, kernels with their requests,
// dispatches, slots, outputs, validation witnesses and the source graph
// (as .pgb bytes). Value indices are those of the embedded graph, which
// numbers parameters first, then each eqn's results in order.
std::string writePlan(const Plan& p);

// Writes the checksum of plan file bytes into their checksum field: FNV-1a 64
// over every byte, the field's own 8 counted as zeros. writePlan seals what it
// writes; a test that changes a plan's bytes seals them again to reach the
// reader's checks behind the checksum. False when the root table has no
// checksum field within the bytes (nothing changed).
bool sealPlanChecksum(std::string& bytes);

// writePlan, then writeFileAtomic (no partial file on failure).
Status writePlanFile(const Plan& p, const std::string& path);

}  // namespace poot

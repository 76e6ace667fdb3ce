// A graph's weights as the upload records Session::bindWeights takes, and
// the two ways they are loaded: from the parameters bindParamArgs bound
// (`poot run`: a checkpoint's straight from its mapped files, in the order
// they lie on disk, then the generated ones from their host tensors) and
// from a checkpoint path alone (the C API). Both drop each checkpoint
// tensor's pages once it is on the device, so a checkpoint is never held
// whole in host memory. `poot generate` binds through weightBytes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "oracle/params.h"
#include "runtime/session.h"

namespace poot {

std::vector<rt::WeightBytes> weightBytes(const Graph& g, const BoundParams& params);

// Binds every weight weightBytes lists, releasing each checkpoint tensor
// once uploaded and calling progress(bytes done, bytes in all) after each.
Expected<rt::WeightLoad> uploadWeights(rt::Session& s, const Graph& g, const BoundParams& params,
                                       const std::function<void(int64_t, int64_t)>& progress = {});

// Opens the checkpoint at `path` (Checkpoint::open), checks every weight of
// the session's graph against it (bindCheckpoint) and uploads them all.
Expected<rt::WeightLoad> uploadCheckpoint(rt::Session& s, const std::string& path);

}  // namespace poot

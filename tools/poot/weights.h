// The weights of a graph whose parameters bindParamArgs bound, as the upload
// records Session::bindWeights takes: the checkpoint's straight from its
// mapped files, in the order they lie on disk, then the generated ones from
// their host tensors. `poot run` and `poot generate` bind through it.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "oracle/params.h"
#include "runtime/session.h"

namespace poot {

std::vector<rt::WeightBytes> weightBytes(const Graph& g, const BoundParams& params);

}  // namespace poot

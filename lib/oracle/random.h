// The seeded generator of inputs, weights and slots left unnamed, so that a
// graph evaluates (and a plan runs and checks) with no files at all. The
// values are deterministic for a seed, small and well scaled, never zero.
// docs/oracle.md states the distributions.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ir/graph.h"
#include "oracle/tensor.h"

namespace poot {

// A tensor for parameter `id` of g: floats of magnitude in a fixed band away
// from zero (weights scaled by their fan-in), integer inputs used as Gather
// indices within the gathered axis, slots within their declared range (with
// distinct values where the range allows, so paged write maps are valid).
Tensor randomParam(const Graph& g, ValueId id, uint64_t seed);

// Binds every parameter of g that `given` does not, from the generator;
// `given` wins where it has a name.
std::map<std::string, Tensor> completeParams(const Graph& g, std::map<std::string, Tensor> given, uint64_t seed);

}  // namespace poot

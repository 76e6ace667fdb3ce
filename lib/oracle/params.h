// Parameters named on a command line, shared by `pootc eval` and `poot run`
// so both bind the same tensors for the same arguments: --input NAME=FILE.npy
// (inputs and states' first values), --slot NAME=VALUE|FILE.npy (an integer
// is broadcast to the slot's shape), --weights FILE.safetensors (by the
// checkpoint's tensor names), and everything left unnamed from the seeded
// generator (random.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "oracle/tensor.h"

namespace poot {

struct ParamArgs {
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> slots;   // NAME=VALUE or NAME=FILE.npy
  std::string weights;              // .safetensors; empty: none
  uint64_t seed = 0;
};

// Every parameter of g bound: the named ones checked (an unknown name, a
// name of the wrong storage class, one bound twice or a slot VALUE that is
// neither an integer nor a name ending in .npy is a Usage error; an integer
// that does not fit the slot's dtype a Range error), the rest generated.
Expected<std::map<std::string, Tensor>> bindParamArgs(const Graph& g, const ParamArgs& args);

}  // namespace poot

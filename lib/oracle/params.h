// Parameters named on a command line, shared by `pootc eval` and `poot run`
// so both bind the same tensors for the same arguments: --input NAME=FILE.npy
// (inputs and states' first values), --slot NAME=VALUE|FILE.npy (an integer
// is broadcast to the slot's shape), --weights PATH (a checkpoint,
// checkpoint.h: its tensors bound by their names, left in the mapped files
// until used), and everything left unnamed from the seeded generator
// (random.h), which bindNotices then counts, so that nobody mistakes
// generated weights for their own.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "oracle/checkpoint.h"
#include "oracle/tensor.h"

namespace poot {

struct ParamArgs {
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::vector<std::string> slots;   // NAME=VALUE or NAME=FILE.npy
  std::string weights;              // a checkpoint (Checkpoint::open); empty: none
  uint64_t seed = 0;
};

// Every parameter of a graph, bound.
struct BoundParams {
  // Host tensors of every parameter but the checkpoint's weights: the ones
  // the command line named, and the generated ones.
  std::map<std::string, Tensor> tensors;
  // The checkpoint, when --weights named one, and what the graph takes from it.
  std::optional<Checkpoint> checkpoint;
  CheckpointBinding fromCheckpoint;
  // The parameters the generator drew, in the graph's order, and its seed.
  std::vector<ValueId> generated;
  uint64_t seed = 0;

  // Every parameter as a host tensor, the checkpoint's weights copied out of
  // their files once: what the oracle evaluates.
  std::map<std::string, Tensor> hostTensors() const;
};

// Every parameter of g bound: the named ones checked (an unknown name, a
// name of the wrong storage class, one bound twice or a slot VALUE that is
// neither an integer nor a name ending in .npy is a Usage error; an integer
// that does not fit the slot's dtype a Range error; a checkpoint that does
// not open, or lacks a graph weight or stores it in another type, the error
// of Checkpoint::open or bindCheckpoint), the rest generated, unless their
// bytes pass the host memory budget (ir/budget.h: a Memory error, nothing
// drawn).
Expected<BoundParams> bindParamArgs(const Graph& g, const ParamArgs& args);

// What a tool prints to stderr once the parameters are bound (Bind
// diagnostics of severity warning and note): a warning for each checkpoint
// tensor the graph does not use, at its shard ("FILE: warning: tensor 'T' is
// not used by the graph"; past 8 of them one more counts the rest), then,
// when the generator drew any, a note of how many of each storage class and
// from which seed (its figures: the count of each class, "weights": 3).
std::vector<Error> bindNotices(const Graph& g, const BoundParams& p);

}  // namespace poot

// The weights one engine serves, on the host: the base model's (a
// checkpoint's tensors left in their mapped files, the generator's with
// seed 0 for whatever the checkpoint lacks, as `poot run` and `pootc eval`
// draw them) and the LoRA adapters merged over them, each under its weights
// identity (oracle/lora.h AdapterSet). The engine uploads the base weights
// once and, when a step runs on another identity, only the weights the two
// identities change.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "oracle/lora.h"
#include "oracle/params.h"
#include "runtime/session.h"

namespace poot::engine {

class ModelWeights {
 public:
  // The weights of g: the checkpoint's at `checkpoint` (a .safetensors
  // file, a shard index or a model directory; empty: none) and the rest
  // drawn; bindParamArgs's errors. Only weights are kept.
  static Expected<std::unique_ptr<ModelWeights>> bind(const Graph& g, const std::string& checkpoint);
  ModelWeights(const ModelWeights&) = delete;  // the adapter set points into it
  ModelWeights& operator=(const ModelWeights&) = delete;

  const Graph& graph() const { return graph_; }
  // What was bound, for bindNotices (generated holds the drawn weights only).
  const BoundParams& params() const { return params_; }
  // The base model's weights as upload records (runtime/weights.h weightBytes).
  const std::vector<rt::WeightBytes>& base() const { return base_; }
  AdapterSet& adapters() { return adapters_; }
  const AdapterSet& adapters() const { return adapters_; }

  // The weights to upload to go from identity `from` to `to`: every weight
  // either identity changes, with `to`'s value (its merged one, else the
  // base one). Both must be held by adapters().
  std::vector<rt::WeightBytes> change(uint64_t from, uint64_t to) const;

 private:
  explicit ModelWeights(Graph g) : graph_(std::move(g)), adapters_(graph_, params_) {}
  Graph graph_;
  BoundParams params_;
  AdapterSet adapters_;
  std::vector<rt::WeightBytes> base_;
};

}  // namespace poot::engine

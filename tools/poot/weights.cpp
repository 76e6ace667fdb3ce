// The checkpoint's weights first (CheckpointBinding keeps their file order),
// then every Weight parameter the generator drew, in the graph's order.
#include "weights.h"

namespace poot {

std::vector<rt::WeightBytes> weightBytes(const Graph& g, const BoundParams& params) {
  std::vector<rt::WeightBytes> weights;
  for (const auto& [name, t] : params.fromCheckpoint.weights) weights.push_back({name, t->type, t->data, t->bytes});
  for (ValueId id : g.params) {
    const Value& p = g.value(id);
    auto it = params.tensors.find(p.name);
    if (p.storage != Storage::Weight || it == params.tensors.end()) continue;
    const Tensor& t = it->second;
    weights.push_back({p.name, t.type, t.bytes.data(), int64_t(t.bytes.size())});
  }
  return weights;
}

}  // namespace poot

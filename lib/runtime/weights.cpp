// The checkpoint's weights first (CheckpointBinding keeps their file order),
// then every Weight parameter the generator drew, in the graph's order.
#include "runtime/weights.h"

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

Expected<rt::WeightLoad> uploadWeights(rt::Session& s, const Graph& g, const BoundParams& params,
                                       const std::function<void(int64_t, int64_t)>& progress) {
  const auto& fromFile = params.fromCheckpoint.weights;
  return s.bindWeights(weightBytes(g, params), [&](size_t i, int64_t done, int64_t total) {
    if (i < fromFile.size()) params.checkpoint->release(*fromFile[i].second);  // on the device now
    if (progress) progress(done, total);
  });
}

Expected<rt::WeightLoad> uploadCheckpoint(rt::Session& s, const std::string& path) {
  auto checkpoint = Checkpoint::open(path);
  if (!checkpoint) return checkpoint.error();
  const Graph& g = s.plan().source;
  auto binding = bindCheckpoint(g, *checkpoint);
  if (!binding) return binding.error();
  BoundParams params;
  params.checkpoint = checkpoint.take();
  params.fromCheckpoint = binding.take();
  return uploadWeights(s, g, params);
}

}  // namespace poot

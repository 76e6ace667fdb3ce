// Binding drops every drawn parameter but the weights (the pools and slots
// the generator also draws are the engine's to make), and change() walks
// the base records so the uploads keep the checkpoint's order.
#include "engine/model_weights.h"

#include "runtime/weights.h"

namespace poot::engine {

Expected<std::unique_ptr<ModelWeights>> ModelWeights::bind(const Graph& g, const std::string& checkpoint) {
  std::unique_ptr<ModelWeights> w(new ModelWeights(g));
  auto params = bindParamArgs(w->graph_, ParamArgs{{}, {}, checkpoint, 0});
  if (!params) return params.error();
  w->params_ = params.take();
  auto notWeight = [&](ValueId id) { return w->graph_.value(id).storage != Storage::Weight; };
  std::erase_if(w->params_.generated, notWeight);
  std::erase_if(w->params_.tensors, [&](const auto& named) {
    for (ValueId id : w->graph_.params)
      if (w->graph_.value(id).name == named.first) return notWeight(id);
    return true;
  });
  w->base_ = weightBytes(w->graph_, w->params_);
  return w;
}

std::vector<rt::WeightBytes> ModelWeights::change(uint64_t from, uint64_t to) const {
  const std::map<std::string, Tensor>& was = *adapters_.merged(from);
  const std::map<std::string, Tensor>& now = *adapters_.merged(to);
  std::vector<rt::WeightBytes> weights;
  for (rt::WeightBytes w : base_) {
    if (auto it = now.find(w.name); it != now.end()) {
      w.data = it->second.bytes.data();
      w.bytes = int64_t(it->second.bytes.size());
    } else if (!was.count(w.name)) {
      continue;
    }
    weights.push_back(w);
  }
  return weights;
}

}  // namespace poot::engine

// pootc weights: a checkpoint of a graph's weights drawn by the seeded
// generator (bindParamArgs, as `poot run` and `pootc eval` draw the
// parameters no one names), written as one .safetensors file: so a test or
// a benchmark can make weights for a model with no published checkpoint, and
// `--weights` with them gives what no --weights with the same seed gives.
#include "driver.h"
#include "ir/binary.h"
#include "ir/io.h"
#include "oracle/params.h"
#include "oracle/safetensors.h"

namespace poot {

int runWeights(const WeightsOptions& opts) {
  auto graph = loadGraph(opts.graph);
  if (!graph) return report(graph.error());
  const Graph& g = *graph;
  auto params = bindParamArgs(g, ParamArgs{{}, {}, "", opts.seed});
  if (!params) return report(params.error());
  TensorMap weights;
  for (const Value& v : g.values)
    if (v.storage == Storage::Weight) weights.emplace(v.name, params->tensors.at(v.name));
  if (weights.empty()) return report(makeError(ErrorKind::Usage, {opts.graph}, "the graph declares no weight"));
  if (auto s = writeFileAtomic(opts.output, safetensorsBytes(weights)); !s) return report(s.error());
  return 0;
}

}  // namespace poot

// The registry of model families: one line per family, naming the
// model_type values it traces and its parse and trace functions (declared in
// model.h, defined in the family's own file). traceModel dispatches on
// model_type through this table.
#include <algorithm>

#include "trace/model.h"

namespace poot::trace {

const std::vector<Family>& families() {
  static const std::vector<Family> table = {
      {"llama", {"llama", "mistral", "qwen2", "qwen3"}, parseLlama, traceLlama},
      // EXTENSION POINT: one line per family, once its file lands:
      {"gemma2", {"gemma2"}, parseGemma2, traceGemma2},
      {"bloom", {"bloom"}, parseBloom, traceBloom},
      {"deepseek_v2", {"deepseek_v2"}, parseDeepseekV2, traceDeepseekV2},
      // poot's own test family, not a published model (docs/families.md).
      {"sparse_indexer", {"poot_block_sparse"}, parseSparseIndexer, traceSparseIndexer},
  };
  return table;
}

const Family* findFamily(std::string_view modelType) {
  for (const Family& f : families())
    for (const char* t : f.modelTypes)
      if (modelType == t) return &f;
  return nullptr;
}

std::string supportedModelTypes() {
  std::vector<std::string> types;
  for (const Family& f : families()) types.insert(types.end(), f.modelTypes.begin(), f.modelTypes.end());
  std::sort(types.begin(), types.end());
  std::string out;
  for (const std::string& t : types) out += (out.empty() ? "" : ", ") + t;
  return out;
}

Expected<Graph> traceModel(const ModelConfig& cfg, const TraceOptions& opts) {
  const Family* fam = findFamily(cfg.modelType);
  if (!fam)
    return makeError(ErrorKind::Syntax, Loc{cfg.file},
                     "field 'model_type': unsupported model type '" + cfg.modelType + "' (supported: " +
                         supportedModelTypes() + ")");
  return fam->trace(cfg, opts);
}

}  // namespace poot::trace

// The config with nlohmann/json, the tensors through Checkpoint (a single
// .safetensors file, checked as any checkpoint is), the merge as a plain
// triple loop in double over host copies.
#include "oracle/lora.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "oracle/checkpoint.h"

namespace poot {
namespace {

constexpr const char* kConfig = "adapter_config.json";
constexpr const char* kWeights = "adapter_model.safetensors";
constexpr const char* kPrefix = "base_model.model.";

}  // namespace

Expected<LoraAdapter> loadAdapter(const std::string& dir) {
  std::string configPath = (std::filesystem::path(dir) / kConfig).string();
  std::ifstream in(configPath, std::ios::binary);
  if (!in) return makeError(ErrorKind::Io, {configPath}, "cannot read the adapter config");
  LoraAdapter out;
  out.dir = dir;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    auto r = j.find("r");
    auto alpha = j.find("lora_alpha");
    if (!j.is_object() || r == j.end() || !r->is_number_integer() || r->get<int64_t>() < 1)
      return makeError(ErrorKind::Format, {configPath}, "the adapter config has no positive integer r");
    if (alpha == j.end() || !alpha->is_number())
      return makeError(ErrorKind::Format, {configPath}, "the adapter config has no lora_alpha number");
    if (j.value("fan_in_fan_out", false))
      return makeError(ErrorKind::Format, {configPath}, "fan_in_fan_out adapters (Conv1D layers) are not supported");
    out.rank = r->get<int64_t>();
    double a = alpha->get<double>();
    out.scale = j.value("use_rslora", false) ? a / std::sqrt(double(out.rank)) : a / double(out.rank);
  } catch (const nlohmann::json::exception& e) {
    return makeError(ErrorKind::Format, {configPath}, std::string("malformed adapter config: ") + e.what());
  }

  std::string weightsPath = (std::filesystem::path(dir) / kWeights).string();
  auto file = Checkpoint::open(weightsPath);
  if (!file) return file.error();
  for (const auto& [name, t] : file->tensors()) {
    auto bad = [&](const std::string& why) { return makeError(ErrorKind::Format, {weightsPath}, why); };
    bool isA = name.ends_with(".lora_A.weight"), isB = name.ends_with(".lora_B.weight");
    if (name.rfind(kPrefix, 0) != 0 || !(isA || isB))
      return bad("tensor '" + name + "' is not a lora_A or lora_B weight under " + kPrefix);
    if (!isFloat(t.type.dtype) || t.type.rank() != 2) return bad("tensor '" + name + "' is not a float matrix");
    int64_t rank = isA ? t.type.shape[0] : t.type.shape[1];
    if (rank != out.rank)
      return bad("tensor '" + name + "' has rank " + std::to_string(rank) + ", the config's r is " +
                 std::to_string(out.rank));
    std::string module = name.substr(std::string(kPrefix).size(), name.size() - std::string(kPrefix).size() -
                                                                      std::string(".lora_A.weight").size());
    LoraPair& pair = out.targets[module + ".weight"];
    (isA ? pair.a : pair.b) = file->read(t);
  }
  for (const auto& [target, pair] : out.targets)
    if (pair.a.bytes.empty() || pair.b.bytes.empty())
      return makeError(ErrorKind::Format, {weightsPath}, "the adapter of " + target + " lacks its lora_" +
                                                             (pair.a.bytes.empty() ? "A" : "B") + " weight");
  if (out.targets.empty()) return makeError(ErrorKind::Format, {weightsPath}, "the adapter has no lora weights");
  return out;
}

Expected<std::map<std::string, Tensor>> mergeAdapter(const Graph& g, const BoundParams& base, const LoraAdapter& a) {
  std::map<std::string, Tensor> merged;
  for (const auto& [target, pair] : a.targets) {
    const Value* w = nullptr;
    for (ValueId id : g.params)
      if (g.value(id).name == target && g.value(id).storage == Storage::Weight) w = &g.value(id);
    Loc loc{(std::filesystem::path(a.dir) / kWeights).string()};
    if (!w) return makeError(ErrorKind::Bind, loc, "the adapter targets " + target + ", which the plan has no weight for");
    int64_t out = pair.b.shape()[0], in = pair.a.shape()[1], r = a.rank;
    if (w->type.rank() != 2 || w->type.shape[0] != out || w->type.shape[1] != in)
      return makeError(ErrorKind::Bind, loc, "the adapter of " + target + " is [" + std::to_string(out) + ", " +
                                                 std::to_string(in) + "], the weight " + w->type.str());
    Tensor t;
    if (auto it = base.tensors.find(target); it != base.tensors.end()) {
      t = it->second;
    } else {
      for (const auto& [name, ct] : base.fromCheckpoint.weights)
        if (name == target) t = base.checkpoint->read(*ct);
    }
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double sum = 0;
        for (int64_t k = 0; k < r; ++k) sum += pair.b.get(o * r + k) * pair.a.get(k * in + i);
        t.set(o * in + i, t.get(o * in + i) + a.scale * sum);
      }
    merged.emplace(target, std::move(t));
  }
  return merged;
}

Expected<uint64_t> AdapterSet::load(const std::string& name, const std::string& dir) {
  if (name.empty()) return makeError(ErrorKind::Usage, {dir}, "an adapter needs a name");
  auto adapter = loadAdapter(dir);
  if (!adapter) return adapter.error();
  auto merged = mergeAdapter(graph_, base_, *adapter);
  if (!merged) return merged.error();
  uint64_t id = ++last_;
  merged_.emplace(id, merged.take());
  current_[name] = id;
  return id;
}

std::optional<uint64_t> AdapterSet::identity(const std::string& name) const {
  auto it = current_.find(name);
  if (it == current_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> AdapterSet::names() const {
  std::vector<std::string> out;
  for (const auto& [name, id] : current_) out.push_back(name);
  return out;
}

const std::map<std::string, Tensor>* AdapterSet::merged(uint64_t identity) const {
  static const std::map<std::string, Tensor> none;
  if (identity == kBase) return &none;
  auto it = merged_.find(identity);
  return it == merged_.end() ? nullptr : &it->second;
}

Status AdapterSet::retire(uint64_t identity) {
  auto refuse = [&](const std::string& why) {
    return makeError(ErrorKind::Usage, {}, "cannot retire weights identity " + std::to_string(identity) + ": " + why);
  };
  if (identity == kBase) return refuse("it is the base model's");
  for (const auto& [name, id] : current_)
    if (id == identity) return refuse("it is adapter " + name + "'s current one");
  if (!merged_.erase(identity)) return refuse("no adapter holds it");
  return ok();
}

}  // namespace poot

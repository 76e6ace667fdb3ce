// LoRA adapters as PEFT saves them: a directory with adapter_config.json
// (`r`, `lora_alpha`, optionally `use_rslora`) and adapter_model.safetensors,
// whose tensors are `base_model.model.MODULE.lora_A.weight` [r, in] and
// `base_model.model.MODULE.lora_B.weight` [out, r] for each adapted Linear
// MODULE (`model.layers.0.self_attn.q_proj`, whose base weight is
// MODULE.weight [out, in]). An adapter changes the weights it targets to
// W + scale * B A, scale = lora_alpha / r (lora_alpha / sqrt(r) with
// use_rslora); mergeAdapter computes those in double and rounds once to W's
// dtype, so the oracle and every backend see the same merged weights.
// Errors name the file and the tensor.
//
// AdapterSet holds the weights of a run that serves several adapters: the
// base model and each named adapter under its weights identity, the number
// the KV cache keys its prefix entries with (kv/cache.h), and each
// adapter's merged weights. Loading a name again (a hot reload) gives it a
// fresh identity, so no new sequence meets the old adapter's cached K/V,
// and keeps the old identity's merged weights, which the sequences started
// on them still need, until the caller retires it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "oracle/params.h"
#include "oracle/tensor.h"

namespace poot {

struct LoraPair {
  Tensor a;  // [r, in]
  Tensor b;  // [out, r]
};

struct LoraAdapter {
  std::string dir;
  int64_t rank = 0;
  double scale = 1;
  std::map<std::string, LoraPair> targets;  // by the base weight's name (MODULE.weight)
};

// Refused: a missing or malformed config (no positive integer r, no
// lora_alpha number, fan_in_fan_out set), a tensor that is not a lora_A or
// lora_B weight under base_model.model., a module with only one of the two,
// a rank other than r, or a non-float tensor.
Expected<LoraAdapter> loadAdapter(const std::string& dir);

// The merged value of every weight the adapter targets, from the bound base
// weights; a target the graph has no weight for, or shapes that do not
// compose, is a Bind error.
Expected<std::map<std::string, Tensor>> mergeAdapter(const Graph& g, const BoundParams& base, const LoraAdapter& a);

class AdapterSet {
 public:
  // The base model's identity; adapters' identities count up from 2 and are
  // never given twice by one set.
  static constexpr uint64_t kBase = 1;

  // Over the base weights of g (both must outlive the set).
  AdapterSet(const Graph& g, const BoundParams& base) : graph_(g), base_(base) {}

  // Loads and merges the adapter in dir under name, with a fresh identity,
  // which becomes the name's. For a name already loaded, a reload: its
  // previous identity stays held until retire. Refused (nothing changes):
  // an empty name, and what loadAdapter and mergeAdapter refuse.
  Expected<uint64_t> load(const std::string& name, const std::string& dir);
  // The name's current identity; nothing for a name never loaded.
  std::optional<uint64_t> identity(const std::string& name) const;
  // Every loaded name, sorted.
  std::vector<std::string> names() const;
  // The weights an identity changes, merged (none for the base model);
  // nullptr for an identity the set does not hold (never given, or retired).
  const std::map<std::string, Tensor>* merged(uint64_t identity) const;
  // Drops the merged weights of an identity a reload replaced, once nothing
  // runs on it. Refused (a Usage error, nothing changes): the base model, a
  // name's current identity, an identity not held.
  Status retire(uint64_t identity);

 private:
  const Graph& graph_;
  const BoundParams& base_;
  std::map<std::string, uint64_t> current_;                    // name -> identity
  std::map<uint64_t, std::map<std::string, Tensor>> merged_;  // identity -> merged weights
  uint64_t last_ = kBase;  // the last identity given
};

}  // namespace poot

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
#pragma once

#include <map>
#include <string>

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

}  // namespace poot

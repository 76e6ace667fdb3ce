// The Gemma-2 family (model_type gemma2), as transformers' Gemma2ForCausalLM
// computes it: embeddings times sqrt(hidden_size) (the normalizer rounded to
// the activation dtype), Gemma RMSNorms with (1 + w) in f32 around both
// sublayers (input / post-attention / pre-feedforward / post-feedforward),
// rotate-half rope, attention scaled by query_pre_attn_scalar^-0.5 with the
// logit softcap tanh(s / c) * c before the mask, a sliding window on the
// layers that layer_types marks "sliding_attention" (absent: the even layers
// 0, 2, 4, ..., transformers' (i + 1) % 2 rule), a GeGLU MLP, the final norm,
// tied embeddings and the final logit softcap. Weights carry the checkpoint's
// names (model.layers.N.pre_feedforward_layernorm.weight, ...).
#include <cmath>

#include "ir/budget.h"
#include "trace/model.h"

namespace poot::trace {

namespace {

#define GEMMA2_TRY(lhs, expr)              \
  do {                                     \
    auto r_ = (expr);                      \
    if (!r_) return r_.error();            \
    lhs = std::move(*r_);                  \
  } while (0)

// What Gemma-2 adds to the common fields, read from the config as published.
struct Gemma2Params {
  double queryPreAttnScalar = 256;
  std::optional<double> attnSoftcap, finalSoftcap;
  int64_t window = 4096;
  std::vector<bool> sliding;  // per layer
  ops::Activation act = ops::Activation::GeluTanh;
};

Expected<Gemma2Params> readGemma2(const ModelConfig& cfg) {
  const ConfigFields& f = cfg.fields;
  Gemma2Params p;
  GEMMA2_TRY(p.queryPreAttnScalar, f.positiveNumber("query_pre_attn_scalar", 256.0));
  GEMMA2_TRY(p.attnSoftcap, f.optionalNumber("attn_logit_softcapping"));
  GEMMA2_TRY(p.finalSoftcap, f.optionalNumber("final_logit_softcapping"));
  if (p.attnSoftcap && !(*p.attnSoftcap > 0 && std::isfinite(*p.attnSoftcap)))
    return f.error("attn_logit_softcapping", "expected a positive number or null");
  if (p.finalSoftcap && !(*p.finalSoftcap > 0 && std::isfinite(*p.finalSoftcap)))
    return f.error("final_logit_softcapping", "expected a positive number or null");
  GEMMA2_TRY(p.window, f.positiveInt("sliding_window", 4096));
  GEMMA2_TRY(p.sliding, readLayerTypes(cfg));
  if (p.sliding.empty()) {  // transformers' default: the even layers
    if (auto s = checkHostBytes(cfg.numLayers / 8, "the sliding pattern of " + std::to_string(cfg.numLayers) + " layers",
                                Loc{cfg.file});
        !s)
      return s.error();
    for (int64_t i = 0; i < cfg.numLayers; ++i) p.sliding.push_back(i % 2 == 0);
  }
  const std::string& act = cfg.hiddenAct;
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") p.act = ops::Activation::GeluTanh;
  else if (act == "gelu") p.act = ops::Activation::Gelu;
  else
    return f.error(f.has("hidden_activation") ? "hidden_activation" : "hidden_act",
                   "activation '" + act + "' is not supported (supported: gelu_pytorch_tanh, gelu)");
  return p;
}

struct Ctx {
  const ModelConfig& cfg;
  const Gemma2Params& p;
  Builder& b;
  ops::Step& step;
  ops::RopeTables rope;
};

ValueId weight(Ctx& c, const std::string& name, Shape shape) { return ops::weight(c.b, c.step, name, std::move(shape)); }

ValueId norm(Ctx& c, ValueId x, const std::string& name) {
  return ops::rms_norm(c.b, x, weight(c, name, {c.cfg.hiddenSize}), c.cfg.normEps, /*unitOffset=*/true);
}

ValueId selfAttention(Ctx& c, int64_t layer, ValueId h) {
  const ModelConfig& m = c.cfg;
  Builder& b = c.b;
  std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
  int64_t H = m.hiddenSize, D = m.headDim, hq = m.numHeads, hkv = m.numKvHeads;
  auto project = [&](const char* name, int64_t heads) {
    ValueId w = weight(c, p + name + ".weight", {heads * D, H});
    ValueId bias = m.qkvBias ? weight(c, p + name + ".bias", {heads * D}) : kNone;
    return ops::split_heads(b, b.name(ops::linear(b, h, w, bias), name), heads, D);
  };
  ValueId q = ops::rope(b, project("q_proj", hq), c.rope, ops::RopeStyle::Half);
  ValueId k = ops::rope(b, project("k_proj", hkv), c.rope, ops::RopeStyle::Half);
  ValueId v = project("v_proj", hkv);
  ops::KvCache cache = ops::declare_kv(b, c.step, "layers." + std::to_string(layer) + ".", hkv, D, D);
  ops::AttentionSpec spec;
  spec.scale = 1.0 / std::sqrt(c.p.queryPreAttnScalar);
  spec.softcap = c.p.attnSoftcap;
  // A window at least the capacity never hides a key: leave it out.
  if (c.p.sliding[size_t(layer)] && c.p.window < c.step.spec.capacity) spec.window = c.p.window;
  ValueId o = c.step.spec.live         ? ops::attention_live(b, c.step, q, k, v, cache, spec)
              : c.step.spec.tokens == 1 ? ops::attention_masked(b, c.step, q, k, v, cache, spec)
                                        : ops::attention_prefill(b, c.step, q, k, v, cache, spec);
  ValueId merged = ops::merge_heads(b, o);
  ValueId ow = weight(c, p + "o_proj.weight", {H, hq * D});
  ValueId ob = m.oBias ? weight(c, p + "o_proj.bias", {H}) : kNone;
  return b.name(ops::linear(b, merged, ow, ob), "o_proj");
}

ValueId decoderLayer(Ctx& c, int64_t layer, ValueId x) {
  Builder& b = c.b;
  Scope scope(b, "layers." + std::to_string(layer));
  std::string p = "model.layers." + std::to_string(layer) + ".";
  int64_t H = c.cfg.hiddenSize, I = c.cfg.intermediateSize;
  {
    Scope s(b, "attn");
    ValueId h = norm(c, x, p + "input_layernorm.weight");
    ValueId a = norm(c, selfAttention(c, layer, h), p + "post_attention_layernorm.weight");
    x = b.name(b.add(x, a), "resid");
  }
  Scope s(b, "mlp");
  ValueId h = norm(c, x, p + "pre_feedforward_layernorm.weight");
  ValueId gate = weight(c, p + "mlp.gate_proj.weight", {I, H});
  ValueId up = weight(c, p + "mlp.up_proj.weight", {I, H});
  ValueId down = weight(c, p + "mlp.down_proj.weight", {H, I});
  ValueId m = norm(c, ops::glu_mlp(b, h, gate, up, down, c.p.act), p + "post_feedforward_layernorm.weight");
  return b.name(b.add(x, m), "resid");
}

}  // namespace

Status parseGemma2(const ConfigFields& f, ModelConfig& cfg) {
  if (auto s = readCommonFields(f, cfg); !s) return s;
  // Gemma2Config's defaults where the shared reader's differ.
  GEMMA2_TRY(cfg.headDim, f.positiveInt("head_dim", 256));
  GEMMA2_TRY(cfg.tieWordEmbeddings, f.boolean("tie_word_embeddings", true));
  if (cfg.headDim % 2 != 0) return f.error("head_dim", "the rotary head width " + std::to_string(cfg.headDim) + " must be even");
  if (cfg.mlpBias) return f.error("mlp_bias", "MLP biases are not supported for model_type gemma2");
  if (auto inv = ropeInvFreq(cfg, cfg.headDim); !inv) return inv.error();
  if (auto p = readGemma2(cfg); !p) return p.error();
  return ok();
}

Expected<Graph> traceGemma2(const ModelConfig& cfg, const TraceOptions& opts) {
  auto spec = resolveStep(cfg, opts);
  if (!spec) return spec.error();
  auto layers = resolveLayers(cfg, opts);
  if (!layers) return layers.error();
  auto inv = ropeInvFreq(cfg, cfg.headDim);
  if (!inv) return inv.error();
  auto params = readGemma2(cfg);
  if (!params) return params.error();

  Builder b(graphName(cfg, opts), cfg.file);
  ops::Step step = ops::begin_step(b, *spec);
  ValueId tokens = declareTokens(b, step);
  Ctx c{cfg, *params, b, step, ops::rope_tables(b, step, *inv)};
  ValueId embed = weight(c, "model.embed_tokens.weight", {cfg.vocabSize, cfg.hiddenSize});
  ValueId gathered = ops::embedding(b, embed, tokens, step.spec.dtype);
  // transformers multiplies by sqrt(hidden_size) cast to the weights' dtype.
  ValueId normalizer = b.scalar(std::sqrt(double(cfg.hiddenSize)), spec->weightDtype);
  if (spec->weightDtype != spec->dtype) normalizer = b.convert(normalizer, spec->dtype);
  b.name(normalizer, "embed.normalizer");
  ValueId x = b.name(b.mul(gathered, normalizer), "embed.scaled");
  b.layers(*layers, [&](int64_t l) { x = decoderLayer(c, l, x); });
  {
    Scope s(b, "final");
    x = norm(c, x, "model.norm.weight");
  }
  ValueId head = cfg.tieWordEmbeddings ? embed : weight(c, "lm_head.weight", {cfg.vocabSize, cfg.hiddenSize});
  ops::logits(b, step, x, head, params->finalSoftcap);
  return b.finish();
}

#undef GEMMA2_TRY

}  // namespace poot::trace

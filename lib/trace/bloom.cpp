// The BLOOM family (model_type bloom), as transformers' BloomForCausalLM
// computes it: word embeddings and their LayerNorm, then per block LayerNorm
// (with bias) -> the fused query_key_value projection in BLOOM's per-head
// interleaved layout (output rows [n_head, 3, head_dim]) -> attention with
// ALiBi (bias slope_h * key_position, added to the causal mask, so the mask's
// head axis is Hq; no rope) -> dense -> residual, LayerNorm -> dense_h_to_4h
// -> tanh GELU -> dense_4h_to_h -> residual (the residual is the normed input
// when apply_residual_connection_post_layernorm); final ln_f and the lm_head
// tied to the word embeddings. Config spellings n_head / n_layer / n_embed
// are read beside num_attention_heads / num_hidden_layers / hidden_size.
// Weight names are the ones BloomForCausalLM.save_pretrained writes, with the
// `transformer.` prefix (transformer.h.0.self_attention.query_key_value.weight);
// the published bigscience/bloom-560m safetensors lacks that prefix (see
// docs/families.md).
#include <cmath>

#include "trace/model.h"

namespace poot::trace {

namespace {

#define BLOOM_TRY(lhs, expr)               \
  do {                                     \
    auto r_ = (expr);                      \
    if (!r_) return r_.error();            \
    lhs = std::move(*r_);                  \
  } while (0)

// One size under two spellings (BLOOM's own and the common one); both
// present and different is an error.
Expected<int64_t> eitherInt(const ConfigFields& f, const char* own, const char* common) {
  std::optional<int64_t> a, c;
  BLOOM_TRY(a, f.optionalPositiveInt(own));
  BLOOM_TRY(c, f.optionalPositiveInt(common));
  if (a && c && *a != *c)
    return f.error(own, std::to_string(*a) + " disagrees with " + common + " " + std::to_string(*c));
  if (a) return *a;
  if (c) return *c;
  return f.error(own, std::string("missing (or ") + common + "), expected a positive integer");
}

struct Ctx {
  const ModelConfig& cfg;
  Builder& b;
  ops::Step& step;
  ValueId alibi;
  bool residualPostNorm;
};

ValueId weight(Ctx& c, const std::string& name, Shape shape) { return ops::weight(c.b, c.step, name, std::move(shape)); }

// LayerNorm with its weight and bias, named `<prefix>.weight` / `.bias`.
ValueId layerNorm(Ctx& c, ValueId x, const std::string& prefix) {
  int64_t H = c.cfg.hiddenSize;
  ValueId w = weight(c, prefix + ".weight", {H});
  ValueId bias = weight(c, prefix + ".bias", {H});
  return ops::layer_norm(c.b, x, w, bias, c.cfg.normEps);
}

ValueId linearWithBias(Ctx& c, ValueId x, const std::string& prefix, int64_t out, int64_t in) {
  ValueId w = weight(c, prefix + ".weight", {out, in});
  ValueId bias = weight(c, prefix + ".bias", {out});
  return ops::linear(c.b, x, w, bias);
}

// query_key_value -> attention with ALiBi -> dense.
ValueId selfAttention(Ctx& c, int64_t layer, ValueId h) {
  const ModelConfig& m = c.cfg;
  Builder& b = c.b;
  std::string p = "transformer.h." + std::to_string(layer) + ".self_attention.";
  int64_t B = c.step.spec.batch, L = c.step.spec.tokens, H = m.hiddenSize, D = m.headDim, heads = m.numHeads;
  ValueId qkv = b.name(linearWithBias(c, h, p + "query_key_value", 3 * H, H), "query_key_value");
  // BLOOM's layout: the 3H outputs are [n_head, 3, head_dim].
  ValueId grouped = b.reshape(qkv, {B, L, heads, 3, D});
  auto part = [&](int64_t i, const char* name) {
    ValueId s = b.slice(grouped, 3, i, i + 1);
    ValueId r = b.reshape(s, {B, L, heads, D});
    return b.name(b.transpose(r, {0, 2, 1, 3}), name);
  };
  ValueId q = part(0, "q");
  ValueId k = part(1, "k");
  ValueId v = part(2, "v");
  ops::KvCache cache = ops::declare_kv(b, c.step, "layers." + std::to_string(layer) + ".", heads, D, D);
  ops::AttentionSpec spec;
  spec.scale = 1.0 / std::sqrt(double(D));
  spec.bias = c.alibi;
  ValueId o = c.step.spec.live         ? ops::attention_live(b, c.step, q, k, v, cache, spec)
              : c.step.spec.tokens == 1 ? ops::attention_masked(b, c.step, q, k, v, cache, spec)
                                        : ops::attention_prefill(b, c.step, q, k, v, cache, spec);
  ValueId merged = ops::merge_heads(b, o);
  return b.name(linearWithBias(c, merged, p + "dense", H, H), "dense");
}

ValueId block(Ctx& c, int64_t layer, ValueId x) {
  Builder& b = c.b;
  Scope scope(b, "layers." + std::to_string(layer));
  std::string p = "transformer.h." + std::to_string(layer) + ".";
  int64_t H = c.cfg.hiddenSize, I = c.cfg.intermediateSize;
  {
    Scope s(b, "attn");
    ValueId ln = layerNorm(c, x, p + "input_layernorm");
    ValueId residual = c.residualPostNorm ? ln : x;
    ValueId a = selfAttention(c, layer, ln);
    x = b.name(b.add(residual, a), "resid");
  }
  Scope s(b, "mlp");
  ValueId ln = layerNorm(c, x, p + "post_attention_layernorm");
  ValueId residual = c.residualPostNorm ? ln : x;
  ValueId up = weight(c, p + "mlp.dense_h_to_4h.weight", {I, H});
  ValueId upBias = weight(c, p + "mlp.dense_h_to_4h.bias", {I});
  ValueId down = weight(c, p + "mlp.dense_4h_to_h.weight", {H, I});
  ValueId downBias = weight(c, p + "mlp.dense_4h_to_h.bias", {H});
  ValueId m = ops::mlp(b, ln, up, upBias, down, downBias, ops::Activation::GeluTanh);
  return b.name(b.add(residual, m), "resid");
}

}  // namespace

Status parseBloom(const ConfigFields& f, ModelConfig& cfg) {
  // transformers' BloomConfig: n_embed, when given, overrides hidden_size.
  if (f.has("n_embed")) {
    BLOOM_TRY(cfg.hiddenSize, f.positiveInt("n_embed"));
  } else {
    BLOOM_TRY(cfg.hiddenSize, f.positiveInt("hidden_size"));
  }
  BLOOM_TRY(cfg.numLayers, eitherInt(f, "n_layer", "num_hidden_layers"));
  BLOOM_TRY(cfg.numHeads, eitherInt(f, "n_head", "num_attention_heads"));
  if (cfg.hiddenSize % cfg.numHeads != 0)
    return f.error("n_head", std::to_string(cfg.numHeads) + " does not divide hidden_size " +
                                 std::to_string(cfg.hiddenSize));
  cfg.numKvHeads = cfg.numHeads;
  cfg.headDim = cfg.hiddenSize / cfg.numHeads;
  cfg.intermediateSize = 4 * cfg.hiddenSize;
  BLOOM_TRY(cfg.vocabSize, f.positiveInt("vocab_size"));
  BLOOM_TRY(cfg.normEps, f.positiveNumber("layer_norm_epsilon", 1e-5));
  BLOOM_TRY(cfg.tieWordEmbeddings, f.boolean("tie_word_embeddings", true));
  BLOOM_TRY(cfg.torchDtype, f.string(f.has("torch_dtype") ? "torch_dtype" : "dtype", ""));
  if (auto post = f.boolean("apply_residual_connection_post_layernorm", false); !post) return post.error();
  cfg.hiddenAct = "gelu_bloom";
  cfg.qkvBias = cfg.oBias = cfg.mlpBias = true;
  return ok();
}

Expected<Graph> traceBloom(const ModelConfig& cfg, const TraceOptions& opts) {
  auto spec = resolveStep(cfg, opts);
  if (!spec) return spec.error();
  auto layers = resolveLayers(cfg, opts);
  if (!layers) return layers.error();
  auto post = cfg.fields.boolean("apply_residual_connection_post_layernorm", false);
  if (!post) return post.error();

  Builder b(graphName(cfg, opts), cfg.file);
  ops::Step step = ops::begin_step(b, *spec);
  ValueId tokens = declareTokens(b, step);
  // One ALiBi bias [1, Hq, 1, cap] shared by every layer (so is their mask).
  Ctx c{cfg, b, step, ops::alibi_bias(b, step, cfg.numHeads), *post};
  ValueId embed = weight(c, "transformer.word_embeddings.weight", {cfg.vocabSize, cfg.hiddenSize});
  ValueId x = ops::embedding(b, embed, tokens, step.spec.dtype);
  {
    Scope s(b, "embed");
    x = layerNorm(c, x, "transformer.word_embeddings_layernorm");
  }
  b.layers(*layers, [&](int64_t l) { x = block(c, l, x); });
  {
    Scope s(b, "final");
    x = layerNorm(c, x, "transformer.ln_f");
  }
  ValueId head = cfg.tieWordEmbeddings ? embed : weight(c, "lm_head.weight", {cfg.vocabSize, cfg.hiddenSize});
  ops::logits(b, step, x, head);
  return b.finish();
}

#undef BLOOM_TRY

}  // namespace poot::trace

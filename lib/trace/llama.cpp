// The Llama family: model_type llama, mistral, qwen2 and qwen3. A pre-norm
// decoder: embedding, then per layer RMSNorm -> q/k/v projections (biases per
// the config; qwen2 always has q/k/v biases) -> for qwen3 an RMSNorm over each
// head of q and of k (q_norm, k_norm: weights [head_dim]) -> rotate-half rope
// -> attention over the layer's KV cache -> o_proj -> residual, RMSNorm ->
// SwiGLU MLP -> residual; final RMSNorm and lm_head (or the tied embedding)
// give `logits`. A sliding window applies to every layer for llama and
// mistral; for qwen2 and qwen3 to the layers layer_types marks
// "sliding_attention", by default those from max_window_layers on, as
// transformers' configs derive them (and to none unless use_sliding_window).
// Weights carry the checkpoint's own names (model.layers.N.self_attn.q_proj.weight).
#include <cmath>

#include "trace/model.h"

namespace poot::trace {

namespace {

Expected<ops::Activation> activationOf(const ConfigFields& f, const std::string& act) {
  if (act == "silu" || act == "swish") return ops::Activation::Silu;
  if (act == "gelu") return ops::Activation::Gelu;
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") return ops::Activation::GeluTanh;
  return f.error(f.has("hidden_activation") ? "hidden_activation" : "hidden_act",
                 "activation '" + act + "' is not supported (supported: silu, gelu, gelu_pytorch_tanh)");
}

bool qwenWindows(const ModelConfig& cfg) { return cfg.modelType == "qwen2" || cfg.modelType == "qwen3"; }

// Which layers the sliding window reaches, for qwen2 and qwen3 (see the top):
// layer_types as given, else the layers from max_window_layers on (28, the
// configs' default). Checked at parse time, so the trace reads it unchecked.
struct Windows {
  std::vector<bool> sliding;  // per layer; empty: by max_window_layers
  int64_t from = 28;
  bool slides(int64_t layer) const { return sliding.empty() ? layer >= from : bool(sliding[size_t(layer)]); }
};

Expected<Windows> readWindows(const ModelConfig& cfg) {
  Windows w;
  auto sliding = readLayerTypes(cfg);
  if (!sliding) return sliding.error();
  auto from = cfg.fields.nonNegativeInt("max_window_layers", w.from);
  if (!from) return from.error();
  w.sliding = std::move(*sliding);
  w.from = *from;
  return w;
}

// Everything one layer needs besides its index.
struct Ctx {
  const ModelConfig& cfg;
  Builder& b;
  ops::Step& step;
  ops::RopeTables rope;
  ops::Activation act;
  Windows windows;
};

ValueId weight(Ctx& c, const std::string& name, Shape shape) { return ops::weight(c.b, c.step, name, std::move(shape)); }

ValueId optionalBias(Ctx& c, bool present, const std::string& name, int64_t n) {
  return present ? weight(c, name, {n}) : kNone;
}

// q/k/v projections -> heads -> rope -> attention -> o_proj.
ValueId selfAttention(Ctx& c, int64_t layer, ValueId h) {
  const ModelConfig& m = c.cfg;
  Builder& b = c.b;
  std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
  int64_t H = m.hiddenSize, D = m.headDim, hq = m.numHeads, hkv = m.numKvHeads;
  auto project = [&](const char* name, int64_t heads) {
    ValueId w = weight(c, p + name + ".weight", {heads * D, H});
    ValueId bias = optionalBias(c, m.qkvBias, p + name + ".bias", heads * D);
    return ops::split_heads(b, b.name(ops::linear(b, h, w, bias), name), heads, D);
  };
  // qwen3's q_norm and k_norm: each head's row normalized over head_dim.
  auto headNorm = [&](ValueId x, const char* name) {
    return m.modelType == "qwen3" ? ops::rms_norm(b, x, weight(c, p + name + ".weight", {D}), m.normEps) : x;
  };
  ValueId q = ops::rope(b, headNorm(project("q_proj", hq), "q_norm"), c.rope, ops::RopeStyle::Half);
  ValueId k = ops::rope(b, headNorm(project("k_proj", hkv), "k_norm"), c.rope, ops::RopeStyle::Half);
  ValueId v = project("v_proj", hkv);
  ops::KvCache cache = ops::declare_kv(b, c.step, "layers." + std::to_string(layer) + ".", hkv, D, D);
  ops::AttentionSpec spec;
  spec.scale = 1.0 / std::sqrt(double(D));
  // A window at least the capacity never hides a key: leave it out.
  bool slides = m.slidingWindow && (!qwenWindows(m) || c.windows.slides(layer));
  if (slides && *m.slidingWindow < c.step.spec.capacity) spec.window = *m.slidingWindow;
  ValueId o = c.step.spec.live         ? ops::attention_live(b, c.step, q, k, v, cache, spec)
              : c.step.spec.tokens == 1 ? ops::attention_masked(b, c.step, q, k, v, cache, spec)
                                        : ops::attention_prefill(b, c.step, q, k, v, cache, spec);
  ValueId merged = ops::merge_heads(b, o);
  ValueId ow = weight(c, p + "o_proj.weight", {H, hq * D});
  ValueId ob = optionalBias(c, m.oBias, p + "o_proj.bias", H);
  return b.name(ops::linear(b, merged, ow, ob), "o_proj");
}

ValueId mlp(Ctx& c, int64_t layer, ValueId h) {
  const ModelConfig& m = c.cfg;
  std::string p = "model.layers." + std::to_string(layer) + ".mlp.";
  int64_t H = m.hiddenSize, I = m.intermediateSize;
  ValueId gate = weight(c, p + "gate_proj.weight", {I, H});
  ValueId up = weight(c, p + "up_proj.weight", {I, H});
  ValueId down = weight(c, p + "down_proj.weight", {H, I});
  return ops::glu_mlp(c.b, h, gate, up, down, c.act);
}

ValueId decoderLayer(Ctx& c, int64_t layer, ValueId x) {
  Builder& b = c.b;
  Scope scope(b, "layers." + std::to_string(layer));
  std::string p = "model.layers." + std::to_string(layer) + ".";
  int64_t H = c.cfg.hiddenSize;
  ValueId attnOut;
  {
    Scope s(b, "attn");
    ValueId h = ops::rms_norm(b, x, weight(c, p + "input_layernorm.weight", {H}), c.cfg.normEps);
    attnOut = selfAttention(c, layer, h);
  }
  x = b.name(b.add(x, attnOut), "resid");
  Scope s(b, "mlp");
  ValueId h = ops::rms_norm(b, x, weight(c, p + "post_attention_layernorm.weight", {H}), c.cfg.normEps);
  return b.name(b.add(x, mlp(c, layer, h)), "resid");
}

}  // namespace

Status parseLlama(const ConfigFields& f, ModelConfig& cfg) {
  if (auto s = readCommonFields(f, cfg); !s) return s;
  if (cfg.modelType == "qwen2") {  // Qwen2 has q/k/v biases and no o_proj bias, whatever the config says
    cfg.qkvBias = true;
    cfg.oBias = false;
  }
  if (cfg.headDim % 2 != 0) return f.error("head_dim", "the rotary head width " + std::to_string(cfg.headDim) + " must be even");
  if (auto inv = ropeInvFreq(cfg, cfg.headDim); !inv) return inv.error();
  if (auto a = activationOf(f, cfg.hiddenAct); !a) return a.error();
  if (qwenWindows(cfg))
    if (auto w = readWindows(cfg); !w) return w.error();
  if (cfg.mlpBias) return f.error("mlp_bias", "MLP biases are not supported for model_type " + cfg.modelType);
  return ok();
}

void llamaHead(Builder& b, const ModelConfig& cfg, const ops::Step& step, ValueId x, ValueId embed) {
  {
    Scope s(b, "final");
    x = ops::rms_norm(b, x, ops::weight(b, step, "model.norm.weight", {cfg.hiddenSize}), cfg.normEps);
  }
  // Tied: the logits read the embedding table itself, no lm_head.weight.
  ValueId head = cfg.tieWordEmbeddings ? embed
                                        : ops::weight(b, step, "lm_head.weight", {cfg.vocabSize, cfg.hiddenSize});
  ops::logits(b, step, x, head);
}

Expected<Graph> traceLlama(const ModelConfig& cfg, const TraceOptions& opts) {
  auto spec = resolveStep(cfg, opts);
  if (!spec) return spec.error();
  auto layers = resolveLayers(cfg, opts);
  if (!layers) return layers.error();
  auto inv = ropeInvFreq(cfg, cfg.headDim);
  if (!inv) return inv.error();
  auto act = activationOf(cfg.fields, cfg.hiddenAct);
  if (!act) return act.error();

  Builder b(graphName(cfg, opts), cfg.file);
  ops::Step step = ops::begin_step(b, *spec);
  ValueId tokens = declareTokens(b, step);
  Windows windows;
  if (qwenWindows(cfg)) {
    auto w = readWindows(cfg);
    if (!w) return w.error();
    windows = std::move(*w);
  }
  Ctx c{cfg, b, step, ops::rope_tables(b, step, *inv), *act, std::move(windows)};
  ValueId embed = weight(c, "model.embed_tokens.weight", {cfg.vocabSize, cfg.hiddenSize});
  ValueId x = ops::embedding(b, embed, tokens, step.spec.dtype);
  b.layers(*layers, [&](int64_t l) { x = decoderLayer(c, l, x); });
  llamaHead(b, cfg, step, x, embed);
  return b.finish();
}

}  // namespace poot::trace

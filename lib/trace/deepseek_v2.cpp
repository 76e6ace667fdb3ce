// The DeepSeek-V2 family (model_type deepseek_v2), as transformers'
// DeepseekV2ForCausalLM computes it. Attention is multi-head latent attention:
// the query from q_proj (or q_a_proj -> q_a_layernorm -> q_b_proj when
// q_lora_rank is set) split into a per-head part and a rotary part; the key
// and value from kv_a_proj_with_mqa, whose latent goes through kv_a_layernorm
// and kv_b_proj, and whose last qk_rope_head_dim outputs are the one rotary
// key shared by every head. Rope is the interleaved style (transformers
// rotates (x[2i], x[2i+1]) pairs as complex numbers), with YaRN inv_freq and
// attention factor computed on the host as transformers does; the key is
// ops::attention_split's Concat(k_nope, Broadcast(k_pe)), and the softmax
// scale is qk_head_dim^-0.5 times mscale(factor, mscale_all_dim)^2. The first
// first_k_dense_replace layers have a dense SwiGLU MLP; the others a MoE
// written as primitives: softmax gate over n_routed_experts in f32, top-k
// (greedy, or group_limited_greedy), weights times routed_scaling_factor,
// every expert run densely on every token and combined with its routing
// weight (zero where unselected), plus the shared experts.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "ir/budget.h"
#include "trace/model.h"

namespace poot::trace {

namespace {

#define DSV2_TRY(lhs, expr)                \
  do {                                     \
    auto r_ = (expr);                      \
    if (!r_) return r_.error();            \
    lhs = std::move(*r_);                  \
  } while (0)

// transformers' RMSNorm default epsilon, which q_a_layernorm and
// kv_a_layernorm keep (they are built without rms_norm_eps).
constexpr double kLatentNormEps = 1e-6;

// What DeepSeek-V2 adds to the common fields.
struct DsParams {
  std::optional<int64_t> qLoraRank;
  int64_t kvLoraRank = 0, nope = 0, rope = 0, vDim = 0;
  int64_t firstDense = 0, experts = 0, topK = 0, shared = 0, moeInter = 0;
  double routedScale = 1.0;
  bool groupLimited = false;
  int64_t nGroup = 1, topkGroup = 1;
  std::vector<double> invFreq;
  double ropeScaling = 1.0;  // YaRN's attention factor, on cos and sin
  double softmaxScale = 0;
};

double yarnMscale(double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

// transformers' _compute_yarn_parameters (modeling_rope_utils.py), in double.
Status yarn(const ModelConfig& cfg, const ConfigFields& p, int64_t dim, DsParams& ds) {
  double base = cfg.rope.theta;
  std::optional<int64_t> orig;
  DSV2_TRY(orig, p.optionalPositiveInt("original_max_position_embeddings"));
  if (!orig) DSV2_TRY(orig, cfg.fields.optionalPositiveInt("original_max_position_embeddings"));
  if (!orig && cfg.maxPositions > 0) orig = cfg.maxPositions;
  if (!orig) return p.error("original_max_position_embeddings", "missing, expected a positive integer");
  std::optional<double> factor, attnFactor, mscale, mscaleAllDim, betaFast, betaSlow;
  DSV2_TRY(factor, p.optionalNumber("factor"));
  if (!factor && cfg.maxPositions > 0) factor = double(cfg.maxPositions) / double(*orig);
  if (!factor || !(*factor > 0)) return p.error("factor", "expected a positive number");
  DSV2_TRY(attnFactor, p.optionalNumber("attention_factor"));
  DSV2_TRY(mscale, p.optionalNumber("mscale"));
  DSV2_TRY(mscaleAllDim, p.optionalNumber("mscale_all_dim"));
  DSV2_TRY(betaFast, p.optionalNumber("beta_fast"));
  DSV2_TRY(betaSlow, p.optionalNumber("beta_slow"));
  bool truncate = true;
  DSV2_TRY(truncate, p.boolean("truncate", true));
  if (attnFactor) {
    ds.ropeScaling = *attnFactor;
  } else if (mscale.value_or(0) != 0 && mscaleAllDim.value_or(0) != 0) {
    ds.ropeScaling = yarnMscale(*factor, *mscale) / yarnMscale(*factor, *mscaleAllDim);
  } else {
    ds.ropeScaling = yarnMscale(*factor, 1.0);
  }
  double fast = betaFast.value_or(0) != 0 ? *betaFast : 32, slow = betaSlow.value_or(0) != 0 ? *betaSlow : 1;
  auto correctionDim = [&](double rotations) {
    return double(dim) * std::log(double(*orig) / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  double low = correctionDim(fast), high = correctionDim(slow);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;
  ds.invFreq.clear();
  if (auto s = checkHostBytes(mulBytes(dim / 2, 8), "the rotary frequency table of qk_rope_head_dim " + std::to_string(dim),
                              Loc{cfg.file});
      !s)
    return s;
  for (int64_t i = 0; i < dim / 2; ++i) {
    double posFreq = std::pow(base, double(2 * i) / double(dim));
    double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    double extrapolation = 1 - ramp;
    ds.invFreq.push_back(1.0 / (*factor * posFreq) * (1 - extrapolation) + 1.0 / posFreq * extrapolation);
  }
  return ok();
}

Expected<DsParams> readDeepseek(const ModelConfig& cfg) {
  const ConfigFields& f = cfg.fields;
  DsParams ds;
  DSV2_TRY(ds.qLoraRank, f.optionalPositiveInt("q_lora_rank"));
  DSV2_TRY(ds.kvLoraRank, f.positiveInt("kv_lora_rank", 512));
  DSV2_TRY(ds.nope, f.positiveInt("qk_nope_head_dim", 128));
  DSV2_TRY(ds.rope, f.positiveInt("qk_rope_head_dim", 64));
  DSV2_TRY(ds.vDim, f.positiveInt("v_head_dim", 128));
  if (ds.rope % 2 != 0) return f.error("qk_rope_head_dim", "the rotary width " + std::to_string(ds.rope) + " must be even");
  if (cfg.numKvHeads != cfg.numHeads)
    return f.error("num_key_value_heads", "must equal num_attention_heads: multi-head latent attention expands one "
                                          "latent into every head");
  DSV2_TRY(ds.firstDense, f.nonNegativeInt("first_k_dense_replace", 0));
  DSV2_TRY(ds.experts, f.positiveInt("n_routed_experts", 64));
  DSV2_TRY(ds.shared, f.nonNegativeInt("n_shared_experts", 2));
  DSV2_TRY(ds.moeInter, f.positiveInt("moe_intermediate_size", 1407));
  DSV2_TRY(ds.routedScale, f.number("routed_scaling_factor", 1.0));
  bool moe = ds.firstDense < cfg.numLayers;
  std::optional<int64_t> topK;
  DSV2_TRY(topK, f.optionalPositiveInt("num_experts_per_tok"));
  if (moe && !topK) return f.error("num_experts_per_tok", "missing, expected a positive integer");
  ds.topK = topK.value_or(1);
  if (moe && ds.topK > ds.experts)
    return f.error("num_experts_per_tok", std::to_string(ds.topK) + " is more than n_routed_experts " +
                                              std::to_string(ds.experts));
  std::string method, scoring;
  DSV2_TRY(method, f.string("topk_method", "greedy"));
  DSV2_TRY(scoring, f.string("scoring_func", "softmax"));
  if (scoring != "softmax") return f.error("scoring_func", "'" + scoring + "' is not supported (supported: softmax)");
  bool normTopk = false;
  DSV2_TRY(normTopk, f.boolean("norm_topk_prob", false));
  if (normTopk)
    return f.error("norm_topk_prob", "true is not supported: transformers' DeepseekV2 ignores it while DeepSeek's "
                                     "reference code renormalizes the top-k weights, and the two disagree");
  int64_t layerFreq = 1;
  DSV2_TRY(layerFreq, f.positiveInt("moe_layer_freq", 1));
  if (layerFreq != 1) return f.error("moe_layer_freq", "only 1 is supported (every layer after the dense ones is MoE)");
  if (method == "group_limited_greedy") {
    ds.groupLimited = true;
    DSV2_TRY(ds.nGroup, f.positiveInt("n_group"));
    DSV2_TRY(ds.topkGroup, f.positiveInt("topk_group"));
    if (ds.experts % ds.nGroup != 0)
      return f.error("n_group", std::to_string(ds.nGroup) + " does not divide n_routed_experts " + std::to_string(ds.experts));
    if (ds.topkGroup > ds.nGroup) return f.error("topk_group", "is more than n_group");
    if (moe && ds.topK > ds.topkGroup * (ds.experts / ds.nGroup))
      return f.error("num_experts_per_tok", "is more than the experts of topk_group groups");
  } else if (method != "greedy") {
    return f.error("topk_method", "'" + method + "' is not supported (supported: greedy, group_limited_greedy)");
  }
  if (cfg.hiddenAct != "silu" && cfg.hiddenAct != "swish")
    return f.error("hidden_act", "activation '" + cfg.hiddenAct + "' is not supported (supported: silu)");
  if (cfg.mlpBias) return f.error("mlp_bias", "MLP biases are not supported for model_type deepseek_v2");

  // Rope over the rotary part only (transformers sets head_dim = qk_rope_head_dim).
  ds.softmaxScale = 1.0 / std::sqrt(double(ds.nope + ds.rope));
  if (cfg.rope.type == "default") {
    ds.invFreq = ops::rope_inv_freq(cfg.rope.theta, ds.rope);
  } else if (cfg.rope.type == "yarn") {
    const ConfigFields& p = *cfg.rope.params;
    if (auto s = yarn(cfg, p, ds.rope, ds); !s) return s.error();
    // yarn_apply_mscale: mscale_all_dim scales the softmax twice over.
    double all = 0, factor = 0;
    DSV2_TRY(all, p.number("mscale_all_dim", 0.0));
    DSV2_TRY(factor, p.number("factor"));
    if (all != 0) ds.softmaxScale *= yarnMscale(factor, all) * yarnMscale(factor, all);
  } else {
    const ConfigFields& p = cfg.rope.params ? *cfg.rope.params : f;
    return p.error(p.has("type") && !p.has("rope_type") ? "type" : "rope_type",
                   "rope type '" + cfg.rope.type + "' is not supported for model_type deepseek_v2 (supported: default, yarn)");
  }
  return ds;
}

struct Ctx {
  const ModelConfig& cfg;
  const DsParams& ds;
  Builder& b;
  ops::Step& step;
  ops::RopeTables rope;
};

ValueId weight(Ctx& c, const std::string& name, Shape shape) { return ops::weight(c.b, c.step, name, std::move(shape)); }

ValueId f32(Builder& b, ValueId x) { return b.dtype(x) == DType::F32 ? x : b.convert(x, DType::F32); }

// Multi-head latent attention over the split-key cache.
ValueId selfAttention(Ctx& c, int64_t layer, ValueId h) {
  const ModelConfig& m = c.cfg;
  const DsParams& ds = c.ds;
  Builder& b = c.b;
  std::string p = "model.layers." + std::to_string(layer) + ".self_attn.";
  int64_t H = m.hiddenSize, heads = m.numHeads, qk = ds.nope + ds.rope, rank = ds.kvLoraRank;
  ValueId q;
  if (ds.qLoraRank) {
    int64_t r = *ds.qLoraRank;
    ValueId aw = weight(c, p + "q_a_proj.weight", {r, H});
    ValueId ab = m.qkvBias ? weight(c, p + "q_a_proj.bias", {r}) : kNone;
    ValueId qa = b.name(ops::linear(b, h, aw, ab), "q_a_proj");
    ValueId qn = ops::rms_norm(b, qa, weight(c, p + "q_a_layernorm.weight", {r}), kLatentNormEps);
    q = b.name(ops::linear(b, qn, weight(c, p + "q_b_proj.weight", {heads * qk, r})), "q_b_proj");
  } else {
    q = b.name(ops::linear(b, h, weight(c, p + "q_proj.weight", {heads * qk, H})), "q_proj");
  }
  q = ops::split_heads(b, q, heads, qk);
  ValueId qNope = b.slice(q, -1, 0, ds.nope);
  ValueId qPe = b.slice(q, -1, ds.nope, qk);
  qPe = ops::rope(b, qPe, c.rope, ops::RopeStyle::Interleaved);
  ValueId query = b.name(b.concat({qNope, qPe}, -1), "query");

  ValueId kvw = weight(c, p + "kv_a_proj_with_mqa.weight", {rank + ds.rope, H});
  ValueId kvb = m.qkvBias ? weight(c, p + "kv_a_proj_with_mqa.bias", {rank + ds.rope}) : kNone;
  ValueId compressed = b.name(ops::linear(b, h, kvw, kvb), "kv_a_proj_with_mqa");
  ValueId latent = b.slice(compressed, -1, 0, rank);
  ValueId kPe = b.slice(compressed, -1, rank, rank + ds.rope);
  latent = ops::rms_norm(b, latent, weight(c, p + "kv_a_layernorm.weight", {rank}), kLatentNormEps);
  int64_t B = c.step.spec.batch, L = c.step.spec.tokens;
  kPe = b.reshape(kPe, {B, 1, L, ds.rope});
  kPe = b.name(ops::rope(b, kPe, c.rope, ops::RopeStyle::Interleaved), "k_pe");
  ValueId kv = b.name(ops::linear(b, latent, weight(c, p + "kv_b_proj.weight", {heads * (ds.nope + ds.vDim), rank})),
                      "kv_b_proj");
  kv = ops::split_heads(b, kv, heads, ds.nope + ds.vDim);
  ValueId kNope = b.name(b.slice(kv, -1, 0, ds.nope), "k_nope");
  ValueId value = b.name(b.slice(kv, -1, ds.nope, ds.nope + ds.vDim), "value");

  ops::SplitKvCache cache =
      ops::declare_split_kv(b, c.step, "layers." + std::to_string(layer) + ".", heads, ds.nope, ds.rope, ds.vDim);
  ops::AttentionSpec spec;
  spec.scale = ds.softmaxScale;
  ValueId o = ops::attention_split(b, c.step, query, kNope, kPe, value, cache, spec);
  ValueId merged = ops::merge_heads(b, o);
  ValueId ow = weight(c, p + "o_proj.weight", {H, heads * ds.vDim});
  ValueId ob = m.oBias ? weight(c, p + "o_proj.bias", {H}) : kNone;
  return b.name(ops::linear(b, merged, ow, ob), "o_proj");
}

// A SwiGLU MLP of width `inter` whose weights are `<prefix>{gate,up,down}_proj.weight`.
ValueId swiglu(Ctx& c, ValueId h, const std::string& prefix, int64_t inter) {
  int64_t H = c.cfg.hiddenSize;
  ValueId gate = weight(c, prefix + "gate_proj.weight", {inter, H});
  ValueId up = weight(c, prefix + "up_proj.weight", {inter, H});
  ValueId down = weight(c, prefix + "down_proj.weight", {H, inter});
  return ops::glu_mlp(c.b, h, gate, up, down, ops::Activation::Silu);
}

// any_j(idx[..., j] == e) as one i32 0/1 per e: idx [B, L, n] -> [B, L, count].
ValueId oneHotAny(Builder& b, ValueId idx, int64_t count) {
  Shape s = b.shape(idx);
  ValueId col = b.reshape(idx, {s[0], s[1], s[2], 1});
  ValueId ids = b.iota(Type{DType::I32, {count}}, 0);
  ValueId hit = b.convert(b.eq(col, ids), DType::I32);
  return b.reduceMax(hit, 2, false);
}

// Routing weights [B, L, E] in f32: the top-k gate probabilities (times
// routed_scaling_factor) at the selected experts, zero elsewhere.
ValueId routingWeights(Ctx& c, ValueId h, const std::string& prefix) {
  Builder& b = c.b;
  const DsParams& ds = c.ds;
  int64_t B = c.step.spec.batch, L = c.step.spec.tokens, E = ds.experts;
  ValueId gw = f32(b, weight(c, prefix + "gate.weight", {E, c.cfg.hiddenSize}));
  ValueId logits = b.name(ops::linear(b, f32(b, h), gw), "router_logits");
  ValueId m = b.reduceMax(logits, -1, true);
  ValueId ex = b.exp(b.sub(logits, m));
  ValueId sum = b.reduceSum(ex, -1, true);
  ValueId scores = b.name(b.div(ex, sum), "scores");
  if (ds.groupLimited) {
    // Keep the experts of the topk_group groups with the best single expert.
    int64_t G = ds.nGroup, per = E / G;
    ValueId grouped = b.reshape(scores, {B, L, G, per});
    ValueId groupScores = b.reduceMax(grouped, -1, false);
    ValueId groupIdx = b.topk(groupScores, ds.topkGroup)[1];
    ValueId keepGroup = oneHotAny(b, groupIdx, G);
    ValueId keep4 = b.broadcast(b.reshape(keepGroup, {B, L, G, 1}), {B, L, G, per});
    ValueId keepE = b.reshape(keep4, {B, L, E});
    ValueId keep = b.gt(keepE, b.scalar(0, DType::I32));
    scores = b.name(b.select(keep, scores, b.scalar(0.0)), "scores.grouped");
  }
  std::vector<ValueId> top = b.topk(scores, ds.topK);
  ValueId w = top[0];
  if (ds.routedScale != 1.0) w = b.mul(w, b.scalar(ds.routedScale));
  ValueId idx = b.name(top[1], "topk_idx");
  ValueId idxCol = b.reshape(idx, {B, L, ds.topK, 1});
  ValueId hit = b.eq(idxCol, b.iota(Type{DType::I32, {E}}, 0));
  ValueId wcol = b.reshape(w, {B, L, ds.topK, 1});
  ValueId spread = b.select(hit, wcol, b.scalar(0.0));
  return b.name(b.reduceSum(spread, 2, false), "routing_weights");
}

ValueId moe(Ctx& c, int64_t layer, ValueId h) {
  Builder& b = c.b;
  const DsParams& ds = c.ds;
  std::string p = "model.layers." + std::to_string(layer) + ".mlp.";
  Scope s(b, "moe");
  ValueId weights = routingWeights(c, h, p);
  if (b.dtype(h) != DType::F32) weights = b.convert(weights, b.dtype(h));
  ValueId routed = kNone;
  for (int64_t e = 0; e < ds.experts; ++e) {
    Scope se(b, "experts." + std::to_string(e));
    ValueId y = swiglu(c, h, p + "experts." + std::to_string(e) + ".", ds.moeInter);
    ValueId we = b.slice(weights, -1, e, e + 1);
    ValueId scaled = b.mul(y, we);
    routed = routed == kNone ? scaled : b.add(routed, scaled);
  }
  routed = b.name(routed, "routed");
  if (ds.shared == 0) return routed;
  ValueId shared;
  {
    Scope ss(b, "shared");
    shared = swiglu(c, h, p + "shared_experts.", ds.moeInter * ds.shared);
  }
  return b.name(b.add(routed, shared), "out");
}

ValueId decoderLayer(Ctx& c, int64_t layer, ValueId x) {
  Builder& b = c.b;
  Scope scope(b, "layers." + std::to_string(layer));
  std::string p = "model.layers." + std::to_string(layer) + ".";
  int64_t H = c.cfg.hiddenSize;
  {
    Scope s(b, "attn");
    ValueId h = ops::rms_norm(b, x, weight(c, p + "input_layernorm.weight", {H}), c.cfg.normEps);
    ValueId a = selfAttention(c, layer, h);
    x = b.name(b.add(x, a), "resid");
  }
  Scope s(b, "mlp");
  ValueId h = ops::rms_norm(b, x, weight(c, p + "post_attention_layernorm.weight", {H}), c.cfg.normEps);
  ValueId m = layer < c.ds.firstDense ? swiglu(c, h, p + "mlp.", c.cfg.intermediateSize) : moe(c, layer, h);
  return b.name(b.add(x, m), "resid");
}

}  // namespace

Status parseDeepseekV2(const ConfigFields& f, ModelConfig& cfg) {
  if (auto s = readCommonFields(f, cfg); !s) return s;
  if (auto ds = readDeepseek(cfg); !ds) return ds.error();
  return ok();
}

Expected<Graph> traceDeepseekV2(const ModelConfig& cfg, const TraceOptions& opts) {
  auto spec = resolveStep(cfg, opts);
  if (!spec) return spec.error();
  auto layers = resolveLayers(cfg, opts);
  if (!layers) return layers.error();
  auto ds = readDeepseek(cfg);
  if (!ds) return ds.error();

  Builder b(graphName(cfg, opts), cfg.file);
  ops::Step step = ops::begin_step(b, *spec);
  ValueId tokens = declareTokens(b, step);
  Ctx c{cfg, *ds, b, step, ops::rope_tables(b, step, ds->invFreq, ds->ropeScaling)};
  ValueId embed = weight(c, "model.embed_tokens.weight", {cfg.vocabSize, cfg.hiddenSize});
  ValueId x = ops::embedding(b, embed, tokens, step.spec.dtype);
  b.layers(*layers, [&](int64_t l) { x = decoderLayer(c, l, x); });
  llamaHead(b, cfg, step, x, embed);
  return b.finish();
}

#undef DSV2_TRY

}  // namespace poot::trace

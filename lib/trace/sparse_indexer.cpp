// The block-sparse indexer family (model_type poot_block_sparse): poot's own
// test family, not a published model. A Llama body (RMSNorm, rotate-half
// rope, GQA, SwiGLU; the same weight names) whose attention attends only to
// blocks an indexer picks. Per layer, with blocks of index_block_size (the
// "block") positions and index_topk (K) blocks:
//   scores[b, i, j] = (h W_idx)[b, i] . meanpool_j(K cache) / sqrt(D): a small
//     indexer projection of the queries (model.layers.N.self_attn.indexer.weight,
//     [head_dim, hidden]) against the keys of block j mean-pooled over its
//     positions and the key heads ([B, Lq, NB], NB = cap / block);
//   the block selection as primitives: candidates are the completed blocks
//     j < qpos / block (the others Select-ed to -inf), TopK of K, and
//     ids = Select(value > -inf, index, -1);
//   the mask over the selected blocks plus the row's own block, expanded to
//     keys and joined with t <= qpos, as the additive mask of the ordinary
//     attention (attention_core, no causal mask of its own).
// This is BlockTopK(scores, qpos){k, block} followed by SelectedAttention of
// the formed ops, so each row visits (K + 1) * block positions at most; the
// selection pass forms those from these eqns.
#include <cmath>
#include <limits>

#include "trace/model.h"

namespace poot::trace {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct SparseParams {
  int64_t block = 16;
  int64_t topK = 0;
};

Expected<SparseParams> readSparse(const ConfigFields& f) {
  SparseParams p;
  auto block = f.positiveInt("index_block_size", 16);
  if (!block) return block.error();
  auto topK = f.positiveInt("index_topk");
  if (!topK) return topK.error();
  p.block = *block;
  p.topK = *topK;
  return p;
}

// The block structure every layer shares: the step's query blocks against
// the cache's blocks and keys.
struct Blocks {
  int64_t n = 0;                // NB
  ValueId blockIds = kNone;     // i32[NB] 0..NB-1
  // bool[L, NB] and bool[L, cap], a leading B when paged (each row's positions):
  ValueId candidate = kNone;    // j < qpos / block (completed blocks)
  ValueId own = kNone;          // j == qpos / block
  ValueId causal = kNone;       // t <= qpos
};

Blocks blockStructure(Builder& b, const ops::Step& s, int64_t block) {
  TopLevel top(b);
  Scope scope(b, "index");
  int64_t cap = s.spec.capacity;
  Blocks k;
  k.n = cap / block;
  k.blockIds = b.name(b.iota(Type{DType::I32, {k.n}}, 0), "block_ids");
  ValueId qblock = b.name(b.div(s.positions, b.scalar(double(block), DType::I32)), "qblock");
  ValueId qcol = b.reshape(qblock, ops::query_column(s));
  ValueId jrow = b.reshape(k.blockIds, {1, k.n});
  k.candidate = b.name(b.lt(jrow, qcol), "candidate");
  k.own = b.name(b.eq(jrow, qcol), "own");
  ValueId kpos = b.reshape(b.iota(Type{DType::I32, {cap}}, 0), {1, cap});
  ValueId qpos = b.reshape(s.positions, ops::query_column(s));
  k.causal = b.name(b.le(kpos, qpos), "causal");
  return k;
}

struct Ctx {
  const ModelConfig& cfg;
  const SparseParams& p;
  Builder& b;
  ops::Step& step;
  ops::RopeTables rope;
  Blocks blocks;
};

ValueId weight(Ctx& c, const std::string& name, Shape shape) { return ops::weight(c.b, c.step, name, std::move(shape)); }

// The additive mask [B, 1, L, cap] of the blocks this layer's indexer picks.
ValueId blockMask(Ctx& c, int64_t layer, ValueId h, ValueId keys) {
  Builder& b = c.b;
  Scope scope(b, "index");
  const Blocks& k = c.blocks;
  int64_t B = c.step.spec.batch, L = c.step.spec.tokens, cap = c.step.spec.capacity;
  int64_t Hkv = b.dim(keys, 1), D = b.dim(keys, 3), block = c.p.block, K = c.p.topK;
  DType dt = c.step.spec.dtype;
  // Block scores: indexer queries against the mean-pooled keys of every block.
  ValueId w = weight(c, "model.layers." + std::to_string(layer) + ".self_attn.indexer.weight", {D, c.cfg.hiddenSize});
  ValueId iq = b.name(ops::linear(b, h, w), "query");
  ValueId perBlock = b.reshape(keys, {B, Hkv, k.n, block, D});
  ValueId summed = b.reduceSum(b.reduceSum(perBlock, 3, false), 1, false);  // [B, NB, D]
  ValueId pooled = b.name(b.mul(summed, b.scalar(1.0 / double(block * Hkv), dt)), "pooled");
  ValueId pt = b.transpose(pooled, {0, 2, 1});
  ValueId raw = b.matmul(iq, pt);
  ValueId scores = b.name(b.mul(raw, b.scalar(1.0 / std::sqrt(double(D)), dt)), "scores");  // [B, L, NB]
  // Block selection: the K best completed blocks, -1 where there are fewer.
  ValueId hidden = b.scalar(-kInf, dt);
  ValueId masked = b.name(b.select(k.candidate, scores, hidden), "candidates");
  std::vector<ValueId> top = b.topk(masked, K);
  ValueId best = b.name(top[0], "topk");
  ValueId bestIdx = b.name(top[1], "topk_idx");
  ValueId found = b.gt(best, hidden);
  ValueId ids = b.name(b.select(found, bestIdx, b.scalar(-1, DType::I32)), "ids");  // [B, L, K]
  // The visible blocks: selected, or the row's own; expanded to keys.
  ValueId idsCol = b.reshape(ids, {B, L, K, 1});
  ValueId hit = b.convert(b.eq(idsCol, k.blockIds), DType::I32);  // [B, L, K, NB]
  ValueId chosen = b.reduceMax(hit, 2, false);
  ValueId selected = b.gt(chosen, b.scalar(0, DType::I32));
  ValueId visibleBlocks = b.name(b.logicalOr(selected, k.own), "visible_blocks");  // [B, L, NB]
  ValueId spread = b.broadcast(b.reshape(visibleBlocks, {B, L, k.n, 1}), {B, L, k.n, block});
  ValueId visibleKeys = b.reshape(spread, {B, L, cap});
  ValueId visible = b.name(b.logicalAnd(visibleKeys, k.causal), "visible");
  ValueId zero = b.scalar(0.0, dt);
  ValueId additive = b.select(visible, zero, hidden);
  return b.reshape(additive, {B, 1, L, cap});
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
  ValueId kNew = ops::rope(b, project("k_proj", hkv), c.rope, ops::RopeStyle::Half);
  ValueId vNew = project("v_proj", hkv);
  ops::KvCache cache = ops::declare_kv(b, c.step, "layers." + std::to_string(layer) + ".", hkv, D, D);
  ValueId k = ops::cache_update(b, c.step, cache.k, kNew);
  ValueId v = ops::cache_update(b, c.step, cache.v, vNew);
  ops::AttentionSpec spec;
  spec.scale = 1.0 / std::sqrt(double(D));
  spec.causal = false;  // t <= qpos is part of the block mask
  spec.bias = blockMask(c, layer, h, k);
  ValueId o = ops::attention_core(b, c.step, q, k, v, spec);
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
    ValueId h = ops::rms_norm(b, x, weight(c, p + "input_layernorm.weight", {H}), c.cfg.normEps);
    ValueId a = selfAttention(c, layer, h);
    x = b.name(b.add(x, a), "resid");
  }
  Scope s(b, "mlp");
  ValueId h = ops::rms_norm(b, x, weight(c, p + "post_attention_layernorm.weight", {H}), c.cfg.normEps);
  ValueId gate = weight(c, p + "mlp.gate_proj.weight", {I, H});
  ValueId up = weight(c, p + "mlp.up_proj.weight", {I, H});
  ValueId down = weight(c, p + "mlp.down_proj.weight", {H, I});
  return b.name(b.add(x, ops::glu_mlp(b, h, gate, up, down, ops::Activation::Silu)), "resid");
}

}  // namespace

Status parseSparseIndexer(const ConfigFields& f, ModelConfig& cfg) {
  if (auto s = readCommonFields(f, cfg); !s) return s;
  if (cfg.headDim % 2 != 0) return f.error("head_dim", "the rotary head width " + std::to_string(cfg.headDim) + " must be even");
  if (auto inv = ropeInvFreq(cfg, cfg.headDim); !inv) return inv.error();
  if (cfg.hiddenAct != "silu")
    return f.error("hidden_act", "activation '" + cfg.hiddenAct + "' is not supported (supported: silu)");
  if (cfg.mlpBias) return f.error("mlp_bias", "MLP biases are not supported for model_type " + cfg.modelType);
  if (cfg.slidingWindow) return f.error("sliding_window", "a sliding window is not supported with the block indexer");
  if (auto p = readSparse(f); !p) return p.error();
  return ok();
}

Expected<Graph> traceSparseIndexer(const ModelConfig& cfg, const TraceOptions& opts) {
  auto spec = resolveStep(cfg, opts);
  if (!spec) return spec.error();
  auto layers = resolveLayers(cfg, opts);
  if (!layers) return layers.error();
  auto inv = ropeInvFreq(cfg, cfg.headDim);
  if (!inv) return inv.error();
  auto params = readSparse(cfg.fields);
  if (!params) return params.error();
  if (spec->capacity % params->block != 0)
    return makeError(ErrorKind::Usage, {},
                     "--capacity " + std::to_string(spec->capacity) + " must be a multiple of index_block_size " +
                         std::to_string(params->block));
  if (spec->capacity / params->block < params->topK)
    return makeError(ErrorKind::Usage, {},
                     "--capacity " + std::to_string(spec->capacity) + " holds " +
                         std::to_string(spec->capacity / params->block) + " blocks, fewer than index_topk " +
                         std::to_string(params->topK));

  Builder b(graphName(cfg, opts), cfg.file);
  ops::Step step = ops::begin_step(b, *spec);
  ValueId tokens = declareTokens(b, step);
  ops::RopeTables rope = ops::rope_tables(b, step, *inv);
  Ctx c{cfg, *params, b, step, rope, blockStructure(b, step, params->block)};
  ValueId embed = weight(c, "model.embed_tokens.weight", {cfg.vocabSize, cfg.hiddenSize});
  ValueId x = ops::embedding(b, embed, tokens, step.spec.dtype);
  b.layers(*layers, [&](int64_t l) { x = decoderLayer(c, l, x); });
  llamaHead(b, cfg, step, x, embed);
  return b.finish();
}

}  // namespace poot::trace

// Unit tests of the model families beyond Llama (lib/trace/gemma2.cpp,
// bloom.cpp, deepseek_v2.cpp, sparse_indexer.cpp): every example config
// traces and verifies in every form (decode / prefill, fixed / paged, live or
// not); the structure each family must show (Gemma-2's softcap chain and
// which layers are windowed, BLOOM's ALiBi slopes and Hq-headed mask,
// DeepSeek's YaRN tables, softmax scale, split key and MoE routing); the
// block-sparse family's primitive selection and mask evaluated against the
// formed ops BlockTopK and SelectedAttention by the oracle; and the config
// errors each family reports. The comparison with transformers itself is
// hf_test.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <variant>
#include <vector>

#include "ir/text.h"
#include "oracle/interp.h"
#include "oracle/random.h"
#include "trace/model.h"

using namespace poot;
using namespace poot::trace;

namespace {

const std::string kModels = std::string(POOT_SOURCE_DIR) + "/examples/models/";

ModelConfig config(const std::string& file) {
  auto cfg = loadConfig(kModels + file);
  REQUIRE_MESSAGE(cfg, (cfg ? "" : cfg.error().str()));
  return *cfg;
}

// The config text of an example with some fields replaced: `edits` is a list
// of (field, JSON value) pairs (added at the top when absent); the value ""
// stands for null, which the tracer reads as an absent field.
Expected<ModelConfig> edited(const std::string& file, std::vector<std::pair<std::string, std::string>> edits) {
  std::string src;
  {
    FILE* f = std::fopen((kModels + file).c_str(), "rb");
    REQUIRE(f);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) src.append(buf, n);
    std::fclose(f);
  }
  for (auto& [key, given] : edits) {
    std::string value = given.empty() ? "null" : given;
    std::string quoted = "\"" + key + "\":";
    size_t at = src.find(quoted);
    if (at == std::string::npos) {
      src.insert(src.find('{') + 1, quoted + " " + value + ",");
      continue;
    }
    // The value runs to the next ',' or '}' at depth 0.
    size_t start = at + quoted.size(), end = start;
    int depth = 0;
    for (; end < src.size(); ++end) {
      char ch = src[end];
      if (ch == '{' || ch == '[') ++depth;
      if (ch == '}' || ch == ']') {
        if (depth == 0) break;
        --depth;
      }
      if (ch == ',' && depth == 0) break;
    }
    src.replace(start, end - start, " " + value);
  }
  return parseConfig(src, file);
}

Graph traced(const ModelConfig& cfg, TraceOptions o) {
  auto g = traceModel(cfg, o);
  REQUIRE_MESSAGE(g, (g ? "" : g.error().str()));
  return *g;
}

TraceOptions prefill(int64_t tokens, int64_t capacity) {
  TraceOptions o;
  o.phase = Phase::Prefill;
  o.tokens = tokens;
  o.capacity = capacity;
  return o;
}

ValueId named(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].name == name) return ValueId(i);
  FAIL("no value named %" << name);
  return -1;
}

const Eqn& defOf(const Graph& g, ValueId v) {
  REQUIRE(g.value(v).def >= 0);
  return g.eqns[size_t(g.value(v).def)];
}

std::vector<double> constantValues(const Graph& g, ValueId v) {
  const Eqn& e = defOf(g, v);
  REQUIRE(e.op == Op::Constant);
  return std::get<std::vector<double>>(*e.attr("value"));
}

// Every Constant eqn whose scope is `scope` and whose single value is within
// `tol` of `want`.
int countConstants(const Graph& g, const std::string& scope, double want, double tol = 1e-12) {
  int n = 0;
  for (const Eqn& e : g.eqns) {
    if (e.op != Op::Constant || g.value(e.results[0]).name.rfind(scope, 0) != 0) continue;
    auto vals = std::get<std::vector<double>>(*e.attr("value"));
    if (vals.size() == 1 && std::abs(vals[0] - want) <= tol) ++n;
  }
  return n;
}

// The eqns that use v as an operand.
std::vector<const Eqn*> usersOf(const Graph& g, ValueId v) {
  std::vector<const Eqn*> out;
  for (const Eqn& e : g.eqns)
    if (std::find(e.operands.begin(), e.operands.end(), v) != e.operands.end()) out.push_back(&e);
  return out;
}

// The additive mask operand of the Add that follows layer `layer`'s scores.
std::string maskOfLayer(const Graph& g, int layer) {
  std::string scope = "layers." + std::to_string(layer) + ".attn.";
  for (const Eqn& e : g.eqns) {
    if (e.op != Op::Add || g.value(e.results[0]).name.rfind(scope, 0) != 0) continue;
    for (ValueId o : e.operands)
      if (g.value(o).name.rfind("mask", 0) == 0) return g.value(o).name;
  }
  return "";
}

double f(const Tensor& t, int64_t i) { return t.get(i); }

}  // namespace

TEST_CASE("families: the registry lists every family's model_type") {
  std::string types = supportedModelTypes();
  for (const char* t : {"bloom", "deepseek_v2", "gemma2", "llama", "poot_block_sparse"})
    CHECK_MESSAGE(types.find(t) != std::string::npos, t);
}

TEST_CASE("families: every example config traces and verifies in every form") {
  for (const char* file : {"tiny-gemma2.json", "tiny-bloom.json", "tiny-deepseek-v2.json", "tiny-sparse.json",
                           "tiny-qwen2.json", "tiny-mistral.json"}) {
    ModelConfig cfg = config(file);
    for (Phase phase : {Phase::Decode, Phase::Prefill})
      for (ops::KvLayout kv : {ops::KvLayout::Fixed, ops::KvLayout::Paged})
        for (bool live : {false, true}) {
          TraceOptions o;
          o.phase = phase;
          o.kv = kv;
          o.live = live;
          o.batch = kv == ops::KvLayout::Paged ? 2 : 1;
          o.tokens = phase == Phase::Decode ? 1 : 8;
          o.capacity = 64;
          auto g = traceModel(cfg, o);
          CHECK_MESSAGE(g, file << (phase == Phase::Decode ? " decode" : " prefill")
                                << (kv == ops::KvLayout::Paged ? " paged" : "") << (live ? " live" : "") << ": "
                                << (g ? "" : g.error().str()));
          if (g) CHECK(printGraph(*g) == printGraph(*traceModel(cfg, o)));  // deterministic
        }
    for (DType dt : {DType::BF16, DType::F16}) {  // two-byte traces type-check too
      TraceOptions o = prefill(8, 64);
      o.dtype = dt;
      auto g = traceModel(cfg, o);
      CHECK_MESSAGE(g, file << " " << dtypeName(dt) << ": " << (g ? "" : g.error().str()));
    }
  }
  for (const char* file : {"gemma-2-9b.json", "bloom-560m.json", "deepseek-v2-lite.json"}) {
    ModelConfig cfg = config(file);
    TraceOptions o;
    o.layers = 2;
    auto g = traceModel(cfg, o);
    CHECK_MESSAGE(g, file << ": " << (g ? "" : g.error().str()));
  }
}

TEST_CASE("families: gemma2 softcaps, scale, normalizer and alternating windows") {
  ModelConfig cfg = config("tiny-gemma2.json");
  Graph g = traced(cfg, prefill(8, 64));
  // Layer 0 is windowed (sliding_window 4), layer 1 is not: transformers'
  // default layer_types marks the even layers sliding.
  CHECK(maskOfLayer(g, 0) == "mask.window4");
  CHECK(maskOfLayer(g, 1) == "mask");
  // scale query_pre_attn_scalar^-0.5, then tanh(s / 10) * 10 before the mask.
  CHECK(countConstants(g, "layers.0.attn.", 1.0 / std::sqrt(24.0)) == 1);
  ValueId scores = named(g, "layers.0.attn.scores");
  const Eqn* scaled = usersOf(g, scores).at(0);
  const Eqn* div = usersOf(g, scaled->results[0]).at(0);
  REQUIRE(div->op == Op::Div);
  CHECK(constantValues(g, div->operands[1]) == std::vector<double>{10.0});
  const Eqn* tanh = usersOf(g, div->results[0]).at(0);
  CHECK(tanh->op == Op::Tanh);
  const Eqn* mul = usersOf(g, tanh->results[0]).at(0);
  CHECK(mul->op == Op::Mul);
  CHECK(usersOf(g, mul->results[0]).at(0)->op == Op::Add);
  // The final softcap 5 on the logits, and the sqrt(hidden) normalizer.
  const Eqn& last = defOf(g, named(g, "logits"));
  CHECK(last.op == Op::Mul);
  CHECK(constantValues(g, last.operands[1]) == std::vector<double>{5.0});
  CHECK(constantValues(g, named(g, "embed.normalizer")) == std::vector<double>{8.0});

  // layer_types, when given, decides instead of the parity rule.
  auto swapped = edited("tiny-gemma2.json", {{"layer_types", "[\"full_attention\", \"sliding_attention\"]"}});
  REQUIRE(swapped);
  Graph g2 = traced(*swapped, prefill(8, 64));
  CHECK(maskOfLayer(g2, 0) == "mask");
  CHECK(maskOfLayer(g2, 1) == "mask.window4");
  // A window at least the capacity hides nothing and is left out.
  Graph g3 = traced(cfg, prefill(4, 4));
  CHECK(maskOfLayer(g3, 0) == "mask");

  // The normalizer has the activation dtype, as transformers casts it.
  TraceOptions bf = prefill(4, 16);
  bf.dtype = DType::BF16;
  bf.layers = 1;
  Graph g4 = traced(config("gemma-2-9b.json"), bf);
  ValueId norm = named(g4, "embed.normalizer");
  CHECK(g4.type(norm).dtype == DType::BF16);
  CHECK(constantValues(g4, norm)[0] == doctest::Approx(std::sqrt(3584.0)));
  // Gemma-2-9B: softcap 50, scale 256^-0.5, layer 0 windowed by 4096 only
  // when the capacity exceeds it.
  TraceOptions big;
  big.layers = 2;
  big.capacity = 8192;
  Graph g5 = traced(config("gemma-2-9b.json"), big);
  CHECK(maskOfLayer(g5, 0) == "mask.window4096");
  CHECK(maskOfLayer(g5, 1) == "mask");
  CHECK(countConstants(g5, "layers.0.attn.", 50.0) == 1);
  CHECK(countConstants(g5, "layers.0.attn.", 1.0 / 16.0) == 1);
}

TEST_CASE("families: gemma2 config errors") {
  auto bad = edited("tiny-gemma2.json", {{"layer_types", "[\"full_attention\"]"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "field 'layer_types': has 1 entries for 2 layers");
  bad = edited("tiny-gemma2.json", {{"layer_types", "[\"full_attention\", \"chunked\"]"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "field 'layer_types': entry 'chunked' is not sliding_attention or full_attention");
  bad = edited("tiny-gemma2.json", {{"attn_logit_softcapping", "-1"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "field 'attn_logit_softcapping': expected a positive number or null");
  bad = edited("tiny-gemma2.json", {{"hidden_activation", "\"relu\""}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "field 'hidden_activation': activation 'relu' is not supported (supported: gelu_pytorch_tanh, gelu)");
  // Null softcaps switch them off.
  auto off = edited("tiny-gemma2.json", {{"attn_logit_softcapping", "null"}, {"final_logit_softcapping", "null"}});
  REQUIRE(off);
  Graph g = traced(*off, prefill(8, 64));
  CHECK(countConstants(g, "", 10.0) == 0);
  CHECK(countConstants(g, "", 5.0) == 0);
  CHECK(defOf(g, named(g, "logits")).op == Op::MatMul);
}

TEST_CASE("families: bloom alibi slopes, Hq-headed mask and fused qkv") {
  ModelConfig cfg = config("tiny-bloom.json");
  CHECK(cfg.numHeads == 6);
  CHECK(cfg.headDim == 16);
  CHECK(cfg.intermediateSize == 384);
  CHECK(cfg.tieWordEmbeddings);
  Graph g = traced(cfg, prefill(8, 64));
  // BLOOM's build_alibi_tensor for 6 heads: 2^(-8i/4) for i = 1..4, then the
  // odd powers 1, 3 of 2^(-8/8).
  ValueId alibi = named(g, "alibi");
  const Eqn& mul = defOf(g, alibi);
  std::vector<double> slopes = constantValues(g, mul.operands[0]);
  CHECK(slopes == std::vector<double>{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125});
  CHECK(ops::alibi_slopes(16)[15] == std::exp2(-8.0));
  // The mask both layers add has the query heads on its head axis.
  CHECK(maskOfLayer(g, 0) == "mask");
  CHECK(maskOfLayer(g, 1) == "mask");
  CHECK(g.type(named(g, "mask")).shape == Shape{1, 6, 8, 64});
  // query_key_value's 3H outputs are read as [n_head, 3, head_dim].
  const Eqn& q = defOf(g, named(g, "layers.0.attn.q"));
  const Eqn& slice = defOf(g, defOf(g, q.operands[0]).operands[0]);
  CHECK(slice.op == Op::Slice);
  CHECK(g.type(slice.operands[0]).shape == Shape{1, 8, 6, 3, 16});
  // Checkpoint names as BloomForCausalLM.save_pretrained writes them; tied head.
  named(g, "transformer.h.1.self_attention.query_key_value.bias");
  named(g, "transformer.word_embeddings_layernorm.weight");
  for (ValueId p : g.params) CHECK(g.value(p).name != "lm_head.weight");
}

TEST_CASE("families: bloom config spellings and errors") {
  auto both = edited("tiny-bloom.json", {{"num_attention_heads", "6"}, {"num_hidden_layers", "2"}});
  REQUIRE(both);
  auto clash = edited("tiny-bloom.json", {{"num_attention_heads", "4"}});
  REQUIRE_FALSE(clash);
  CHECK(clash.error().message == "field 'n_head': 6 disagrees with num_attention_heads 4");
  auto renamed = parseConfig(R"({"model_type": "bloom", "n_embed": 64, "num_attention_heads": 4,
                                  "num_hidden_layers": 1, "vocab_size": 32})",
                             "cfg.json");
  REQUIRE(renamed);
  CHECK(renamed->hiddenSize == 64);
  CHECK(renamed->numLayers == 1);
  auto missing = parseConfig(R"({"model_type": "bloom", "hidden_size": 64, "n_layer": 1, "vocab_size": 32})", "cfg.json");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().message == "field 'n_head': missing (or num_attention_heads), expected a positive integer");
  auto indivisible =
      parseConfig(R"({"model_type": "bloom", "hidden_size": 64, "n_head": 5, "n_layer": 1, "vocab_size": 32})", "c.json");
  REQUIRE_FALSE(indivisible);
  CHECK(indivisible.error().message == "field 'n_head': 5 does not divide hidden_size 64");
}

TEST_CASE("families: deepseek_v2 yarn, softmax scale and split key") {
  ModelConfig lite = config("deepseek-v2-lite.json");
  TraceOptions o;
  o.layers = 1;
  Graph g = traced(lite, o);
  // YaRN over the 64 rotary dims: factor 40, original 4096 positions, beta
  // 32 / 1 give the correction range [10, 23]: below it the plain frequency,
  // above it the frequency / 40, a linear blend between.
  std::vector<double> inv = constantValues(g, named(g, "rope.inv_freq"));
  REQUIRE(inv.size() == 32);
  for (int i = 0; i <= 10; ++i) CHECK(inv[size_t(i)] == doctest::Approx(std::pow(10000.0, -2.0 * i / 64)).epsilon(1e-12));
  for (int i = 23; i < 32; ++i)
    CHECK(inv[size_t(i)] == doctest::Approx(std::pow(10000.0, -2.0 * i / 64) / 40).epsilon(1e-12));
  double ramp = (16.0 - 10.0) / 13.0, base16 = std::pow(10000.0, -32.0 / 64);
  CHECK(inv[16] == doctest::Approx(base16 / 40 * ramp + base16 * (1 - ramp)).epsilon(1e-12));
  // mscale == mscale_all_dim: no factor on cos/sin; softmax scale
  // 192^-0.5 * (0.1 * 0.707 * ln 40 + 1)^2.
  CHECK(defOf(g, named(g, "rope.cos")).op == Op::Cos);
  double m = 0.1 * 0.707 * std::log(40.0) + 1.0;
  CHECK(countConstants(g, "layers.0.attn.", m * m / std::sqrt(192.0)) == 1);
  // The key is Concat(k_nope, Broadcast(k_pe)) with the shared part 64 wide,
  // and the rotary parts are interleaved pairs.
  const Eqn& key = defOf(g, named(g, "layers.0.attn.key"));
  REQUIRE(key.op == Op::Concat);
  REQUIRE(key.operands.size() == 2);
  CHECK(g.type(key.operands[0]).shape == Shape{1, 16, 256, 128});
  const Eqn& bc = defOf(g, key.operands[1]);
  CHECK(bc.op == Op::Broadcast);
  CHECK(g.type(bc.operands[0]).shape == Shape{1, 1, 256, 64});
  CHECK(g.type(key.results[0]).shape == Shape{1, 16, 256, 192});
  const Eqn& rope = defOf(g, named(g, "layers.0.attn.k_pe"));
  CHECK(rope.op == Op::Reshape);
  CHECK(g.type(rope.operands[0]).shape == Shape{1, 1, 1, 32, 2});
  // The value is 128 wide: the attention output is [B, H, L, 128].
  CHECK(g.type(named(g, "layers.0.attn.out")).shape == Shape{1, 16, 1, 128});

  // The tiny config: mscale 1 against mscale_all_dim 0.8 scales cos and sin.
  Graph t = traced(config("tiny-deepseek-v2.json"), prefill(8, 16));
  double ratio = (0.1 * std::log(4.0) + 1) / (0.1 * 0.8 * std::log(4.0) + 1);
  CHECK(countConstants(t, "", ratio) == 2);
  std::vector<double> tinyInv = constantValues(t, named(t, "rope.inv_freq"));
  REQUIRE(tinyInv.size() == 4);
  CHECK(tinyInv[0] == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(tinyInv[1] == doctest::Approx(0.0625).epsilon(1e-12));  // half-way in the ramp
  CHECK(tinyInv[2] == doctest::Approx(0.0025).epsilon(1e-12));
  CHECK(tinyInv[3] == doctest::Approx(0.00025).epsilon(1e-12));
}

TEST_CASE("families: deepseek_v2 moe routing evaluates to the top-k gate weights") {
  for (bool grouped : {false, true}) {
    auto cfg = grouped ? edited("tiny-deepseek-v2.json",
                                {{"topk_method", "\"group_limited_greedy\""}, {"n_group", "2"}, {"topk_group", "1"}})
                       : loadConfig(kModels + "tiny-deepseek-v2.json");
    REQUIRE(cfg);
    Graph g = traced(*cfg, prefill(8, 16));
    auto params = completeParams(g, {}, 7);
    auto ev = evaluate(g, params);
    REQUIRE_MESSAGE(ev, (ev ? "" : ev.error().str()));
    const Tensor& scores = ev->values[size_t(named(g, "layers.1.mlp.moe.scores"))];
    const Tensor& w = ev->values[size_t(named(g, "layers.1.mlp.moe.routing_weights"))];
    REQUIRE(w.shape() == Shape{1, 8, 4});
    for (int64_t row = 0; row < 8; ++row) {
      std::vector<std::pair<double, int>> s;
      for (int e = 0; e < 4; ++e) s.push_back({f(scores, row * 4 + e), e});
      std::vector<int> allowed = {0, 1, 2, 3};
      if (grouped) {  // the group (of 2) holding the best expert
        int best = std::max_element(s.begin(), s.end())->second;
        allowed = best < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
      }
      std::vector<std::pair<double, int>> cand;
      for (int e : allowed) cand.push_back(s[size_t(e)]);
      std::sort(cand.rbegin(), cand.rend());
      for (int e = 0; e < 4; ++e) {
        bool chosen = cand[0].second == e || cand[1].second == e;
        double want = chosen ? 1.5 * s[size_t(e)].first : 0.0;
        CHECK(f(w, row * 4 + e) == doctest::Approx(want).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("families: deepseek_v2 config errors") {
  auto bad = edited("tiny-deepseek-v2.json", {{"norm_topk_prob", "true"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.rfind("field 'norm_topk_prob': true is not supported", 0) == 0);
  bad = edited("tiny-deepseek-v2.json", {{"topk_method", "\"noaux_tc\""}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "field 'topk_method': 'noaux_tc' is not supported (supported: greedy, group_limited_greedy)");
  bad = edited("tiny-deepseek-v2.json", {{"num_key_value_heads", "2"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.rfind("field 'num_key_value_heads': must equal num_attention_heads", 0) == 0);
  bad = edited("tiny-deepseek-v2.json", {{"num_experts_per_tok", "5"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "field 'num_experts_per_tok': 5 is more than n_routed_experts 4");
  bad = edited("tiny-deepseek-v2.json", {{"rope_scaling", "{\"type\": \"dynamic\", \"factor\": 2}"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "field 'rope_scaling.type': rope type 'dynamic' is not supported for model_type deepseek_v2 (supported: "
        "default, yarn)");
  // q_lora_rank set: q_a_proj -> q_a_layernorm -> q_b_proj.
  auto lora = edited("tiny-deepseek-v2.json", {{"q_lora_rank", "24"}});
  REQUIRE(lora);
  Graph g = traced(*lora, prefill(8, 16));
  CHECK(g.type(named(g, "model.layers.0.self_attn.q_b_proj.weight")).shape == Shape{4 * 24, 24});
}

namespace {

// Evaluates one formed op on tensors taken from an evaluation.
std::vector<Tensor> evalFormed(Op op, const std::vector<Tensor>& args, Attrs attrs) {
  Builder b("formed");
  std::vector<ValueId> ins;
  std::map<std::string, Tensor> params;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string n = "a" + std::to_string(i);
    ins.push_back(b.input(n, args[i].type));
    params[n] = args[i];
  }
  std::vector<ValueId> outs = b.ops(op, ins, std::move(attrs));
  for (ValueId o : outs) b.output(o);
  auto g = b.finish();
  REQUIRE_MESSAGE(g, (g ? "" : g.error().str()));
  auto ev = evaluate(*g, params);
  REQUIRE_MESSAGE(ev, (ev ? "" : ev.error().str()));
  std::vector<Tensor> out;
  for (ValueId o : outs) out.push_back(ev->outputs.at(g->value(o).name));
  return out;
}

Tensor positionsOf(const Tensor& positions, int64_t batch) {
  int64_t L = positions.size();
  Tensor q(Type{DType::I32, {batch, L}});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < L; ++j) q.set(b * L + j, positions.get(j));
  return q;
}

}  // namespace

TEST_CASE("families: the block-sparse primitives equal BlockTopK and SelectedAttention") {
  ModelConfig cfg = config("tiny-sparse.json");
  struct Case {
    int64_t tokens, capacity, pos;
  };
  for (Case k : {Case{32, 64, 32}, Case{1, 64, 50}, Case{16, 64, 0}, Case{1, 128, 127}}) {
    CAPTURE(k.tokens);
    CAPTURE(k.pos);
    TraceOptions o = prefill(k.tokens, k.capacity);
    if (k.tokens == 1) o.phase = Phase::Decode;
    Graph g = traced(cfg, o);
    Tensor pos(Type{DType::I32, {}});
    pos.set(0, double(k.pos));
    auto ev = evaluate(g, completeParams(g, {{"pos", pos}}, 11));
    REQUIRE_MESSAGE(ev, (ev ? "" : ev.error().str()));
    auto value = [&](const std::string& n) { return ev->values[size_t(named(g, n))]; };
    Tensor qpos = positionsOf(value("positions"), 1);
    for (int layer = 0; layer < 2; ++layer) {
      std::string p = "layers." + std::to_string(layer) + ".attn.";
      // The selection: ids equal BlockTopK(scores, qpos){k=2, block=16}.
      Tensor scores = value(p + "index.scores");
      Tensor ids = value(p + "index.ids");
      Tensor formedIds = evalFormed(Op::BlockTopK, {scores, qpos}, {{"k", int64_t(2)}, {"block", int64_t(16)}})[0];
      REQUIRE(ids.type == formedIds.type);
      CHECK(ids.bytes == formedIds.bytes);
      // The attention equals SelectedAttention over the same q, k and v.
      Tensor q = value(p + "rope");
      Tensor kc = value(p + "k_cache"), vc = value(p + "v_cache");
      Tensor out = value(p + "out");
      Tensor formed = evalFormed(Op::SelectedAttention, {q, kc, vc, ids, qpos},
                                 {{"scale", 0.25}, {"n_rep", int64_t(2)}, {"block", int64_t(16)}})[0];
      REQUIRE(formed.type == out.type);
      double maxErr = 0;
      for (int64_t i = 0; i < out.size(); ++i) maxErr = std::max(maxErr, std::abs(out.get(i) - formed.get(i)));
      CHECK(maxErr <= 1e-5);
      // Each row sees at most (K + 1) * block keys, and some row sees a
      // selected block once there are completed ones.
      Tensor visible = value(p + "index.visible");
      int64_t cap = k.capacity, widest = 0;
      for (int64_t j = 0; j < k.tokens; ++j) {
        int64_t n = 0;
        for (int64_t t = 0; t < cap; ++t) n += visible.get(j * cap + t) != 0;
        widest = std::max(widest, n);
        CHECK(n <= 3 * 16);
      }
      int64_t lastPos = k.pos + k.tokens - 1;
      if (lastPos / 16 >= 1) CHECK(widest > lastPos % 16 + 1);
    }
  }
}

TEST_CASE("families: sparse indexer config and capacity errors") {
  ModelConfig cfg = config("tiny-sparse.json");
  auto g = traceModel(cfg, prefill(8, 24));
  REQUIRE_FALSE(g);
  CHECK(g.error().kind == ErrorKind::Usage);
  CHECK(g.error().message == "--capacity 24 must be a multiple of index_block_size 16");
  g = traceModel(cfg, prefill(8, 16));
  REQUIRE_FALSE(g);
  CHECK(g.error().message == "--capacity 16 holds 1 blocks, fewer than index_topk 2");
  auto bad = edited("tiny-sparse.json", {{"index_topk", ""}});
  REQUIRE_FALSE(bad);
  auto window = edited("tiny-sparse.json", {{"sliding_window", "8"}});
  REQUIRE_FALSE(window);
  CHECK(window.error().message == "field 'sliding_window': a sliding window is not supported with the block indexer");
}

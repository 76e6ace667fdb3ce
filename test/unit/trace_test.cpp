// Unit tests of the tracer (lib/trace): the Builder's typing, naming and
// error rules; every traced variant of the Llama family verifies; the
// structure the seed fixes (one DynamicUpdateSlice per cache per layer, the
// paged ScatterUpdate and Gather, the guard's witness declared a validation,
// the slots' ranges, the interface names tokens/pos/logits, the exact
// attention chain); config errors by their exact messages; both rope
// spellings trace the same graph; the host-side rope and ALiBi numbers; and,
// with the oracle, the numbers: a decode step at position t gives row t of a
// prefill over the same tokens, a paged graph equals the fixed one under an
// equivalent slot map, a live graph ignores NaN in unused cache rows, and
// each primitive decomposition equals the formed op (Attention, Rope) the
// compiler substitutes for it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "ir/io.h"
#include "ir/text.h"
#include "oracle/interp.h"
#include "oracle/random.h"
#include "testing.h"
#include "trace/builder.h"
#include "trace/model.h"
#include "trace/ops.h"

using namespace poot;
using namespace poot::trace;

namespace {

ModelConfig tinyConfig() { return testing::loadExampleConfig("tiny-llama.json"); }

// The tiny config with some fields replaced (a JSON fragment of members).
std::string tinyWith(const std::string& members) {
  return "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128, "
         "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, "
         "\"vocab_size\": 256" +
         (members.empty() ? "" : ", " + members) + "}";
}

Graph traced(const ModelConfig& cfg, const TraceOptions& opts) {
  auto g = traceModel(cfg, opts);
  REQUIRE_MESSAGE(g, (g ? "" : g.error().str()));
  REQUIRE(verify(*g));
  return g.take();
}

TraceOptions options(Phase phase, ops::KvLayout kv, bool live, int64_t batch = 1) {
  TraceOptions o;
  o.phase = phase;
  o.kv = kv;
  o.live = live;
  o.batch = batch;
  o.tokens = phase == Phase::Prefill ? 8 : 1;
  o.capacity = 64;
  return o;
}

std::vector<TraceOptions> allVariants() {
  std::vector<TraceOptions> out;
  for (Phase ph : {Phase::Decode, Phase::Prefill})
    for (ops::KvLayout kv : {ops::KvLayout::Fixed, ops::KvLayout::Paged})
      for (bool live : {false, true})
        for (int64_t batch : {1, 3}) out.push_back(options(ph, kv, live, batch));
  return out;
}

std::string describe(const TraceOptions& o) {
  return std::string(o.phase == Phase::Decode ? "decode" : "prefill") +
         (o.kv == ops::KvLayout::Paged ? " paged" : " fixed") + (o.live ? " live" : "") + " batch " +
         std::to_string(o.batch);
}

int count(const Graph& g, Op op) {
  return int(std::count_if(g.eqns.begin(), g.eqns.end(), [&](const Eqn& e) { return e.op == op; }));
}

const Value* find(const Graph& g, const std::string& name) {
  for (const Value& v : g.values)
    if (v.name == name) return &v;
  return nullptr;
}

ValueId idOf(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].name == name) return ValueId(i);
  return -1;
}

std::string configError(const std::string& text) {
  auto cfg = parseConfig(text, "config.json");
  REQUIRE_FALSE(cfg);
  return cfg.error().str();
}

}  // namespace

TEST_CASE("trace builder: result types come from the type rules, names from scopes") {
  Builder b("g");
  ValueId x = b.input("x", Type{DType::F32, {2, 3}});
  ValueId y;
  {
    Scope s(b, "layers.0");
    Scope t(b, "attn");
    y = b.transpose(x, {1, 0});
    ValueId z = b.transpose(y, {1, 0});
    CHECK(b.graph().value(y).name == "layers.0.attn.transpose");
    CHECK(b.graph().value(z).name == "layers.0.attn.transpose.1");
    b.name(z, "back");
    CHECK(b.graph().value(z).name == "layers.0.attn.back");
    b.output(b.nameExact(b.add(z, x), "sum"));
  }
  CHECK(b.type(y) == Type{DType::F32, {3, 2}});
  CHECK(b.scope().empty());
  ValueId r = b.reduceSum(x, -1, false);
  CHECK(b.graph().value(r).name == "reducesum");
  CHECK(b.type(r) == Type{DType::F32, {2}});
  auto g = b.finish();
  REQUIRE(g);
  CHECK(printGraph(*g).find("%sum = Add(%layers.0.attn.back, %x) : f32[2,3]") != std::string::npos);
}

TEST_CASE("trace builder: the first type-rule refusal is kept and returned by finish") {
  Builder b("g", "model.json");
  ValueId a = b.input("a", Type{DType::F32, {2, 3}});
  ValueId c = b.input("c", Type{DType::F32, {4, 5}});
  ValueId bad = b.matmul(a, c);           // contracted dimensions differ
  ValueId worse = b.add(bad, b.scalar(1, DType::I32));  // a later refusal, ignored
  b.output(worse);
  CHECK_FALSE(b.ok());
  auto g = b.finish();
  REQUIRE_FALSE(g);
  CHECK(g.error().str() ==
        "model.json: error: tracing matmul: MatMul: contracted dimensions differ: f32[2,3] x f32[4,5]");
}

TEST_CASE("trace builder: a name declared twice and a taken exact name are errors") {
  Builder b("g");
  b.weight("w", Type{DType::F32, {2}});
  b.weight("w", Type{DType::F32, {2}});
  auto g = b.finish();
  REQUIRE_FALSE(g);
  CHECK(g.error().message == "tracing: the name 'w' is declared twice");

  Builder b2("g");
  ValueId x = b2.input("logits", Type{DType::F32, {2}});
  ValueId n = b2.neg(x);
  b2.nameExact(n, "logits");
  CHECK(b2.error()->message == "tracing: the name 'logits' is already taken");
}

TEST_CASE("trace builder: an unverifiable graph is refused by finish") {
  Builder b("g");
  b.state("s", Type{DType::F32, {2}});
  ValueId x = b.input("x", Type{DType::F32, {2}});
  b.output(x);
  auto g = b.finish();
  REQUIRE_FALSE(g);
  CHECK(g.error().message == "traced graph does not verify: state %s has no state_out");
}

TEST_CASE("trace: every llama variant traces, verifies and round-trips through text") {
  ModelConfig cfg = tinyConfig();
  for (const TraceOptions& o : allVariants()) {
    CAPTURE(describe(o));
    Graph g = traced(cfg, o);
    std::string text = printGraph(g);
    auto back = parseGraph(text, "t.pg");
    REQUIRE(back);
    CHECK(printGraph(*back) == text);
    auto again = traceModel(cfg, o);  // deterministic
    REQUIRE(again);
    CHECK(printGraph(*again) == text);
  }
}

TEST_CASE("trace: the interface is tokens, pos and logits, pos spans [0, cap - L], a paged step's one a row") {
  ModelConfig cfg = tinyConfig();
  for (const TraceOptions& o : allVariants()) {
    CAPTURE(describe(o));
    Graph g = traced(cfg, o);
    int64_t L = o.phase == Phase::Decode ? 1 : 8;
    const Value* tokens = find(g, "tokens");
    REQUIRE(tokens);
    CHECK(tokens->storage == Storage::Input);
    CHECK(tokens->type == Type{DType::I32, {o.batch, L}});
    const Value* pos = find(g, "pos");
    REQUIRE(pos);
    CHECK(pos->storage == Storage::Slot);
    CHECK(pos->type == Type{DType::I32, o.kv == ops::KvLayout::Paged ? Shape{o.batch} : Shape{}});
    CHECK(pos->lo == 0);
    CHECK(pos->hi == 64 - L);
    REQUIRE(g.outputs.size() == 1);
    CHECK(g.value(g.outputs[0].value).name == "logits");
    CHECK(g.type(g.outputs[0].value) == Type{DType::F32, {o.batch, L, 256}});
  }
}

TEST_CASE("trace: fixed caches take one DynamicUpdateSlice each per layer") {
  ModelConfig cfg = tinyConfig();
  for (Phase ph : {Phase::Decode, Phase::Prefill}) {
    Graph g = traced(cfg, options(ph, ops::KvLayout::Fixed, false, 2));
    CHECK(count(g, Op::DynamicUpdateSlice) == 4);
    CHECK(count(g, Op::ScatterUpdate) == 0);
    CHECK(g.stateOuts.size() == 4);
    for (const char* name : {"layers.0.k_cache", "layers.0.v_cache", "layers.1.k_cache", "layers.1.v_cache"}) {
      CAPTURE(name);
      ValueId s = idOf(g, name);
      REQUIRE(s >= 0);
      CHECK(g.type(s) == Type{DType::F32, {2, 2, 64, 16}});
      int writes = 0;
      for (const Eqn& e : g.eqns)
        if (e.op == Op::DynamicUpdateSlice && e.operands[0] == s) {
          ++writes;
          CHECK(g.value(e.operands[2]).name == "pos");
          CHECK(std::get<int64_t>(*e.attr("axis")) == 2);
        }
      CHECK(writes == 1);
    }
  }
}

TEST_CASE("trace: paged graphs scatter through write and gather through read") {
  ModelConfig cfg = tinyConfig();
  for (Phase ph : {Phase::Decode, Phase::Prefill}) {
    Graph g = traced(cfg, options(ph, ops::KvLayout::Paged, false, 2));
    int64_t L = ph == Phase::Decode ? 1 : 8;
    CHECK(count(g, Op::DynamicUpdateSlice) == 0);
    CHECK(count(g, Op::ScatterUpdate) == 4);
    CHECK(count(g, Op::Gather) == 4 + 1);  // the pools, and the embedding
    const Value* write = find(g, "write");
    const Value* read = find(g, "read");
    REQUIRE(write);
    REQUIRE(read);
    CHECK(write->type == Type{DType::I32, {2 * L}});
    CHECK(write->lo == -1);
    CHECK(write->hi == 2 * 64 - 1);
    CHECK(read->type == Type{DType::I32, {2, 64}});
    CHECK(read->lo == 0);
    CHECK(read->hi == 2 * 64 - 1);
    const Value* pool = find(g, "layers.1.v_pool");
    REQUIRE(pool);
    CHECK(pool->type == Type{DType::F32, {128, 2, 16}});
    for (const Eqn& e : g.eqns) {
      if (e.op == Op::ScatterUpdate) CHECK(g.value(e.operands[1]).name == "write");
      if (e.op == Op::Gather && g.value(e.operands[0]).name != "model.embed_tokens.weight") {
        CHECK(g.value(e.operands[1]).name == "read");
        CHECK(g.type(e.results[0]) == Type{DType::F32, {2, 64, 2, 16}});
      }
    }
  }
}

TEST_CASE("trace: a live step guards len = pos + L and declares the witness a validation") {
  ModelConfig cfg = tinyConfig();
  for (Phase ph : {Phase::Decode, Phase::Prefill})
    for (ops::KvLayout kv : {ops::KvLayout::Fixed, ops::KvLayout::Paged}) {
      Graph g = traced(cfg, options(ph, kv, true, 2));
      REQUIRE(count(g, Op::IndexGuard) == 1);
      const Eqn& guard = *std::find_if(g.eqns.begin(), g.eqns.end(), [](const Eqn& e) { return e.op == Op::IndexGuard; });
      CHECK(std::get<int64_t>(*guard.attr("lo")) == 1);
      CHECK(std::get<int64_t>(*guard.attr("hi")) == 64);
      CHECK(g.type(guard.operands[0]) == Type{DType::I32, {2}});
      REQUIRE(g.validations.size() == 1);
      CHECK(g.validations[0].value == guard.results[1]);
      // K and V rows selected to zero (two per layer) and the scores to -inf (one per layer).
      CHECK(count(g, Op::Select) >= 3 * 2);
    }
  Graph plain = traced(cfg, options(Phase::Decode, ops::KvLayout::Fixed, false));
  CHECK(count(plain, Op::IndexGuard) == 0);
  CHECK(plain.validations.empty());
}

TEST_CASE("trace: layer 1 attention is the seed's chain, eqn for eqn") {
  // The mask is built once (in layer 0) and shared, so layer 1 shows the chain alone.
  Graph g = traced(tinyConfig(), options(Phase::Decode, ops::KvLayout::Fixed, false));
  std::vector<Op> chain;
  bool in = false;
  for (const Eqn& e : g.eqns) {
    if (e.op == Op::DynamicUpdateSlice && g.value(e.operands[0]).name == "layers.1.k_cache") in = true;
    if (!in) continue;
    chain.push_back(e.op);
    if (e.op == Op::MatMul && g.value(e.results[0]).name == "layers.1.attn.out") break;
  }
  std::vector<Op> want = {Op::DynamicUpdateSlice, Op::DynamicUpdateSlice, Op::Reshape, Op::Broadcast, Op::Reshape,
                          Op::Reshape, Op::Broadcast, Op::Reshape, Op::Transpose, Op::MatMul, Op::Constant,
                          Op::Mul, Op::Add, Op::ReduceMax, Op::Sub, Op::Exp, Op::ReduceSum, Op::Div, Op::MatMul};
  CHECK(chain == want);
  const Value* mask = find(g, "mask");
  REQUIRE(mask);
  CHECK(mask->type == Type{DType::F32, {1, 1, 1, 64}});
}

TEST_CASE("trace: checkpoint weight names, qwen2 biases and tied embeddings") {
  Graph llama = traced(tinyConfig(), options(Phase::Decode, ops::KvLayout::Fixed, false));
  for (const char* w : {"model.embed_tokens.weight", "model.layers.1.self_attn.q_proj.weight",
                        "model.layers.1.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight",
                        "model.layers.0.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"}) {
    CAPTURE(w);
    const Value* v = find(llama, w);
    REQUIRE(v);
    CHECK(v->storage == Storage::Weight);
  }
  CHECK_FALSE(find(llama, "model.layers.0.self_attn.q_proj.bias"));

  auto qwen = parseConfig(tinyWith("\"model_type\": \"qwen2\", \"tie_word_embeddings\": true"), "q.json");
  // a repeated key: nlohmann keeps the last one, so model_type is qwen2
  REQUIRE(qwen);
  CHECK(qwen->modelType == "qwen2");
  Graph g = traced(*qwen, options(Phase::Decode, ops::KvLayout::Fixed, false));
  CHECK(find(g, "model.layers.0.self_attn.q_proj.bias"));
  CHECK(find(g, "model.layers.0.self_attn.v_proj.bias"));
  CHECK_FALSE(find(g, "model.layers.0.self_attn.o_proj.bias"));
  CHECK_FALSE(find(g, "lm_head.weight"));
}

TEST_CASE("trace: a sliding window narrower than the capacity is masked in the graph") {
  auto cfg = parseConfig(tinyWith("\"sliding_window\": 16"), "w.json");
  REQUIRE(cfg);
  CHECK(cfg->slidingWindow == 16);
  Graph g = traced(*cfg, options(Phase::Prefill, ops::KvLayout::Fixed, false));
  CHECK(find(g, "mask.window16"));
  CHECK(count(g, Op::Gt) == 1);
  auto off = parseConfig(tinyWith("\"sliding_window\": 16, \"use_sliding_window\": false"), "w.json");
  REQUIRE(off);
  CHECK_FALSE(off->slidingWindow);
  auto wide = parseConfig(tinyWith("\"sliding_window\": 4096"), "w.json");
  REQUIRE(wide);
  CHECK(count(traced(*wide, options(Phase::Prefill, ops::KvLayout::Fixed, false)), Op::Gt) == 0);
}

TEST_CASE("trace: qwen2 and qwen3 slide only the layers layer_types or max_window_layers name") {
  auto windowed = [](const std::string& members) {
    auto cfg = parseConfig(tinyWith("\"model_type\": \"qwen3\", \"sliding_window\": 16, " + members), "q.json");
    REQUIRE_MESSAGE(cfg, (cfg ? "" : cfg.error().str()));
    return count(traced(*cfg, options(Phase::Prefill, ops::KvLayout::Fixed, false)), Op::Gt);
  };
  // The configs' default (28) leaves both layers of the tiny model full.
  CHECK(windowed("\"use_sliding_window\": true") == 0);
  CHECK(windowed("\"use_sliding_window\": true, \"max_window_layers\": 1") == 1);
  CHECK(windowed("\"use_sliding_window\": true, \"max_window_layers\": 2") == 0);
  CHECK(windowed("\"use_sliding_window\": false, \"max_window_layers\": 0") == 0);
  CHECK(windowed("\"use_sliding_window\": true, \"layer_types\": [\"full_attention\", \"sliding_attention\"]") == 1);
  // Which layer: the window mask is read by layer 1's attention only.
  auto cfg = parseConfig(tinyWith("\"model_type\": \"qwen2\", \"sliding_window\": 16, \"use_sliding_window\": true, "
                                  "\"max_window_layers\": 1"),
                         "q.json");
  REQUIRE(cfg);
  Graph g = traced(*cfg, options(Phase::Prefill, ops::KvLayout::Fixed, false));
  const Value* mask = find(g, "mask.window16");
  REQUIRE(mask);
  std::vector<std::string> readers;
  for (const Eqn& e : g.eqns)
    for (ValueId v : e.operands)
      if (&g.value(v) == mask) readers.push_back(g.value(e.results[0]).name);
  REQUIRE(readers.size() == 1);
  CHECK(readers[0].rfind("layers.1.", 0) == 0);
}

TEST_CASE("trace: qwen3 config errors name layer_types") {
  CHECK(configError(tinyWith("\"model_type\": \"qwen3\", \"layer_types\": [\"full_attention\"]")) ==
        "config.json: error: field 'layer_types': has 1 entries for 2 layers");
  CHECK(configError(tinyWith("\"model_type\": \"qwen3\", \"layer_types\": [\"full_attention\", \"local\"]")) ==
        "config.json: error: field 'layer_types': entry 'local' is not sliding_attention or full_attention");
}

TEST_CASE("trace: config errors name the field") {
  CHECK(configError(tinyWith("\"num_attention_heads\": 0")) ==
        "config.json: error: field 'num_attention_heads': expected a positive integer");
  CHECK(configError(tinyWith("\"num_attention_heads\": \"4\"")) ==
        "config.json: error: field 'num_attention_heads': expected a positive integer");
  CHECK(configError("{\"model_type\": \"llama\"}") ==
        "config.json: error: field 'hidden_size': missing, expected a positive integer");
  CHECK(configError(tinyWith("\"num_key_value_heads\": 3")) ==
        "config.json: error: field 'num_key_value_heads': 3 does not divide num_attention_heads 4");
  CHECK(configError(tinyWith("\"rms_norm_eps\": -1")) ==
        "config.json: error: field 'rms_norm_eps': expected a positive number");
  CHECK(configError(tinyWith("\"tie_word_embeddings\": 1")) ==
        "config.json: error: field 'tie_word_embeddings': expected true or false");
  CHECK(configError(tinyWith("\"hidden_act\": \"relu\"")) ==
        "config.json: error: field 'hidden_act': activation 'relu' is not supported (supported: silu, gelu, "
        "gelu_pytorch_tanh)");
  CHECK(configError("{\"hidden_size\": 64}") ==
        "config.json: error: field 'model_type': missing, expected a string");
  CHECK(configError("{\"model_type\": \"gpt2\"}") ==
        "config.json: error: field 'model_type': unsupported model type 'gpt2' (supported: " +
            supportedModelTypes() + ")");
  for (const char* t : {"llama", "mistral", "qwen2"}) CHECK(supportedModelTypes().find(t) != std::string::npos);
  CHECK(configError(tinyWith("\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}")) ==
        "config.json: error: field 'rope_scaling.rope_type': rope type 'yarn' is not supported for model_type "
        "llama (supported: default, llama3)");
  CHECK(configError(tinyWith("\"rope_scaling\": {\"type\": \"llama3\", \"factor\": 8.0}")) ==
        "config.json: error: field 'rope_scaling.low_freq_factor': missing, expected a positive number");
  CHECK(configError(tinyWith("\"rope_scaling\": 2")) ==
        "config.json: error: field 'rope_scaling': expected an object");
  CHECK(configError("[1, 2]") == "config.json: error: expected a JSON object at the top level");
  std::string bad = configError("{\n  \"model_type\": \"llama\",\n  \"hidden_size\": ,\n}");
  CHECK(bad.rfind("config.json:3:", 0) == 0);
  CHECK(bad.find("error: invalid JSON: ") != std::string::npos);
}

TEST_CASE("trace: a config past the host memory budget is refused, not traced until memory runs out") {
  // hidden_size 2^40 over 4 heads: a rotary table of 2^37 frequencies (1 TiB).
  std::string huge = configError(
      "{\"model_type\": \"llama\", \"hidden_size\": 1099511627776, \"intermediate_size\": 128, "
      "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"vocab_size\": 256}");
  CHECK(huge.rfind("config.json: error: the rotary frequency table of head_dim 274877906944 needs 1099511627776 bytes of "
                   "host memory, more than the budget of ",
                   0) == 0);
  // A billion layers: refused once the first is traced.
  auto deep = parseConfig(
      "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128, "
      "\"num_hidden_layers\": 1000000000, \"num_attention_heads\": 4, \"vocab_size\": 256}",
      "deep.json");
  REQUIRE(deep);
  auto g = traceModel(*deep, options(Phase::Decode, ops::KvLayout::Fixed, false));
  REQUIRE(!g);
  CHECK(g.error().kind == ErrorKind::Memory);
  CHECK(g.error().message.rfind("tracing (1000000000 layers of ", 0) == 0);
  // Under a stated budget the builder stops appending at it.
  testing::HostBudget budget("20000");
  Builder b("g");
  ValueId x = b.input("x", Type{DType::F32, {4}});
  for (int i = 0; i < 1000; ++i) x = b.neg(x);
  CHECK(x == kNone);
  CHECK(b.graph().eqns.size() < 100);
  REQUIRE(!b.ok());
  CHECK(b.error()->kind == ErrorKind::Memory);
  CHECK(b.error()->message.find("more than the budget of 20000 bytes (POOT_HOST_MEMORY_BYTES)") != std::string::npos);
  CHECK(!b.finish());
}

TEST_CASE("trace: a missing config file is an io error") {
  auto cfg = loadConfig("/nonexistent/config.json");
  REQUIRE_FALSE(cfg);
  CHECK(cfg.error().kind == ErrorKind::Io);
}

TEST_CASE("trace: bad options are usage errors") {
  ModelConfig cfg = tinyConfig();
  auto usage = [&](TraceOptions o) {
    auto g = traceModel(cfg, o);
    REQUIRE_FALSE(g);
    CHECK(g.error().kind == ErrorKind::Usage);
    return g.error().message;
  };
  TraceOptions o;
  o.layers = 3;
  CHECK(usage(o) == "--layers 3 is more than the model's 2 layers");
  o = {};
  o.tokens = 4;
  CHECK(usage(o) == "--tokens must be 1 for decode, got 4 (use --phase prefill)");
  o = {};
  o.phase = Phase::Prefill;
  o.tokens = 32;
  o.capacity = 16;
  CHECK(usage(o) == "--tokens 32 is more than the capacity 16");
  o = {};
  o.kv = ops::KvLayout::Paged;
  o.capacity = 40;
  CHECK(usage(o) == "--capacity 40 must be a multiple of the paged block size 16");
  o = {};
  o.batch = 0;
  CHECK(usage(o) == "--batch must be at least 1, got 0");
  // 0 given is checked as 0, never read as "the default".
  o = {};
  o.layers = 0;
  CHECK(usage(o) == "--layers must be at least 1, got 0");
  o = {};
  o.capacity = 0;
  CHECK(usage(o) == "--capacity must be at least 1, got 0");
  o = {};
  o.phase = Phase::Prefill;
  o.tokens = 0;
  CHECK(usage(o) == "--tokens must be at least 1, got 0");
  // A mixed step: paged, as many tokens as sequences at least; its tokens
  // may outnumber the capacity (they belong to several sequences).
  o = {};
  o.phase = Phase::Mixed;
  CHECK(usage(o) == "--phase mixed needs --kv paged: its tokens read their sequences' blocks");
  o.kv = ops::KvLayout::Paged;
  o.batch = 5;
  o.tokens = 4;
  CHECK(usage(o) == "--batch 5 sequences of a mixed step need at least as many --tokens, got 4");
  o.batch = 0;
  CHECK(usage(o) == "--batch must be at least 1, got 0");
  o.batch = 2;
  o.tokens = 40;
  o.capacity = 32;
  auto g = traceModel(cfg, o);
  REQUIRE_MESSAGE(g, (g ? "" : g.error().str()));
  CHECK(g->name == "llama_mixed");
}

TEST_CASE("trace: rope_parameters and rope_theta + rope_scaling trace the same graph") {
  std::string scaling =
      "\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
      "\"original_max_position_embeddings\": 8192";
  auto old = parseConfig(tinyWith("\"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", " +
                                  scaling + "}"),
                         "a.json");
  auto neu = parseConfig(tinyWith("\"rope_parameters\": {\"rope_type\": \"llama3\", \"rope_theta\": 500000.0, " +
                                  scaling + "}"),
                         "b.json");
  REQUIRE(old);
  REQUIRE(neu);
  CHECK(old->rope.theta == 500000.0);
  CHECK(neu->rope.theta == 500000.0);
  CHECK(neu->rope.type == "llama3");
  TraceOptions o = options(Phase::Prefill, ops::KvLayout::Fixed, false);
  CHECK(printGraph(traced(*old, o)) == printGraph(traced(*neu, o)));
  auto plain = parseConfig(tinyWith("\"rope_theta\": 500000.0"), "c.json");
  REQUIRE(plain);
  CHECK(printGraph(traced(*plain, o)) != printGraph(traced(*old, o)));
  auto def = parseConfig(tinyWith("\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 500000.0}"),
                         "d.json");
  REQUIRE(def);
  CHECK(printGraph(traced(*plain, o)) == printGraph(traced(*def, o)));
}

TEST_CASE("trace: rope inv_freq and llama3 scaling on the host") {
  std::vector<double> inv = ops::rope_inv_freq(10000.0, 8);
  REQUIRE(inv.size() == 4);
  CHECK(inv[0] == 1.0);
  CHECK(inv[1] == doctest::Approx(0.1));
  CHECK(inv[2] == doctest::Approx(0.01));
  CHECK(inv[3] == doctest::Approx(0.001));
  // Llama 3.1 (factor 8, low 1, high 4, original 8192): wavelengths under
  // 2048 keep their frequency, over 8192 divide it by 8, between them blend.
  std::vector<double> f = {1.0, 2 * std::numbers::pi / 4096, 2 * std::numbers::pi / 16384};
  std::vector<double> s = ops::rope_llama3_scale(f, 8, 1, 4, 8192);
  CHECK(s[0] == 1.0);
  double smooth = (8192.0 / 4096 - 1) / (4 - 1);
  CHECK(s[1] == doctest::Approx((1 - smooth) * f[1] / 8 + smooth * f[1]));
  CHECK(s[2] == doctest::Approx(f[2] / 8));
}

TEST_CASE("trace: ALiBi slopes follow the standard geometric sequence") {
  std::vector<double> s8 = ops::alibi_slopes(8);
  REQUIRE(s8.size() == 8);
  for (int i = 0; i < 8; ++i) CHECK(s8[size_t(i)] == std::exp2(-(i + 1)));
  std::vector<double> s12 = ops::alibi_slopes(12);  // 8 of base 2^-1, then 4 of base 2^-0.5 at odd powers
  REQUIRE(s12.size() == 12);
  CHECK(s12[7] == std::exp2(-8));
  CHECK(s12[8] == std::exp2(-0.5));
  CHECK(s12[9] == std::exp2(-1.5));
  CHECK(s12[11] == std::exp2(-3.5));
}

TEST_CASE("trace ops: alibi bias, softcap and window share one mask per step") {
  Builder b("g");
  ops::StepSpec spec;
  spec.batch = 2;
  spec.tokens = 4;
  spec.capacity = 32;
  ops::Step s = ops::begin_step(b, spec);
  ValueId q = b.input("q", Type{DType::F32, {2, 8, 4, 16}});
  ValueId k = b.input("k", Type{DType::F32, {2, 8, 4, 16}});
  ValueId v = b.input("v", Type{DType::F32, {2, 8, 4, 16}});
  ops::KvCache cache = ops::declare_kv(b, s, "l0.", 8, 16, 16);
  ops::AttentionSpec a;
  a.scale = 0.25;
  a.softcap = 50.0;
  a.window = 8;
  a.bias = ops::alibi_bias(b, s, 8);
  ValueId out = ops::attention_prefill(b, s, q, k, v, cache, a);
  ValueId mask = ops::attention_mask(b, s, a);  // memoized: the same value
  b.output(out);
  auto g = b.finish();
  REQUIRE_MESSAGE(g, (g ? "" : g.error().str()));
  CHECK(g->type(mask) == Type{DType::F32, {2, 8, 4, 32}});
  CHECK(count(*g, Op::Tanh) == 1);
  CHECK(count(*g, Op::Select) == 1);
  CHECK(g->type(out) == Type{DType::F32, {2, 8, 4, 16}});
}

TEST_CASE("trace ops: the split key writes three caches and concatenates the shared part") {
  for (ops::KvLayout kv : {ops::KvLayout::Fixed, ops::KvLayout::Paged}) {
    Builder b("g");
    ops::StepSpec spec;
    spec.tokens = 2;
    spec.capacity = 32;
    spec.kv = kv;
    spec.live = true;
    ops::Step s = ops::begin_step(b, spec);
    ValueId q = b.input("q", Type{DType::F32, {1, 4, 2, 24}});
    ValueId kn = b.input("k_nope", Type{DType::F32, {1, 4, 2, 16}});
    ValueId kp = b.input("k_pe", Type{DType::F32, {1, 1, 2, 8}});
    ValueId v = b.input("v", Type{DType::F32, {1, 4, 2, 12}});
    ops::SplitKvCache cache = ops::declare_split_kv(b, s, "l0.", 4, 16, 8, 12);
    ops::AttentionSpec a;
    a.scale = 0.2;
    b.output(ops::attention_split(b, s, q, kn, kp, v, cache, a));
    auto g = b.finish();
    REQUIRE_MESSAGE(g, (g ? "" : g.error().str()));
    CHECK(g->stateOuts.size() == 3);
    CHECK(count(*g, Op::Concat) == 1);
    CHECK(g->type(g->outputs[0].value) == Type{DType::F32, {1, 4, 2, 12}});
  }
}

TEST_CASE("trace ops: a named form with the wrong step is refused") {
  Builder b("g");
  ops::StepSpec spec;
  spec.tokens = 2;
  spec.capacity = 16;
  ops::Step s = ops::begin_step(b, spec);
  ValueId q = b.input("q", Type{DType::F32, {1, 2, 2, 8}});
  ops::KvCache cache = ops::declare_kv(b, s, "", 2, 8, 8);
  ops::AttentionSpec a;
  a.scale = 1;
  b.output(ops::attention_masked(b, s, q, q, q, cache, a));
  auto g = b.finish();
  REQUIRE_FALSE(g);
  CHECK(g.error().message == "tracing: attention_masked is the decode form (one token, no live bound)");
}

// ---------------------------------------------------------------------------
// Numeric tests on the oracle.

namespace {

constexpr uint64_t kSeed = 7;

Tensor intTensor(Shape shape, const std::vector<int64_t>& vals) {
  Tensor t(Type{DType::I32, std::move(shape)});
  REQUIRE(int64_t(vals.size()) == t.size());
  for (int64_t i = 0; i < t.size(); ++i) t.set(i, double(vals[size_t(i)]));
  return t;
}

// Evaluates g with `given` and the seeded generator for the rest (weights
// are keyed by name, so every graph of one model sees the same weights).
Evaluation run(const Graph& g, std::map<std::string, Tensor> given, uint64_t seed = kSeed) {
  auto ev = evaluate(g, completeParams(g, std::move(given), seed));
  REQUIRE_MESSAGE(ev, (ev ? "" : ev.error().str()));
  return ev.take();
}

// |a - b| <= tol * (1 + |b|) everywhere, and both finite.
void checkClose(const Tensor& a, const Tensor& b, double tol = 1e-5) {
  REQUIRE(a.type == b.type);
  int bad = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    double x = a.get(i), y = b.get(i);
    if (!std::isfinite(x) || !std::isfinite(y) || std::abs(x - y) > tol * (1 + std::abs(y))) {
      if (++bad <= 3) FAIL_CHECK("element " << i << ": " << x << " vs " << y);
    }
  }
  CHECK(bad == 0);
}

TEST_CASE("trace: qwen3 normalizes each head of q and k over head_dim before rope") {
  ModelConfig cfg = testing::loadExampleConfig("tiny-qwen3.json");
  Graph g = traced(cfg, options(Phase::Prefill, ops::KvLayout::Fixed, false));
  const std::string p = "model.layers.0.self_attn.";
  for (const char* w : {"q_norm.weight", "k_norm.weight"}) {
    const Value* v = find(g, p + w);
    REQUIRE(v);
    CHECK(v->type.shape == Shape{32});  // head_dim, not hidden_size / heads (16)
  }
  REQUIRE(find(g, p + "q_proj.weight")->type.shape == Shape{128, 64});
  auto params = completeParams(g, {}, kSeed);
  Tensor base = run(g, params).outputs.at("logits");
  // Scaling one head's rows of q_proj, and another's of k_proj, changes
  // nothing when every head is normalized on its own (up to rms_norm_eps).
  auto scaleRows = [&](const std::string& name, int64_t from, int64_t to, double by) {
    Tensor& w = params.at(name);
    int64_t cols = w.shape()[1];
    for (int64_t i = from * cols; i < to * cols; ++i) w.set(i, w.get(i) * by);
  };
  scaleRows(p + "q_proj.weight", 32, 64, 3.0);
  scaleRows(p + "k_proj.weight", 0, 32, 0.25);
  checkClose(run(g, params).outputs.at("logits"), base, 1e-4);
  // The gains are read: doubling q_norm's doubles every score of layer 0.
  Tensor& gain = params.at(p + "q_norm.weight");
  for (int64_t i = 0; i < gain.size(); ++i) gain.set(i, 2 * gain.get(i));
  Tensor moved = run(g, params).outputs.at("logits");
  double most = 0;
  for (int64_t i = 0; i < base.size(); ++i) most = std::max(most, std::abs(moved.get(i) - base.get(i)));
  CHECK(most > 1e-2);
}

// Rows [from, from + n) of axis 1 of a [B, L, ...] tensor.
Tensor rows(const Tensor& t, int64_t from, int64_t n) {
  Shape s = t.shape();
  int64_t L = s[1], inner = numel(s) / (s[0] * L);
  s[1] = n;
  Tensor r(Type{t.dtype(), s});
  int64_t w = dtypeBytes(t.dtype());
  for (int64_t b = 0; b < s[0]; ++b)
    std::memcpy(r.bytes.data() + size_t((b * n) * inner * w), t.bytes.data() + size_t((b * L + from) * inner * w),
                size_t(n * inner * w));
  return r;
}

// A block table: row b's logical position p lives in pool slot
// blocks[b][p / 16] * 16 + p % 16. Rows use distinct blocks, out of order.
struct SlotMap {
  int64_t batch, capacity;
  int64_t slot(int64_t b, int64_t p) const {
    int64_t nb = capacity / ops::kBlockSize;
    int64_t block = (b * nb + (nb - 1 - p / ops::kBlockSize) + 1) % (batch * nb);
    return block * ops::kBlockSize + p % ops::kBlockSize;
  }
  Tensor read() const {
    std::vector<int64_t> v;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t p = 0; p < capacity; ++p) v.push_back(slot(b, p));
    return intTensor({batch, capacity}, v);
  }
  // The slots of row b's positions from[b] .. from[b] + L - 1.
  Tensor write(const std::vector<int64_t>& from, int64_t L) const {
    std::vector<int64_t> v;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < L; ++j) v.push_back(slot(b, from[size_t(b)] + j));
    return intTensor({batch * L}, v);
  }
  // The pool [S, H, D] holding a fixed cache [B, H, cap, D] under this map,
  // starting from `pool` (slots no row maps keep their contents).
  Tensor toPool(const Tensor& cache, Tensor pool) const {
    int64_t H = cache.shape()[1], D = cache.shape()[3];
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t p = 0; p < capacity; ++p)
          for (int64_t d = 0; d < D; ++d)
            pool.set((slot(b, p) * H + h) * D + d, cache.get(((b * H + h) * capacity + p) * D + d));
    return pool;
  }
  // The fixed view [B, H, cap, D] of a pool.
  Tensor fromPool(const Tensor& pool, const Type& cacheType) const {
    Tensor cache(cacheType);
    int64_t H = cacheType.shape[1], D = cacheType.shape[3];
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t p = 0; p < capacity; ++p)
          for (int64_t d = 0; d < D; ++d)
            cache.set(((b * H + h) * capacity + p) * D + d, pool.get((slot(b, p) * H + h) * D + d));
    return cache;
  }
};

std::vector<int64_t> someTokens(int64_t batch, int64_t n) {
  std::vector<int64_t> v;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i) v.push_back((37 * i + 101 * b + 11) % 256);
  return v;
}

// Row b's tokens from[b] .. from[b] + n - 1.
Tensor tokenTensor(const std::vector<int64_t>& all, int64_t batch, int64_t total, const std::vector<int64_t>& from,
                   int64_t n) {
  std::vector<int64_t> v;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = from[size_t(b)]; i < from[size_t(b)] + n; ++i) v.push_back(all[size_t(b * total + i)]);
  return intTensor({batch, n}, v);
}

TraceOptions stepOptions(int64_t L, ops::KvLayout kv, bool live, int64_t batch, int64_t cap) {
  TraceOptions o;
  o.phase = L == 1 ? Phase::Decode : Phase::Prefill;
  o.tokens = L;
  o.kv = kv;
  o.live = live;
  o.batch = batch;
  o.capacity = cap;
  return o;
}

// One traced step: row b's tokens [from[b], from[b] + L) at its position
// from[b] (a fixed step's rows all at one), states as given (fixed caches; a
// paged step gets them moved into pools by the slot map).
Evaluation tracedStep(const ModelConfig& cfg, TraceOptions o, const std::vector<int64_t>& toks, int64_t total,
                      const std::vector<int64_t>& from, const std::map<std::string, Tensor>& caches) {
  Graph g = traced(cfg, o);
  std::map<std::string, Tensor> given;
  given.emplace("tokens", tokenTensor(toks, o.batch, total, from, *o.tokens));
  if (o.kv == ops::KvLayout::Paged) {
    given.emplace("pos", intTensor({o.batch}, from));
  } else {
    REQUIRE(std::count(from.begin(), from.end(), from[0]) == o.batch);
    given.emplace("pos", intTensor({}, {from[0]}));
  }
  SlotMap map{o.batch, *o.capacity};
  for (const auto& [name, t] : caches) {
    if (o.kv == ops::KvLayout::Fixed) {
      given.emplace(name, t);
      continue;
    }
    std::string pool = name.substr(0, name.size() - 6) + "_pool";  // ..._cache -> ..._pool
    given.emplace(pool, map.toPool(t, randomParam(g, idOf(g, pool), kSeed)));
  }
  if (o.kv == ops::KvLayout::Paged) {
    given.emplace("read", map.read());
    given.emplace("write", map.write(from, *o.tokens));
  }
  return run(g, given);
}

// Every row at position `from`.
Evaluation tracedStep(const ModelConfig& cfg, TraceOptions o, const std::vector<int64_t>& toks, int64_t total,
                      int64_t from, const std::map<std::string, Tensor>& caches) {
  return tracedStep(cfg, o, toks, total, std::vector<int64_t>(size_t(o.batch), from), caches);
}

// Batch row b of a tensor, keeping a unit batch axis.
Tensor batchRow(const Tensor& t, int64_t b) {
  Shape s = t.shape();
  int64_t n = numel(s) / s[0] * dtypeBytes(t.dtype());
  s[0] = 1;
  Tensor r(Type{t.dtype(), s});
  std::memcpy(r.bytes.data(), t.bytes.data() + size_t(b * n), size_t(n));
  return r;
}

// The fixed caches a step left behind (a paged step's pools viewed through the map).
std::map<std::string, Tensor> cachesAfter(const Evaluation& ev, const TraceOptions& o, const ModelConfig& cfg) {
  std::map<std::string, Tensor> out;
  SlotMap map{o.batch, *o.capacity};
  for (const auto& [name, t] : ev.states) {
    if (o.kv == ops::KvLayout::Fixed) {
      out.emplace(name, t);
    } else {  // a pool [slots, H, D] holds the fixed cache [B, H, cap, D]
      Type cacheType{t.dtype(), {o.batch, t.shape()[1], *o.capacity, t.shape()[2]}};
      out.emplace(name.substr(0, name.size() - 5) + "_cache", map.fromPool(t, cacheType));
    }
  }
  return out;
}

// Random (never zero) fixed caches of a step of this shape, by state name.
std::map<std::string, Tensor> randomCaches(const ModelConfig& cfg, int64_t L, bool live, int64_t batch, int64_t cap,
                                           uint64_t seed) {
  Graph g = traced(cfg, stepOptions(L, ops::KvLayout::Fixed, live, batch, cap));
  std::map<std::string, Tensor> caches;
  for (const StateOut& so : g.stateOuts) caches.emplace(g.value(so.state).name, randomParam(g, so.state, seed));
  return caches;
}

}  // namespace

TEST_CASE("trace numerics: a decode step at position t equals row t of the prefill, in every family") {
  for (const auto& path : testing::tinyConfigs()) {
    CAPTURE(path.filename().string());
    ModelConfig cfg = testing::loadExampleConfig(path.filename().string());
    const int64_t t = 5, cap = 32, batch = 2;
    std::vector<int64_t> toks = someTokens(batch, t + 1);
    for (ops::KvLayout kv : {ops::KvLayout::Fixed, ops::KvLayout::Paged})
      for (bool live : {false, true}) {
        CAPTURE(kv == ops::KvLayout::Paged);
        CAPTURE(live);
        // the prompt without its last token fills the caches...
        TraceOptions po = stepOptions(t, kv, live, batch, cap);
        Evaluation prompt = tracedStep(cfg, po, toks, t + 1, 0, {});
        CHECK(prompt.valid());
        // ...that the decode of token t reads
        TraceOptions dopt = stepOptions(1, kv, live, batch, cap);
        Evaluation decode = tracedStep(cfg, dopt, toks, t + 1, t, cachesAfter(prompt, po, cfg));
        CHECK(decode.valid());
        // the prefill over all t + 1 tokens
        TraceOptions fo = stepOptions(t + 1, kv, live, batch, cap);
        Evaluation full = tracedStep(cfg, fo, toks, t + 1, 0, {});
        checkClose(decode.outputs.at("logits"), rows(full.outputs.at("logits"), t, 1));
        checkClose(rows(prompt.outputs.at("logits"), 0, t), rows(full.outputs.at("logits"), 0, t));
        // and the caches agree on every written position
        auto dc = cachesAfter(decode, dopt, cfg), fc = cachesAfter(full, fo, cfg);
        for (const auto& [name, c] : fc) {
          CAPTURE(name);
          const Tensor& d = dc.at(name);
          int64_t H = c.shape()[1], D = c.shape()[3];
          bool same = true;
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t h = 0; h < H; ++h)
              for (int64_t p = 0; p <= t; ++p)
                for (int64_t e = 0; e < D; ++e) {
                  int64_t i = ((b * H + h) * cap + p) * D + e;
                  same = same && std::abs(c.get(i) - d.get(i)) <= 1e-5 * (1 + std::abs(c.get(i)));
                }
          CHECK(same);
        }
      }
  }
}

TEST_CASE("trace numerics: a paged step equals the fixed one under an equivalent slot map, in every family") {
  for (const auto& path : testing::tinyConfigs()) {
    CAPTURE(path.filename().string());
    ModelConfig cfg = testing::loadExampleConfig(path.filename().string());
    const int64_t cap = 32, batch = 2, pos = 4;
    for (int64_t L : {1, 3})
      for (bool live : {false, true}) {
        CAPTURE(L);
        CAPTURE(live);
        std::vector<int64_t> toks = someTokens(batch, pos + L);
        // random (never zero) caches, the same for both layouts
        std::map<std::string, Tensor> caches = randomCaches(cfg, L, live, batch, cap, 99);
        TraceOptions fo = stepOptions(L, ops::KvLayout::Fixed, live, batch, cap);
        Evaluation fixed = tracedStep(cfg, fo, toks, pos + L, pos, caches);
        TraceOptions po = stepOptions(L, ops::KvLayout::Paged, live, batch, cap);
        Evaluation paged = tracedStep(cfg, po, toks, pos + L, pos, caches);
        checkClose(paged.outputs.at("logits"), fixed.outputs.at("logits"), 0);
        auto pc = cachesAfter(paged, po, cfg), fc = cachesAfter(fixed, fo, cfg);
        for (const auto& [name, c] : fc) {
          CAPTURE(name);
          checkClose(pc.at(name), c, 0);
        }
      }
  }
}

TEST_CASE("trace numerics: paged rows at their own positions each equal the row stepped alone, in every family") {
  for (const auto& path : testing::tinyConfigs()) {
    CAPTURE(path.filename().string());
    ModelConfig cfg = testing::loadExampleConfig(path.filename().string());
    const int64_t cap = 32, batch = 2;
    const std::vector<int64_t> from{9, 4};
    for (int64_t L : {1, 3})
      for (bool live : {false, true}) {
        CAPTURE(L);
        CAPTURE(live);
        std::vector<int64_t> toks = someTokens(batch, from[0] + L);
        // random (never zero) caches, row b of them the b-th row's alone
        std::map<std::string, Tensor> caches = randomCaches(cfg, L, live, batch, cap, 7);
        TraceOptions po = stepOptions(L, ops::KvLayout::Paged, live, batch, cap);
        Evaluation paged = tracedStep(cfg, po, toks, from[0] + L, from, caches);
        CHECK(paged.valid());
        auto pc = cachesAfter(paged, po, cfg);
        for (int64_t b = 0; b < batch; ++b) {
          CAPTURE(b);
          std::vector<int64_t> rowToks(toks.begin() + b * (from[0] + L), toks.begin() + (b + 1) * (from[0] + L));
          std::map<std::string, Tensor> rowCaches;
          for (const auto& [name, c] : caches) rowCaches.emplace(name, batchRow(c, b));
          TraceOptions ao = stepOptions(L, ops::KvLayout::Fixed, live, 1, cap);
          Evaluation alone = tracedStep(cfg, ao, rowToks, from[0] + L, from[size_t(b)], rowCaches);
          checkClose(batchRow(paged.outputs.at("logits"), b), alone.outputs.at("logits"));
          for (const auto& [name, c] : cachesAfter(alone, ao, cfg)) {
            CAPTURE(name);
            checkClose(batchRow(pc.at(name), b), c);
          }
        }
      }
  }
}

TEST_CASE("trace numerics: a mixed step equals the paged step of the same rows, in every family") {
  for (const auto& path : testing::tinyConfigs()) {
    CAPTURE(path.filename().string());
    ModelConfig cfg = testing::loadExampleConfig(path.filename().string());
    const int64_t cap = 32, batch = 2, L = 3, T = 2 * L + 1;
    const std::vector<int64_t> from{9, 4};
    for (bool live : {false, true}) {
      CAPTURE(live);
      std::vector<int64_t> toks = someTokens(batch, from[0] + L);
      std::map<std::string, Tensor> caches = randomCaches(cfg, L, live, batch, cap, 5);
      TraceOptions po = stepOptions(L, ops::KvLayout::Paged, live, batch, cap);
      Evaluation paged = tracedStep(cfg, po, toks, from[0] + L, from, caches);
      // The same two rows as T places: row 0's L tokens, row 1's, a padding place.
      TraceOptions mo = po;
      mo.phase = Phase::Mixed;
      mo.tokens = T;
      Graph mg = traced(cfg, mo);
      SlotMap map{batch, cap};
      std::vector<int64_t> ids, pos, write, row;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < L; ++j) {
          ids.push_back(toks[size_t(b * (from[0] + L) + from[size_t(b)] + j)]);
          pos.push_back(from[size_t(b)] + j);
          write.push_back(map.slot(b, from[size_t(b)] + j));
          row.push_back(b);
        }
      ids.push_back(0), pos.push_back(0), write.push_back(-1), row.push_back(0);
      std::map<std::string, Tensor> given{{"tokens", intTensor({T, 1}, ids)}, {"pos", intTensor({T}, pos)},
                                          {"write", intTensor({T}, write)},     {"row", intTensor({T}, row)},
                                          {"sample", intTensor({batch}, {L - 1, 2 * L - 1})}, {"read", map.read()}};
      for (const auto& [name, t] : caches) {
        std::string pool = name.substr(0, name.size() - 6) + "_pool";
        given.emplace(pool, map.toPool(t, randomParam(mg, idOf(mg, pool), kSeed)));
      }
      Evaluation mixed = run(mg, given);
      CHECK(mixed.valid());
      checkClose(mixed.outputs.at("logits"), rows(paged.outputs.at("logits"), L - 1, 1));
      for (const auto& [name, t] : paged.states) {
        CAPTURE(name);
        checkClose(mixed.states.at(name), t);
      }
    }
  }
}

TEST_CASE("trace numerics: a live step ignores NaN in unused cache rows and matches the masked step") {
  ModelConfig cfg = tinyConfig();
  const int64_t cap = 32, batch = 2, pos = 6;
  for (ops::KvLayout kv : {ops::KvLayout::Fixed, ops::KvLayout::Paged}) {
    CAPTURE(kv == ops::KvLayout::Paged);
    std::vector<int64_t> toks = someTokens(batch, pos + 1);
    TraceOptions mo = stepOptions(1, kv, false, batch, cap);
    Graph mg = traced(cfg, stepOptions(1, ops::KvLayout::Fixed, false, batch, cap));
    std::map<std::string, Tensor> finite, poisoned;
    for (const StateOut& so : mg.stateOuts) {
      Tensor c = randomParam(mg, so.state, 5);
      finite.emplace(mg.value(so.state).name, c);
      int64_t H = c.shape()[1], D = c.shape()[3];
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t p = pos + 1; p < cap; ++p)
            for (int64_t e = 0; e < D; ++e) c.set(((b * H + h) * cap + p) * D + e, std::nan(""));
      poisoned.emplace(mg.value(so.state).name, c);
    }
    Evaluation masked = tracedStep(cfg, mo, toks, pos + 1, pos, finite);
    Evaluation live = tracedStep(cfg, stepOptions(1, kv, true, batch, cap), toks, pos + 1, pos, poisoned);
    CHECK(live.valid());
    checkClose(live.outputs.at("logits"), masked.outputs.at("logits"));
  }
}

namespace {

Attrs attentionAttrs(double scale, std::optional<double> softcap, int64_t nrep, const char* key, bool masked,
                     bool live) {
  Attrs a = {{"scale", scale}, {"n_rep", nrep}, {"key", std::string(key)},
             {"mask", std::string(masked ? "additive" : "none")}, {"bound", std::string(live ? "live" : "capacity")}};
  if (softcap) a.push_back({"softcap", *softcap});
  return a;
}

ValueId stateOutOf(const Builder& b, ValueId state) {
  for (const StateOut& so : b.graph().stateOuts)
    if (so.state == state) return so.value;
  return kNone;
}

struct FormedCase {
  ops::KvLayout kv;
  bool live;
  int64_t tokens;
  std::optional<double> softcap;
  int64_t window;
  bool alibi;
};

}  // namespace

TEST_CASE("trace numerics: the attention decompositions equal the formed Attention op") {
  std::vector<FormedCase> cases = {
      {ops::KvLayout::Fixed, false, 1, {}, 0, false},  {ops::KvLayout::Fixed, false, 3, {}, 0, false},
      {ops::KvLayout::Fixed, true, 1, {}, 0, false},   {ops::KvLayout::Fixed, true, 3, {}, 0, false},
      {ops::KvLayout::Paged, false, 1, {}, 0, false},  {ops::KvLayout::Paged, false, 3, {}, 0, false},
      {ops::KvLayout::Paged, true, 1, {}, 0, false},   {ops::KvLayout::Paged, true, 3, {}, 0, false},
      {ops::KvLayout::Fixed, false, 3, 5.0, 6, true},  {ops::KvLayout::Fixed, true, 1, 5.0, 6, true},
      {ops::KvLayout::Paged, false, 3, 5.0, 6, false},
  };
  for (const FormedCase& fc : cases) {
    bool paged = fc.kv == ops::KvLayout::Paged;
    CAPTURE(paged);
    CAPTURE(fc.live);
    CAPTURE(fc.tokens);
    CAPTURE(fc.window);
    Builder b("formed");
    ops::StepSpec spec;
    spec.batch = 2;
    spec.tokens = fc.tokens;
    spec.capacity = 32;
    spec.kv = fc.kv;
    spec.live = fc.live;
    ops::Step s = ops::begin_step(b, spec);
    ValueId q = b.input("q", Type{DType::F32, {2, 4, fc.tokens, 8}});
    ValueId k = b.input("k", Type{DType::F32, {2, 2, fc.tokens, 8}});
    ValueId v = b.input("v", Type{DType::F32, {2, 2, fc.tokens, 8}});
    ops::KvCache cache = ops::declare_kv(b, s, "", 2, 8, 8);
    ops::AttentionSpec a;
    a.scale = 0.35;
    a.softcap = fc.softcap;
    a.window = fc.window;
    if (fc.alibi) a.bias = ops::alibi_bias(b, s, 4);
    b.output(b.nameExact(ops::attention(b, s, q, k, v, cache, a), "chain"));
    ValueId mask = ops::attention_mask(b, s, a);
    std::vector<ValueId> operands = {q, stateOutOf(b, cache.k), stateOutOf(b, cache.v)};
    if (paged) operands.push_back(s.read);
    if (mask != kNone) operands.push_back(mask);
    if (fc.live) operands.push_back(s.len);
    ValueId formed = b.op(Op::Attention, operands,
                          attentionAttrs(a.scale, a.softcap, 2, paged ? "paged" : "dense", mask != kNone, fc.live));
    b.output(b.nameExact(formed, "formed"));
    auto g = b.finish();
    REQUIRE_MESSAGE(g, (g ? "" : g.error().str()));
    std::map<std::string, Tensor> given;
    if (paged) {  // distinct slots, as the driver binds them; each row at its own position
      SlotMap map{2, 32};
      given.emplace("read", map.read());
      given.emplace("write", map.write({3, 11}, fc.tokens));
      given.emplace("pos", intTensor({2}, {3, 11}));
    } else {
      given.emplace("pos", intTensor({}, {3}));
    }
    Evaluation ev = run(*g, given);
    checkClose(ev.outputs.at("chain"), ev.outputs.at("formed"), 1e-5);
  }
}

TEST_CASE("trace numerics: the split key decomposition equals the formed split Attention") {
  for (bool live : {false, true}) {
    CAPTURE(live);
    Builder b("split");
    ops::StepSpec spec;
    spec.batch = 2;
    spec.tokens = 3;
    spec.capacity = 16;
    spec.live = live;
    ops::Step s = ops::begin_step(b, spec);
    ValueId q = b.input("q", Type{DType::F32, {2, 4, 3, 12}});
    ValueId kn = b.input("k_nope", Type{DType::F32, {2, 4, 3, 8}});
    ValueId kp = b.input("k_pe", Type{DType::F32, {2, 1, 3, 4}});
    ValueId v = b.input("v", Type{DType::F32, {2, 4, 3, 6}});
    ops::SplitKvCache cache = ops::declare_split_kv(b, s, "", 4, 8, 4, 6);
    ops::AttentionSpec a;
    a.scale = 0.3;
    b.output(b.nameExact(ops::attention_split(b, s, q, kn, kp, v, cache, a), "chain"));
    ValueId mask = ops::attention_mask(b, s, a);
    std::vector<ValueId> operands = {q, stateOutOf(b, cache.kNope), stateOutOf(b, cache.kPe), stateOutOf(b, cache.v),
                                     mask};
    if (live) operands.push_back(s.len);
    b.output(b.nameExact(b.op(Op::Attention, operands, attentionAttrs(a.scale, {}, 1, "split", true, live)), "formed"));
    auto g = b.finish();
    REQUIRE_MESSAGE(g, (g ? "" : g.error().str()));
    Evaluation ev = run(*g, {{"pos", intTensor({}, {5})}});
    checkClose(ev.outputs.at("chain"), ev.outputs.at("formed"), 1e-5);
  }
}

TEST_CASE("trace numerics: both rope decompositions equal the formed Rope op") {
  for (ops::KvLayout kv : {ops::KvLayout::Fixed, ops::KvLayout::Paged})
    for (ops::RopeStyle style : {ops::RopeStyle::Half, ops::RopeStyle::Interleaved}) {
      bool paged = kv == ops::KvLayout::Paged;
      CAPTURE(paged);
      Builder b("rope");
      ops::StepSpec spec;
      spec.batch = 2;
      spec.tokens = 3;
      spec.capacity = 64;
      spec.kv = kv;
      ops::Step s = ops::begin_step(b, spec);
      ValueId x = b.input("x", Type{DType::F32, {2, 4, 3, 16}});
      ops::RopeTables t = ops::rope_tables(b, s, ops::rope_inv_freq(10000.0, 16));
      b.output(b.nameExact(ops::rope(b, x, t, style), "chain"));
      std::string name = style == ops::RopeStyle::Half ? "half" : "interleaved";
      b.output(b.nameExact(b.op(Op::Rope, {x, t.cos, t.sin}, {{"style", name}}), "formed"));
      auto g = b.finish();
      REQUIRE_MESSAGE(g, (g ? "" : g.error().str()));
      // a paged step's rows at their own positions: the tables have a row each
      Tensor pos = paged ? intTensor({2}, {41, 6}) : intTensor({}, {41});
      Evaluation ev = run(*g, {{"pos", pos}});
      checkClose(ev.outputs.at("chain"), ev.outputs.at("formed"), 0);
      CHECK(g->type(t.cos).shape == (paged ? Shape{2, 1, 3, 8} : Shape{3, 8}));
    }
}

TEST_CASE("trace: a bf16 trace verifies, with norms in f32 and f32 logits") {
  ModelConfig cfg = tinyConfig();
  for (bool live : {false, true}) {
    TraceOptions o = options(Phase::Prefill, ops::KvLayout::Paged, live, 2);
    o.dtype = DType::BF16;
    Graph g = traced(cfg, o);
    CHECK(find(g, "layers.0.k_pool")->type.dtype == DType::BF16);
    CHECK(find(g, "model.embed_tokens.weight")->type.dtype == DType::BF16);
    CHECK(g.type(g.outputs[0].value).dtype == DType::F32);
    CHECK(find(g, "mask")->type.dtype == DType::BF16);
    Evaluation ev = run(g, {{"pos", intTensor({2}, {0, 0})}, {"read", SlotMap{2, 64}.read()},
                            {"write", SlotMap{2, 64}.write({0, 0}, 8)}});
    const Tensor& logits = ev.outputs.at("logits");
    bool finite = true;
    for (int64_t i = 0; i < logits.size(); ++i) finite = finite && std::isfinite(logits.get(i));
    CHECK(finite);
  }
}

// Unit tests of traced weight dtypes (TraceOptions::weightsDtype, pootc
// trace --weights-dtype): in every tiny family, decode and prefill, a trace
// with bf16 or f16 weights declares every weight in that dtype and keeps
// every activation, cache and output f32; on fresh random two-byte weights
// the oracle gives exactly (bit for bit) the outputs and states of the f32
// trace on the same weights widened to f32; after the pass pipeline no
// weight is converted or transposed for a MatMul (each MatMul reads its
// two-byte weight as stored). And checkpointDtype, the default of the flag,
// read from the config's torch_dtype or dtype.
#include <doctest/doctest.h>

#include "oracle/interp.h"
#include "oracle/random.h"
#include "testing.h"
#include "trace/model.h"

using namespace poot;
using namespace poot::trace;

namespace {

Graph traced(const ModelConfig& cfg, const TraceOptions& o) {
  auto g = traceModel(cfg, o);
  REQUIRE_MESSAGE(bool(g), (g ? "" : g.error().str()));
  return g.take();
}

Evaluation evaluated(const Graph& g, const std::map<std::string, Tensor>& params) {
  auto ev = evaluate(g, params);
  REQUIRE_MESSAGE(bool(ev), (ev ? "" : ev.error().str()));
  return ev.take();
}

}  // namespace

TEST_CASE("weights dtype: two-byte weights give the f32 trace's numbers exactly, in every family") {
  uint64_t seed = testing::freshSeed();
  CAPTURE(seed);
  DeviceProfile h200 = testing::loadTarget("nvidia-h200");
  for (const auto& path : testing::tinyConfigs()) {
    ModelConfig cfg = testing::loadExampleConfig(path.filename().string());
    for (Phase phase : {Phase::Decode, Phase::Prefill}) {
      for (DType wd : {DType::BF16, DType::F16}) {
        CAPTURE(path.filename().string());
        CAPTURE(dtypeName(wd));
        TraceOptions o;
        o.phase = phase;
        o.tokens = phase == Phase::Decode ? 1 : 4;
        o.capacity = 64;
        Graph wide = traced(cfg, o);
        o.weightsDtype = wd;
        Graph narrow = traced(cfg, o);

        // Weights in wd, everything else as in the f32 trace.
        REQUIRE(narrow.params.size() == wide.params.size());
        for (size_t i = 0; i < narrow.params.size(); ++i) {
          const Value& n = narrow.value(narrow.params[i]);
          const Value& w = wide.value(wide.params[i]);
          CHECK(n.name == w.name);
          CHECK(n.type.shape == w.type.shape);
          CHECK(n.type.dtype == (n.storage == Storage::Weight ? wd : w.type.dtype));
        }
        for (const Export& out : narrow.outputs) CHECK(narrow.type(out.value).dtype == DType::F32);

        // Random two-byte weights, and the same values widened.
        auto params = completeParams(narrow, {}, seed);
        std::map<std::string, Tensor> widened = params;
        for (ValueId id : narrow.params) {
          const Value& v = narrow.value(id);
          if (v.storage != Storage::Weight) continue;
          Tensor t(Type{DType::F32, v.type.shape});
          for (int64_t i = 0; i < t.size(); ++i) t.set(i, params.at(v.name).get(i));
          widened[v.name] = t;
        }
        Evaluation a = evaluated(narrow, params);
        Evaluation b = evaluated(wide, widened);
        CHECK(a.validations == b.validations);
        for (const auto& [name, t] : b.outputs) CHECK_MESSAGE(a.outputs.at(name).bytes == t.bytes, name);
        for (const auto& [name, t] : b.states) CHECK_MESSAGE(a.states.at(name).bytes == t.bytes, name);

        // Compiled: every MatMul reads its weight as stored.
        testing::runPasses(narrow, h200);
        for (const Eqn& e : narrow.eqns) {
          if (e.op != Op::MatMul) continue;
          ValueId v = e.operands[1];
          int peeled = 0;
          for (const Value* d = &narrow.value(v); d->storage == Storage::Result; d = &narrow.value(v)) {
            const Eqn& def = narrow.eqns[size_t(d->def)];
            if (def.op != Op::Convert && def.op != Op::Transpose) break;
            v = def.operands[0];
            ++peeled;
          }
          CHECK_MESSAGE(!(peeled > 0 && narrow.value(v).storage == Storage::Weight),
                        narrow.value(v).name << " reaches a MatMul through " << peeled << " Convert or Transpose");
        }
      }
    }
  }
}

TEST_CASE("weights dtype: the default is the config's torch_dtype or dtype") {
  auto dtypeOf = [](const std::string& members) {
    auto cfg = parseConfig("{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128, "
                           "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 32" +
                               members + "}",
                           "c.json");
    REQUIRE_MESSAGE(bool(cfg), (cfg ? "" : cfg.error().str()));
    return checkpointDtype(*cfg);
  };
  CHECK(*dtypeOf("") == DType::F32);
  CHECK(*dtypeOf(", \"torch_dtype\": null") == DType::F32);
  CHECK(*dtypeOf(", \"torch_dtype\": \"float32\"") == DType::F32);
  CHECK(*dtypeOf(", \"torch_dtype\": \"bfloat16\"") == DType::BF16);
  CHECK(*dtypeOf(", \"dtype\": \"float16\"") == DType::F16);
  auto bad = dtypeOf(", \"dtype\": \"int8\"");
  REQUIRE(!bad);
  CHECK(bad.error().str() == "c.json: error: field 'dtype': 'int8' is not a weight dtype the tracer declares (float32, "
                             "bfloat16, float16): pass --weights-dtype f32, bf16 or f16");
  // The published bf16 configs.
  CHECK(*checkpointDtype(testing::loadExampleConfig("llama-3-8b.json")) == DType::BF16);
  CHECK(*checkpointDtype(testing::loadExampleConfig("qwen2.5-0.5b.json")) == DType::BF16);
  CHECK(*checkpointDtype(testing::loadExampleConfig("tiny-llama.json")) == DType::F32);
}

TEST_CASE("weights dtype: tied embeddings read the table itself, and gemma's normalizer is rounded to the weights'") {
  TraceOptions o;
  o.capacity = 32;
  o.weightsDtype = DType::BF16;
  Graph q = traced(testing::loadExampleConfig("tiny-qwen2.json"), o);
  int embeds = 0;
  for (ValueId id : q.params) {
    CHECK(q.value(id).name != "lm_head.weight");
    embeds += q.value(id).name == "model.embed_tokens.weight";
  }
  CHECK(embeds == 1);
  testing::runPasses(q, testing::loadTarget("nvidia-h200"));
  const Eqn& logits = q.eqns[size_t(q.value(q.outputs[0].value).def)];
  REQUIRE(logits.op == Op::MatMul);
  CHECK(q.value(logits.operands[1]).name == "model.embed_tokens.weight");

  Graph g = traced(testing::loadExampleConfig("tiny-gemma2.json"), o);
  ValueId norm = -1;
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].name == "embed.normalizer") norm = ValueId(i);
  REQUIRE(norm >= 0);
  const Eqn& conv = g.eqns[size_t(g.value(norm).def)];
  REQUIRE(conv.op == Op::Convert);
  CHECK(g.type(norm).dtype == DType::F32);
  CHECK(g.type(conv.operands[0]).dtype == DType::BF16);
}

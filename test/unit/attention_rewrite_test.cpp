// Unit tests of the attention rewrite (lib/passes/attention.cpp) with the
// oracle: on every example graph and on fresh traces of the tiny config of
// every family, in every phase, KV layout and live setting, the rewritten
// graph gives the same outputs, states and validation witnesses as the
// primitive chain on fresh random inputs (a new seed each run, printed on
// failure), within |a - b| <= 1e-4 * (1 + |b|) in f32: the fused op sums the
// weighted values before dividing, the chain divides first. Also: the Llama
// decode graph has exactly one Attention per layer with n_rep = heads /
// kv_heads and no softmax left; compiling twice prints the same IR; and the
// declines of real traces (a bf16 chain, a grid too small, a length or read
// map the witness rule leaves unproved) keep the graph and say why.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ir/binary.h"
#include "ir/text.h"
#include "oracle/interp.h"
#include "oracle/random.h"
#include "passes/pass.h"
#include "testing.h"
#include "trace/model.h"

using namespace poot;

namespace {

using namespace poot::testing;

constexpr double kTol = 1e-4;
// Example graphs with more parameter elements than this (the full-size
// configs) are left to the lit tests: the oracle would take minutes.
constexpr int64_t kMaxParamElems = int64_t(8) << 20;

int count(const Graph& g, Op op) {
  return int(std::count_if(g.eqns.begin(), g.eqns.end(), [&](const Eqn& e) { return e.op == op; }));
}

std::vector<const Eqn*> eqnsOf(const Graph& g, Op op) {
  std::vector<const Eqn*> out;
  for (const Eqn& e : g.eqns)
    if (e.op == op) out.push_back(&e);
  return out;
}

std::string sym(const Eqn& e, const char* name) { return std::get<std::string>(*e.attr(name)); }
int64_t intAttr(const Eqn& e, const char* name) { return std::get<int64_t>(*e.attr(name)); }

std::string remarksOf(const PassContext& ctx) {
  std::string out;
  for (const Remark& r : ctx.remarks) out += r.eqn + ": " + r.message + "\n";
  return out;
}

// ranges -> attention-rewrite -> cleanup on a copy of g.
Graph rewritten(const Graph& g, PassContext& ctx) {
  Graph out = g;
  REQUIRE(bool(runRanges(out, ctx)));
  auto changed = runAttentionRewrite(out, ctx);
  REQUIRE(bool(changed));
  REQUIRE(bool(runCleanup(out, ctx)));
  auto ok = verify(out);
  REQUIRE_MESSAGE(bool(ok), (ok ? "" : ok.error().str()));
  return out;
}

// The oracle on both graphs with the same fresh random parameters.
void checkSameResults(const Graph& before, const Graph& after, uint64_t seed) {
  testing::checkSameResults(before, after, seed, relativeToBefore(kTol));
}

trace::TraceOptions options(bool prefill, bool paged, bool live, int64_t batch) {
  trace::TraceOptions o;
  o.phase = prefill ? trace::Phase::Prefill : trace::Phase::Decode;
  o.tokens = prefill ? 5 : 1;
  o.kv = paged ? trace::ops::KvLayout::Paged : trace::ops::KvLayout::Fixed;
  o.live = live;
  o.batch = batch;
  o.capacity = 32;
  return o;
}

std::string describe(const trace::TraceOptions& o) {
  return std::string(o.phase == trace::Phase::Prefill ? "prefill" : "decode") +
         (o.kv == trace::ops::KvLayout::Paged ? " paged" : " fixed") + (o.live ? " live" : "") + " batch " +
         std::to_string(o.batch);
}

}  // namespace

TEST_CASE("attention-rewrite: every example graph keeps its results under the oracle") {
  uint64_t seed = runSeed();
  int checked = 0;
  for (const auto& path : exampleGraphs()) {
    CAPTURE(path.filename().string());
    Graph g = loadGraphFile(path);
    PassContext ctx;
    Graph after = rewritten(g, ctx);
    CHECK_MESSAGE(count(after, Op::Attention) >= 1, remarksOf(ctx));
    CHECK_MESSAGE(ctx.remarks.empty(), remarksOf(ctx));
    if (paramElements(g) > kMaxParamElems) continue;
    checkSameResults(g, after, seed);
    ++checked;
  }
  CHECK(checked >= 10);
}

TEST_CASE("attention-rewrite: fresh traces of every family keep their results, one Attention per layer") {
  uint64_t seed = runSeed();
  struct Family {
    const char* config;
    const char* key;  // the form a fixed layout gets
  };
  const Family families[] = {{"tiny-llama.json", "dense"},   {"tiny-mistral.json", "dense"},
                             {"tiny-qwen2.json", "dense"},   {"tiny-llama-3.1.json", "dense"},
                             {"tiny-gemma2.json", "dense"},  {"tiny-bloom.json", "dense"},
                             {"tiny-deepseek-v2.json", "split"}, {"tiny-sparse.json", "dense"}};
  for (const Family& fam : families) {
    trace::ModelConfig cfg = loadExampleConfig(fam.config);
    for (bool prefill : {false, true})
      for (bool paged : {false, true})
        for (bool live : {false, true})
          for (int64_t batch : {1, 2}) {
            trace::TraceOptions o = options(prefill, paged, live, batch);
            CAPTURE(fam.config);
            CAPTURE(describe(o));
            auto traced = trace::traceModel(cfg, o);
            REQUIRE_MESSAGE(bool(traced), (traced ? "" : traced.error().str()));
            PassContext ctx;
            Graph after = rewritten(*traced, ctx);
            CHECK_MESSAGE(ctx.remarks.empty(), remarksOf(ctx));
            auto formed = eqnsOf(after, Op::Attention);
            CHECK(int64_t(formed.size()) == cfg.numLayers);
            bool split = std::string(fam.key) == "split";
            for (const Eqn* e : formed) {
              CHECK(sym(*e, "key") == (split ? "split" : paged ? "paged" : "dense"));
              CHECK(sym(*e, "bound") == (live ? "live" : "capacity"));
            }
            CHECK(count(after, Op::ReduceMax) == count(*traced, Op::ReduceMax) - int(cfg.numLayers));
            checkSameResults(*traced, after, seed);
          }
  }
}

TEST_CASE("attention-rewrite: the Llama decode graph has one Attention per layer with n_rep = heads / kv_heads") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  auto traced = trace::traceModel(cfg, options(false, false, false, 1));
  REQUIRE(bool(traced));
  PassContext ctx;
  Graph after = rewritten(*traced, ctx);
  auto formed = eqnsOf(after, Op::Attention);
  REQUIRE(int64_t(formed.size()) == cfg.numLayers);
  for (size_t l = 0; l < formed.size(); ++l) {
    const Eqn& e = *formed[l];
    CHECK(intAttr(e, "n_rep") == cfg.numHeads / cfg.numKvHeads);
    CHECK(sym(e, "key") == "dense");
    CHECK(sym(e, "mask") == "additive");
    CHECK(std::get<double>(*e.attr("scale")) == doctest::Approx(1.0 / std::sqrt(double(cfg.headDim))));
    // k and v are the un-repeated caches, written in place (no copy)
    CHECK(after.value(e.operands[1]).name == "layers." + std::to_string(l) + ".attn.k_cache");
    CHECK(after.value(e.operands[2]).name == "layers." + std::to_string(l) + ".attn.v_cache");
    CHECK(after.type(e.operands[1]).shape[1] == cfg.numKvHeads);
    CHECK(after.type(e.results[0]) == Type{DType::F32, {1, cfg.numHeads, 1, cfg.headDim}});
  }
  CHECK(count(after, Op::ReduceMax) == 0);
  CHECK(count(after, Op::Exp) == 0);
  CHECK(count(after, Op::Broadcast) == count(*traced, Op::Broadcast) - 2 * int(cfg.numLayers));
}

TEST_CASE("attention-rewrite: compiling twice prints byte-identical IR") {
  for (const char* file : {"tiny-llama-prefill-paged-live.pg", "tiny-gemma2-decode.pg", "tiny-deepseek-v2-prefill.pg"}) {
    CAPTURE(file);
    std::string printed[2];
    for (std::string& out : printed) {
      Graph g = loadGraphFile(exampleGraph(file));
      PassContext ctx;
      auto s = runPipeline(g, ctx, PipelineOptions{});
      REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
      out = printGraph(g);
    }
    CHECK(printed[0] == printed[1]);
    CHECK(printed[0].find("Attention(") != std::string::npos);
  }
}

TEST_CASE("attention-rewrite: a bf16 chain keeps its primitive decomposition and says why") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  for (bool live : {false, true}) {
    trace::TraceOptions o = options(false, false, live, 2);
    o.dtype = DType::BF16;
    auto traced = trace::traceModel(cfg, o);
    REQUIRE_MESSAGE(bool(traced), (traced ? "" : traced.error().str()));
    Graph g = *traced;
    PassContext ctx;
    REQUIRE(bool(runRanges(g, ctx)));
    auto changed = runAttentionRewrite(g, ctx);
    REQUIRE(bool(changed));
    CHECK_FALSE(*changed);
    CHECK(printGraph(g) == printGraph(*traced));
    REQUIRE(int64_t(ctx.remarks.size()) == cfg.numLayers);
    CHECK(ctx.remarks[0].pass == "attention-rewrite");
    CHECK(ctx.remarks[0].eqn == "%layers.0.attn.scores");
    CHECK(ctx.remarks[0].message == "the generated kernel is F32 only: this chain is bf16");
  }
}

TEST_CASE("attention-rewrite: a launch past the device's 2-D grid is refused with a remark") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  auto traced = trace::traceModel(cfg, options(true, false, false, 2));  // 2 * 4 * 5 = 40 workgroups
  REQUIRE(bool(traced));
  SUBCASE("fits when folded") {
    PassContext ctx;
    ctx.gridLimits[0] = 16;
    ctx.gridLimits[1] = 3;  // 16 x 3 = 48 >= 40
    Graph after = rewritten(*traced, ctx);
    CHECK(count(after, Op::Attention) == cfg.numLayers);
  }
  SUBCASE("does not fit") {
    PassContext ctx;
    ctx.gridLimits[0] = 16;
    ctx.gridLimits[1] = 2;  // 32 < 40
    Graph after = rewritten(*traced, ctx);
    CHECK(count(after, Op::Attention) == 0);
    REQUIRE(!ctx.remarks.empty());
    CHECK(ctx.remarks[0].message == "the launch of 40 workgroups (B * Hq * Lq) does not fit the device's grid of 16 x 2");
  }
}

TEST_CASE("attention-rewrite: the live length fuses only when proved under the witness rule") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  auto traced = trace::traceModel(cfg, options(false, false, true, 2));
  REQUIRE(bool(traced));
  // Widen pos past the capacity: len = pos + 1 is then proved only by the
  // guard's clamp, which counts only while its witness is a validation.
  Graph wide = *traced;
  for (ValueId p : wide.params)
    if (wide.value(p).name == "pos") wide.value(p).hi = 100;
  SUBCASE("witness declared: the clamp counts") {
    PassContext ctx;
    Graph after = rewritten(wide, ctx);
    CHECK(count(after, Op::Attention) == cfg.numLayers);
    for (const Eqn* e : eqnsOf(after, Op::Attention)) CHECK(sym(*e, "bound") == "live");
    CHECK(ctx.remarks.empty());
  }
  SUBCASE("witness dropped: unproved, declined") {
    Graph g = wide;
    g.validations.clear();  // no longer a verified graph: the pass alone
    PassContext ctx;
    REQUIRE(bool(runRanges(g, ctx)));
    auto changed = runAttentionRewrite(g, ctx);
    REQUIRE(bool(changed));
    CHECK_FALSE(*changed);
    REQUIRE(int64_t(ctx.remarks.size()) == cfg.numLayers);
    CHECK(ctx.remarks[0].message ==
          "cannot prove 1 <= %len.guarded <= 32: its range is [-2147483648, 2147483647] (a guard's clamp counts only "
          "when its witness is a declared validation output)");
  }
}

TEST_CASE("attention-rewrite: a paged read map fuses only when every word is proved a slot of the pool") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  auto traced = trace::traceModel(cfg, options(false, true, false, 2));
  REQUIRE(bool(traced));
  Graph g = *traced;
  for (ValueId p : g.params)
    if (g.value(p).name == "read") g.value(p).hi = 64;  // the pool has 64 slots: [0, 64] is one too many
  PassContext ctx;
  REQUIRE(bool(runRanges(g, ctx)));
  auto changed = runAttentionRewrite(g, ctx);
  REQUIRE(bool(changed));
  CHECK_FALSE(*changed);
  REQUIRE(int64_t(ctx.remarks.size()) == cfg.numLayers);
  CHECK(ctx.remarks[0].message ==
        "cannot prove every word of the read map %read is a slot of the pool [0, 64): its range is [0, 64]");
}

// Unit tests of the selection pass (lib/passes/selection.cpp) on fresh
// traces of the sparse-indexer family (examples/models/tiny-sparse.json) in
// every phase, KV layout, live setting and batch: after ranges ->
// attention-rewrite -> selection -> cleanup each layer has one BlockTopK and
// one SelectedAttention and no TopK or Attention is left, and the oracle gives
// the same outputs, states and witnesses as the primitive graph on fresh
// random inputs (a new seed each run, printed on failure) within
// |a - b| <= 1e-4 * (1 + |b|). A selection the ranges cannot bound declines
// with its remark and keeps the Attention; other attention is no candidate.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

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

int count(const Graph& g, Op op) {
  return int(std::count_if(g.eqns.begin(), g.eqns.end(), [&](const Eqn& e) { return e.op == op; }));
}

std::string remarksOf(const PassContext& ctx) {
  std::string out;
  for (const Remark& r : ctx.remarks) out += "[" + r.pass + "] " + r.eqn + ": " + r.message + "\n";
  return out;
}

// The remarks of one pass. attention-rewrite says of every sparse layer that
// its block mask stays additive (it is not the causal mask): that is what
// selection reads.
std::vector<Remark> remarksOf(const PassContext& ctx, const std::string& pass) {
  std::vector<Remark> out;
  for (const Remark& r : ctx.remarks)
    if (r.pass == pass) out.push_back(r);
  return out;
}

Graph selected(const Graph& g, PassContext& ctx) {
  Graph out = g;
  for (auto run : {runRanges, runAttentionRewrite, runSelection, runCleanup}) {
    auto changed = run(out, ctx);
    REQUIRE_MESSAGE(bool(changed), (changed ? "" : changed.error().str()));
  }
  auto ok = verify(out);
  REQUIRE_MESSAGE(bool(ok), (ok ? "" : ok.error().str()));
  return out;
}

void checkSameResults(const Graph& before, const Graph& after, uint64_t seed) {
  testing::checkSameResults(before, after, seed, relativeToBefore(kTol));
}

trace::ModelConfig sparseConfig() { return loadExampleConfig("tiny-sparse.json"); }

trace::TraceOptions options(int64_t tokens, bool paged, bool live, int64_t batch) {
  trace::TraceOptions o;
  o.phase = tokens > 1 ? trace::Phase::Prefill : trace::Phase::Decode;
  o.tokens = tokens;
  o.kv = paged ? trace::ops::KvLayout::Paged : trace::ops::KvLayout::Fixed;
  o.live = live;
  o.batch = batch;
  o.capacity = 64;  // 4 blocks of 16
  return o;
}

}  // namespace

TEST_CASE("selection: every sparse trace forms BlockTopK and SelectedAttention and keeps its results") {
  uint64_t seed = runSeed();
  trace::ModelConfig cfg = sparseConfig();
  for (int64_t tokens : {1, 20})  // a prefill across block boundaries
    for (bool paged : {false, true})
      for (bool live : {false, true})
        for (int64_t batch : {1, 2}) {
          trace::TraceOptions o = options(tokens, paged, live, batch);
          CAPTURE(tokens);
          CAPTURE(paged);
          CAPTURE(live);
          CAPTURE(batch);
          auto traced = trace::traceModel(cfg, o);
          REQUIRE_MESSAGE(bool(traced), (traced ? "" : traced.error().str()));
          PassContext ctx;
          Graph after = selected(*traced, ctx);
          CHECK_MESSAGE(remarksOf(ctx, "selection").empty(), remarksOf(ctx));
          for (const Remark& r : remarksOf(ctx, "attention-rewrite"))
            CHECK(r.message.rfind("the mask stays additive: ", 0) == 0);
          CHECK(count(after, Op::BlockTopK) == cfg.numLayers);
          CHECK(count(after, Op::SelectedAttention) == cfg.numLayers);
          CHECK(count(after, Op::Attention) == 0);
          CHECK(count(after, Op::TopK) == 0);
          for (const Eqn& e : after.eqns)
            if (e.op == Op::SelectedAttention) {
              CHECK(std::get<int64_t>(*e.attr("block")) == 16);
              CHECK(std::get<int64_t>(*e.attr("n_rep")) == cfg.numHeads / cfg.numKvHeads);
            } else if (e.op == Op::BlockTopK) {
              CHECK(std::get<int64_t>(*e.attr("k")) == 2);
            }
          checkSameResults(*traced, after, seed);
        }
}

TEST_CASE("selection: positions the ranges cannot bound decline with a remark and keep the Attention") {
  trace::ModelConfig cfg = sparseConfig();
  auto traced = trace::traceModel(cfg, options(1, false, false, 1));
  REQUIRE(bool(traced));
  Graph g = *traced;
  for (ValueId p : g.params)
    if (g.value(p).name == "pos") g.value(p).hi = 100;  // positions may pass the 64-slot cache
  PassContext ctx;
  Graph after = selected(g, ctx);
  CHECK(count(after, Op::Attention) == cfg.numLayers);
  CHECK(count(after, Op::SelectedAttention) == 0);
  std::vector<Remark> remarks = remarksOf(ctx, "selection");
  REQUIRE(int64_t(remarks.size()) == cfg.numLayers);
  CHECK(remarks[0].eqn == "%layers.0.attn.attention");
  CHECK(remarks[0].message == "cannot prove the query positions %positions are in [0, 64): their range is [0, 100]");
}

TEST_CASE("selection: dense attention is no candidate and gets no remark") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  auto traced = trace::traceModel(cfg, options(4, false, false, 1));
  REQUIRE(bool(traced));
  PassContext ctx;
  Graph after = selected(*traced, ctx);
  CHECK(count(after, Op::Attention) == cfg.numLayers);
  CHECK(ctx.remarks.empty());
}

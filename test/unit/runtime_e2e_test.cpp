// End-to-end tests of the runtime: graphs compiled with the real pipeline
// and code generator (runPipeline, planGraph, planBuffers, generateKernels,
// writePlan) for lavapipe, read back by the runtime's reader, run in a
// Session on the Vulkan backend and compared with the oracle on fresh random
// parameters: one elementwise op, and an IndexGuard with a state
// DynamicUpdateSlice over several steps, the state carried on both sides, a
// failing guard leaving the state as it was, and a tiny Llama decoding step
// after step (fixed cache, live length, paged pools through a permuted block
// table), the state carried on both sides.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <random>

#include "passes/pass.h"
#include "testing.h"
#include "vulkan_plan.h"

using namespace poot;

namespace {

// g through the passes, planned and emitted for lavapipe, in a Session.
std::unique_ptr<rt::Session> session(Graph g) {
  DeviceProfile d = testing::loadTarget("lavapipe");
  testing::runPasses(g, d);
  auto file = testing::planFileFor(g, d);
  REQUIRE_MESSAGE(bool(file), (file ? "" : file.error().str()));
  auto session = testing::lavapipeSession(file.take());
  REQUIRE_MESSAGE(bool(session), (session ? "" : session.error().str()));
  return session.take();
}

// The per-call parameters (inputs and slots) of `all`.
std::map<std::string, Tensor> perCall(const Graph& g, const std::map<std::string, Tensor>& all) {
  std::map<std::string, Tensor> out;
  for (ValueId id : g.params)
    if (g.value(id).storage == Storage::Input || g.value(id).storage == Storage::Slot)
      out[g.value(id).name] = all.at(g.value(id).name);
  return out;
}

}  // namespace

TEST_CASE("runtime e2e: one elementwise op matches the oracle") {
  const char* text = R"(graph add
input %a : f32[3,100]
input %b : f32[3,100]
%c = Add(%a, %b) : f32[3,100]
output %c
)";
  auto s = session(testing::parse(text));
  const Graph& g = s->plan().source;
  uint64_t seed = testing::freshSeed();
  CAPTURE(seed);
  auto params = completeParams(g, {}, seed);
  auto want = evaluate(g, params);
  REQUIRE(bool(want));
  auto got = s->step(perCall(g, params));
  REQUIRE_MESSAGE(bool(got), (got ? "" : got.error().str()));
  testing::checkClose("c", want->outputs.at("c"), got->outputs.at("c"), testing::relativeToLarger(0));
}

TEST_CASE("runtime e2e: a guarded state update over several steps matches the oracle") {
  const char* text = R"(graph guarded_update
slot %pos : i32[] range [0, 15]
state %cache : f32[1,16,8]
input %row : f32[1,1,8]
%p, %ok = IndexGuard(%pos) {lo=0, hi=11} : i32[], bool[]
%cache2 = DynamicUpdateSlice(%cache, %row, %p) {axis=1} : f32[1,16,8]
%out = Add(%cache2, %cache2) : f32[1,16,8]
output %out
state_out %cache = %cache2
validation %ok
)";
  auto s = session(testing::parse(text));
  const Graph& g = s->plan().source;
  uint64_t seed = testing::freshSeed();
  CAPTURE(seed);
  auto params = completeParams(g, {}, seed);
  REQUIRE(bool(s->setState("cache", params.at("cache"))));
  for (int pos = 0; pos < 14; ++pos) {
    CAPTURE(pos);
    params["pos"] = Tensor(testing::ty("i32[]"));
    params["pos"].set(0, pos);
    params["row"] = completeParams(g, {}, seed + uint64_t(pos) + 1).at("row");
    auto want = evaluate(g, params);
    REQUIRE(bool(want));
    auto got = s->step(perCall(g, params));
    auto state = s->readState("cache");
    REQUIRE(bool(state));
    if (pos > 11) {
      // The guard fails on both sides; the device's state is the oracle's old one.
      CHECK(!want->valid());
      REQUIRE(!got);
      CHECK(got.error().message == "validation failed: %ok");
      CHECK(state->bytes == params.at("cache").bytes);
      continue;
    }
    REQUIRE_MESSAGE(bool(got), (got ? "" : got.error().str()));
    testing::checkClose("out", want->outputs.at("out"), got->outputs.at("out"), testing::relativeToLarger(0));
    testing::checkClose("cache", want->states.at("cache"), *state, testing::relativeToLarger(0));
    params["cache"] = want->states.at("cache");
  }
}

TEST_CASE("runtime e2e: a tiny Llama decodes step after step as the oracle does, paged rows at their own positions") {
  for (const char* file : {"tiny-llama-decode.pg", "tiny-llama-decode-live.pg", "tiny-llama-decode-paged-live.pg"}) {
    CAPTURE(file);
    auto s = session(testing::loadGraphFile(testing::exampleGraph(file)));
    const Graph& g = s->plan().source;
    // The live graphs' guards run before any state write: no state copies.
    CHECK_FALSE(s->copiesStates());
    uint64_t seed = testing::freshSeed();
    CAPTURE(seed);
    auto params = completeParams(g, {}, seed);
    std::map<std::string, Tensor> weights;
    for (ValueId id : g.params) {
      const Value& v = g.value(id);
      if (v.storage == Storage::Weight) weights[v.name] = params.at(v.name);
      if (v.storage == Storage::State) REQUIRE(bool(s->setState(v.name, params.at(v.name))));
    }
    REQUIRE(bool(s->bindWeights(weights)));
    // Paged: row b's position t lives in pool slot perm[b * cap + t].
    std::vector<int32_t> perm;
    if (params.count("read")) {
      const Shape& rs = params.at("read").shape();
      for (int32_t i = 0; i < int32_t(rs[0] * rs[1]); ++i) perm.push_back(i);
      std::mt19937 rng{uint32_t(seed)};
      std::shuffle(perm.begin(), perm.end(), rng);
      for (int64_t i = 0; i < params.at("read").size(); ++i) params["read"].set(i, perm[size_t(i)]);
    }
    for (int pos = 0; pos < 6; ++pos) {
      CAPTURE(pos);
      // A paged step's rows at their own positions: row b at pos + 3b.
      for (int64_t b = 0; b < params.at("pos").size(); ++b) {
        int32_t at = pos + 3 * int32_t(b);
        params["pos"].set(b, at);
        if (params.count("write")) params["write"].set(b, perm[size_t(b * params.at("read").shape()[1] + at)]);
      }
      params["tokens"] = completeParams(g, {}, seed + uint64_t(pos) + 1).at("tokens");
      auto want = evaluate(g, params);
      REQUIRE_MESSAGE(bool(want), (want ? "" : want.error().str()));
      auto got = s->step(perCall(g, params));
      REQUIRE_MESSAGE(bool(got), (got ? "" : got.error().str()));
      testing::checkClose("logits", want->outputs.at("logits"), got->outputs.at("logits"),
                          testing::relativeToBefore(1e-4));
      for (const auto& [name, t] : want->states) {
        auto state = s->readState(name);
        REQUIRE(bool(state));
        testing::checkClose(name, t, *state, testing::relativeToBefore(1e-4));
        params[name] = t;
      }
    }
  }
}

// End-to-end tests of the runtime: graphs compiled with the real pipeline
// and code generator (runPipeline, planGraph, planBuffers, generateKernels,
// writePlan) for lavapipe, read back by the runtime's reader, run in a
// Session on the Vulkan backend and compared with the oracle on fresh random
// parameters: one elementwise op, and an IndexGuard with a state
// DynamicUpdateSlice over several steps, the state carried on both sides, a
// failing guard leaving the state as it was, and a tiny Llama decoding step
// after step. The Llama runs its primitive decomposition (the pipeline
// stopped after the ranges pass): the fused attention kernel is still being
// written.
#include <doctest/doctest.h>

#include <cstdlib>

#include "codegen/codegen.h"
#include "passes/pass.h"
#include "plan/buffers.h"
#include "plan/plan_file.h"
#include "plan/planner.h"
#include "runtime/backends/vulkan.h"
#include "runtime/session.h"
#include "testing.h"

using namespace poot;

namespace {

rt::PlanFile compileWithKernels(Graph g, const std::string& stopAfter) {
  DeviceProfile d = testing::loadTarget("lavapipe");
  PassContext ctx;
  for (int i = 0; i < 3; ++i) ctx.gridLimits[i] = d.grid_limits[i];
  auto s = runPipeline(g, ctx, {stopAfter, {}});
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  auto p = planGraph(g, d);
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  p->target = d.target;
  p->deviceArch = d.arch;
  auto b = planBuffers(*p);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  auto k = generateKernels(*p, d);
  REQUIRE_MESSAGE(bool(k), (k ? "" : k.error().str()));
  auto f = rt::readPlanFile(writePlan(*p), "t.plan");
  REQUIRE_MESSAGE(bool(f), (f ? "" : f.error().str()));
  return f.take();
}

std::unique_ptr<rt::Session> session(Graph g, const std::string& stopAfter = "") {
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  auto backend = rt::createVulkanBackend({"lavapipe"});
  REQUIRE_MESSAGE(bool(backend), (backend ? "" : backend.error().str()));
  auto s = rt::Session::create(compileWithKernels(std::move(g), stopAfter), backend.take());
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  return s.take();
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

TEST_CASE("runtime e2e: a tiny Llama decodes step after step as the oracle does") {
  auto s = session(testing::loadGraphFile(testing::exampleGraph("tiny-llama-decode.pg")), "ranges");
  const Graph& g = s->plan().source;
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
  for (int pos = 0; pos < 6; ++pos) {
    CAPTURE(pos);
    params["pos"].set(0, pos);
    params["tokens"] = completeParams(g, {}, seed + uint64_t(pos) + 1).at("tokens");
    auto want = evaluate(g, params);
    REQUIRE(bool(want));
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

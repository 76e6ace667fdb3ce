// Unit tests of the runtime's Session (lib/runtime/session.h). Binds and the
// device check run on a fake backend that counts uploads and runs, so a
// refused bind is seen to upload and run nothing and to leave every state as
// it was: wrong shape, wrong dtype, a missing input, a slot out of range, a
// paged read map word outside the pool, a write map that names a slot twice
// or one outside the pool, a token id outside the embedding table, each with
// its typed error. Plans for another device, target, arch or smaller limits
// (bindings per kernel among them) are refused, and truncated or
// corrupted plan files too. The validation channel runs on lavapipe with
// kernels compiled from GLSL at test time: a failing guard publishes nothing
// and leaves the state byte-identical, both when the guard runs before the
// state write (two phases) and when it runs after it (states copied aside).
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <unistd.h>

#include "ir/io.h"
#include "passes/pass.h"
#include "plan/buffers.h"
#include "plan/plan_file.h"
#include "plan/planner.h"
#include "runtime/backends/vulkan.h"
#include "runtime/session.h"
#include "fake_backend.h"
#include "lavapipe.h"
#include "testing.h"

using namespace poot;
using testing::Calls;
using testing::compileExample;
using testing::compilePlan;
using testing::exampleText;
using testing::FakeBackend;
using testing::glsl;
using testing::lavapipeInfo;
using testing::planBytes;
using testing::withPlaceholderCode;
using testing::lavapipe;

namespace {


Expected<std::unique_ptr<rt::Session>> fakeSession(rt::PlanFile p, rt::DeviceInfo info, Calls* calls,
                                                   rt::SessionOptions opts = {}) {
  return rt::Session::create(withPlaceholderCode(std::move(p)), std::make_unique<FakeBackend>(std::move(info), calls),
                             opts);
}

// Parameters of the plan's graph from the generator, split by storage class.
struct Params {
  std::map<std::string, Tensor> weights, states, perCall;
};

Params params(const Graph& g, uint64_t seed) {
  Params out;
  auto all = completeParams(g, {}, seed);
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    auto& to = v.storage == Storage::Weight ? out.weights : v.storage == Storage::State ? out.states : out.perCall;
    to[v.name] = all.at(v.name);
  }
  return out;
}

void setWord(Tensor& t, int64_t i, int32_t v) { std::memcpy(t.bytes.data() + size_t(i) * 4, &v, 4); }

// GLSL for the two kernels of kGuarded: IndexGuard {lo=1, hi=4} and Add.
const char* kGuardGlsl = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer A { int len_[]; };
layout(set = 0, binding = 1) buffer B { int guarded[]; };
layout(set = 0, binding = 2) buffer C { uint witness[]; };
void main() {
  if (gl_GlobalInvocationID.x != 0) return;
  int v = len_[0];
  guarded[0] = clamp(v, 1, 4);
  witness[0] = (v >= 1 && v <= 4) ? 1u : 0u;
}
)";
const char* kAddGlsl = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer A { float a[]; };
layout(set = 0, binding = 1) buffer B { float b[]; };
layout(set = 0, binding = 2) buffer C { float c[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < c.length()) c[i] = a[i] + b[i];
}
)";

// A guard whose guarded value is an output and a state written in place,
// independent of each other, so the tests may put either dispatch first.
const char* kGuarded = R"(graph guarded
slot %len : i32[] range [0, 8]
state %s : f32[4]
input %x : f32[4]
%g, %ok = IndexGuard(%len) {lo=1, hi=4} : i32[], bool[]
%s2 = Add(%s, %x) : f32[4]
output %g
state_out %s = %s2
validation %ok
)";

// kGuarded with its kernels from GLSL, the guard's dispatch first or last.
rt::PlanFile guardedPlan(bool guardFirst) {
  rt::PlanFile p = compilePlan(kGuarded);
  REQUIRE(p.dispatches.size() == 2);
  for (rt::Kernel& k : p.kernels) {
    REQUIRE((k.request.op == Op::IndexGuard || k.request.op == Op::Add));
    k.blob = glsl(k.request.op == Op::IndexGuard ? kGuardGlsl : kAddGlsl);
    k.entry = "main";
  }
  bool first = p.kernels[size_t(p.dispatches[0].kernel)].request.op == Op::IndexGuard;
  if (first != guardFirst) std::swap(p.dispatches[0], p.dispatches[1]);
  return p;
}

}  // namespace

TEST_CASE("runtime session: a refused bind uploads nothing, runs nothing and keeps every state") {
  rt::PlanFile plan = compileExample("tiny-llama-decode-paged-live.pg");
  Graph g = plan.source;
  Calls calls;
  auto session = fakeSession(plan, lavapipeInfo(), &calls);
  REQUIRE_MESSAGE(bool(session), (session ? "" : session.error().str()));
  rt::Session& s = **session;
  uint64_t seed = testing::freshSeed();
  CAPTURE(seed);
  Params p = params(g, seed);

  // Before the weights are bound, a step is refused.
  auto unbound = s.step(p.perCall);
  REQUIRE(!unbound);
  CHECK(unbound.error().kind == ErrorKind::Bind);
  CHECK(unbound.error().message.find("is not bound") != std::string::npos);

  REQUIRE(bool(s.bindWeights(p.weights)));
  for (const auto& [name, t] : p.states) REQUIRE(bool(s.setState(name, t)));
  // The generator's values are a valid bind: it runs.
  Calls before = calls;
  auto good = s.step(p.perCall);
  REQUIRE_MESSAGE(bool(good), (good ? "" : good.error().str()));
  CHECK(calls.runs > before.runs);
  CHECK(good->outputs.count("logits") == 1);

  struct Case {
    const char* what;
    std::function<void(std::map<std::string, Tensor>&)> change;
    ErrorKind kind;
    std::string message;
  };
  std::vector<Case> cases = {
      {"wrong shape", [](auto& m) { m["tokens"] = Tensor(testing::ty("i32[2,2]")); }, ErrorKind::Bind,
       "input %tokens is bound to i32[2,2], expected i32[2,1]"},
      {"wrong dtype", [](auto& m) { m["tokens"] = Tensor(testing::ty("i64[2,1]")); }, ErrorKind::Bind,
       "input %tokens is bound to i64[2,1], expected i32[2,1]"},
      {"missing input", [](auto& m) { m.erase("tokens"); }, ErrorKind::Bind, "input %tokens is not bound"},
      {"missing slot", [](auto& m) { m.erase("read"); }, ErrorKind::Bind, "slot %read is not bound"},
      {"unknown name", [](auto& m) { m["nope"] = Tensor(testing::ty("f32[1]")); }, ErrorKind::Bind,
       "the plan has no input or slot %nope"},
      {"a state passed per call", [&](auto& m) { m["layers.0.k_pool"] = p.states.at("layers.0.k_pool"); },
       ErrorKind::Bind, "%layers.0.k_pool is a state, not an input or a slot"},
      {"slot out of range", [](auto& m) { setWord(m["pos"], 0, 64); }, ErrorKind::Range,
       "slot %pos word 0 has value 64 outside its declared range [0, 63]"},
      {"read map word outside the pool", [](auto& m) { setWord(m["read"], 70, 128); }, ErrorKind::Range,
       "slot %read word 70 has value 128 outside its declared range [0, 127]"},
      {"read map word negative", [](auto& m) { setWord(m["read"], 3, -1); }, ErrorKind::Range,
       "slot %read word 3 has value -1 outside its declared range [0, 127]"},
      {"write map names a slot twice",
       [](auto& m) {
         setWord(m["write"], 0, 17);
         setWord(m["write"], 1, 17);
       },
       ErrorKind::Bind, "slot map %write: pool slot 17 is named twice (words 0 and 1)"},
      {"write map word outside the pool", [](auto& m) { setWord(m["write"], 1, 128); }, ErrorKind::Bind,
       "slot map %write: word 1 is 128, not -1 or a slot of the pool [0, 128)"},
      {"write map word below -1", [](auto& m) { setWord(m["write"], 0, -2); }, ErrorKind::Bind,
       "slot map %write: word 0 is -2, not -1 or a slot of the pool [0, 128)"},
      // Token ids index the embedding table of 256 rows.
      {"token id past the vocabulary", [](auto& m) { setWord(m["tokens"], 1, 100000); }, ErrorKind::Range,
       "input %tokens word 1 has value 100000 outside [0, 255], the table axis it indexes (Gather)"},
      {"token id just past the vocabulary", [](auto& m) { setWord(m["tokens"], 0, 256); }, ErrorKind::Range,
       "input %tokens word 0 has value 256 outside [0, 255], the table axis it indexes (Gather)"},
      {"negative token id", [](auto& m) { setWord(m["tokens"], 0, -5); }, ErrorKind::Range,
       "input %tokens word 0 has value -5 outside [0, 255], the table axis it indexes (Gather)"},
      {"token id INT_MAX", [](auto& m) { setWord(m["tokens"], 1, INT32_MAX); }, ErrorKind::Range,
       "input %tokens word 1 has value 2147483647 outside [0, 255], the table axis it indexes (Gather)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    auto inputs = p.perCall;
    c.change(inputs);
    Calls at = calls;
    auto r = s.step(inputs);
    REQUIRE(!r);
    CHECK(r.error().kind == c.kind);
    CHECK(r.error().message == c.message);
    CHECK(calls.uploads == at.uploads);
    CHECK(calls.runs == at.runs);
    CHECK(calls.copies == at.copies);
    for (const auto& [name, t] : p.states) {
      auto now = s.readState(name);
      REQUIRE(bool(now));
      CHECK(now->bytes == t.bytes);
    }
  }

  // The last row of the table is a valid token id.
  auto lastRow = p.perCall;
  setWord(lastRow["tokens"], 1, 255);
  CHECK(bool(s.step(lastRow)));

  // Padding words (-1) in the write map are fine.
  auto inputs = p.perCall;
  setWord(inputs["write"], 0, -1);
  setWord(inputs["write"], 1, 5);
  CHECK(bool(s.step(inputs)));

  // Weights and states are checked the same way.
  auto w = s.bindWeights({{"model.norm.weight", Tensor(testing::ty("f32[65]"))}});
  REQUIRE(!w);
  CHECK(w.error().message == "weight %model.norm.weight is bound to f32[65], expected f32[64]");
  CHECK(s.bindWeights({{"nope", Tensor(testing::ty("f32[1]"))}}).error().message == "the plan has no weight %nope");
  CHECK(s.setState("layers.0.k_pool", Tensor(testing::ty("f32[1]"))).error().kind == ErrorKind::Bind);
  CHECK(!s.readState("tokens"));
}

TEST_CASE("runtime session: a plan for another device, target, arch or smaller limits is refused") {
  rt::PlanFile plan = compileExample("tiny-llama-decode.pg");
  Calls calls;
  auto refusal = [&](rt::DeviceInfo info, const rt::PlanFile& p, rt::SessionOptions opts = {}) {
    auto s = fakeSession(p, std::move(info), &calls, opts);
    REQUIRE(!s);
    CHECK(s.error().kind == ErrorKind::Capability);
    return s.error();
  };

  rt::DeviceInfo other = lavapipeInfo();
  other.slug = "nvidia-h200";
  other.name = "NVIDIA H200";
  Error e = refusal(other, plan);
  CHECK(e.capability == "Device");
  CHECK(e.message.find("built for device 'lavapipe', this is 'nvidia-h200'") != std::string::npos);
  CHECK(bool(fakeSession(plan, other, &calls, {true})));

  // A profile named after the device, with a suffix, is the device.
  rt::PlanFile tuned = plan;
  tuned.device.name = "lavapipe-tuned";
  CHECK(bool(fakeSession(tuned, lavapipeInfo(), &calls)));
  tuned.device.name = "lavapipes";
  CHECK(refusal(lavapipeInfo(), tuned).capability == "Device");

  rt::DeviceInfo ptx = lavapipeInfo();
  ptx.target = rt::Target::Ptx;
  CHECK(refusal(ptx, plan, {true}).capability == "Target");

  rt::DeviceInfo old = lavapipeInfo();
  old.arch = "vulkan1.2";
  CHECK(refusal(old, plan).message.find("the plan needs vulkan1.3") != std::string::npos);

  rt::DeviceInfo narrow = lavapipeInfo();
  narrow.maxWorkgroupSize = 32;
  CHECK(refusal(narrow, plan).capability == "WorkgroupSize");

  rt::DeviceInfo small = lavapipeInfo();
  for (int64_t& g : small.gridLimits) g = 1;
  CHECK(refusal(small, plan).capability == "GridLimit");

  rt::DeviceInfo tiny = lavapipeInfo();
  tiny.maxBindingBytes = 64;
  CHECK(refusal(tiny, plan).capability == "BufferBytes");

  rt::DeviceInfo few = lavapipeInfo();
  few.maxBindings = 2;
  Error bindings = refusal(few, plan);
  CHECK(bindings.capability == "BindingLimit");
  CHECK(bindings.message.find("storage buffers, device 'llvmpipe (fake)' allows 2 per kernel") != std::string::npos);

  rt::PlanFile future = plan;
  future.device.arch = "vulkan1.99999999999999999999";
  CHECK(refusal(lavapipeInfo(), future).message.find("the plan needs vulkan1.99999999999999999999") !=
        std::string::npos);

  // A kernel without code is a broken file, not a device problem.
  auto empty = rt::Session::create(plan, std::make_unique<FakeBackend>(lavapipeInfo(), &calls));
  REQUIRE(!empty);
  CHECK(empty.error().kind == ErrorKind::Format);
  CHECK(empty.error().message.find("has no code") != std::string::npos);
}

TEST_CASE("runtime session: truncated and corrupted plan files are refused") {
  std::string bytes = planBytes(exampleText("decode-attention.pg"));
  auto dir = std::filesystem::temp_directory_path() / ("poot-runtime-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (size_t keep : {size_t(3), bytes.size() / 2, bytes.size() - 8}) {
    CAPTURE(keep);
    std::string path = (dir / "cut.plan").string();
    REQUIRE(bool(writeFileAtomic(path, bytes.substr(0, keep))));
    auto f = rt::loadPlanFile(path);
    REQUIRE(!f);
    CHECK(f.error().kind == ErrorKind::Format);
  }
  std::string bad = bytes;
  bad[5] = 'X';  // the file identifier
  auto f = rt::readPlanFile(bad, "t.plan");
  REQUIRE(!f);
  CHECK(f.error().kind == ErrorKind::Format);
  std::string vtable = bytes;
  uint32_t root;
  std::memcpy(&root, vtable.data(), 4);
  uint32_t huge = 0x7ffffff0;
  std::memcpy(vtable.data() + root, &huge, 4);  // the root table's vtable offset
  f = rt::readPlanFile(vtable, "t.plan");
  REQUIRE(!f);
  CHECK(f.error().kind == ErrorKind::Format);
  std::filesystem::remove_all(dir);
}

TEST_CASE("runtime session: a failing guard publishes nothing and leaves the state byte-identical") {
  for (bool guardFirst : {true, false}) {
    CAPTURE(guardFirst);
    auto session = rt::Session::create(guardedPlan(guardFirst), lavapipe());
    REQUIRE_MESSAGE(bool(session), (session ? "" : session.error().str()));
    rt::Session& s = **session;
    // Guard first: two phases, the state write never runs. Guard last: the
    // state is written, then restored from its copy.
    CHECK(s.copiesStates() == !guardFirst);

    Tensor state = testing::randomTensor(testing::ty("f32[4]"));
    Tensor x = testing::randomTensor(testing::ty("f32[4]"));
    for (Tensor* t : {&state, &x})
      for (int64_t i = 0; i < 4; ++i) t->set(i, double(int(t->bytes[size_t(i) * 4]) - 128) / 8);  // finite
    REQUIRE(bool(s.setState("s", state)));
    Tensor len(testing::ty("i32[]"));

    // len = 6 is within the slot's declared range but not the guard's.
    setWord(len, 0, 6);
    auto bad = s.step({{"x", x}, {"len", len}});
    REQUIRE(!bad);
    CHECK(bad.error().kind == ErrorKind::Range);
    CHECK(bad.error().message == "validation failed: %ok");
    auto after = s.readState("s");
    REQUIRE(bool(after));
    CHECK(after->bytes == state.bytes);

    // len = 3 passes: the output is the guarded length, the state s + x.
    setWord(len, 0, 3);
    auto good = s.step({{"x", x}, {"len", len}});
    REQUIRE_MESSAGE(bool(good), (good ? "" : good.error().str()));
    CHECK(good->outputs.at("g").get(0) == 3);
    auto sum = s.readState("s");
    REQUIRE(bool(sum));
    for (int64_t i = 0; i < 4; ++i) CHECK(sum->get(i) == float(state.get(i) + x.get(i)));
    // Outputs left on the device, then read in part: the same values.
    auto quiet = s.step({{"x", x}, {"len", len}}, false);
    REQUIRE(bool(quiet));
    CHECK(quiet->outputs.empty());
    Tensor g(good->outputs.at("g").type);
    REQUIRE(bool(s.readOutput("g", 0, 1, g.bytes.data())));
    CHECK(g.bytes == good->outputs.at("g").bytes);
    auto past = s.readOutput("g", 1, 1, g.bytes.data());
    REQUIRE(!past);
    CHECK(past.error().kind == ErrorKind::Range);
    CHECK(past.error().message == "elements [1, 2) of output %g are not all among its 1");
    auto missing = s.readOutput("s", 0, 1, g.bytes.data());
    REQUIRE(!missing);
    CHECK(missing.error().kind == ErrorKind::Bind);
    REQUIRE(bool(s.setState("s", *sum)));  // the state before this step, for the failure below

    // And fails again with the new state kept.
    setWord(len, 0, 0);
    REQUIRE(!s.step({{"x", x}, {"len", len}}));
    auto kept = s.readState("s");
    REQUIRE(bool(kept));
    CHECK(kept->bytes == sum->bytes);
  }
}

TEST_CASE("runtime session: a second session over shared weight and state buffers allocates none of them") {
  rt::PlanFile plan = withPlaceholderCode(compileExample("tiny-llama-decode-paged-live.pg"));
  Calls calls;
  auto backend = std::make_shared<FakeBackend>(lavapipeInfo(), &calls);
  auto first = rt::Session::create(plan, backend);
  REQUIRE(first);
  std::map<std::string, rt::SharedBuffer> shared = (*first)->sharedBuffers();
  CHECK(shared.size() == 21 + 4);  // weights and pools
  int64_t own = plan.arenaBytes;    // what the second session allocates: the arena and its per-step buffers
  for (const rt::Buffer& b : plan.buffers)
    if (!b.inArena() && b.role != rt::Role::View && b.role != rt::Role::Weight && b.role != rt::Role::State)
      own += b.bytes;
  size_t before = calls.allocations.size();
  int uploads = calls.uploads;
  auto second = rt::Session::create(plan, backend, {false, shared});
  REQUIRE_MESSAGE(bool(second), (second ? "" : second.error().str()));
  int64_t allocated = 0;
  for (size_t i = before; i < calls.allocations.size(); ++i) allocated += calls.allocations[i];
  CHECK(allocated == own);
  CHECK(calls.uploads == uploads);  // the shared pools are not zeroed again
  CHECK((*second)->sharedBuffers().at("layers.1.v_pool").buffer == shared.at("layers.1.v_pool").buffer);

  // Refused before anything is allocated: a name that is no weight or
  // state of the plan, and a buffer of another type.
  before = calls.allocations.size();
  auto wrong = shared;
  wrong["layers.0.k_pool"].type = testing::ty("f32[64,2,16]");
  auto mistyped = rt::Session::create(plan, backend, {false, wrong});
  REQUIRE_FALSE(mistyped);
  CHECK(mistyped.error().kind == ErrorKind::Bind);
  CHECK(mistyped.error().message == "state %layers.0.k_pool is f32[128,2,16], the shared buffer holds f32[64,2,16]");
  for (const char* name : {"tokens", "nope"}) {
    auto odd = shared;
    odd[name] = shared.at("layers.0.k_pool");
    auto refused = rt::Session::create(plan, backend, {false, odd});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().message == std::string("the plan has no weight or state %") + name + " to share");
  }
  CHECK(calls.allocations.size() == before);
}

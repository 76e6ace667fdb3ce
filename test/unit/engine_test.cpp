// Unit tests of the serving engine (engine/engine.h) on the fake backend
// (fake_backend.h), with the tiny Llama's paged prefill and decode plans:
// the two Sessions share one device copy of the weights and the pools (the
// backend's allocations are the prefill Session's and the decode Session's
// own per-step buffers only, and after the start no weight or pool buffer
// is written or read back by the host, nor copied), however the steps
// alternate between the plans; tokens reach the sink as they come, each
// request ending at its max-new tokens or a stop id, or when cancelled,
// queued or running; a step that fails on the device changes nothing
// (stepping again gives what a run without the failure gives, sampled
// tokens included); bad requests are refused with typed errors and queue
// nothing. Tokens against the oracle are tested on lavapipe by
// test/lit/generate (poot generate runs this engine) and the Python test.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <tuple>

#include "engine/engine.h"
#include "fake_backend.h"
#include "ir/text.h"
#include "trace/model.h"

using namespace poot;
using testing::Calls;
using testing::FakeBackend;

namespace {

const char* kPrefill = "tiny-llama-prefill-paged-live.pg";  // 2 rows of 8 tokens
const char* kDecode = "tiny-llama-decode-paged-live.pg";    // 2 rows; both: capacity 64, 8 blocks

engine::ModelPlans plans() {
  auto p = engine::ModelPlans::check(testing::withPlaceholderCode(testing::compileExample(kPrefill)), "p.plan",
                                     testing::withPlaceholderCode(testing::compileExample(kDecode)), "d.plan");
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  return p.take();
}

struct Served {
  Calls calls;
  std::vector<engine::TokenEvent> events;
  std::unique_ptr<engine::Engine> engine;
};

// An engine on the fake backend whose sink keeps every event.
std::unique_ptr<Served> serve() {
  auto s = std::make_unique<Served>();
  engine::ModelPlans p = plans();
  auto weights = engine::ModelWeights::bind(p.graph(), "");
  REQUIRE_MESSAGE(bool(weights), (weights ? "" : weights.error().str()));
  Served* self = s.get();
  auto e = engine::Engine::create(std::move(p), std::make_shared<FakeBackend>(testing::lavapipeInfo(), &s->calls),
                                  weights.take(),
                                  {.onToken = [self](const engine::TokenEvent& t) { self->events.push_back(t); }});
  REQUIRE_MESSAGE(bool(e), (e ? "" : e.error().str()));
  s->engine = e.take();
  return s;
}

engine::Request request(int32_t length, int32_t maxNew, std::set<int32_t> stop = {}) {
  engine::Request q;
  for (int32_t i = 0; i < length; ++i) q.prompt.push_back((7 * i + 3) % 256);
  q.maxNew = maxNew;
  q.stop = std::move(stop);
  return q;
}

// Steps until nothing is left, returning the steps' plans in order.
std::vector<bool> runAll(engine::Engine& e) {
  std::vector<bool> prefills;
  for (int guard = 0; guard < 1000; ++guard) {
    auto step = e.step();
    REQUIRE_MESSAGE(bool(step), (step ? "" : step.error().str()));
    if (!*step) return prefills;
    prefills.push_back((*step)->plan == kv::Plan::Prefill);
  }
  FAIL("the engine never finished");
  return prefills;
}

}  // namespace

TEST_CASE("engine: prefill and decode share one device copy of the weights and the pools") {
  auto s = serve();
  // What the backend holds: the prefill Session's arena and every buffer of
  // its own (weights and pools among them, in plan order after the arena),
  // then the decode Session's arena and its per-step buffers only.
  rt::PlanFile p = testing::compileExample(kPrefill), d = testing::compileExample(kDecode);
  std::vector<int64_t> want{p.arenaBytes};
  std::set<rt::BufferId> shared;  // the weight and pool buffers, by the backend's ids
  int64_t weightBytes = 0, poolBytes = 0, smallestPool = INT64_MAX;
  for (const rt::Buffer& b : p.buffers) {
    if (b.inArena() || b.role == rt::Role::View) continue;
    if (b.role == rt::Role::Weight || b.role == rt::Role::State) shared.insert(rt::BufferId(want.size()));
    if (b.role == rt::Role::Weight) weightBytes += b.bytes;
    if (b.role == rt::Role::State) poolBytes += b.bytes, smallestPool = std::min(smallestPool, b.bytes);
    want.push_back(b.bytes);
  }
  want.push_back(d.arenaBytes);
  for (const rt::Buffer& b : d.buffers)
    if (!b.inArena() && b.role != rt::Role::View && b.role != rt::Role::Weight && b.role != rt::Role::State)
      want.push_back(b.bytes);
  CHECK(s->calls.allocations == want);
  REQUIRE(shared.size() == 21 + 4);  // the tiny Llama's weights and its four pools
  // At the start, the weights went up once and the pools were zeroed once.
  int64_t startUp = 0;
  for (const auto& [buffer, bytes] : s->calls.uploaded) {
    CHECK(shared.count(buffer) == 1);
    startUp += bytes;
  }
  CHECK(startUp == weightBytes + poolBytes);

  // Two prompts, then a third once a decode step has run, so the plans
  // alternate: prefill, decode, prefill again, decode.
  size_t started = s->calls.uploaded.size();
  REQUIRE(s->engine->submit(request(5, 4)));
  REQUIRE(s->engine->submit(request(11, 4)));
  bool decoded = false;
  while (!decoded) {
    auto step = s->engine->step();
    REQUIRE(step);
    REQUIRE(*step);
    decoded = (*step)->plan == kv::Plan::Decode;
  }
  REQUIRE(s->engine->submit(request(20, 3)));
  std::vector<bool> rest = runAll(*s->engine);
  CHECK(std::count(rest.begin(), rest.end(), true) > 0);
  CHECK(std::count(rest.begin(), rest.end(), false) > 0);
  CHECK(s->engine->done());
  // Nothing allocated since the start; no weight or pool written, read back
  // or copied; every transfer smaller than one pool.
  CHECK(s->calls.allocations.size() == want.size());
  CHECK(s->calls.copies == 0);
  for (size_t i = started; i < s->calls.uploaded.size(); ++i) {
    CHECK(shared.count(s->calls.uploaded[i].first) == 0);
    CHECK(s->calls.uploaded[i].second < smallestPool);
  }
  REQUIRE(!s->calls.downloaded.empty());
  for (const auto& [buffer, bytes] : s->calls.downloaded) {
    CHECK(shared.count(buffer) == 0);
    CHECK(bytes < smallestPool);
  }
  CHECK(s->engine->stats().generated == 4 + 4 + 3);
}

TEST_CASE("engine: tokens stream as they come and requests end at max-new, a stop id or a cancel") {
  auto s = serve();
  engine::Engine& e = *s->engine;
  // The fake device's logits are all equal, so every greedy token is 0.
  auto a = e.submit(request(5, 3));             // three tokens, then Length
  auto b = e.submit(request(11, 4, {0}));       // stops at its first token
  auto c = e.submit(request(9, 4));             // waits (two rows), cancelled while queued
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  CHECK(*a == 0);
  CHECK(*c == 2);
  auto queued = e.cancel(*c);
  REQUIRE(queued);
  CHECK(*queued);
  REQUIRE(s->events.size() == 1);
  CHECK(s->events[0].request == 2);
  CHECK(s->events[0].token == -1);
  CHECK(s->events[0].finish == kv::Finish::Cancelled);
  auto again = e.cancel(*c);
  REQUIRE(again);
  CHECK_FALSE(*again);
  auto unknown = e.cancel(9);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().kind == ErrorKind::Usage);
  CHECK(unknown.error().message == "no request 9 (3 were submitted)");
  // A running request cancelled after its first token.
  auto d = e.submit(request(3, 10));
  REQUIRE(d);
  while (std::none_of(s->events.begin(), s->events.end(), [&](const auto& t) { return t.request == *d; })) {
    auto step = e.step();
    REQUIRE(step);
    REQUIRE(*step);
  }
  REQUIRE(e.cancel(*d));
  runAll(e);
  std::map<int64_t, std::vector<engine::TokenEvent>> by;
  for (const auto& t : s->events) by[t.request].push_back(t);
  REQUIRE(by[0].size() == 3);
  CHECK(by[0][0].finish == kv::Finish::None);
  CHECK(by[0][1].finish == kv::Finish::None);
  CHECK(by[0][2].finish == kv::Finish::Length);
  REQUIRE(by[1].size() == 1);
  CHECK(by[1][0].token == 0);
  CHECK(by[1][0].finish == kv::Finish::Stop);
  REQUIRE(by[2].size() == 1);
  REQUIRE(by[3].size() >= 2);
  CHECK(by[3].back().token == -1);
  CHECK(by[3].back().finish == kv::Finish::Cancelled);
  CHECK(int64_t(by[3].size()) - 1 < 10);
  CHECK(e.finish(0) == kv::Finish::Length);
  CHECK(e.finish(1) == kv::Finish::Stop);
  CHECK(e.finish(2) == kv::Finish::Cancelled);
  CHECK(e.finish(3) == kv::Finish::Cancelled);
  // Every token the stats count reached the sink.
  CHECK(int64_t(s->events.size()) - 2 == e.stats().generated);
  CHECK(e.done());
}

TEST_CASE("engine: a request the plans cannot serve is refused and queues nothing") {
  auto s = serve();
  engine::Engine& e = *s->engine;
  struct Case {
    const char* what;
    engine::Request q;
    ErrorKind kind;
    const char* message;
  };
  engine::Request base = request(4, 2);
  auto with = [&](auto change) {
    engine::Request q = base;
    change(q);
    return q;
  };
  std::vector<Case> cases{
      {"empty", with([](auto& q) { q.prompt.clear(); }), ErrorKind::Usage, "a sequence starts with at least one token"},
      {"vocab", with([](auto& q) { q.prompt[2] = 256; }), ErrorKind::Range,
       "token 2 of the prompt is 256, outside the vocabulary [0, 256)"},
      {"negative", with([](auto& q) { q.prompt[0] = -1; }), ErrorKind::Range,
       "token 0 of the prompt is -1, outside the vocabulary [0, 256)"},
      {"no tokens", with([](auto& q) { q.maxNew = 0; }), ErrorKind::Usage,
       "a request generates at least one token, this one asks for 0"},
      {"capacity", with([](auto& q) { q.maxNew = 62; }), ErrorKind::Range,
       "a prompt of 4 tokens and 61 more to compute passes the capacity of 64"},
      {"temperature", with([](auto& q) { q.sampling.temperature = -1; }), ErrorKind::Usage,
       "a temperature is finite and at least 0 (0 is greedy), not -1.000000"},
      {"nan", with([](auto& q) { q.sampling.temperature = std::nan(""); }), ErrorKind::Usage, "a temperature is finite"},
      {"top-p", with([](auto& q) { q.sampling.topP = 0; }), ErrorKind::Usage, "top_p is in (0, 1], not 0.000000"},
      {"top-k", with([](auto& q) { q.sampling.topK = -1; }), ErrorKind::Usage, "top_k is at least 0 (0: every token), not -1"},
      {"min-p", with([](auto& q) { q.sampling.minP = 1.5; }), ErrorKind::Usage, "min_p is in [0, 1] (0: every token), not 1.500000"},
      {"min-p nan", with([](auto& q) { q.sampling.minP = std::nan(""); }), ErrorKind::Usage, "min_p is in [0, 1]"},
      {"repetition", with([](auto& q) { q.sampling.repetitionPenalty = 0; }), ErrorKind::Usage,
       "repetition_penalty is finite and above 0 (1: off), not 0.000000"},
      {"frequency", with([](auto& q) { q.sampling.frequencyPenalty = 2.5; }), ErrorKind::Usage,
       "frequency_penalty is in [-2, 2] (0: off), not 2.500000"},
      {"presence nan", with([](auto& q) { q.sampling.presencePenalty = std::nan(""); }), ErrorKind::Usage,
       "presence_penalty is in [-2, 2]"},
      {"identity", with([](auto& q) { q.identity = 5; }), ErrorKind::Usage, "no weights of identity 5"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    auto r = e.submit(c.q);
    REQUIRE_FALSE(r);
    CHECK(r.error().kind == c.kind);
    CHECK(r.error().message.rfind(c.message, 0) == 0);
  }
  CHECK(e.requests() == 0);
  CHECK(e.done());
  auto idle = e.step();
  REQUIRE(idle);
  CHECK_FALSE(*idle);
  CHECK(s->events.empty());
}

TEST_CASE("engine: a failed step changes nothing, and stepping again runs it again") {
  // Sampled at temperature 1 over the fake device's equal logits, every
  // token is a uniform draw of the request's generator: a step that failed
  // but had drawn for some rows, or committed, would change the tokens after
  // it. The failures: a device run, and each download of the first step
  // (the witnesses, then one row of logits after another: its two rows
  // sample, so a failed second read comes after the first row's draw).
  struct Outcome {
    std::vector<std::tuple<int64_t, int32_t, kv::Finish>> events;
    int failures = 0;
  };
  auto run = [](int failAt, int download) {  // download 0: fail a run; n: fail the step's n-th download
    auto s = serve();
    for (int32_t length : {5, 7, 20}) {
      engine::Request q = request(length, 5);
      q.sampling = {1.0, 1.0, 11};
      REQUIRE(s->engine->submit(q));
    }
    Outcome out;
    bool armed = failAt >= 0;
    for (int steps = 0;;) {
      size_t events = s->events.size();
      kv::BatchStats before = s->engine->stats();
      if (armed && steps == failAt) {
        armed = false;
        if (download > 0) s->calls.failDownload = download;
        else s->calls.failRuns = 1;
      }
      auto step = s->engine->step();
      s->calls.failDownload = 0;
      if (!step) {
        ++out.failures;
        CHECK(step.error().message.rfind("the fake device failed", 0) == 0);
        CHECK(s->events.size() == events);
        CHECK(s->engine->stats().generated == before.generated);
        CHECK(s->engine->stats().prefillSteps == before.prefillSteps);
        CHECK(s->engine->stats().decodeSteps == before.decodeSteps);
        continue;
      }
      if (!*step) break;
      ++steps;
    }
    for (const auto& e : s->events) out.events.emplace_back(e.request, e.token, e.finish);
    return out;
  };
  Outcome clean = run(-1, 0);
  REQUIRE(clean.events.size() == 15);
  std::set<int32_t> tokens;
  for (const auto& e : clean.events) tokens.insert(std::get<1>(e));
  CHECK(tokens.size() > 8);  // the draws differ: something is compared
  for (int at : {0, 2, 5}) {
    CAPTURE(at);
    Outcome failed = run(at, 0);
    CHECK(failed.failures == 1);
    CHECK(failed.events == clean.events);
  }
  int failures = 0;
  for (int download = 1; download <= 6; ++download) {
    CAPTURE(download);
    Outcome failed = run(0, download);
    CHECK(failed.events == clean.events);
    failures += failed.failures;
  }
  CHECK(failures >= 3);  // at least a witness and both rows' logits
}

TEST_CASE("engine: a plan with next tokens reads back ids, and logits only where a row wants logprobs") {
  // The tiny Llama traced with --next-token: prefill 2 rows of 8, decode 2
  // rows, capacity 64 over 8 blocks. A row of logits is 256 f32 (1024
  // bytes); the ids of a whole step are at most 2 * 8 i32 (64 bytes).
  auto traced = [](trace::Phase phase, int64_t listWidth = 64) {
    trace::TraceOptions o;
    o.phase = phase;
    o.kv = trace::ops::KvLayout::Paged;
    o.live = phase == trace::Phase::Decode;
    o.nextToken = true;
    o.batch = 2;
    o.tokens = phase == trace::Phase::Prefill ? 8 : 1;
    o.capacity = 64;
    o.poolSlots = 128;
    auto g = trace::traceModel(testing::loadExampleConfig("tiny-llama.json"), o);
    REQUIRE_MESSAGE(bool(g), (g ? "" : g.error().str()));
    for (ValueId id : g->params)  // penalty lists of another width than the capacity's
      if (g->value(id).name == "seen" || g->value(id).name == "seen_penalty") g->value(id).type.shape[1] = listWidth;
    return testing::withPlaceholderCode(testing::compilePlan(printGraph(*g)));
  };
  // Lists narrower than the capacity could not hold what a sequence sees: refused.
  auto narrow = engine::ModelPlans::check(traced(trace::Phase::Prefill), "p.plan", traced(trace::Phase::Decode, 32),
                                          "d.plan");
  REQUIRE_FALSE(narrow);
  CHECK(narrow.error().message.find("its next tokens want the input %seen : i32[2,64] (a list a sequence of its "
                                    "capacity") != std::string::npos);
  Calls calls;
  auto start = [&] {
    auto p = engine::ModelPlans::check(traced(trace::Phase::Prefill), "p.plan", traced(trace::Phase::Decode), "d.plan");
    REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
    CHECK(p->prefill().next);
    CHECK(p->decode().next);
    auto weights = engine::ModelWeights::bind(p->graph(), "");
    REQUIRE(weights);
    auto e = engine::Engine::create(p.take(), std::make_shared<FakeBackend>(testing::lavapipeInfo(), &calls),
                                    weights.take());
    REQUIRE_MESSAGE(bool(e), (e ? "" : e.error().str()));
    return e.take();
  };
  auto largestRead = [&](size_t from) {
    int64_t most = 0;
    for (size_t i = from; i < calls.downloaded.size(); ++i) most = std::max(most, calls.downloaded[i].second);
    return most;
  };
  // Greedy, sampling and penalized rows read the ids alone (the plan
  // samples, penalties applied). The fake device's memory holds 0x01
  // bytes, so its ids are 16843009: refused, the step not committed. Row 1
  // holds the prompt that fits one window, the first to sample.
  size_t before = 0;
  using Change = std::function<void(engine::Request&)>;
  for (const Change& change : {Change([](auto&) {}), Change([](auto& q) { q.sampling.temperature = 0.7; }),
                               Change([](auto& q) { q.sampling.repetitionPenalty = 1.2; }),
                               Change([](auto& q) {
                                 q.sampling.temperature = 0.7;
                                 q.sampling.frequencyPenalty = 0.4;
                                 q.sampling.presencePenalty = 0.5;
                               })}) {
    auto e = start();
    engine::Request q = request(5, 3);
    change(q);
    REQUIRE(e->submit(request(11, 3)));
    REQUIRE(e->submit(q));
    before = calls.downloaded.size();
    auto step = e->step();
    REQUIRE_FALSE(step);
    CHECK(step.error().kind == ErrorKind::Range);
    CHECK(step.error().message == "the plan's next token for row 1 is 16843009, outside the vocabulary [0, 256)");
    CHECK(calls.downloaded.size() == before + 1);
    CHECK(largestRead(before) == 2 * 8 * 4);
    CHECK(e->stats().prefillSteps == 0);
  }
  // A row that wants its logprobs reads its row of logits (the fake's
  // logits are all equal: token 0 every time), penalties or not.
  for (double presence : {0.0, 0.5}) {
    CAPTURE(presence);
    auto e = start();
    engine::Request q = request(5, 2);
    q.sampling.logprobs = 2;
    q.sampling.presencePenalty = presence;
    REQUIRE(e->submit(q));
    before = calls.downloaded.size();
    runAll(*e);
    CHECK(largestRead(before) == 2 * 256 * 4);  // a decode step reads its rows in one
    CHECK(e->stats().generated == 2);
  }
}

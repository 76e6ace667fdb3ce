// Unit tests of the continuous-batching policy (kv/batch.h) with a stand-in
// model: the "K/V" a step writes at a slot is a fingerprint of the weights
// identity and the sequence's tokens through that position, and the next
// token is a function of the fingerprint the last position reads back
// through the read map. So a wrong map, a slot shared by two live sequences,
// a stale cached block or a block cached under another identity changes the
// tokens; the simulated pool also remembers the identity that wrote each
// slot, and every read of a step must find its own. Random request streams
// (shared prefixes across the base model and adapters, adapters reloaded
// mid-stream, end-of-sequence ids, tight pools, several plan shapes) must
// give every request the tokens it gets alone on its identity, with the
// prefix cache on and off, hit the cache where they share a prefix, run
// each step on one identity, and leave every reference count at zero.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "kv/batch.h"
#include "testing.h"

using namespace poot::kv;

namespace {

constexpr int32_t kVocab = 7;

int32_t nextToken(uint64_t fingerprint) { return int32_t(poot::testing::mix(fingerprint, 17) % kVocab); }

// A request and the steps that have run when it is submitted.
struct Arrival {
  Request request;
  int64_t at = 0;
};

// What a request generates when it runs alone.
std::vector<int32_t> alone(const Request& q) {
  std::vector<int32_t> tokens = q.prompt, out;
  while (int32_t(out.size()) < q.maxNew) {
    uint64_t h = poot::testing::mix(0, q.identity);
    for (int32_t t : tokens) h = poot::testing::mix(h, uint32_t(t));
    int32_t next = nextToken(h);
    out.push_back(next);
    tokens.push_back(next);
    if (q.stop.count(next)) break;
  }
  return out;
}

// The simulated pools: each slot's fingerprint and the identity that wrote it.
struct Pool {
  std::vector<uint64_t> value, writer;
};

// Runs one planned step on the simulated pool: writes each new token's
// fingerprint, then reads every row back (each slot written under the
// step's identity) and samples where asked.
std::vector<int32_t> runStep(const PlannedStep& step, Pool& pool) {
  const StepMaps& m = step.maps;
  // Where token t of row r is: padded, its row's places; ragged, after the
  // rows before it, and the maps say so token by token.
  auto place = [&](int32_t r, int32_t t) { return m.ragged ? m.last[r] - m.count[r] + 1 + t : r * m.tokens + t; };
  for (int32_t r = 0; r < m.rows; ++r) {
    if (m.seqs[r] == kPadding) continue;
    uint64_t h = m.pos[r] == 0 ? poot::testing::mix(0, step.identity) : pool.value[m.read[r * m.capacity + m.pos[r] - 1]];
    for (int32_t t = 0; t < m.count[r]; ++t) {
      int32_t at = place(r, t);
      if (m.ragged) {
        REQUIRE(m.tokenRow[at] == r);
        REQUIRE(m.tokenPos[at] == m.pos[r] + t);
      }
      h = poot::testing::mix(h, uint32_t(m.tokenIds[at]));
      pool.value[m.write[at]] = h;
      pool.writer[m.write[at]] = step.identity;
    }
  }
  if (m.ragged) {  // the places past the rows' tokens are padding
    int32_t used = 0;
    for (int32_t c : m.count) used += c;
    for (int32_t at = used; at < m.tokens; ++at) REQUIRE(m.write[at] == -1);
  }
  std::vector<int32_t> sampled(m.rows, -1);
  for (int32_t r = 0; r < m.rows; ++r) {
    if (m.seqs[r] == kPadding) continue;
    for (int32_t p = 0; p < m.pos[r] + m.count[r]; ++p) REQUIRE(pool.writer[m.read[r * m.capacity + p]] == step.identity);
    if (step.sampleAt[r] < 0) continue;
    int32_t last = m.pos[r] + step.sampleAt[r];
    sampled[r] = nextToken(pool.value[m.read[r * m.capacity + last]]);
  }
  return sampled;
}

struct Outcome {
  std::vector<std::vector<int32_t>> outputs;
  BatchStats stats;
  // Each mixed step's rows (their requests, padding -1) and counts.
  std::vector<std::pair<std::vector<int64_t>, std::vector<int32_t>>> mixedSteps;
  std::vector<uint64_t> stepIdentities;  // each step's, in order (idle time not counted)
};

// Runs the requests (sorted by `at`) to the end, checking each step and
// each request's ending.
Outcome runAll(const std::vector<Arrival>& requests, const BatchConfig& cfg, KvConfig kv) {
  KvCache cache(kv);
  Batcher batcher(cache, cfg);
  Pool pool{std::vector<uint64_t>(size_t(kv.numBlocks) * kBlockSize, 0),
            std::vector<uint64_t>(size_t(kv.numBlocks) * kBlockSize, 0)};
  Outcome out;
  int64_t decodeRows = 0;
  size_t submitted = 0;
  int64_t clock = 0;  // steps run, and steps idle waiting for a request
  std::map<uint64_t, int64_t> unfinished;
  out.outputs.resize(requests.size());
  for (int guard = 0; guard < 100000; ++guard) {
    for (; submitted < requests.size() && requests[submitted].at <= clock; ++submitted) {
      auto id = batcher.submit(requests[submitted].request);
      REQUIRE(id);
      REQUIRE(*id == int64_t(submitted));
      ++unfinished[requests[submitted].request.identity];
    }
    auto step = batcher.next();
    REQUIRE_MESSAGE(step, step.error().message);
    if (!*step) {
      if (submitted == requests.size()) break;
      clock = requests[submitted].at;  // idle until the next request arrives
      continue;
    }
    const PlannedStep& s = **step;
    REQUIRE(s.maps.ragged == (s.plan == Plan::Mixed));
    REQUIRE(s.maps.rows == (s.plan == Plan::Prefill ? cfg.prefillRows : s.plan == Plan::Decode ? cfg.decodeRows : cfg.mixedRows));
    REQUIRE(s.maps.tokens == (s.plan == Plan::Prefill ? cfg.prefillTokens : s.plan == Plan::Decode ? 1 : cfg.mixedTokens));
    if (s.plan == Plan::Mixed) {
      // Sampled tokens beside prompt chunks, one identity's, every sampled
      // token of it while rows and places last (one of each kept for a
      // prompt).
      int32_t sampledRows = 0, promptRows = 0, paddingRows = 0;
      for (int32_t r = 0; r < s.maps.rows; ++r) {  // sampled rows, prompt rows, padding, in that order
        if (s.maps.seqs[r] == kPadding) {
          ++paddingRows;
          continue;
        }
        const Sequence* q = cache.sequence(s.maps.seqs[r]);
        bool one = int32_t(q->tokens.size()) - q->written == 1;
        REQUIRE(paddingRows == 0);
        REQUIRE((!one || promptRows == 0));
        ++(one ? sampledRows : promptRows);
      }
      REQUIRE(promptRows > 0);
      int32_t waiting = 0;
      for (const auto& [seq, q] : cache.sequences())
        waiting += q.identity == s.identity && int32_t(q.tokens.size()) - q.written == 1;
      REQUIRE(sampledRows > 0);
      REQUIRE(sampledRows == std::min({waiting, cfg.mixedRows - 1, cfg.mixedTokens - 1}));
      out.mixedSteps.push_back({s.requests, s.maps.count});
    }
    // One identity for the whole step, as the caller binds one set of
    // weights; the positions are each row's own. A row left as padding
    // means every live sequence of that identity the plan could take is in
    // the step.
    std::set<SeqId> inStep;
    for (int32_t r = 0; r < s.maps.rows; ++r)
      if (s.maps.seqs[r] != kPadding) {
        inStep.insert(s.maps.seqs[r]);
        REQUIRE(cache.sequence(s.maps.seqs[r])->identity == s.identity);
        REQUIRE(requests[size_t(s.requests[r])].request.identity == s.identity);
      }
    if (int32_t(inStep.size()) < s.maps.rows && s.plan != Plan::Mixed)
      for (const auto& [seq, q] : cache.sequences()) {
        bool fits = int32_t(q.tokens.size()) - q.written > 1 && q.written <= kv.capacity - cfg.prefillTokens;
        if (q.identity == s.identity && (s.plan != Plan::Prefill || fits)) REQUIRE(inStep.count(seq));
      }
    if (s.plan == Plan::Decode)
      for (int32_t r = 0; r < s.maps.rows; ++r) decodeRows += s.maps.seqs[r] != kPadding;
    std::vector<int32_t> sampled = runStep(s, pool);
    int64_t finishedBefore = batcher.finished();
    auto ended = batcher.complete(s, sampled);
    REQUIRE(ended);
    out.stepIdentities.push_back(s.identity);
    ++clock;
    REQUIRE(int32_t(cache.sequences().size()) <= cfg.decodeRows);
    // A request is done when it has maxNew tokens (Length) or ends in one of
    // its stop ids (Stop), and complete says which, on the row of its last
    // token.
    int64_t endedNow = 0;
    for (size_t r = 0; r < s.requests.size(); ++r) {
      if (s.sampleAt[r] < 0) {
        REQUIRE((*ended)[r] == Finish::None);
        continue;
      }
      const Request& q = requests[size_t(s.requests[r])].request;
      std::vector<int32_t>& o = out.outputs[size_t(s.requests[r])];
      o.push_back(sampled[r]);
      Finish want = q.stop.count(o.back()) ? Finish::Stop
                    : int32_t(o.size()) == q.maxNew ? Finish::Length
                                                    : Finish::None;
      REQUIRE((*ended)[r] == want);
      REQUIRE(batcher.finish(s.requests[r]) == want);
      if (want != Finish::None) --unfinished[s.identity], ++endedNow;
    }
    REQUIRE(batcher.finished() == finishedBefore + endedNow);
    for (const auto& [identity, n] : unfinished) REQUIRE(batcher.unfinished(identity) == n);
  }
  REQUIRE(batcher.done());
  REQUIRE(batcher.finished() == int64_t(requests.size()));
  for (const Arrival& q : requests) REQUIRE(batcher.unfinished(q.request.identity) == 0);
  for (int32_t b = 0; b < cache.pool().size(); ++b) REQUIRE(cache.pool().refs(b) == 0);
  REQUIRE(batcher.stats().peakBlocks <= kv.numBlocks);
  REQUIRE(batcher.stats().decodeRowsUsed == decodeRows);
  out.stats = batcher.stats();
  return out;
}

}  // namespace

// Requests of one identity, all submitted at once.
std::vector<Arrival> ofIdentity(const std::vector<std::vector<int32_t>>& prompts, uint64_t identity, int32_t maxNew) {
  std::vector<Arrival> out;
  for (const auto& p : prompts) out.push_back({{p, identity, maxNew, {}}, 0});
  return out;
}

// A request that arrives at step `at`.
Arrival arrival(std::vector<int32_t> prompt, uint64_t identity, int32_t maxNew, int64_t at) {
  return {{std::move(prompt), identity, maxNew, {}}, at};
}

TEST_CASE("kv batch: a request admitted after a shared prefix was computed hits it") {
  BatchConfig cfg{.prefillRows = 2, .prefillTokens = 16, .decodeRows = 2};
  std::vector<int32_t> shared(40);
  for (int32_t i = 0; i < 40; ++i) shared[i] = i % kVocab;
  std::vector<std::vector<int32_t>> prompts{shared, shared, shared};
  prompts[1].push_back(3);
  prompts[2].resize(20);
  std::vector<Arrival> requests = ofIdentity(prompts, 1, 3);
  Outcome on = runAll(requests, cfg, {.numBlocks = 16, .capacity = 64, .prefixCache = true});
  Outcome off = runAll(requests, cfg, {.numBlocks = 16, .capacity = 64, .prefixCache = false});
  CHECK(on.outputs == off.outputs);
  for (size_t i = 0; i < requests.size(); ++i) CHECK(on.outputs[i] == alone(requests[i].request));
  CHECK(on.stats.hits == 2);
  CHECK(on.stats.skippedTokens == 32 + 16);  // two blocks of the 41-token prompt, one of the 20
  CHECK(off.stats.hits == 0);
  CHECK(on.stats.generated == 9);
}

TEST_CASE("kv batch: an adapter never hits the base model's blocks, nor after a reload the old adapter's") {
  BatchConfig cfg{.prefillRows = 2, .prefillTokens = 16, .decodeRows = 2};
  std::vector<int32_t> shared(40);
  for (int32_t i = 0; i < 40; ++i) shared[i] = (3 * i) % kVocab;
  std::vector<int32_t> longer = shared;
  longer.push_back(5);
  // The base model (1) and an adapter (2) on the same prompt, then the
  // adapter again on a longer one; after the first step the adapter is
  // reloaded (3) and runs both prompts again while 2's are in flight.
  std::vector<Arrival> requests{arrival(shared, 1, 3, 0), arrival(shared, 2, 3, 0), arrival(longer, 2, 3, 0),
                                arrival(shared, 3, 3, 1), arrival(longer, 3, 3, 1)};
  Outcome on = runAll(requests, cfg, {.numBlocks = 16, .capacity = 64, .prefixCache = true});
  Outcome off = runAll(requests, cfg, {.numBlocks = 16, .capacity = 64, .prefixCache = false});
  CHECK(on.outputs == off.outputs);
  for (size_t i = 0; i < requests.size(); ++i) CHECK(on.outputs[i] == alone(requests[i].request));
  // Only each identity's longer prompt hits, on its own first prompt's two
  // blocks: 2 never takes 1's, 3 never takes 2's, though all are cached.
  CHECK(on.stats.hits == 2);
  CHECK(on.stats.skippedTokens == 32 + 32);
  // 2's requests, submitted before the reload, finish on 2's weights after it.
  REQUIRE(on.stepIdentities.size() > 1);
  CHECK(std::count(on.stepIdentities.begin() + 1, on.stepIdentities.end(), 2u) > 0);
  CHECK(std::count(on.stepIdentities.begin(), on.stepIdentities.end(), 3u) > 0);
}

TEST_CASE("kv batch: rows at different positions share a step") {
  // Prompts of 5, 11 and 24 tokens: the prefill plan of 2 rows of 8 takes
  // the first two, then the third's first window beside the second's last
  // 3 tokens, then the third alone twice; every decode step then has all
  // three at their own positions.
  BatchConfig cfg{.prefillRows = 2, .prefillTokens = 8, .decodeRows = 3};
  std::vector<std::vector<int32_t>> prompts{std::vector<int32_t>(5, 1), std::vector<int32_t>(11, 2),
                                            std::vector<int32_t>(24, 3)};
  std::vector<Arrival> requests = ofIdentity(prompts, 1, 16);
  Outcome on = runAll(requests, cfg, {.numBlocks = 16, .capacity = 48, .prefixCache = true});
  for (size_t i = 0; i < requests.size(); ++i) CHECK(on.outputs[i] == alone(requests[i].request));
  CHECK(on.stats.prefillSteps == 4);
  CHECK(on.stats.decodeSteps == 15);
  CHECK(on.stats.decodeRowsUsed == 45);
}

TEST_CASE("kv batch: a mixed plan runs sampled tokens beside prompt chunks") {
  // Prompts of 5, 11, 24 and 30 tokens; prefill 2 rows of 8, decode 3 rows,
  // mixed 3 rows over 12 tokens. The first step is a prefill (nothing is
  // sampled yet): A's 5, B's first 8. Then A samples in every step while
  // the prompts fill the places left: C's first 11 (C is furthest behind),
  // then B's last 3 beside C's next 8, then C's last 5 beside A's and B's
  // tokens. D waits for a row (3 live at most) until A ends, and is then
  // computed 10 tokens a step beside B's and C's (B ends before D's last
  // chunk).
  BatchConfig cfg{.prefillRows = 2, .prefillTokens = 8, .decodeRows = 3, .mixedRows = 3, .mixedTokens = 12};
  std::vector<std::vector<int32_t>> prompts{std::vector<int32_t>(5, 1), std::vector<int32_t>(11, 2),
                                            std::vector<int32_t>(24, 3), std::vector<int32_t>(30, 4)};
  std::vector<Arrival> requests = ofIdentity(prompts, 1, 16);
  Outcome on = runAll(requests, cfg, {.numBlocks = 16, .capacity = 48, .prefixCache = true});
  for (size_t i = 0; i < requests.size(); ++i) CHECK(on.outputs[i] == alone(requests[i].request));
  CHECK(on.stats.prefillSteps == 1);
  CHECK(on.stats.mixedSteps == 6);
  CHECK(on.stats.decodeSteps == 27);
  CHECK(on.stats.mixedTokensUsed == 12 + 12 + 7 + 12 + 12 + 11);
  using Rows = std::vector<int64_t>;
  using Counts = std::vector<int32_t>;
  REQUIRE(on.mixedSteps.size() == 6);
  CHECK(on.mixedSteps[0] == std::pair{Rows{0, 2, -1}, Counts{1, 11, 0}});
  CHECK(on.mixedSteps[1] == std::pair{Rows{0, 1, 2}, Counts{1, 3, 8}});
  CHECK(on.mixedSteps[2] == std::pair{Rows{0, 1, 2}, Counts{1, 1, 5}});
  CHECK(on.mixedSteps[3] == std::pair{Rows{1, 2, 3}, Counts{1, 1, 10}});
  CHECK(on.mixedSteps[4] == std::pair{Rows{1, 2, 3}, Counts{1, 1, 10}});
  CHECK(on.mixedSteps[5] == std::pair{Rows{2, 3, -1}, Counts{1, 10, 0}});  // B ended with its 16th token
  // Without the mixed plan the same tokens come out of more steps: D's
  // prefill holds up B's and C's tokens.
  cfg.mixedRows = cfg.mixedTokens = 0;
  Outcome off = runAll(requests, cfg, {.numBlocks = 16, .capacity = 48, .prefixCache = true});
  CHECK(off.outputs == on.outputs);
  CHECK(off.stats.mixedSteps == 0);
  CHECK(off.stats.prefillSteps + off.stats.decodeSteps > on.stats.prefillSteps + on.stats.decodeSteps + on.stats.mixedSteps);
}

TEST_CASE("kv batch: equal positions keep the previous step's identity") {
  // Two identities with two prompts each, submitted alternately, and a
  // prefill plan of one row: the prefills go 1, 1, 2, 2 (at position 0 the
  // previous identity goes first), then the decodes at position 16 go 2
  // (the previous), then 1. Two changes of weights where the sequence order
  // alone (1, 2, 1, 2, 1, 2) would make five.
  BatchConfig cfg{.prefillRows = 1, .prefillTokens = 16, .decodeRows = 4};
  std::vector<int32_t> a(16, 1), b(16, 2);
  std::vector<Arrival> requests{arrival(a, 1, 2, 0), arrival(a, 2, 2, 0), arrival(b, 1, 2, 0), arrival(b, 2, 2, 0)};
  Outcome on = runAll(requests, cfg, {.numBlocks = 16, .capacity = 32, .prefixCache = true});
  CHECK(on.stepIdentities == std::vector<uint64_t>{1, 1, 2, 2, 2, 1});
  for (size_t i = 0; i < requests.size(); ++i) CHECK(on.outputs[i] == alone(requests[i].request));
}

TEST_CASE("kv batch: submit refuses a request that cannot fit alone and queues nothing") {
  KvCache cache({.numBlocks = 2, .capacity = 64, .prefixCache = true});
  Batcher batcher(cache, {.prefillRows = 1, .prefillTokens = 8, .decodeRows = 1});
  auto capacity = batcher.submit({std::vector<int32_t>(60, 1), 1, 10, {}});
  REQUIRE_FALSE(capacity);
  CHECK(capacity.error().kind == KvErrorKind::Capacity);
  CHECK(capacity.error().message == "a prompt of 60 tokens and 9 more to compute passes the capacity of 64");
  auto blocks = batcher.submit({std::vector<int32_t>(30, 1), 1, 10, {}});
  REQUIRE_FALSE(blocks);
  CHECK(blocks.error().kind == KvErrorKind::OutOfBlocks);
  auto empty = batcher.submit({{}, 1, 10, {}});
  REQUIRE_FALSE(empty);
  CHECK(empty.error().kind == KvErrorKind::EmptyPrompt);
  auto none = batcher.submit({{1, 2}, 1, 0, {}});
  REQUIRE_FALSE(none);
  CHECK(none.error().kind == KvErrorKind::BadRequest);
  CHECK(batcher.requests() == 0);
  CHECK(batcher.unfinished(1) == 0);
  CHECK(batcher.done());
}

TEST_CASE("kv batch: property: random request streams give every request its tokens alone") {
  int64_t hits = 0, fullPools = 0, reloads = 0, mixed = 0, mixedSteps = 0;
  for (uint64_t seed = 0; seed < 150; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    auto pick = [&rng](int64_t n) { return int32_t(rng() % uint64_t(n)); };
    BatchConfig cfg;
    cfg.prefillRows = 1 + pick(3);
    cfg.prefillTokens = 1 + pick(20);
    cfg.decodeRows = 1 + pick(4);
    if (pick(2)) {  // a mixed plan beside them, half the time
      cfg.mixedRows = 2 + pick(3);
      cfg.mixedTokens = cfg.mixedRows + pick(20);
    }
    // Each request its own maxNew and stop ids.
    int32_t mostNew = 1 + pick(12);
    int32_t capacity = kBlockSize * (2 + pick(4));
    std::vector<int32_t> base(capacity);
    for (int32_t& t : base) t = pick(kVocab);
    // The base model (1) and two adapters, now and then reloaded (a fresh
    // identity for the requests submitted from then on).
    std::vector<uint64_t> identities{1, 2, 3};
    uint64_t nextIdentity = 4;
    std::vector<Arrival> requests(1 + pick(10));
    int32_t longest = 0;
    int64_t at = 0;
    for (Arrival& a : requests) {
      Request& q = a.request;
      q.maxNew = 1 + pick(mostNew);
      if (pick(2)) q.stop = {pick(kVocab)};
      int32_t length = 1 + pick(capacity - q.maxNew + 1);
      int32_t shared = pick(2) ? length : pick(length + 1);
      q.prompt.assign(base.begin(), base.begin() + shared);
      while (int32_t(q.prompt.size()) < length) q.prompt.push_back(pick(kVocab));
      longest = std::max(longest, length + q.maxNew - 1);
      if (pick(5) == 0) {
        identities[size_t(1 + pick(2))] = nextIdentity++;
        ++reloads;
      }
      q.identity = identities[size_t(pick(3))];
      at += pick(3) == 0 ? pick(8) : 0;
      a.at = at;
    }
    std::set<uint64_t> used;
    for (const Arrival& a : requests) used.insert(a.request.identity);
    mixed += used.size() > 1;
    int32_t least = (longest + kBlockSize - 1) / kBlockSize;
    KvConfig kv{.numBlocks = least + pick(3 * least), .capacity = capacity, .prefixCache = true};
    Outcome on = runAll(requests, cfg, kv);
    kv.prefixCache = false;
    Outcome off = runAll(requests, cfg, kv);
    REQUIRE(on.outputs == off.outputs);
    for (size_t i = 0; i < requests.size(); ++i) REQUIRE(on.outputs[i] == alone(requests[i].request));
    CHECK(off.stats.hits == 0);
    hits += on.stats.hits;
    mixedSteps += on.stats.mixedSteps;
    fullPools += on.stats.peakBlocks == kv.numBlocks;
  }
  // The streams exercised what they are for.
  CHECK(hits > 0);
  CHECK(fullPools > 0);
  CHECK(reloads > 0);
  CHECK(mixed > 50);
  CHECK(mixedSteps > 30);
}

TEST_CASE("kv batch: cancel ends a queued or a running request and frees its row and blocks") {
  KvCache cache({.numBlocks = 8, .capacity = 64, .prefixCache = true});
  Batcher batcher(cache, {.prefillRows = 1, .prefillTokens = 16, .decodeRows = 2});
  Pool pool{std::vector<uint64_t>(8 * kBlockSize, 0), std::vector<uint64_t>(8 * kBlockSize, 0)};
  std::vector<Request> requests{{std::vector<int32_t>(20, 1), 1, 4, {}},
                                {std::vector<int32_t>(5, 2), 1, 4, {}},
                                {std::vector<int32_t>(7, 3), 1, 4, {}}};
  for (const Request& q : requests) REQUIRE(batcher.submit(q));
  std::vector<int32_t> kept;  // request 1's tokens
  auto run = [&] {
    auto step = batcher.next();
    REQUIRE(step);
    REQUIRE(*step);
    std::vector<int32_t> sampled = runStep(**step, pool);
    REQUIRE(batcher.complete(**step, sampled));
    for (size_t r = 0; r < sampled.size(); ++r)
      if ((**step).requests[r] == 1 && (**step).sampleAt[r] >= 0) kept.push_back(sampled[r]);
  };
  run();  // admits 0 and 1 (two decode rows); 2 waits
  REQUIRE(cache.sequences().size() == 2);
  auto queued = batcher.cancel(2);
  REQUIRE(queued);
  CHECK(*queued);
  CHECK(batcher.finish(2) == Finish::Cancelled);
  int32_t available = cache.pool().available();
  auto running = batcher.cancel(0);
  REQUIRE(running);
  CHECK(*running);
  CHECK(batcher.finish(0) == Finish::Cancelled);
  CHECK(cache.sequences().size() == 1);
  CHECK(cache.pool().available() == available + 2);  // its two blocks (the first is full and stays cached, evictable)
  auto again = batcher.cancel(0);
  REQUIRE(again);
  CHECK_FALSE(*again);
  auto unknown = batcher.cancel(3);
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().kind == KvErrorKind::UnknownRequest);
  run();  // request 1's prefill, its first token
  // A step planned before a cancel is refused whole when it completes.
  auto planned = batcher.next();
  REQUIRE(planned);
  REQUIRE(*planned);
  REQUIRE(*batcher.cancel(1));
  BatchStats before = batcher.stats();
  auto stale = batcher.complete(**planned, runStep(**planned, pool));
  REQUIRE_FALSE(stale);
  CHECK(batcher.stats().generated == before.generated);
  CHECK(batcher.done());
  CHECK(batcher.finished() == 3);
  CHECK(batcher.unfinished(1) == 0);
  for (int32_t b = 0; b < cache.pool().size(); ++b) CHECK(cache.pool().refs(b) == 0);
  // What request 1 generated before it was cancelled is what it generates alone.
  std::vector<int32_t> want = alone(requests[1]);
  REQUIRE(kept.size() <= want.size());
  CHECK(std::equal(kept.begin(), kept.end(), want.begin()));
  CHECK(!kept.empty());
}

// Unit tests of the continuous-batching policy (kv/batch.h) with a stand-in
// model: the "K/V" a step writes at a slot is a fingerprint of the sequence's
// tokens through that position, and the next token is a function of the
// fingerprint the last position reads back through the read map. So a wrong
// map, a slot shared by two live sequences or a stale cached block changes
// the tokens. Random request streams (shared prefixes, end-of-sequence ids,
// tight pools, several plan shapes) must give every request the tokens it
// gets alone, with the prefix cache on and off, hit the cache where they
// share a prefix, and leave every reference count at zero.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kv/batch.h"
#include "testing.h"

using namespace poot::kv;

namespace {

constexpr int32_t kVocab = 7;

int32_t nextToken(uint64_t fingerprint) { return int32_t(poot::testing::mix(fingerprint, 17) % kVocab); }

// What a request generates when it runs alone.
std::vector<int32_t> alone(std::vector<int32_t> tokens, const BatchConfig& cfg) {
  std::vector<int32_t> out;
  while (int32_t(out.size()) < cfg.maxNew) {
    uint64_t h = 0;
    for (int32_t t : tokens) h = poot::testing::mix(h, uint32_t(t));
    int32_t next = nextToken(h);
    out.push_back(next);
    tokens.push_back(next);
    if (cfg.eos.count(next)) break;
  }
  return out;
}

// Runs one planned step on the simulated pool: writes each new token's
// fingerprint, then reads every row back and samples where asked.
std::vector<int32_t> runStep(const PlannedStep& step, std::vector<uint64_t>& pool) {
  const StepMaps& m = step.maps;
  for (int32_t r = 0; r < m.rows; ++r) {
    if (m.seqs[r] == kPadding) continue;
    uint64_t h = m.pos[r] == 0 ? 0 : pool[m.read[r * m.capacity + m.pos[r] - 1]];
    for (int32_t t = 0; t < m.count[r]; ++t) {
      h = poot::testing::mix(h, uint32_t(m.tokenIds[r * m.tokens + t]));
      pool[m.write[r * m.tokens + t]] = h;
    }
  }
  std::vector<int32_t> sampled(m.rows, -1);
  for (int32_t r = 0; r < m.rows; ++r) {
    if (step.sampleAt[r] < 0) continue;
    int32_t last = m.pos[r] + step.sampleAt[r];
    sampled[r] = nextToken(pool[m.read[r * m.capacity + last]]);
  }
  return sampled;
}

struct Outcome {
  std::vector<std::vector<int32_t>> outputs;
  BatchStats stats;
};

Outcome runAll(const std::vector<std::vector<int32_t>>& prompts, const BatchConfig& cfg, KvConfig kv) {
  KvCache cache(kv);
  Batcher batcher(cache, cfg);
  for (const auto& p : prompts) REQUIRE(batcher.submit(p));
  std::vector<uint64_t> pool(size_t(kv.numBlocks) * kBlockSize, 0);
  int64_t decodeRows = 0;
  for (int guard = 0; guard < 100000; ++guard) {
    auto step = batcher.next();
    REQUIRE_MESSAGE(step, step.error().message);
    if (!*step) break;
    const PlannedStep& s = **step;
    REQUIRE(s.maps.rows == (s.prefill ? cfg.prefillRows : cfg.decodeRows));
    REQUIRE(s.maps.tokens == (s.prefill ? cfg.prefillTokens : 1));
    // One position for the whole step, as the paged plans take it.
    for (int32_t r = 0; r < s.maps.rows; ++r)
      if (s.maps.seqs[r] != kPadding) REQUIRE(s.maps.pos[r] == s.maps.pos[0]);
    if (!s.prefill)
      for (int32_t r = 0; r < s.maps.rows; ++r) decodeRows += s.maps.seqs[r] != kPadding;
    std::vector<int32_t> sampled = runStep(s, pool);
    REQUIRE(batcher.complete(s, sampled));
    REQUIRE(int32_t(cache.sequences().size()) <= cfg.decodeRows);
  }
  REQUIRE(batcher.done());
  REQUIRE(batcher.finished() == int64_t(prompts.size()));
  for (int32_t b = 0; b < cache.pool().size(); ++b) REQUIRE(cache.pool().refs(b) == 0);
  REQUIRE(batcher.stats().peakBlocks <= kv.numBlocks);
  REQUIRE(batcher.stats().decodeRowsUsed == decodeRows);
  return {batcher.outputs(), batcher.stats()};
}

}  // namespace

TEST_CASE("kv batch: a request admitted after a shared prefix was computed hits it") {
  BatchConfig cfg{.prefillRows = 2, .prefillTokens = 16, .decodeRows = 2, .maxNew = 3, .eos = {}, .identity = 1};
  std::vector<int32_t> shared(40);
  for (int32_t i = 0; i < 40; ++i) shared[i] = i % kVocab;
  std::vector<std::vector<int32_t>> prompts{shared, shared, shared};
  prompts[1].push_back(3);
  prompts[2].resize(20);
  Outcome on = runAll(prompts, cfg, {.numBlocks = 16, .capacity = 64, .prefixCache = true});
  Outcome off = runAll(prompts, cfg, {.numBlocks = 16, .capacity = 64, .prefixCache = false});
  CHECK(on.outputs == off.outputs);
  for (size_t i = 0; i < prompts.size(); ++i) CHECK(on.outputs[i] == alone(prompts[i], cfg));
  CHECK(on.stats.hits == 2);
  CHECK(on.stats.skippedTokens == 32 + 16);  // two blocks of the 41-token prompt, one of the 20
  CHECK(off.stats.hits == 0);
  CHECK(on.stats.generated == 9);
}

TEST_CASE("kv batch: submit refuses a request that cannot fit alone and queues nothing") {
  KvCache cache({.numBlocks = 2, .capacity = 64, .prefixCache = true});
  Batcher batcher(cache, {.prefillRows = 1, .prefillTokens = 8, .decodeRows = 1, .maxNew = 10, .eos = {}, .identity = 1});
  auto capacity = batcher.submit(std::vector<int32_t>(60, 1));
  REQUIRE_FALSE(capacity);
  CHECK(capacity.error().kind == KvErrorKind::Capacity);
  auto blocks = batcher.submit(std::vector<int32_t>(30, 1));
  REQUIRE_FALSE(blocks);
  CHECK(blocks.error().kind == KvErrorKind::OutOfBlocks);
  auto empty = batcher.submit({});
  REQUIRE_FALSE(empty);
  CHECK(empty.error().kind == KvErrorKind::EmptyPrompt);
  CHECK(batcher.requests() == 0);
  CHECK(batcher.done());
}

TEST_CASE("kv batch: property: random request streams give every request its tokens alone") {
  int64_t hits = 0, fullPools = 0;
  for (uint64_t seed = 0; seed < 150; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    auto pick = [&rng](int64_t n) { return int32_t(rng() % uint64_t(n)); };
    BatchConfig cfg;
    cfg.prefillRows = 1 + pick(3);
    cfg.prefillTokens = 1 + pick(20);
    cfg.decodeRows = 1 + pick(4);
    cfg.maxNew = 1 + pick(12);
    if (pick(2)) cfg.eos = {pick(kVocab)};
    cfg.identity = 1 + pick(3);
    int32_t capacity = kBlockSize * (2 + pick(4));
    std::vector<int32_t> base(capacity);
    for (int32_t& t : base) t = pick(kVocab);
    std::vector<std::vector<int32_t>> prompts(1 + pick(10));
    int32_t longest = 0;
    for (auto& p : prompts) {
      int32_t length = 1 + pick(capacity - cfg.maxNew + 1);
      int32_t shared = pick(2) ? length : pick(length + 1);
      p.assign(base.begin(), base.begin() + shared);
      while (int32_t(p.size()) < length) p.push_back(pick(kVocab));
      longest = std::max(longest, length + cfg.maxNew - 1);
    }
    int32_t least = (longest + kBlockSize - 1) / kBlockSize;
    KvConfig kv{.numBlocks = least + pick(3 * least), .capacity = capacity, .prefixCache = true};
    Outcome on = runAll(prompts, cfg, kv);
    kv.prefixCache = false;
    Outcome off = runAll(prompts, cfg, kv);
    REQUIRE(on.outputs == off.outputs);
    for (size_t i = 0; i < prompts.size(); ++i) REQUIRE(on.outputs[i] == alone(prompts[i], cfg));
    CHECK(off.stats.hits == 0);
    hits += on.stats.hits;
    fullPools += on.stats.peakBlocks == kv.numBlocks;
  }
  // The streams exercised what they are for.
  CHECK(hits > 0);
  CHECK(fullPools > 0);
}

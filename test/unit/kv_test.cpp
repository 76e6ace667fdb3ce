// Unit tests of the KV driver's core (lib/kv): the block key, allocation
// order and reference counts, every typed error (and that a failed call
// changes nothing), the read and write maps of a small hand-checked batch,
// prefix hits and their rounding, weights identities, LRU eviction and
// pinning, the switch that turns the prefix cache off, and a property test
// over random request streams that simulates the pool's contents and checks
// the invariants of docs/kv.md after every operation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "kv/cache.h"
#include "testing.h"

using namespace poot::kv;

namespace {

std::vector<int32_t> iota(int32_t n, int32_t from) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// `head` then zeros, `width` words in all: a read-map row.
std::vector<int32_t> row(std::vector<int32_t> head, size_t width) {
  head.resize(width, 0);
  return head;
}

Started start(KvCache& c, const std::vector<int32_t>& prompt, uint64_t identity = 1) {
  auto s = c.startSequence(prompt, identity);
  REQUIRE_MESSAGE(s, s.error().message);
  return *s;
}

// Runs (in the bookkeeping) one step that writes every pending token of seq.
void prefill(KvCache& c, SeqId seq) {
  auto m = c.buildStep(std::vector<SeqId>{seq}, c.config().capacity);
  REQUIRE_MESSAGE(m, m.error().message);
  auto s = c.commit(*m);
  REQUIRE_MESSAGE(s, s.error().message);
}

const Sequence& seqOf(const KvCache& c, SeqId seq) {
  const Sequence* s = c.sequence(seq);
  REQUIRE(s != nullptr);
  return *s;
}

// Everything the cache lets one observe, as text, to check that a failed call
// changed nothing.
std::string snapshot(const KvCache& c) {
  std::ostringstream o;
  const BlockPool& p = c.pool();
  for (int32_t b = 0; b < p.size(); ++b) o << p.refs(b) << (p.cached(b) ? "c " : "- ");
  o << "| evict";
  for (int32_t b : p.evictionOrder()) o << ' ' << b;
  o << " | available " << p.available();
  for (const auto& [id, s] : c.sequences()) {
    o << "\nseq " << id << " identity " << s.identity << " written " << s.written << " chain " << s.chainKey << ' '
      << s.chainEntry << ' ' << s.chainBroken << " tokens";
    for (int32_t t : s.tokens) o << ' ' << t;
    o << " blocks";
    for (int32_t b : s.blocks) o << ' ' << b;
  }
  return o.str();
}

template <class T>
void requireError(const KvResult<T>& r, KvErrorKind kind) {
  REQUIRE_FALSE(r);
  CHECK(r.error().kind == kind);
}

}  // namespace

TEST_CASE("kv: the block key is FNV-1a 64 over parent key, tokens and identity") {
  std::vector<int32_t> a = iota(16, 0), b(16, -1);
  uint64_t k0 = blockKey(0, BlockTokens(a.data(), 16), 7);
  CHECK(k0 == 0x90402eb84240b002ull);  // computed independently, byte by byte
  CHECK(blockKey(k0, BlockTokens(b.data(), 16), 7) == 0xb47da49e204997bcull);
  CHECK(blockKey(0, BlockTokens(a.data(), 16), 8) != k0);
  CHECK(blockKey(1, BlockTokens(a.data(), 16), 7) != k0);
  a[15] = 16;
  CHECK(blockKey(0, BlockTokens(a.data(), 16), 7) != k0);
}

TEST_CASE("kv: blocks are taken lowest id first and freed by finish") {
  KvCache c({.numBlocks = 8, .capacity = 64, .prefixCache = false});
  Started a = start(c, iota(40, 0));
  Started b = start(c, iota(5, 100));
  CHECK(a.seq != b.seq);
  CHECK(a.cachedTokens == 0);
  CHECK(seqOf(c, a.seq).blocks == std::vector<int32_t>{0, 1, 2});
  CHECK(seqOf(c, b.seq).blocks == std::vector<int32_t>{3});
  CHECK(c.pool().refs(0) == 1);
  CHECK(c.pool().available() == 4);
  REQUIRE(c.finish(a.seq));
  CHECK(c.sequence(a.seq) == nullptr);
  CHECK(c.pool().refs(0) == 0);
  CHECK(c.pool().available() == 7);
  Started d = start(c, iota(20, 200));
  CHECK(seqOf(c, d.seq).blocks == std::vector<int32_t>{0, 1});
  CHECK(d.seq > b.seq);  // ids are never reused
}

TEST_CASE("kv: appendTokens allocates a block only past a block boundary") {
  KvCache c({.numBlocks = 4, .capacity = 64});
  SeqId s = start(c, iota(15, 0)).seq;
  CHECK(seqOf(c, s).blocks.size() == 1);
  REQUIRE(c.appendTokens(s, std::vector<int32_t>{15}));
  CHECK(seqOf(c, s).blocks.size() == 1);
  REQUIRE(c.appendTokens(s, std::vector<int32_t>{16}));
  CHECK(seqOf(c, s).blocks == std::vector<int32_t>{0, 1});
  REQUIRE(c.appendTokens(s, std::vector<int32_t>{}));
  CHECK(seqOf(c, s).tokens == iota(17, 0));
  CHECK(seqOf(c, s).written == 0);
}

TEST_CASE("kv: running out of blocks is an error that changes nothing") {
  KvCache c({.numBlocks = 4, .capacity = 80});
  std::vector<int32_t> prefix = iota(32, 0);
  SeqId a = start(c, concat(prefix, {500})).seq;
  prefill(c, a);
  REQUIRE(c.finish(a));
  // Blocks 0 and 1 are cached and evictable, 2 and 3 free: four available,
  // but a prompt that hits 0 and 1 pins them, so only two are left for it.
  CHECK(c.pool().evictionOrder() == std::vector<int32_t>{1, 0});
  CHECK(c.pool().available() == 4);
  std::string before = snapshot(c);
  auto tooLong = c.startSequence(concat(prefix, iota(38, 900)), 1);  // 70 tokens: 5 blocks, 3 to allocate
  requireError(tooLong, KvErrorKind::OutOfBlocks);
  CHECK(tooLong.error().message == "out of kv blocks: 3 needed, 2 free or evictable");
  CHECK(snapshot(c) == before);

  Started b = start(c, concat(prefix, iota(30, 900)));  // 62 tokens: 4 blocks, 2 of them hits
  CHECK(b.cachedTokens == 32);
  CHECK(seqOf(c, b.seq).blocks == std::vector<int32_t>{0, 1, 2, 3});
  before = snapshot(c);
  requireError(c.appendTokens(b.seq, iota(3, 7)), KvErrorKind::OutOfBlocks);
  CHECK(snapshot(c) == before);
  requireError(c.startSequence(iota(1, 0), 2), KvErrorKind::OutOfBlocks);
  CHECK(snapshot(c) == before);
  REQUIRE(c.appendTokens(b.seq, iota(2, 7)));  // 64 tokens still fit in 4 blocks
}

TEST_CASE("kv: unknown sequences are typed errors") {
  KvCache c({.numBlocks = 4, .capacity = 32});
  SeqId a = start(c, iota(3, 0)).seq;
  auto m = c.buildStep(std::vector<SeqId>{a}, 4);
  REQUIRE(m);
  REQUIRE(c.finish(a));
  std::string before = snapshot(c);
  auto twice = c.finish(a);
  requireError(twice, KvErrorKind::UnknownSequence);
  CHECK(twice.error().message == "no live sequence " + std::to_string(a));
  requireError(c.finish(12345), KvErrorKind::UnknownSequence);
  requireError(c.appendTokens(a, iota(1, 0)), KvErrorKind::UnknownSequence);
  requireError(c.buildStep(std::vector<SeqId>{a}, 4), KvErrorKind::UnknownSequence);
  requireError(c.commit(*m), KvErrorKind::UnknownSequence);
  CHECK(snapshot(c) == before);
}

TEST_CASE("kv: a sequence cannot pass the capacity") {
  KvCache c({.numBlocks = 8, .capacity = 20});
  auto big = c.startSequence(iota(21, 0), 1);
  requireError(big, KvErrorKind::Capacity);
  CHECK(big.error().message == "a sequence of 21 tokens passes the capacity of 20");
  SeqId s = start(c, iota(20, 0)).seq;
  std::string before = snapshot(c);
  requireError(c.appendTokens(s, iota(1, 0)), KvErrorKind::Capacity);
  CHECK(snapshot(c) == before);
}

TEST_CASE("kv: a sequence starts with at least one token") {
  KvCache c({.numBlocks = 2, .capacity = 20});
  requireError(c.startSequence(std::vector<int32_t>{}, 1), KvErrorKind::EmptyPrompt);
  CHECK(c.sequences().empty());
  CHECK(c.pool().available() == 2);
}

TEST_CASE("kv: bad and stale steps are typed errors") {
  KvCache c({.numBlocks = 4, .capacity = 32});
  SeqId a = start(c, iota(20, 0)).seq;
  requireError(c.buildStep(std::vector<SeqId>{}, 4), KvErrorKind::BadStep);
  requireError(c.buildStep(std::vector<SeqId>{a}, 0), KvErrorKind::BadStep);
  auto dup = c.buildStep(std::vector<SeqId>{a, kPadding, a}, 4);
  requireError(dup, KvErrorKind::BadStep);
  CHECK(dup.error().message == "sequence " + std::to_string(a) + " is on two rows of one step");
  auto m = c.buildStep(std::vector<SeqId>{a}, 4);
  REQUIRE(m);
  REQUIRE(c.commit(*m));
  CHECK(seqOf(c, a).written == 4);
  std::string before = snapshot(c);
  auto again = c.commit(*m);
  requireError(again, KvErrorKind::StaleStep);
  CHECK(again.error().message == "the step writes sequence " + std::to_string(a) + " from position 0 but it has 4 written");
  CHECK(snapshot(c) == before);
}

TEST_CASE("kv: read and write maps of a small batch") {
  KvCache c({.numBlocks = 4, .capacity = 24});
  SeqId a = start(c, iota(18, 100)).seq;  // blocks 0, 1
  SeqId b = start(c, iota(3, 200)).seq;   // block 2: slots 32..47
  auto m = c.buildStep(std::vector<SeqId>{a, kPadding, b}, 4);
  REQUIRE(m);
  CHECK(m->rows == 3);
  CHECK(m->tokens == 4);
  CHECK(m->capacity == 24);
  CHECK(m->seqs == std::vector<SeqId>{a, kPadding, b});
  CHECK(m->pos == std::vector<int32_t>{0, 0, 0});
  CHECK(m->count == std::vector<int32_t>{4, 0, 3});
  CHECK(m->tokenIds == std::vector<int32_t>{100, 101, 102, 103, 0, 0, 0, 0, 200, 201, 202, 0});
  CHECK(m->write == std::vector<int32_t>{0, 1, 2, 3, -1, -1, -1, -1, 32, 33, 34, -1});
  CHECK(m->read == concat(concat(row({0, 1, 2, 3}, 24), row({}, 24)), row({32, 33, 34}, 24)));
  REQUIRE(c.commit(*m));

  REQUIRE(c.appendTokens(b, std::vector<int32_t>{203}));
  m = c.buildStep(std::vector<SeqId>{b, a}, 16);
  REQUIRE(m);
  CHECK(m->pos == std::vector<int32_t>{3, 4});
  CHECK(m->count == std::vector<int32_t>{1, 14});
  CHECK(m->write == std::vector<int32_t>{35, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                         4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, -1, -1});
  CHECK(m->tokenIds == concat(row({203}, 16), row(iota(14, 104), 16)));
  CHECK(m->read == concat(row({32, 33, 34, 35}, 24), row({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, 24)));
  REQUIRE(c.commit(*m));
  CHECK(seqOf(c, a).written == 18);
  CHECK(seqOf(c, b).written == 4);
  // Nothing pending: the row reads what is written and writes nothing.
  m = c.buildStep(std::vector<SeqId>{b}, 2);
  REQUIRE(m);
  CHECK(m->count == std::vector<int32_t>{0});
  CHECK(m->write == std::vector<int32_t>{-1, -1});
  CHECK(m->read == row({32, 33, 34, 35}, 24));
}

TEST_CASE("kv: ragged maps of a mixed step") {
  KvCache c({.numBlocks = 4, .capacity = 24});
  SeqId a = start(c, iota(18, 100)).seq;  // blocks 0, 1
  SeqId b = start(c, iota(3, 200)).seq;   // block 2: slots 32..47
  prefill(c, b);
  REQUIRE(c.appendTokens(b, std::vector<int32_t>{203}));  // b: one sampled token at position 3
  // b's token, then 5 of a's prompt, in 8 places over 3 rows.
  auto m = c.buildMixed(std::vector<SeqId>{b, a, kPadding}, std::vector<int32_t>{1, 5, 0}, 8);
  REQUIRE_MESSAGE(m, m.error().message);
  CHECK(m->ragged);
  CHECK(m->rows == 3);
  CHECK(m->tokens == 8);
  CHECK(m->pos == std::vector<int32_t>{3, 0, 0});
  CHECK(m->count == std::vector<int32_t>{1, 5, 0});
  CHECK(m->tokenIds == std::vector<int32_t>{203, 100, 101, 102, 103, 104, 0, 0});
  CHECK(m->write == std::vector<int32_t>{35, 0, 1, 2, 3, 4, -1, -1});
  CHECK(m->tokenPos == std::vector<int32_t>{3, 0, 1, 2, 3, 4, 0, 0});
  CHECK(m->tokenRow == std::vector<int32_t>{0, 1, 1, 1, 1, 1, 0, 0});
  CHECK(m->last == std::vector<int32_t>{0, 5, 0});
  CHECK(m->read == concat(concat(row({32, 33, 34, 35}, 24), row({0, 1, 2, 3, 4}, 24)), row({}, 24)));
  REQUIRE(c.commit(*m));
  CHECK(seqOf(c, a).written == 5);
  CHECK(seqOf(c, b).written == 4);
  // a's next 13 reach into block 1 (slot 16 on).
  m = c.buildMixed(std::vector<SeqId>{a}, std::vector<int32_t>{13}, 13);
  REQUIRE(m);
  CHECK(m->write == concat(iota(11, 5), {16, 17}));
  CHECK(m->tokenPos == iota(13, 5));
  CHECK(m->last == std::vector<int32_t>{12});
}

TEST_CASE("kv: a mixed step's counts are checked before anything is built") {
  KvCache c({.numBlocks = 4, .capacity = 24});
  SeqId a = start(c, iota(6, 0)).seq;
  SeqId b = start(c, iota(2, 50)).seq;
  std::string before = snapshot(c);
  auto expect = [&](std::vector<SeqId> rows, std::vector<int32_t> counts, int32_t tokens, const std::string& message) {
    auto m = c.buildMixed(rows, counts, tokens);
    requireError(m, KvErrorKind::BadStep);
    CHECK(m.error().message == message);
  };
  expect({a}, {7}, 8, "sequence " + std::to_string(a) + " cannot take 7 tokens: it has 6 pending and the step 8 places left");
  expect({a}, {0}, 8, "sequence " + std::to_string(a) + " cannot take 0 tokens: it has 6 pending and the step 8 places left");
  expect({a, b}, {6, 2}, 7, "sequence " + std::to_string(b) + " cannot take 2 tokens: it has 2 pending and the step 1 places left");
  expect({a, a}, {1, 1}, 8, "sequence " + std::to_string(a) + " is on two rows of one step");
  expect({kPadding}, {1}, 8, "a padding row takes no token");
  expect({a}, {1, 1}, 8, "a mixed step needs at least one row, one token and a count a row");
  requireError(c.buildMixed(std::vector<SeqId>{99}, std::vector<int32_t>{1}, 8), KvErrorKind::UnknownSequence);
  CHECK(snapshot(c) == before);
}

TEST_CASE("kv: two sequences sharing a 40-token prefix share two full blocks") {
  KvCache c({.numBlocks = 16, .capacity = 64});
  std::vector<int32_t> prefix = iota(40, 1000);
  SeqId a = start(c, concat(prefix, {1, 2, 3})).seq;
  // Not yet written: nothing to hit.
  Started early = start(c, concat(prefix, {4}));
  CHECK(early.cachedTokens == 0);
  REQUIRE(c.finish(early.seq));
  prefill(c, a);
  const Sequence& sa = seqOf(c, a);
  CHECK(c.pool().cached(sa.blocks[0]));
  CHECK(c.pool().cached(sa.blocks[1]));
  CHECK_FALSE(c.pool().cached(sa.blocks[2]));  // 43 tokens: the third block is not full

  Started b = start(c, concat(prefix, {7, 8, 9, 10, 11}));
  CHECK(b.cachedTokens == 32);
  const Sequence& sb = seqOf(c, b.seq);
  CHECK(sb.written == 32);
  CHECK(sb.blocks[0] == sa.blocks[0]);
  CHECK(sb.blocks[1] == sa.blocks[1]);
  CHECK(sb.blocks[2] != sa.blocks[2]);
  CHECK(c.pool().refs(sa.blocks[0]) == 2);
  CHECK(c.pool().refs(sa.blocks[1]) == 2);
  CHECK(c.pool().refs(sb.blocks[2]) == 1);
  auto m = c.buildStep(std::vector<SeqId>{b.seq}, 16);
  REQUIRE(m);
  CHECK(m->pos == std::vector<int32_t>{32});
  CHECK(m->count == std::vector<int32_t>{13});
  for (int32_t t = 0; t < 13; ++t) CHECK(m->write[t] == sb.blocks[2] * kBlockSize + t);
  for (int32_t p = 0; p < 32; ++p) CHECK(m->read[p] == sa.blocks[p / 16] * kBlockSize + p % 16);

  // A fully cached prompt rounds down one block: its last block is computed.
  Started whole = start(c, iota(32, 1000));
  CHECK(whole.cachedTokens == 16);
  CHECK(seqOf(c, whole.seq).blocks[0] == sa.blocks[0]);
  CHECK(seqOf(c, whole.seq).blocks[1] != sa.blocks[1]);
  CHECK(start(c, iota(33, 1000)).cachedTokens == 32);
  CHECK(start(c, iota(16, 1000)).cachedTokens == 0);
  // A different first block breaks the chain, even with an equal second one.
  CHECK(start(c, concat(iota(16, 0), iota(17, 1016))).cachedTokens == 0);
}

TEST_CASE("kv: a different or reloaded weights identity never hits") {
  KvCache c({.numBlocks = 16, .capacity = 64});
  std::vector<int32_t> prompt = iota(33, 0);
  SeqId base = start(c, prompt, 1).seq;
  prefill(c, base);
  REQUIRE(c.finish(base));
  SeqId adapter = start(c, prompt, 2).seq;
  CHECK(seqOf(c, adapter).written == 0);
  prefill(c, adapter);
  REQUIRE(c.finish(adapter));
  // The adapter is reloaded and gets identity 3: the old entries stay but never hit it.
  Started reloaded = start(c, prompt, 3);
  CHECK(reloaded.cachedTokens == 0);
  Started old = start(c, prompt, 2);
  CHECK(old.cachedTokens == 32);
  Started again = start(c, prompt, 1);
  CHECK(again.cachedTokens == 32);
  CHECK(seqOf(c, old.seq).blocks[0] != seqOf(c, again.seq).blocks[0]);
}

TEST_CASE("kv: with the prefix cache off nothing is cached") {
  KvCache c({.numBlocks = 8, .capacity = 64, .prefixCache = false});
  SeqId a = start(c, iota(40, 0)).seq;
  prefill(c, a);
  for (int32_t b : seqOf(c, a).blocks) CHECK_FALSE(c.pool().cached(b));
  REQUIRE(c.finish(a));
  CHECK(c.pool().evictionOrder().empty());
  CHECK(c.pool().available() == 8);
  Started b = start(c, iota(40, 0));
  CHECK(b.cachedTokens == 0);
  CHECK(seqOf(c, b.seq).blocks == std::vector<int32_t>{0, 1, 2});
}

TEST_CASE("kv: unpinned cached blocks are evicted least recently released first") {
  KvCache c({.numBlocks = 6, .capacity = 32});
  std::vector<int32_t> pa = iota(17, 0), pb = iota(17, 100), pc = iota(17, 200);
  SeqId a = start(c, pa).seq, b = start(c, pb).seq, s = start(c, pc).seq;  // {0,1} {2,3} {4,5}
  for (SeqId q : {a, b, s}) prefill(c, q);
  for (SeqId q : {a, b, s}) REQUIRE(c.finish(q));
  CHECK(c.pool().evictionOrder() == std::vector<int32_t>{0, 2, 4});
  CHECK(c.pool().available() == 6);

  // A hit pins A's block; released again, it is the most recent.
  SeqId again = start(c, pa).seq;
  CHECK(seqOf(c, again).blocks == std::vector<int32_t>{0, 1});
  CHECK(c.pool().evictionOrder() == std::vector<int32_t>{2, 4});
  REQUIRE(c.finish(again));
  CHECK(c.pool().evictionOrder() == std::vector<int32_t>{2, 4, 0});

  // Free blocks go first (1, 3, 5), then B's block 2 is evicted, then C's 4.
  SeqId d = start(c, iota(32, 300)).seq;
  CHECK(seqOf(c, d).blocks == std::vector<int32_t>{1, 3});
  SeqId e = start(c, iota(32, 400)).seq;
  CHECK(seqOf(c, e).blocks == std::vector<int32_t>{5, 2});
  CHECK(c.pool().evictionOrder() == std::vector<int32_t>{4, 0});
  CHECK_FALSE(c.pool().cached(2));
  SeqId f = start(c, iota(1, 500)).seq;
  CHECK(seqOf(c, f).blocks == std::vector<int32_t>{4});
  CHECK(c.pool().evictionOrder() == std::vector<int32_t>{0});
  // B's and C's entries are gone, A's is still there.
  for (SeqId q : {f, e, d}) REQUIRE(c.finish(q));
  CHECK(c.pool().evictionOrder() == std::vector<int32_t>{0});
  CHECK(start(c, pa).cachedTokens == 16);
  CHECK(start(c, pb).cachedTokens == 0);
  CHECK(start(c, pc).cachedTokens == 0);
}

TEST_CASE("kv: pinned blocks are never evicted") {
  KvCache c({.numBlocks = 3, .capacity = 32});
  SeqId a = start(c, iota(17, 0)).seq;  // {0, 1}
  prefill(c, a);
  Started b = start(c, concat(iota(16, 0), {99}));  // hits block 0, takes 2
  CHECK(b.cachedTokens == 16);
  CHECK(seqOf(c, b.seq).blocks == std::vector<int32_t>{0, 2});
  CHECK(c.pool().refs(0) == 2);
  requireError(c.startSequence(iota(1, 50), 1), KvErrorKind::OutOfBlocks);
  REQUIRE(c.finish(a));
  CHECK(c.pool().refs(0) == 1);
  CHECK(c.pool().evictionOrder().empty());
  SeqId d = start(c, iota(1, 50)).seq;
  CHECK(seqOf(c, d).blocks == std::vector<int32_t>{1});
  requireError(c.startSequence(iota(1, 60), 1), KvErrorKind::OutOfBlocks);
  CHECK(c.pool().cached(0));
  REQUIRE(c.finish(b.seq));  // block 2 is free, block 0 evictable
  CHECK(c.pool().evictionOrder() == std::vector<int32_t>{0});
  SeqId e = start(c, iota(17, 60)).seq;
  CHECK(seqOf(c, e).blocks == std::vector<int32_t>{2, 0});
  CHECK_FALSE(c.pool().cached(0));
}

namespace {

// What the simulated pool holds at a slot: the token written there and a
// fingerprint of the identity and the whole prefix up to it, standing in for
// K/V (which depend on both).
struct Cell {
  int32_t token = -1;
  uint64_t prefix = 0;
  bool operator==(const Cell&) const = default;
};

// The cell every position of s should read back.
std::vector<Cell> expectedCells(const Sequence& s) {
  std::vector<Cell> cells;
  uint64_t h = poot::testing::mix(0, s.identity);
  for (int32_t t : s.tokens) {
    h = poot::testing::mix(h, uint32_t(t));
    cells.push_back({t, h});
  }
  return cells;
}

struct Tally {
  int64_t cachedTokens = 0, outOfBlocks = 0, evictions = 0, steps = 0;
};

// The invariants of docs/kv.md, and that every written position of every live
// sequence reads back its own token and prefix from the simulated pool.
void checkInvariants(const KvCache& c, const std::vector<Cell>& pool) {
  const BlockPool& p = c.pool();
  std::vector<int32_t> tables(p.size(), 0);
  for (const auto& [id, s] : c.sequences()) {
    REQUIRE(s.blocks.size() == (s.tokens.size() + kBlockSize - 1) / kBlockSize);
    REQUIRE(s.written <= int32_t(s.tokens.size()));
    REQUIRE(std::set<int32_t>(s.blocks.begin(), s.blocks.end()).size() == s.blocks.size());
    for (int32_t b : s.blocks) ++tables[b];
  }
  size_t free = 0, evictable = 0;
  for (int32_t b = 0; b < p.size(); ++b) {
    REQUIRE(p.refs(b) == tables[b]);
    if (!c.config().prefixCache) REQUIRE_FALSE(p.cached(b));
    if (p.refs(b) == 0) (p.cached(b) ? evictable : free) += 1;
  }
  for (int32_t b : p.evictionOrder()) REQUIRE((p.refs(b) == 0 && p.cached(b)));
  REQUIRE(p.evictionOrder().size() == evictable);
  REQUIRE(size_t(p.available()) == free + evictable);
  for (const auto& [id, s] : c.sequences()) {
    std::vector<Cell> want = expectedCells(s);
    for (size_t i = 0; i < s.blocks.size(); ++i)
      if (tables[s.blocks[i]] > 1) {  // shared: a cached, full, written prefix block
        REQUIRE(p.cached(s.blocks[i]));
        REQUIRE(int32_t(i + 1) * kBlockSize <= s.written);
      }
    for (int32_t pos = 0; pos < s.written; ++pos) {
      CAPTURE(pos);
      REQUIRE(pool[s.blocks[pos / kBlockSize] * kBlockSize + pos % kBlockSize] == want[pos]);
    }
  }
}

// One step: checks the write map, writes the simulated pool through it, then
// checks that every row reads back its tokens through the read map.
void runStep(KvCache& c, std::vector<Cell>& pool, const std::vector<SeqId>& rows, int32_t tokens) {
  auto m = c.buildStep(rows, tokens);
  REQUIRE_MESSAGE(m, m.error().message);
  const BlockPool& p = c.pool();
  std::set<int32_t> written;
  for (int32_t r = 0; r < m->rows; ++r)
    for (int32_t t = 0; t < tokens; ++t) {
      int32_t w = m->write[r * tokens + t];
      REQUIRE((w < 0) == (t >= m->count[r]));
      if (w < 0) continue;
      REQUIRE(written.insert(w).second);
      const Sequence& s = seqOf(c, m->seqs[r]);
      int32_t pos = m->pos[r] + t;
      REQUIRE(s.blocks[pos / kBlockSize] == w / kBlockSize);  // its own block...
      REQUIRE(p.refs(w / kBlockSize) == 1);                   // ...held by no other table
      REQUIRE_FALSE(p.cached(w / kBlockSize));
      REQUIRE(m->tokenIds[r * tokens + t] == s.tokens[pos]);
      pool[w] = expectedCells(s)[pos];
    }
  for (int32_t r = 0; r < m->rows; ++r) {
    std::vector<Cell> want;
    if (m->seqs[r] != kPadding) want = expectedCells(seqOf(c, m->seqs[r]));
    for (int32_t pos = 0; pos < m->capacity; ++pos) {
      int32_t slot = m->read[r * m->capacity + pos];
      if (pos < m->pos[r] + m->count[r])
        REQUIRE(pool[slot] == want[pos]);
      else
        REQUIRE(slot == 0);
    }
  }
  auto s = c.commit(*m);
  REQUIRE_MESSAGE(s, s.error().message);
}

// A random stream of requests: prompts from a few shared prefixes, several
// weights identities (sometimes reloaded), appends, batched steps of random
// widths, finishes and errors, under a small pool.
void runStream(uint64_t seed, bool prefixCache, Tally& tally) {
  std::mt19937_64 rng(seed);
  auto pick = [&rng](int64_t n) { return int64_t(rng() % uint64_t(n)); };
  int32_t capacity = 8 + int32_t(pick(64));
  KvCache c({.numBlocks = 3 + int32_t(pick(20)), .capacity = capacity, .prefixCache = prefixCache});
  std::vector<Cell> pool(size_t(c.pool().size()) * kBlockSize);
  std::vector<std::vector<int32_t>> bases(3);
  for (auto& b : bases)
    for (int32_t i = 0; i < capacity; ++i) b.push_back(int32_t(pick(4)));  // few ids: equal blocks recur
  std::vector<uint64_t> identities{1, 2, 3};
  uint64_t nextIdentity = 4;
  std::vector<SeqId> live;
  auto randomLive = [&]() { return live[size_t(pick(int64_t(live.size())))]; };

  for (int op = 0; op < 300; ++op) {
    CAPTURE(op);
    std::string before = snapshot(c);
    int64_t kind = pick(100);
    if (kind < 30) {
      // Often a whole base prefix of whole blocks, to hit the rounding rule.
      bool blocks = pick(4) == 0;
      int32_t length = blocks ? kBlockSize * (1 + int32_t(pick(4))) : 1 + int32_t(pick(capacity + 4));
      int32_t shared = blocks || pick(4) == 0 ? length : int32_t(pick(length + 1));
      const auto& base = bases[size_t(pick(3))];
      std::vector<int32_t> prompt(base.begin(), base.begin() + std::min(shared, capacity));
      while (int32_t(prompt.size()) < length) prompt.push_back(int32_t(pick(4)));
      std::set<int32_t> cachedBefore;
      for (int32_t b = 0; b < c.pool().size(); ++b)
        if (c.pool().cached(b)) cachedBefore.insert(b);
      auto s = c.startSequence(prompt, identities[size_t(pick(3))]);
      if (length > capacity) {
        requireError(s, KvErrorKind::Capacity);
      } else if (!s) {
        REQUIRE(s.error().kind == KvErrorKind::OutOfBlocks);
        ++tally.outOfBlocks;
      } else {
        REQUIRE(s->cachedTokens % kBlockSize == 0);
        REQUIRE(s->cachedTokens < length);
        if (!prefixCache) REQUIRE(s->cachedTokens == 0);
        tally.cachedTokens += s->cachedTokens;
        for (int32_t b : seqOf(c, s->seq).blocks) tally.evictions += cachedBefore.count(b) && !c.pool().cached(b);
        live.push_back(s->seq);
      }
      if (!s) REQUIRE(snapshot(c) == before);
    } else if (kind < 50 && !live.empty()) {
      SeqId q = randomLive();
      size_t length = seqOf(c, q).tokens.size();
      std::vector<int32_t> more;
      for (int64_t n = 1 + pick(20); n > 0; --n) more.push_back(int32_t(pick(4)));
      auto s = c.appendTokens(q, more);
      if (length + more.size() > size_t(capacity)) {
        requireError(s, KvErrorKind::Capacity);
      } else if (!s) {
        REQUIRE(s.error().kind == KvErrorKind::OutOfBlocks);
        ++tally.outOfBlocks;
      }
      if (!s) REQUIRE(snapshot(c) == before);
    } else if (kind < 80 && !live.empty()) {
      std::vector<SeqId> rows, candidates = live;
      std::shuffle(candidates.begin(), candidates.end(), rng);
      for (int64_t n = 1 + pick(4); n > 0; --n) {
        if (pick(4) == 0 || candidates.empty()) {
          rows.push_back(kPadding);
        } else {
          rows.push_back(candidates.back());
          candidates.pop_back();
        }
      }
      runStep(c, pool, rows, 1 + int32_t(pick(24)));
      ++tally.steps;
    } else if (kind < 95 && !live.empty()) {
      size_t i = size_t(pick(int64_t(live.size())));
      REQUIRE(c.finish(live[i]));
      live.erase(live.begin() + int64_t(i));
    } else if (kind < 97) {
      identities[size_t(pick(3))] = nextIdentity++;  // an adapter reloaded
    } else {
      requireError(c.finish(1u << 30), KvErrorKind::UnknownSequence);
      REQUIRE(snapshot(c) == before);
    }
    checkInvariants(c, pool);
  }
  for (SeqId q : live) REQUIRE(c.finish(q));
  for (int32_t b = 0; b < c.pool().size(); ++b) REQUIRE(c.pool().refs(b) == 0);
  REQUIRE(c.pool().available() == c.pool().size());
}

}  // namespace

TEST_CASE("kv: property: random request streams keep the pool invariants") {
  Tally on, off;
  std::vector<uint64_t> seeds;
  for (uint64_t s = 0; s < 200; ++s) seeds.push_back(s);
  seeds.push_back((uint64_t(std::random_device{}()) << 32) ^ std::random_device{}());
  for (uint64_t seed : seeds) {
    CAPTURE(seed);
    runStream(seed, true, on);
    runStream(seed, false, off);
  }
  // The streams exercised what they are for.
  CHECK(on.cachedTokens > 0);
  CHECK(off.cachedTokens == 0);
  CHECK(on.outOfBlocks > 0);
  CHECK(off.outOfBlocks > 0);
  CHECK(on.evictions > 0);
  CHECK(on.steps > 0);
}

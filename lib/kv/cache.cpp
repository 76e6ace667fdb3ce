// The KV driver's core. Every call that can fail checks everything first
// (ids, capacity, the blocks it needs against the free and evictable ones,
// leaving out the evictable blocks it is about to pin) and only then changes
// the pool or a table, so a failed call changes nothing. Sequences release
// their blocks last to first, so a prefix's early blocks are the most recently
// released and are evicted after the blocks that follow them.
#include "kv/cache.h"

#include <algorithm>
#include <set>
#include <string>

namespace poot::kv {
namespace {

int32_t blocksFor(int32_t length) { return (length + kBlockSize - 1) / kBlockSize; }

BlockTokens blockTokens(const Sequence& s, int32_t block) {
  return BlockTokens(s.tokens.data() + size_t(block) * kBlockSize, kBlockSize);
}

int32_t slotOf(const Sequence& s, int32_t pos) { return s.blocks[pos / kBlockSize] * kBlockSize + pos % kBlockSize; }

KvError unknown(SeqId seq) { return {KvErrorKind::UnknownSequence, "no live sequence " + std::to_string(seq)}; }

KvError outOfBlocks(int32_t need, int32_t available) {
  return {KvErrorKind::OutOfBlocks, "out of kv blocks: " + std::to_string(need) + " needed, " +
                                        std::to_string(available) + " free or evictable"};
}

KvError capacity(size_t length, int32_t cap) {
  return {KvErrorKind::Capacity,
          "a sequence of " + std::to_string(length) + " tokens passes the capacity of " + std::to_string(cap)};
}

}  // namespace

KvCache::KvCache(KvConfig config) : config_(config), pool_(config.numBlocks) {}

const Sequence* KvCache::sequence(SeqId seq) const {
  auto it = seqs_.find(seq);
  return it == seqs_.end() ? nullptr : &it->second;
}

KvResult<Started> KvCache::startSequence(std::span<const int32_t> prompt, uint64_t weightsIdentity) {
  if (prompt.empty()) return KvError{KvErrorKind::EmptyPrompt, "a sequence starts with at least one token"};
  if (prompt.size() > size_t(config_.capacity)) return capacity(prompt.size(), config_.capacity);
  Sequence s;
  s.identity = weightsIdentity;
  s.tokens.assign(prompt.begin(), prompt.end());
  int32_t length = int32_t(prompt.size());

  if (config_.prefixCache) {
    for (int32_t i = 0; i < (length - 1) / kBlockSize; ++i) {
      uint64_t key = blockKey(s.chainKey, blockTokens(s, i), weightsIdentity);
      auto hit = pool_.find(key, blockTokens(s, i), weightsIdentity, s.chainEntry);
      if (!hit) break;
      s.blocks.push_back(hit->block);
      s.chainKey = key;
      s.chainEntry = hit->serial;
    }
  }
  int32_t need = blocksFor(length) - int32_t(s.blocks.size());
  int32_t unpinned = int32_t(std::count_if(s.blocks.begin(), s.blocks.end(), [&](int32_t b) { return pool_.refs(b) == 0; }));
  if (need > pool_.available() - unpinned) return outOfBlocks(need, pool_.available() - unpinned);

  for (int32_t b : s.blocks) pool_.pin(b);
  for (int32_t b : pool_.allocate(need)) s.blocks.push_back(b);
  s.written = int32_t(s.blocks.size() - need) * kBlockSize;
  SeqId id = ++lastSeq_;
  Started started{id, s.written};
  seqs_.emplace(id, std::move(s));
  return started;
}

KvStatus KvCache::appendTokens(SeqId seq, std::span<const int32_t> tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return unknown(seq);
  Sequence& s = it->second;
  if (tokens.size() > size_t(config_.capacity) - s.tokens.size()) return capacity(s.tokens.size() + tokens.size(), config_.capacity);
  int32_t need = blocksFor(int32_t(s.tokens.size() + tokens.size())) - int32_t(s.blocks.size());
  if (need > pool_.available()) return outOfBlocks(need, pool_.available());

  for (int32_t b : pool_.allocate(need)) s.blocks.push_back(b);
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  return KvOk{};
}

KvResult<StepMaps> KvCache::buildStep(std::span<const SeqId> rows, int32_t tokens) const {
  if (rows.empty() || tokens < 1) return KvError{KvErrorKind::BadStep, "a step needs at least one row and one token a row"};
  StepMaps m;
  m.rows = int32_t(rows.size());
  m.tokens = tokens;
  m.capacity = config_.capacity;
  m.seqs.assign(rows.begin(), rows.end());
  m.pos.assign(rows.size(), 0);
  m.count.assign(rows.size(), 0);
  m.tokenIds.assign(rows.size() * tokens, 0);
  m.read.assign(rows.size() * config_.capacity, 0);
  m.write.assign(rows.size() * tokens, -1);
  std::set<SeqId> seen;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r] == kPadding) continue;
    if (!seen.insert(rows[r]).second)
      return KvError{KvErrorKind::BadStep, "sequence " + std::to_string(rows[r]) + " is on two rows of one step"};
    const Sequence* s = sequence(rows[r]);
    if (!s) return unknown(rows[r]);
    m.pos[r] = s->written;
    m.count[r] = std::min(tokens, int32_t(s->tokens.size()) - s->written);
    for (int32_t p = 0; p < m.pos[r] + m.count[r]; ++p) m.read[r * config_.capacity + p] = slotOf(*s, p);
    for (int32_t t = 0; t < m.count[r]; ++t) {
      m.write[r * tokens + t] = slotOf(*s, m.pos[r] + t);
      m.tokenIds[r * tokens + t] = s->tokens[m.pos[r] + t];
    }
  }
  return m;
}

KvResult<StepMaps> KvCache::buildMixed(std::span<const SeqId> rows, std::span<const int32_t> counts,
                                        int32_t tokens) const {
  if (rows.empty() || tokens < 1 || counts.size() != rows.size())
    return KvError{KvErrorKind::BadStep, "a mixed step needs at least one row, one token and a count a row"};
  StepMaps m;
  m.rows = int32_t(rows.size());
  m.tokens = tokens;
  m.capacity = config_.capacity;
  m.ragged = true;
  m.seqs.assign(rows.begin(), rows.end());
  m.pos.assign(rows.size(), 0);
  m.count.assign(rows.size(), 0);
  m.tokenIds.assign(size_t(tokens), 0);
  m.read.assign(rows.size() * config_.capacity, 0);
  m.write.assign(size_t(tokens), -1);
  m.tokenPos.assign(size_t(tokens), 0);
  m.tokenRow.assign(size_t(tokens), 0);
  m.last.assign(rows.size(), 0);
  std::set<SeqId> seen;
  int32_t place = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (rows[r] == kPadding) {
      if (counts[r] != 0) return KvError{KvErrorKind::BadStep, "a padding row takes no token"};
      continue;
    }
    if (!seen.insert(rows[r]).second)
      return KvError{KvErrorKind::BadStep, "sequence " + std::to_string(rows[r]) + " is on two rows of one step"};
    const Sequence* s = sequence(rows[r]);
    if (!s) return unknown(rows[r]);
    int32_t pending = int32_t(s->tokens.size()) - s->written;
    if (counts[r] < 1 || counts[r] > pending || counts[r] > tokens - place)
      return KvError{KvErrorKind::BadStep, "sequence " + std::to_string(rows[r]) + " cannot take " +
                                               std::to_string(counts[r]) + " tokens: it has " + std::to_string(pending) +
                                               " pending and the step " + std::to_string(tokens - place) + " places left"};
    m.pos[r] = s->written;
    m.count[r] = counts[r];
    for (int32_t p = 0; p < m.pos[r] + m.count[r]; ++p) m.read[r * config_.capacity + p] = slotOf(*s, p);
    for (int32_t t = 0; t < m.count[r]; ++t, ++place) {
      m.write[place] = slotOf(*s, m.pos[r] + t);
      m.tokenIds[place] = s->tokens[m.pos[r] + t];
      m.tokenPos[place] = m.pos[r] + t;
      m.tokenRow[place] = int32_t(r);
    }
    m.last[r] = place - 1;
  }
  return m;
}

KvStatus KvCache::commit(const StepMaps& step) {
  for (int32_t r = 0; r < step.rows; ++r) {
    if (step.seqs[r] == kPadding) continue;
    const Sequence* s = sequence(step.seqs[r]);
    if (!s) return unknown(step.seqs[r]);
    if (s->written != step.pos[r])
      return KvError{KvErrorKind::StaleStep, "the step writes sequence " + std::to_string(step.seqs[r]) +
                                                 " from position " + std::to_string(step.pos[r]) + " but it has " +
                                                 std::to_string(s->written) + " written"};
  }
  for (int32_t r = 0; r < step.rows; ++r) {
    if (step.seqs[r] == kPadding) continue;
    Sequence& s = seqs_.at(step.seqs[r]);
    int32_t before = s.written;
    s.written += step.count[r];
    cacheFilledBlocks(s, before);
  }
  return KvOk{};
}

void KvCache::cacheFilledBlocks(Sequence& s, int32_t writtenBefore) {
  if (!config_.prefixCache) return;
  for (int32_t i = writtenBefore / kBlockSize; i < s.written / kBlockSize && !s.chainBroken; ++i) {
    uint64_t key = blockKey(s.chainKey, blockTokens(s, i), s.identity);
    auto entry = pool_.publish(s.blocks[i], key, blockTokens(s, i), s.identity, s.chainEntry);
    s.chainBroken = !entry;
    if (entry) {
      s.chainKey = key;
      s.chainEntry = *entry;
    }
  }
}

KvStatus KvCache::finish(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return unknown(seq);
  for (auto b = it->second.blocks.rbegin(); b != it->second.blocks.rend(); ++b) pool_.release(*b);
  seqs_.erase(it);
  return KvOk{};
}

}  // namespace poot::kv

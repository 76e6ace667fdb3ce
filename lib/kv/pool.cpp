// The block pool: ordered sets for the free list (lowest id first) and the
// eviction order ((release clock, id), oldest first), and an ordered map from
// cache key to block. Nothing iterates a hash map, so the same calls always
// choose the same blocks.
#include "kv/pool.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace poot::kv {

uint64_t blockKey(uint64_t parentKey, BlockTokens tokens, uint64_t weightsIdentity) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto eat = [&h](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  eat(parentKey, 8);
  for (int32_t t : tokens) eat(uint32_t(t), 4);
  eat(weightsIdentity, 8);
  return h;
}

BlockPool::BlockPool(int32_t numBlocks) : blocks_(numBlocks) {
  assert(numBlocks >= 1 && numBlocks <= std::numeric_limits<int32_t>::max() / kBlockSize);
  for (int32_t b = 0; b < numBlocks; ++b) free_.insert(b);
}

std::vector<int32_t> BlockPool::evictionOrder() const {
  std::vector<int32_t> order;
  for (const auto& [released, block] : evictable_) order.push_back(block);
  return order;
}

std::vector<int32_t> BlockPool::allocate(int32_t n) {
  assert(n <= available());
  std::vector<int32_t> taken;
  while (int32_t(taken.size()) < n) {
    int32_t b;
    if (!free_.empty()) {
      b = *free_.begin();
      free_.erase(free_.begin());
    } else {
      b = evictable_.begin()->second;
      evictable_.erase(evictable_.begin());
      index_.erase(blocks_[b].key);
      blocks_[b].serial = 0;
    }
    blocks_[b].refs = 1;
    taken.push_back(b);
  }
  return taken;
}

void BlockPool::pin(int32_t block) {
  Block& b = blocks_[block];
  assert(b.serial != 0);
  if (b.refs == 0) evictable_.erase({b.released, block});
  ++b.refs;
}

void BlockPool::release(int32_t block) {
  Block& b = blocks_[block];
  assert(b.refs > 0);
  if (--b.refs > 0) return;
  if (b.serial == 0) {
    free_.insert(block);
    return;
  }
  b.released = ++clock_;
  evictable_.insert({b.released, block});
}

std::optional<CacheEntry> BlockPool::find(uint64_t key, BlockTokens tokens, uint64_t identity,
                                          uint64_t parent) const {
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  const Block& b = blocks_[it->second];
  if (b.identity != identity || b.parent != parent || !std::equal(tokens.begin(), tokens.end(), b.tokens.begin()))
    return std::nullopt;
  return CacheEntry{it->second, b.serial};
}

std::optional<uint64_t> BlockPool::publish(int32_t block, uint64_t key, BlockTokens tokens, uint64_t identity,
                                           uint64_t parent) {
  if (index_.count(key)) {
    auto held = find(key, tokens, identity, parent);
    if (!held) return std::nullopt;
    return held->serial;
  }
  Block& b = blocks_[block];
  assert(b.refs == 1 && b.serial == 0);
  b.serial = ++lastSerial_;
  b.key = key;
  b.identity = identity;
  b.parent = parent;
  std::copy(tokens.begin(), tokens.end(), b.tokens.begin());
  index_.emplace(key, block);
  return b.serial;
}

}  // namespace poot::kv

// The block pool of the paged KV cache and its prefix-cache index. The pool
// has a fixed number of blocks of kBlockSize token slots; block b covers the
// flat slots [b * kBlockSize, (b + 1) * kBlockSize) of every layer's K and V
// pool. Each block has a reference count (the block tables that point at it).
// A block with no reference is either free or, when it holds a full block the
// prefix cache knows, cached and evictable. Allocation is deterministic: the
// lowest free id first, then the evictable block released longest ago (a
// logical clock, not wall time), whose cache entry goes with it. Cache entries
// are keyed by blockKey and also compare the tokens, the weights identity and
// the parent entry, so a hash collision never aliases two prefixes.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace poot::kv {

inline constexpr int32_t kBlockSize = 16;

using BlockTokens = std::span<const int32_t, kBlockSize>;

// The prefix-cache key of a full block: FNV-1a 64 over the parent block's key
// (0 for a sequence's first block) as 8 little-endian bytes, the block's token
// ids as 4 little-endian bytes each, then the weights identity as 8 bytes.
uint64_t blockKey(uint64_t parentKey, BlockTokens tokens, uint64_t weightsIdentity);

// A cache entry: the block that holds it and its serial. Serials count from 1
// and are never reused, so an entry names its parent by serial; 0 is "no
// parent" (a sequence's first block).
struct CacheEntry {
  int32_t block;
  uint64_t serial;
};

class BlockPool {
 public:
  // numBlocks is at least 1 and numBlocks * kBlockSize fits in int32.
  explicit BlockPool(int32_t numBlocks);

  int32_t size() const { return int32_t(blocks_.size()); }
  int32_t refs(int32_t block) const { return blocks_[block].refs; }
  bool cached(int32_t block) const { return blocks_[block].serial != 0; }
  // Blocks allocate() can take: the free ones and the evictable ones.
  int32_t available() const { return int32_t(free_.size() + evictable_.size()); }
  // The evictable blocks (cached, no reference), the next to be evicted first.
  std::vector<int32_t> evictionOrder() const;

  // Takes n <= available() blocks, each with one reference: free blocks lowest
  // id first, then evictable ones in eviction order, dropping their entries.
  std::vector<int32_t> allocate(int32_t n);
  // One more reference on a cached block (it leaves the eviction order).
  void pin(int32_t block);
  // One reference less. At zero a cached block becomes the most recent in the
  // eviction order; any other block becomes free.
  void release(int32_t block);

  // The entry under key whose tokens, identity and parent are these.
  std::optional<CacheEntry> find(uint64_t key, BlockTokens tokens, uint64_t identity, uint64_t parent) const;
  // Makes `block` (one reference, not cached) the entry for this content when
  // no entry holds key. Returns the serial of the entry that holds the content
  // now (the new one, or an equal one already there), or nothing when key is
  // held by different content (a collision): then the block stays uncached.
  std::optional<uint64_t> publish(int32_t block, uint64_t key, BlockTokens tokens, uint64_t identity,
                                  uint64_t parent);

 private:
  struct Block {
    int32_t refs = 0;
    uint64_t serial = 0;  // the cache entry's serial; 0 when not cached
    uint64_t key = 0;
    uint64_t identity = 0;
    uint64_t parent = 0;
    std::array<int32_t, kBlockSize> tokens{};
    uint64_t released = 0;  // the clock when its last reference went
  };

  std::vector<Block> blocks_;
  std::set<int32_t> free_;
  std::set<std::pair<uint64_t, int32_t>> evictable_;  // (released, block)
  std::map<uint64_t, int32_t> index_;                 // key -> block
  uint64_t clock_ = 0;
  uint64_t lastSerial_ = 0;
};

}  // namespace poot::kv

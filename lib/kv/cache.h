// The KV driver's core: the block tables of the live sequences over one
// shared BlockPool, the prefix cache, and the per-step maps a paged step graph
// binds (the seed's "Paged KV" and "Prefix caching"). A sequence is started
// from its prompt and a weights identity (the base model and each adapter have
// their own, and a reloaded adapter a fresh one), grows by appendTokens, and is
// finished to release its blocks. Each step, buildStep lays the chosen
// sequences on the graph's rows and gives the read map ([rows, capacity] i32:
// each logical position's flat pool slot) and the write map ([rows * tokens]
// i32: the slot each new token is written to, -1 for padding), or buildMixed
// the ragged maps of a mixed step (rows of their own token counts packed
// one after another); once the step
// has run, commit marks those positions written, and every block it fills
// joins the prefix cache. Shared blocks are only full, written prefix blocks,
// and a sequence writes only into its own unshared blocks.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "kv/pool.h"
#include "kv/result.h"

namespace poot::kv {

struct KvConfig {
  int32_t numBlocks = 1;     // blocks in the pool (at least 1): numBlocks * kBlockSize slots
  int32_t capacity = 0;      // the longest sequence, the read map's width (the graph's cap)
  bool prefixCache = true;   // off: nothing is looked up or cached (`--no-prefix-cache`)
};

// Sequence ids count from 1 and are never reused; kPadding marks a padding row.
using SeqId = uint64_t;
inline constexpr SeqId kPadding = 0;

struct Sequence {
  uint64_t identity = 0;
  std::vector<int32_t> tokens;  // every token so far, prompt first
  std::vector<int32_t> blocks;  // the block table: position p is in blocks[p / kBlockSize]
  int32_t written = 0;          // the leading positions whose K/V are in the pool
  // The prefix-cache chain through the last full written block: its key and
  // the serial of the entry that holds its content; broken after a collision,
  // when no later block of the sequence can be cached.
  uint64_t chainKey = 0;
  uint64_t chainEntry = 0;
  bool chainBroken = false;
};

struct Started {
  SeqId seq;
  // Prompt positions already in the pool, the prefill to skip: a multiple of
  // kBlockSize, and less than the prompt length (the block of the last prompt
  // token is always computed, so a fully cached prompt rounds down one block).
  int32_t cachedTokens;
};

// The inputs of one step. Row r holds seqs[r] (or kPadding); its new tokens
// are positions [pos[r], pos[r] + count[r]) of its sequence. A padded step
// (buildStep, the prefill and decode plans) gives every row `tokens` places,
// token t of row r at r * tokens + t; a ragged one (buildMixed, a mixed plan)
// has `tokens` places in all, row r's count[r] tokens one after another from
// the row before it, then padding to the end.
struct StepMaps {
  int32_t rows = 0, tokens = 0, capacity = 0;
  bool ragged = false;
  std::vector<SeqId> seqs;         // [rows]
  std::vector<int32_t> pos;        // [rows]: the first new position (0 on padding)
  std::vector<int32_t> count;      // [rows]: the new tokens, at most `tokens`
  std::vector<int32_t> tokenIds;   // the new token ids, 0 on padding places: [rows * tokens] (ragged: [tokens])
  // [rows * capacity]: the slot of each position below pos + count; slot 0
  // (always a valid slot, hidden by the mask and the live length) past it.
  std::vector<int32_t> read;
  std::vector<int32_t> write;      // the slot of each new token, -1 on padding places: [rows * tokens] (ragged: [tokens])
  // Ragged only, what the mixed plan binds as `pos`, `row` and `sample`:
  std::vector<int32_t> tokenPos;   // [tokens]: each token's position (0 on padding)
  std::vector<int32_t> tokenRow;   // [tokens]: each token's row (0 on padding)
  std::vector<int32_t> last;       // [rows]: the place of the row's last token (0 on a padding row)
};

class KvCache {
 public:
  explicit KvCache(KvConfig config);

  // Starts a sequence: points its table at the longest cached prefix of full
  // blocks of this identity (pinning them) and allocates the rest.
  KvResult<Started> startSequence(std::span<const int32_t> prompt, uint64_t weightsIdentity);
  // Adds tokens to be computed (a sampled token, say), allocating blocks.
  KvStatus appendTokens(SeqId seq, std::span<const int32_t> tokens);
  // The maps of a step over these rows, up to `tokens` new positions a row
  // (the next ones not yet written). Changes nothing.
  KvResult<StepMaps> buildStep(std::span<const SeqId> rows, int32_t tokens) const;
  // The ragged maps of a step of `tokens` places over these rows, row r
  // taking the next counts[r] positions of its sequence (at least 1 and at
  // most its pending ones; 0 on padding), all of them within `tokens`.
  // Changes nothing.
  KvResult<StepMaps> buildMixed(std::span<const SeqId> rows, std::span<const int32_t> counts, int32_t tokens) const;
  // After the step of these maps has run: marks their positions written and
  // caches the blocks they filled.
  KvStatus commit(const StepMaps& step);
  // Releases the sequence's blocks; its cached ones stay, evictable.
  KvStatus finish(SeqId seq);

  const KvConfig& config() const { return config_; }
  const BlockPool& pool() const { return pool_; }
  // The live sequences, by id.
  const std::map<SeqId, Sequence>& sequences() const { return seqs_; }
  // One live sequence; nullptr for an unknown id.
  const Sequence* sequence(SeqId seq) const;

 private:
  void cacheFilledBlocks(Sequence& s, int32_t writtenBefore);

  KvConfig config_;
  BlockPool pool_;
  std::map<SeqId, Sequence> seqs_;
  SeqId lastSeq_ = kPadding;
};

}  // namespace poot::kv

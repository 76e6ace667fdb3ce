// Continuous batching over a KvCache: the policy `poot generate` follows to
// decide which sequences share each step of a paged prefill plan and a paged
// decode plan. Requests wait in a queue and are started (their prefix looked
// up) only when a row is free and the pool can hold them to their last token,
// so a request admitted after another's prefill was committed finds that
// prefix cached, and no admitted sequence can run out of blocks later. The
// paged plans take one position for the whole step, so the rows of a step
// are sequences at the same position: each step serves the live sequences
// furthest behind (the lowest position), which lets a late arrival catch up
// and then step with the others. Sequences with more than one token to
// compute take the prefill plan while its window fits the capacity; a
// single pending token (a sampled one) takes the decode plan. A sequence
// stops after maxNew generated tokens or at an end-of-sequence id and is
// finished at once, freeing its row and its blocks for the next request.
// Each request carries the weights identity it runs on (the base model or an
// adapter; a reloaded adapter has a fresh one), fixed when it is submitted.
// A step serves rows of one identity only, which it names, so the caller
// binds that identity's weights before running it; at equal positions a step
// keeps the previous step's identity, so the weights change as seldom as the
// positions allow. The batcher only plans: the caller runs each step and
// hands back the sampled tokens.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "kv/cache.h"

namespace poot::kv {

struct BatchConfig {
  int32_t prefillRows = 1, prefillTokens = 1;  // the prefill plan's batch rows and tokens a row
  int32_t decodeRows = 1;                      // the decode plan's batch rows (one token a row)
  int32_t maxNew = 1;                          // tokens to generate a request, at least 1
  std::set<int32_t> eos;                       // end-of-sequence ids (kept in the output)
};

// One planned step. Row r holds request requests[r] (-1 on padding); when
// sampleAt[r] >= 0 the logits of its token sampleAt[r] give the request's
// next token. Every row's sequence runs on the weights of `identity`.
struct PlannedStep {
  bool prefill = false;  // which plan runs it
  uint64_t identity = 0;
  StepMaps maps;
  std::vector<int64_t> requests;
  std::vector<int32_t> sampleAt;
};

struct BatchStats {
  int64_t hits = 0;            // requests that found a cached prefix
  int64_t skippedTokens = 0;   // prompt tokens whose prefill was skipped
  int32_t peakBlocks = 0;      // blocks held by live sequences, at the most
  int64_t prefillSteps = 0, decodeSteps = 0;
  int64_t decodeRowsUsed = 0;  // sequences over all decode steps (rows that were not padding)
  int64_t generated = 0;       // tokens generated over all requests
};

class Batcher {
 public:
  Batcher(KvCache& cache, BatchConfig config);

  // Queues a request on the weights of `identity`; its index counts from 0.
  // A request must fit alone: prompt + maxNew - 1 tokens within the capacity
  // and its blocks within the pool (a Capacity or OutOfBlocks error, and
  // nothing queued).
  KvResult<int64_t> submit(std::vector<int32_t> prompt, uint64_t identity);
  // Admits what fits, then plans the next step; nothing when every request
  // is done.
  KvResult<std::optional<PlannedStep>> next();
  // After `step` ran: `sampled[r]` is row r's next token where sampleAt[r]
  // >= 0. Commits the step, appends or finishes the sequences.
  KvStatus complete(const PlannedStep& step, std::span<const int32_t> sampled);

  bool done() const { return queue_.empty() && live_.empty(); }
  // Requests of this identity not done yet (queued or live): while there are
  // any, its weights are still needed, even after its adapter was reloaded.
  int64_t unfinished(uint64_t identity) const;
  int64_t finished() const { return finished_; }
  // Whether request r has generated its last token.
  bool finished(int64_t r) const { return done_[size_t(r)]; }
  int64_t requests() const { return int64_t(prompts_.size()); }
  // Each request's generated tokens (complete once done()).
  const std::vector<std::vector<int32_t>>& outputs() const { return outputs_; }
  const BatchStats& stats() const { return stats_; }

 private:
  int32_t finalBlocks(int64_t request) const;
  int32_t reservedBlocks() const;
  KvStatus admit();
  void notePeak();

  KvCache& cache_;
  BatchConfig config_;
  std::vector<std::vector<int32_t>> prompts_, outputs_;
  std::vector<uint64_t> identities_;  // per request
  std::vector<bool> done_;            // per request
  std::map<uint64_t, int64_t> unfinished_;  // identity -> requests not done
  uint64_t lastIdentity_ = 0;         // the last planned step's
  std::deque<int64_t> queue_;
  std::map<SeqId, int64_t> live_;  // sequence -> request
  int64_t finished_ = 0;
  BatchStats stats_;
};

}  // namespace poot::kv

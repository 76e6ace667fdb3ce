// Continuous batching over a KvCache: the policy the engine follows to
// decide which sequences share each step of a paged prefill plan and a paged
// decode plan. Requests wait in a queue and are started (their prefix looked
// up) only when a row is free and the pool can hold them to their last token,
// so a request admitted after another's prefill was committed finds that
// prefix cached, and no admitted sequence can run out of blocks later. The
// paged plans take a position a row, so a step's rows may be sequences at
// any positions: each step fills its rows with live sequences, the ones
// furthest behind (the lowest position) first, so none waits behind ones
// that are further along. Sequences with more than one token to
// compute take the prefill plan while its window fits the capacity; a
// single pending token (a sampled one) takes the decode plan. With a mixed
// plan, a step where both kinds are live runs them together instead: the
// sampled tokens first, then prompt chunks in the places left, so a long
// prompt no longer holds up the sequences that are generating. A sequence
// stops after its request's maxNew generated tokens or at one of its stop
// ids, or when it is cancelled, and is finished at once, freeing its row and
// its blocks for the next request.
// Each request carries the weights identity it runs on (the base model or an
// adapter; a reloaded adapter has a fresh one), fixed when it is submitted.
// A step serves rows of one identity only, which it names, so the caller
// binds that identity's weights before running it: the furthest behind
// sequence's, and at equal positions the previous step's, so the weights
// change as seldom as fairness allows. The batcher only plans: the caller
// runs each step and hands back the sampled tokens.
#pragma once

#include <algorithm>
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
  int32_t mixedRows = 0, mixedTokens = 0;      // the mixed plan's sequences (at least 2) and tokens in all;
                                               // 0: no mixed plan
};

// Which plan runs a step (poot generate reports by it, in this order).
enum class Plan : uint8_t { Prefill, Decode, Mixed };
inline const char* planName(Plan p) { return p == Plan::Prefill ? "prefill" : p == Plan::Decode ? "decode" : "mixed"; }

// What a request asks for.
struct Request {
  std::vector<int32_t> prompt;
  uint64_t identity = 0;     // the weights it runs on
  int32_t maxNew = 1;        // tokens to generate, at least 1
  std::set<int32_t> stop;    // end-of-sequence ids (kept in the output)
};

// Why a request ended; None while it runs or waits.
enum class Finish : uint8_t { None, Length, Stop, Cancelled };

// Whether a request can ever run in a cache of this configuration: a
// prompt (EmptyPrompt), maxNew at least 1 (BadRequest), prompt + maxNew - 1
// tokens within the capacity (Capacity) and their blocks within the pool
// (OutOfBlocks).
KvStatus checkRequest(const KvConfig& cache, const Request& request);

// One planned step. Row r holds request requests[r] (-1 on padding); when
// sampleAt[r] >= 0 the logits of its token sampleAt[r] give the request's
// next token. Every row's sequence runs on the weights of `identity`.
struct PlannedStep {
  Plan plan = Plan::Decode;
  uint64_t identity = 0;
  StepMaps maps;
  std::vector<int64_t> requests;
  std::vector<int32_t> sampleAt;
};

struct BatchStats {
  int64_t hits = 0;            // requests that found a cached prefix
  int64_t skippedTokens = 0;   // prompt tokens whose prefill was skipped
  int32_t peakBlocks = 0;      // blocks held by live sequences, at the most
  int64_t prefillSteps = 0, decodeSteps = 0, mixedSteps = 0;
  int64_t decodeRowsUsed = 0;   // sequences over all decode steps (rows that were not padding)
  int64_t mixedTokensUsed = 0;  // tokens computed over all mixed steps (places that were not padding)
  int64_t generated = 0;       // tokens generated over all requests
};

class Batcher {
 public:
  Batcher(KvCache& cache, BatchConfig config);

  // Queues a request; its index counts from 0. It must fit alone
  // (checkRequest's errors, and nothing queued).
  KvResult<int64_t> submit(Request request);
  // Admits what fits, then plans the next step; nothing when every request
  // is done.
  KvResult<std::optional<PlannedStep>> next();
  // After `step` ran: `sampled[r]` is row r's next token where sampleAt[r]
  // >= 0. Commits the step, appends or finishes the sequences; returns, per
  // row, how its request ended with this token (None: it goes on, or the
  // row sampled nothing).
  KvResult<std::vector<Finish>> complete(const PlannedStep& step, std::span<const int32_t> sampled);
  // Ends a request between steps, queued or running (its blocks released,
  // the written full ones staying cached). False when it had already
  // finished; an index never given is an UnknownRequest error.
  KvResult<bool> cancel(int64_t request);

  bool done() const { return queue_.empty() && live_.empty(); }
  // Whether request r waits in the queue, not admitted yet (it holds no block).
  bool queued(int64_t r) const { return std::find(queue_.begin(), queue_.end(), r) != queue_.end(); }
  // Requests of this identity not done yet (queued or live): while there are
  // any, its weights are still needed, even after its adapter was reloaded.
  int64_t unfinished(uint64_t identity) const;
  int64_t finished() const { return finished_; }
  // Whether request r has ended, and why.
  bool finished(int64_t r) const { return records_[size_t(r)].finish != Finish::None; }
  Finish finish(int64_t r) const { return records_[size_t(r)].finish; }
  int64_t requests() const { return int64_t(records_.size()); }
  const BatchStats& stats() const { return stats_; }

 private:
  // A request as the batcher keeps it: its prompt only until it is
  // admitted (the cache holds it then), so a finished request costs a few
  // words.
  struct Record {
    Request request;
    int32_t promptLength = 0;
    int32_t generated = 0;
    Finish finish = Finish::None;
  };
  int32_t finalBlocks(int64_t request) const;
  int32_t reservedBlocks() const;
  KvStatus admit();
  void notePeak();
  void end(int64_t request, Finish why);

  KvCache& cache_;
  BatchConfig config_;
  std::vector<Record> records_;
  std::map<uint64_t, int64_t> unfinished_;  // identity -> requests not done
  uint64_t lastIdentity_ = 0;         // the last planned step's
  std::deque<int64_t> queue_;
  std::map<SeqId, int64_t> live_;  // sequence -> request
  int64_t finished_ = 0;
  BatchStats stats_;
};

}  // namespace poot::kv

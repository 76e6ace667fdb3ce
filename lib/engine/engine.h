// The serving engine: one model on one device. It owns the backend, the
// weights (bound once, in device buffers both plans share), the KV pools
// (one device copy, written by whichever plan runs), the paged KV cache with
// its prefix cache, and the batcher (kv/batch.h), and runs the model's
// prefill and decode plans (and a mixed one, when given: prompt chunks
// beside sampled tokens in one step) as Sessions over those shared buffers:
// no weight or pool is ever copied between them, nor through the host.
//
// Requests go in (submit: token ids, sampling options, stop ids, max new
// tokens, a weights identity), each step() plans and runs one step of the
// batcher's choosing, samples each finished row on the host
// (engine/sample.h) and hands every token to the caller's sink as it comes,
// with how its request ended when it did; cancel() ends a request between
// steps. Everything runs on the caller's thread; nothing here locks.
//
// A failed step changes nothing the caller can see: the batcher commits
// only after the device ran and every row was sampled, so calling step()
// again runs the same step.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model_weights.h"
#include "engine/plans.h"
#include "engine/sample.h"
#include "kv/batch.h"
#include "runtime/backend.h"
#include "runtime/session.h"

namespace poot::engine {

// A token for a request, or (token -1) the news that it was cancelled.
struct TokenEvent {
  int64_t request = -1;
  int32_t token = -1;
  kv::Finish finish = kv::Finish::None;  // how the request ended with this token; None: it goes on
  std::optional<TokenLogprobs> logprobs;  // the token's, when its request asked (SampleOptions::logprobs)
};

struct EngineOptions {
  bool allowOtherDevice = false;  // run plans built for another device of the backend's target
  bool prefixCache = true;        // off: every prompt computed, nothing cached
  std::function<void(const TokenEvent&)> onToken;  // every token as it comes; may be empty
};

// What one step did.
struct StepReport {
  kv::Plan plan = kv::Plan::Decode;     // which plan ran
  double seconds = 0;                   // the step's wall time on the device (Session::step)
  std::optional<double> deviceSeconds;  // its device time, where the backend measures it
  double hostSeconds = 0;               // the rest of step()'s wall time: planning, maps, their uploads,
                                        // reading back, sampling
  int64_t tokens = 0;                   // tokens it generated
  int64_t requests = 0;                 // requests it ran (its rows that are not padding)
};

class Engine {
 public:
  // Starts the plans on the backend, the prefill Session first (it makes
  // the weight and pool buffers, binds the base weights and zeroes the
  // pools), the decode Session (and the mixed one) over the same buffers.
  static Expected<std::unique_ptr<Engine>> create(ModelPlans plans, std::shared_ptr<rt::Backend> backend,
                                                  std::unique_ptr<ModelWeights> weights, EngineOptions options = {});

  // Queues a request; its index counts from 0. Refused, with nothing
  // queued: what ModelPlans::checkRequest refuses, and an identity the
  // weights do not hold (Usage).
  Expected<int64_t> submit(const Request& request);
  // Plans and runs the next step; nothing when no request is queued or
  // running.
  Expected<std::optional<StepReport>> step();
  // Ends a request, queued or running, and tells the sink (token -1,
  // Cancelled); false when it had already ended. An index never given is a
  // Usage error.
  Expected<bool> cancel(int64_t request);

  // Loads a LoRA adapter under a name (AdapterSet::load); a name loaded
  // before gets a fresh identity for the requests submitted from now on,
  // and the old one is dropped once none of its requests is left.
  Expected<uint64_t> loadAdapter(const std::string& name, const std::string& dir);

  // The plans' shapes (rows, tokens, capacity, vocabulary, pool).
  const PagedShape& prefillShape() const { return prefillShape_; }
  const PagedShape& decodeShape() const { return decodeShape_; }
  const std::optional<PagedShape>& mixedShape() const { return mixedShape_; }
  const ModelWeights& weights() const { return *weights_; }
  const kv::BatchStats& stats() const { return batcher_.stats(); }
  int64_t requests() const { return batcher_.requests(); }
  bool done() const { return batcher_.done(); }
  kv::Finish finish(int64_t request) const { return batcher_.finish(request); }
  // Whether a request waits in the queue, not admitted yet (it holds no block).
  bool queued(int64_t request) const { return batcher_.queued(request); }
  // The pool's blocks that a request could take now: free, or holding only cached prefixes.
  int32_t blocksAvailable() const { return cache_.pool().available(); }
  // Times the device's weights changed identity (only the changed weights move).
  int64_t rebinds() const { return rebinds_; }

 private:
  Engine(const ModelPlans& plans, std::shared_ptr<rt::Backend> backend, std::unique_ptr<ModelWeights> weights,
         EngineOptions options);
  Status bindIdentity(uint64_t identity);
  void retireOld();

  PagedShape prefillShape_, decodeShape_;
  std::optional<PagedShape> mixedShape_;
  std::shared_ptr<rt::Backend> backend_;
  std::unique_ptr<ModelWeights> weights_;
  EngineOptions options_;
  std::unique_ptr<rt::Session> prefill_, decode_, mixed_;  // mixed_: none without a mixed plan
  kv::KvCache cache_;
  kv::Batcher batcher_;
  std::map<int64_t, Sampler> samplers_;  // of the requests not ended
  std::vector<uint64_t> replaced_;       // identities a reload replaced, not yet dropped
  uint64_t bound_ = AdapterSet::kBase;   // the identity the device's weights hold
  int64_t rebinds_ = 0;
  std::vector<float> logits_;   // the sampled rows' logits, kept across steps
  std::vector<int32_t> next_;   // a greedy step's tokens (the plan's output `next`), likewise
};

}  // namespace poot::engine

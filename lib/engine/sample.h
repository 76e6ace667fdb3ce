// How the engine (engine.h) picks a token from one row of logits: greedy (the
// first largest logit) when the temperature is 0, else seeded nucleus
// sampling: softmax of logits / temperature, the smallest set of most
// likely tokens whose probability reaches top_p, one drawn from it in
// proportion. Each request has its own generator, seeded from the seed and
// the request's index (or SampleOptions::stream), so a request's tokens do not depend on which others
// share its steps.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace poot {

// The index of the first largest logit, a NaN counting as below every
// number (-inf included: the first of them wins a row of NaN and -inf); 0
// when empty. A plan traced with --next-token computes the same index on the
// device (TopK of 1 over the logits with NaN made -inf), so a greedy step
// reads token ids instead of logits.
int32_t firstLargest(std::span<const float> logits);

struct SampleOptions {
  double temperature = 0;  // 0: greedy
  double topP = 1;         // in (0, 1]
  uint64_t seed = 0;
  // Which of the seed's generators draws: the request's index when none (so
  // the requests of one seed draw apart); a given one repeats its draws in
  // any request (poot serve gives 0: one seed, one answer).
  std::optional<int64_t> stream;
  // At least 0: each token comes with its log-probability and this many of
  // the likeliest tokens with theirs (TokenEvent::logprobs); -1: none.
  int32_t logprobs = -1;
};

// A token's log-probability under one row of logits, and the `top` likeliest
// tokens with theirs, likeliest first (equal ones: the lower id first):
// the log-softmax of the logits as the model gives them, which neither the
// temperature nor top_p changes.
struct TokenLogprobs {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
TokenLogprobs tokenLogprobs(std::span<const float> logits, int32_t token, int32_t top);

class Sampler {
 public:
  Sampler(SampleOptions opts, int64_t request);
  int32_t next(std::span<const float> logits);
  const SampleOptions& options() const { return opts_; }

 private:
  SampleOptions opts_;
  std::mt19937_64 rng_;
};

}  // namespace poot

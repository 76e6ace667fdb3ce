// How the engine (engine.h) picks a token from one row of logits: the
// penalties and the rule of oracle/sample.h (greedy at temperature 0; else
// temperature, min_p, top_k and top_p, then one draw), which a plan traced
// with --next-token also runs on the device, so either side gives the same
// token for the same draw. Each request has its own generator, seeded from
// the seed and the request's index (or SampleOptions::stream), so a
// request's tokens do not depend on which others share its steps; it draws
// once a sampled token, wherever the token is picked.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "ir/diag.h"
#include "oracle/sample.h"

namespace poot {

struct SampleOptions {
  double temperature = 0;  // 0: greedy
  double topP = 1;         // in (0, 1]
  int32_t topK = 0;        // 0: every token
  double minP = 0;         // in [0, 1]; 0: every token
  // Penalties on the tokens a request has seen, applied to a row's logits
  // before the rule, greedy rows included (as vLLM applies them): a token
  // of the prompt or the output has its logit divided by
  // repetitionPenalty where positive, multiplied where not (1: off, above 0);
  // then a token the output holds c times loses frequencyPenalty * c +
  // presencePenalty (each in [-2, 2], OpenAI's; 0: off).
  double repetitionPenalty = 1;
  double frequencyPenalty = 0;
  double presencePenalty = 0;
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
  // `prompt`: the request's tokens, which a repetition penalty counts.
  Sampler(SampleOptions opts, int64_t request, std::span<const int32_t> prompt = {});
  // The token for one row of logits (a draw unless greedy), penalties
  // applied first; the output then holds the token.
  int32_t next(std::span<const float> logits);
  // A token's parameters for the rule with this generator's next draw (none
  // when greedy: the uniform is then 0), for a plan that samples on the
  // device.
  SampleParams draw();
  // The penalties of the next token as a plan takes them (oracle/sample.h,
  // applyPenalties): the repetition penalty, and into `seen` and `amounts`
  // the tokens whose logits change, ascending, each with what it loses
  // after the repetition penalty (frequencyPenalty * c + presencePenalty
  // for a token the output holds c times, 0 for one only the prompt holds),
  // the rest -1 and 0. Without penalties the list is empty. A list too
  // short for the tokens seen is a Range error (a plan's list is as wide as
  // its capacity, which bounds them).
  Expected<float> penalties(std::span<int32_t> seen, std::span<float> amounts) const;
  // The output holds `token`, which a plan picked after draw().
  void took(int32_t token);
  bool penalized() const {
    return opts_.repetitionPenalty != 1 || opts_.frequencyPenalty != 0 || opts_.presencePenalty != 0;
  }
  const SampleOptions& options() const { return opts_; }

 private:
  SampleOptions opts_;
  std::mt19937_64 rng_;
  // Every token of the prompt or the output, with its count in the output;
  // kept only when penalized().
  std::map<int32_t, int32_t> seen_;
  // The penalized row and its list, kept across tokens.
  std::vector<float> adjusted_, amounts_;
  std::vector<int32_t> listed_;
};

}  // namespace poot

// The rule that picks the next token from a row of logits: the semantics of
// the graph's Sample op, and what the engine's host sampler runs, so the
// device and the host pick alike. Everything is in double here; a kernel
// computes the same in f32 (docs/oracle.md, "Sample", bounds the cases where
// the two may differ).
//
// Greedy (temperature not above 0, NaN included, or a row whose largest
// logit is not finite): the first largest logit, NaN counting as below every
// number. Otherwise each token weighs w = exp((x - max) / temperature) (a NaN
// logit weighs 0) and a threshold t keeps the tokens with w >= t, 0 at first:
// - min_p above 0 raises t to min(min_p, 1): the tokens at least min_p times
//   as likely as the likeliest;
// - top_k in [1, V) raises t to the k-th largest weight (ties at it stay);
// - top_p below 1 (not NaN) raises t to the largest weight v whose tokens
//   w >= v (among those kept) hold at least top_p of the kept mass: the
//   nucleus, ties at its edge kept.
// Then r = uniform * (the kept mass), uniform taken as 0 when below 0 or
// NaN, and the token is the first kept one, in index order, at which the
// running kept mass passes r (the last kept one when none does: uniform of 1
// or more).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace poot {

// The index of the first largest logit, a NaN counting as below every
// number (-inf included: the first of them wins a row of NaN and -inf); 0
// when empty.
int32_t firstLargest(std::span<const float> logits);

struct SampleParams {
  float temperature = 0;  // not above 0: greedy
  int32_t topK = 0;       // outside [1, V): every token
  float topP = 1;         // 1 or more, or NaN: every token
  float minP = 0;         // not above 0: every token
  float uniform = 0;      // the draw, in [0, 1)
};

int32_t sampleToken(std::span<const float> logits, const SampleParams& p);

// Penalties, applied to a row of logits before the rule (greedy rows
// included), in f32 so that a kernel computes the same bits: the logit x of
// each token of `seen` becomes penalize(x, repetition, its amount). `seen`
// counts up to its first entry that is outside [0, V) or not above the one
// before it (a list is ascending token ids, then -1s); the rest is read as
// absent. The engine lists the tokens a request's prompt or output holds
// (engine/sample.h, Sampler::penalties).
float penalize(float x, float repetition, float amount);  // (x > 0 ? x / repetition : x * repetition) - amount
size_t seenLength(std::span<const int32_t> seen, size_t vocab);
void applyPenalties(std::span<float> logits, float repetition, std::span<const int32_t> seen,
                    std::span<const float> amounts);

}  // namespace poot

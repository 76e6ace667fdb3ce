// The request's own mt19937_64, whose seed mixes the seed and the request
// index (SplitMix64's finalizer), gives each sampled token one uniform in
// [0, 1): 24 bits of a draw, so the f32 a device plan takes holds it exactly.
#include "engine/sample.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace poot {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

TokenLogprobs tokenLogprobs(std::span<const float> logits, int32_t token, int32_t top) {
  // log p_i = x_i - max - log(sum_j exp(x_j - max)), summed in double.
  float best = logits[size_t(firstLargest(logits))];
  double sum = 0;
  for (float x : logits) sum += std::exp(double(x) - best);
  const double shift = double(best) + std::log(sum);
  TokenLogprobs out{float(double(logits[size_t(token)]) - shift), {}};
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  size_t k = std::min(size_t(std::max(top, 0)), order.size());
  std::partial_sort(order.begin(), order.begin() + ptrdiff_t(k), order.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] > logits[size_t(b)] || (logits[size_t(a)] == logits[size_t(b)] && a < b);
  });
  for (size_t i = 0; i < k; ++i) out.top.emplace_back(order[i], float(double(logits[size_t(order[i])]) - shift));
  return out;
}

Sampler::Sampler(SampleOptions opts, int64_t request, std::span<const int32_t> prompt)
    : opts_(opts), rng_(splitmix(opts.seed ^ splitmix(uint64_t(request)))) {
  if (penalized())
    for (int32_t t : prompt) seen_.emplace(t, 0);
}

SampleParams Sampler::draw() {
  SampleParams p{float(opts_.temperature), opts_.topK, float(opts_.topP), float(opts_.minP), 0.0f};
  if (opts_.temperature > 0) p.uniform = float(rng_() >> 40) * 0x1p-24f;
  return p;
}

Expected<float> Sampler::penalties(std::span<int32_t> seen, std::span<float> amounts) const {
  if (seen_.size() > seen.size())
    return makeError(ErrorKind::Range, {}, "the request has seen " + std::to_string(seen_.size()) +
                                               " distinct tokens, more than a penalty list of " +
                                               std::to_string(seen.size()) + " holds");
  std::fill(seen.begin(), seen.end(), -1);
  std::fill(amounts.begin(), amounts.end(), 0.0f);
  size_t j = 0;
  for (const auto& [token, outputs] : seen_) {  // a std::map: ascending
    seen[j] = token;
    if (outputs > 0) amounts[j] = float(opts_.frequencyPenalty * outputs + opts_.presencePenalty);
    ++j;
  }
  return float(opts_.repetitionPenalty);
}

void Sampler::took(int32_t token) {
  if (penalized()) ++seen_[token];
}

int32_t Sampler::next(std::span<const float> logits) {
  if (!penalized()) return sampleToken(logits, draw());
  adjusted_.assign(logits.begin(), logits.end());
  listed_.resize(seen_.size());
  amounts_.resize(seen_.size());
  applyPenalties(adjusted_, *penalties(listed_, amounts_), listed_, amounts_);  // sized to fit
  int32_t token = sampleToken(adjusted_, draw());
  took(token);
  return token;
}

}  // namespace poot

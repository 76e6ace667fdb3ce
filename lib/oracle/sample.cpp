// The sampling rule of sample.h, in double. The thresholds are found by
// sorting copies of the weights; a kernel finds the same values by bisection
// over their bit patterns (codegen gen/sample.cpp).
#include "oracle/sample.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

namespace poot {

int32_t firstLargest(std::span<const float> x) {
  if (x.empty()) return 0;
  // Blocks of kBlock: the block's maximum by a branch-free max the compiler
  // writes as vector instructions (x > m ? x : m passes over a NaN, as the
  // scan does), and only a block that beats the best so far is searched for
  // the first index of its maximum (== makes -0.0 and +0.0 one value, as >
  // does; a NaN first logit starts as -inf). Four times the plain
  // scan's speed: a step of 32 rows of Llama 3's 128256 logits took 32 ms of
  // host time that way.
  constexpr size_t kBlock = 256;
  float best = std::isnan(x[0]) ? -std::numeric_limits<float>::infinity() : x[0];
  size_t at = 0;
  for (size_t lo = 1; lo < x.size(); lo += kBlock) {
    size_t hi = std::min(x.size(), lo + kBlock);
    float m = -std::numeric_limits<float>::infinity();
    for (size_t i = lo; i < hi; ++i) m = x[i] > m ? x[i] : m;
    if (!(m > best)) continue;
    best = m;
    at = lo;
    while (!(x[at] == m)) ++at;
  }
  return int32_t(at);
}

int32_t sampleToken(std::span<const float> x, const SampleParams& p) {
  const int32_t best = firstLargest(x);
  if (x.empty() || !(p.temperature > 0) || !std::isfinite(x[size_t(best)])) return best;
  const size_t n = x.size();
  const double top = x[size_t(best)], temperature = p.temperature;
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = std::isnan(x[i]) ? 0.0 : std::exp((double(x[i]) - top) / temperature);
  double t = p.minP > 0 ? std::min(double(p.minP), 1.0) : 0.0;
  std::vector<double> kept;
  if (p.topK >= 1 && size_t(p.topK) < n) {
    kept = w;
    std::nth_element(kept.begin(), kept.begin() + (p.topK - 1), kept.end(), std::greater<>());
    t = std::max(t, kept[size_t(p.topK - 1)]);
  }
  if (p.topP < 1) {
    kept.clear();
    double mass = 0;
    for (double v : w)
      if (v >= t) kept.push_back(v), mass += v;
    std::sort(kept.begin(), kept.end(), std::greater<>());
    const double target = double(p.topP) * mass;
    double run = 0;
    for (double v : kept) {
      run += v;
      if (run >= target) {
        t = v;
        break;
      }
    }
  }
  double mass = 0;
  for (double v : w)
    if (v >= t) mass += v;
  const double r = (p.uniform > 0 ? double(p.uniform) : 0.0) * mass;
  double run = 0;
  int32_t last = best;
  for (size_t i = 0; i < n; ++i) {
    if (!(w[i] >= t && w[i] > 0)) continue;
    run += w[i];
    last = int32_t(i);
    if (run > r) return last;
  }
  return last;
}

float penalize(float x, float repetition, float amount) { return (x > 0 ? x / repetition : x * repetition) - amount; }

size_t seenLength(std::span<const int32_t> seen, size_t vocab) {
  size_t n = 0;
  while (n < seen.size() && seen[n] >= 0 && size_t(seen[n]) < vocab && (n == 0 || seen[n] > seen[n - 1])) ++n;
  return n;
}

void applyPenalties(std::span<float> logits, float repetition, std::span<const int32_t> seen,
                    std::span<const float> amounts) {
  for (size_t j = 0, n = seenLength(seen, logits.size()); j < n; ++j)
    logits[size_t(seen[j])] = penalize(logits[size_t(seen[j])], repetition, amounts[j]);
}

}  // namespace poot

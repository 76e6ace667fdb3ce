// The engine's greedy pick (engine/sample.h, firstLargest) against
// the plain scan it replaces (a NaN read as -inf), on rows built to break
// it: NaN (first and elsewhere), infinities, signed zeros, ties, lengths around its blocks;
// and tokenLogprobs against a log-softmax worked out by hand.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/sample.h"

using namespace poot;

namespace {

// The first i whose logit beats every earlier one, a NaN read as -inf.
int32_t scan(const std::vector<float>& x) {
  auto key = [&](int32_t i) { return std::isnan(x[size_t(i)]) ? -std::numeric_limits<float>::infinity() : x[size_t(i)]; };
  int32_t best = 0;
  for (int32_t i = 1; i < int32_t(x.size()); ++i)
    if (key(i) > key(best)) best = i;
  return best;
}

}  // namespace

TEST_CASE("sample: the greedy pick is the scan's first largest logit") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(11);
  for (int t = 0; t < 4000; ++t) {
    std::vector<float> x(1 + rng() % 1100);
    for (float& v : x) {
      int kind = int(rng() % 12);
      v = kind == 0 ? nan : kind == 1 ? inf : kind == 2 ? -inf : kind == 3 ? 0.0f : kind == 4 ? -0.0f
                                                                                            : float(int(rng() % 5) - 2);
    }
    if (t % 7 == 0) x[0] = nan;
    CAPTURE(t);
    REQUIRE(firstLargest(x) == scan(x));
  }
  CHECK(firstLargest({}) == 0);
  CHECK(firstLargest(std::vector<float>{-inf, -inf}) == 0);
  CHECK(firstLargest(std::vector<float>{-0.0f, 0.0f, 1.0f, nan, 1.0f}) == 2);
  CHECK(firstLargest(std::vector<float>{nan, -5.0f, 2.0f}) == 2);  // a NaN first logit does not win
  CHECK(firstLargest(std::vector<float>{nan, nan}) == 0);
  CHECK(firstLargest(std::vector<float>{nan, -inf}) == 0);
  CHECK(firstLargest(std::vector<float>{-inf, nan, -inf}) == 0);
  std::vector<float> late(1000, 0.0f);
  late[777] = 3.0f;
  late[901] = 3.0f;
  CHECK(firstLargest(late) == 777);
}

TEST_CASE("sample: a token's logprob and the top ones are the log-softmax of the logits") {
  // log-softmax of {1, 3, 3, 0, 2}: x - log(e + 2e^3 + 1 + e^2).
  std::vector<float> logits = {1, 3, 3, 0, 2};
  double z = std::log(std::exp(1.0) + 2 * std::exp(3.0) + 1 + std::exp(2.0));
  TokenLogprobs lp = tokenLogprobs(logits, 4, 3);
  CHECK(lp.logprob == doctest::Approx(2 - z));
  REQUIRE(lp.top.size() == 3);
  // Likeliest first; the tie of ids 1 and 2 goes to the lower id.
  CHECK(lp.top[0].first == 1);
  CHECK(lp.top[1].first == 2);
  CHECK(lp.top[2].first == 4);
  CHECK(lp.top[0].second == doctest::Approx(3 - z));
  CHECK(lp.top[2].second == doctest::Approx(2 - z));
  CHECK(tokenLogprobs(logits, 0, 0).top.empty());
  CHECK(tokenLogprobs(logits, 0, 9).top.size() == 5);  // no more than the row has
  // Large logits do not overflow: the maximum is taken out first.
  CHECK(tokenLogprobs(std::vector<float>{1000, 1000}, 0, 0).logprob == doctest::Approx(-std::log(2.0)));
}

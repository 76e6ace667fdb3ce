// The engine's greedy pick (engine/sample.h, firstLargest) against
// the plain scan it replaces, on rows built to break it: NaN (first and
// elsewhere), infinities, signed zeros, ties, lengths around its blocks.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/sample.h"

using namespace poot;

namespace {

int32_t scan(const std::vector<float>& x) {
  int32_t best = 0;
  for (int32_t i = 1; i < int32_t(x.size()); ++i)
    if (x[size_t(i)] > x[size_t(best)]) best = i;
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
  std::vector<float> late(1000, 0.0f);
  late[777] = 3.0f;
  late[901] = 3.0f;
  CHECK(firstLargest(late) == 777);
}

// The greedy pick (oracle/sample.h, firstLargest) against the plain scan
// it replaces (a NaN read as -inf), on rows built to break it: NaN (first
// and elsewhere), infinities, signed zeros, ties, lengths around its blocks;
// the sampling rule (sampleToken) on weights worked out by hand, filter by
// filter, with ties, NaN and infinities; the engine's Sampler against the
// rule with its own draws; and tokenLogprobs against a log-softmax worked
// out by hand.
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

TEST_CASE("sample: the rule keeps, filters and draws as oracle/sample.h says") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Weights 1, 1/2, 1/4, 1/4 at temperature 1 (ids 2 and 3 tie): mass 2.
  const std::vector<float> x = {0.0f, std::log(0.5f), std::log(0.25f), std::log(0.25f)};
  auto pick = [&](SampleParams p, std::vector<float> row = {}) { return sampleToken(row.empty() ? x : row, p); };
  auto at = [](float uniform) { return SampleParams{.temperature = 1, .uniform = uniform}; };
  // The running mass in index order is 1, 1.5, 1.75, 2: r = 2u.
  CHECK(pick(at(0.0f)) == 0);
  CHECK(pick(at(0.49f)) == 0);
  CHECK(pick(at(0.51f)) == 1);
  CHECK(pick(at(0.8f)) == 2);
  CHECK(pick(at(0.9f)) == 3);
  CHECK(pick(at(1.5f)) == 3);                       // 1 or more: the last kept token
  CHECK(pick(at(-3.0f)) == 0);                      // below 0 counts as 0
  CHECK(pick(at(nan)) == 0);
  // top_k 2 keeps 1 and 1/2 (mass 1.5, r = 1.5u); top_k 3 meets the tie at
  // 1/4 and keeps both; top_k 1 is the largest.
  CHECK(pick({.temperature = 1, .topK = 2, .uniform = 0.7f}) == 1);
  CHECK(pick({.temperature = 1, .topK = 2, .uniform = 0.99f}) == 1);
  CHECK(pick({.temperature = 1, .topK = 3, .uniform = 0.99f}) == 3);
  CHECK(pick({.temperature = 1, .topK = 1, .uniform = 0.99f}) == 0);
  CHECK(pick({.temperature = 1, .topK = 4, .uniform = 0.99f}) == 3);  // k = V: every token
  // top_p: 0.5 of the mass is reached by 1 alone; 0.6 needs 1/2 too; 0.9
  // (1.8 of 2) needs both of 1/4.
  CHECK(pick({.temperature = 1, .topP = 0.5f, .uniform = 0.99f}) == 0);
  CHECK(pick({.temperature = 1, .topP = 0.6f, .uniform = 0.99f}) == 1);
  CHECK(pick({.temperature = 1, .topP = 0.6f, .uniform = 0.6f}) == 0);  // r = 0.9 of 1.5
  CHECK(pick({.temperature = 1, .topP = 0.9f, .uniform = 0.99f}) == 3);
  CHECK(pick({.temperature = 1, .topP = 0.0f, .uniform = 0.99f}) == 0);
  CHECK(pick({.temperature = 1, .topP = nan, .uniform = 0.99f}) == 3);  // NaN: off
  // min_p 0.3 keeps 1 and 1/2; above 1 it is 1: the largest alone.
  CHECK(pick({.temperature = 1, .minP = 0.3f, .uniform = 0.99f}) == 1);
  CHECK(pick({.temperature = 1, .minP = 7.0f, .uniform = 0.99f}) == 0);
  // Filters compose: top_k 3 keeps all 4 (the tie; mass 2), top_p 0.6 of that is 1.2: ids 0 and 1.
  CHECK(pick({.temperature = 1, .topK = 3, .topP = 0.6f, .uniform = 0.99f}) == 1);
  // Temperature 0.5 squares the weights: 1, 1/4, 1/16, 1/16 (mass 1.375).
  CHECK(pick({.temperature = 0.5f, .uniform = 0.75f}) == 1);  // r = 1.03
  CHECK(pick({.temperature = 0.5f, .uniform = 0.95f}) == 2);  // r = 1.306, within 1.3125
  CHECK(pick({.temperature = 0.5f, .uniform = 0.97f}) == 3);  // r = 1.334, past it
  // Greedy: temperature 0, NaN or below; a row whose largest is infinite or absent.
  CHECK(pick({.temperature = 0, .uniform = 0.9f}) == 0);
  CHECK(pick({.temperature = nan, .uniform = 0.9f}) == 0);
  CHECK(pick({.temperature = -1, .uniform = 0.9f}) == 0);
  CHECK(pick(at(0.9f), {1.0f, inf, inf}) == 1);
  CHECK(pick(at(0.9f), {-inf, nan, -inf}) == 0);
  // A NaN logit weighs 0 and a -inf one too: {0, 1, 1, 0}, r = 2u.
  CHECK(pick(at(0.4f), {nan, 0.0f, 0.0f, -inf}) == 1);
  CHECK(pick(at(0.6f), {nan, 0.0f, 0.0f, -inf}) == 2);
  CHECK(pick(at(0.99f), {nan, 0.0f, 0.0f, -inf}) == 2);
  CHECK(sampleToken({}, at(0.5f)) == 0);
}

TEST_CASE("sample: a Sampler draws once a sampled token and follows the rule") {
  std::mt19937 rng(5);
  std::vector<float> x(300);
  for (float& v : x) v = float(int(rng() % 2001) - 1000) / 250.0f;
  SampleOptions o{.temperature = 0.8, .topP = 0.9, .topK = 40, .minP = 0.01, .seed = 9};
  Sampler a(o, 3), b(o, 3);
  for (int i = 0; i < 50; ++i) {
    SampleParams p = a.draw();
    CHECK(p.temperature == 0.8f);
    CHECK(p.topK == 40);
    CHECK(p.uniform >= 0.0f);
    CHECK(p.uniform < 1.0f);
    CHECK(b.next(x) == sampleToken(x, p));  // the same draw picks the same token
  }
  Sampler greedy(SampleOptions{.seed = 9}, 3);
  CHECK(greedy.draw().uniform == 0.0f);  // greedy draws nothing
  CHECK(greedy.next(x) == firstLargest(x));
}

TEST_CASE("sample: penalties on the tokens seen, before the rule, greedy rows included") {
  // Repetition 4 on a prompt holding id 0: 2 -> 0.5, so id 1 (logit 1) wins;
  // then id 1 is seen too (0.25) and id 0 wins, every time after (the
  // penalty does not compound). A negative logit is multiplied: -0.5 -> -2.
  Sampler r(SampleOptions{.repetitionPenalty = 4}, 0, std::vector<int32_t>{0});
  CHECK(r.penalized());
  const std::vector<float> x = {2, 1, -1};
  CHECK(r.next(x) == 1);
  CHECK(r.next(x) == 0);
  CHECK(r.next(x) == 0);
  Sampler negative(SampleOptions{.repetitionPenalty = 4}, 0, std::vector<int32_t>{2});
  CHECK(negative.next(std::vector<float>{-1, -3, -0.5f}) == 0);
  // Frequency 0.5 and presence 0.25 count the output only (the prompt's id
  // 1 is not penalized): 0, then 1 (id 0 at 0.25), then 0 (id 1 at -0.15),
  // then 2 (id 0 at -0.25).
  Sampler f(SampleOptions{.frequencyPenalty = 0.5, .presencePenalty = 0.25}, 0, std::vector<int32_t>{1});
  const std::vector<float> y = {1, 0.6f, 0};
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(f.next(y));
  CHECK(got == std::vector<int32_t>{0, 1, 0, 2});
  // Without penalties nothing is counted, and the same logits give the same token.
  Sampler plain(SampleOptions{}, 0, std::vector<int32_t>{0});
  CHECK_FALSE(plain.penalized());
  CHECK(plain.next(x) == 0);
  CHECK(plain.next(x) == 0);
}

TEST_CASE("sample: penalties are f32 operations on the listed tokens, the list ascending up to its end") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Each operation rounds once in f32: 1/3 is f32 division, not double's.
  CHECK(penalize(1.0f, 3.0f, 0.0f) == 1.0f / 3.0f);
  CHECK(penalize(-1.0f, 3.0f, 0.5f) == -3.5f);
  CHECK(penalize(0.0f, 3.0f, 0.0f) == 0.0f);  // 0 is multiplied
  CHECK(std::signbit(penalize(-0.0f, 1.0f, 0.0f)));
  CHECK(penalize(inf, 2.0f, 1.0f) == inf);
  CHECK(penalize(-inf, 2.0f, -1.0f) == -inf);
  CHECK(std::isnan(penalize(nan, 2.0f, 1.0f)));
  // The list ends at its first entry outside [0, V) or not above the one before.
  CHECK(seenLength(std::vector<int32_t>{1, 3, 4, -1, -1}, 5) == 3);
  CHECK(seenLength(std::vector<int32_t>{-1, 3}, 5) == 0);
  CHECK(seenLength(std::vector<int32_t>{0, 5, 1}, 5) == 1);  // 5 is outside a vocabulary of 5
  CHECK(seenLength(std::vector<int32_t>{2, 2, 3}, 5) == 1);  // a repeat ends it
  CHECK(seenLength(std::vector<int32_t>{3, 1}, 5) == 1);
  CHECK(seenLength(std::vector<int32_t>{0, 1, 2, 3, 4}, 5) == 5);
  std::vector<float> row = {1, 2, -3, 4, 5};
  applyPenalties(row, 2.0f, std::vector<int32_t>{1, 2, 0, 4}, std::vector<float>{0.5f, 1.0f, 7.0f, 7.0f});
  CHECK(row == std::vector<float>{1, 0.5f, -7, 4, 5});
}

TEST_CASE("sample: a Sampler's penalty list is what its own penalties apply") {
  // Prompt {7, 2, 7}, then outputs; the list is ascending, prompt-only
  // tokens at 0, output tokens at F * c + P, the rest -1 and 0.
  SampleOptions o{.repetitionPenalty = 1.3, .frequencyPenalty = 0.7, .presencePenalty = -0.2};
  Sampler s(o, 0, std::vector<int32_t>{7, 2, 7});
  std::vector<int32_t> seen(6);
  std::vector<float> amounts(6);
  CHECK(*s.penalties(seen, amounts) == 1.3f);
  CHECK(seen == std::vector<int32_t>{2, 7, -1, -1, -1, -1});
  CHECK(amounts == std::vector<float>(6, 0.0f));
  s.took(7);
  s.took(4);
  s.took(7);
  REQUIRE(s.penalties(seen, amounts));
  CHECK(seen == std::vector<int32_t>{2, 4, 7, -1, -1, -1});
  CHECK(amounts == std::vector<float>{0, float(0.7 - 0.2), float(0.7 * 2 - 0.2), 0, 0, 0});
  // A list too short is an error, not a cut.
  std::vector<int32_t> two(2);
  std::vector<float> twoAmounts(2);
  auto short_ = s.penalties(two, twoAmounts);
  REQUIRE_FALSE(short_);
  CHECK(short_.error().kind == ErrorKind::Range);
  CHECK(short_.error().message == "the request has seen 3 distinct tokens, more than a penalty list of 2 holds");
  // Without penalties nothing is listed.
  Sampler plain(SampleOptions{}, 0, std::vector<int32_t>{1, 2});
  plain.took(3);
  CHECK(*plain.penalties(seen, amounts) == 1.0f);
  CHECK(seen == std::vector<int32_t>(6, -1));
  // next() is the rule on the row as applyPenalties leaves it.
  std::mt19937 rng(3);
  std::vector<float> x(50);
  for (float& v : x) v = float(int(rng() % 401) - 200) / 50.0f;
  Sampler a(SampleOptions{.temperature = 0.7, .repetitionPenalty = 1.5, .frequencyPenalty = 0.4, .seed = 4}, 2,
            std::vector<int32_t>{3, 9}),
      b = a;
  for (int i = 0; i < 20; ++i) {
    std::vector<int32_t> list(50);
    std::vector<float> amount(50), row = x;
    float r = *b.penalties(list, amount);
    applyPenalties(row, r, list, amount);
    int32_t want = sampleToken(row, b.draw());
    b.took(want);
    CHECK(a.next(x) == want);
  }
}

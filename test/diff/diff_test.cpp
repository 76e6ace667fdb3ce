// The differential test on random graphs (fuzz/README.md, "Differential
// testing"). For each seed: generate a graph (generator.h) and the graph of
// its error bound (bound.h); draw fresh parameters from the seed (never
// zero: oracle/random.h); run the pass pipeline for lavapipe; then hold
//   - the oracle on the graph after the passes, and
//   - the plan compiled for targets/lavapipe.yaml (plus bf16 storage), run on
//     lavapipe through the runtime,
// to the oracle on the graph before the passes, every output element within
// twice its bound. The passes must form exactly the Attention eqns the
// generator meant to be recognized (none for a near miss), and at most a
// tenth of the outputs may have a loose bound (over 1% of 1 + |value|), so
// the comparisons keep their teeth. A failure names the seed, the recipe and
// the graph's text; rerun it with `diff_tests --seed=S`. The last line says
// how many graphs ran.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "../unit/testing.h"
#include "../unit/vulkan_plan.h"
#include "bound.h"
#include "generator.h"
#include "ir/text.h"
#include "seeds.h"

namespace poot::diff {
namespace {

// Bounds are first order and their rounding terms exact; twice them leaves
// room for the terms dropped (E^2 and smaller) without hiding a wrong value.
constexpr double kSlack = 2;
// A bound larger than this part of 1 + |value| is loose: a worst case
// compounded over a long chain (each MatMul adding |A| E + E |B|). A few are
// expected; many would mean the comparisons test little.
constexpr double kMeaningful = 1e-2;

struct Tally {
  int64_t graphs = 0, outputs = 0, loose = 0, attentions = 0;
};

int64_t countOp(const Graph& g, Op op) {
  return std::count_if(g.eqns.begin(), g.eqns.end(), [&](const Eqn& e) { return e.op == op; });
}

void checkOutputs(const char* who, const Evaluation& want, const Evaluation& bound,
                  const std::map<std::string, Tensor>& got) {
  REQUIRE(got.size() == want.outputs.size());
  for (const auto& [name, w] : want.outputs) {
    REQUIRE_MESSAGE(got.count(name), who << " has no output " << name);
    const Tensor& e = bound.outputs.at("bound." + name);
    testing::checkWithinEach(std::string(who) + " output " + name, w, got.at(name),
                             [&](int64_t i) { return kSlack * e.get(i); });
  }
}

void checkSeed(uint64_t seed, const DeviceProfile& device, Tally& tally) {
  auto gen = generate(seed);
  REQUIRE_MESSAGE(bool(gen), "seed " << seed << ": " << (gen ? "" : gen.error().str()));
  const Graph& before = gen->graph;
  std::string text = printGraph(before);
  INFO("seed " << seed << " (rerun: diff_tests --seed=" << seed << "): " << gen->recipe << "\n" << text);
  auto boundG = boundGraph(before);
  REQUIRE_MESSAGE(bool(boundG), (boundG ? "" : boundG.error().str()));

  if (seedRange().print) std::printf("%s\n%s\n", text.c_str(), printGraph(*boundG).c_str());
  auto params = completeParams(before, {}, seed);
  auto want = evaluate(before, params);
  REQUIRE_MESSAGE(bool(want), (want ? "" : want.error().str()));
  auto bound = evaluate(*boundG, params);
  REQUIRE_MESSAGE(bool(bound), (bound ? "" : bound.error().str()));
  for (const auto& [name, w] : want->outputs) {
    const Tensor& e = bound->outputs.at("bound." + name);
    double worst = 0;
    for (int64_t i = 0; i < w.size(); ++i) {
      double part = kSlack * e.get(i) / (1 + std::fabs(w.get(i)));
      if (!(part <= worst)) worst = part;  // a NaN stays
    }
    CHECK_MESSAGE(std::isfinite(worst), "the bound of output " << name << " is not finite");
    tally.outputs += 1;
    if (worst > kMeaningful) {
      tally.loose += 1;
      if (seedRange().verbose) std::printf("seed %llu: the bound of %s is loose: %.3g of 1 + |value|\n",
                                           (unsigned long long)seed, name.c_str(), worst);
    }
  }

  Graph after = before;
  testing::runPasses(after, device);
  CHECK(countOp(after, Op::Attention) == gen->attentions);
  tally.graphs += 1;
  tally.attentions += gen->attentions;
  auto passed = evaluate(after, params);
  REQUIRE_MESSAGE(bool(passed), (passed ? "" : passed.error().str()));
  checkOutputs("oracle after the passes", *want, *bound, passed->outputs);

  auto run = testing::runOnVulkan(after, device, params);
  REQUIRE_MESSAGE(bool(run), (run ? "" : run.error().str()));
  checkOutputs("lavapipe", *want, *bound, run->outputs);
  if (seedRange().verbose) {
    std::printf("seed %llu: %s; %lld eqns, %lld after the passes\n", (unsigned long long)seed, gen->recipe.c_str(),
                (long long)before.eqns.size(), (long long)after.eqns.size());
    std::fflush(stdout);
  }
}

TEST_CASE("diff: random graphs, the oracle before and after the passes and the plan on lavapipe") {
  // Lavapipe, with bf16 storage: the generator draws bf16 weights, which
  // every target loads as integer arithmetic around f32 (as the generator
  // tests do); lavapipe itself lists none.
  static const DeviceProfile device = [] {
    DeviceProfile d = testing::loadTarget("lavapipe");
    d.bf16 = d.f16;
    return d;
  }();
  const SeedRange& r = seedRange();
  // A failed REQUIRE ends only its seed's check: doctest has reported it
  // when it throws.
  Tally tally;
  for (uint64_t seed = r.first; seed < r.last; ++seed) try {
      checkSeed(seed, device, tally);
    } catch (const doctest::detail::TestFailureException&) {
    }
  std::printf("diff: seeds %llu..%llu: %lld graphs through the passes (%lld attention chains formed), %lld outputs, "
              "%lld with a loose bound\n",
              (unsigned long long)r.first, (unsigned long long)(r.last - 1), (long long)tally.graphs,
              (long long)tally.attentions, (long long)tally.outputs, (long long)tally.loose);
  CHECK_MESSAGE(tally.loose * 10 <= tally.outputs, "more than a tenth of the outputs have a loose bound");
}

}  // namespace
}  // namespace poot::diff

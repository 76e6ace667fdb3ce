// The kernel family registry (plan/family.h) and the generator registry
// (codegen/gen/generators.h): the order the planner tries the families in,
// the walk that picks the first that accepts and keeps why the others
// declined, those reasons reaching the remarks, and the two lists agreeing:
// a family registered without a generator, or a generator without a family,
// fails here.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/gen/generators.h"
#include "plan/family.h"
#include "plan/planner.h"
#include "plan/schedule.h"
#include "testing.h"

using namespace poot;

namespace {

template <class Rule>
std::vector<std::string> familiesOf(std::span<const Rule> rules) {
  std::vector<std::string> out;
  for (const Rule& r : rules) out.emplace_back(r.family);
  return out;
}

// A toy registry over an int: each rule accepts the shape equal to its
// number and declines any other with its reason; calls counts the asks.
int calls = 0;

struct Toy {
  std::string_view family;
  int accepts;
  const char* declines;
  Choice choose(int shape, const DeviceProfile&) const {
    ++calls;
    if (shape != accepts) return {std::nullopt, declines};
    Schedule s;
    s.kind = std::string(family);
    return {s, "took " + std::to_string(shape)};
  }
};
// One attention eqn, q [B, Hq, Lq, 64] over k [B, Hkv, Lk, 64] and v [B,
// Hkv, Lk, dv], all of dtype dt.
Graph attention(int64_t B, int64_t Hq, int64_t nrep, int64_t Lq, int64_t Lk, int64_t dv, const std::string& dt) {
  auto ty = [&](std::vector<int64_t> dims) {
    std::string s = dt + "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
    return s + "]";
  };
  int64_t Hkv = Hq / nrep;
  return testing::parse("graph attn\ninput %q : " + ty({B, Hq, Lq, 64}) + "\ninput %k : " + ty({B, Hkv, Lk, 64}) +
                        "\ninput %v : " + ty({B, Hkv, Lk, dv}) + "\n%out = Attention(%q, %k, %v) {scale=0.125, n_rep=" +
                        std::to_string(nrep) + ", key=dense, mask=none, bound=capacity} : " + ty({B, Hq, Lq, dv}) +
                        "\noutput %out\n");
}

}  // namespace

TEST_CASE("family registry: the planner tries the families in this order of preference") {
  CHECK(familiesOf(attentionRules()) ==
        std::vector<std::string>{"decode-mma", "decode", "prefill-mma", "prefill", "split-kv-partials", "streaming"});
  CHECK(familiesOf(matmulRules()) == std::vector<std::string>{"gemv-mma", "gemv", "gemm-mma", "gemm", "gemv"});
  // Every rule names a registered family of its category, and the last of
  // each table takes whatever reaches it.
  for (const AttentionRule& r : attentionRules()) CHECK(findFamily(r.family, Serves::Attention));
  for (const MatMulRule& r : matmulRules()) CHECK(findFamily(r.family, Serves::MatMul));
  DeviceProfile d = testing::loadTarget("lavapipe");
  AttentionShape a{1, 4, 1, 16, 256, 4, 64, 0, 64, DType::F32, true, 64};
  CHECK(attentionRules().back().choose(a, d).schedule);
  CHECK(matmulRules().back().choose(MatMulShape{1, 100, 64, 64, true, DType::F32, DType::F32}, d).schedule);
}

TEST_CASE("family registry: the walk takes the first rule that accepts, after every decline's reason") {
  DeviceProfile d = testing::loadTarget("lavapipe");
  const Toy rules[] = {
      {"first", 1, "first: not 2"}, {"quiet", 1, ""}, {"second", 2, "second: not 3"}, {"third", 3, "no"}};
  const Toy* winner = nullptr;
  calls = 0;
  Choice c = walkRules(std::span<const Toy>(rules), 2, d, &winner);
  REQUIRE(c.schedule);
  CHECK(c.schedule->kind == "second");
  CHECK(winner == &rules[2]);
  // The quiet decline says nothing; the rule after the winner is not asked.
  CHECK(c.reason == "first: not 2; took 2");
  CHECK(calls == 3);
  c = walkRules(std::span<const Toy>(rules), 1, d, &winner);
  CHECK(c.schedule->kind == "first");
  CHECK(c.reason == "took 1");
  c = walkRules(std::span<const Toy>(rules), 7, d, &winner);
  CHECK(!c.schedule);
  CHECK(!winner);
  CHECK(c.reason == "first: not 2; second: not 3; no");
}

TEST_CASE("family registry: a declining family's reason reaches the remarks before the chosen one's") {
  DeviceProfile h200 = testing::loadTarget("nvidia-h200");
  // A bf16 decode whose 37-wide value is no multiple of 8: the tensor-core
  // decode declines, saying so, and the SIMT decode takes it.
  std::vector<ScheduleNote> notes;
  auto p = planGraph(attention(1, 8, 4, 1, 4096, 37, "bf16"), h200, &notes);
  REQUIRE(p);
  REQUIRE(notes.size() == 1);
  CHECK(p->kernels[size_t(notes[0].kernel)].request.schedule.kind == "decode");
  CAPTURE(notes[0].reason);
  CHECK(notes[0].reason.rfind("not on m16n8k16.bf16: key widths 64 not whole steps of 16, or value width 37 not a "
                              "multiple of 8; 4 query rows a KV head share each key and value read: ",
                              0) == 0);
  // On lavapipe (no matrix op) the same decode's remark starts with its own
  // reason: a family that does not apply says nothing.
  notes.clear();
  auto q = planGraph(attention(1, 8, 4, 1, 4096, 37, "f32"), testing::loadTarget("lavapipe"), &notes);
  REQUIRE(q);
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].reason.rfind("4 query rows a KV head share each key and value read: ", 0) == 0);
}

TEST_CASE("family registry: every family has a generator and every generator a family") {
  std::set<std::pair<std::string, Serves>> families, generated;
  for (const KernelFamily& f : kernelFamilies()) {
    CAPTURE(f.kind);
    CHECK(families.emplace(std::string(f.kind), f.serves).second);  // each once
  }
  for (const Generator& g : generators()) {
    CAPTURE(g.kind);
    CHECK(generated.emplace(std::string(g.kind), g.serves).second);
    CHECK(bool(g.generate));
  }
  CHECK(families == generated);
}

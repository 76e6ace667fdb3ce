// Unit tests of the rope pass (lib/passes/rope.cpp): the tracer's own chains
// (ops::rope, both styles) become one Rope eqn with the D/2-wide tables they
// were built from; D-wide constant tables are halved; declined candidates
// leave the graph as it is with a remark naming the failing check; every
// example graph and fresh traces of every tiny config under examples/models
// (after canonicalize, as in the pipeline) get exactly two Ropes per layer
// (q and k) where the family has rope, with no remark. Numbers are compared
// with the oracle on fresh random inputs (a new seed per run): at f32 the
// Rope computes the chain's own products, difference and sum, so outputs and
// states must agree within 1e-6 relative; at bf16 the chain rounds each
// product to bf16 and the Rope does not, so the rope values must agree within
// 2^-5 * max|x| * max|table| (the bound of those roundings). Running the pass
// twice gives a byte-identical graph.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ir/text.h"
#include "oracle/interp.h"
#include "oracle/random.h"
#include "passes/pass.h"
#include "testing.h"
#include "trace/builder.h"
#include "trace/model.h"
#include "trace/ops.h"

using namespace poot;

namespace {

using namespace poot::testing;

// Runs a pass, checks the result verifies, returns whether it changed g.
bool run(Expected<bool> (*pass)(Graph&, PassContext&), Graph& g, PassContext& ctx) {
  auto changed = pass(g, ctx);
  REQUIRE_MESSAGE(bool(changed), (changed ? "" : changed.error().str()));
  auto s = verify(g);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  return *changed;
}

// The rope pass on g, the remarks it made, as "%eqn: message" lines.
std::vector<std::string> rope(Graph& g, bool* changed = nullptr) {
  PassContext ctx;
  bool c = run(runRope, g, ctx);
  if (changed) *changed = c;
  std::vector<std::string> out;
  for (const Remark& r : ctx.remarks) out.push_back(r.eqn + ": " + r.message);
  return out;
}

int countOp(const Graph& g, Op op) {
  return int(std::count_if(g.eqns.begin(), g.eqns.end(), [&](const Eqn& e) { return e.op == op; }));
}

constexpr int64_t kOracleBudget = 4'000'000;

double maxAbs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.size(); ++i) m = std::max(m, std::fabs(t.get(i)));
  return m;
}

// Elements of a and b that differ by more than tol(a_i, b_i) (NaN matches NaN).
template <class Tol>
int64_t mismatches(const Tensor& a, const Tensor& b, Tol tol) {
  REQUIRE(a.type == b.type);
  int64_t bad = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    double u = a.get(i), v = b.get(i);
    if (std::isnan(u) && std::isnan(v)) continue;
    if (!(std::fabs(u - v) <= tol(u, v))) ++bad;
  }
  return bad;
}

// One layer's worth of K/V state: the number of layers of a traced graph.
int layersOf(const Graph& g) {
  int n = 0;
  for (ValueId p : g.params) {
    const std::string& name = g.value(p).name;
    if (g.value(p).storage == Storage::State &&
        (name.ends_with("v_cache") || name.ends_with("v_pool")))
      ++n;
  }
  return n;
}

// Rope eqns expected: two per layer (q and k) for every family with rope.
int expectedRopes(const Graph& g) {
  bool noRope = g.name.rfind("bloom", 0) == 0 || g.name == "decode_attention";
  return noRope ? 0 : 2 * layersOf(g);
}

// canonicalize then rope, as the pipeline runs them; every property on one graph.
void checkPipelineGraph(const Graph& original) {
  Graph canon = original;
  PassContext ctx;
  run(runCanonicalize, canon, ctx);
  Graph g = canon;
  bool changed = false;
  auto remarks = rope(g, &changed);
  for (const std::string& r : remarks) FAIL_CHECK(r);
  CHECK(countOp(g, Op::Rope) == expectedRopes(original));
  CHECK(changed == (expectedRopes(original) > 0));
  std::string once = printGraph(g);
  bool again = true;
  rope(g, &again);
  CHECK_FALSE(again);
  CHECK(printGraph(g) == once);
  Graph other = canon;
  rope(other);
  CHECK(printGraph(other) == once);  // deterministic
  if (paramElements(original) <= kOracleBudget) checkSameResults(canon, g, freshSeed(), relativeToLarger(1e-6));
}

// x [2, 3, L, D] roped by ops::rope with inputs cos, sin [L, D/2], at dtype dt.
Graph tracedRope(trace::ops::RopeStyle style, DType dt = DType::F32, int64_t L = 4, int64_t D = 8) {
  trace::Builder b("r");
  ValueId x = b.input("x", Type{dt, {2, 3, L, D}});
  ValueId cos = b.input("cos", Type{DType::F32, {L, D / 2}});
  ValueId sin = b.input("sin", Type{DType::F32, {L, D / 2}});
  b.output(trace::ops::rope(b, x, trace::ops::RopeTables{cos, sin}, style));
  auto g = b.finish();
  REQUIRE_MESSAGE(bool(g), (g ? "" : g.error().str()));
  return g.take();
}

}  // namespace

TEST_CASE("rope replaces the tracer's rotate-half chain with one Rope") {
  Graph before = tracedRope(trace::ops::RopeStyle::Half);
  Graph g = before;
  bool changed = false;
  CHECK(rope(g, &changed).empty());
  CHECK(changed);
  CHECK(printGraph(g) ==
        "graph r\n"
        "input %x : f32[2,3,4,8]\n"
        "input %cos : f32[4,4]\n"
        "input %sin : f32[4,4]\n"
        "%rope = Rope(%x, %cos, %sin) {style=half} : f32[2,3,4,8]\n"
        "output %rope\n");
  checkSameResults(before, g, freshSeed(), relativeToLarger(1e-6));
}

TEST_CASE("rope replaces the tracer's interleaved chain with one Rope") {
  Graph before = tracedRope(trace::ops::RopeStyle::Interleaved);
  Graph g = before;
  CHECK(rope(g).empty());
  CHECK(printGraph(g) ==
        "graph r\n"
        "input %x : f32[2,3,4,8]\n"
        "input %cos : f32[4,4]\n"
        "input %sin : f32[4,4]\n"
        "%rope = Rope(%x, %cos, %sin) {style=interleaved} : f32[2,3,4,8]\n"
        "output %rope\n");
  checkSameResults(before, g, freshSeed(), relativeToLarger(1e-6));
}

TEST_CASE("rope at bf16 differs from the chain by the chain's extra roundings only") {
  for (auto style : {trace::ops::RopeStyle::Half, trace::ops::RopeStyle::Interleaved}) {
    Graph before = tracedRope(style, DType::BF16, 5, 16);
    Graph g = before;
    CHECK(rope(g).empty());
    CHECK(countOp(g, Op::Rope) == 1);
    uint64_t seed = freshSeed();
    CAPTURE(seed);
    auto params = completeParams(before, {}, seed);
    auto a = evaluate(before, params);
    auto b = evaluate(g, params);
    REQUIRE(bool(a));
    REQUIRE(bool(b));
    // Each product is exact in f32; the chain rounds both to bf16 (2^-8 each) and its sum (2^-8),
    // the Rope only the result: |diff| <= 6 * 2^-8 * max|x| * max|table| < 2^-5 * max|x| * max|table|.
    double table = std::max(maxAbs(params.at("cos")), maxAbs(params.at("sin")));
    double scale = std::ldexp(maxAbs(params.at("x")) * table, -5);
    CHECK(mismatches(a->outputs.at("rope"), b->outputs.at("rope"), [&](double, double) { return scale; }) == 0);
  }
}

TEST_CASE("rope halves D-wide constant tables and keeps width-1 tables") {
  Graph g = parse(
      "graph g\n"
      "input %x : f32[1,2,3,4]\n"
      "input %s : f32[3,2]\n"
      "%cosfull = Constant() {value=[1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6]} : f32[3,4]\n"
      "%sinfull = Concat(%s, %s) {axis=1} : f32[3,4]\n"
      "%x1 = Slice(%x) {axis=3, start=0, limit=2} : f32[1,2,3,2]\n"
      "%x2 = Slice(%x) {axis=3, start=2, limit=4} : f32[1,2,3,2]\n"
      "%n = Neg(%x2) : f32[1,2,3,2]\n"
      "%rot = Concat(%n, %x1) {axis=-1} : f32[1,2,3,4]\n"
      "%xc = Mul(%cosfull, %x) : f32[1,2,3,4]\n"
      "%rs = Mul(%rot, %sinfull) : f32[1,2,3,4]\n"
      "%y = Add(%rs, %xc) : f32[1,2,3,4]\n"
      "%one = Constant() {value=[0.5]} : f32[3,1]\n"
      "%n1 = Neg(%x2) : f32[1,2,3,2]\n"
      "%rot1 = Concat(%n1, %x1) {axis=3} : f32[1,2,3,4]\n"
      "%xc1 = Mul(%x, %one) : f32[1,2,3,4]\n"
      "%rs1 = Mul(%rot1, %one) : f32[1,2,3,4]\n"
      "%y1 = Add(%xc1, %rs1) : f32[1,2,3,4]\n"
      "output %y\n"
      "output %y1\n");
  Graph before = g;
  CHECK(rope(g).empty());
  std::string out = printGraph(g);
  CHECK(out.find("%cosfull.half = Constant() {value=[1, 2, 3, 4, 5, 6]} : f32[3,2]\n") != std::string::npos);
  CHECK(out.find("%y = Rope(%x, %cosfull.half, %s) {style=half} : f32[1,2,3,4]\n") != std::string::npos);
  CHECK(out.find("%y1 = Rope(%x, %one, %one) {style=half} : f32[1,2,3,4]\n") != std::string::npos);
  CHECK(countOp(g, Op::Mul) == 0);
  checkSameResults(before, g, freshSeed(), relativeToLarger(1e-6));
}

TEST_CASE("rope declines candidates that do not match, naming the check") {
  const std::string head =
      "graph g\n"
      "input %x : f32[1,2,3,4]\n"
      "input %c : f32[3,2]\n"
      "input %s : f32[3,2]\n"
      "input %wide : f32[3,4]\n"
      "%cf = Concat(%c, %c) {axis=-1} : f32[3,4]\n"
      "%sf = Concat(%s, %s) {axis=-1} : f32[3,4]\n"
      "%x1 = Slice(%x) {axis=3, start=0, limit=2} : f32[1,2,3,2]\n"
      "%x2 = Slice(%x) {axis=3, start=2, limit=4} : f32[1,2,3,2]\n";
  auto declines = [&](const std::string& body) {
    Graph g = parse(head + body);
    std::string text = printGraph(g);
    bool changed = true;
    auto remarks = rope(g, &changed);
    CHECK_FALSE(changed);
    CHECK(printGraph(g) == text);
    REQUIRE(remarks.size() == 1);
    return remarks[0];
  };
  // the halves swapped
  CHECK(declines("%n = Neg(%x1) : f32[1,2,3,2]\n"
                 "%rot = Concat(%n, %x2) {axis=3} : f32[1,2,3,4]\n"
                 "output %rot\n") ==
        "%rot: rotate-half chain: operand 1 of the rotate-half Concat is not Neg(Slice(x)[2:4]) of an x f32[1,2,3,4]");
  // a full-width sin table whose halves cannot be proven equal
  CHECK(declines("%n = Neg(%x2) : f32[1,2,3,2]\n"
                 "%rot = Concat(%n, %x1) {axis=3} : f32[1,2,3,4]\n"
                 "%xc = Mul(%x, %cf) : f32[1,2,3,4]\n"
                 "%rs = Mul(%rot, %wide) : f32[1,2,3,4]\n"
                 "%y = Add(%xc, %rs) : f32[1,2,3,4]\n"
                 "output %y\n") ==
        "%rot: rotate-half chain: the sin table f32[3,4] is not Concat(t, t) of one half-width table t, nor a "
        "Constant of two equal halves");
  // x * cos missing: the rotated product is added to something else
  CHECK(declines("%n = Neg(%x2) : f32[1,2,3,2]\n"
                 "%rot = Concat(%n, %x1) {axis=3} : f32[1,2,3,4]\n"
                 "%rs = Mul(%rot, %sf) : f32[1,2,3,4]\n"
                 "%y = Add(%x, %rs) : f32[1,2,3,4]\n"
                 "output %y\n") ==
        "%rot: rotate-half chain: the other operand of the Add is not x times a cos table");
}

TEST_CASE("rope declines interleaved candidates that do not match, naming the check") {
  auto declines = [&](const std::string& sub, const std::string& add) {
    Graph g = parse(
        "graph g\n"
        "input %x : f32[1,2,3,4]\n"
        "input %c : f32[3,2,1]\n"
        "input %s : f32[3,2,1]\n"
        "%p = Reshape(%x) : f32[1,2,3,2,2]\n"
        "%x0 = Slice(%p) {axis=-1, start=0, limit=1} : f32[1,2,3,2,1]\n"
        "%x1 = Slice(%p) {axis=-1, start=1, limit=2} : f32[1,2,3,2,1]\n"
        "%x0c = Mul(%x0, %c) : f32[1,2,3,2,1]\n"
        "%x1s = Mul(%x1, %s) : f32[1,2,3,2,1]\n"
        "%x1c = Mul(%x1, %c) : f32[1,2,3,2,1]\n"
        "%x0s = Mul(%x0, %s) : f32[1,2,3,2,1]\n" +
        sub + add +
        "%pairs = Concat(%o0, %o1) {axis=-1} : f32[1,2,3,2,2]\n"
        "%y = Reshape(%pairs) : f32[1,2,3,4]\n"
        "output %y\n");
    std::string text = printGraph(g);
    auto remarks = rope(g);
    CHECK(printGraph(g) == text);
    REQUIRE(remarks.size() == 1);
    return remarks[0];
  };
  const std::string goodSub = "%o0 = Sub(%x0c, %x1s) : f32[1,2,3,2,1]\n";
  const std::string goodAdd = "%o1 = Add(%x1c, %x0s) : f32[1,2,3,2,1]\n";
  CHECK(declines("%o0 = Sub(%x1s, %x0c) : f32[1,2,3,2,1]\n", goodAdd) ==
        "%p: interleaved chain: no Sub takes element 0 of the pairs times a cos table as its first operand");
  CHECK(declines(goodSub, "%o1 = Add(%x1c, %x0c) : f32[1,2,3,2,1]\n") ==
        "%p: interleaved chain: no Add forms element 1 times the cos table plus element 0 times the sin table");
  // and the same graph with the right Sub and Add fires
  Graph g = parse(
      "graph g\ninput %x : f32[1,2,3,4]\ninput %c : f32[3,2,1]\ninput %s : f32[3,2,1]\n"
      "%p = Reshape(%x) : f32[1,2,3,2,2]\n"
      "%x0 = Slice(%p) {axis=-1, start=0, limit=1} : f32[1,2,3,2,1]\n"
      "%x1 = Slice(%p) {axis=-1, start=1, limit=2} : f32[1,2,3,2,1]\n"
      "%x0c = Mul(%c, %x0) : f32[1,2,3,2,1]\n%x1s = Mul(%x1, %s) : f32[1,2,3,2,1]\n"
      "%x1c = Mul(%x1, %c) : f32[1,2,3,2,1]\n%x0s = Mul(%s, %x0) : f32[1,2,3,2,1]\n" +
      goodSub + "%o1 = Add(%x0s, %x1c) : f32[1,2,3,2,1]\n" +
      "%pairs = Concat(%o0, %o1) {axis=-1} : f32[1,2,3,2,2]\n%y = Reshape(%pairs) : f32[1,2,3,4]\noutput %y\n");
  Graph before = g;
  CHECK(rope(g).empty());
  std::string out = printGraph(g);
  CHECK(out.find("%c.half = Reshape(%c) : f32[3,2]\n") != std::string::npos);
  CHECK(out.find("%y = Rope(%x, %c.half, %s.half) {style=interleaved} : f32[1,2,3,4]\n") != std::string::npos);
  checkSameResults(before, g, freshSeed(), relativeToLarger(1e-6));
}

TEST_CASE("rope forms exactly two Ropes per Llama layer, for q and for k") {
  Graph g = loadGraphFile(exampleGraph("tiny-llama-decode.pg"));
  PassContext ctx;
  run(runCanonicalize, g, ctx);
  CHECK(rope(g).empty());
  REQUIRE(layersOf(g) == 2);
  CHECK(countOp(g, Op::Rope) == 4);
  for (int layer = 0; layer < 2; ++layer) {
    std::string p = "layers." + std::to_string(layer) + ".attn.";
    int q = 0, k = 0;
    for (const Eqn& e : g.eqns) {
      if (e.op != Op::Rope) continue;
      const std::string& name = g.value(e.results[0]).name;
      if (name.rfind(p, 0) != 0) continue;
      CHECK(std::get<std::string>(*e.attr("style")) == "half");
      CHECK(g.value(e.operands[1]).name == "rope.cos");
      CHECK(g.value(e.operands[2]).name == "rope.sin");
      for (const Eqn& u : g.eqns) {
        bool uses = std::find(u.operands.begin(), u.operands.end(), e.results[0]) != u.operands.end();
        if (uses && u.op == Op::MatMul && u.operands[0] == e.results[0]) ++q;                     // the scores
        if (uses && u.op == Op::DynamicUpdateSlice && u.operands[1] == e.results[0]) ++k;         // the K cache
      }
    }
    CHECK(q == 1);
    CHECK(k == 1);
  }
}

TEST_CASE("rope forms two Ropes per layer on every example graph with rope") {
  auto files = exampleGraphs();
  REQUIRE(!files.empty());
  for (const auto& f : files) {
    CAPTURE(f.filename().string());
    checkPipelineGraph(loadGraphFile(f));
  }
}

TEST_CASE("rope forms two Ropes per layer on fresh traces of the tiny configs") {
  using namespace poot::trace;
  auto configs = tinyConfigs();
  REQUIRE(!configs.empty());
  int traced = 0;
  std::set<std::string> styles;
  for (const auto& path : configs) {
    auto cfg = loadConfig(path.string());
    REQUIRE_MESSAGE(bool(cfg), (cfg ? "" : cfg.error().str()));
    for (Phase phase : {Phase::Decode, Phase::Prefill})
      for (auto kv : {ops::KvLayout::Fixed, ops::KvLayout::Paged}) {
        TraceOptions opts;
        opts.phase = phase;
        opts.kv = kv;
        opts.capacity = 64;
        opts.tokens = phase == Phase::Prefill ? 4 : 1;
        auto g = traceModel(*cfg, opts);
        CAPTURE(path.filename().string());
        if (!g) {
          CHECK_MESSAGE((phase != Phase::Decode || kv != ops::KvLayout::Fixed), g.error().str());
          continue;
        }
        ++traced;
        checkPipelineGraph(*g);
        Graph formed = *g;
        PassContext ctx;
        run(runCanonicalize, formed, ctx);
        rope(formed);
        for (const Eqn& e : formed.eqns)
          if (e.op == Op::Rope) styles.insert(std::get<std::string>(*e.attr("style")));
      }
  }
  CHECK(styles == std::set<std::string>{"half", "interleaved"});
  MESSAGE("rope checked on " << traced << " fresh traces of " << configs.size() << " tiny configs");
}

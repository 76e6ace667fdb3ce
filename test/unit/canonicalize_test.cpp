// Unit tests of the canonicalize pass (lib/passes/canonicalize.cpp): each
// rule on a small graph by its exact printed result (constant folding with
// the oracle's values, splats, the 4096-element limit, Iota never folded,
// Reshape/Broadcast/Transpose chains, the MatMul guard, common subexpressions
// with exported names, dead eqns); then, on every example graph and on fresh
// traces of every tiny config under examples/models, that the pass keeps the
// outputs and states (oracle, fresh random inputs, a new seed per run,
// 1e-5 relative: the rewrites do not reassociate, so they are exact in
// practice), is idempotent and deterministic (byte-identical printGraph), and
// keeps the chains later passes recognize: every GQA repeat, every attention
// chain of the seed and every rope chain.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "ir/text.h"
#include "oracle/interp.h"
#include "oracle/random.h"
#include "passes/pass.h"
#include "testing.h"
#include "trace/model.h"

using namespace poot;

namespace {

using namespace poot::testing;

// Runs canonicalize and checks that the result verifies.
bool canonicalize(Graph& g) {
  PassContext ctx;
  auto changed = runCanonicalize(g, ctx);
  REQUIRE_MESSAGE(bool(changed), (changed ? "" : changed.error().str()));
  auto s = verify(g);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  return *changed;
}

std::string canonical(const std::string& text) {
  Graph g = parse(text);
  canonicalize(g);
  return printGraph(g);
}

// Parameter elements of the largest graph the oracle checks: it runs only on graphs it can hold quickly.
constexpr int64_t kOracleBudget = 4'000'000;

// ----- the chains later passes recognize, counted structurally

const Eqn* defOf(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  return val.storage == Storage::Result && val.def >= 0 ? &g.eqns[size_t(val.def)] : nullptr;
}

bool isOp(const Graph& g, ValueId v, Op op) {
  const Eqn* d = defOf(g, v);
  return d && d->op == op;
}

// Reshape(Broadcast(Reshape(x))): the GQA repeat.
int countGqaRepeats(const Graph& g) {
  int n = 0;
  for (const Eqn& e : g.eqns)
    if (e.op == Op::Reshape && isOp(g, e.operands[0], Op::Broadcast) &&
        isOp(g, defOf(g, e.operands[0])->operands[0], Op::Reshape))
      ++n;
  return n;
}

// MatMul(Div(Exp(Sub(s, ReduceMax(s))), ReduceSum(..)), v) whose scores s
// come (through Mul, Add, Select, Div, Tanh) from MatMul(q, Transpose(k))
// with the last two axes swapped: the seed's attention chain.
int countAttentionChains(const Graph& g) {
  int n = 0;
  for (const Eqn& e : g.eqns) {
    if (e.op != Op::MatMul) continue;
    const Eqn* div = defOf(g, e.operands[0]);
    if (!div || div->op != Op::Div || !isOp(g, div->operands[1], Op::ReduceSum)) continue;
    const Eqn* ex = defOf(g, div->operands[0]);
    if (!ex || ex->op != Op::Exp) continue;
    const Eqn* sub = defOf(g, ex->operands[0]);
    if (!sub || sub->op != Op::Sub || !isOp(g, sub->operands[1], Op::ReduceMax)) continue;
    const Eqn* s = defOf(g, sub->operands[0]);
    for (int step = 0; s && step < 8 && s->op != Op::MatMul; ++step)
      s = defOf(g, s->operands[s->op == Op::Select ? 1 : 0]);
    if (!s || s->op != Op::MatMul) continue;
    const Eqn* kt = defOf(g, s->operands[1]);
    if (!kt || kt->op != Op::Transpose) continue;
    auto perm = std::get<std::vector<int64_t>>(*kt->attr("perm"));
    size_t r = perm.size();
    bool swapsLast = r >= 2 && perm[r - 1] == int64_t(r - 2) && perm[r - 2] == int64_t(r - 1);
    for (size_t i = 0; i + 2 < r; ++i) swapsLast = swapsLast && perm[i] == int64_t(i);
    if (swapsLast) ++n;
  }
  return n;
}

// The Rope eqns the rope pass forms on g (a copy), with no remark.
int ropesFormed(Graph g) {
  PassContext ctx;
  auto changed = runRope(g, ctx);
  REQUIRE(bool(changed));
  for (const Remark& r : ctx.remarks) FAIL_CHECK(r.eqn << ": " << r.message);
  return int(std::count_if(g.eqns.begin(), g.eqns.end(), [](const Eqn& e) { return e.op == Op::Rope; }));
}

// Every property the pass promises, on one graph.
void checkGraph(const Graph& original, bool expectChains) {
  Graph g = original;
  canonicalize(g);
  std::string once = printGraph(g);
  CHECK_FALSE(canonicalize(g));
  CHECK(printGraph(g) == once);  // idempotent
  Graph again = original;
  canonicalize(again);
  CHECK(printGraph(again) == once);  // deterministic
  CHECK(g.eqns.size() <= original.eqns.size());
  CHECK(countGqaRepeats(g) == countGqaRepeats(original));
  CHECK(countAttentionChains(g) == countAttentionChains(original));
  if (expectChains) CHECK(countAttentionChains(original) > 0);
  CHECK(ropesFormed(g) == ropesFormed(original));
  if (paramElements(original) <= kOracleBudget) checkSameResults(original, g, freshSeed(), relativeToLarger(1e-5));
}

}  // namespace

TEST_CASE("canonicalize folds constants with the oracle's values") {
  CHECK(canonical("graph g\n"
                  "input %x : f32[3]\n"
                  "%a = Constant() {value=[1, 2, 3]} : f32[3]\n"
                  "%b = Constant() {value=[0.1]} : f32[]\n"
                  "%c = Mul(%a, %b) : f32[3]\n"
                  "%d = Add(%x, %c) : f32[3]\n"
                  "output %d\n") ==
        "graph g\n"
        "input %x : f32[3]\n"
        "%c = Constant() {value=[0.10000000149011612, 0.20000000298023224, 0.30000001192092896]} : f32[3]\n"
        "%d = Add(%x, %c) : f32[3]\n"
        "output %d\n");
  // chains fold through; an equal result is a splat; f16 rounds as the oracle does
  CHECK(canonical("graph g\n"
                  "%one = Constant() {value=[1]} : f16[]\n"
                  "%three = Constant() {value=[3]} : f16[]\n"
                  "%third = Div(%one, %three) : f16[]\n"
                  "%wide = Broadcast(%third) : f16[2,3]\n"
                  "%neg = Neg(%wide) : f16[2,3]\n"
                  "%lt = Lt(%neg, %wide) : bool[2,3]\n"
                  "output %neg\n"
                  "output %lt\n") ==
        "graph g\n"
        "%neg = Constant() {value=[-0.333251953125]} : f16[2,3]\n"
        "%lt = Constant() {value=[1]} : bool[2,3]\n"
        "output %neg\n"
        "output %lt\n");
}

TEST_CASE("canonicalize leaves Iota, large results and failing evaluations unfolded") {
  std::string text =
      "graph g\n"
      "%i = Iota() {axis=0} : i32[4]\n"
      "%one = Constant() {value=[1]} : i32[]\n"
      "%zero = Constant() {value=[0]} : i32[]\n"
      "%j = Add(%i, %one) : i32[4]\n"
      "%q = Div(%one, %zero) : i32[]\n"
      "%f = Constant() {value=[2]} : f32[]\n"
      "%big = Broadcast(%f) : f32[4097]\n"
      "%fits = Broadcast(%f) : f32[4096]\n"
      "output %j\n"
      "output %q\n"
      "output %big\n"
      "output %fits\n";
  std::string out = canonical(text);
  CHECK(out.find("%i = Iota() {axis=0} : i32[4]\n") != std::string::npos);
  CHECK(out.find("%j = Add(%i, %one) : i32[4]\n") != std::string::npos);
  CHECK(out.find("%q = Div(%one, %zero) : i32[]\n") != std::string::npos);
  CHECK(out.find("%big = Broadcast(%f) : f32[4097]\n") != std::string::npos);
  CHECK(out.find("%fits = Constant() {value=[2]} : f32[4096]\n") != std::string::npos);
}

TEST_CASE("canonicalize shortens reshape, broadcast and transpose chains") {
  CHECK(canonical("graph g\n"
                  "input %x : f32[2,3,4]\n"
                  "input %s : f32[3,1]\n"
                  "%r1 = Reshape(%x) : f32[6,4]\n"
                  "%r2 = Reshape(%r1) : f32[24]\n"
                  "%same = Reshape(%r2) : f32[24]\n"
                  "%b1 = Broadcast(%s) : f32[3,4]\n"
                  "%b2 = Broadcast(%b1) : f32[2,3,4]\n"
                  "%bsame = Broadcast(%b2) : f32[2,3,4]\n"
                  "%t1 = Transpose(%x) {perm=[1, 2, 0]} : f32[3,4,2]\n"
                  "%t2 = Transpose(%t1) {perm=[2, 0, 1]} : f32[2,3,4]\n"
                  "%t3 = Transpose(%x) {perm=[2, 0, 1]} : f32[4,2,3]\n"
                  "%t4 = Transpose(%t3) {perm=[0, 2, 1]} : f32[4,3,2]\n"
                  "%y = Add(%t2, %bsame) : f32[2,3,4]\n"
                  "output %same\n"
                  "output %y\n"
                  "output %t4\n") ==
        "graph g\n"
        "input %x : f32[2,3,4]\n"
        "input %s : f32[3,1]\n"
        "%same = Reshape(%x) : f32[24]\n"  // %r2, which %same merged into, takes the exported name
        "%bsame = Broadcast(%s) : f32[2,3,4]\n"
        "%t4 = Transpose(%x) {perm=[2, 1, 0]} : f32[4,3,2]\n"
        "%y = Add(%x, %bsame) : f32[2,3,4]\n"
        "output %same\n"
        "output %y\n"
        "output %t4\n");
}

TEST_CASE("canonicalize keeps the transpose a MatMul reads, and exported values that cannot merge") {
  // The seed's MatMul(q, Transpose(k)) stays whole even when k is itself a Transpose.
  std::string text =
      "graph g\n"
      "input %q : f32[1,2,1,4]\n"
      "input %g : f32[1,8,2,4]\n"
      "%view = Transpose(%g) {perm=[0, 2, 1, 3]} : f32[1,2,8,4]\n"
      "%kt = Transpose(%view) {perm=[0, 1, 3, 2]} : f32[1,2,4,8]\n"
      "%s = MatMul(%q, %kt) : f32[1,2,1,8]\n"
      "%same = Reshape(%q) : f32[1,2,1,4]\n"
      "output %s\n"
      "output %same\n";
  CHECK(canonical(text) == printGraph(parse(text)));
}

TEST_CASE("canonicalize merges common subexpressions, Iota and Constant included") {
  CHECK(canonical("graph g\n"
                  "input %x : f32[4]\n"
                  "%c1 = Constant() {value=[0]} : f32[]\n"
                  "%c2 = Constant() {value=[0]} : f32[]\n"
                  "%c3 = Constant() {value=[-0]} : f32[]\n"
                  "%c4 = Constant() {value=[0]} : f32[1]\n"
                  "%i1 = Iota() {axis=0} : i32[4]\n"
                  "%i2 = Iota() {axis=0} : i32[4]\n"
                  "%e1 = Exp(%x) : f32[4]\n"
                  "%e2 = Exp(%x) : f32[4]\n"
                  "%a = Add(%e1, %c1) : f32[4]\n"
                  "%b = Add(%e2, %c2) : f32[4]\n"
                  "%d = Add(%e2, %c3) : f32[4]\n"
                  "%f = Add(%e2, %c4) : f32[4]\n"
                  "%i = Add(%i1, %i2) : i32[4]\n"
                  "%k = Add(%i2, %i1) : i32[4]\n"
                  "output %a\n"
                  "output %b\n"
                  "output %d\n"
                  "output %f\n"
                  "output %i\n"
                  "output %k\n") ==
        "graph g\n"
        "input %x : f32[4]\n"
        "%c1 = Constant() {value=[0]} : f32[]\n"
        "%c3 = Constant() {value=[-0]} : f32[]\n"
        "%c4 = Constant() {value=[0]} : f32[1]\n"
        "%i1 = Iota() {axis=0} : i32[4]\n"
        "%e1 = Exp(%x) : f32[4]\n"
        "%a = Add(%e1, %c1) : f32[4]\n"
        "%b = Add(%e1, %c1) : f32[4]\n"  // both exported: they keep their own names
        "%d = Add(%e1, %c3) : f32[4]\n"
        "%f = Add(%e1, %c4) : f32[4]\n"
        "%i = Add(%i1, %i1) : i32[4]\n"
        "%k = Add(%i1, %i1) : i32[4]\n"
        "output %a\n"
        "output %b\n"
        "output %d\n"
        "output %f\n"
        "output %i\n"
        "output %k\n");
  // An exported duplicate gives its name to the first, which was not exported.
  CHECK(canonical("graph g\n"
                  "input %x : f32[4]\n"
                  "%e1 = Exp(%x) : f32[4]\n"
                  "%n = Neg(%e1) : f32[4]\n"
                  "%e2 = Exp(%x) : f32[4]\n"
                  "%y = Add(%n, %e2) : f32[4]\n"
                  "output %y\n"
                  "output %e2\n") ==
        "graph g\n"
        "input %x : f32[4]\n"
        "%e2 = Exp(%x) : f32[4]\n"
        "%n = Neg(%e2) : f32[4]\n"
        "%y = Add(%n, %e2) : f32[4]\n"
        "output %y\n"
        "output %e2\n");
}

TEST_CASE("canonicalize removes dead eqns and reports no change on a canonical graph") {
  Graph g = parse("graph g\ninput %x : f32[4]\n%d = Neg(%x) : f32[4]\n%y = Exp(%x) : f32[4]\noutput %y\n");
  CHECK(canonicalize(g));
  CHECK(printGraph(g) == "graph g\ninput %x : f32[4]\n%y = Exp(%x) : f32[4]\noutput %y\n");
  CHECK_FALSE(canonicalize(g));
}

TEST_CASE("canonicalize keeps every example graph's results and chains") {
  auto files = exampleGraphs();
  REQUIRE(!files.empty());
  for (const auto& f : files) {
    CAPTURE(f.filename().string());
    Graph g = loadGraphFile(f);
    checkGraph(g, true);
  }
}

TEST_CASE("canonicalize keeps the results and chains of fresh traces of the tiny configs") {
  using namespace poot::trace;
  auto configs = tinyConfigs();
  REQUIRE(!configs.empty());
  struct Variant {
    Phase phase;
    ops::KvLayout kv;
    bool live;
  };
  const Variant variants[] = {{Phase::Decode, ops::KvLayout::Fixed, false},
                              {Phase::Prefill, ops::KvLayout::Fixed, false},
                              {Phase::Decode, ops::KvLayout::Paged, true},
                              {Phase::Prefill, ops::KvLayout::Paged, false}};
  int traced = 0;
  for (const auto& path : configs) {
    auto cfg = loadConfig(path.string());
    REQUIRE_MESSAGE(bool(cfg), (cfg ? "" : cfg.error().str()));
    for (const Variant& v : variants) {
      TraceOptions opts;
      opts.phase = v.phase;
      opts.kv = v.kv;
      opts.live = v.live;
      opts.capacity = 64;
      opts.tokens = v.phase == Phase::Prefill ? 4 : 1;
      auto g = traceModel(*cfg, opts);
      CAPTURE(path.filename().string());
      CAPTURE(int(v.phase));
      CAPTURE(int(v.kv));
      if (!g) {  // a family may refuse a variant; the fixed decode every family traces
        CHECK_MESSAGE((v.phase != Phase::Decode || v.kv != ops::KvLayout::Fixed), g.error().str());
        continue;
      }
      ++traced;
      checkGraph(*g, true);
    }
  }
  MESSAGE("canonicalize checked on " << traced << " fresh traces of " << configs.size() << " tiny configs");
}

// Unit tests of the value-range analysis (lib/analysis/ranges) and the
// ranges pass: one case per transfer rule (slots, Iota, Constant, arithmetic
// by constants and by intervals, Min/Max clamps, comparisons and selects,
// data movement, conversions, wrapping to the whole dtype), the witness rule
// of IndexGuard (the clamp counts only when its witness is a declared
// validation output; a declared slot's range needs no witness), the live
// length and the paged read map of fresh traces, and that the pass stores its
// result in the PassContext without changing the graph.
#include <doctest/doctest.h>

#include <limits>
#include <string>

#include "analysis/ranges.h"
#include "ir/text.h"
#include "passes/pass.h"
#include "testing.h"
#include "trace/model.h"

using namespace poot;

namespace {

// Parses without verifying, so a test can leave a guard's witness undeclared.
Graph parseUnverified(const std::string& text) { return testing::parseUnverified(text, "r.pg"); }

ValueId id(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].name == name) return ValueId(i);
  FAIL("no value %" << name);
  return -1;
}

Interval rangeOf(const Graph& g, const ValueRanges& r, const std::string& name) {
  auto i = r.get(id(g, name));
  REQUIRE_MESSAGE(i.has_value(), "no interval for %" << name);
  return *i;
}

constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min(), kI32Max = std::numeric_limits<int32_t>::max();

}  // namespace

TEST_CASE("ranges: slots, Iota and Constant") {
  Graph g = parseUnverified(
      "graph g\n"
      "slot %pos : i32[] range [0, 63]\n"
      "input %x : i32[4]\n"
      "input %f : f32[4]\n"
      "%iota = Iota() {axis=1} : i32[3,5]\n"
      "%c = Constant() {value=[4, -2, 7]} : i32[3]\n"
      "%splat = Constant() {value=[9]} : i64[2]\n"
      "%y = Exp(%f) : f32[4]\n"
      "output %y\n");
  ValueRanges r = computeRanges(g);
  CHECK(rangeOf(g, r, "pos") == Interval{0, 63});
  CHECK(rangeOf(g, r, "x") == Interval{kI32Min, kI32Max});  // an input: nothing known
  CHECK(rangeOf(g, r, "iota") == Interval{0, 4});
  CHECK(rangeOf(g, r, "c") == Interval{-2, 7});
  CHECK(rangeOf(g, r, "splat") == Interval{9, 9});
  CHECK_FALSE(r.get(id(g, "f")).has_value());  // floats are not tracked
  CHECK_FALSE(r.get(id(g, "y")).has_value());
  CHECK(r.proves(id(g, "pos"), 0, 63));
  CHECK_FALSE(r.proves(id(g, "pos"), 1, 63));
  CHECK(r.isFor(g));
}

TEST_CASE("ranges: Add, Sub, Mul, Div by constants and by intervals, wrapping gives the whole dtype") {
  Graph g = parseUnverified(
      "graph g\n"
      "slot %pos : i32[] range [0, 63]\n"
      "slot %n : i32[] range [-3, 5]\n"
      "%one = Constant() {value=[1]} : i32[]\n"
      "%four = Constant() {value=[4]} : i32[]\n"
      "%len = Add(%pos, %one) : i32[]\n"
      "%back = Sub(%pos, %four) : i32[]\n"
      "%neg = Sub(%one, %pos) : i32[]\n"
      "%twice = Mul(%n, %four) : i32[]\n"
      "%sq = Mul(%n, %n) : i32[]\n"
      "%block = Div(%pos, %four) : i32[]\n"
      "%bad = Div(%four, %n) : i32[]\n"
      "%big = Constant() {value=[2147483647]} : i32[]\n"
      "%wrap = Add(%big, %pos) : i32[]\n"
      "%wide = Convert(%pos) : i64[]\n"
      "%big64 = Convert(%big) : i64[]\n"
      "%nowrap = Add(%big64, %wide) : i64[]\n"
      "%minus = Neg(%n) : i32[]\n"
      "%abs = Abs(%n) : i32[]\n"
      "output %len\n");
  ValueRanges r = computeRanges(g);
  CHECK(rangeOf(g, r, "len") == Interval{1, 64});
  CHECK(rangeOf(g, r, "back") == Interval{-4, 59});
  CHECK(rangeOf(g, r, "neg") == Interval{-62, 1});
  CHECK(rangeOf(g, r, "twice") == Interval{-12, 20});
  CHECK(rangeOf(g, r, "sq") == Interval{-15, 25});
  CHECK(rangeOf(g, r, "block") == Interval{0, 15});
  CHECK(rangeOf(g, r, "bad") == Interval{kI32Min, kI32Max});  // the divisor may be 0
  CHECK(rangeOf(g, r, "wrap") == Interval{kI32Min, kI32Max});  // may wrap past i32
  CHECK(rangeOf(g, r, "nowrap") == Interval{2147483647, 2147483647 + 63LL});
  CHECK(rangeOf(g, r, "minus") == Interval{-5, 3});
  CHECK(rangeOf(g, r, "abs") == Interval{0, 5});
}

TEST_CASE("ranges: Min/Max clamps, comparisons, selects and logic") {
  Graph g = parseUnverified(
      "graph g\n"
      "input %x : i32[4]\n"
      "slot %pos : i32[] range [0, 9]\n"
      "%lo = Constant() {value=[1]} : i32[]\n"
      "%hi = Constant() {value=[32]} : i32[]\n"
      "%m = Max(%x, %lo) : i32[4]\n"
      "%clamped = Min(%m, %hi) : i32[4]\n"
      "%big = Constant() {value=[10]} : i32[]\n"
      "%always = Lt(%pos, %big) : bool[]\n"
      "%never = Gt(%pos, %big) : bool[]\n"
      "%maybe = Le(%x, %big) : bool[4]\n"
      "%eq = Eq(%big, %big) : bool[]\n"
      "%ne = Ne(%pos, %big) : bool[]\n"
      "%neg1 = Constant() {value=[-1]} : i32[]\n"
      "%pick = Select(%always, %pos, %neg1) : i32[]\n"
      "%either = Select(%maybe, %clamped, %neg1) : i32[4]\n"
      "%and = And(%always, %maybe) : bool[4]\n"
      "%or = Or(%always, %maybe) : bool[4]\n"
      "%not = Not(%never) : bool[]\n"
      "output %pick\n");
  ValueRanges r = computeRanges(g);
  CHECK(rangeOf(g, r, "m") == Interval{1, kI32Max});
  CHECK(rangeOf(g, r, "clamped") == Interval{1, 32});
  CHECK(rangeOf(g, r, "always") == Interval{1, 1});
  CHECK(rangeOf(g, r, "never") == Interval{0, 0});
  CHECK(rangeOf(g, r, "maybe") == Interval{0, 1});
  CHECK(rangeOf(g, r, "eq") == Interval{1, 1});
  CHECK(rangeOf(g, r, "ne") == Interval{1, 1});
  CHECK(rangeOf(g, r, "pick") == Interval{0, 9});  // the condition is decided
  CHECK(rangeOf(g, r, "either") == Interval{-1, 32});
  CHECK(rangeOf(g, r, "and") == Interval{0, 1});
  CHECK(rangeOf(g, r, "or") == Interval{1, 1});
  CHECK(rangeOf(g, r, "not") == Interval{1, 1});
}

TEST_CASE("ranges: Broadcast, Reshape, Transpose, Slice, Gather, Concat and Convert keep or join the source") {
  Graph g = parseUnverified(
      "graph g\n"
      "slot %read : i32[2,8] range [0, 15]\n"
      "slot %pos : i32[] range [3, 5]\n"
      "input %table : f32[16,4]\n"
      "%b = Broadcast(%pos) : i32[2]\n"
      "%r = Reshape(%read) : i32[16]\n"
      "%t = Transpose(%read) {perm=[1, 0]} : i32[8,2]\n"
      "%s = Slice(%r) {axis=0, start=2, limit=4} : i32[2]\n"
      "%iota = Iota() {axis=0} : i32[2]\n"
      "%cat = Concat(%b, %iota) {axis=0} : i32[4]\n"
      "%rows = Gather(%table, %read) {axis=0} : f32[2,8,4]\n"
      "%g = Gather(%read, %iota) {axis=0} : i32[2,8]\n"
      "%wide = Convert(%pos) : i64[]\n"
      "%flag = Convert(%pos) : bool[]\n"
      "%fromf = Convert(%table) : i32[16,4]\n"
      "%back = Convert(%flag) : i32[]\n"
      "output %rows\n");
  ValueRanges r = computeRanges(g);
  CHECK(rangeOf(g, r, "b") == Interval{3, 5});
  CHECK(rangeOf(g, r, "r") == Interval{0, 15});
  CHECK(rangeOf(g, r, "t") == Interval{0, 15});
  CHECK(rangeOf(g, r, "s") == Interval{0, 15});
  CHECK(rangeOf(g, r, "cat") == Interval{0, 5});
  CHECK(rangeOf(g, r, "g") == Interval{0, 15});
  CHECK(rangeOf(g, r, "wide") == Interval{3, 5});
  CHECK(rangeOf(g, r, "flag") == Interval{1, 1});
  CHECK(rangeOf(g, r, "fromf") == Interval{kI32Min, kI32Max});  // from a float: not tracked
  CHECK(rangeOf(g, r, "back") == Interval{1, 1});
  CHECK(r.print(g).find("%cat : i32[4] in [0, 5]\n") != std::string::npos);
}

TEST_CASE("ranges: an IndexGuard's clamp counts only when its witness is a declared validation output") {
  const std::string body =
      "graph g\n"
      "input %x : i32[2]\n"
      "slot %pos : i32[] range [0, 31]\n"
      "%one = Constant() {value=[1]} : i32[]\n"
      "%p1 = Add(%pos, %one) : i32[]\n"
      "%fromslot = Broadcast(%p1) : i32[2]\n"
      "%len, %ok = IndexGuard(%x) {lo=1, hi=32} : i32[2], bool[]\n"
      "%slen, %sok = IndexGuard(%fromslot) {lo=1, hi=32} : i32[2], bool[]\n"
      "%narrow, %nok = IndexGuard(%fromslot) {lo=1, hi=16} : i32[2], bool[]\n"
      "output %len\n"
      "output %slen\n"
      "output %narrow\n";
  SUBCASE("witnesses declared: every clamp counts") {
    Graph g = parseUnverified(body + "validation %ok\nvalidation %sok\nvalidation %nok\n");
    REQUIRE(bool(verify(g)));
    ValueRanges r = computeRanges(g);
    CHECK(rangeOf(g, r, "len") == Interval{1, 32});
    CHECK(rangeOf(g, r, "slen") == Interval{1, 32});
    CHECK(rangeOf(g, r, "narrow") == Interval{1, 16});
    CHECK(rangeOf(g, r, "sok") == Interval{1, 1});  // the input already passes
    CHECK(rangeOf(g, r, "ok") == Interval{0, 1});
  }
  SUBCASE("no witness: the guard proves only what its input proves") {
    Graph g = parseUnverified(body);
    ValueRanges r = computeRanges(g);
    // an unbounded input stays unbounded: the clamp would hide a bad length
    CHECK(rangeOf(g, r, "len") == Interval{kI32Min, kI32Max});
    CHECK_FALSE(r.proves(id(g, "len"), 1, 32));
    // a length from the declared pos slot needs no witness
    CHECK(rangeOf(g, r, "slen") == Interval{1, 32});
    CHECK(r.proves(id(g, "slen"), 1, 32));
    // a clamp that can change the value counts for nothing
    CHECK(rangeOf(g, r, "narrow") == Interval{kI32Min, kI32Max});
  }
}

TEST_CASE("ranges: ReduceSum, ReduceMax, TopK indices") {
  Graph g = parseUnverified(
      "graph g\n"
      "slot %s : i32[3,4] range [0, 2]\n"
      "input %f : f32[2,6]\n"
      "%sum = ReduceSum(%s) {axis=1, keepdim=false} : i32[3]\n"
      "%max = ReduceMax(%s) {axis=0, keepdim=true} : i32[1,4]\n"
      "%v, %i = TopK(%f) {k=2} : f32[2,2], i32[2,2]\n"
      "output %sum\n");
  ValueRanges r = computeRanges(g);
  CHECK(rangeOf(g, r, "sum") == Interval{0, 8});
  CHECK(rangeOf(g, r, "max") == Interval{0, 2});
  CHECK(rangeOf(g, r, "i") == Interval{0, 5});
}

TEST_CASE("ranges: the live length and the read map of fresh traces are proved") {
  trace::ModelConfig cfg = testing::loadExampleConfig("tiny-llama.json");
  for (int64_t tokens : {1, 4}) {
    trace::TraceOptions o;
    o.phase = tokens == 1 ? trace::Phase::Decode : trace::Phase::Prefill;
    o.tokens = tokens;
    o.kv = trace::ops::KvLayout::Paged;
    o.live = true;
    o.batch = 2;
    o.capacity = 64;
    o.layers = 1;
    auto g = trace::traceModel(cfg, o);
    REQUIRE_MESSAGE(bool(g), (g ? "" : g.error().str()));
    ValueRanges r = computeRanges(*g);
    CHECK(rangeOf(*g, r, "len") == Interval{tokens, 64});
    CHECK(rangeOf(*g, r, "len.guarded") == Interval{tokens, 64});
    CHECK(rangeOf(*g, r, "read") == Interval{0, 127});
    CHECK(rangeOf(*g, r, "active") == Interval{0, 1});
  }
}

TEST_CASE("ranges pass: stores the ranges in the context and never changes the graph") {
  Graph g = parseUnverified("graph g\nslot %pos : i32[] range [2, 9]\n%y = Neg(%pos) : i32[]\noutput %y\n");
  std::string before = printGraph(g);
  PassContext ctx;
  auto changed = runRanges(g, ctx);
  REQUIRE(bool(changed));
  CHECK_FALSE(*changed);
  CHECK(printGraph(g) == before);
  REQUIRE(ctx.ranges.has_value());
  CHECK(ctx.ranges->get(id(g, "y")) == Interval{-9, -2});
  CHECK(&rangesFor(g, ctx) == &*ctx.ranges);
  // A graph that changed since is analysed again.
  g.addEqn(Op::Neg, {id(g, "y")}, {}, {{"z", Type{DType::I32, {}}}});
  CHECK_FALSE(ctx.ranges->isFor(g));
  CHECK(rangesFor(g, ctx).get(id(g, "z")) == Interval{2, 9});
}

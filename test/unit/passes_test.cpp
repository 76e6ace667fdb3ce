// Unit tests of the pass pipeline and the cleanup pass: dead eqns go, live
// ones (outputs, state updates, validation witnesses and what feeds them)
// stay, and the pipeline honours stopAfter and reports every pass it ran.
#include <doctest/doctest.h>

#include "ir/text.h"
#include "passes/pass.h"
#include "testing.h"

using namespace poot;

using testing::parse;

TEST_CASE("cleanup keeps what reaches an output, a state or a validation") {
  Graph g = parse(
      "graph g\n"
      "state %kv : f32[4]\n"
      "input %x : f32[4]\n"
      "input %len : i32[1]\n"
      "%a = Neg(%x) : f32[4]\n"
      "%dead1 = Exp(%a) : f32[4]\n"
      "%dead2 = Log(%dead1) : f32[4]\n"
      "%n = Add(%kv, %a) : f32[4]\n"
      "%l, %ok = IndexGuard(%len) {lo=1, hi=4} : i32[1], bool[]\n"
      "%y = Exp(%x) : f32[4]\n"
      "output %y\n"
      "state_out %kv = %n\n"
      "validation %ok\n");
  PassContext ctx;
  auto changed = runCleanup(g, ctx);
  REQUIRE(bool(changed));
  CHECK(*changed);
  CHECK(bool(verify(g)));
  CHECK(printGraph(g) ==
        "graph g\n"
        "state %kv : f32[4]\n"
        "input %x : f32[4]\n"
        "input %len : i32[1]\n"
        "%a = Neg(%x) : f32[4]\n"
        "%n = Add(%kv, %a) : f32[4]\n"
        "%l, %ok = IndexGuard(%len) {lo=1, hi=4} : i32[1], bool[]\n"
        "%y = Exp(%x) : f32[4]\n"
        "output %y\n"
        "state_out %kv = %n\n"
        "validation %ok\n");
  auto again = runCleanup(g, ctx);
  REQUIRE(bool(again));
  CHECK_FALSE(*again);
}

TEST_CASE("the pipeline reports each pass and stops where asked") {
  Graph g = parse("graph g\ninput %x : f32[4]\n%d = Neg(%x) : f32[4]\n%y = Exp(%x) : f32[4]\noutput %y\n");
  std::vector<std::string> ran;
  PipelineOptions opts;
  opts.stopAfter = pipeline().front().name;
  opts.afterPass = [&](const Pass& p, const Graph&, bool) { ran.push_back(p.name); };
  PassContext ctx;
  REQUIRE(bool(runPipeline(g, ctx, opts)));
  CHECK(ran == std::vector<std::string>{pipeline().front().name});
  CHECK(findPass("cleanup") != nullptr);
  CHECK(findPass("nosuch") == nullptr);
}

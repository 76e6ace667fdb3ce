// Unit tests of the pass pipeline, the cleanup pass (dead eqns go, live
// ones, outputs, state updates, validation witnesses and what feeds them,
// stay), matmul-operands and guards-first; the pipeline honours stopAfter
// and reports every pass it ran.
#include <doctest/doctest.h>

#include "ir/text.h"
#include "passes/pass.h"
#include "passes/rewrite.h"
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

TEST_CASE("matmul-operands folds weight transposes and widening converts without changing results") {
  const char* text =
      "graph g\n"
      "input %x : f32[2,3,8]\n"
      "weight %w : f32[16,8]\n"
      "weight %wb : bf16[8,16]\n"
      "input %q : f32[2,4,3,8]\n"
      "input %k : f32[2,4,5,8]\n"
      "%wt = Transpose(%w) {perm=[1, 0]} : f32[8,16]\n"
      "%y1 = MatMul(%x, %wt) : f32[2,3,16]\n"
      "%wbt = Transpose(%wb) {perm=[1, 0]} : bf16[16,8]\n"
      "%wbf = Convert(%wbt) : f32[16,8]\n"
      "%y2 = MatMul(%y1, %wbf) : f32[2,3,8]\n"
      "%kt = Transpose(%k) {perm=[0, 1, 3, 2]} : f32[2,4,8,5]\n"
      "%y3 = MatMul(%q, %kt) : f32[2,4,3,5]\n"
      "output %y2\n"
      "output %y3\n";
  Graph g = parse(text);
  PassContext ctx;
  auto changed = runMatMulOperands(g, ctx);
  REQUIRE(bool(changed));
  CHECK(*changed);
  CHECK(eraseDeadEqns(g));
  REQUIRE(bool(verify(g)));
  // The products of a weight read x's 2 x 3 rows as one [6, 8] matrix (a
  // view in, a view out; the second product reads the first's rows
  // directly); the batched q k product keeps its batch.
  std::vector<Op> order;
  for (const Eqn& e : g.eqns) {
    order.push_back(e.op);
    if (e.op == Op::MatMul) CHECK(flagAttr(e.attrs, "transpose_b"));
  }
  REQUIRE(order == std::vector<Op>{Op::Reshape, Op::MatMul, Op::MatMul, Op::Reshape, Op::MatMul});
  CHECK(g.type(g.eqns[1].results[0]) == testing::ty("f32[6,16]"));
  CHECK(g.eqns[2].operands[0] == g.eqns[1].results[0]);
  CHECK(g.type(g.eqns[2].operands[1]).dtype == DType::BF16);
  CHECK(g.type(g.eqns[4].results[0]) == testing::ty("f32[2,4,3,5]"));
  // The same sums in the same order: bit for bit.
  testing::checkSameResults(parse(text), g, testing::freshSeed(), testing::relativeToBefore(0));
  auto again = runMatMulOperands(g, ctx);
  REQUIRE(bool(again));
  CHECK_FALSE(*again);
  CHECK(ctx.remarks.empty());
}

TEST_CASE("guards-first moves each guard and its cone ahead of every state write") {
  const char* text =
      "graph g\n"
      "state %kv : f32[4]\n"
      "input %x : f32[4]\n"
      "slot %pos : i32[1] range [0, 3]\n"
      "%n = Add(%kv, %x) : f32[4]\n"
      "%one = Constant() {value=[1]} : i32[1]\n"
      "%len = Add(%pos, %one) : i32[1]\n"
      "%l, %ok = IndexGuard(%len) {lo=1, hi=4} : i32[1], bool[]\n"
      "%y = Exp(%x) : f32[4]\n"
      "output %y\n"
      "state_out %kv = %n\n"
      "validation %ok\n";
  Graph g = parse(text);
  PassContext ctx;
  auto changed = runGuardsFirst(g, ctx);
  REQUIRE(bool(changed));
  CHECK(*changed);
  REQUIRE(bool(verify(g)));
  std::vector<Op> order;
  for (const Eqn& e : g.eqns) order.push_back(e.op);
  CHECK(order == std::vector<Op>{Op::Constant, Op::Add, Op::IndexGuard, Op::Add, Op::Exp});
  CHECK(g.value(g.eqns[1].results[0]).name == "len");
  testing::checkSameResults(parse(text), g, testing::freshSeed(), testing::relativeToBefore(0));
  auto again = runGuardsFirst(g, ctx);
  REQUIRE(bool(again));
  CHECK_FALSE(*again);
}

TEST_CASE("guards-first leaves a guard whose cone writes a state") {
  Graph g = parse(
      "graph g\n"
      "state %kv : i32[4]\n"
      "input %x : i32[4]\n"
      "%r = Neg(%kv) : i32[4]\n"
      "%n = Add(%kv, %x) : i32[4]\n"
      "%l, %ok = IndexGuard(%n) {lo=0, hi=9} : i32[4], bool[]\n"
      "output %r\n"
      "state_out %kv = %n\n"
      "validation %ok\n");
  PassContext ctx;
  auto changed = runGuardsFirst(g, ctx);
  REQUIRE(bool(changed));
  CHECK_FALSE(*changed);
  CHECK(g.eqns[0].op == Op::Neg);
}

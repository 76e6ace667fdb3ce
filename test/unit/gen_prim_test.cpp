// The primitive generators (elementwise, reduce, matmul, rows, guard) against
// the oracle: one-eqn graphs planned for lavapipe (plus bf16 storage), their
// kernels generated as KIR and run on the KIR interpreter (kir_plan.h), on
// fresh random parameters (and hand-picked ones where the edge cases matter:
// NaN, infinities, ties, -1 indices, saturating conversions, negative
// divisors). Data movement, integer, bool and compare results must be equal;
// float arithmetic within 1e-6 relative to the larger value, transcendental
// functions within 1e-5 (one ulp, 1e-3, for f16 results of them). Then whole
// tiny model graphs (as traced, after the rope pass, and fully compiled when
// no attention op remains) run the same way, within 1e-4.
#include <cmath>
#include <cstring>
#include <limits>

#include "codegen/gen/generators.h"
#include "engine/sample.h"
#include "kir_plan.h"
#include "vulkan_plan.h"
#include "passes/pass.h"
#include "plan/schedule.h"
#include "testing.h"
#include "trace/model.h"

namespace poot {
namespace {

using testing::relativeToLarger;
using testing::Tolerance;

// Exact: integers and bools byte for byte; floats bit for bit, any NaN
// matching any NaN (checkClose cannot: inf - inf is NaN).
const Tolerance kExact = relativeToLarger(0);
const Tolerance kArith = relativeToLarger(1e-6);
const Tolerance kTrans = relativeToLarger(1e-5);
// A two-byte result of an approximated function (Builder::erf) may round to
// the neighbouring f16 value: one f16 ulp.
const Tolerance kHalfUlp = relativeToLarger(1e-3);

void checkSame(const std::string& what, const Tensor& want, const Tensor& got, Tolerance tol) {
  if (tol.tol != 0) return testing::checkClose(what, want, got, tol);
  REQUIRE_MESSAGE(got.type == want.type, what);
  if (!isFloat(want.dtype())) {
    CHECK_MESSAGE(got.bytes == want.bytes, what);
    return;
  }
  int64_t bad = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    double w = want.get(i), g = got.get(i);
    bool same = std::isnan(w) ? std::isnan(g) : std::memcmp(&w, &g, sizeof w) == 0;
    if (!same && ++bad <= 3) FAIL_CHECK(what << " element " << i << ": " << g << " vs " << w);
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " elements differ");
}

// Lavapipe, with bf16 storage as well: a bf16 kernel is integer arithmetic
// around f32 (the Builder's lowering), which the interpreter runs like any
// other; lavapipe itself lists no bf16.
const DeviceProfile& device() {
  static const DeviceProfile d = [] {
    DeviceProfile p = testing::loadTarget("lavapipe");
    p.bf16 = p.f16;
    return p;
  }();
  return d;
}

// A tensor of `type` holding `vals` (converted as the oracle stores them).
Tensor tensorOf(const std::string& type, const std::vector<double>& vals) {
  Tensor t(testing::ty(type));
  REQUIRE(int64_t(vals.size()) == t.size());
  for (size_t i = 0; i < vals.size(); ++i) t.set(int64_t(i), vals[i]);
  return t;
}

// Runs graph `text` on the oracle and on the generated kernels, on the KIR
// interpreter and on lavapipe through the runtime, with the same parameters
// (`given`, the rest drawn from a fresh seed) and compares every output,
// state and validation. On lavapipe a failed witness fails the step and
// publishes nothing. A GPU's exp, log and friends have an absolute error
// bound where the result is near zero (Vulkan allows log 2^-21 absolute
// around 1), so on lavapipe an inexact tolerance tol applies as
// |got - want| <= tol * (1 + |want|); exact stays exact.
void checkGraph(const Graph& g, Tolerance tol, std::map<std::string, Tensor> given = {}) {
  uint64_t seed = testing::freshSeed();
  CAPTURE(seed);
  auto params = completeParams(g, std::move(given), seed);
  auto want = evaluate(g, params);
  REQUIRE_MESSAGE(bool(want), (want ? "" : want.error().str()));
  auto compare = [&](const char* kind, const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
    REQUIRE(a.size() == b.size());
    for (const auto& [name, t] : a) {
      REQUIRE_MESSAGE(b.count(name), kind << " " << name);
      checkSame(std::string(kind) + " " + name, t, b.at(name), tol);
    }
  };
  auto kir = testing::runOnKir(g, device(), params);
  REQUIRE_MESSAGE(bool(kir), (kir ? "" : kir.error().str()));
  CHECK(want->validations == kir->validations);
  compare("kir output", want->outputs, kir->outputs);
  compare("kir state", want->states, kir->states);
  auto vulkan = testing::runOnVulkan(g, device(), params);
  if (!want->valid()) {
    REQUIRE_FALSE(vulkan);
    CHECK(vulkan.error().message.find("validation failed") != std::string::npos);
    return;
  }
  REQUIRE_MESSAGE(bool(vulkan), (vulkan ? "" : vulkan.error().str()));
  if (tol.tol != 0) tol = testing::relativeToBefore(tol.tol);
  compare("lavapipe output", want->outputs, vulkan->outputs);
  compare("lavapipe state", want->states, vulkan->states);
}

void check(const std::string& text, Tolerance tol, std::map<std::string, Tensor> given = {}) {
  CAPTURE(text);
  checkGraph(testing::parse(text), tol, std::move(given));
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

TEST_CASE("gen: creation ops") {
  check("graph g\n%r = Iota() {axis=-2} : f32[3,5,7]\noutput %r\n", kExact);
  check("graph g\n%r = Iota() {axis=0} : i64[4,3]\noutput %r\n", kExact);
  check("graph g\n%r = Iota() {axis=2} : bf16[2,3,300]\noutput %r\n", kExact);
  check("graph g\n%r = Constant() {value=[0.1]} : f16[5,70]\noutput %r\n", kExact);
  check("graph g\n%r = Constant() {value=[0.1, 2, 2, 2, -3.5, 1e-30, 7]} : bf16[7]\noutput %r\n", kExact);
  check("graph g\n%r = Constant() {value=[0.1, 2, 2, 2, -3.5, 1e-30]} : f32[2,3]\noutput %r\n", kExact);
  check("graph g\n%r = Constant() {value=[5, -9007199254740993, 1, 1, 0]} : i64[5]\noutput %r\n", kExact);
  check("graph g\n%r = Constant() {value=[1, 0, 0, 1]} : bool[2,2]\noutput %r\n", kExact);
  check("graph g\n%r = Constant() {value=[-4]} : i32[]\noutput %r\n", kExact);
}

TEST_CASE("gen: data movement") {
  check("graph g\ninput %x : f32[6,5]\n%r = Reshape(%x) : f32[3,10]\n%n = Neg(%r) : f32[3,10]\noutput %n\n", kExact);
  check("graph g\ninput %x : f32[3,1,5]\n%r = Broadcast(%x) : f32[2,3,4,5]\noutput %r\n", kExact);
  check("graph g\ninput %x : bool[1,7]\n%r = Broadcast(%x) : bool[3,7]\noutput %r\n", kExact);
  check("graph g\ninput %x : bf16[2,3,4,5]\n%r = Transpose(%x) {perm=[2, 0, 3, 1]} : bf16[4,2,5,3]\noutput %r\n",
        kExact);
  check("graph g\ninput %x : i64[3,4,9]\n%r = Slice(%x) {axis=-1, start=2, limit=7} : i64[3,4,5]\noutput %r\n", kExact);
  check("graph g\ninput %x : f16[2,3,5]\ninput %y : f16[2,1,5]\ninput %z : f16[2,4,5]\n"
        "%r = Concat(%x, %y, %z) {axis=1} : f16[2,8,5]\noutput %r\n",
        kExact);
  check("graph g\ninput %x : i32[3,2]\ninput %y : i32[3,5]\n%r = Concat(%x, %y) {axis=-1} : i32[3,7]\noutput %r\n",
        kExact);
  check("graph g\ninput %t : f32[10,6]\ninput %i : i32[3,4]\n%r = Gather(%t, %i) {axis=0} : f32[3,4,6]\noutput %r\n",
        kExact);
  check("graph g\ninput %t : bf16[3,7,5]\ninput %i : i64[4]\n%r = Gather(%t, %i) {axis=-2} : bf16[3,4,5]\noutput %r\n",
        kExact);
  for (int64_t pos : {0, 3, 17}) {  // 17 is clamped to 5
    check("graph g\ninput %x : f32[2,9,3]\nslot %p : i32[] range [0, 20]\n"
          "%r = DynamicSlice(%x, %p) {axis=1, size=4} : f32[2,4,3]\noutput %r\n",
          kExact, {{"p", tensorOf("i32[]", {double(pos)})}});
  }
  check("graph g\ninput %x : i64[300]\nslot %p : i64[1] range [0, 299]\n"
        "%r = DynamicSlice(%x, %p) {axis=0, size=257} : i64[257]\noutput %r\n",
        kExact);
}

TEST_CASE("gen: updates in place") {
  // The new value of a state is written over the state's own buffer.
  for (int64_t pos : {0, 4, 8}) {  // 8 is clamped to 5
    check("graph g\nstate %s : f32[2,9,3]\ninput %u : f32[2,4,3]\nslot %p : i32[] range [0, 8]\n"
          "%n = DynamicUpdateSlice(%s, %u, %p) {axis=1} : f32[2,9,3]\n%o = Neg(%n) : f32[2,9,3]\n"
          "output %o\nstate_out %s = %n\n",
          kExact, {{"p", tensorOf("i32[]", {double(pos)})}});
  }
  check("graph g\nstate %s : bf16[7,5]\ninput %u : bf16[7,2]\nslot %p : i64[] range [0, 3]\n"
        "%n = DynamicUpdateSlice(%s, %u, %p) {axis=-1} : bf16[7,5]\n%o = Neg(%u) : bf16[7,2]\n"
        "output %o\nstate_out %s = %n\n",
        kExact);
  // A fused kernel computes the update and writes it in place, one thread
  // an element of it: a chain of an index map, a broadcast and arithmetic
  // (one of them also an output, stored at its own index), and a start
  // read from an input, clamped.
  for (int64_t pos : {0, 3, 7})  // 7 is clamped to 5
    check("graph g\nstate %s : f32[2,9,3]\ninput %x : f32[2,3,4]\ninput %w : f32[3]\ninput %p : i32[]\n"
          "%t = Transpose(%x) {perm=[0, 2, 1], fusion=0} : f32[2,4,3]\n%m = Mul(%t, %w) {fusion=0} : f32[2,4,3]\n"
          "%u = Neg(%m) {fusion=0} : f32[2,4,3]\n%n = DynamicUpdateSlice(%s, %u, %p) {axis=1, fusion=0} : f32[2,9,3]\n"
          "%o = Neg(%n) : f32[2,9,3]\noutput %o\noutput %m\nstate_out %s = %n\n",
          kExact, {{"p", tensorOf("i32[]", {double(pos)})}});
  // -1 skips, a repeated index takes the later row.
  check("graph g\nstate %s : f32[6,4]\ninput %i : i32[5]\ninput %u : f32[5,4]\n"
        "%n = ScatterUpdate(%s, %i, %u) : f32[6,4]\n%o = Neg(%u) : f32[5,4]\noutput %o\nstate_out %s = %n\n",
        kExact, {{"i", tensorOf("i32[5]", {2, -1, 5, 2, 0})}});
  check("graph g\ninput %x : i64[5,2,3]\ninput %i : i64[3]\ninput %u : i64[3,2,3]\n"
        "%n = ScatterUpdate(%x, %i, %u) : i64[5,2,3]\noutput %n\n",
        kExact, {{"i", tensorOf("i64[3]", {-1, 4, -1})}});
}

TEST_CASE("gen: convert") {
  std::vector<double> edge = {kNaN, kInf, -kInf, 3e9, -3e9, -2.7, 2.5, 1e20, -0.0, 65504, 70000, 1e-8};
  const char* froms[] = {"f32", "f16", "bf16"};
  for (const char* from : froms)
    for (const char* to : {"f32", "f16", "bf16", "i32", "i64", "bool"}) {
      std::string text = std::string("graph g\ninput %x : ") + from + "[12]\n%r = Convert(%x) : " + to +
                         "[12]\noutput %r\n";
      check(text, kExact, {{"x", tensorOf(std::string(from) + "[12]", edge)}});
    }
  std::vector<double> ints = {0, 1, -1, 2147483647, -2147483648, 16777217, -5, 7, 0, 3, 100000, -100000};
  for (const char* from : {"i32", "i64"})
    for (const char* to : {"f32", "f16", "bf16", "i32", "i64", "bool"}) {
      std::string text = std::string("graph g\ninput %x : ") + from + "[12]\n%r = Convert(%x) : " + to +
                         "[12]\noutput %r\n";
      check(text, kExact, {{"x", tensorOf(std::string(from) + "[12]", ints)}});
    }
  Tensor big(testing::ty("i64[3]"));
  int64_t bigs[] = {int64_t(1) << 40 | 5, -(int64_t(1) << 33) - 7, INT64_MIN};
  std::memcpy(big.bytes.data(), bigs, sizeof bigs);
  check("graph g\ninput %x : i64[3]\n%r = Convert(%x) : i32[3]\noutput %r\n", kExact, {{"x", big}});
  check("graph g\ninput %x : i64[3]\n%r = Convert(%x) : f32[3]\noutput %r\n", kExact, {{"x", big}});
  for (const char* to : {"f32", "bf16", "i32", "i64"})
    check(std::string("graph g\ninput %x : bool[9]\n%r = Convert(%x) : ") + to + "[9]\noutput %r\n", kExact);
}

TEST_CASE("gen: unary") {
  for (const char* op : {"Neg", "Abs"}) {
    check(std::string("graph g\ninput %x : f32[5,61]\n%r = ") + op + "(%x) : f32[5,61]\noutput %r\n", kExact);
    check(std::string("graph g\ninput %x : i64[4]\n%r = ") + op + "(%x) : i64[4]\noutput %r\n", kExact,
          {{"x", tensorOf("i64[4]", {-3, 0, 5, -9e15})}});
    check(std::string("graph g\ninput %x : i32[4]\n%r = ") + op + "(%x) : i32[4]\noutput %r\n", kExact,
          {{"x", tensorOf("i32[4]", {-3, 0, 5, -2147483648.0})}});
  }
  check("graph g\ninput %x : bool[3,5]\n%r = Not(%x) : bool[3,5]\noutput %r\n", kExact);
  for (const char* op : {"Sqrt", "Rsqrt", "Recip"})
    check(std::string("graph g\ninput %x : f32[5,61]\n%r = ") + op + "(%x) : f32[5,61]\noutput %r\n", kArith);
  for (const char* op : {"Exp", "Log", "Tanh", "Sin", "Cos", "Erf", "Sigmoid"}) {
    check(std::string("graph g\ninput %x : f32[5,61]\n%r = ") + op + "(%x) : f32[5,61]\noutput %r\n", kTrans);
    check(std::string("graph g\ninput %x : f16[3,7]\n%r = ") + op + "(%x) : f16[3,7]\noutput %r\n", kHalfUlp);
  }
}

TEST_CASE("gen: binary and compare with broadcasting") {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    check(std::string("graph g\ninput %a : f32[3,1,5]\ninput %b : f32[4,5]\n%r = ") + op +
              "(%a, %b) : f32[3,4,5]\noutput %r\n",
          kArith);
    check(std::string("graph g\ninput %a : bf16[7]\ninput %b : bf16[2,1]\n%r = ") + op +
              "(%a, %b) : bf16[2,7]\noutput %r\n",
          kArith);
    check(std::string("graph g\ninput %a : f16[]\ninput %b : f16[3,2]\n%r = ") + op +
              "(%a, %b) : f16[3,2]\noutput %r\n",
          kArith);
    check(std::string("graph g\ninput %a : i64[2,3]\ninput %b : i64[3]\n%r = ") + op +
              "(%a, %b) : i64[2,3]\noutput %r\n",
          kExact, {{"a", tensorOf("i64[2,3]", {7, -7, 9e15, -9, 1, 0})}, {"b", tensorOf("i64[3]", {2, -1, 4})}});
    check(std::string("graph g\ninput %a : i32[4]\ninput %b : i32[4]\n%r = ") + op + "(%a, %b) : i32[4]\noutput %r\n",
          kExact,
          {{"a", tensorOf("i32[4]", {-2147483648.0, 7, -7, 2147483647})}, {"b", tensorOf("i32[4]", {-1, 2, 2, 3})}});
  }
  // NaN propagates through Max and Min from either side.
  for (const char* op : {"Max", "Min"})
    check(std::string("graph g\ninput %a : f32[4]\ninput %b : f32[4]\n%r = ") + op + "(%a, %b) : f32[4]\noutput %r\n",
          kExact, {{"a", tensorOf("f32[4]", {kNaN, 1, kNaN, -0.0})}, {"b", tensorOf("f32[4]", {1, kNaN, kNaN, 0.0})}});
  check("graph g\ninput %a : f32[3,4]\ninput %b : f32[4]\n%p = Abs(%a) : f32[3,4]\n%r = Pow(%p, %b) : f32[3,4]\n"
        "output %r\n",
        kTrans);
  // std::pow's special cases: a negative base with an integral exponent (odd
  // and even), with a fractional one (NaN), zero bases, y == 0 and x == 1.
  const double kInfinity = std::numeric_limits<double>::infinity();
  check("graph g\ninput %a : f32[10]\ninput %b : f32[10]\n%r = Pow(%a, %b) : f32[10]\noutput %r\n", kTrans,
        {{"a", tensorOf("f32[10]", {-2, -2, -1.5, -3, 0, 0, kNaN, 1, -kInfinity, 2.5})},
         {"b", tensorOf("f32[10]", {2, 3, -2, 0.5, 2, -1, 0, kNaN, 3, -1.5})}});
  for (const char* op : {"And", "Or", "Eq", "Ne"})
    check(std::string("graph g\ninput %a : bool[3,1]\ninput %b : bool[1,6]\n%r = ") + op +
              "(%a, %b) : bool[3,6]\noutput %r\n",
          kExact);
  for (const char* op : {"Lt", "Le", "Gt", "Ge", "Eq", "Ne"}) {
    check(std::string("graph g\ninput %a : f32[5]\ninput %b : f32[5]\n%r = ") + op + "(%a, %b) : bool[5]\noutput %r\n",
          kExact,
          {{"a", tensorOf("f32[5]", {kNaN, 1, 2, 3, kNaN})}, {"b", tensorOf("f32[5]", {1, kNaN, 2, 1, kNaN})}});
    check(std::string("graph g\ninput %a : i64[2,1,3]\ninput %b : i64[4,1]\n%r = ") + op +
              "(%a, %b) : bool[2,4,3]\noutput %r\n",
          kExact);
    check(std::string("graph g\ninput %a : bf16[9]\ninput %b : bf16[]\n%r = ") + op + "(%a, %b) : bool[9]\noutput %r\n",
          kExact);
  }
  check("graph g\ninput %c : bool[4,1]\ninput %a : f32[1,5]\ninput %b : f32[4,5]\n"
        "%r = Select(%c, %a, %b) : f32[4,5]\noutput %r\n",
        kExact);
  check("graph g\ninput %c : bool[]\ninput %a : i64[3]\ninput %b : i64[2,3]\n"
        "%r = Select(%c, %a, %b) : i64[2,3]\noutput %r\n",
        kExact);
  check("graph g\ninput %c : bool[2,3]\ninput %a : bool[3]\ninput %b : bool[2,1]\n"
        "%r = Select(%c, %a, %b) : bool[2,3]\noutput %r\n",
        kExact);
}

TEST_CASE("gen: rope") {
  for (const char* style : {"half", "interleaved"}) {
    check(std::string("graph g\ninput %x : f32[1,2,3,8]\ninput %c : f32[3,4]\ninput %s : f32[3,4]\n"
                      "%r = Rope(%x, %c, %s) {style=") +
              style + "} : f32[1,2,3,8]\noutput %r\n",
          kArith);
    check(std::string("graph g\ninput %x : f16[2,3,6]\ninput %c : f16[2,1,3]\ninput %s : f16[2,1,3]\n"
                      "%r = Rope(%x, %c, %s) {style=") +
              style + "} : f16[2,3,6]\noutput %r\n",
          kArith);
  }
}

TEST_CASE("gen: reductions") {
  for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin"}) {
    for (const char* axis : {"0", "1", "-1"})
      for (bool keep : {true, false}) {
        std::string type = keep ? (std::string(axis) == "0" ? "[1,5,7]" : std::string(axis) == "1" ? "[3,1,7]" : "[3,5,1]")
                                : (std::string(axis) == "0" ? "[5,7]" : std::string(axis) == "1" ? "[3,7]" : "[3,5]");
        std::string attrs = std::string(" {axis=") + axis + ", keepdim=" + (keep ? "true" : "false") + "}";
        check(std::string("graph g\ninput %x : f32[3,5,7]\n%r = ") + op + "(%x)" + attrs + " : f32" + type +
                  "\noutput %r\n",
              kArith);
        check(std::string("graph g\ninput %x : i64[3,5,7]\n%r = ") + op + "(%x)" + attrs + " : i64" + type +
                  "\noutput %r\n",
              kExact);
      }
    check(std::string("graph g\ninput %x : bf16[300]\n%r = ") + op + "(%x) {axis=0, keepdim=false} : bf16[]\noutput %r\n",
          kArith);
    check(std::string("graph g\ninput %x : f32[2,4]\n%r = ") + op + "(%x) {axis=1, keepdim=false} : f32[2]\noutput %r\n",
          kExact, {{"x", tensorOf("f32[2,4]", {1, kNaN, 3, 2, 5, 4, 6, kNaN})}});
  }
  // An axis past llvmpipe's 65535 loop iterations a shader invocation (a
  // loop a thread over it gave a partial sum there), in the oracle's order
  // still: exact. Along an inner axis too (stride 3).
  check("graph g\ninput %x : i32[2,70001]\n%r = ReduceSum(%x) {axis=1, keepdim=false} : i32[2]\noutput %r\n", kExact);
  check("graph g\ninput %x : f32[70001,3]\n%r = ReduceSum(%x) {axis=0, keepdim=false} : f32[3]\noutput %r\n",
        kExact);
}

// Fusion groups (ir/fusion.h) as fused kernels. Row lengths 3, 1000 and
// 4097 leave the last round of a row's threads partly idle; the sums of a
// row reassociate (fused.cpp bounds them by (n / W + log2 W) * 2^-24 *
// sum |x|), which 1e-5 relative to the larger value holds for sums of
// squares and, after normalizing, for centred rows.
TEST_CASE("gen: fused kernels") {
  const Tolerance kRows = relativeToLarger(1e-5);
  auto rmsNorm = [](int64_t rows, int64_t n) {
    std::string s = "[" + std::to_string(rows) + "," + std::to_string(n) + "]", r = "[" + std::to_string(rows) + ",1]";
    return "graph g\ninput %x : f32" + s + "\ninput %o : f32" + s + "\ninput %w : f32[" + std::to_string(n) +
           "]\n%h = Add(%x, %o) {fusion=0} : f32" + s + "\n%sq = Mul(%h, %h) {fusion=0} : f32" + s +
           "\n%ss = ReduceSum(%sq) {axis=-1, keepdim=true, fusion=0} : f32" + r +
           "\n%n = Constant() {value=[" + std::to_string(n) + "], fusion=0} : f32[]\n%m = Div(%ss, %n) {fusion=0} : f32" + r +
           "\n%e = Constant() {value=[1e-05], fusion=0} : f32[]\n%a = Add(%m, %e) {fusion=0} : f32" + r +
           "\n%q = Rsqrt(%a) {fusion=0} : f32" + r + "\n%y = Mul(%h, %q) {fusion=0} : f32" + s +
           "\n%z = Mul(%y, %w) {fusion=0} : f32" + s + "\noutput %z\noutput %h\noutput %q\n";
  };
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{5, 1000}, {3, 3}, {2, 4097}}) check(rmsNorm(rows, n), kRows);
  // Softmax: a max, then a sum of exp(x - max) computed from it.
  check("graph g\ninput %x : f32[2,3,77]\n"
        "%mx = ReduceMax(%x) {axis=-1, keepdim=true, fusion=4} : f32[2,3,1]\n"
        "%d = Sub(%x, %mx) {fusion=4} : f32[2,3,77]\n%ex = Exp(%d) {fusion=4} : f32[2,3,77]\n"
        "%sm = ReduceSum(%ex) {axis=-1, keepdim=true, fusion=4} : f32[2,3,1]\n"
        "%p = Div(%ex, %sm) {fusion=4} : f32[2,3,77]\noutput %p\n",
        kRows);
  // NaN stays sticky through the tree; a row of -0.0 sums to -0.0.
  check("graph g\ninput %x : f32[2,300]\n%mx = ReduceMax(%x) {axis=-1, keepdim=true, fusion=0} : f32[2,1]\n"
        "%sm = ReduceSum(%x) {axis=-1, keepdim=true, fusion=0} : f32[2,1]\n%r = Add(%mx, %sm) {fusion=0} : f32[2,1]\n"
        "output %r\noutput %sm\n",
        kExact, {{"x", [] {
          Tensor t(testing::ty("f32[2,300]"));
          for (int64_t i = 0; i < 300; ++i) t.set(i, i == 123 ? kNaN : -0.0);
          for (int64_t i = 300; i < 600; ++i) t.set(i, -0.0);
          return t;
        }()}});
  // Integer rows wrap in their own width and agree exactly.
  check("graph g\ninput %x : i32[4,999]\n%s = ReduceSum(%x) {axis=-1, keepdim=true, fusion=0} : i32[4,1]\n"
        "%mn = ReduceMin(%x) {axis=-1, keepdim=true, fusion=0} : i32[4,1]\n%r = Sub(%x, %mn) {fusion=0} : i32[4,999]\n"
        "output %s\noutput %r\n",
        kExact, {{"x", [] {
          Tensor t(testing::ty("i32[4,999]"));
          for (int64_t i = 0; i < t.size(); ++i) t.set(i, double((i * 2654435761LL) % 2147483647 - 1073741823));
          return t;
        }()}});
  // A flat group: index maps, an iota and a constant list, integer and bool
  // steps, a select, conversions, two outputs of the root's shape.
  check("graph g\ninput %x : f32[3,4,5]\ninput %k : i32[5]\n"
        "%t = Transpose(%x) {perm=[2, 0, 1], fusion=2} : f32[5,3,4]\n%r = Reshape(%t) {fusion=2} : f32[5,12]\n"
        "%i = Iota() {axis=1, fusion=2} : i32[5,12]\n%c = Constant() {value=[3, -1, 4, 1, 5]} : i32[5]\n"
        "%kb = Broadcast(%k) {fusion=2} : i32[12,5]\n%kt = Transpose(%kb) {perm=[1, 0], fusion=2} : i32[5,12]\n"
        "%ik = Mul(%i, %kt) {fusion=2} : i32[5,12]\n%lt = Lt(%ik, %i) {fusion=2} : bool[5,12]\n"
        "%f = Convert(%ik) {fusion=2} : f32[5,12]\n%s = Select(%lt, %r, %f) {fusion=2} : f32[5,12]\n"
        "%e = Exp(%s) {fusion=2} : f32[5,12]\n%b = Convert(%lt) {fusion=2} : i64[5,12]\noutput %e\noutput %b\n"
        "output %c\n",
        kTrans);
  // Two-byte members: each rounds its result where the oracle does, so a
  // bf16 residual add, an f32 norm between Converts, a bf16 weight multiply
  // and an f16 softmax row agree with the oracle bit for bit but for the
  // f32 partial sums' order (a rounding boundary, 2^-8 or 2^-11 of a value).
  for (const char* dt : {"bf16", "f16"}) {
    std::string t = dt, s = "[3,77]", r = "[3,1]";
    check("graph g\ninput %x : " + t + s + "\ninput %o : " + t + s + "\ninput %w : " + t + "[77]\n"
          "%h = Add(%x, %o) {fusion=0} : " + t + s + "\n%hf = Convert(%h) {fusion=0} : f32" + s +
          "\n%sq = Mul(%hf, %hf) {fusion=0} : f32" + s + "\n%ss = ReduceSum(%sq) {axis=-1, keepdim=true, fusion=0} : f32" + r +
          "\n%q = Rsqrt(%ss) {fusion=0} : f32" + r + "\n%y = Mul(%hf, %q) {fusion=0} : f32" + s +
          "\n%yn = Convert(%y) {fusion=0} : " + t + s + "\n%z = Mul(%yn, %w) {fusion=0} : " + t + s +
          "\noutput %z\noutput %h\n",
          relativeToLarger(t == "bf16" ? 1.0 / 128 : 1.0 / 1024));
    check("graph g\ninput %x : " + t + "[2,3,77]\n"
          "%mx = ReduceMax(%x) {axis=-1, keepdim=true, fusion=4} : " + t + "[2,3,1]\n"
          "%d = Sub(%x, %mx) {fusion=4} : " + t + "[2,3,77]\n%ex = Exp(%d) {fusion=4} : " + t + "[2,3,77]\n"
          "%sm = ReduceSum(%ex) {axis=-1, keepdim=true, fusion=4} : " + t + "[2,3,1]\n"
          "%p = Div(%ex, %sm) {fusion=4} : " + t + "[2,3,77]\noutput %p\n",
          relativeToLarger(t == "bf16" ? 1.0 / 128 : 1.0 / 1024));
  }
  // Without a sum or a function, a two-byte chain is bit for bit the oracle's:
  // its constants are the dtype's values (0.1 is not one) and every step
  // rounds where the oracle's does.
  for (const char* dt : {"bf16", "f16"}) {
    std::string t = dt;
    check("graph g\ninput %x : " + t + "[5,33]\ninput %y : " + t + "[5,33]\n"
          "%c = Constant() {value=[0.1], fusion=1} : " + t + "[]\n%m = Mul(%x, %c) {fusion=1} : " + t + "[5,33]\n"
          "%a = Add(%m, %y) {fusion=1} : " + t + "[5,33]\n%d = Div(%a, %x) {fusion=1} : " + t + "[5,33]\n"
          "output %d\n",
          kExact);
  }
  // Rope with its tables computed from a slot, as the fuse pass forms it.
  for (int64_t pos : {0, 7})
    check("graph g\ninput %x : f32[1,6,8]\nslot %p : i32[] range [0, 9]\n"
          "%t = Reshape(%x) {fusion=0} : f32[1,6,1,8]\n%q = Transpose(%t) {perm=[0, 2, 1, 3], fusion=0} : f32[1,1,6,8]\n"
          "%i = Iota() {axis=0, fusion=0} : i32[1]\n%a = Add(%i, %p) {fusion=0} : i32[1]\n"
          "%af = Convert(%a) {fusion=0} : f32[1]\n%ar = Reshape(%af) {fusion=0} : f32[1,1]\n"
          "%fr = Constant() {value=[1, 0.1, 0.01, 0.001], fusion=0} : f32[1,4]\n%m = Mul(%ar, %fr) {fusion=0} : f32[1,4]\n"
          "%co = Cos(%m) {fusion=0} : f32[1,4]\n%si = Sin(%m) {fusion=0} : f32[1,4]\n"
          "%r = Rope(%q, %co, %si) {style=half, fusion=0} : f32[1,1,6,8]\noutput %r\n",
          kTrans, {{"p", tensorOf("i32[]", {double(pos)})}});
}

// A tagged graph that breaks a rule is refused by the verifier, naming the
// group and the rule.
TEST_CASE("gen: fusion groups keep their rules") {
  auto refused = [](const std::string& text, const std::string& why) {
    CAPTURE(text);
    auto s = verify(testing::parseUnverified(text));
    REQUIRE_FALSE(s);
    CHECK_MESSAGE(s.error().message.find(why) != std::string::npos, s.error().message);
  };
  refused("graph g\ninput %x : f32[4,6]\n%s = ReduceSum(%x) {axis=0, keepdim=true, fusion=0} : f32[1,6]\n"
          "%y = Mul(%x, %s) {fusion=0} : f32[4,6]\noutput %y\n",
          "fusion group 0: a fused reduction reduces the last axis with keepdim");
  refused("graph g\ninput %x : f32[4]\n%a = Neg(%x) {fusion=0} : f32[4]\n%b = Exp(%a) : f32[4]\n"
          "%c = Mul(%a, %x) {fusion=0} : f32[4]\noutput %b\noutput %c\n",
          "fusion group 0: %a is read here, before the group's root %c runs");
  refused("graph g\ninput %x : i64[3,50]\n%s = ReduceSum(%x) {axis=-1, keepdim=true, fusion=1} : i64[3,1]\noutput %s\n",
          "fusion group 1: a fused reduction is a float (its partials are f32 in workgroup memory) or i32, not i64");
  refused("graph g\ninput %x : f32[4,6]\n%s = ReduceSum(%x) {axis=-1, keepdim=true, fusion=0} : f32[4,1]\n"
          "%t = Transpose(%s) {perm=[1, 0], fusion=0} : f32[1,4]\n%n = Neg(%t) {fusion=0} : f32[1,4]\noutput %n\n",
          "is computed from a reduction, so it must be elementwise");
  refused("graph g\ninput %x : f32[4]\n%a = Neg(%x) {fusion=0} : f32[4]\n%b = Exp(%x) : f32[4]\noutput %b\n",
          "fusion group 0: no member's result is read outside the group");
  // Product groups: one a, weights of rank 2 of one layout and dtype, every
  // result read after the last member; a MatMul in an elementwise group.
  const std::string ab = "graph g\ninput %a : f32[2,8]\ninput %c : f32[2,8]\nweight %w : f32[3,8]\nweight %v : f32[8,3]\n"
                         "weight %u : f32[1,3,8]\n";
  refused(ab + "%p = MatMul(%a, %w) {transpose_b=true, fusion=0} : f32[2,3]\n"
               "%q = MatMul(%c, %w) {transpose_b=true, fusion=0} : f32[2,3]\noutput %p\noutput %q\n",
          "fusion group 0: the products of a group read one a; this one reads %c, the first %a");
  refused(ab + "%p = MatMul(%a, %w) {transpose_b=true, fusion=0} : f32[2,3]\n"
               "%q = MatMul(%a, %u) {transpose_b=true, fusion=0} : f32[1,2,3]\noutput %p\noutput %q\n",
          "fusion group 0: a grouped product reads a weight b of rank 2, not f32[1,3,8]");
  refused(ab + "%p = MatMul(%a, %w) {transpose_b=true, fusion=0} : f32[2,3]\n"
               "%q = MatMul(%a, %v) {fusion=0} : f32[2,3]\noutput %p\noutput %q\n",
          "fusion group 0: the products of a group share transpose_b");
  refused(ab + "%p = MatMul(%a, %w) {transpose_b=true, fusion=0} : f32[2,3]\n%n = Neg(%p) : f32[2,3]\n"
               "%q = MatMul(%a, %w) {transpose_b=true, fusion=0} : f32[2,3]\noutput %n\noutput %q\n",
          "fusion group 0: %p is read here, before the group's root %q runs");
  refused(ab + "%n = Neg(%a) {fusion=0} : f32[2,8]\n%q = MatMul(%n, %w) {transpose_b=true, fusion=0} : f32[2,3]\n"
               "output %q\n",
          "fusion group 0: MatMul cannot run in a fused kernel");
  // An in-place write roots a group of elementwise members only, and is
  // no member elsewhere.
  const std::string st = "graph g\nstate %s : f32[4,6]\ninput %x : f32[4,2]\nslot %p : i32[] range [0, 4]\n";
  refused(st + "%a = ReduceSum(%x) {axis=-1, keepdim=true, fusion=0} : f32[4,1]\n%b = Mul(%x, %a) {fusion=0} : f32[4,2]\n"
               "%n = DynamicUpdateSlice(%s, %b, %p) {axis=1, fusion=0} : f32[4,6]\nstate_out %s = %n\noutput %n\n",
          "fusion group 0: a group that writes a state in place has no reductions");
  refused(st + "%n = DynamicUpdateSlice(%s, %x, %p) {axis=1, fusion=0} : f32[4,6]\n%e = Exp(%n) {fusion=0} : f32[4,6]\n"
               "state_out %s = %n\noutput %e\n",
          "fusion group 0: DynamicUpdateSlice cannot run in a fused kernel but as its root, writing the state it reads");
  refused("graph g\ninput %s : f32[4,6]\ninput %x : f32[4,2]\ninput %p : i32[]\n%u = Neg(%x) {fusion=0} : f32[4,2]\n"
          "%n = DynamicUpdateSlice(%s, %u, %p) {axis=1, fusion=0} : f32[4,6]\noutput %n\n",
          "fusion group 0: DynamicUpdateSlice cannot run in a fused kernel");
  // Outputs of the row shape and of one value a row are both fine.
  testing::parse("graph g\ninput %x : f32[4,6]\n%a = Neg(%x) {fusion=0} : f32[4,6]\n%s = ReduceSum(%a) {axis=-1, "
                 "keepdim=true, fusion=0} : f32[4,1]\n%b = Exp(%s) {fusion=0} : f32[4,1]\n%c = Mul(%b, %b) : f32[4,1]\n"
                 "output %c\noutput %a\n");
}

TEST_CASE("gen: matmul") {
  // The kernels fuse and reassociate the sums, so a result that cancels is
  // off by more than 1e-6 of itself; gen_matmul_test holds every schedule to
  // the proper bound, here it is 1e-6 of the scale (and half an f16 ulp).
  check("graph g\ninput %a : f32[2,1,3,5]\ninput %b : f32[4,5,7]\n%r = MatMul(%a, %b) : f32[2,4,3,7]\noutput %r\n",
        testing::relativeToBefore(1e-6));
  check("graph g\ninput %a : f16[17,33]\ninput %b : f16[33,9]\n%r = MatMul(%a, %b) : f16[17,9]\noutput %r\n",
        kHalfUlp);
  check("graph g\ninput %a : i32[3,1,2,4]\ninput %b : i32[2,4,2]\n%r = MatMul(%a, %b) : i32[3,2,2,2]\noutput %r\n",
        kExact);
  check("graph g\ninput %a : i64[3,4]\ninput %b : i64[1,4,2]\n%r = MatMul(%a, %b) : i64[1,3,2]\noutput %r\n", kExact);
}

TEST_CASE("gen: topk and block topk") {
  check("graph g\ninput %x : f32[3,10]\n%v, %i = TopK(%x) {k=4} : f32[3,4], i32[3,4]\noutput %v\noutput %i\n", kExact);
  check("graph g\ninput %x : f32[2,5]\n%v, %i = TopK(%x) {k=5} : f32[2,5], i32[2,5]\noutput %v\noutput %i\n", kExact,
        {{"x", tensorOf("f32[2,5]", {1, kNaN, 3, kNaN, 3, 2, 2, -0.0, 0.0, 2})}});
  check("graph g\ninput %x : i64[300,6]\n%v, %i = TopK(%x) {k=3} : i64[300,3], i32[300,3]\noutput %v\noutput %i\n",
        kExact);
  check("graph g\ninput %x : bf16[4,9]\n%v, %i = TopK(%x) {k=1} : bf16[4,1], i32[4,1]\noutput %v\noutput %i\n",
        kExact);
  // Rows past one workgroup's threads, and the shapes one thread a row got
  // wrong on lavapipe ((n + 1) k past 65535 loop iterations: its last
  // picks came out 0 and -1).
  check("graph g\ninput %x : f32[2,1000]\n%v, %i = TopK(%x) {k=129} : f32[2,129], i32[2,129]\noutput %v\noutput %i\n",
        kExact);
  check("graph g\ninput %x : f32[1,256]\n%v, %i = TopK(%x) {k=256} : f32[1,256], i32[1,256]\noutput %v\noutput %i\n",
        kExact);
  // qpos / 4 is 0, 1, 2, 5, 9 (clamped to 6) and -1 (clamped to 0) candidate blocks.
  check("graph g\ninput %s : f32[2,3,6]\ninput %q : i32[2,3]\n%r = BlockTopK(%s, %q) {k=4, block=4} : i32[2,3,4]\n"
        "output %r\n",
        kExact, {{"q", tensorOf("i32[2,3]", {3, 4, 11, 20, 39, -5})}});
  check("graph g\ninput %s : f32[1,2,5]\ninput %q : i64[1,2]\n%r = BlockTopK(%s, %q) {k=5, block=1} : i32[1,2,5]\n"
        "output %r\n",
        kExact,
        {{"s", tensorOf("f32[1,2,5]", {1, kNaN, 1, 0, 5, 2, 2, 2, 2, 2})}, {"q", tensorOf("i64[1,2]", {4, 5})}});
}

// Sample of `rows` rows of n logits, with a penalty list of `width` entries a row.
std::string sampleGraph(int64_t rows, int64_t n, int64_t width) {
  const std::string r = "[" + std::to_string(rows) + "]", l = "[" + std::to_string(rows) + "," + std::to_string(width) + "]";
  return "graph g\ninput %x : f32[" + std::to_string(rows) + "," + std::to_string(n) + "]\ninput %t : f32" + r +
         "\ninput %k : i32" + r + "\ninput %p : f32" + r + "\ninput %m : f32" + r + "\ninput %u : f32" + r +
         "\ninput %rp : f32" + r + "\ninput %sn : i32" + l + "\ninput %sa : f32" + l +
         "\n%s = Sample(%x, %t, %k, %p, %m, %u, %rp, %sn, %sa) : i32" + r + "\noutput %s\n";
}

TEST_CASE("gen: sample") {
  // The rule's cases by hand (sample_test) as rows: weights 1, 1/2, 1/4, 1/4
  // under each filter, greedy rows, NaN, infinities and ties.
  const double inf = kInf, l2 = std::log(0.5), l4 = std::log(0.25);
  std::vector<std::vector<double>> rows = {
      // logits, temperature, top_k, top_p, min_p, uniform
      {0, l2, l4, l4, 1, 0, 1, 0, 0.8},        {0, l2, l4, l4, 1, 2, 1, 0, 0.99},  {0, l2, l4, l4, 1, 3, 1, 0, 0.99},
      {0, l2, l4, l4, 1, 0, 0.6, 0, 0.99},     {0, l2, l4, l4, 1, 0, 0.9, 0, 0.99}, {0, l2, l4, l4, 1, 0, 1, 0.3, 0.99},
      {0, l2, l4, l4, 1, 3, 0.6, 0, 0.99},     {0, l2, l4, l4, 0.5, 0, 1, 0, 0.97}, {0, l2, l4, l4, 1, 0, 1, 0, 1.5},
      {0, l2, l4, l4, 0, 0, 1, 0, 0.9},        {1, inf, inf, 0, 1, 0, 1, 0, 0.9},  {-inf, kNaN, -inf, -inf, 1, 0, 1, 0, 0.9},
      {kNaN, 0, 0, -inf, 1, 0, 1, 0, 0.6},     {kNaN, 0, 0, -inf, 1, 2, 0.5, 0.5, 0.99}, {0, l2, l4, l4, kNaN, 1, 1, 0, 0.5},
      {0, l2, l4, l4, 1, -4, kNaN, -1, -1},
  };
  const std::vector<int32_t> want = {2, 1, 3, 1, 3, 1, 1, 3, 3, 0, 1, 0, 2, 2, 0, 0};
  const int64_t R = int64_t(rows.size());
  std::vector<double> logits, temperature, topK, topP, minP, uniform;
  for (const auto& r : rows) {
    logits.insert(logits.end(), r.begin(), r.begin() + 4);
    temperature.push_back(r[4]), topK.push_back(r[5]), topP.push_back(r[6]), minP.push_back(r[7]), uniform.push_back(r[8]);
  }
  auto graph = [](int64_t rows, int64_t n) { return sampleGraph(rows, n, 8); };
  std::map<std::string, Tensor> given = {{"x", tensorOf("f32[" + std::to_string(R) + ",4]", logits)},
                                         {"t", tensorOf("f32[" + std::to_string(R) + "]", temperature)},
                                         {"k", tensorOf("i32[" + std::to_string(R) + "]", topK)},
                                         {"p", tensorOf("f32[" + std::to_string(R) + "]", topP)},
                                         {"m", tensorOf("f32[" + std::to_string(R) + "]", minP)},
                                         {"u", tensorOf("f32[" + std::to_string(R) + "]", uniform)},
                                         {"rp", tensorOf("f32[" + std::to_string(R) + "]", std::vector<double>(size_t(R), 1))},
                                         {"sn", tensorOf("i32[" + std::to_string(R) + ",8]", std::vector<double>(size_t(R * 8), -1))},
                                         {"sa", tensorOf("f32[" + std::to_string(R) + ",8]", std::vector<double>(size_t(R * 8), 0))}};
  auto oracle = evaluate(testing::parse(graph(R, 4)), given);
  REQUIRE(bool(oracle));
  for (int64_t r = 0; r < R; ++r) CHECK_MESSAGE(oracle->outputs.at("s").get(r) == want[size_t(r)], "row " << r);
  check(graph(R, 4), kExact, given);
  // Fresh random logits over rows of 5000 and 1000 (past every workgroup's threads)
  // and of 3, each filter on and off; the draws spread over [0, 1). The
  // penalty inputs are the generator's: lists of ids in [0, 16), in any
  // order, so each ends somewhere (oracle/sample.h, seenLength).
  std::mt19937 rng(uint32_t(testing::freshSeed()));
  std::vector<double> t, k, p, m, u;
  for (int r = 0; r < 12; ++r) {
    t.push_back(r % 6 == 5 ? 0.0 : 0.3 + 0.25 * (r % 6));
    k.push_back(r % 3 == 0 ? 0 : r % 3 == 1 ? 7 : 200);
    p.push_back(r % 4 == 0 ? 1.0 : 0.5 + 0.1 * (r % 4));
    m.push_back(r % 5 == 0 ? 0.05 : 0.0);
    u.push_back(std::uniform_real_distribution<double>(0, 1)(rng));
  }
  for (int64_t n : {5000, 1000, 3}) {
    check(graph(12, n), kExact,
          {{"t", tensorOf("f32[12]", t)}, {"k", tensorOf("i32[12]", k)}, {"p", tensorOf("f32[12]", p)},
           {"m", tensorOf("f32[12]", m)}, {"u", tensorOf("f32[12]", u)}});
  }
}

// The device against the host: the generated Sample kernel (KIR interpreter
// and lavapipe) given each row's draw and penalty list as the engine makes
// them (Sampler::draw, Sampler::penalties) picks what the host Sampler picks
// for the same seed, on fresh random logits with ties, NaN and infinities,
// at vocabularies that are no multiple of any workgroup, each penalty alone
// and together, greedy and sampled, and a row without penalties beside them.
TEST_CASE("gen: sample with penalties picks the host Sampler's tokens") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const uint64_t seed = testing::freshSeed();
  CAPTURE(seed);
  std::mt19937 rng{uint32_t(seed)};
  const std::vector<SampleOptions> options = {
      {.repetitionPenalty = 1.7},                                          // greedy
      {.frequencyPenalty = 1.1, .presencePenalty = 0.6},                   // greedy
      {.temperature = 0.8, .repetitionPenalty = 0.6, .seed = 5},           // below 1: seen tokens favoured
      {.temperature = 1.2, .topK = 9, .frequencyPenalty = -0.4, .presencePenalty = 1.5, .seed = 6},
      {.temperature = 0.5, .topP = 0.8, .minP = 0.02, .repetitionPenalty = 1.3, .frequencyPenalty = 0.3,
       .presencePenalty = 0.2, .seed = 7},
      {.temperature = 0.9, .seed = 8},                                     // no penalties
  };
  const int64_t R = int64_t(options.size()), width = 48, steps = 6;
  // Under the sanitizers the interpreter is slow: the two smaller
  // vocabularies (both no multiple of a workgroup), not the third.
#ifdef POOT_TEST_SANITIZED
  const std::vector<int64_t> vocabularies = {37, 1009};
#else
  const std::vector<int64_t> vocabularies = {37, 1009, 3001};
#endif
  for (int64_t n : vocabularies) {
    CAPTURE(n);
    // Each row's Sampler, after a random prompt (some tokens twice) and outputs.
    std::vector<Sampler> host, planned;
    for (int64_t r = 0; r < R; ++r) {
      std::vector<int32_t> prompt(4 + rng() % 12);
      for (int32_t& t : prompt) t = int32_t(rng() % uint32_t(std::min<int64_t>(n, 40)));
      host.emplace_back(options[size_t(r)], r, prompt);
      for (int i = 0; i < 5; ++i) host.back().took(int32_t(rng() % uint32_t(n)));
      planned.push_back(host.back());
    }
    for (int64_t step = 0; step < steps; ++step) {
      CAPTURE(step);
      std::vector<double> x, t, k, p, m, u, rp, sn, sa;
      std::vector<std::vector<float>> rows;
      for (int64_t r = 0; r < R; ++r) {
        std::vector<float> row(static_cast<size_t>(n));
        for (float& v : row) {
          uint32_t kind = rng() % 40;
          v = kind == 0 ? nan : kind == 1 ? inf : kind == 2 ? -inf : float(int(rng() % 61) - 30) / 8.0f;  // ties
        }
        if (step % 2 == 0)  // rows whose largest is finite, so the sampled ones draw
          for (float& v : row) v = std::isfinite(v) ? v : 0.0f;
        rows.push_back(row);
        x.insert(x.end(), row.begin(), row.end());
        Sampler& d = planned[size_t(r)];
        std::vector<int32_t> seen(static_cast<size_t>(width));
        std::vector<float> amounts(static_cast<size_t>(width));
        rp.push_back(*d.penalties(seen, amounts));
        sn.insert(sn.end(), seen.begin(), seen.end());
        sa.insert(sa.end(), amounts.begin(), amounts.end());
        SampleParams q = d.draw();
        t.push_back(q.temperature), k.push_back(q.topK), p.push_back(q.topP), m.push_back(q.minP), u.push_back(q.uniform);
      }
      const std::string rs = "[" + std::to_string(R) + "]", ls = "[" + std::to_string(R) + "," + std::to_string(width) + "]";
      std::map<std::string, Tensor> params = {
          {"x", tensorOf("f32[" + std::to_string(R) + "," + std::to_string(n) + "]", x)},
          {"t", tensorOf("f32" + rs, t)}, {"k", tensorOf("i32" + rs, k)}, {"p", tensorOf("f32" + rs, p)},
          {"m", tensorOf("f32" + rs, m)}, {"u", tensorOf("f32" + rs, u)}, {"rp", tensorOf("f32" + rs, rp)},
          {"sn", tensorOf("i32" + ls, sn)}, {"sa", tensorOf("f32" + ls, sa)}};
      Graph g = testing::parse(sampleGraph(R, n, width));
      auto kir = testing::runOnKir(g, device(), params);
      REQUIRE_MESSAGE(bool(kir), (kir ? "" : kir.error().str()));
      auto vulkan = testing::runOnVulkan(g, device(), params);
      REQUIRE_MESSAGE(bool(vulkan), (vulkan ? "" : vulkan.error().str()));
      for (int64_t r = 0; r < R; ++r) {
        CAPTURE(r);
        int32_t want = host[size_t(r)].next(rows[size_t(r)]);
        CHECK(int32_t(kir->outputs.at("s").get(r)) == want);
        CHECK(int32_t(vulkan->outputs.at("s").get(r)) == want);
        planned[size_t(r)].took(want);
      }
    }
  }
}

TEST_CASE("gen: index guard") {
  std::string text = "graph g\ninput %x : i32[300]\n%c, %ok = IndexGuard(%x) {lo=2, hi=13} : i32[300], bool[]\n"
                     "output %c\nvalidation %ok\n";
  check(text, kExact);  // inputs in [0, 16): some below, some above
  std::vector<double> inside(300, 5.0);
  check(text, kExact, {{"x", tensorOf("i32[300]", inside)}});
  inside[299] = 14;
  check(text, kExact, {{"x", tensorOf("i32[300]", inside)}});
  check("graph g\ninput %x : i64[3]\n%c, %ok = IndexGuard(%x) {lo=-1, hi=1} : i64[3], bool[]\noutput %c\n"
        "validation %ok\n",
        kExact, {{"x", tensorOf("i64[3]", {-1, 0, 1})}});
}

TEST_CASE("gen: refusals name their check") {
  Schedule s = plainSchedule("elementwise", device());
  auto refused = [&](KernelRequest r) {
    auto k = generateKernel(GenInput{r, device(), "k", {1, 1, 1}});
    REQUIRE(!k);
    CHECK(k.error().kind == ErrorKind::Capability);
    return k.error().capability;
  };
  Type huge = testing::ty("f32[65536,32768]");  // 2^31 elements
  CHECK(refused(KernelRequest{Op::Neg, {huge}, {huge}, {}, s}) == "IndexWidth");
  std::vector<double> vals(5000, 0.5);
  vals[7] = 2;
  Attrs attrs{Attr{"value", vals}};
  CHECK(refused(KernelRequest{Op::Constant, {}, {testing::ty("f32[5000]")}, attrs, s}) == "ConstantSize");
}

bool hasAttention(const Graph& g) {
  for (const Eqn& e : g.eqns)
    if (e.op == Op::Attention || e.op == Op::SelectedAttention) return true;
  return false;
}

// Whole tiny models: f32 matmuls, norms and softmaxes over small widths,
// within 1e-4 (1 + |want|): the matmul kernels sum in another order than the
// oracle (docs/codegen.md), so a result near zero after cancellation is only
// close in absolute terms. As
// traced and after the rope pass they hold primitive ops (and Rope) only;
// fully compiled, those that still hold attention are left to the attention
// generators' tests.
TEST_CASE("gen: tiny graphs on the generated kernels") {
  for (const auto& path : testing::filesIn(testing::sourceDir() / "examples" / "graphs", "tiny-", ".pg")) {
    CAPTURE(path.filename().string());
    for (const char* stop : {"", "ranges", "all"}) {
      CAPTURE(stop);
      Graph g = testing::loadGraphFile(path);
      if (*stop) {
        PassContext ctx;
        PipelineOptions opts;
        if (std::string(stop) != "all") opts.stopAfter = stop;
        auto s = runPipeline(g, ctx, opts);
        REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
      }
      if (std::string(stop) == "all" && hasAttention(g)) continue;
      checkGraph(g, testing::relativeToBefore(1e-4));
    }
  }
}

// Whole tiny models traced with their activations, KV caches and weights in
// bf16 (every family, decode and prefill) and in f16 (llama), fully compiled
// (attention formed, fused chains), on the KIR interpreter and on lavapipe
// (bf16 as 16-bit integer storage there). Kernels round every two-byte result
// where the graph does, so they differ from the oracle only where they sum in
// another order (the products and the attention op, both in f32): such a sum
// can land on the other side of a rounding boundary, one ulp of the dtype
// (2^-8 relative in bf16, 2^-11 in f16), and later layers carry it on. The
// bound is 8 such ulps of (1 + |want|), 3e-2 in bf16 and 4e-3 in f16.
TEST_CASE("gen: tiny graphs on the generated kernels in bf16 and f16") {
  struct Case {
    DType dtype;
    double tol;
  };
  for (const auto& path : testing::filesIn(testing::sourceDir() / "examples" / "models", "tiny-", ".json")) {
    auto cfg = trace::loadConfig(path.string());
    REQUIRE_MESSAGE(bool(cfg), (cfg ? "" : cfg.error().str()));
    std::vector<Case> cases{{DType::BF16, 3e-2}};
    if (path.filename() == "tiny-llama.json") cases.push_back({DType::F16, 4e-3});
    for (Case c : cases)
      for (trace::Phase phase : {trace::Phase::Decode, trace::Phase::Prefill}) {
        CAPTURE(path.filename().string());
        CAPTURE(dtypeName(c.dtype));
        CAPTURE(phase == trace::Phase::Decode ? "decode" : "prefill");
        trace::TraceOptions opts;
        opts.phase = phase;
        opts.capacity = 32;
        opts.tokens = phase == trace::Phase::Decode ? 1 : 7;
        opts.dtype = c.dtype;
        opts.weightsDtype = c.dtype;
        auto g = trace::traceModel(*cfg, opts);
        REQUIRE_MESSAGE(bool(g), (g ? "" : g.error().str()));
        PassContext ctx;
        auto s = runPipeline(*g, ctx, PipelineOptions{});
        REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
        CHECK(hasAttention(*g));
        checkGraph(*g, testing::relativeToBefore(c.tol));
      }
  }
}

// The same tiny prefills planned for the H200, whose profile lists the bf16
// matrix op: at 20 tokens their products run the gemv-mma schedule (at most
// 32 rows), at 40 the gemm-mma, and their attention the tensor-core prefill
// (one tf32 product a score for bf16 inputs), on the KIR interpreter, which
// gives mma its meaning (the H200 runs them in test/device). Same bound.
TEST_CASE("gen: tiny bf16 prefills on the H200's matrix units, on the KIR interpreter") {
  static const DeviceProfile h200 = testing::loadTarget("nvidia-h200");
  for (const auto& path : testing::filesIn(testing::sourceDir() / "examples" / "models", "tiny-", ".json")) {
    for (int64_t tokens : {20, 40}) {
      CAPTURE(path.filename().string());
      CAPTURE(tokens);
      auto cfg = trace::loadConfig(path.string());
      REQUIRE_MESSAGE(bool(cfg), (cfg ? "" : cfg.error().str()));
      trace::TraceOptions opts;
      opts.phase = trace::Phase::Prefill;
      opts.capacity = 48;
      opts.tokens = tokens;
      opts.dtype = DType::BF16;
      opts.weightsDtype = DType::BF16;
      auto g = trace::traceModel(*cfg, opts);
      REQUIRE_MESSAGE(bool(g), (g ? "" : g.error().str()));
      PassContext ctx;
      auto s = runPipeline(*g, ctx, PipelineOptions{});
      REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
      auto plan = planGraph(*g, h200);
      REQUIRE_MESSAGE(bool(plan), (plan ? "" : plan.error().str()));
      int gemms = 0, attentions = 0;
      for (const Kernel& k : plan->kernels) {
        gemms += k.request.schedule.kind == (tokens <= kGemvMmaRows ? "gemv-mma" : "gemm-mma");
        attentions += k.request.schedule.kind == "prefill-mma";
      }
      CHECK(gemms > 0);
      if (path.filename() != "tiny-sparse.json") CHECK(attentions > 0);  // its selected attention has no tensor-core form
      uint64_t seed = testing::freshSeed();
      CAPTURE(seed);
      auto params = completeParams(*g, {}, seed);
      auto want = evaluate(*g, params);
      REQUIRE_MESSAGE(bool(want), (want ? "" : want.error().str()));
      auto kir = testing::runOnKir(*g, h200, params);
      REQUIRE_MESSAGE(bool(kir), (kir ? "" : kir.error().str()));
      for (const auto& [name, t] : want->outputs) checkSame("kir output " + name, t, kir->outputs.at(name), testing::relativeToBefore(3e-2));
      for (const auto& [name, t] : want->states) checkSame("kir state " + name, t, kir->states.at(name), testing::relativeToBefore(3e-2));
    }
  }
}

}  // namespace
}  // namespace poot

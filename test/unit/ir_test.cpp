// Unit tests of the graph IR's rules: every op's type rule through checkEqn
// (the exact result types it infers and the exact message of each refusal),
// the op table's own checks (operand count, attribute presence, kind and
// symbol), and the verifier on small .pg graphs, whose diagnostics are checked
// with their full "t.pg:line:col: error: ..." text: storage rules, the
// interface (outputs, state_out, validation witnesses) and declared types.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/ops.h"
#include "ir/text.h"
#include "testing.h"

using namespace poot;

namespace {

using testing::ty;

std::vector<Type> tys(std::initializer_list<const char*> ss) {
  std::vector<Type> out;
  for (const char* s : ss) out.push_back(ty(s));
  return out;
}

Attr aInt(const char* n, int64_t v) { return Attr{n, AttrValue(v)}; }
Attr aFloat(const char* n, double v) { return Attr{n, AttrValue(v)}; }
Attr aBool(const char* n, bool v) { return Attr{n, AttrValue(v)}; }
Attr aSym(const char* n, const char* v) { return Attr{n, AttrValue(std::string(v))}; }
Attr aInts(const char* n, std::vector<int64_t> v) { return Attr{n, AttrValue(std::move(v))}; }
Attr aFloats(const char* n, std::vector<double> v) { return Attr{n, AttrValue(std::move(v))}; }

// Runs the op table's check and type rule, as the verifier does.
TypeResult check(Op op, std::initializer_list<const char*> operands, Attrs attrs = {},
                 std::initializer_list<const char*> declared = {}) {
  static Attrs keep;  // TypeQuery holds a pointer to its attributes
  keep = std::move(attrs);
  TypeQuery q;
  q.operands = tys(operands);
  q.attrs = &keep;
  q.declared = tys(declared);
  return checkEqn(op, q);
}

// The one result type of an accepted eqn, printed ("f32[2,3]"), or the error.
std::string typeOf(const TypeResult& r) {
  if (!r.error.empty()) return "error: " + r.error;
  std::string out;
  for (const Type& t : r.types) out += (out.empty() ? "" : ", ") + t.str();
  return out;
}

std::string errorOf(const TypeResult& r) { return r.error.empty() ? "accepted: " + typeOf(r) : r.error; }

// Parses (which must succeed) and verifies; "ok" or the diagnostic's text.
std::string verifyText(const std::string& text) {
  auto g = parseGraph(text, "t.pg");
  if (!g) FAIL("parse failed: " << g.error().str());
  auto s = verify(*g);
  return s ? std::string("ok") : s.error().str();
}

Attrs attnAttrs(int64_t nrep, const char* key, const char* mask, const char* bound) {
  return {aFloat("scale", 0.125), aInt("n_rep", nrep), aSym("key", key), aSym("mask", mask), aSym("bound", bound)};
}

}  // namespace

// ----- the table and checkEqn's generic checks -----

TEST_CASE("op table lists every op once, in enum order, and names round-trip") {
  const auto& table = opTable();
  REQUIRE(table.size() == size_t(Op::RoutedExperts) + 1);
  for (size_t i = 0; i < table.size(); ++i) {
    CHECK(size_t(table[i].op) == i);
    CHECK(parseOp(table[i].name) == table[i].op);
  }
  CHECK(std::string(opName(Op::DynamicUpdateSlice)) == "DynamicUpdateSlice");
  CHECK_FALSE(parseOp("Expo").has_value());
  CHECK(opInfo(Op::TopK).results == 2);
  CHECK(opInfo(Op::IndexGuard).results == 2);
  CHECK(opInfo(Op::Attention).minOperands == 3);
  CHECK(opInfo(Op::Attention).maxOperands == 7);
  CHECK(opInfo(Op::Concat).maxOperands == -1);
}

TEST_CASE("checkEqn: operand counts") {
  CHECK(errorOf(check(Op::Add, {"f32[2]"})) == "Add takes 2 operands, got 1");
  CHECK(errorOf(check(Op::Constant, {"f32[2]"}, {aFloats("value", {1})}, {"f32[]"})) ==
        "Constant takes 0 operands, got 1");
  CHECK(errorOf(check(Op::Concat, {}, {aInt("axis", 0)}, {})) == "Concat takes 1 or more operands, got 0");
  CHECK(errorOf(check(Op::Attention, {"f32[1]", "f32[1]"}, attnAttrs(1, "dense", "none", "capacity"))) ==
        "Attention takes 3 to 7 operands, got 2");
}

TEST_CASE("checkEqn: attribute presence, kind and symbols") {
  CHECK(errorOf(check(Op::Exp, {"f32[2]"}, {aInt("axis", 0)})) == "Exp has no attribute 'axis'");
  CHECK(errorOf(check(Op::ReduceSum, {"f32[2]"}, {aInt("axis", 0)})) == "ReduceSum needs attribute 'keepdim'");
  CHECK(errorOf(check(Op::ReduceSum, {"f32[2]"}, {aFloat("axis", 0), aBool("keepdim", true)})) ==
        "attribute 'axis' must be an integer");
  CHECK(errorOf(check(Op::Transpose, {"f32[2,3]"}, {aInt("perm", 1)})) == "attribute 'perm' must be a list of integers");
  CHECK(errorOf(check(Op::Constant, {}, {aInts("value", {1})}, {"f32[]"})) ==
        "attribute 'value' must be a list of numbers");
  CHECK(errorOf(check(Op::ReduceMax, {"f32[2]"}, {aInt("axis", 0), aInt("keepdim", 1)})) ==
        "attribute 'keepdim' must be a bool");
  CHECK(errorOf(check(Op::Rope, {"f32[4]", "f32[2]", "f32[2]"}, {aInt("style", 0)})) ==
        "attribute 'style' must be a symbol");
  CHECK(errorOf(check(Op::Rope, {"f32[4]", "f32[2]", "f32[2]"}, {aSym("style", "spiral")})) ==
        "attribute 'style' must be one of half, interleaved, got 'spiral'");
  Attrs a = attnAttrs(1, "sparse", "none", "capacity");
  CHECK(errorOf(check(Op::Attention, {"f32[1,1,1,4]", "f32[1,1,2,4]", "f32[1,1,2,4]"}, a)) ==
        "attribute 'key' must be one of dense, split, paged, got 'sparse'");
  a = attnAttrs(1, "dense", "sliding", "capacity");
  CHECK(errorOf(check(Op::Attention, {"f32[1,1,1,4]", "f32[1,1,2,4]", "f32[1,1,2,4]"}, a)) ==
        "attribute 'mask' must be one of none, additive, causal, got 'sliding'");
  a = attnAttrs(1, "dense", "none", "exact");
  CHECK(errorOf(check(Op::Attention, {"f32[1,1,1,4]", "f32[1,1,2,4]", "f32[1,1,2,4]"}, a)) ==
        "attribute 'bound' must be one of capacity, live, got 'exact'");
  a = {aInt("n_rep", 1), aSym("key", "dense"), aSym("mask", "none"), aSym("bound", "capacity")};
  CHECK(errorOf(check(Op::Attention, {"f32[1,1,1,4]", "f32[1,1,2,4]", "f32[1,1,2,4]"}, a)) ==
        "Attention needs attribute 'scale'");
  a = attnAttrs(1, "dense", "none", "capacity");
  a[0] = aInt("scale", 1);
  CHECK(errorOf(check(Op::Attention, {"f32[1,1,1,4]", "f32[1,1,2,4]", "f32[1,1,2,4]"}, a)) ==
        "attribute 'scale' must be a number");
}

TEST_CASE("broadcastShapes and normalizeAxis") {
  CHECK(broadcastShapes({4, 1, 3}, {5, 1}) == Shape{4, 5, 3});
  CHECK(broadcastShapes({}, {2, 3}) == Shape{2, 3});
  CHECK(broadcastShapes({1}, {1}) == Shape{1});
  CHECK_FALSE(broadcastShapes({2, 3}, {4}).has_value());
  CHECK(normalizeAxis(-1, 4) == 3);
  CHECK(normalizeAxis(-4, 4) == 0);
  CHECK(normalizeAxis(3, 4) == 3);
  CHECK_FALSE(normalizeAxis(4, 4).has_value());
  CHECK_FALSE(normalizeAxis(-5, 4).has_value());
  CHECK_FALSE(normalizeAxis(0, 0).has_value());
}

// ----- data movement and creation -----

TEST_CASE("Iota") {
  CHECK(typeOf(check(Op::Iota, {}, {aInt("axis", 1)}, {"i32[4,8]"})) == "i32[4,8]");
  CHECK(typeOf(check(Op::Iota, {}, {aInt("axis", -1)}, {"f16[8]"})) == "f16[8]");
  CHECK(errorOf(check(Op::Iota, {}, {aInt("axis", 0)}, {"bool[4]"})) == "iota result must be a numeric type");
  CHECK(errorOf(check(Op::Iota, {}, {aInt("axis", 2)}, {"i32[4,8]"})) == "axis 2 is out of range for rank 2");
  CHECK(errorOf(check(Op::Iota, {}, {aInt("axis", 0)}, {"i32[]"})) == "axis 0 is out of range for rank 0");
  CHECK(errorOf(check(Op::Iota, {}, {aInt("axis", 0)})) == "the result type must be declared");
}

TEST_CASE("Constant") {
  CHECK(typeOf(check(Op::Constant, {}, {aFloats("value", {1, 2, 3})}, {"f32[3]"})) == "f32[3]");
  CHECK(typeOf(check(Op::Constant, {}, {aFloats("value", {0.5})}, {"bf16[2,2]"})) == "bf16[2,2]");
  CHECK(typeOf(check(Op::Constant, {}, {aFloats("value", {-INFINITY})}, {"f32[]"})) == "f32[]");
  CHECK(typeOf(check(Op::Constant, {}, {aFloats("value", {0, 1})}, {"bool[2]"})) == "bool[2]");
  CHECK(typeOf(check(Op::Constant, {}, {aFloats("value", {-7})}, {"i64[]"})) == "i64[]");
  CHECK(errorOf(check(Op::Constant, {}, {aFloats("value", {1, 2})}, {"f32[3]"})) ==
        "constant has 2 values; expected 1 or 3");
  CHECK(errorOf(check(Op::Constant, {}, {aFloats("value", {0.5})}, {"i32[]"})) ==
        "constant value 0.5 is not an integer");
  CHECK(errorOf(check(Op::Constant, {}, {aFloats("value", {INFINITY})}, {"i32[]"})) ==
        "constant value inf is not an integer");
  CHECK(errorOf(check(Op::Constant, {}, {aFloats("value", {2})}, {"bool[]"})) == "a bool constant must be 0 or 1");
  CHECK(errorOf(check(Op::Constant, {}, {aFloats("value", {1})})) == "the result type must be declared");
}

TEST_CASE("Reshape: element count and dtype") {
  CHECK(typeOf(check(Op::Reshape, {"f32[2,6]"}, {}, {"f32[3,4]"})) == "f32[3,4]");
  CHECK(typeOf(check(Op::Reshape, {"f32[1,2,32,16]"}, {}, {"f32[1,2,1,32,16]"})) == "f32[1,2,1,32,16]");
  CHECK(typeOf(check(Op::Reshape, {"i32[1]"}, {}, {"i32[]"})) == "i32[]");
  CHECK(errorOf(check(Op::Reshape, {"f32[4,4]"}, {}, {"f32[15]"})) ==
        "reshape from f32[4,4] to f32[15] changes the element count");
  CHECK(errorOf(check(Op::Reshape, {"f32[2,6]"}, {}, {"f16[12]"})) == "reshape cannot change the dtype");
  CHECK(errorOf(check(Op::Reshape, {"f32[2,6]"})) == "the result type must be declared");
}

TEST_CASE("Broadcast") {
  CHECK(typeOf(check(Op::Broadcast, {"f32[1,2,1,32,16]"}, {}, {"f32[1,2,2,32,16]"})) == "f32[1,2,2,32,16]");
  CHECK(typeOf(check(Op::Broadcast, {"f32[3]"}, {}, {"f32[2,3]"})) == "f32[2,3]");
  CHECK(typeOf(check(Op::Broadcast, {"i32[]"}, {}, {"i32[4]"})) == "i32[4]");
  CHECK(errorOf(check(Op::Broadcast, {"f32[2]"}, {}, {"f32[3]"})) == "cannot broadcast f32[2] to f32[3]");
  CHECK(errorOf(check(Op::Broadcast, {"f32[1,3]"}, {}, {"f32[3]"})) == "cannot broadcast f32[1,3] to f32[3]");
  CHECK(errorOf(check(Op::Broadcast, {"f32[3,1]"}, {}, {"f32[1,4]"})) == "cannot broadcast f32[3,1] to f32[1,4]");
  CHECK(errorOf(check(Op::Broadcast, {"f32[3]"}, {}, {"f16[2,3]"})) == "broadcast cannot change the dtype");
}

TEST_CASE("Transpose") {
  CHECK(typeOf(check(Op::Transpose, {"f32[1,4,32,16]"}, {aInts("perm", {0, 1, 3, 2})})) == "f32[1,4,16,32]");
  CHECK(typeOf(check(Op::Transpose, {"i64[2,3,5]"}, {aInts("perm", {2, 0, 1})})) == "i64[5,2,3]");
  CHECK(errorOf(check(Op::Transpose, {"f32[2,3]"}, {aInts("perm", {0})})) == "perm must list all 2 axes");
  CHECK(errorOf(check(Op::Transpose, {"f32[2,3]"}, {aInts("perm", {0, 0})})) == "perm [0,0] is not a permutation");
  CHECK(errorOf(check(Op::Transpose, {"f32[2,3]"}, {aInts("perm", {0, 2})})) == "perm [0,2] is not a permutation");
  CHECK(errorOf(check(Op::Transpose, {"f32[2,3]"}, {aInts("perm", {-1, 0})})) == "perm [-1,0] is not a permutation");
}

TEST_CASE("Slice") {
  CHECK(typeOf(check(Op::Slice, {"f32[4,10]"}, {aInt("axis", 1), aInt("start", 2), aInt("limit", 5)})) == "f32[4,3]");
  CHECK(typeOf(check(Op::Slice, {"f32[4,10]"}, {aInt("axis", -2), aInt("start", 0), aInt("limit", 4)})) == "f32[4,10]");
  CHECK(errorOf(check(Op::Slice, {"f32[4,10]"}, {aInt("axis", 1), aInt("start", 2), aInt("limit", 11)})) ==
        "slice [2, 11) is not within axis of size 10");
  CHECK(errorOf(check(Op::Slice, {"f32[4,10]"}, {aInt("axis", 1), aInt("start", 3), aInt("limit", 3)})) ==
        "slice [3, 3) is not within axis of size 10");
  CHECK(errorOf(check(Op::Slice, {"f32[4,10]"}, {aInt("axis", 0), aInt("start", -1), aInt("limit", 2)})) ==
        "slice [-1, 2) is not within axis of size 4");
  CHECK(errorOf(check(Op::Slice, {"f32[4,10]"}, {aInt("axis", 2), aInt("start", 0), aInt("limit", 1)})) ==
        "axis 2 is out of range for rank 2");
}

TEST_CASE("Concat") {
  CHECK(typeOf(check(Op::Concat, {"f32[2,3]", "f32[2,5]", "f32[2,1]"}, {aInt("axis", -1)})) == "f32[2,9]");
  CHECK(typeOf(check(Op::Concat, {"f32[2,3]"}, {aInt("axis", 0)})) == "f32[2,3]");
  CHECK(errorOf(check(Op::Concat, {"f32[2,3]", "i32[2,3]"}, {aInt("axis", 0)})) ==
        "operand 2 (i32[2,3]) does not match operand 1 (f32[2,3])");
  CHECK(errorOf(check(Op::Concat, {"f32[2,3]", "f32[2,3,1]"}, {aInt("axis", 0)})) ==
        "operand 2 (f32[2,3,1]) does not match operand 1 (f32[2,3])");
  CHECK(errorOf(check(Op::Concat, {"f32[2,3]", "f32[2,3]", "f32[3,3]"}, {aInt("axis", 1)})) ==
        "operand 3 (f32[3,3]) differs from operand 1 (f32[2,3]) outside the concat axis");
}

TEST_CASE("Gather: indices") {
  CHECK(typeOf(check(Op::Gather, {"f32[100,16]", "i32[2,3]"}, {aInt("axis", 0)})) == "f32[2,3,16]");
  CHECK(typeOf(check(Op::Gather, {"bf16[4,5,6]", "i64[7]"}, {aInt("axis", 1)})) == "bf16[4,7,6]");
  CHECK(typeOf(check(Op::Gather, {"f32[100,16]", "i32[]"}, {aInt("axis", 0)})) == "f32[16]");
  CHECK(typeOf(check(Op::Gather, {"f32[4,5,6]", "i32[2]"}, {aInt("axis", -1)})) == "f32[4,5,2]");
  CHECK(errorOf(check(Op::Gather, {"f32[100,16]", "f32[1,4]"}, {aInt("axis", 0)})) ==
        "operand 2 (f32[1,4]) must be an integer type");
  CHECK(errorOf(check(Op::Gather, {"f32[100,16]", "bool[4]"}, {aInt("axis", 0)})) ==
        "operand 2 (bool[4]) must be an integer type");
  CHECK(errorOf(check(Op::Gather, {"f32[100,16]", "i32[4]"}, {aInt("axis", 2)})) == "axis 2 is out of range for rank 2");
}

TEST_CASE("DynamicSlice") {
  CHECK(typeOf(check(Op::DynamicSlice, {"f32[1,2,32,16]", "i32[]"}, {aInt("axis", 2), aInt("size", 4)})) ==
        "f32[1,2,4,16]");
  CHECK(typeOf(check(Op::DynamicSlice, {"f32[8]", "i32[1]"}, {aInt("axis", 0), aInt("size", 8)})) == "f32[8]");
  CHECK(errorOf(check(Op::DynamicSlice, {"f32[1,2,32,16]", "i32[]"}, {aInt("axis", 2), aInt("size", 33)})) ==
        "size 33 does not fit axis of size 32");
  CHECK(errorOf(check(Op::DynamicSlice, {"f32[8]", "i32[]"}, {aInt("axis", 0), aInt("size", 0)})) ==
        "size 0 does not fit axis of size 8");
  CHECK(errorOf(check(Op::DynamicSlice, {"f32[8]", "f32[]"}, {aInt("axis", 0), aInt("size", 1)})) ==
        "operand 2 (f32[]) must be a single integer (one element of i32 or i64)");
  CHECK(errorOf(check(Op::DynamicSlice, {"f32[8]", "i32[2]"}, {aInt("axis", 0), aInt("size", 1)})) ==
        "operand 2 (i32[2]) must be a single integer (one element of i32 or i64)");
}

TEST_CASE("DynamicUpdateSlice: operand shapes") {
  CHECK(typeOf(check(Op::DynamicUpdateSlice, {"f32[1,2,32,16]", "f32[1,2,1,16]", "i32[]"}, {aInt("axis", 2)})) ==
        "f32[1,2,32,16]");
  CHECK(typeOf(check(Op::DynamicUpdateSlice, {"f32[1,2,32,16]", "f32[1,2,32,16]", "i32[1]"}, {aInt("axis", -2)})) ==
        "f32[1,2,32,16]");
  CHECK(errorOf(check(Op::DynamicUpdateSlice, {"f32[1,2,8,4]", "f32[1,2,1,3]", "i32[]"}, {aInt("axis", 2)})) ==
        "update f32[1,2,1,3] does not fit target f32[1,2,8,4] along axis 2");
  CHECK(errorOf(check(Op::DynamicUpdateSlice, {"f32[1,2,8,4]", "f32[1,2,9,4]", "i32[]"}, {aInt("axis", 2)})) ==
        "update f32[1,2,9,4] does not fit target f32[1,2,8,4] along axis 2");
  CHECK(errorOf(check(Op::DynamicUpdateSlice, {"f32[1,2,8,4]", "f32[2,1,4]", "i32[]"}, {aInt("axis", 2)})) ==
        "the update must have the rank of the target");
  CHECK(errorOf(check(Op::DynamicUpdateSlice, {"f32[1,2,8,4]", "f16[1,2,1,4]", "i32[]"}, {aInt("axis", 2)})) ==
        "operand 1 (f32[1,2,8,4]) and operand 2 (f16[1,2,1,4]) must have the same dtype");
  CHECK(errorOf(check(Op::DynamicUpdateSlice, {"f32[1,2,8,4]", "f32[1,2,1,4]", "i32[2]"}, {aInt("axis", 2)})) ==
        "operand 3 (i32[2]) must be a single integer (one element of i32 or i64)");
  CHECK(errorOf(check(Op::DynamicUpdateSlice, {"f32[1,2,8,4]", "f32[1,2,1,4]", "i32[]"}, {aInt("axis", 4)})) ==
        "axis 4 is out of range for rank 4");
}

TEST_CASE("ScatterUpdate: operand shapes") {
  CHECK(typeOf(check(Op::ScatterUpdate, {"f32[64,2,16]", "i32[3]", "f32[3,2,16]"})) == "f32[64,2,16]");
  CHECK(typeOf(check(Op::ScatterUpdate, {"bf16[64]", "i32[5]", "bf16[5]"})) == "bf16[64]");
  CHECK(errorOf(check(Op::ScatterUpdate, {"f32[64,2,16]", "i32[3]", "f32[3,2,8]"})) ==
        "updates f32[3,2,8] must have shape [3,2,16] (one row per index)");
  CHECK(errorOf(check(Op::ScatterUpdate, {"f32[64,2,16]", "i32[3]", "f32[2,2,16]"})) ==
        "updates f32[2,2,16] must have shape [3,2,16] (one row per index)");
  CHECK(errorOf(check(Op::ScatterUpdate, {"f32[64,2,16]", "i32[3,1]", "f32[3,2,16]"})) ==
        "operand 2 (i32[3,1]) must have rank 1");
  CHECK(errorOf(check(Op::ScatterUpdate, {"f32[]", "i32[3]", "f32[3]"})) == "operand 1 (f32[]) must have rank 1 or more");
  CHECK(errorOf(check(Op::ScatterUpdate, {"f32[64,2,16]", "f32[3]", "f32[3,2,16]"})) ==
        "operand 2 (f32[3]) must be an integer type");
  CHECK(errorOf(check(Op::ScatterUpdate, {"f32[64,2,16]", "i32[3]", "f16[3,2,16]"})) ==
        "operand 1 (f32[64,2,16]) and operand 3 (f16[3,2,16]) must have the same dtype");
}

TEST_CASE("Convert") {
  CHECK(typeOf(check(Op::Convert, {"f32[2,3]"}, {}, {"bf16[2,3]"})) == "bf16[2,3]");
  CHECK(typeOf(check(Op::Convert, {"bool[4]"}, {}, {"f32[4]"})) == "f32[4]");
  CHECK(errorOf(check(Op::Convert, {"f32[2,3]"}, {}, {"f16[6]"})) == "convert cannot change the shape");
  CHECK(errorOf(check(Op::Convert, {"f32[2,3]"})) == "the result type must be declared");
}

// ----- elementwise -----

TEST_CASE("unary ops") {
  for (Op op : {Op::Exp, Op::Log, Op::Sqrt, Op::Rsqrt, Op::Recip, Op::Tanh, Op::Sin, Op::Cos, Op::Erf, Op::Sigmoid}) {
    CAPTURE(opName(op));
    CHECK(typeOf(check(op, {"f32[2,3]"})) == "f32[2,3]");
    CHECK(typeOf(check(op, {"bf16[]"})) == "bf16[]");
    CHECK(errorOf(check(op, {"i32[4]"})) == "operand 1 (i32[4]) must be a float type");
    CHECK(errorOf(check(op, {"bool[4]"})) == "operand 1 (bool[4]) must be a float type");
  }
  for (Op op : {Op::Neg, Op::Abs}) {
    CAPTURE(opName(op));
    CHECK(typeOf(check(op, {"f16[2,3]"})) == "f16[2,3]");
    CHECK(typeOf(check(op, {"i64[5]"})) == "i64[5]");
    CHECK(errorOf(check(op, {"bool[4]"})) == "operand 1 (bool[4]) must be numeric");
  }
  CHECK(typeOf(check(Op::Not, {"bool[2,2]"})) == "bool[2,2]");
  CHECK(errorOf(check(Op::Not, {"i32[2]"})) == "operand 1 (i32[2]) must be bool");
  CHECK(errorOf(check(Op::Exp, {"f32[2]", "f32[2]"})) == "Exp takes 1 operands, got 2");
}

TEST_CASE("binary ops: broadcasting and dtypes") {
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Max, Op::Min}) {
    CAPTURE(opName(op));
    CHECK(typeOf(check(op, {"f32[4,1,3]", "f32[5,1]"})) == "f32[4,5,3]");
    CHECK(typeOf(check(op, {"i32[]", "i32[2,2]"})) == "i32[2,2]");
    CHECK(typeOf(check(op, {"f32[1,4,1,32]", "f32[1,1,1,32]"})) == "f32[1,4,1,32]");
    CHECK(errorOf(check(op, {"f32[4,3]", "f32[4,2]"})) == "shapes [4,3] and [4,2] do not broadcast");
    CHECK(errorOf(check(op, {"f32[2]", "f16[2]"})) == "operand 1 (f32[2]) and operand 2 (f16[2]) must have the same dtype");
    CHECK(errorOf(check(op, {"bool[2]", "bool[2]"})) == "operand 1 (bool[2]) must be numeric");
  }
  CHECK(typeOf(check(Op::Pow, {"f32[3]", "f32[]"})) == "f32[3]");
  CHECK(errorOf(check(Op::Pow, {"i32[3]", "i32[]"})) == "operand 1 (i32[3]) must be a float type");
  for (Op op : {Op::And, Op::Or}) {
    CAPTURE(opName(op));
    CHECK(typeOf(check(op, {"bool[3,1]", "bool[4]"})) == "bool[3,4]");
    CHECK(errorOf(check(op, {"i32[3]", "i32[3]"})) == "operand 1 (i32[3]) must be bool");
  }
}

TEST_CASE("comparisons") {
  for (Op op : {Op::Lt, Op::Le, Op::Gt, Op::Ge, Op::Eq, Op::Ne}) {
    CAPTURE(opName(op));
    CHECK(typeOf(check(op, {"i32[32]", "i32[]"})) == "bool[32]");
    CHECK(typeOf(check(op, {"f32[4,1]", "f32[3]"})) == "bool[4,3]");
    CHECK(errorOf(check(op, {"i32[32]", "i64[]"})) == "operand 1 (i32[32]) and operand 2 (i64[]) must have the same dtype");
    CHECK(errorOf(check(op, {"f32[2]", "f32[3]"})) == "shapes [2] and [3] do not broadcast");
  }
}

TEST_CASE("Select") {
  CHECK(typeOf(check(Op::Select, {"bool[32]", "f32[]", "f32[]"})) == "f32[32]");
  CHECK(typeOf(check(Op::Select, {"bool[4,1]", "f16[3]", "f16[1]"})) == "f16[4,3]");
  CHECK(errorOf(check(Op::Select, {"f32[3]", "f32[3]", "f32[3]"})) == "operand 1 (f32[3]) must be bool");
  CHECK(errorOf(check(Op::Select, {"bool[3]", "f32[3]", "f16[3]"})) ==
        "operand 2 (f32[3]) and operand 3 (f16[3]) must have the same dtype");
  CHECK(errorOf(check(Op::Select, {"bool[4,1]", "f32[3]", "f32[2]"})) == "shapes [4,3] and [2] do not broadcast");
}

// ----- reductions, contractions, selection, guards -----

TEST_CASE("reductions") {
  for (Op op : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin}) {
    CAPTURE(opName(op));
    CHECK(typeOf(check(op, {"f32[1,4,1,32]"}, {aInt("axis", -1), aBool("keepdim", true)})) == "f32[1,4,1,1]");
    CHECK(typeOf(check(op, {"f32[1,4,1,32]"}, {aInt("axis", 1), aBool("keepdim", false)})) == "f32[1,1,32]");
    CHECK(typeOf(check(op, {"i32[7]"}, {aInt("axis", 0), aBool("keepdim", false)})) == "i32[]");
    CHECK(errorOf(check(op, {"bool[7]"}, {aInt("axis", 0), aBool("keepdim", false)})) ==
          "operand 1 (bool[7]) must be numeric");
    CHECK(errorOf(check(op, {"f32[2,3]"}, {aInt("axis", -3), aBool("keepdim", false)})) ==
          "axis -3 is out of range for rank 2");
  }
}

TEST_CASE("MatMul: batched, with broadcast batch dims") {
  CHECK(typeOf(check(Op::MatMul, {"f32[2,3]", "f32[3,4]"})) == "f32[2,4]");
  CHECK(typeOf(check(Op::MatMul, {"f32[1,4,1,16]", "f32[1,4,16,32]"})) == "f32[1,4,1,32]");
  CHECK(typeOf(check(Op::MatMul, {"f32[2,1,5,3]", "f32[4,3,7]"})) == "f32[2,4,5,7]");
  CHECK(typeOf(check(Op::MatMul, {"bf16[5,3]", "bf16[6,3,2]"})) == "bf16[6,5,2]");
  CHECK(typeOf(check(Op::MatMul, {"i32[2,2]", "i32[2,2]"})) == "i32[2,2]");
  CHECK(errorOf(check(Op::MatMul, {"f32[2,3]", "f32[4,5]"})) == "contracted dimensions differ: f32[2,3] x f32[4,5]");
  CHECK(errorOf(check(Op::MatMul, {"f32[3]", "f32[3,4]"})) == "matmul operands must have rank 2 or more");
  CHECK(errorOf(check(Op::MatMul, {"f32[2,5,3]", "f32[3,3,4]"})) ==
        "batch dimensions of f32[2,5,3] and f32[3,3,4] do not broadcast");
  CHECK(errorOf(check(Op::MatMul, {"f16[2,3]", "f32[3,4]"})) ==
        "operand 1 (f16[2,3]) and operand 2 (f32[3,4]) must have the same dtype");
  CHECK(errorOf(check(Op::MatMul, {"f32[2,3]", "i32[3,4]"})) ==
        "operand 1 (f32[2,3]) and operand 2 (i32[3,4]) must have the same dtype");
  // An f32 a widens a two-byte b; the result is f32.
  CHECK(typeOf(check(Op::MatMul, {"f32[2,3]", "f16[3,4]"})) == "f32[2,4]");
  CHECK(typeOf(check(Op::MatMul, {"f32[1,2,3]", "bf16[3,4]"})) == "f32[1,2,4]");
  CHECK(errorOf(check(Op::MatMul, {"bool[2,3]", "bool[3,4]"})) == "operand 1 (bool[2,3]) must be numeric");
}

TEST_CASE("MatMul: transpose_b reads b as [..., n, k]") {
  CHECK(typeOf(check(Op::MatMul, {"f32[2,3]", "f32[4,3]"}, {aBool("transpose_b", true)})) == "f32[2,4]");
  CHECK(typeOf(check(Op::MatMul, {"f32[2,5,3]", "bf16[7,3]"}, {aBool("transpose_b", true)})) == "f32[2,5,7]");
  CHECK(typeOf(check(Op::MatMul, {"f32[2,3]", "f32[3,4]"}, {aBool("transpose_b", false)})) == "f32[2,4]");
  CHECK(errorOf(check(Op::MatMul, {"f32[2,3]", "f32[3,4]"}, {aBool("transpose_b", true)})) ==
        "contracted dimensions differ: f32[2,3] x f32[3,4] transposed");
  CHECK(errorOf(check(Op::MatMul, {"f32[2,3]", "f32[4,3]"}, {aInt("transpose_b", 1)})).find("transpose_b") !=
        std::string::npos);
}

TEST_CASE("Sample: a token a row of logits, each parameter one a row, a penalty list a run of rows") {
  // The penalties: P lists of S entries, P dividing the rows.
  using Rows = std::array<const char*, 6>;
  auto with = [](Rows o, const char* rep, const char* seen, const char* amounts) {
    return check(Op::Sample, {o[0], o[1], o[2], o[3], o[4], o[5], rep, seen, amounts});
  };
  const Rows three = {"f32[3,50]", "f32[3]", "i32[3]", "f32[3]", "f32[3]", "f32[3]"};
  CHECK(typeOf(with(Rows{"f32[3,1,50]", "f32[3,1]", "i32[3,1]", "f32[3,1]", "f32[3,1]", "f32[3,1]"}, "f32[3]", "i32[3,8]",
                    "f32[3,8]")) == "i32[3,1]");
  CHECK(typeOf(with(Rows{"f32[2,4,50]", "f32[2,4]", "i32[2,4]", "f32[2,4]", "f32[2,4]", "f32[2,4]"}, "f32[2]", "i32[2,1]",
                    "f32[2,1]")) == "i32[2,4]");  // a list a sequence of 4 rows
  CHECK(typeOf(with(Rows{"bf16[7]", "f32[]", "i32[]", "f32[]", "f32[]", "f32[]"}, "f32[1]", "i32[1,5]", "f32[1,5]")) == "i32[]");
  CHECK(errorOf(with(Rows{"f32[3,50]", "f32[3]", "f32[3]", "f32[3]", "f32[3]", "f32[3]"}, "f32[3]", "i32[3,4]", "f32[3,4]")) ==
        "operand 3 (f32[3]), the top_k, must be i32[3]: one a row of the logits");
  CHECK(errorOf(with(Rows{"f32[3,50]", "f32[3]", "i32[3]", "f32[3]", "f32[3]", "f32[1,3]"}, "f32[3]", "i32[3,4]", "f32[3,4]")) ==
        "operand 6 (f32[1,3]), the uniform, must be f32[3]: one a row of the logits");
  CHECK(errorOf(with(Rows{"i32[3,50]", "f32[3]", "i32[3]", "f32[3]", "f32[3]", "f32[3]"}, "f32[3]", "i32[3,4]", "f32[3,4]")) ==
        "operand 1 (i32[3,50]) must be a float tensor of rank 1 or more with a last axis of at least 1");
  CHECK(errorOf(with(Rows{"f32[3,0]", "f32[3]", "i32[3]", "f32[3]", "f32[3]", "f32[3]"}, "f32[3]", "i32[3,4]", "f32[3,4]"))
            .find("at least 1") != std::string::npos);
  CHECK(errorOf(with(three, "f32[2]", "i32[2,4]", "f32[2,4]")) ==
        "operand 7 (f32[2]), the repetition_penalty, must be f32[P] with P dividing the 3 rows of the logits: one a run "
        "of rows");
  CHECK(errorOf(with(three, "f16[3]", "i32[3,4]", "f32[3,4]")).find("the repetition_penalty") != std::string::npos);
  CHECK(errorOf(with(three, "f32[3]", "i32[1,4]", "f32[1,4]")) ==
        "operand 8 (i32[1,4]), the seen tokens, must be i32[3, S] with S at least 1: a list a run of rows");
  CHECK(errorOf(with(three, "f32[3]", "i32[3,0]", "f32[3,0]")).find("the seen tokens") != std::string::npos);
  CHECK(errorOf(with(three, "f32[3]", "f32[3,4]", "f32[3,4]")).find("the seen tokens") != std::string::npos);
  CHECK(errorOf(with(three, "f32[3]", "i32[3,4]", "f32[3,5]")) ==
        "operand 9 (f32[3,5]), the seen_penalty, must be f32[3,4]: one a seen token");
  CHECK(errorOf(check(Op::Sample, {three[0], three[1], three[2], three[3], three[4], three[5]})) ==
        "Sample takes 9 operands, got 6");
}

TEST_CASE("TopK: two results") {
  TypeResult r = check(Op::TopK, {"f32[2,10]"}, {aInt("k", 3)});
  REQUIRE(r.error.empty());
  REQUIRE(r.types.size() == 2);
  CHECK(r.types[0] == ty("f32[2,3]"));
  CHECK(r.types[1] == ty("i32[2,3]"));
  CHECK(typeOf(check(Op::TopK, {"i64[10]"}, {aInt("k", 10)})) == "i64[10], i32[10]");
  CHECK(errorOf(check(Op::TopK, {"f32[2,10]"}, {aInt("k", 11)})) == "k 11 is not within the last axis of size 10");
  CHECK(errorOf(check(Op::TopK, {"f32[2,10]"}, {aInt("k", 0)})) == "k 0 is not within the last axis of size 10");
  CHECK(errorOf(check(Op::TopK, {"f32[]"}, {aInt("k", 1)})) ==
        "operand 1 (f32[]) must be a numeric tensor of rank 1 or more");
  CHECK(errorOf(check(Op::TopK, {"bool[4]"}, {aInt("k", 1)})) ==
        "operand 1 (bool[4]) must be a numeric tensor of rank 1 or more");
}

TEST_CASE("IndexGuard") {
  CHECK(typeOf(check(Op::IndexGuard, {"i32[2]"}, {aInt("lo", 1), aInt("hi", 32)})) == "i32[2], bool[]");
  CHECK(typeOf(check(Op::IndexGuard, {"i64[]"}, {aInt("lo", 5), aInt("hi", 5)})) == "i64[], bool[]");
  CHECK(errorOf(check(Op::IndexGuard, {"i32[2]"}, {aInt("lo", 33), aInt("hi", 32)})) == "guard range is empty: lo > hi");
  CHECK(errorOf(check(Op::IndexGuard, {"f32[2]"}, {aInt("lo", 0), aInt("hi", 1)})) ==
        "operand 1 (f32[2]) must be an integer type");
  CHECK(errorOf(check(Op::IndexGuard, {"i32[2]"}, {aInt("lo", 0)})) == "IndexGuard needs attribute 'hi'");
}

// ----- compiler-formed ops -----

TEST_CASE("Attention: dense") {
  Attrs a = attnAttrs(4, "dense", "none", "capacity");
  CHECK(typeOf(check(Op::Attention, {"f32[1,32,1,128]", "f32[1,8,4096,128]", "f32[1,8,4096,128]"}, a)) ==
        "f32[1,32,1,128]");
  // value width independent of the key width; prefill rows
  CHECK(typeOf(check(Op::Attention, {"bf16[2,32,7,192]", "bf16[2,8,7,192]", "bf16[2,8,7,64]"}, a)) == "bf16[2,32,7,64]");
  CHECK(errorOf(check(Op::Attention, {"f32[1,32,1,128]", "f32[1,4,4096,128]", "f32[1,4,4096,128]"}, a)) ==
        "key f32[1,4,4096,128] must be [1,8,4096,128]");
  CHECK(errorOf(check(Op::Attention, {"f32[1,32,1,128]", "f32[1,8,4096,64]", "f32[1,8,4096,128]"}, a)) ==
        "key f32[1,8,4096,64] must be [1,8,4096,128]");
  CHECK(errorOf(check(Op::Attention, {"f32[1,32,1,128]", "f32[1,8,4096,128]", "f32[1,8,4095,128]"}, a)) ==
        "value f32[1,8,4095,128] must be [1,8,4096,128]");
  CHECK(errorOf(check(Op::Attention, {"f32[1,32,1,128]", "f32[1,8,4096,128]", "f32[8,4096,128]"}, a)) ==
        "operand 3 (f32[8,4096,128]) must have rank 4");
  CHECK(errorOf(check(Op::Attention, {"i32[1,32,1,128]", "i32[1,8,4096,128]", "i32[1,8,4096,128]"}, a)) ==
        "operand 1 (i32[1,32,1,128]) must be a float type");
  CHECK(errorOf(check(Op::Attention, {"f32[32,1,128]", "f32[1,8,4096,128]", "f32[1,8,4096,128]"}, a)) ==
        "operand 1 (f32[32,1,128]) must have rank 4");
  CHECK(errorOf(check(Op::Attention, {"f32[1,32,1,128]", "f16[1,8,4096,128]", "f32[1,8,4096,128]"}, a)) ==
        "operand 1 (f32[1,32,1,128]) and operand 2 (f16[1,8,4096,128]) must have the same dtype");
  CHECK(errorOf(check(Op::Attention, {"f32[1,32,1,128]", "f32[1,8,4096,128]", "f16[1,8,4096,128]"}, a)) ==
        "operand 1 (f32[1,32,1,128]) and operand 3 (f16[1,8,4096,128]) must have the same dtype");
  a = attnAttrs(3, "dense", "none", "capacity");
  CHECK(errorOf(check(Op::Attention, {"f32[1,32,1,128]", "f32[1,8,4096,128]", "f32[1,8,4096,128]"}, a)) ==
        "n_rep 3 does not divide the 32 query heads");
  a = attnAttrs(0, "dense", "none", "capacity");
  CHECK(errorOf(check(Op::Attention, {"f32[1,32,1,128]", "f32[1,8,4096,128]", "f32[1,8,4096,128]"}, a)) ==
        "n_rep 0 does not divide the 32 query heads");
  a = attnAttrs(4, "dense", "none", "capacity");
  CHECK(errorOf(check(Op::Attention, {"f32[1,32,1,128]", "f32[1,8,4096,128]", "f32[1,8,4096,128]", "f32[1,1,1,4096]"},
                      a)) == "attention with key=dense, mask=none, bound=capacity takes 3 operands, got 4");
}

TEST_CASE("Attention: causal mask over the query positions, with a window") {
  Attrs a = attnAttrs(4, "dense", "causal", "capacity");
  const char* q = "f32[2,32,7,128]";
  const char* k = "f32[2,8,4096,128]";
  CHECK(typeOf(check(Op::Attention, {q, k, k, "i32[2,7]"}, a)) == "f32[2,32,7,128]");
  Attrs w = a;
  w.insert(w.begin() + 4, aInt("window", 4096));
  CHECK(typeOf(check(Op::Attention, {q, k, k, "i32[2,7]"}, w)) == "f32[2,32,7,128]");
  CHECK(errorOf(check(Op::Attention, {q, k, k, "i32[7]"}, a)) == "query positions i32[7] must be i32[2,7]");
  CHECK(errorOf(check(Op::Attention, {q, k, k, "i64[2,7]"}, a)) == "query positions i64[2,7] must be i32[2,7]");
  CHECK(errorOf(check(Op::Attention, {q, k, k, "f32[2,1,7,4096]"}, a)) ==
        "query positions f32[2,1,7,4096] must be i32[2,7]");
  CHECK(errorOf(check(Op::Attention, {q, k, k}, a)) ==
        "attention with key=dense, mask=causal, bound=capacity takes 4 operands, got 3");
  w[4] = aInt("window", 0);
  CHECK(errorOf(check(Op::Attention, {q, k, k, "i32[2,7]"}, w)) == "window 0 must be in [1, 2^31 - 1]");
  w[4] = aInt("window", int64_t(1) << 31);
  CHECK(errorOf(check(Op::Attention, {q, k, k, "i32[2,7]"}, w)) == "window 2147483648 must be in [1, 2^31 - 1]");
  Attrs additive = attnAttrs(4, "dense", "additive", "capacity");
  additive.insert(additive.begin() + 4, aInt("window", 8));
  CHECK(errorOf(check(Op::Attention, {q, k, k, "f32[2,1,7,4096]"}, additive)) ==
        "window is an attribute of mask=causal only, not mask=additive");
  // the positions take the mask's place: before the live length
  Attrs live = attnAttrs(4, "paged", "causal", "live");
  CHECK(typeOf(check(Op::Attention, {q, "f32[99,8,128]", "f32[99,8,128]", "i32[2,4096]", "i32[2,7]", "i32[2]"},
                     live)) == "f32[2,32,7,128]");
}

TEST_CASE("Attention: additive mask, ALiBi head axis") {
  Attrs a = attnAttrs(4, "dense", "additive", "capacity");
  const char* q = "f32[1,32,1,128]";
  const char* k = "f32[1,8,4096,128]";
  CHECK(typeOf(check(Op::Attention, {q, k, k, "f32[1,1,1,4096]"}, a)) == "f32[1,32,1,128]");
  CHECK(typeOf(check(Op::Attention, {q, k, k, "f32[1,32,1,4096]"}, a)) == "f32[1,32,1,128]");  // Hm = Hq
  CHECK(errorOf(check(Op::Attention, {q, k, k, "f32[1,8,1,4096]"}, a)) == "mask f32[1,8,1,4096] must be [1, 1 or 32, 1, 4096]");
  CHECK(errorOf(check(Op::Attention, {q, k, k, "f32[1,1,2,4096]"}, a)) == "mask f32[1,1,2,4096] must be [1, 1 or 32, 1, 4096]");
  CHECK(errorOf(check(Op::Attention, {q, k, k, "f32[1,1,1,4095]"}, a)) == "mask f32[1,1,1,4095] must be [1, 1 or 32, 1, 4096]");
  CHECK(errorOf(check(Op::Attention, {q, k, k, "f32[1,1,4096]"}, a)) == "mask f32[1,1,4096] must be [1, 1 or 32, 1, 4096]");
  CHECK(errorOf(check(Op::Attention, {q, k, k, "f16[1,1,1,4096]"}, a)) ==
        "operand 1 (f32[1,32,1,128]) and operand 4 (f16[1,1,1,4096]) must have the same dtype");
  CHECK(errorOf(check(Op::Attention, {q, k, k}, a)) ==
        "attention with key=dense, mask=additive, bound=capacity takes 4 operands, got 3");
}

TEST_CASE("Attention: softcap") {
  Attrs a = attnAttrs(2, "dense", "none", "capacity");
  a.insert(a.begin() + 1, aFloat("softcap", 50.0));
  CHECK(typeOf(check(Op::Attention, {"f32[1,8,1,256]", "f32[1,4,64,256]", "f32[1,4,64,256]"}, a)) == "f32[1,8,1,256]");
  a[1] = aFloat("softcap", 0.0);
  CHECK(errorOf(check(Op::Attention, {"f32[1,8,1,256]", "f32[1,4,64,256]", "f32[1,4,64,256]"}, a)) ==
        "softcap must be positive and finite");
  a[1] = aFloat("softcap", -30.0);
  CHECK(errorOf(check(Op::Attention, {"f32[1,8,1,256]", "f32[1,4,64,256]", "f32[1,4,64,256]"}, a)) ==
        "softcap must be positive and finite");
  a[1] = aFloat("softcap", NAN);
  CHECK(errorOf(check(Op::Attention, {"f32[1,8,1,256]", "f32[1,4,64,256]", "f32[1,4,64,256]"}, a)) ==
        "softcap must be positive and finite");
}

TEST_CASE("Attention: split key with k_shared") {
  // q, k, k_shared, v: k [B,Hkv,Lk,Dk-s], k_shared [B,1,Lk,s]
  Attrs a = attnAttrs(1, "split", "none", "capacity");
  CHECK(typeOf(check(Op::Attention, {"f32[1,16,1,192]", "f32[1,16,64,128]", "f32[1,1,64,64]", "f32[1,16,64,128]"}, a)) ==
        "f32[1,16,1,128]");
  CHECK(errorOf(check(Op::Attention, {"f32[1,16,1,192]", "f32[1,16,64,128]", "f32[1,16,64,64]", "f32[1,16,64,128]"},
                      a)) == "shared key f32[1,16,64,64] must be [1,1,64,s] with s below the key width 192");
  CHECK(errorOf(check(Op::Attention, {"f32[1,16,1,192]", "f32[1,16,64,128]", "f32[1,1,32,64]", "f32[1,16,64,128]"},
                      a)) == "shared key f32[1,1,32,64] must be [1,1,64,s] with s below the key width 192");
  CHECK(errorOf(check(Op::Attention, {"f32[1,16,1,64]", "f32[1,16,64,1]", "f32[1,1,64,64]", "f32[1,16,64,128]"}, a)) ==
        "shared key f32[1,1,64,64] must be [1,1,64,s] with s below the key width 64");
  CHECK(errorOf(check(Op::Attention, {"f32[1,16,1,192]", "f32[1,16,64,100]", "f32[1,1,64,64]", "f32[1,16,64,128]"},
                      a)) == "key f32[1,16,64,100] must be [1,16,64,128]");
  CHECK(errorOf(check(Op::Attention, {"f32[1,16,1,192]", "f32[1,16,64,128]", "f16[1,1,64,64]", "f32[1,16,64,128]"},
                      a)) == "operand 1 (f32[1,16,1,192]) and operand 3 (f16[1,1,64,64]) must have the same dtype");
  CHECK(errorOf(check(Op::Attention, {"f32[1,16,1,192]", "f32[1,16,64,128]", "f32[1,16,64,128]"}, a)) ==
        "attention with key=split, mask=none, bound=capacity takes 4 operands, got 3");
}

TEST_CASE("Attention: paged key with read map") {
  // q, k pool [S,Hkv,Dk], v pool [S,Hkv,Dv], read [B,Lk]
  Attrs a = attnAttrs(4, "paged", "none", "capacity");
  CHECK(typeOf(check(Op::Attention, {"f32[2,8,1,64]", "f32[256,2,64]", "f32[256,2,32]", "i32[2,128]"}, a)) ==
        "f32[2,8,1,32]");
  CHECK(errorOf(check(Op::Attention, {"f32[2,8,1,64]", "f32[256,2,64]", "f32[256,2,32]", "i32[3,128]"}, a)) ==
        "read map i32[3,128] must have one row per batch row");
  CHECK(errorOf(check(Op::Attention, {"f32[2,8,1,64]", "f32[256,2,64]", "f32[256,2,32]", "f32[2,128]"}, a)) ==
        "operand 4 (f32[2,128]) must be i32");
  CHECK(errorOf(check(Op::Attention, {"f32[2,8,1,64]", "f32[256,2,64]", "f32[256,2,32]", "i32[256]"}, a)) ==
        "operand 4 (i32[256]) must have rank 2");
  CHECK(errorOf(check(Op::Attention, {"f32[2,8,1,64]", "f32[256,4,64]", "f32[256,4,32]", "i32[2,128]"}, a)) ==
        "paged pools f32[256,4,64] and f32[256,4,32] must be [slots, 2, d] with key width 64");
  CHECK(errorOf(check(Op::Attention, {"f32[2,8,1,64]", "f32[256,2,64]", "f32[128,2,32]", "i32[2,128]"}, a)) ==
        "paged pools f32[256,2,64] and f32[128,2,32] must be [slots, 2, d] with key width 64");
  CHECK(errorOf(check(Op::Attention, {"f32[2,8,1,64]", "f32[2,256,2,64]", "f32[256,2,32]", "i32[2,128]"}, a)) ==
        "operand 2 (f32[2,256,2,64]) must have rank 3");
  // paged, masked and live together: q, k, v, read, mask, len
  a = attnAttrs(4, "paged", "additive", "live");
  CHECK(typeOf(check(Op::Attention,
                     {"f32[2,8,1,64]", "f32[256,2,64]", "f32[256,2,64]", "i32[2,128]", "f32[2,1,1,128]", "i32[2]"}, a)) ==
        "f32[2,8,1,64]");
  CHECK(errorOf(check(Op::Attention,
                      {"f32[2,8,1,64]", "f32[256,2,64]", "f32[256,2,64]", "i32[2,128]", "f32[2,1,1,64]", "i32[2]"}, a)) ==
        "mask f32[2,1,1,64] must be [2, 1 or 8, 1, 128]");
}

TEST_CASE("Attention: live length") {
  Attrs a = attnAttrs(2, "dense", "none", "live");
  CHECK(typeOf(check(Op::Attention, {"f32[3,4,1,16]", "f32[3,2,32,16]", "f32[3,2,32,16]", "i32[3]"}, a)) ==
        "f32[3,4,1,16]");
  CHECK(errorOf(check(Op::Attention, {"f32[3,4,1,16]", "f32[3,2,32,16]", "f32[3,2,32,16]", "i64[3]"}, a)) ==
        "len i64[3] must be i32[3]");
  CHECK(errorOf(check(Op::Attention, {"f32[3,4,1,16]", "f32[3,2,32,16]", "f32[3,2,32,16]", "f32[3]"}, a)) ==
        "len f32[3] must be i32[3]");
  CHECK(errorOf(check(Op::Attention, {"f32[3,4,1,16]", "f32[3,2,32,16]", "f32[3,2,32,16]", "i32[1]"}, a)) ==
        "len i32[1] must be i32[3]");
  CHECK(errorOf(check(Op::Attention, {"f32[3,4,1,16]", "f32[3,2,32,16]", "f32[3,2,32,16]", "i32[3,1]"}, a)) ==
        "len i32[3,1] must be i32[3]");
  // masked and live: q, k, v, mask, len
  a = attnAttrs(2, "dense", "additive", "live");
  CHECK(typeOf(check(Op::Attention, {"f32[3,4,1,16]", "f32[3,2,32,16]", "f32[3,2,32,8]", "f32[3,4,1,32]", "i32[3]"}, a)) ==
        "f32[3,4,1,8]");
  // split, masked and live: q, k, k_shared, v, mask, len (seven operands)
  a = attnAttrs(1, "split", "additive", "live");
  CHECK(typeOf(check(Op::Attention, {"f32[1,2,1,24]", "f32[1,2,32,16]", "f32[1,1,32,8]", "f32[1,2,32,16]",
                                     "f32[1,1,1,32]", "i32[1]"},
                     a)) == "f32[1,2,1,16]");
}

TEST_CASE("Rope") {
  Attrs half = {aSym("style", "half")};
  CHECK(typeOf(check(Op::Rope, {"f32[1,32,8,128]", "f32[8,64]", "f32[8,64]"}, half)) == "f32[1,32,8,128]");
  CHECK(typeOf(check(Op::Rope, {"bf16[1,8,4,64]", "bf16[1,1,4,32]", "bf16[32]"}, {aSym("style", "interleaved")})) ==
        "bf16[1,8,4,64]");
  CHECK(errorOf(check(Op::Rope, {"f32[1,32,8,127]", "f32[8,63]", "f32[8,63]"}, half)) ==
        "rope needs an even last axis, got f32[1,32,8,127]");
  CHECK(errorOf(check(Op::Rope, {"f32[1,32,8,128]", "f32[8,128]", "f32[8,64]"}, half)) ==
        "operand 2 (f32[8,128]) does not broadcast to [1,32,8,64]");
  CHECK(errorOf(check(Op::Rope, {"f32[1,32,8,128]", "f32[8,64]", "f32[2,1,32,8,64]"}, half)) ==
        "operand 3 (f32[2,1,32,8,64]) does not broadcast to [1,32,8,64]");
  CHECK(errorOf(check(Op::Rope, {"i32[4]", "i32[2]", "i32[2]"}, half)) == "operand 1 (i32[4]) must be a float type");
  CHECK(errorOf(check(Op::Rope, {"f32[4]", "f16[2]", "f32[2]"}, half)) ==
        "operand 1 (f32[4]) and operand 2 (f16[2]) must have the same dtype");
}

TEST_CASE("BlockTopK") {
  Attrs a = {aInt("k", 8), aInt("block", 64)};
  CHECK(typeOf(check(Op::BlockTopK, {"f32[1,16,64]", "i32[1,16]"}, a)) == "i32[1,16,8]");
  CHECK(errorOf(check(Op::BlockTopK, {"f32[1,16,64]", "i32[1,8]"}, a)) == "query positions i32[1,8] must be [1,16]");
  CHECK(errorOf(check(Op::BlockTopK, {"f32[1,16,64,1]", "i32[1,16]"}, a)) == "operand 1 (f32[1,16,64,1]) must have rank 3");
  CHECK(errorOf(check(Op::BlockTopK, {"i32[1,16,64]", "i32[1,16]"}, a)) == "operand 1 (i32[1,16,64]) must be a float type");
  CHECK(errorOf(check(Op::BlockTopK, {"f32[1,16,64]", "f32[1,16]"}, a)) == "operand 2 (f32[1,16]) must be an integer type");
  CHECK(errorOf(check(Op::BlockTopK, {"f32[1,16,64]", "i32[1,16]"}, {aInt("k", 65), aInt("block", 64)})) ==
        "k 65 is not within the 64 blocks");
  CHECK(errorOf(check(Op::BlockTopK, {"f32[1,16,64]", "i32[1,16]"}, {aInt("k", 0), aInt("block", 64)})) ==
        "k 0 is not within the 64 blocks");
  CHECK(errorOf(check(Op::BlockTopK, {"f32[1,16,64]", "i32[1,16]"}, {aInt("k", 8), aInt("block", 0)})) ==
        "block must be positive");
}

TEST_CASE("SelectedAttention") {
  // q [B,Hq,Lq,Dk], k [B,Hkv,Lk,Dk], v [B,Hkv,Lk,Dv], ids [B,Lq,K], qpos [B,Lq]
  Attrs a = {aFloat("scale", 0.1), aInt("n_rep", 4), aInt("block", 64)};
  const char* q = "f32[1,16,4,128]";
  const char* k = "f32[1,4,1024,128]";
  const char* v = "f32[1,4,1024,64]";
  CHECK(typeOf(check(Op::SelectedAttention, {q, k, v, "i32[1,4,8]", "i32[1,4]"}, a)) == "f32[1,16,4,64]");
  CHECK(errorOf(check(Op::SelectedAttention, {q, k, v, "i32[1,3,8]", "i32[1,4]"}, a)) ==
        "block ids i32[1,3,8] must be [1,4,k]");
  CHECK(errorOf(check(Op::SelectedAttention, {q, k, v, "i32[1,4]", "i32[1,4]"}, a)) ==
        "operand 4 (i32[1,4]) must have rank 3");
  CHECK(errorOf(check(Op::SelectedAttention, {q, k, v, "f32[1,4,8]", "i32[1,4]"}, a)) ==
        "operand 4 (f32[1,4,8]) must be an integer type");
  CHECK(errorOf(check(Op::SelectedAttention, {q, k, v, "i32[1,4,8]", "i32[4]"}, a)) ==
        "query positions i32[4] must be [1,4]");
  CHECK(errorOf(check(Op::SelectedAttention, {q, "f32[1,4,1024,64]", v, "i32[1,4,8]", "i32[1,4]"}, a)) ==
        "key f32[1,4,1024,64] does not match the query");
  CHECK(errorOf(check(Op::SelectedAttention, {q, k, "f32[1,4,512,64]", "i32[1,4,8]", "i32[1,4]"}, a)) ==
        "value f32[1,4,512,64] does not match the key");
  CHECK(errorOf(check(Op::SelectedAttention, {q, k, v, "i32[1,4,8]", "i32[1,4]"},
                      {aFloat("scale", 0.1), aInt("n_rep", 5), aInt("block", 64)})) ==
        "n_rep 5 does not divide the 16 query heads");
  CHECK(errorOf(check(Op::SelectedAttention, {q, k, v, "i32[1,4,8]", "i32[1,4]"},
                      {aFloat("scale", 0.1), aInt("n_rep", 4), aInt("block", 100)})) ==
        "block 100 must divide the key length 1024");
  CHECK(errorOf(check(Op::SelectedAttention, {q, k, v, "i32[1,4,8]", "i32[1,4]"},
                      {aFloat("scale", 0.1), aFloat("softcap", -1), aInt("n_rep", 4), aInt("block", 64)})) ==
        "softcap must be positive and finite");
  CHECK(errorOf(check(Op::SelectedAttention, {"f32[1,16,4,128]", "f16[1,4,1024,128]", v, "i32[1,4,8]", "i32[1,4]"}, a)) ==
        "operand 1 (f32[1,16,4,128]) and operand 2 (f16[1,4,1024,128]) must have the same dtype");
}

// ----- the verifier on .pg graphs -----

TEST_CASE("verify: the decode attention example") {
  const char* text =
      "graph decode_attention\n"
      "input %q : f32[1,4,1,16]\n"
      "input %k : f32[1,2,1,16]\n"
      "state %k_cache : f32[1,2,32,16]\n"
      "slot %pos : i32[] range [0, 31]\n"
      "%kc = DynamicUpdateSlice(%k_cache, %k, %pos) {axis=2} : f32[1,2,32,16]\n"
      "%kt = Transpose(%kc) {perm=[0, 1, 3, 2]} : f32[1,2,16,32]\n"
      "%kpos = Iota() {axis=0} : i32[32]\n"
      "%visible = Le(%kpos, %pos) : bool[32]\n"
      "%out = Attention(%q, %kc, %kc) {scale=0.25, n_rep=2, key=dense, mask=none, bound=capacity} : f32[1,4,1,16]\n"
      "output %out\n"
      "output %visible\n"
      "state_out %k_cache = %kc\n";
  CHECK(verifyText(text) == "ok");
}

TEST_CASE("verify: slot storage rules") {
  CHECK(verifyText("graph t\nslot %pos : f32[] range [0, 3]\n%y = Neg(%pos) : f32[]\noutput %y\n") ==
        "t.pg:2:6: error: slot %pos must have an integer dtype, not f32");
  CHECK(verifyText("graph t\nslot %pos : bool[] range [0, 1]\n%y = Not(%pos) : bool[]\noutput %y\n") ==
        "t.pg:2:6: error: slot %pos must have an integer dtype, not bool");
  CHECK(verifyText("graph t\nslot %pos : i32[] range [7, 0]\n%y = Neg(%pos) : i32[]\noutput %y\n") ==
        "t.pg:2:6: error: slot %pos has an empty range [7, 0]");
  CHECK(verifyText("graph t\nslot %pos : i32[] range [0, 4294967296]\n%y = Neg(%pos) : i32[]\noutput %y\n") ==
        "t.pg:2:6: error: slot %pos range does not fit i32");
  CHECK(verifyText("graph t\nslot %pos : i64[] range [0, 4294967296]\n%y = Neg(%pos) : i64[]\noutput %y\n") == "ok");
  CHECK(verifyText("graph t\nslot %read : i32[2,64] range [0, 255]\n%y = Neg(%read) : i32[2,64]\noutput %y\n") == "ok");
  CHECK(verifyText("graph t\nslot %pos : i32[] range [3, 3]\noutput %pos\n") == "ok");
}

TEST_CASE("verify: state and state_out") {
  CHECK(verifyText("graph t\ninput %x : f32[4]\nstate %kv : f32[4]\n%y = Neg(%x) : f32[4]\noutput %y\n") ==
        "t.pg:3:7: error: state %kv has no state_out");
  CHECK(verifyText("graph t\nstate %kv : f32[4]\n%y = Slice(%kv) {axis=0, start=0, limit=2} : f32[2]\n"
                   "output %y\nstate_out %kv = %y\n") ==
        "t.pg:5:11: error: state_out %y has type f32[2] but state %kv has f32[4]");
  CHECK(verifyText("graph t\nstate %kv : f32[4]\n%y = Convert(%kv) : f16[4]\noutput %y\nstate_out %kv = %y\n") ==
        "t.pg:5:11: error: state_out %y has type f16[4] but state %kv has f32[4]");
  CHECK(verifyText("graph t\ninput %x : f32[4]\nstate %kv : f32[4]\noutput %x\nstate_out %kv = %x\n") ==
        "t.pg:5:11: error: the new value of %kv must be computed by an eqn");
  CHECK(verifyText("graph t\nstate %kv : f32[4]\noutput %kv\nstate_out %kv = %kv\n") ==
        "t.pg:4:11: error: the new value of %kv must be computed by an eqn");
  CHECK(verifyText("graph t\ninput %x : f32[4]\n%y = Neg(%x) : f32[4]\noutput %y\nstate_out %x = %y\n") ==
        "t.pg:5:11: error: %x is not a state");
  CHECK(verifyText("graph t\nstate %kv : f32[4]\n%y = Neg(%kv) : f32[4]\n%z = Exp(%y) : f32[4]\noutput %z\n"
                   "state_out %kv = %y\nstate_out %kv = %z\n") ==
        "t.pg:7:11: error: state %kv has two state_out values");
  CHECK(verifyText("graph t\nstate %kv : f32[4]\n%y = Neg(%kv) : f32[4]\noutput %y\nstate_out %kv = %y\n") == "ok");
}

TEST_CASE("verify: validation witnesses") {
  CHECK(verifyText("graph t\ninput %x : f32[]\n%y = Neg(%x) : f32[]\noutput %y\nvalidation %y\n") ==
        "t.pg:5:12: error: validation %y must be bool[], not f32[]");
  CHECK(verifyText("graph t\ninput %x : f32[2]\n%b = Gt(%x, %x) : bool[2]\noutput %x\nvalidation %b\n") ==
        "t.pg:5:12: error: validation %b must be bool[], not bool[2]");
  CHECK(verifyText("graph t\nslot %len : i32[1] range [0, 64]\n%c, %ok = IndexGuard(%len) {lo=1, hi=32} : i32[1], bool[]\n"
                   "output %c\n") ==
        "t.pg:3:11: error: the witness %ok of this IndexGuard is not declared a validation output");
  // declared as an output is not enough
  CHECK(verifyText("graph t\nslot %len : i32[1] range [0, 64]\n%c, %ok = IndexGuard(%len) {lo=1, hi=32} : i32[1], bool[]\n"
                   "output %c\noutput %ok\n") ==
        "t.pg:3:11: error: the witness %ok of this IndexGuard is not declared a validation output");
  CHECK(verifyText("graph t\nslot %len : i32[1] range [0, 64]\n%c, %ok = IndexGuard(%len) {lo=1, hi=32} : i32[1], bool[]\n"
                   "output %c\nvalidation %ok\n") == "ok");
}

TEST_CASE("verify: outputs") {
  CHECK(verifyText("graph t\ninput %x : f32[2]\n%y = Neg(%x) : f32[2]\n") == "t.pg:1:1: error: graph 't' has no output");
  CHECK(verifyText("# a comment first\n\ngraph t\ninput %x : f32[2]\n") == "t.pg:3:1: error: graph 't' has no output");
  CHECK(verifyText("graph t\ninput %x : f32[2]\n%y = Neg(%x) : f32[2]\noutput %y\noutput %y\n") ==
        "t.pg:5:8: error: %y is declared an output twice");
  CHECK(verifyText("graph t\ninput %x : f32[2]\noutput %x\n") == "ok");
}

TEST_CASE("verify: eqn diagnostics are located") {
  // type rule and table errors: at the op name
  CHECK(verifyText("graph t\ninput %a : f32[2,3]\ninput %b : f32[4,5]\n%c = MatMul(%a, %b) : f32[2,5]\noutput %c\n") ==
        "t.pg:4:6: error: contracted dimensions differ: f32[2,3] x f32[4,5]");
  CHECK(verifyText("graph t\ninput %x : f32[4]\n%y = ReduceSum(%x) {axis=0} : f32[]\noutput %y\n") ==
        "t.pg:3:6: error: ReduceSum needs attribute 'keepdim'");
  CHECK(verifyText("graph t\ninput %x : f32[4]\n%y = Rope(%x, %x, %x) {style=spiral} : f32[4]\noutput %y\n") ==
        "t.pg:3:6: error: attribute 'style' must be one of half, interleaved, got 'spiral'");
  // declared type mismatch: at the type
  CHECK(verifyText("graph t\ninput %a : f32[2,3]\ninput %b : f32[3,5]\n%c = MatMul(%a, %b) : f32[2,3]\noutput %c\n") ==
        "t.pg:4:23: error: declared type f32[2,3] of %c does not match MatMul's result type f32[2,5]");
  // result count
  CHECK(verifyText("graph t\ninput %x : f32[2,10]\n%v = TopK(%x) {k=3} : f32[2,3]\noutput %v\n") ==
        "t.pg:3:6: error: TopK has 2 results, 1 named");
  CHECK(verifyText("graph t\ninput %x : f32[2]\n%a, %b = Neg(%x) : f32[2], f32[2]\noutput %a\n") ==
        "t.pg:3:10: error: Neg has 1 results, 2 named");
  CHECK(verifyText("graph t\ninput %x : f32[2,10]\n%v, %i = TopK(%x) {k=3} : f32[2,3], i32[2,3]\noutput %v\noutput %i\n") ==
        "ok");
  // element count limit (2^48)
  CHECK(verifyText("graph t\ninput %x : f32[65536,65536,65536,2]\noutput %x\n") ==
        "t.pg:2:7: error: %x has more than 2^48 elements");
  CHECK(verifyText("graph t\ninput %x : f32[65536,65536,65536]\noutput %x\n") == "ok");
  CHECK(verifyText("graph t\ninput %x : f32[2]\n%y = Broadcast(%x) : f32[65536,65536,65536,2]\noutput %y\n") ==
        "t.pg:3:22: error: %y has more than 2^48 elements");
}

TEST_CASE("verify: graphs built through the API are checked too") {
  Graph g;
  g.name = "api";
  ValueId x = g.addParam("x", ty("f32[2,3]"), Storage::Input, Loc{"api.pg", 2, 7, ""});
  ValueId w = g.addParam("w", ty("f32[3,4]"), Storage::Weight, Loc{"api.pg", 3, 8, ""});
  Eqn& e = g.addEqn(Op::MatMul, {x, w}, {}, {{"y", ty("f32[2,4]")}}, Loc{"api.pg", 4, 6, ""});
  g.outputs.push_back(Export{e.results[0], Loc{"api.pg", 5, 8, ""}});
  CHECK(bool(verify(g)));
  g.value(g.eqns[0].results[0]).type = ty("f32[2,5]");
  auto s = verify(g);
  REQUIRE_FALSE(bool(s));
  CHECK(s.error().kind == ErrorKind::Verify);
  CHECK(s.error().str() == "api.pg:4:6: error: declared type f32[2,5] of %y does not match MatMul's result type f32[2,4]");
  // a parameter listed twice
  g.value(g.eqns[0].results[0]).type = ty("f32[2,4]");
  g.params.push_back(x);
  s = verify(g);
  REQUIRE_FALSE(bool(s));
  CHECK(s.error().str() == "api.pg:2:7: error: parameter %x is listed twice");
}

TEST_CASE("verifier: names, exports that name no current value, shared state updates") {
  auto verifyText = [](const std::string& text) {
    auto g = parseGraph(text, "t.pg");
    REQUIRE(bool(g));
    auto s = verify(*g);
    return s ? std::string("ok") : s.error().str();
  };
  CHECK(verifyText("graph g\nstate %a : f32[4]\nstate %b : f32[4]\n%n = Neg(%a) : f32[4]\noutput %n\n"
                   "state_out %a = %n\nstate_out %b = %n\n") ==
        "t.pg:7:11: error: %n is the new value of two states; each state needs its own");
  CHECK(verifyText("graph g\ninput %x : i32[1]\n%l, %ok = IndexGuard(%x) {lo=0, hi=3} : i32[1], bool[]\n"
                   "output %l\nvalidation %ok\nvalidation %ok\n") ==
        "t.pg:6:12: error: %ok is declared a validation twice");

  auto g = parseGraph("graph g\ninput %x : f32[4]\n%y = Exp(%x) : f32[4]\n%z = Neg(%y) : f32[4]\noutput %z\n", "t.pg");
  REQUIRE(bool(g));
  Graph bad = *g;
  bad.value(bad.params[0]).name = "two words";
  CHECK(verify(bad).error().str() == "t.pg:2:7: error: value name 'two words' is not a valid name");
  bad = *g;
  bad.value(bad.eqns[1].results[0]).name = "y";
  CHECK(verify(bad).error().str() == "t.pg:4:1: error: value name '%y' is used twice");
  bad = *g;
  bad.name = "9lives";
  CHECK(verify(bad).error().str() == "t.pg:1:1: error: graph name '9lives' is not an identifier");
  bad = *g;
  bad.eqns.pop_back();  // %z is now defined by no eqn
  bad.reindex();
  CHECK(verify(bad).error().str() == "t.pg:5:8: error: output refers to no value");
}

TEST_CASE("ordered comparisons need numbers, Eq and Ne take bools") {
  CHECK(errorOf(check(Op::Lt, {"bool[2]", "bool[2]"})) == "operand 1 (bool[2]) must be numeric to be ordered");
  CHECK(typeOf(check(Op::Eq, {"bool[2]", "bool[2]"})) == "bool[2]");
}

TEST_CASE("integer constants and guard bounds must fit their dtype") {
  CHECK(errorOf(check(Op::Constant, {}, {aFloats("value", {1e10})}, {"i32[]"})) ==
        "constant value 1e+10 does not fit i32");
  CHECK(errorOf(check(Op::IndexGuard, {"i32[1]"}, {aInt("lo", 0), aInt("hi", 99999999999)})) ==
        "guard range does not fit i32");
}

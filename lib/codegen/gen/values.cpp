// How the graph's scalar ops become KIR values (values.h).
#include "codegen/gen/values.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "oracle/tensor.h"

namespace poot::gen {

namespace {

// Float to integer as the oracle stores it: truncate, saturate, NaN to 0.
V floatToInt(Builder& b, V x, DType to) {
  Scalar t = valueScalar(to);
  double top = to == DType::I64 ? 0x1p63 : 0x1p31;
  int64_t maxv = to == DType::I64 ? INT64_MAX : INT32_MAX;
  V inRange = b.min(b.max(x, b.f32(-top)), b.f32(std::nextafter(float(top), 0.0f)));
  V v = b.select(b.ge(x, b.f32(top)), intConst(b, t, maxv), b.convert(inRange, t));
  return b.select(b.isNan(x), intConst(b, t, 0), v);
}

// Truncating integer division; x / -1 wraps, x / 0 is 0.
V intDiv(Builder& b, V x, V y) {
  Scalar t = b.typeOf(x);
  V zero = intConst(b, t, 0), minus1 = intConst(b, t, -1);
  V isZero = b.eq(y, zero), isMinus1 = b.eq(y, minus1);
  V q = b.div(x, b.select(b.binary(Opc::Or, isZero, isMinus1), intConst(b, t, 1), y));
  q = b.select(isMinus1, b.sub(zero, x), q);
  return b.select(isZero, zero, q);
}

}  // namespace

// A Constant value of dtype t: the value the oracle stores (a two-byte
// constant is its dtype's value, so a fused step that reads it computes with
// what the oracle computes with, and a store writes it exactly).
V constValue(Builder& b, DType t, double v) {
  switch (t) {
    case DType::F32: return b.f32(v);
    case DType::F16: return b.f32(halfToFloat(floatToHalf(roundToOddF32(v))));
    case DType::BF16: return b.f32(bf16ToFloat(floatToBf16(roundToOddF32(v))));
    case DType::I32: return b.i32(int64_t(v));
    case DType::I64: return b.i64(int64_t(v));
    case DType::Bool: return b.boolean(v != 0);
  }
  return b.f32(v);
}

// Element `id` of vals[lo, hi): a balanced select tree, a leaf per run of
// bit-identical values.
V constTree(Builder& b, DType t, V id, const std::vector<double>& vals, size_t lo, size_t hi) {
  auto same = [&](double v) { return std::bit_cast<uint64_t>(v) == std::bit_cast<uint64_t>(vals[lo]); };
  if (std::all_of(vals.begin() + ptrdiff_t(lo), vals.begin() + ptrdiff_t(hi), same)) return constValue(b, t, vals[lo]);
  size_t mid = lo + (hi - lo) / 2;
  V left = constTree(b, t, id, vals, lo, mid), right = constTree(b, t, id, vals, mid, hi);
  return b.select(b.lt(id, b.i32(int64_t(mid))), left, right);
}

V convertValue(Builder& b, V x, DType from, DType to) {
  if (isFloat(from)) {
    if (isInt(to)) return floatToInt(b, x, to);
    return to == DType::Bool ? b.ne(x, b.f32(0)) : x;
  }
  Scalar t = valueScalar(to);
  if (from == DType::Bool) return b.select(x, b.constant(t, 1), b.constant(t, 0));
  return to == DType::Bool ? b.ne(x, intConst(b, b.typeOf(x), 0)) : b.convert(x, t);
}

V unaryValue(Builder& b, Op op, V x) {
  if (b.typeOf(x) != Scalar::F32) {
    if (op == Op::Not) return b.unary(Opc::Not, x);
    V neg = b.sub(intConst(b, b.typeOf(x), 0), x);  // wraps at the minimum, as the oracle's
    return op == Op::Neg ? neg : b.select(b.lt(x, intConst(b, b.typeOf(x), 0)), neg, x);
  }
  switch (op) {
    case Op::Exp: return b.exp(x);
    case Op::Log: return b.log(x);
    case Op::Neg: return b.neg(x);
    case Op::Sqrt: return b.sqrt(x);
    case Op::Rsqrt: return b.div(b.f32(1), b.sqrt(x));
    case Op::Recip: return b.div(b.f32(1), x);
    case Op::Tanh: return b.tanh(x);
    case Op::Sin: return b.unary(Opc::Sin, x);
    case Op::Cos: return b.unary(Opc::Cos, x);
    case Op::Abs: return b.unary(Opc::Abs, x);
    case Op::Erf: return b.erf(x);
    default: return b.div(b.f32(1), b.add(b.f32(1), b.exp(b.neg(x))));  // Sigmoid
  }
}

V binaryValue(Builder& b, Op op, V x, V y) {
  bool isF = b.typeOf(x) == Scalar::F32;
  switch (op) {
    case Op::Add: return b.add(x, y);
    case Op::Sub: return b.sub(x, y);
    case Op::Mul: return b.mul(x, y);
    case Op::Div: return isF ? b.div(x, y) : intDiv(b, x, y);
    case Op::Max: return maxOf(b, x, y);
    case Op::Min: return minOf(b, x, y);
    case Op::Pow: return b.pow(x, y);
    case Op::And: return b.binary(Opc::And, x, y);
    case Op::Or: return b.binary(Opc::Or, x, y);
    case Op::Lt: return b.lt(x, y);
    case Op::Le: return b.le(x, y);
    case Op::Gt: return b.gt(x, y);
    case Op::Ge: return b.ge(x, y);
    case Op::Eq: return b.eq(x, y);
    default: return b.ne(x, y);  // Ne
  }
}

V clampIndex(Builder& b, V x, int64_t hi) {
  Scalar t = b.typeOf(x);
  return b.convert(b.min(b.max(x, intConst(b, t, 0)), intConst(b, t, hi)), Scalar::I32);
}

V sliceTarget(Builder& b, V id, const Shape& x, const Shape& u, int64_t axis, V start) {
  int64_t n = x[size_t(axis)], un = u[size_t(axis)], inner = rowMajor(x)[size_t(axis)];
  V o = divBy(b, id, un * inner), c = remBy(b, divBy(b, id, inner), un), i = remBy(b, id, inner);
  V s = clampIndex(b, start, n - un);
  return b.add(b.mul(b.add(b.mul(o, b.i32(n)), b.add(s, c)), b.i32(inner)), i);
}

}  // namespace poot::gen

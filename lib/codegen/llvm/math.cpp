// The f32 expansions. NVPTX exp splits x * log2(e) into an integer n and a
// fraction f, with log2(e) in two parts so that the fraction stays exact for
// large |x|, and scales ex2(f) by ex2(n) (exact for integers); the input is
// first clamped to where the result is 0 or inf so that -inf gives 0 (softmax
// masks) rather than inf - inf. sin and cos reduce by 2*pi in two parts
// (fma), so Rope's arguments of a few thousand keep their accuracy before
// the [-pi, pi] approximations. tanh near 0 is its odd series (the
// (1 - e) / (1 + e) form cancels there); pow follows C's special cases: y == 0
// or x == 1 give 1, a negative x needs an integer y and takes its sign from
// y's parity.
#include "codegen/llvm/math.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <cmath>

namespace poot::llvmgen {

using llvm::Intrinsic::ID;
using llvm::Value;

namespace {

constexpr double kLog2E = 1.4426950408889634074;
constexpr double kLn2 = 0.69314718055994530942;
constexpr double kTwoPi = 6.28318530717958647693;

// v's f32 rounding and what it leaves out, for constants used in two parts.
float hi(double v) { return float(v); }
float lo(double v) { return float(v - double(float(v))); }

}  // namespace

Value* Math::f(double v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); }

Value* Math::unary(ID id, Value* x) { return b_.CreateUnaryIntrinsic(id, x); }

Value* Math::fma(Value* a, Value* b, Value* c) {
  return b_.CreateIntrinsic(llvm::Intrinsic::fma, {b_.getFloatTy()}, {a, b, c});
}

Value* Math::exp2(Value* x) {
  if (target_ == Target::Ptx) return b_.CreateIntrinsic(llvm::Intrinsic::nvvm_ex2_approx_f, {}, {x});
  return unary(llvm::Intrinsic::exp2, x);
}

Value* Math::log2(Value* x) {
  if (target_ == Target::Ptx) return b_.CreateIntrinsic(llvm::Intrinsic::nvvm_lg2_approx_f, {}, {x});
  return unary(llvm::Intrinsic::log2, x);
}

Value* Math::exp(Value* x) {
  if (target_ != Target::Ptx) return unary(llvm::Intrinsic::exp, x);
  Value* c = b_.CreateSelect(b_.CreateFCmpOLT(x, f(-104.0)), f(-104.0), x);
  c = b_.CreateSelect(b_.CreateFCmpOGT(c, f(89.0)), f(89.0), c);
  Value* n = unary(llvm::Intrinsic::rint, b_.CreateFMul(c, f(hi(kLog2E))));
  Value* frac = b_.CreateFAdd(fma(c, f(hi(kLog2E)), b_.CreateFNeg(n)), b_.CreateFMul(c, f(lo(kLog2E))));
  // 2^f * 2 * 2^(n - 1): 2^n alone overflows when n = 128 and f < 0.
  Value* scale = exp2(b_.CreateFSub(n, f(1.0)));
  return b_.CreateFMul(b_.CreateFMul(exp2(frac), f(2.0)), scale);
}

Value* Math::log(Value* x) {
  if (target_ != Target::Ptx) return unary(llvm::Intrinsic::log, x);
  return b_.CreateFMul(log2(x), f(kLn2));
}

Value* Math::reduceTurn(Value* x) {
  Value* k = unary(llvm::Intrinsic::rint, b_.CreateFMul(x, f(1.0 / kTwoPi)));
  Value* r = fma(k, f(-double(hi(kTwoPi))), x);
  return fma(k, f(-double(lo(kTwoPi))), r);
}

Value* Math::sin(Value* x) {
  if (target_ != Target::Ptx) return unary(llvm::Intrinsic::sin, x);
  return b_.CreateIntrinsic(llvm::Intrinsic::nvvm_sin_approx_f, {}, {reduceTurn(x)});
}

Value* Math::cos(Value* x) {
  if (target_ != Target::Ptx) return unary(llvm::Intrinsic::cos, x);
  return b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cos_approx_f, {}, {reduceTurn(x)});
}

Value* Math::tanh(Value* x) {
  Value* ax = unary(llvm::Intrinsic::fabs, x);
  Value* e = exp(b_.CreateFMul(ax, f(-2.0)));
  Value* big = b_.CreateFDiv(b_.CreateFSub(f(1.0), e), b_.CreateFAdd(f(1.0), e));
  big = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, big, x);
  // x - x^3/3 + 2x^5/15: its next term is under 2^-27 of x for |x| < 1/16.
  Value* x2 = b_.CreateFMul(x, x);
  Value* series = fma(b_.CreateFMul(x, x2), fma(x2, f(2.0 / 15.0), f(-1.0 / 3.0)), x);
  return b_.CreateSelect(b_.CreateFCmpOLT(ax, f(0.0625)), series, big);
}

Value* Math::pow(Value* x, Value* y) {
  Value* r = exp2(b_.CreateFMul(y, log2(unary(llvm::Intrinsic::fabs, x))));
  Value* yInt = b_.CreateFCmpOEQ(unary(llvm::Intrinsic::floor, y), y);
  Value* half = b_.CreateFMul(y, f(0.5));
  Value* odd = b_.CreateAnd(yInt, b_.CreateFCmpUNE(unary(llvm::Intrinsic::floor, half), half));
  Value* negBase = b_.CreateSelect(yInt, b_.CreateSelect(odd, b_.CreateFNeg(r), r), f(std::nan("")));
  r = b_.CreateSelect(b_.CreateFCmpOLT(x, f(0.0)), negBase, r);
  Value* one = b_.CreateOr(b_.CreateFCmpOEQ(x, f(1.0)), b_.CreateFCmpOEQ(y, f(0.0)));
  return b_.CreateSelect(one, f(1.0), r);
}

Value* Math::sqrt(Value* x) { return unary(llvm::Intrinsic::sqrt, x); }

Value* Math::rsqrt(Value* x) { return b_.CreateFDiv(f(1.0), sqrt(x)); }

}  // namespace poot::llvmgen

// Names and sizes of KIR's types and opcodes, for the printer, the emitters
// and diagnostics.
#include "codegen/kir/kir.h"

#include <algorithm>
#include <cmath>

namespace poot::kir {

const char* scalarName(Scalar s) {
  switch (s) {
    case Scalar::Bool: return "bool";
    case Scalar::I32: return "i32";
    case Scalar::I64: return "i64";
    case Scalar::F32: return "f32";
    case Scalar::F16: return "f16";
    case Scalar::BF16: return "bf16";
  }
  return "?";
}

const char* elemName(Elem e) {
  switch (e) {
    case Elem::F32: return "f32";
    case Elem::F16: return "f16";
    case Elem::BF16: return "bf16";
    case Elem::I32: return "i32";
    case Elem::I64: return "i64";
    case Elem::U8: return "u8";
    case Elem::I8: return "i8";
    case Elem::U16: return "u16";
  }
  return "?";
}

Scalar valueOf(Elem e) {
  switch (e) {
    case Elem::F32: return Scalar::F32;
    case Elem::F16: return Scalar::F16;
    case Elem::BF16: return Scalar::BF16;
    case Elem::I64: return Scalar::I64;
    default: return Scalar::I32;
  }
}

int elemBytes(Elem e) {
  switch (e) {
    case Elem::U8:
    case Elem::I8: return 1;
    case Elem::F16:
    case Elem::BF16:
    case Elem::U16: return 2;
    case Elem::I64: return 8;
    default: return 4;
  }
}

int scalarBytes(Scalar s) {
  switch (s) {
    case Scalar::Bool: return 0;
    case Scalar::F16:
    case Scalar::BF16: return 2;
    case Scalar::I64: return 8;
    default: return 4;
  }
}

namespace {

using I = int64_t;
using U = uint64_t;
// Integer rows compute on the 64-bit two's-complement bits; the caller keeps
// the low `bits` (kir.h: wrapping), so only the right shift needs `bits`.
constexpr U lowMask(int bits) { return bits == 64 ? ~U(0) : (U(1) << bits) - 1; }

OpInfo binary(const char* name, Types types, float (*f32)(float, float), I (*ints)(I, I, int),
              Guard guard = Guard::None) {
  return {name, Defines::Value, Scope::Thread, false, Form::Binary, types, {f32, ints, nullptr, guard}};
}
OpInfo unary(const char* name, Types types, float (*f32)(float, float), I (*ints)(I, I, int) = nullptr) {
  return {name, Defines::Value, Scope::Thread, false, Form::Unary, types, {f32, ints, nullptr, Guard::None}};
}
OpInfo compare(const char* name, Types types, bool (*holds)(std::partial_ordering)) {
  return {name, Defines::Value, Scope::Thread, false, Form::Compare, types, {nullptr, nullptr, holds, Guard::None}};
}

}  // namespace

const OpInfo& opInfo(Opc o) {
  using D = Defines;
  using S = Scope;
  using F = Form;
  using P = std::partial_ordering;
  constexpr Types f32 = typeBit(Scalar::F32), compared = kNumberTypes | typeBit(Scalar::Bool);
  static const OpInfo table[] = {
      {"const", D::Value, S::Thread, false},
      {"group.x", D::Value, S::Thread, false, F::Id, typeBit(Scalar::I32)},
      {"group.y", D::Value, S::Thread, false, F::Id, typeBit(Scalar::I32)},
      {"local", D::Value, S::Thread, false, F::Id, typeBit(Scalar::I32)},
      binary("add", kNumberTypes, [](float x, float y) { return x + y; }, [](I x, I y, int) { return I(U(x) + U(y)); }),
      binary("sub", kNumberTypes, [](float x, float y) { return x - y; }, [](I x, I y, int) { return I(U(x) - U(y)); }),
      binary("mul", kNumberTypes, [](float x, float y) { return x * y; }, [](I x, I y, int) { return I(U(x) * U(y)); }),
      // x / -1 and x % -1 apart: the one quotient that overflows wraps.
      binary("div", kNumberTypes, [](float x, float y) { return x / y; },
             [](I x, I y, int) { return y == -1 ? I(U(0) - U(x)) : x / y; }, Guard::Divisor),
      binary("rem", kNumberTypes, [](float x, float y) { return std::fmod(x, y); },
             [](I x, I y, int) { return y == -1 ? I(0) : x % y; }, Guard::Divisor),
      binary("min", kNumberTypes, [](float x, float y) { return std::fmin(x, y); },
             [](I x, I y, int) { return std::min(x, y); }),
      binary("max", kNumberTypes, [](float x, float y) { return std::fmax(x, y); },
             [](I x, I y, int) { return std::max(x, y); }),
      binary("pow", f32, [](float x, float y) { return std::pow(x, y); }, nullptr),
      binary("and", kBitTypes, nullptr, [](I x, I y, int) { return x & y; }),
      binary("or", kBitTypes, nullptr, [](I x, I y, int) { return x | y; }),
      binary("xor", kBitTypes, nullptr, [](I x, I y, int) { return x ^ y; }),
      binary("shl", kIntTypes, nullptr, [](I x, I y, int) { return I(U(x) << y); }, Guard::ShiftAmount),
      // C++20 defines >> on a negative value as sign-extending.
      binary("shr.a", kIntTypes, nullptr, [](I x, I y, int) { return x >> y; }, Guard::ShiftAmount),
      binary("shr.l", kIntTypes, nullptr, [](I x, I y, int bits) { return I((U(x) & lowMask(bits)) >> y); },
             Guard::ShiftAmount),
      unary("neg", kNumberTypes, [](float x, float) { return -x; }, [](I x, I, int) { return I(U(0) - U(x)); }),
      unary("not", kBitTypes, nullptr, [](I x, I, int) { return ~x; }),
      unary("abs", kNumberTypes, [](float x, float) { return std::fabs(x); },
            [](I x, I, int) { return x < 0 ? I(U(0) - U(x)) : x; }),
      unary("exp", f32, [](float x, float) { return std::exp(x); }),
      unary("exp2", f32, [](float x, float) { return std::exp2(x); }),
      unary("log", f32, [](float x, float) { return std::log(x); }),
      unary("sqrt", f32, [](float x, float) { return std::sqrt(x); }),
      unary("rsqrt", f32, [](float x, float) { return 1.0f / std::sqrt(x); }),
      unary("tanh", f32, [](float x, float) { return std::tanh(x); }),
      unary("sin", f32, [](float x, float) { return std::sin(x); }),
      unary("cos", f32, [](float x, float) { return std::cos(x); }),
      unary("floor", f32, [](float x, float) { return std::floor(x); }),
      compare("lt", kNumberTypes, [](P p) { return p < 0; }),
      compare("le", kNumberTypes, [](P p) { return p <= 0; }),
      compare("gt", kNumberTypes, [](P p) { return p > 0; }),
      compare("ge", kNumberTypes, [](P p) { return p >= 0; }),
      compare("eq", compared, [](P p) { return p == 0; }),
      compare("ne", compared, [](P p) { return p != 0; }),
      {"select", D::Value, S::Thread, false},
      {"fma", D::Value, S::Thread, false},
      {"convert", D::Value, S::Thread, false},
      {"bitcast", D::Value, S::Thread, false},
      {"load", D::Value, S::Thread, false},
      {"load.vec", D::Wide, S::Thread, false},
      {"lane", D::Value, S::Thread, false},
      {"store", D::Nothing, S::Thread, false},
      {"shared.load", D::Value, S::Thread, false},
      {"shared.load.vec", D::Wide, S::Thread, false},
      {"shared.store", D::Nothing, S::Thread, false},
      {"shared.store.vec", D::Nothing, S::Thread, false},
      {"shuffle.xor", D::Value, S::Warp, true},
      {"mma", D::Wide, S::Warp, true},
      {"mma.shared", D::Wide, S::Warpgroup, true},
      {"mma.shared.b", D::Wide, S::Warpgroup, true},
      {"mma.wait", D::Wide, S::Warpgroup, true},
      {"copy.async", D::Nothing, S::Thread, true},
      {"async.commit", D::Nothing, S::Thread, true},
      {"async.wait", D::Nothing, S::Thread, true},
      {"get", D::Value, S::Thread, false},
      {"set", D::Nothing, S::Thread, false},
      {"for", D::Value, S::Thread, false},
      {"if", D::Nothing, S::Thread, false},
      {"barrier", D::Nothing, S::Workgroup, false},
  };
  static_assert(sizeof table / sizeof table[0] == size_t(Opc::Barrier) + 1);
  return table[size_t(o)];
}

namespace {
bool wave64(MatrixOp op) { return matrixShape(op).threads == 64; }
}  // namespace

int64_t groupThreads(const Inst& in) {
  if (in.op == Opc::Mma && in.ref >= 0 && size_t(in.ref) < matrixShapes().size())
    return matrixShape(MatrixOp(in.ref)).threads;
  return scopeThreads(opInfo(in.op).scope);
}

RowCol mmaA(MatrixOp op, int lane, int e) {
  if (wave64(op)) return {lane % 16, 4 * (lane / 16) + e};
  int g = lane / 4, t = lane % 4;
  if (op == MatrixOp::M16N8K8Tf32) return {g + 8 * (e % 2), t + 4 * (e / 2)};
  return {g + 8 * ((e / 2) % 2), 2 * t + e % 2 + 8 * (e / 4)};
}

RowCol mmaB(MatrixOp op, int lane, int e) {
  if (wave64(op)) return {4 * (lane / 16) + e, lane % 16};
  int g = lane / 4, t = lane % 4;
  if (op == MatrixOp::M16N8K8Tf32) return {t + 4 * e, g};
  return {2 * t + e % 2 + 8 * (e / 2), g};
}

Scalar mmaOperand(MatrixOp op) {
  DType t = matrixShape(op).operand;
  return t == DType::BF16 ? Scalar::BF16 : t == DType::F16 ? Scalar::F16 : Scalar::F32;
}

RowCol mmaC(MatrixOp op, int lane, int e) {
  if (wave64(op)) return {4 * (lane / 16) + e, lane % 16};
  return {lane / 4 + 8 * (e / 2), 2 * (lane % 4) + e % 2};
}

RowCol mmaGroupC(int thread, int e) {
  RowCol in = mmaC(MatrixOp::M16N8K16Bf16, thread % 32, e % 4);
  return {16 * (thread / 32) + in.row, 8 * (e / 4) + in.col};
}

size_t groupMmaC(Opc op) { return op == Opc::MmaSharedB ? 11 : 4; }

V chainedOnto(const Kernel& k, const Inst& in) {
  if (!isGroupMma(in.op) || in.args.size() != groupMmaC(in.op) + 1) return -1;
  V onto = in.args.back();
  return onto >= 0 && size_t(onto) < k.insts.size() && k.insts[size_t(onto)].op == in.op ? onto : -1;
}

int64_t mmaSharedColumns(const Kernel& k, V m) {
  for (V onto = chainedOnto(k, k.insts[size_t(m)]); onto >= 0; onto = chainedOnto(k, k.insts[size_t(m)])) m = onto;
  const Inst& first = k.insts[size_t(m)];
  return 2 * (int64_t(first.args.size()) - int64_t(groupMmaC(first.op)));
}

std::vector<int64_t> Kernel::sharedOffsets() const {
  std::vector<int64_t> out;
  int64_t end = 0;
  for (const Shared& s : shared) {
    int64_t size = std::max(scalarBytes(s.type), 1);
    out.push_back((end + size - 1) / size * size);
    end = out.back() + s.elems * size;
  }
  return out;
}

int64_t Kernel::sharedBytes() const {
  if (shared.empty()) return 0;
  return sharedOffsets().back() + shared.back().elems * scalarBytes(shared.back().type);
}

}  // namespace poot::kir

// Names and sizes of KIR's types and opcodes, for the printer, the emitters
// and diagnostics.
#include "codegen/kir/kir.h"

#include <algorithm>

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

const OpInfo& opInfo(Opc o) {
  using D = Defines;
  using S = Scope;
  using F = Form;
  constexpr Types f32 = typeBit(Scalar::F32), compared = kNumberTypes | typeBit(Scalar::Bool);
  static const OpInfo table[] = {
      {"const", D::Value, S::Thread, false},
      {"group.x", D::Value, S::Thread, false, F::Id, typeBit(Scalar::I32)},
      {"group.y", D::Value, S::Thread, false, F::Id, typeBit(Scalar::I32)},
      {"local", D::Value, S::Thread, false, F::Id, typeBit(Scalar::I32)},
      {"add", D::Value, S::Thread, false, F::Binary, kNumberTypes},
      {"sub", D::Value, S::Thread, false, F::Binary, kNumberTypes},
      {"mul", D::Value, S::Thread, false, F::Binary, kNumberTypes},
      {"div", D::Value, S::Thread, false, F::Binary, kNumberTypes},
      {"rem", D::Value, S::Thread, false, F::Binary, kNumberTypes},
      {"min", D::Value, S::Thread, false, F::Binary, kNumberTypes},
      {"max", D::Value, S::Thread, false, F::Binary, kNumberTypes},
      {"pow", D::Value, S::Thread, false, F::Binary, f32},
      {"and", D::Value, S::Thread, false, F::Binary, kBitTypes},
      {"or", D::Value, S::Thread, false, F::Binary, kBitTypes},
      {"xor", D::Value, S::Thread, false, F::Binary, kBitTypes},
      {"shl", D::Value, S::Thread, false, F::Binary, kIntTypes},
      {"shr.a", D::Value, S::Thread, false, F::Binary, kIntTypes},
      {"shr.l", D::Value, S::Thread, false, F::Binary, kIntTypes},
      {"neg", D::Value, S::Thread, false, F::Unary, kNumberTypes},
      {"not", D::Value, S::Thread, false, F::Unary, kBitTypes},
      {"abs", D::Value, S::Thread, false, F::Unary, kNumberTypes},
      {"exp", D::Value, S::Thread, false, F::Unary, f32},
      {"exp2", D::Value, S::Thread, false, F::Unary, f32},
      {"log", D::Value, S::Thread, false, F::Unary, f32},
      {"sqrt", D::Value, S::Thread, false, F::Unary, f32},
      {"rsqrt", D::Value, S::Thread, false, F::Unary, f32},
      {"tanh", D::Value, S::Thread, false, F::Unary, f32},
      {"sin", D::Value, S::Thread, false, F::Unary, f32},
      {"cos", D::Value, S::Thread, false, F::Unary, f32},
      {"floor", D::Value, S::Thread, false, F::Unary, f32},
      {"lt", D::Value, S::Thread, false, F::Compare, kNumberTypes},
      {"le", D::Value, S::Thread, false, F::Compare, kNumberTypes},
      {"gt", D::Value, S::Thread, false, F::Compare, kNumberTypes},
      {"ge", D::Value, S::Thread, false, F::Compare, kNumberTypes},
      {"eq", D::Value, S::Thread, false, F::Compare, compared},
      {"ne", D::Value, S::Thread, false, F::Compare, compared},
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

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

const char* opcName(Opc o) {
  static const char* names[] = {
      "const", "group.x", "group.y", "local", "add", "sub", "mul", "div", "rem", "min", "max", "pow",
      "and", "or", "xor", "shl", "shr.a", "shr.l", "neg", "not", "abs", "exp", "log", "sqrt", "rsqrt",
      "tanh", "sin", "cos", "floor", "lt", "le", "gt", "ge", "eq", "ne", "select", "fma", "convert", "bitcast",
      "load", "load.vec", "lane", "store", "shared.load", "shared.load.vec", "shared.store", "shared.store.vec", "shuffle.xor", "mma", "mma.shared", "copy.async", "async.commit", "async.wait", "get", "set", "for", "if", "barrier"};
  static_assert(sizeof names / sizeof names[0] == size_t(Opc::Barrier) + 1);
  return names[size_t(o)];
}

RowCol mmaA(MatrixOp op, int lane, int e) {
  int g = lane / 4, t = lane % 4;
  if (op == MatrixOp::M16N8K8Tf32) return {g + 8 * (e % 2), t + 4 * (e / 2)};
  return {g + 8 * ((e / 2) % 2), 2 * t + e % 2 + 8 * (e / 4)};
}

RowCol mmaB(MatrixOp op, int lane, int e) {
  int g = lane / 4, t = lane % 4;
  if (op == MatrixOp::M16N8K8Tf32) return {t + 4 * e, g};
  return {2 * t + e % 2 + 8 * (e / 2), g};
}

Scalar mmaOperand(MatrixOp op) {
  DType t = matrixShape(op).operand;
  return t == DType::BF16 ? Scalar::BF16 : t == DType::F16 ? Scalar::F16 : Scalar::F32;
}

RowCol mmaC(int lane, int e) { return {lane / 4 + 8 * (e / 2), 2 * (lane % 4) + e % 2}; }

RowCol mmaGroupC(int thread, int e) {
  RowCol in = mmaC(thread % 32, e % 4);
  return {16 * (thread / 32) + in.row, 8 * (e / 4) + in.col};
}

int64_t mmaSharedColumns(const Kernel& k, V m) {
  while (k.insts[size_t(m)].args.size() == 5 && k.insts[size_t(k.insts[size_t(m)].args[4])].op == Opc::MmaShared)
    m = k.insts[size_t(m)].args[4];
  return 2 * (int64_t(k.insts[size_t(m)].args.size()) - 4);
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

// Names and sizes of KIR's types and opcodes, for the printer, the emitters
// and diagnostics.
#include "codegen/kir/kir.h"

namespace poot::kir {

const char* scalarName(Scalar s) {
  switch (s) {
    case Scalar::Bool: return "bool";
    case Scalar::I32: return "i32";
    case Scalar::I64: return "i64";
    case Scalar::F32: return "f32";
  }
  return "?";
}

const char* elemName(Elem e) {
  switch (e) {
    case Elem::F32: return "f32";
    case Elem::F16: return "f16";
    case Elem::I32: return "i32";
    case Elem::I64: return "i64";
    case Elem::U8: return "u8";
    case Elem::U16: return "u16";
  }
  return "?";
}

Scalar valueOf(Elem e) {
  switch (e) {
    case Elem::F32:
    case Elem::F16: return Scalar::F32;
    case Elem::I64: return Scalar::I64;
    default: return Scalar::I32;
  }
}

int elemBytes(Elem e) {
  switch (e) {
    case Elem::U8: return 1;
    case Elem::F16:
    case Elem::U16: return 2;
    case Elem::I64: return 8;
    default: return 4;
  }
}

const char* opcName(Opc o) {
  static const char* names[] = {
      "const", "group.x", "group.y", "local", "add", "sub", "mul", "div", "rem", "min", "max", "pow",
      "and", "or", "xor", "shl", "shr.a", "shr.l", "neg", "not", "abs", "exp", "log", "sqrt", "rsqrt",
      "tanh", "sin", "cos", "floor", "lt", "le", "gt", "ge", "eq", "ne", "select", "fma", "convert", "bitcast",
      "load", "load.vec", "lane", "store", "shared.load", "shared.load.vec", "shared.store", "shared.store.vec", "shuffle.xor", "warp.mma", "get", "set", "for", "if", "barrier"};
  static_assert(sizeof names / sizeof names[0] == size_t(Opc::Barrier) + 1);
  return names[size_t(o)];
}

int64_t Kernel::sharedBytes() const {
  int64_t n = 0;
  for (const Shared& s : shared) n += s.elems * 4;
  return n;
}

}  // namespace poot::kir

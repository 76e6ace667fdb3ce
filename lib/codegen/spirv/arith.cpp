// The scalar opcodes: one SPIR-V instruction (or GLSL.std.450 call) per KIR
// opcode and operand type, as kir.h's semantics ask: signed integer division
// and remainder (both truncate), NMin/NMax for floats (NaN gives the other
// operand), ordered float compares except Ne (unordered, true on NaN), and the
// bool forms of And/Or/Xor/Not/Eq/Ne as logical instructions. Legalize has
// already refused the pairs with no entry here.
#include <spirv/unified1/GLSL.std.450.h>

#include <bit>
#include <cassert>

#include "codegen/spirv/emitter.h"

namespace poot::spirv {

using kir::Opc;
using kir::Scalar;

Id Emitter::constant(const kir::Inst& in) {
  switch (in.type) {
    case Scalar::Bool: return m_.boolConstant(in.imm != 0);
    case Scalar::I32: return m_.constant(i32(), uint32_t(int32_t(in.imm)));
    case Scalar::I64: return m_.constant(scalar(Scalar::I64), uint64_t(in.imm));
    case Scalar::F32: return m_.constant(f32(), std::bit_cast<uint32_t>(float(in.fimm)));
    default: return 0;  // the verifier refuses two-byte constants
  }
}

Id Emitter::zeroOf(Scalar s) {
  return s == Scalar::F32 ? m_.constant(f32(), std::bit_cast<uint32_t>(0.0f)) : m_.constant(scalar(s), 0);
}

Id Emitter::oneOf(Scalar s) {
  return s == Scalar::F32 ? m_.constant(f32(), std::bit_cast<uint32_t>(1.0f)) : m_.constant(scalar(s), 1);
}

Id Emitter::binary(const kir::Inst& in) {
  Id t = scalar(in.type), a = val(in.args[0]), b = val(in.args[1]);
  if (in.type == Scalar::Bool) {
    switch (in.op) {
      case Opc::And: return op(SpvOpLogicalAnd, t, {a, b});
      case Opc::Or: return op(SpvOpLogicalOr, t, {a, b});
      default: assert(in.op == Opc::Xor); return op(SpvOpLogicalNotEqual, t, {a, b});
    }
  }
  if (in.type == Scalar::F32) {
    switch (in.op) {
      case Opc::Add: return op(SpvOpFAdd, t, {a, b});
      case Opc::Sub: return op(SpvOpFSub, t, {a, b});
      case Opc::Mul: return op(SpvOpFMul, t, {a, b});
      case Opc::Div: return op(SpvOpFDiv, t, {a, b});
      case Opc::Min: return ext(GLSLstd450NMin, t, {a, b});
      case Opc::Max: return ext(GLSLstd450NMax, t, {a, b});
      default: assert(in.op == Opc::Pow); return ext(GLSLstd450Pow, t, {a, b});
    }
  }
  switch (in.op) {
    case Opc::Add: return op(SpvOpIAdd, t, {a, b});
    case Opc::Sub: return op(SpvOpISub, t, {a, b});
    case Opc::Mul: return op(SpvOpIMul, t, {a, b});
    case Opc::Div: return op(SpvOpSDiv, t, {a, b});
    case Opc::Rem: return op(SpvOpSRem, t, {a, b});
    case Opc::Min: return ext(GLSLstd450SMin, t, {a, b});
    case Opc::Max: return ext(GLSLstd450SMax, t, {a, b});
    case Opc::And: return op(SpvOpBitwiseAnd, t, {a, b});
    case Opc::Or: return op(SpvOpBitwiseOr, t, {a, b});
    case Opc::Xor: return op(SpvOpBitwiseXor, t, {a, b});
    case Opc::Shl: return op(SpvOpShiftLeftLogical, t, {a, b});
    case Opc::ShrA: return op(SpvOpShiftRightArithmetic, t, {a, b});
    default: assert(in.op == Opc::ShrL); return op(SpvOpShiftRightLogical, t, {a, b});
  }
}

Id Emitter::unary(const kir::Inst& in) {
  Id t = scalar(in.type), a = val(in.args[0]);
  if (in.type == Scalar::Bool) {
    assert(in.op == Opc::Not);
    return op(SpvOpLogicalNot, t, {a});
  }
  if (in.type != Scalar::F32) {
    switch (in.op) {
      case Opc::Neg: return op(SpvOpSNegate, t, {a});
      case Opc::Not: return op(SpvOpNot, t, {a});
      default: assert(in.op == Opc::Abs); return ext(GLSLstd450SAbs, t, {a});
    }
  }
  switch (in.op) {
    case Opc::Neg: return op(SpvOpFNegate, t, {a});
    case Opc::Abs: return ext(GLSLstd450FAbs, t, {a});
    case Opc::Exp: return ext(GLSLstd450Exp, t, {a});
    case Opc::Exp2: return ext(GLSLstd450Exp2, t, {a});
    case Opc::Log: return ext(GLSLstd450Log, t, {a});
    case Opc::Sqrt: return ext(GLSLstd450Sqrt, t, {a});
    case Opc::Rsqrt: return ext(GLSLstd450InverseSqrt, t, {a});
    case Opc::Tanh: return ext(GLSLstd450Tanh, t, {a});
    case Opc::Sin: return ext(GLSLstd450Sin, t, {a});
    case Opc::Cos: return ext(GLSLstd450Cos, t, {a});
    default: assert(in.op == Opc::Floor); return ext(GLSLstd450Floor, t, {a});
  }
}

Id Emitter::compare(const kir::Inst& in) {
  Scalar s = typeOf(in.args[0]);
  Id t = m_.boolType(), a = val(in.args[0]), b = val(in.args[1]);
  static const SpvOp floats[] = {SpvOpFOrdLessThan,         SpvOpFOrdLessThanEqual, SpvOpFOrdGreaterThan,
                                 SpvOpFOrdGreaterThanEqual, SpvOpFOrdEqual,         SpvOpFUnordNotEqual};
  static const SpvOp ints[] = {SpvOpSLessThan,         SpvOpSLessThanEqual, SpvOpSGreaterThan,
                               SpvOpSGreaterThanEqual, SpvOpIEqual,         SpvOpINotEqual};
  size_t i = size_t(in.op) - size_t(Opc::Lt);
  assert(i < 6);
  if (s == Scalar::Bool) return op(in.op == Opc::Eq ? SpvOpLogicalEqual : SpvOpLogicalNotEqual, t, {a, b});
  return op(s == Scalar::F32 ? floats[i] : ints[i], t, {a, b});
}

Id Emitter::convert(const kir::Inst& in) {
  Scalar from = typeOf(in.args[0]), to = in.type;
  Id t = scalar(to), x = val(in.args[0]);
  if (from == to || from == Scalar::F16) return x;  // an f16 is held as the f32 it converts to
  // kir::legalize has rounded x to an f16 value (Vulkan lets FPRoundingMode
  // stand only on a conversion that is stored), so this is exact.
  if (to == Scalar::F16) return op(SpvOpFConvert, t, {op(SpvOpFConvert, m_.floatType(16), {x})});
  if (from == Scalar::Bool) return op(SpvOpSelect, t, {x, oneOf(to), zeroOf(to)});
  if (to == Scalar::Bool)
    return op(from == Scalar::F32 ? SpvOpFUnordNotEqual : SpvOpINotEqual, t, {x, zeroOf(from)});
  if (from == Scalar::F32) return op(SpvOpConvertFToS, t, {x});
  if (to == Scalar::F32) return op(SpvOpConvertSToF, t, {x});
  return op(SpvOpSConvert, t, {x});
}

}  // namespace poot::spirv

// Legalization walks every instruction once: each one's result type (and a
// Convert's or Bitcast's operand type) adds to the needs, and each opcode is
// checked against the types it has a SPIR-V lowering for. Buffers add the
// storage capabilities of their element types.
#include "codegen/spirv/legalize.h"

#include <cstdint>
#include <string>

namespace poot::spirv {

namespace {

using kir::Opc;
using kir::Scalar;

bool isInt(Scalar s) { return s == Scalar::I32 || s == Scalar::I64; }
bool isNumber(Scalar s) { return isInt(s) || s == Scalar::F32; }

// Whether a binary opcode has a lowering for operands of type t.
bool binaryOk(Opc op, Scalar t) {
  switch (op) {
    case Opc::And:
    case Opc::Or:
    case Opc::Xor: return t != Scalar::F32;
    case Opc::Shl:
    case Opc::ShrA:
    case Opc::ShrL: return isInt(t);
    case Opc::Rem: return isInt(t);
    case Opc::Pow: return t == Scalar::F32;
    default: return isNumber(t);  // Add, Sub, Mul, Div, Min, Max
  }
}

bool unaryOk(Opc op, Scalar t) {
  switch (op) {
    case Opc::Not: return t != Scalar::F32;
    case Opc::Neg:
    case Opc::Abs: return isNumber(t);
    default: return t == Scalar::F32;  // Exp .. Floor
  }
}

bool compareOk(Opc op, Scalar t) { return isNumber(t) || (t == Scalar::Bool && (op == Opc::Eq || op == Opc::Ne)); }

Error refuse(const kir::Kernel& k, size_t inst, const std::string& what) {
  return makeError(ErrorKind::Verify, Loc{k.entry, 0, 0, "inst " + std::to_string(inst)},
                   "spir-v has no lowering for " + what);
}

}  // namespace

Expected<Needs> legalize(const kir::Kernel& k) {
  Needs n;
  if (k.workgroupSize < 1 || k.workgroupSize > INT32_MAX)
    return makeError(ErrorKind::Verify, Loc{k.entry}, "workgroup size " + std::to_string(k.workgroupSize) +
                                                          " does not fit a spir-v local size");
  for (const kir::Buffer& b : k.buffers) {
    n.int64 |= b.elem == kir::Elem::I64;
    n.storage8 |= b.elem == kir::Elem::U8 || b.elem == kir::Elem::I8;
    n.storage16 |= b.elem == kir::Elem::F16 || b.elem == kir::Elem::U16;
    if (b.elem == kir::Elem::BF16)
      return makeError(ErrorKind::Verify, Loc{k.entry, 0, 0, "buffer " + b.name},
                       "spir-v has no lowering for a bf16 buffer (kir::legalize lowers it)");
  }
  for (const kir::Shared& s : k.shared) {
    if (s.elems < 1 || s.elems > INT32_MAX)
      return makeError(ErrorKind::Verify, Loc{k.entry, 0, 0, "shared " + s.name},
                       "workgroup array of " + std::to_string(s.elems) + " elements");
    if (s.type == Scalar::BF16)
      return makeError(ErrorKind::Verify, Loc{k.entry, 0, 0, "shared " + s.name},
                       "spir-v has no lowering for a bf16 workgroup array (kir::legalize lowers it)");
    n.int64 |= s.type == Scalar::I64;
    n.float16 |= s.type == Scalar::F16;
  }
  for (size_t i = 0; i < k.insts.size(); ++i) {
    const kir::Inst& in = k.insts[i];
    n.int64 |= in.type == Scalar::I64;
    std::string what = std::string(kir::opcName(in.op)) + " on " + kir::scalarName(in.type);
    if (in.type == Scalar::BF16) return refuse(k, i, what + " (kir::legalize lowers bf16)");
    if (in.op >= Opc::Add && in.op <= Opc::ShrL && !binaryOk(in.op, in.type)) return refuse(k, i, what);
    if (in.op >= Opc::Neg && in.op <= Opc::Floor && !unaryOk(in.op, in.type)) return refuse(k, i, what);
    if (in.op >= Opc::Lt && in.op <= Opc::Ne && !compareOk(in.op, k.insts[size_t(in.args[0])].type))
      return refuse(k, i, std::string(kir::opcName(in.op)) + " on " + kir::scalarName(k.insts[size_t(in.args[0])].type));
    // No warp-wide operation is written for Vulkan: a subgroup's size and
    // layout are the driver's, and the planner gives such kernels (and the
    // asynchronous copies that feed them) to PTX only (plan/profile.h,
    // matrix_multiply).
    if (kir::opInfo(in.op).ptxOnly) return refuse(k, i, what);
    if (in.op == Opc::Bitcast) {
      Scalar from = k.insts[size_t(in.args[0])].type;
      bool f2i = from == Scalar::F32 && in.type == Scalar::I32, i2f = from == Scalar::I32 && in.type == Scalar::F32;
      if (!f2i && !i2f)
        return refuse(k, i, std::string("bitcast from ") + kir::scalarName(from) + " to " + kir::scalarName(in.type));
    }
    if (in.op == Opc::For && (in.imm < 1 || in.imm > INT32_MAX))
      return refuse(k, i, "a loop step of " + std::to_string(in.imm));
  }
  return n;
}

}  // namespace poot::spirv

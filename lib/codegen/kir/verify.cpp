// The KIR verifier in two walks over the structured body. The first checks
// each instruction where it stands: every block item a valid index placed in
// one block only, every operand defined earlier in this block or an enclosing
// one (a scope stack: the values a block defines are dropped when it ends, and
// a For's induction value is in scope only in its body), never a statement
// used as a value, and the opcode's operand count, types and references. The
// second finds the per-thread values: Local, anything computed from one, a
// For's induction value when a bound is per-thread, and a variable set from a
// per-thread value or under per-thread control (iterated to a fixed point,
// since a loop may read a variable before the set that taints it); a Barrier,
// ShuffleXor, Mma or a warpgroup product under an If or For whose condition
// or bound is per-thread is an error, and so is a warp operation in a
// workgroup that is not whole warps (whole warpgroups for the warpgroup
// products). A third walk checks each warpgroup product chain, and a last
// pass who reads a chain's D before an MmaWait (its Lanes, and the
// accumulators set from them).
#include "codegen/kir/verify.h"

#include <vector>

namespace poot::kir {

namespace {

bool isStatement(Opc op) { return opInfo(op).defines == Defines::Nothing; }
bool isWide(Opc op) { return opInfo(op).defines == Defines::Wide; }
// Executed by whole warps (or warpgroups) at once.
bool isWarpOp(Opc op) { return opInfo(op).scope == Scope::Warp || opInfo(op).scope == Scope::Warpgroup; }
// Executed by several threads at once: standing only in workgroup-uniform
// control flow.
bool isCollective(Opc op) { return opInfo(op).scope != Scope::Thread; }
// What may not stand between two links of an MmaShared chain (kir.h).
bool breaksChain(Opc op) {
  return op == Opc::Store || op == Opc::SharedStore || op == Opc::SharedStoreVec || op == Opc::CopyAsync ||
         op == Opc::AsyncWait || op == Opc::MmaWait || op == Opc::Barrier || op == Opc::For || op == Opc::If;
}

class Verifier {
 public:
  explicit Verifier(const Kernel& k)
      : k_(k), placed_(k.insts.size(), 0), inScope_(k.insts.size(), 0), perThread_(k.insts.size(), 0),
        varPerThread_(k.vars.size(), 0) {}

  Status run() {
    if (k_.workgroupSize < 1 || k_.gridX < 1)
      return error("workgroup size " + std::to_string(k_.workgroupSize) + " and grid x " + std::to_string(k_.gridX) +
                   " must be positive");
    for (size_t i = 0; i < k_.shared.size(); ++i)
      if (k_.shared[i].type == Scalar::Bool)
        return error("shared " + std::to_string(i) + " (" + k_.shared[i].name + ") holds bool");
    if (!scoped(k_.body)) return err_;
    for (size_t v = 0; v < k_.insts.size(); ++v) {
      int64_t group = groupThreads(k_.insts[v]);
      if (isWarpOp(k_.insts[v].op) && k_.workgroupSize % group != 0)
        return error("%" + std::to_string(v) + " (" + opcName(k_.insts[v].op) + ") in a workgroup of " +
                     std::to_string(k_.workgroupSize) + " threads, not whole " +
                     (group == 128 ? "warpgroups of 128" : group == 64 ? "waves of 64" : "warps of 32"));
    }
    if (!chains(k_.body) || !accumulators()) return err_;
    bool changed = true;
    while (changed) {
      changed = false;
      if (!uniformity(k_.body, -1, changed)) return err_;
    }
    return ok();
  }

 private:
  Error error(const std::string& msg) const { return makeError(ErrorKind::Verify, {}, "kernel " + k_.entry + ": " + msg); }

  bool fail(V v, const std::string& msg) {
    err_ = error("%" + std::to_string(v) + " (" + opcName(k_.insts[size_t(v)].op) + "): " + msg);
    return false;
  }

  Scalar typeOf(V v) const { return k_.insts[size_t(v)].type; }
  std::string arg(const Inst& in, size_t i) const {
    return "%" + std::to_string(in.args[i]) + " (" + scalarName(typeOf(in.args[i])) + ")";
  }

  bool arity(V v, const Inst& in, size_t n) {
    if (in.args.size() == n) return true;
    return fail(v, std::to_string(in.args.size()) + " operands, expected " + std::to_string(n));
  }
  bool want(V v, const Inst& in, size_t i, Scalar t, const char* what) {
    if (typeOf(in.args[i]) == t) return true;
    return fail(v, std::string(what) + " " + arg(in, i) + " is not " + scalarName(t));
  }
  bool result(V v, const Inst& in, Scalar t) {
    if (in.type == t) return true;
    return fail(v, std::string("result type ") + scalarName(in.type) + ", expected " + scalarName(t));
  }
  bool sameTypes(V v, const Inst& in, size_t a, size_t b) {
    if (typeOf(in.args[a]) == typeOf(in.args[b])) return true;
    return fail(v, std::string("operand types ") + scalarName(typeOf(in.args[a])) + " and " +
                       scalarName(typeOf(in.args[b])) + " differ");
  }
  bool typeIn(V v, Scalar t, bool allowed) {
    if (allowed) return true;
    return fail(v, std::string("not defined on ") + scalarName(t));
  }
  bool ref(V v, const Inst& in, size_t n, const char* what) {
    if (in.ref >= 0 && size_t(in.ref) < n) return true;
    return fail(v, std::string(what) + " " + std::to_string(in.ref) + " out of range (" + std::to_string(n) + ")");
  }

  // Operand counts, types and references of one instruction.
  // A wide workgroup-memory access: width 2, 4 or 8, at most 16 bytes, its
  // array's byte offset a multiple of its bytes (kir.h, SharedLoadVec).
  bool wideShared(V v, const Inst& in) {
    if (in.imm != 2 && in.imm != 4 && in.imm != 8)
      return fail(v, "width " + std::to_string(in.imm) + " is not 2, 4 or 8");
    const Shared& s = k_.shared[size_t(in.ref)];
    int64_t bytes = in.imm * scalarBytes(s.type);
    if (bytes > 16)
      return fail(v, std::to_string(in.imm) + " " + scalarName(s.type) + " elements are more than 16 bytes");
    int64_t offset = k_.sharedOffsets()[size_t(in.ref)];
    if (offset % bytes == 0) return true;
    return fail(v, "shared " + std::to_string(in.ref) + " (" + s.name + ") starts at byte " + std::to_string(offset) +
                       ", not a multiple of " + std::to_string(bytes));
  }

  // The rule of a regular form (kir.h's OpInfo).
  bool regular(V v, const Inst& in, const OpInfo& info) {
    switch (info.form) {
      case Form::Id: return arity(v, in, 0) && result(v, in, Scalar::I32);
      case Form::Binary:
        if (!arity(v, in, 2) || !sameTypes(v, in, 0, 1) || !result(v, in, typeOf(in.args[0]))) return false;
        break;
      case Form::Unary:
        if (!arity(v, in, 1) || !result(v, in, typeOf(in.args[0]))) return false;
        break;
      case Form::Compare:
        if (!arity(v, in, 2) || !sameTypes(v, in, 0, 1) || !result(v, in, Scalar::Bool)) return false;
        break;
      case Form::Other: return fail(v, "no regular form");
    }
    Scalar t = typeOf(in.args[0]);
    return typeIn(v, t, (info.types & typeBit(t)) != 0);
  }

  bool typed(V v, const Inst& in) {
    if (const OpInfo& info = opInfo(in.op); info.form != Form::Other) return regular(v, in, info);
    switch (in.op) {
      case Opc::Const: return arity(v, in, 0) && typeIn(v, in.type, !isTwoByte(in.type));
      case Opc::Select:
        return arity(v, in, 3) && want(v, in, 0, Scalar::Bool, "condition") && sameTypes(v, in, 1, 2) &&
               result(v, in, typeOf(in.args[1]));
      case Opc::Fma:
        return arity(v, in, 3) && want(v, in, 0, Scalar::F32, "factor") && want(v, in, 1, Scalar::F32, "factor") &&
               want(v, in, 2, Scalar::F32, "addend") && result(v, in, Scalar::F32);
      case Opc::Convert: {
        if (!arity(v, in, 1)) return false;
        Scalar from = typeOf(in.args[0]);
        if (!(isTwoByte(from) || isTwoByte(in.type)) || from == in.type || from == Scalar::F32 || in.type == Scalar::F32)
          return true;
        return fail(v, std::string("convert from ") + scalarName(from) + " to " + scalarName(in.type) +
                           " (f16 and bf16 convert to and from f32 only)");
      }
      case Opc::Bitcast: {
        if (!arity(v, in, 1)) return false;
        Scalar from = typeOf(in.args[0]);
        if ((from == Scalar::F32 && in.type == Scalar::I32) || (from == Scalar::I32 && in.type == Scalar::F32)) return true;
        return fail(v, std::string("bitcast from ") + scalarName(from) + " to " + scalarName(in.type));
      }
      case Opc::Load:
        return arity(v, in, 1) && ref(v, in, k_.buffers.size(), "buffer") && want(v, in, 0, Scalar::I32, "index") &&
               result(v, in, valueOf(k_.buffers[size_t(in.ref)].elem));
      case Opc::LoadVec: {
        if (!arity(v, in, 1) || !ref(v, in, k_.buffers.size(), "buffer") || !want(v, in, 0, Scalar::I32, "index"))
          return false;
        const Buffer& b = k_.buffers[size_t(in.ref)];
        if (!result(v, in, valueOf(b.elem))) return false;
        if (in.imm != 2 && in.imm != 4 && in.imm != 8)
          return fail(v, "width " + std::to_string(in.imm) + " is not 2, 4 or 8");
        if (in.imm * elemBytes(b.elem) > 16)
          return fail(v, std::to_string(in.imm) + " " + elemName(b.elem) + " elements are more than 16 bytes");
        if (!b.written) return true;
        return fail(v, "a wide load of written buffer " + std::to_string(in.ref) + " (" + b.name + ")");
      }
      case Opc::Lane: {
        if (!arity(v, in, 1)) return false;
        const Inst& vec = k_.insts[size_t(in.args[0])];
        if (!result(v, in, vec.type)) return false;
        int64_t n = isGroupMma(vec.op) ? mmaSharedColumns(k_, in.args[0]) / 2
                    : vec.op == Opc::MmaWait ? int64_t(vec.args.size())
                                             : vec.imm;
        if (in.imm >= 0 && in.imm < n) return true;
        return fail(v, "lane " + std::to_string(in.imm) + " of a " + opcName(vec.op) + " of " + std::to_string(n));
      }
      case Opc::Store: {
        if (!arity(v, in, 2) || !ref(v, in, k_.buffers.size(), "buffer") || !want(v, in, 0, Scalar::I32, "index"))
          return false;
        const Buffer& b = k_.buffers[size_t(in.ref)];
        if (!want(v, in, 1, valueOf(b.elem), "value")) return false;
        if (b.written) return true;
        return fail(v, "store to read-only buffer " + std::to_string(in.ref) + " (" + b.name + ")");
      }
      case Opc::SharedLoad:
        return arity(v, in, 1) && ref(v, in, k_.shared.size(), "shared") && want(v, in, 0, Scalar::I32, "index") &&
               result(v, in, k_.shared[size_t(in.ref)].type);
      case Opc::SharedLoadVec:
        return arity(v, in, 1) && ref(v, in, k_.shared.size(), "shared") && want(v, in, 0, Scalar::I32, "index") &&
               result(v, in, k_.shared[size_t(in.ref)].type) && wideShared(v, in);
      case Opc::SharedStoreVec: {
        if (!wideShared(v, in)) return false;
        if (!arity(v, in, size_t(in.imm) + 1) || !ref(v, in, k_.shared.size(), "shared") ||
            !want(v, in, 0, Scalar::I32, "index"))
          return false;
        for (size_t i = 1; i < in.args.size(); ++i)
          if (!want(v, in, i, k_.shared[size_t(in.ref)].type, "value")) return false;
        return wideShared(v, in);
      }
      case Opc::SharedStore:
        return arity(v, in, 2) && ref(v, in, k_.shared.size(), "shared") && want(v, in, 0, Scalar::I32, "index") &&
               want(v, in, 1, k_.shared[size_t(in.ref)].type, "value");
      case Opc::ShuffleXor:
        if (!arity(v, in, 1) || !result(v, in, typeOf(in.args[0])) ||
            !typeIn(v, in.type, in.type == Scalar::F32 || in.type == Scalar::I32))
          return false;
        if (in.imm > 0 && in.imm < 32) return true;
        return fail(v, "lane mask " + std::to_string(in.imm) + " outside [1, 32)");
      case Opc::Mma: {
        if (in.ref < 0 || size_t(in.ref) >= matrixShapes().size())
          return fail(v, "matrix op " + std::to_string(in.ref) + " is not one of ir/matrix.h's");
        const MatrixShape& shape = matrixShape(MatrixOp(in.ref));
        if (shape.threads > 64) return fail(v, std::string(shape.name) + " is not a warp's or a wave's matrix op");
        size_t ab = size_t(shape.aRegs + shape.bRegs);
        if (!arity(v, in, ab + 4) || !result(v, in, Scalar::F32)) return false;
        for (size_t i = 0; i < ab + 4; ++i)
          if (!want(v, in, i, i < ab ? mmaOperand(shape.op) : Scalar::F32,
                    i < size_t(shape.aRegs) ? "a" : i < ab ? "b" : "c"))
            return false;
        if (in.imm == 4) return true;
        return fail(v, "gives " + std::to_string(in.imm) + " elements, not 4");
      }
      case Opc::MmaShared:
      case Opc::MmaSharedB: {
        if (in.ref < 0 || size_t(in.ref) >= matrixShapes().size() || matrixShape(MatrixOp(in.ref)).threads != 128)
          return fail(v, "matrix op " + std::to_string(in.ref) + " is not a warpgroup's one of ir/matrix.h");
        const MatrixShape& shape = matrixShape(MatrixOp(in.ref));
        if (in.imm < 0 || size_t(in.imm) >= k_.shared.size())
          return fail(v, "shared " + std::to_string(in.imm) + " out of range (" + std::to_string(k_.shared.size()) + ")");
        const Shared& s = k_.shared[size_t(in.imm)];
        if (s.type != mmaOperand(shape.op))
          return fail(v, "reads shared " + std::to_string(in.imm) + " (" + s.name + ") of " + scalarName(s.type) + ", not " +
                             scalarName(mmaOperand(shape.op)));
        if (k_.sharedOffsets()[size_t(in.imm)] % 1024 != 0)
          return fail(v, "shared " + std::to_string(in.imm) + " (" + s.name + ") does not start at a multiple of 1024 bytes");
        const size_t c0 = groupMmaC(in.op), a = in.op == Opc::MmaSharedB ? 8 : 0;
        if (in.args.size() < c0 + 1)
          return fail(v, std::to_string(in.args.size()) + " operands, expected at least " + std::to_string(c0 + 1));
        if (!result(v, in, Scalar::F32)) return false;
        for (size_t i = 0; i < c0; ++i)
          if (!want(v, in, i, i < a ? mmaOperand(shape.op) : Scalar::I32, i < a ? "a" : "index")) return false;
        if (chainedOnto(k_, in) >= 0) {
          const Inst& onto = k_.insts[size_t(in.args[c0])];
          if (onto.ref == in.ref && onto.imm == in.imm) return true;
          return fail(v, "chains onto %" + std::to_string(in.args[c0]) + " of another matrix op or array");
        }
        size_t c = in.args.size() - c0;
        if (c % 4 != 0 || int64_t(c) * 2 > shape.n)
          return fail(v, std::to_string(c) + " accumulators: n = " + std::to_string(2 * c) +
                             " is not a multiple of 8 up to " + std::to_string(shape.n));
        for (size_t i = c0; i < in.args.size(); ++i)
          if (!want(v, in, i, Scalar::F32, "c")) return false;
        return true;
      }
      case Opc::MmaWait:
        if (!result(v, in, Scalar::F32)) return false;
        for (size_t i = 0; i < in.args.size(); ++i)
          if (!want(v, in, i, Scalar::F32, "value")) return false;
        if (in.imm >= 0) return true;
        return fail(v, "waits for " + std::to_string(in.imm) + " pending chains");
      case Opc::GetVar:
        return arity(v, in, 0) && ref(v, in, k_.vars.size(), "variable") && result(v, in, k_.vars[size_t(in.ref)]);
      case Opc::SetVar:
        return arity(v, in, 1) && ref(v, in, k_.vars.size(), "variable") &&
               want(v, in, 0, k_.vars[size_t(in.ref)], "value");
      case Opc::For:
        if (!arity(v, in, 2) || !want(v, in, 0, Scalar::I32, "lower bound") ||
            !want(v, in, 1, Scalar::I32, "upper bound") || !result(v, in, Scalar::I32))
          return false;
        if (in.imm > 0) return true;
        return fail(v, "step " + std::to_string(in.imm) + " is not positive");
      case Opc::If: return arity(v, in, 1) && want(v, in, 0, Scalar::Bool, "condition");
      case Opc::Barrier: return arity(v, in, 0);
      case Opc::AsyncCommit: return arity(v, in, 0);
      case Opc::AsyncWait:
        if (!arity(v, in, 0)) return false;
        if (in.imm >= 0) return true;
        return fail(v, "waits for " + std::to_string(in.imm) + " pending groups");
      case Opc::CopyAsync: {
        if (!arity(v, in, 3) || !ref(v, in, k_.buffers.size(), "buffer") || !want(v, in, 0, Scalar::I32, "index") ||
            !want(v, in, 1, Scalar::I32, "shared index") || !want(v, in, 2, Scalar::Bool, "condition"))
          return false;
        const Buffer& b = k_.buffers[size_t(in.ref)];
        if (b.written) return fail(v, "copies from buffer " + std::to_string(in.ref) + " (" + b.name + "), which is written");
        if (in.imm < 0 || size_t(in.imm) >= k_.shared.size())
          return fail(v, "shared " + std::to_string(in.imm) + " out of range (" + std::to_string(k_.shared.size()) + ")");
        const Shared& s = k_.shared[size_t(in.imm)];
        if (s.type != valueOf(b.elem))
          return fail(v, "copies " + std::string(elemName(b.elem)) + " into shared " + std::to_string(in.imm) + " of " +
                             scalarName(s.type));
        if (k_.sharedOffsets()[size_t(in.imm)] % 16 == 0) return true;
        return fail(v, "shared " + std::to_string(in.imm) + " (" + s.name + ") does not start at a multiple of 16 bytes");
      }
      default: break;  // the regular forms, above
    }
    return fail(v, "unknown opcode");
  }

  // Placement, scope and types of every item of b and the blocks nested in it.
  bool scoped(const Block& b) {
    std::vector<V> defined;
    bool good = true;
    for (V v : b.items) {
      if (v < 0 || size_t(v) >= k_.insts.size()) {
        err_ = error("block item %" + std::to_string(v) + " out of range (" + std::to_string(k_.insts.size()) + ")");
        good = false;
        break;
      }
      if (placed_[size_t(v)]) {
        good = fail(v, "placed in more than one block");
        break;
      }
      placed_[size_t(v)] = 1;
      const Inst& in = k_.insts[size_t(v)];
      for (V a : in.args) {
        if (a < 0 || size_t(a) >= k_.insts.size()) good = fail(v, "operand %" + std::to_string(a) + " out of range");
        else if (isStatement(k_.insts[size_t(a)].op)) good = fail(v, "operand %" + std::to_string(a) + " is a statement");
        else if (!inScope_[size_t(a)]) good = fail(v, "operand %" + std::to_string(a) + " is not defined before it in scope");
        else if (isWide(k_.insts[size_t(a)].op) != (in.op == Opc::Lane) && !(a == chainedOnto(k_, in)))
          good = fail(v, in.op == Opc::Lane ? "operand %" + std::to_string(a) + " is not a wide load"
                                            : "reads the wide load %" + std::to_string(a) + " other than through lane");
        if (!good) break;
      }
      if (!good || !typed(v, in)) {
        good = false;
        break;
      }
      if (in.op != Opc::For && in.op != Opc::If && !(in.body.items.empty() && in.orelse.items.empty())) {
        good = fail(v, "has nested blocks");
        break;
      }
      if (in.op == Opc::For && !in.orelse.items.empty()) {
        good = fail(v, "a for has no else block");
        break;
      }
      if (in.op == Opc::For) inScope_[size_t(v)] = 1;
      if ((in.op == Opc::For || in.op == Opc::If) && (!scoped(in.body) || !scoped(in.orelse))) {
        good = false;
        break;
      }
      if (in.op == Opc::For) inScope_[size_t(v)] = 0;
      if (in.op != Opc::For && !isStatement(in.op)) {
        inScope_[size_t(v)] = 1;
        defined.push_back(v);
      }
    }
    for (V v : defined) inScope_[size_t(v)] = 0;
    return good;
  }

  // Each warpgroup product chain (kir.h): every link but the last used
  // once, by the next, which stands later in the same block with nothing
  // that breaks the chain between them; an MmaSharedB link's a operands
  // none of the values defined since the chain's first link.
  bool chains(const Block& b) {
    for (size_t i = 0; i < b.items.size(); ++i) {
      const Inst& in = k_.insts[size_t(b.items[i])];
      if ((in.op == Opc::For || in.op == Opc::If) && (!chains(in.body) || !chains(in.orelse))) return false;
      V onto = chainedOnto(k_, in);
      if (onto < 0) continue;
      size_t j = i;
      while (j > 0 && b.items[j - 1] != onto) {
        if (breaksChain(k_.insts[size_t(b.items[j - 1])].op))
          return fail(b.items[i], "chains onto %" + std::to_string(onto) + " across %" + std::to_string(b.items[j - 1]) +
                                      " (" + opcName(k_.insts[size_t(b.items[j - 1])].op) + ")");
        --j;
      }
      if (j == 0) return fail(b.items[i], "chains onto %" + std::to_string(onto) + ", which is not in its block");
      if (uses_.empty()) {
        uses_.assign(k_.insts.size(), 0);
        for (const Inst& u : k_.insts)
          for (V a : u.args) ++uses_[size_t(a)];
      }
      if (uses_[size_t(onto)] != 1)
        return fail(b.items[i], "chains onto %" + std::to_string(onto) + ", which has " +
                                    std::to_string(uses_[size_t(onto)] - 1) + " other uses");
      if (in.op != Opc::MmaSharedB) continue;
      V first = onto;
      while (chainedOnto(k_, k_.insts[size_t(first)]) >= 0) first = chainedOnto(k_, k_.insts[size_t(first)]);
      for (size_t p = i; p > 0 && b.items[p] != first; --p)
        for (size_t e = 0; e < 8; ++e)
          if (in.args[e] == b.items[p - 1])
            return fail(b.items[i], "takes a operand %" + std::to_string(in.args[e]) +
                                        ", defined after its chain's first link %" + std::to_string(first));
    }
    return true;
  }

  // A chain's D before its MmaWait (kir.h): the values that hold it are the
  // Lanes of an MmaShared and the Gets of an accumulator, a variable set
  // from one of them (to a fixed point); each is read only by SetVar, an
  // MmaShared's c operands or an MmaWait.
  bool accumulators() {
    std::vector<uint8_t> held(k_.insts.size(), 0), acc(k_.vars.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t v = 0; v < k_.insts.size(); ++v) {
        const Inst& in = k_.insts[v];
        bool h = (in.op == Opc::Lane && in.args.size() == 1 && isGroupMma(k_.insts[size_t(in.args[0])].op)) ||
                 (in.op == Opc::GetVar && acc[size_t(in.ref)]);
        held[v] = h;
        if (in.op == Opc::SetVar && held[size_t(in.args[0])] && !acc[size_t(in.ref)]) {
          acc[size_t(in.ref)] = 1;
          changed = true;
        }
      }
    }
    for (size_t v = 0; v < k_.insts.size(); ++v) {
      const Inst& in = k_.insts[v];
      for (size_t i = 0; i < in.args.size(); ++i) {
        if (!held[size_t(in.args[i])] || in.op == Opc::SetVar || in.op == Opc::MmaWait ||
            (isGroupMma(in.op) && i >= groupMmaC(in.op)))
          continue;
        return fail(V(v), "reads %" + std::to_string(in.args[i]) +
                              ", a matrix chain's result, before an mma.wait gives it back");
      }
    }
    return true;
  }

  // One pass of the per-thread analysis over b, under control that is
  // per-thread when `divergent` (the If or For that makes it so) is not -1.
  bool uniformity(const Block& b, V divergent, bool& changed) {
    for (V v : b.items) {
      const Inst& in = k_.insts[size_t(v)];
      bool pt = in.op == Opc::Local || (in.op == Opc::GetVar && varPerThread_[size_t(in.ref)]);
      for (V a : in.args) pt |= perThread_[size_t(a)] != 0;
      perThread_[size_t(v)] = pt;
      if (in.op == Opc::SetVar && (pt || divergent >= 0) && !varPerThread_[size_t(in.ref)]) {
        varPerThread_[size_t(in.ref)] = 1;
        changed = true;
      }
      if (isCollective(in.op) && divergent >= 0)
        return fail(v, "inside %" + std::to_string(divergent) + " (" + opcName(k_.insts[size_t(divergent)].op) +
                           "), whose condition depends on the thread");
      if (in.op == Opc::For || in.op == Opc::If) {
        V inner = divergent >= 0 ? divergent : pt ? v : -1;
        if (!uniformity(in.body, inner, changed) || !uniformity(in.orelse, inner, changed)) return false;
      }
    }
    return true;
  }

  const Kernel& k_;
  std::vector<uint8_t> placed_, inScope_, perThread_, varPerThread_;
  std::vector<int> uses_;  // each instruction's uses, counted at the first chain
  Error err_{ErrorKind::Verify, {}, ""};
};

}  // namespace

Status verify(const Kernel& k) { return Verifier(k).run(); }

}  // namespace poot::kir

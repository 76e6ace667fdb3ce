// The KIR to LLVM IR writer. It walks the structured body once with an
// IRBuilder: values map one to one by instruction index (a value defined in
// a block dominates the blocks nested in it, so no phis are needed except a
// For's induction value in its header); For is head (phi, signed compare) ->
// body -> back edge, If is then/else/merge. Thread and workgroup ids, the
// barrier, the warp operations (NVPTX only; AMDGPU refuses them), the
// kernel marking and, on NVPTX for sm_90 and newer, the wait for the
// kernels launched before it (below) are the only target-specific parts
// besides the math (math.h).
//
// That wait is `griddepcontrol.wait`, the first instruction of the entry
// block: it returns once every kernel the launch depends on has finished
// and its writes are visible, and before it the kernel touches no memory
// (an inline asm with side effects and a memory clobber, so nothing is
// moved above it). A kernel launched the ordinary way is already ordered
// after its stream's earlier kernels and finds nothing to wait for; one
// launched as a programmatic dependent launch (the CUDA backend does so for
// such kernels, runtime/kernel_blob.h) may be started while the kernel
// before it is still draining, so the launch and the block scheduling
// overlap its tail instead of following it.
#include "codegen/llvm/module.h"

#include <algorithm>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsAMDGPU.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/MDBuilder.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/llvm/math.h"

namespace poot::llvmgen {

namespace {

using kir::Opc;
using kir::Scalar;
using llvm::Value;

// The most workgroup memory a PTX kernel may declare statically.
constexpr int64_t kPtxStaticSharedBytes = 48 * 1024;

class Writer {
 public:
  Writer(const kir::Kernel& k, Target target, bool waitForPrevious, llvm::Module& m)
      : k_(k), target_(target), waitForPrevious_(waitForPrevious), m_(m), ctx_(m.getContext()), b_(ctx_),
        math_(b_, target), vals_(k.insts.size(), nullptr), nextLink_(k.insts.size(), -1) {
    for (size_t v = 0; v < k.insts.size(); ++v)
      if (kir::V onto = kir::chainedOnto(k, k.insts[v]); onto >= 0) nextLink_[size_t(onto)] = kir::V(v);
  }

  Status write();

 private:
  llvm::Type* type(Scalar s);
  llvm::Type* elemType(kir::Elem e);
  void declare();
  Status block(const kir::Block& blk);
  Status inst(kir::V v);
  Value* constant(const kir::Inst& in);
  Value* special(llvm::Intrinsic::ID nvptx, llvm::Intrinsic::ID amdgpu);
  Expected<Value*> binary(kir::V v, Value* a, Value* c);
  Expected<Value*> unary(kir::V v, Value* a);
  Value* compare(Opc op, Scalar t, Value* a, Value* c);
  Value* convert(Scalar from, Scalar to, Value* x);
  Value* load(const kir::Inst& in, Value* index);
  Value* widen(kir::Elem e, Value* raw);
  void store(const kir::Inst& in, Value* index, Value* value);
  Value* sharedAt(int32_t array, Value* index);
  void asyncCopy(const kir::Inst& in);
  void barrier();
  Value* warpOp(kir::V v);
  Value* mfma(const kir::Inst& in);
  Value* mmaShared(kir::V v);
  Value* mmaWait(const kir::Inst& in);
  Value* inlineAsm(const std::string& text, llvm::Type* result, const std::string& constraints,
                   const std::vector<Value*>& args);
  Status loop(kir::V v);
  Status branch(kir::V v);
  Error unsupported(kir::V v);

  const kir::Kernel& k_;
  Target target_;
  bool waitForPrevious_;
  llvm::Module& m_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  Math math_;
  llvm::Function* fn_ = nullptr;
  std::vector<Value*> vals_;
  std::vector<llvm::AllocaInst*> vars_;
  // The workgroup-memory object, and each array's byte offset in it.
  llvm::GlobalVariable* shared_ = nullptr;
  std::vector<int64_t> sharedOffsets_;
  std::vector<kir::V> nextLink_;  // the warpgroup product that accumulates onto each one, or -1
  std::unordered_map<kir::V, std::vector<Value*>> packedA_;  // each MmaSharedB link's A registers
};

llvm::Type* Writer::type(Scalar s) {
  switch (s) {
    case Scalar::Bool: return b_.getInt1Ty();
    case Scalar::I32: return b_.getInt32Ty();
    case Scalar::I64: return b_.getInt64Ty();
    case Scalar::F32: return b_.getFloatTy();
    case Scalar::F16: return b_.getHalfTy();
    case Scalar::BF16: return b_.getBFloatTy();
  }
  return nullptr;
}

llvm::Type* Writer::elemType(kir::Elem e) {
  switch (e) {
    case kir::Elem::F32: return b_.getFloatTy();
    case kir::Elem::F16: return b_.getHalfTy();
    case kir::Elem::BF16: return b_.getBFloatTy();
    case kir::Elem::I32: return b_.getInt32Ty();
    case kir::Elem::I64: return b_.getInt64Ty();
    case kir::Elem::U8:
    case kir::Elem::I8: return b_.getInt8Ty();
    case kir::Elem::U16: return b_.getInt16Ty();
  }
  return nullptr;
}

Error Writer::unsupported(kir::V v) {
  const kir::Inst& in = k_.insts[size_t(v)];
  return makeError(ErrorKind::Verify, Loc{},
                   "inst " + std::to_string(v) + ": " + kir::opcName(in.op) + " on " + kir::scalarName(in.type) +
                       " has no llvm lowering");
}

// The entry function, its kernel marking and the workgroup arrays.
void Writer::declare() {
  std::vector<llvm::Type*> params(k_.buffers.size(), b_.getPtrTy(1));
  fn_ = llvm::Function::Create(llvm::FunctionType::get(b_.getVoidTy(), params, false),
                               llvm::Function::ExternalLinkage, k_.entry, m_);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  for (size_t i = 0; i < k_.buffers.size(); ++i) {
    llvm::Argument* a = fn_->getArg(unsigned(i));
    a->setName(k_.buffers[i].name);
    a->addAttr(llvm::Attribute::NoCapture);
    if (!k_.buffers[i].written) a->addAttr(llvm::Attribute::ReadOnly);
  }
  if (target_ == Target::Ptx) {
    fn_->setCallingConv(llvm::CallingConv::PTX_Kernel);
    llvm::NamedMDNode* md = m_.getOrInsertNamedMetadata("nvvm.annotations");
    for (auto [key, value] : {std::pair<const char*, int64_t>{"kernel", 1}, {"maxntidx", k_.workgroupSize}})
      md->addOperand(llvm::MDNode::get(ctx_, {llvm::ValueAsMetadata::get(fn_), llvm::MDString::get(ctx_, key),
                                              llvm::ConstantAsMetadata::get(b_.getInt32(uint32_t(value)))}));
  } else {
    fn_->setCallingConv(llvm::CallingConv::AMDGPU_KERNEL);
    fn_->addFnAttr("amdgpu-flat-work-group-size", "1," + std::to_string(k_.workgroupSize));
    m_.addModuleFlag(llvm::Module::Error, "amdhsa_code_object_version", 500);
  }
  // Workgroup arrays are laid end to end, at the byte offsets KIR gives
  // them, in one 16-byte aligned addrspace(3) object, so a wide access at an
  // offset that is a multiple of its width is aligned (kir.h) and the
  // object's size is exactly the kernel's workgroup memory: a static array,
  // except on NVPTX past the 48 KiB a kernel may declare statically, where it
  // is the dynamic shared array (`extern .shared`) and whoever launches the
  // kernel passes its workgroup memory (the plan records it) as the dynamic
  // shared size, raising the function's limit to match.
  if (k_.shared.empty()) return;
  int64_t bytes = k_.sharedBytes();
  bool dynamic = target_ == Target::Ptx && bytes > kPtxStaticSharedBytes;
  auto* ty = llvm::ArrayType::get(b_.getInt8Ty(), dynamic ? 0 : uint64_t(bytes));
  shared_ = new llvm::GlobalVariable(m_, ty, false,
                                     dynamic ? llvm::GlobalValue::ExternalLinkage : llvm::GlobalValue::InternalLinkage,
                                     dynamic ? nullptr : llvm::UndefValue::get(ty),
                                     dynamic ? "poot_dynamic_shared" : "poot_shared", nullptr,
                                     llvm::GlobalValue::NotThreadLocal, 3);
  // 1024 where an MmaShared's swizzle reads the address bits (kir.h).
  bool swizzled = std::any_of(k_.insts.begin(), k_.insts.end(), [](const kir::Inst& in) { return kir::isGroupMma(in.op); });
  shared_->setAlignment(llvm::Align(swizzled ? 1024 : 16));
  sharedOffsets_ = k_.sharedOffsets();
}

Status Writer::write() {
  declare();
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", fn_));
  unsigned allocaSpace = m_.getDataLayout().getAllocaAddrSpace();
  for (size_t i = 0; i < k_.vars.size(); ++i)
    vars_.push_back(b_.CreateAlloca(type(k_.vars[i]), allocaSpace, nullptr, "var" + std::to_string(i)));
  if (waitForPrevious_) inlineAsm("griddepcontrol.wait;", b_.getVoidTy(), "~{memory}", {});
  if (auto s = block(k_.body); !s) return s;
  b_.CreateRetVoid();
  return ok();
}

Status Writer::block(const kir::Block& blk) {
  for (kir::V v : blk.items)
    if (auto s = inst(v); !s) return s;
  return ok();
}

Value* Writer::constant(const kir::Inst& in) {
  switch (in.type) {
    case Scalar::Bool: return b_.getInt1(in.imm != 0);
    case Scalar::I32: return b_.getInt32(uint32_t(in.imm));
    case Scalar::I64: return b_.getInt64(uint64_t(in.imm));
    case Scalar::F32: return llvm::ConstantFP::get(b_.getFloatTy(), in.fimm);
    default: return nullptr;  // the verifier refuses two-byte constants
  }
}

Value* Writer::special(llvm::Intrinsic::ID nvptx, llvm::Intrinsic::ID amdgpu) {
  return b_.CreateIntrinsic(target_ == Target::Ptx ? nvptx : amdgpu, {}, {});
}

Status Writer::inst(kir::V v) {
  const kir::Inst& in = k_.insts[size_t(v)];
  auto arg = [&](size_t i) { return vals_[size_t(in.args[i])]; };
  Scalar operand = in.args.empty() ? in.type : k_.insts[size_t(in.args[0])].type;
  // A wave's matrix op (64 threads) lowers on AMDGPU only, every other
  // PTX-only op on NVPTX only.
  bool wave = in.op == Opc::Mma && matrixShape(MatrixOp(in.ref)).threads == 64;
  if (wave ? target_ == Target::Ptx : kir::opInfo(in.op).ptxOnly && target_ != Target::Ptx) return unsupported(v);
  Value* r = nullptr;
  switch (in.op) {
    case Opc::Const: r = constant(in); break;
    case Opc::GroupX:
      r = special(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x, llvm::Intrinsic::amdgcn_workgroup_id_x);
      break;
    case Opc::GroupY:
      r = special(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y, llvm::Intrinsic::amdgcn_workgroup_id_y);
      break;
    case Opc::Local: {
      auto* call = llvm::cast<llvm::CallInst>(
          special(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, llvm::Intrinsic::amdgcn_workitem_id_x));
      call->setMetadata(llvm::LLVMContext::MD_range,
                        llvm::MDBuilder(ctx_).createRange(llvm::APInt(32, 0), llvm::APInt(32, k_.workgroupSize)));
      r = call;
      break;
    }
    case Opc::Neg: case Opc::Not: case Opc::Abs: case Opc::Exp: case Opc::Exp2: case Opc::Log: case Opc::Sqrt:
    case Opc::Rsqrt: case Opc::Tanh: case Opc::Sin: case Opc::Cos: case Opc::Floor: {
      auto x = unary(v, arg(0));
      if (!x) return x.error();
      r = *x;
      break;
    }
    case Opc::Lt: case Opc::Le: case Opc::Gt: case Opc::Ge: case Opc::Eq: case Opc::Ne:
      r = compare(in.op, operand, arg(0), arg(1));
      break;
    case Opc::Select: r = b_.CreateSelect(arg(0), arg(1), arg(2)); break;
    case Opc::Fma: r = b_.CreateIntrinsic(llvm::Intrinsic::fma, {b_.getFloatTy()}, {arg(0), arg(1), arg(2)}); break;
    case Opc::Convert: r = convert(operand, in.type, arg(0)); break;
    case Opc::Bitcast: r = b_.CreateBitCast(arg(0), type(in.type)); break;
    case Opc::Load: r = load(in, arg(0)); break;
    case Opc::LoadVec: {
      const kir::Buffer& buf = k_.buffers[size_t(in.ref)];
      llvm::Type* et = elemType(buf.elem);
      Value* p = b_.CreateInBoundsGEP(et, fn_->getArg(unsigned(in.ref)), arg(0));
      r = b_.CreateAlignedLoad(llvm::FixedVectorType::get(et, unsigned(in.imm)), p,
                               llvm::Align(uint64_t(in.imm * kir::elemBytes(buf.elem))));
      break;
    }
    case Opc::Lane: {
      const kir::Inst& vec = k_.insts[size_t(in.args[0])];
      // A matrix op's registers are a struct (NVPTX), everything else a vector.
      r = arg(0)->getType()->isStructTy() ? b_.CreateExtractValue(arg(0), {unsigned(in.imm)})
                                          : b_.CreateExtractElement(arg(0), uint64_t(in.imm));
      if (vec.op == Opc::LoadVec) r = widen(k_.buffers[size_t(vec.ref)].elem, r);
      break;
    }
    case Opc::Store: store(in, arg(0), arg(1)); break;
    case Opc::SharedLoad:
      r = b_.CreateAlignedLoad(type(in.type), sharedAt(in.ref, arg(0)), llvm::Align(uint64_t(kir::scalarBytes(in.type))));
      break;
    case Opc::SharedLoadVec:
      r = b_.CreateAlignedLoad(llvm::FixedVectorType::get(type(in.type), unsigned(in.imm)), sharedAt(in.ref, arg(0)),
                               llvm::Align(uint64_t(in.imm * kir::scalarBytes(in.type))));
      break;
    case Opc::SharedStore:
      b_.CreateAlignedStore(arg(1), sharedAt(in.ref, arg(0)),
                            llvm::Align(uint64_t(kir::scalarBytes(k_.shared[size_t(in.ref)].type))));
      break;
    case Opc::SharedStoreVec: {
      Value* vec = llvm::PoisonValue::get(llvm::FixedVectorType::get(arg(1)->getType(), unsigned(in.imm)));
      for (int64_t e = 0; e < in.imm; ++e) vec = b_.CreateInsertElement(vec, arg(size_t(e) + 1), uint64_t(e));
      b_.CreateAlignedStore(vec, sharedAt(in.ref, arg(0)),
                            llvm::Align(uint64_t(in.imm * kir::scalarBytes(k_.shared[size_t(in.ref)].type))));
      break;
    }
    case Opc::GetVar: r = b_.CreateLoad(type(in.type), vars_[size_t(in.ref)]); break;
    case Opc::SetVar: b_.CreateStore(arg(0), vars_[size_t(in.ref)]); break;
    case Opc::For: return loop(v);
    case Opc::If: return branch(v);
    case Opc::Barrier: barrier(); break;
    case Opc::CopyAsync:
    case Opc::AsyncCommit:
    case Opc::AsyncWait: asyncCopy(in); break;
    case Opc::ShuffleXor:
    case Opc::Mma: r = warpOp(v); break;
    case Opc::MmaShared:
    case Opc::MmaSharedB: r = mmaShared(v); break;
    case Opc::MmaWait: r = mmaWait(in); break;
    default: {  // the binary operations
      auto x = binary(v, arg(0), arg(1));
      if (!x) return x.error();
      r = *x;
      break;
    }
  }
  if (r && !r->getType()->isVoidTy() && !r->hasName() && !llvm::isa<llvm::Constant>(r)) r->setName("v" + std::to_string(v));
  vals_[size_t(v)] = r;
  return ok();
}

Expected<Value*> Writer::binary(kir::V v, Value* a, Value* c) {
  const kir::Inst& in = k_.insts[size_t(v)];
  bool fp = in.type == Scalar::F32, boolean = in.type == Scalar::Bool;
  auto intrinsic = [&](llvm::Intrinsic::ID id) { return b_.CreateBinaryIntrinsic(id, a, c); };
  switch (in.op) {
    case Opc::Add: return fp ? b_.CreateFAdd(a, c) : b_.CreateAdd(a, c);
    case Opc::Sub: return fp ? b_.CreateFSub(a, c) : b_.CreateSub(a, c);
    case Opc::Mul: return fp ? b_.CreateFMul(a, c) : b_.CreateMul(a, c);
    case Opc::Div:
      if (boolean) return unsupported(v);
      return fp ? b_.CreateFDiv(a, c) : b_.CreateSDiv(a, c);
    case Opc::Rem:
      if (boolean) return unsupported(v);
      return fp ? b_.CreateFRem(a, c) : b_.CreateSRem(a, c);
    case Opc::Min:
      return intrinsic(fp ? llvm::Intrinsic::minnum : boolean ? llvm::Intrinsic::umin : llvm::Intrinsic::smin);
    case Opc::Max:
      return intrinsic(fp ? llvm::Intrinsic::maxnum : boolean ? llvm::Intrinsic::umax : llvm::Intrinsic::smax);
    case Opc::Pow:
      if (!fp) return unsupported(v);
      return math_.pow(a, c);
    case Opc::And: case Opc::Or: case Opc::Xor:
      if (fp) return unsupported(v);
      return in.op == Opc::And ? b_.CreateAnd(a, c) : in.op == Opc::Or ? b_.CreateOr(a, c) : b_.CreateXor(a, c);
    case Opc::Shl: case Opc::ShrA: case Opc::ShrL:
      if (fp || boolean) return unsupported(v);
      return in.op == Opc::Shl ? b_.CreateShl(a, c) : in.op == Opc::ShrA ? b_.CreateAShr(a, c) : b_.CreateLShr(a, c);
    default: return unsupported(v);
  }
}

Expected<Value*> Writer::unary(kir::V v, Value* a) {
  const kir::Inst& in = k_.insts[size_t(v)];
  bool fp = in.type == Scalar::F32;
  switch (in.op) {
    case Opc::Neg: return fp ? b_.CreateFNeg(a) : b_.CreateNeg(a);
    case Opc::Not:
      if (fp) return unsupported(v);
      return b_.CreateNot(a);
    case Opc::Abs:
      if (fp) return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, a);
      if (in.type == Scalar::Bool) return a;
      return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, a, b_.getFalse());
    case Opc::Floor: return fp ? b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, a) : a;
    default: break;
  }
  if (!fp) return unsupported(v);
  switch (in.op) {
    case Opc::Exp: return math_.exp(a);
    case Opc::Exp2: return math_.exp2(a);
    case Opc::Log: return math_.log(a);
    case Opc::Sqrt: return math_.sqrt(a);
    case Opc::Rsqrt: return math_.rsqrt(a);
    case Opc::Tanh: return math_.tanh(a);
    case Opc::Sin: return math_.sin(a);
    case Opc::Cos: return math_.cos(a);
    default: return unsupported(v);
  }
}

Value* Writer::compare(Opc op, Scalar t, Value* a, Value* c) {
  using P = llvm::CmpInst::Predicate;
  int i = int(op) - int(Opc::Lt);
  if (t == Scalar::F32) {
    static const P fp[] = {P::FCMP_OLT, P::FCMP_OLE, P::FCMP_OGT, P::FCMP_OGE, P::FCMP_OEQ, P::FCMP_UNE};
    return b_.CreateFCmp(fp[i], a, c);
  }
  static const P sint[] = {P::ICMP_SLT, P::ICMP_SLE, P::ICMP_SGT, P::ICMP_SGE, P::ICMP_EQ, P::ICMP_NE};
  static const P uint[] = {P::ICMP_ULT, P::ICMP_ULE, P::ICMP_UGT, P::ICMP_UGE, P::ICMP_EQ, P::ICMP_NE};
  return b_.CreateICmp(t == Scalar::Bool ? uint[i] : sint[i], a, c);
}

Value* Writer::convert(Scalar from, Scalar to, Value* x) {
  if (from == to) return x;
  // f16 and bf16 convert to and from f32 only: exact, or round to nearest even.
  if (kir::isTwoByte(from)) return b_.CreateFPExt(x, b_.getFloatTy());
  if (kir::isTwoByte(to)) return b_.CreateFPTrunc(x, type(to));
  if (to == Scalar::Bool)
    return from == Scalar::F32 ? b_.CreateFCmpUNE(x, llvm::ConstantFP::get(x->getType(), 0.0))
                               : b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
  if (from == Scalar::Bool) return to == Scalar::F32 ? b_.CreateUIToFP(x, type(to)) : b_.CreateZExt(x, type(to));
  if (to == Scalar::F32) return b_.CreateSIToFP(x, type(to));
  // Out of range is unspecified in KIR, but must not be poison here.
  if (from == Scalar::F32) return b_.CreateFreeze(b_.CreateFPToSI(x, type(to)));
  return b_.CreateSExtOrTrunc(x, type(to));
}

Value* Writer::load(const kir::Inst& in, Value* index) {
  const kir::Buffer& buf = k_.buffers[size_t(in.ref)];
  llvm::Type* et = elemType(buf.elem);
  Value* p = b_.CreateInBoundsGEP(et, fn_->getArg(unsigned(in.ref)), index);
  return widen(buf.elem, b_.CreateAlignedLoad(et, p, llvm::Align(uint64_t(kir::elemBytes(buf.elem)))));
}

Value* Writer::widen(kir::Elem e, Value* raw) {
  switch (e) {
    case kir::Elem::U8:
    case kir::Elem::U16: return b_.CreateZExt(raw, b_.getInt32Ty());
    case kir::Elem::I8: return b_.CreateSExt(raw, b_.getInt32Ty());
    default: return raw;
  }
}

void Writer::store(const kir::Inst& in, Value* index, Value* value) {
  const kir::Buffer& buf = k_.buffers[size_t(in.ref)];
  llvm::Type* et = elemType(buf.elem);
  if (buf.elem == kir::Elem::U8 || buf.elem == kir::Elem::I8 || buf.elem == kir::Elem::U16)
    value = b_.CreateTrunc(value, et);
  Value* p = b_.CreateInBoundsGEP(et, fn_->getArg(unsigned(in.ref)), index);
  b_.CreateAlignedStore(value, p, llvm::Align(uint64_t(kir::elemBytes(buf.elem))));
}

Value* Writer::sharedAt(int32_t array, Value* index) {
  int bytes = kir::scalarBytes(k_.shared[size_t(array)].type);
  Value* byte = b_.CreateAdd(b_.getInt32(uint32_t(sharedOffsets_[size_t(array)])), b_.CreateMul(index, b_.getInt32(uint32_t(bytes))));
  return b_.CreateInBoundsGEP(b_.getInt8Ty(), shared_, {byte});
}

void Writer::barrier() {
  if (target_ == Target::Ptx) {
    b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
    return;
  }
  llvm::SyncScope::ID workgroup = ctx_.getOrInsertSyncScopeID("workgroup");
  b_.CreateFence(llvm::AtomicOrdering::Release, workgroup);
  b_.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_barrier, {}, {});
  b_.CreateFence(llvm::AtomicOrdering::Acquire, workgroup);
}

// PTX's shfl.sync.bfly over the whole warp (clamp 31), and its mma.sync of
// each matrix op, whose A and B registers LLVM types as 32-bit values (a
// tf32 as i32, a pair of bf16 as i32, a pair of f16 as <2 x half>: the
// operands packed in order, the lower-numbered in the low half) and whose
// result is a struct of the four f32 elements (read by Lane).
Value* Writer::warpOp(kir::V v) {
  const kir::Inst& in = k_.insts[size_t(v)];
  auto arg = [&](size_t i) { return vals_[size_t(in.args[i])]; };
  if (in.op == Opc::ShuffleXor) {
    auto id = in.type == Scalar::F32 ? llvm::Intrinsic::nvvm_shfl_sync_bfly_f32 : llvm::Intrinsic::nvvm_shfl_sync_bfly_i32;
    return b_.CreateIntrinsic(id, {}, {b_.getInt32(0xFFFFFFFFu), arg(0), b_.getInt32(uint32_t(in.imm)), b_.getInt32(31)});
  }
  const MatrixShape& shape = matrixShape(MatrixOp(in.ref));
  if (shape.threads == 64) return mfma(in);
  llvm::Intrinsic::ID id = shape.op == MatrixOp::M16N8K8Tf32    ? llvm::Intrinsic::nvvm_mma_m16n8k8_row_col_tf32
                           : shape.op == MatrixOp::M16N8K16Bf16 ? llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16
                                                                : llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32;
  llvm::FunctionType* ft = llvm::Intrinsic::getType(ctx_, id);
  size_t ab = size_t(shape.aRegs + shape.bRegs), per = shape.operand == DType::F32 ? 1 : 2;
  std::vector<Value*> ops;
  for (size_t i = 0; i < ab; i += per) {
    Value* x = arg(i);
    if (per == 2) {
      x = llvm::PoisonValue::get(llvm::FixedVectorType::get(x->getType(), 2));
      x = b_.CreateInsertElement(b_.CreateInsertElement(x, arg(i), uint64_t(0)), arg(i + 1), uint64_t(1));
    }
    ops.push_back(b_.CreateBitCast(x, ft->getParamType(unsigned(ops.size()))));
  }
  for (size_t i = ab; i < ab + 4; ++i) ops.push_back(arg(i));
  return b_.CreateIntrinsic(id, {}, ops);
}

// AMD's v_mfma_f32_16x16x16_bf16 (LLVM's 16x16x16bf16_1k, the bf16 as
// 16-bit integers) and _f16: A's four and B's four operands as vectors, C
// and D as a vector of four f32; no broadcast or block modifiers.
Value* Writer::mfma(const kir::Inst& in) {
  bool bf16 = matrixShape(MatrixOp(in.ref)).operand == DType::BF16;
  auto id = bf16 ? llvm::Intrinsic::amdgcn_mfma_f32_16x16x16bf16_1k : llvm::Intrinsic::amdgcn_mfma_f32_16x16x16f16;
  llvm::FunctionType* ft = llvm::Intrinsic::getType(ctx_, id);
  auto pack = [&](size_t from, size_t n, llvm::Type* t) {
    Value* x = llvm::PoisonValue::get(llvm::FixedVectorType::get(vals_[size_t(in.args[from])]->getType(), unsigned(n)));
    for (size_t i = 0; i < n; ++i) x = b_.CreateInsertElement(x, vals_[size_t(in.args[from + i])], uint64_t(i));
    return b_.CreateBitCast(x, t);
  };
  return b_.CreateIntrinsic(id, {}, {pack(0, 4, ft->getParamType(0)), pack(4, 4, ft->getParamType(1)),
                                     pack(8, 4, ft->getParamType(2)), b_.getInt32(0), b_.getInt32(0), b_.getInt32(0)});
}

Value* Writer::inlineAsm(const std::string& text, llvm::Type* result, const std::string& constraints,
                         const std::vector<Value*>& args) {
  std::vector<llvm::Type*> types;
  for (Value* a : args) types.push_back(a->getType());
  auto* asmValue = llvm::InlineAsm::get(llvm::FunctionType::get(result, types, false), text, constraints,
                                        /*hasSideEffects=*/true);
  return b_.CreateCall(asmValue, args);
}

// PTX's wgmma (sm_90a), as inline assembly: LLVM 19 has no intrinsic for
// it. A chain's first link makes the threads' writes to workgroup memory
// visible to the asynchronous proxy the products read through
// (fence.proxy.async) and fences the accumulator registers (wgmma.fence);
// every link issues wgmma.mma_async, its C the D registers it tied; the last
// commits the group. An MmaWait waits (wgmma.wait_group) with its operands
// threaded through the wait, so nothing reads them before; the verifier
// keeps every other reader of a chain's D behind one (kir.h). The descriptors hold the tile's byte address and
// its 1024-byte block stride (the stride byte offset), each over 16, and the
// 128-byte swizzle (mode 1); an N-major B (MmaSharedB) also its 64-column
// blocks' stride as the leading byte offset, read transposed (imm-trans-b
// 1), which a K-major tile under that swizzle does not use. MmaSharedB's A
// is four 32-bit registers, each a pair of its operands (the lower-numbered
// in the low half).
Value* Writer::mmaShared(kir::V v) {
  const kir::Inst& in = k_.insts[size_t(v)];
  auto arg = [&](size_t i) { return vals_[size_t(in.args[i])]; };
  const MatrixShape& shape = matrixShape(MatrixOp(in.ref));
  unsigned regs = unsigned(kir::mmaSharedColumns(k_, v) / 2);
  bool chain = kir::chainedOnto(k_, in) >= 0, regsA = in.op == Opc::MmaSharedB;
  const size_t c0 = kir::groupMmaC(in.op);
  llvm::Type* f32 = b_.getFloatTy();
  auto* result = llvm::StructType::get(ctx_, std::vector<llvm::Type*>(regs, f32));
  std::string outs, ties, list;
  for (unsigned i = 0; i < regs; ++i) {
    outs += std::string(i ? "," : "") + "=f";
    ties += "," + std::to_string(i);
    list += std::string(i ? ", " : "") + "$" + std::to_string(i);
  }
  if (!chain) {
    // Every link's A registers, packed before the fence: a register written
    // between two links would make ptxas fence again before the second.
    for (kir::V l = regsA ? v : -1; l >= 0; l = nextLink_[size_t(l)]) {
      const kir::Inst& link = k_.insts[size_t(l)];
      for (size_t i = 0; i < 8; i += 2) {
        Value *x = vals_[size_t(link.args[i])], *y = vals_[size_t(link.args[i + 1])];
        Value* pair = llvm::PoisonValue::get(llvm::FixedVectorType::get(x->getType(), 2));
        pair = b_.CreateInsertElement(b_.CreateInsertElement(pair, x, uint64_t(0)), y, uint64_t(1));
        packedA_[l].push_back(b_.CreateBitCast(pair, b_.getInt32Ty()));
      }
    }
    inlineAsm("fence.proxy.async.shared::cta;\n\twgmma.fence.sync.aligned;", b_.getVoidTy(), "~{memory}", {});
  }
  std::vector<Value*> ops;
  for (unsigned i = 0; i < regs; ++i) ops.push_back(chain ? b_.CreateExtractValue(arg(c0), {i}) : arg(c0 + i));
  auto field = [&](Value* bytes, unsigned at) {
    Value* x = b_.CreateLShr(b_.CreateAnd(bytes, b_.getInt32(0x3FFFF)), b_.getInt32(4));
    return b_.CreateShl(b_.CreateZExt(x, b_.getInt64Ty()), b_.getInt64(at));
  };
  auto descriptor = [&](size_t i, bool blocks) {
    Value* address = b_.CreatePtrToInt(sharedAt(int32_t(in.imm), arg(i)), b_.getInt32Ty());
    Value* rowBytes = b_.CreateMul(arg(i + 1), b_.getInt32(2));
    Value* d = b_.CreateOr(b_.CreateOr(field(address, 0), field(rowBytes, 32)), b_.getInt64(uint64_t(1) << 62));
    return blocks ? b_.CreateOr(d, field(b_.CreateMul(arg(i + 2), b_.getInt32(2)), 16)) : d;
  };
  std::string a, constraints = outs + ties;
  unsigned next = 2 * regs;
  if (regsA) {
    for (size_t i = 0; i < 4; ++i) {
      ops.push_back(packedA_.at(v)[i]);
      a += std::string(i ? ", " : "{") + "$" + std::to_string(next++);
      constraints += ",r";
    }
    a += "}";
    ops.push_back(descriptor(8, true));
  } else {
    ops.push_back(descriptor(0, false));
    a = "$" + std::to_string(next++);
    constraints += ",l";
  }
  if (!regsA) ops.push_back(descriptor(2, false));
  unsigned bAt = next++;
  const char* t = shape.operand == DType::BF16 ? "bf16" : "f16";
  std::string text = "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, $" + std::to_string(next) +
                     ", 0;\n\twgmma.mma_async.sync.aligned.m64n" + std::to_string(2 * regs) + "k16.f32." + t + "." + t +
                     " {" + list + "}, " + a + ", $" + std::to_string(bAt) + (regsA ? ", p, 1, 1, 1;" : ", p, 1, 1, 0, 0;") +
                     "\n\t}";
  ops.push_back(b_.getInt32(1));
  Value* d = inlineAsm(text, result, constraints + ",l,r,~{memory}", ops);
  if (nextLink_[size_t(v)] < 0) inlineAsm("wgmma.commit_group.sync.aligned;", b_.getVoidTy(), "~{memory}", {});
  return d;
}

Value* Writer::mmaWait(const kir::Inst& in) {
  std::string text = "wgmma.wait_group.sync.aligned " + std::to_string(in.imm) + ";";
  if (in.args.empty()) return inlineAsm(text, b_.getVoidTy(), "~{memory}", {});
  std::string outs, ties;
  std::vector<Value*> held;
  for (size_t i = 0; i < in.args.size(); ++i) {
    outs += std::string(i ? "," : "") + "=f";
    ties += "," + std::to_string(i);
    held.push_back(vals_[size_t(in.args[i])]);
  }
  auto* result = llvm::StructType::get(ctx_, std::vector<llvm::Type*>(in.args.size(), b_.getFloatTy()));
  return inlineAsm(text, result, outs + ties + ",~{memory}", held);
}

// PTX's cp.async.cg of 16 bytes with a source size (16, or 0 for zeros),
// its commit_group and its wait_group.
void Writer::asyncCopy(const kir::Inst& in) {
  if (in.op == Opc::AsyncCommit) {
    b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, {}, {});
    return;
  }
  if (in.op == Opc::AsyncWait) {
    b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {}, {b_.getInt32(uint32_t(in.imm))});
    return;
  }
  auto arg = [&](size_t i) { return vals_[size_t(in.args[i])]; };
  llvm::Type* et = elemType(k_.buffers[size_t(in.ref)].elem);
  Value* src = b_.CreateInBoundsGEP(et, fn_->getArg(unsigned(in.ref)), arg(0));
  Value* size = b_.CreateSelect(arg(2), b_.getInt32(16), b_.getInt32(0));
  b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s, {},
                     {sharedAt(int32_t(in.imm), arg(1)), src, size});
}

// Generated loops stay far from INT32_MAX, so the increment is nsw, which
// lets the loop passes count trips.
Status Writer::loop(kir::V v) {
  const kir::Inst& in = k_.insts[size_t(v)];
  Value* lo = vals_[size_t(in.args[0])];
  Value* hi = vals_[size_t(in.args[1])];
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* head = llvm::BasicBlock::Create(ctx_, "for.head", fn_);
  auto* body = llvm::BasicBlock::Create(ctx_, "for.body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, "for.exit", fn_);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt32Ty(), 2, "i" + std::to_string(v));
  i->addIncoming(lo, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(i, hi), body, exit);
  b_.SetInsertPoint(body);
  vals_[size_t(v)] = i;
  if (auto s = block(in.body); !s) return s;
  i->addIncoming(b_.CreateNSWAdd(i, b_.getInt32(uint32_t(in.imm))), b_.GetInsertBlock());
  b_.CreateBr(head);
  exit->moveAfter(b_.GetInsertBlock());
  b_.SetInsertPoint(exit);
  return ok();
}

Status Writer::branch(kir::V v) {
  const kir::Inst& in = k_.insts[size_t(v)];
  auto* then = llvm::BasicBlock::Create(ctx_, "if.then", fn_);
  auto* merge = llvm::BasicBlock::Create(ctx_, "if.end", fn_);
  llvm::BasicBlock* orelse = in.orelse.items.empty() ? merge : llvm::BasicBlock::Create(ctx_, "if.else", fn_);
  b_.CreateCondBr(vals_[size_t(in.args[0])], then, orelse);
  b_.SetInsertPoint(then);
  if (auto s = block(in.body); !s) return s;
  b_.CreateBr(merge);
  if (orelse != merge) {
    orelse->moveAfter(b_.GetInsertBlock());
    b_.SetInsertPoint(orelse);
    if (auto s = block(in.orelse); !s) return s;
    b_.CreateBr(merge);
  }
  merge->moveAfter(b_.GetInsertBlock());
  b_.SetInsertPoint(merge);
  return ok();
}

}  // namespace

Expected<std::unique_ptr<llvm::Module>> buildModule(const kir::Kernel& k, Target target,
                                                    const llvm::TargetMachine& tm, llvm::LLVMContext& ctx) {
  auto m = std::make_unique<llvm::Module>(k.entry, ctx);
  m->setTargetTriple(tm.getTargetTriple().str());
  m->setDataLayout(tm.createDataLayout());
  // griddepcontrol needs sm_90 (and PTX ISA 7.8; the lowering writes 8.0).
  llvm::StringRef cpu = tm.getTargetCPU();
  unsigned sm = 0;
  bool waits = target == Target::Ptx && cpu.consume_front("sm_") && !cpu.consumeInteger(10, sm) && sm >= 90;
  if (auto s = Writer(k, target, waits, *m).write(); !s) return s.error();
  return m;
}

}  // namespace poot::llvmgen

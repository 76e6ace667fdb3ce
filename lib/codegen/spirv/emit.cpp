// The emitter's frame: capabilities from legalize, one StorageBuffer variable
// per binding (a Block struct per element type, NonWritable when never
// stored) and, for a buffer read by wide loads, a second one at its binding
// viewing it as vectors of 2 or 4 elements, Workgroup arrays, the WorkgroupId and LocalInvocationIndex
// builtins on first use, one GLCompute entry point whose interface lists every
// global, and the function body. Control flow stays structured: a For is a
// loop whose header holds the induction OpPhi and the exit test, whose body
// falls into a continue block that adds the step (stopping at hi where the
// sum would wrap, as KIR's loop stops); an If is a selection whose
// empty else branches straight to the merge. Function variables open the
// first block, as SPIR-V requires.
#include <spirv/unified1/GLSL.std.450.h>

#include <string>

#include "codegen/spirv/emitter.h"
#include "codegen/spirv/spirv.h"

namespace poot::spirv {

using kir::Elem;
using kir::Opc;
using kir::Scalar;

Id Emitter::op(SpvOp o, Id type, const Words& args) {
  Id r = m_.id();
  put(m_.s.functions, o, cat({type, r}, args));
  return r;
}

Id Emitter::ext(uint32_t glslOp, Id type, const Words& args) {
  return op(SpvOpExtInst, type, cat({m_.glsl(), glslOp}, args));
}

Id Emitter::scalar(Scalar s) {
  switch (s) {
    case Scalar::Bool: return m_.boolType();
    case Scalar::I32: return i32();
    case Scalar::I64: return m_.intType(64, true);
    case Scalar::F32:
    case Scalar::F16: return f32();
    case Scalar::BF16: break;  // legalize refuses it
  }
  return 0;
}

Id Emitter::sharedType(Scalar s) { return s == Scalar::F16 ? m_.floatType(16) : scalar(s); }

Id Emitter::sharedLoad(const kir::Inst& in, Id index) {
  Scalar s = k_.shared[size_t(in.ref)].type;
  Id t = sharedType(s);
  Id ptr = op(SpvOpAccessChain, m_.pointerType(SpvStorageClassWorkgroup, t), {shared_[size_t(in.ref)], index});
  Id x = op(SpvOpLoad, t, {ptr});
  return s == Scalar::F16 ? op(SpvOpFConvert, f32(), {x}) : x;
}

void Emitter::sharedStore(const kir::Inst& in, Id index, Id value) {
  Scalar s = k_.shared[size_t(in.ref)].type;
  Id t = sharedType(s);
  Id ptr = op(SpvOpAccessChain, m_.pointerType(SpvStorageClassWorkgroup, t), {shared_[size_t(in.ref)], index});
  if (s == Scalar::F16) value = op(SpvOpFConvert, t, {value});  // exact: the value is an f16's
  put(m_.s.functions, SpvOpStore, {ptr, value});
}

Id Emitter::elemType(Elem e) {
  switch (e) {
    case Elem::F32: return f32();
    case Elem::F16: return m_.floatType(16);
    case Elem::I32: return i32();
    case Elem::I64: return m_.intType(64, true);
    case Elem::U8: return m_.intType(8, false);
    case Elem::I8: return m_.intType(8, true);
    case Elem::U16: return m_.intType(16, false);
    case Elem::BF16: break;  // legalize refuses it
  }
  return 0;
}

void Emitter::declareGlobals() {
  for (size_t i = 0; i < k_.buffers.size(); ++i) {
    const kir::Buffer& b = k_.buffers[i];
    Id block = m_.blockType(elemType(b.elem), uint32_t(kir::elemBytes(b.elem)));
    Id var = m_.variable(m_.pointerType(SpvStorageClassStorageBuffer, block), SpvStorageClassStorageBuffer);
    m_.name(var, b.name);
    m_.decorate(var, SpvDecorationDescriptorSet, {0});
    m_.decorate(var, SpvDecorationBinding, {uint32_t(i)});
    if (!b.written) m_.decorate(var, SpvDecorationNonWritable);
    buffers_.push_back(var);
    interface_.push_back(var);
  }
  // A read-only buffer read by wide loads is also bound as an array of
  // vectors of 2 or 4 elements (a second variable at its binding), one
  // vector an aligned run: logical addressing has no pointer cast, and
  // aliasing is safe because nothing writes the buffer.
  for (const kir::Inst& in : k_.insts) {
    if (in.op != Opc::LoadVec) continue;
    uint32_t n = uint32_t(viewLanes(in.imm));
    if (views_.count({in.ref, n})) continue;
    const kir::Buffer& b = k_.buffers[size_t(in.ref)];
    Id vec = m_.vectorType(elemType(b.elem), n);
    Id block = m_.blockType(vec, n * uint32_t(kir::elemBytes(b.elem)));
    Id var = m_.variable(m_.pointerType(SpvStorageClassStorageBuffer, block), SpvStorageClassStorageBuffer);
    m_.name(var, b.name + "_x" + std::to_string(n));
    m_.decorate(var, SpvDecorationDescriptorSet, {0});
    m_.decorate(var, SpvDecorationBinding, {uint32_t(in.ref)});
    m_.decorate(var, SpvDecorationNonWritable);
    views_[{in.ref, n}] = var;
    interface_.push_back(var);
  }
  for (const kir::Shared& s : k_.shared) {
    Id array = m_.arrayType(sharedType(s.type), uint32_t(s.elems));
    Id var = m_.variable(m_.pointerType(SpvStorageClassWorkgroup, array), SpvStorageClassWorkgroup);
    m_.name(var, s.name);
    shared_.push_back(var);
    interface_.push_back(var);
  }
}

Id Emitter::builtin(Id& cache, SpvBuiltIn b, Id pointee, const char* name) {
  if (cache == 0) {
    cache = m_.variable(m_.pointerType(SpvStorageClassInput, pointee), SpvStorageClassInput);
    m_.name(cache, name);
    m_.decorate(cache, SpvDecorationBuiltIn, {uint32_t(b)});
    interface_.push_back(cache);
  }
  return cache;
}

Id Emitter::groupId(uint32_t component) {
  Id v3 = m_.vectorType(u32(), 3);
  Id var = builtin(workgroupId_, SpvBuiltInWorkgroupId, v3, "workgroup_id");
  Id u = op(SpvOpCompositeExtract, u32(), {op(SpvOpLoad, v3, {var}), component});
  return op(SpvOpBitcast, i32(), {u});
}

Words Emitter::run() {
  m_.capability(SpvCapabilityShader);
  // Without this mode Vulkan lets a driver assume no f32 value is NaN or
  // infinite; generators test for both (masked keys are -inf, Max and Min
  // propagate NaN), so every module asks for IEEE behaviour and the runtime
  // refuses a device without shaderSignedZeroInfNanPreserveFloat32.
  m_.capability(SpvCapabilitySignedZeroInfNanPreserve);
  if (needs_.int64) m_.capability(SpvCapabilityInt64);
  if (needs_.storage8) m_.capability(SpvCapabilityStorageBuffer8BitAccess);
  if (needs_.storage16) m_.capability(SpvCapabilityStorageBuffer16BitAccess);
  if (needs_.float16) m_.capability(SpvCapabilityFloat16);
  put(m_.s.memoryModel, SpvOpMemoryModel, {SpvAddressingModelLogical, SpvMemoryModelGLSL450});
  declareGlobals();

  Id voidT = m_.voidType();
  Id fn = m_.id();
  put(m_.s.functions, SpvOpFunction, {voidT, fn, SpvFunctionControlMaskNone, m_.functionType(voidT)});
  label(m_.id());
  for (Scalar s : k_.vars)
    vars_.push_back(op(SpvOpVariable, m_.pointerType(SpvStorageClassFunction, scalar(s)), {SpvStorageClassFunction}));
  vals_.assign(k_.insts.size(), 0);
  block(k_.body);
  put(m_.s.functions, SpvOpReturn, {});
  put(m_.s.functions, SpvOpFunctionEnd, {});

  put(m_.s.entryPoints, SpvOpEntryPoint, cat(cat({SpvExecutionModelGLCompute, fn}, literal(k_.entry)), interface_));
  put(m_.s.executionModes, SpvOpExecutionMode, {fn, SpvExecutionModeLocalSize, uint32_t(k_.workgroupSize), 1, 1});
  put(m_.s.executionModes, SpvOpExecutionMode, {fn, SpvExecutionModeSignedZeroInfNanPreserve, 32});
  m_.name(fn, k_.entry);
  return m_.write();
}

void Emitter::label(Id l) {
  put(m_.s.functions, SpvOpLabel, {l});
  current_ = l;
}

void Emitter::block(const kir::Block& b) {
  for (kir::V v : b.items) inst(v);
}

Id Emitter::load(int32_t ref, Id index) {
  const kir::Buffer& b = k_.buffers[size_t(ref)];
  Id t = elemType(b.elem);
  Id ptr = op(SpvOpAccessChain, m_.pointerType(SpvStorageClassStorageBuffer, t),
              {buffers_[size_t(ref)], m_.constant(i32(), 0), index});
  return widen(b.elem, op(SpvOpLoad, t, {ptr}));
}

Id Emitter::widen(Elem e, Id raw) {
  switch (e) {
    case Elem::U8:
    case Elem::U16: return op(SpvOpBitcast, i32(), {op(SpvOpUConvert, u32(), {raw})});
    case Elem::I8: return op(SpvOpSConvert, i32(), {raw});
    case Elem::F16: return op(SpvOpFConvert, f32(), {raw});
    default: return raw;
  }
}

void Emitter::store(const kir::Inst& in) {
  const kir::Buffer& b = k_.buffers[size_t(in.ref)];
  Id t = elemType(b.elem);
  Id ptr = op(SpvOpAccessChain, m_.pointerType(SpvStorageClassStorageBuffer, t),
              {buffers_[size_t(in.ref)], m_.constant(i32(), 0), val(in.args[0])});
  Id value = val(in.args[1]);
  if (b.elem == Elem::U8 || b.elem == Elem::U16) value = op(SpvOpUConvert, t, {value});
  if (b.elem == Elem::I8) value = op(SpvOpSConvert, t, {value});
  if (b.elem == Elem::F16) value = op(SpvOpFConvert, t, {value});  // exact: the value is an f16's
  put(m_.s.functions, SpvOpStore, {ptr, value});
}

void Emitter::loop(kir::V v) {
  const kir::Inst& in = k_.insts[size_t(v)];
  Id header = m_.id(), body = m_.id(), cont = m_.id(), merge = m_.id(), next = m_.id();
  Id entry = current_;
  put(m_.s.functions, SpvOpBranch, {header});
  label(header);
  Id i = op(SpvOpPhi, i32(), {val(in.args[0]), entry, next, cont});
  vals_[size_t(v)] = i;
  Id more = op(SpvOpSLessThan, m_.boolType(), {i, val(in.args[1])});
  put(m_.s.functions, SpvOpLoopMerge, {merge, cont, SpvLoopControlMaskNone});
  put(m_.s.functions, SpvOpBranchConditional, {more, body, merge});
  label(body);
  block(in.body);
  put(m_.s.functions, SpvOpBranch, {cont});
  label(cont);
  // i + step, or hi where that wraps (the loop ends there, as in KIR).
  Id raw = op(SpvOpIAdd, i32(), {i, m_.constant(i32(), uint64_t(in.imm))});
  Id wrapped = op(SpvOpSLessThan, m_.boolType(), {raw, i});
  put(m_.s.functions, SpvOpSelect, {i32(), next, wrapped, val(in.args[1]), raw});
  put(m_.s.functions, SpvOpBranch, {header});
  label(merge);
}

void Emitter::branch(kir::V v) {
  const kir::Inst& in = k_.insts[size_t(v)];
  Id then = m_.id(), merge = m_.id();
  Id orelse = in.orelse.items.empty() ? merge : m_.id();
  put(m_.s.functions, SpvOpSelectionMerge, {merge, SpvSelectionControlMaskNone});
  put(m_.s.functions, SpvOpBranchConditional, {val(in.args[0]), then, orelse});
  label(then);
  block(in.body);
  put(m_.s.functions, SpvOpBranch, {merge});
  if (orelse != merge) {
    label(orelse);
    block(in.orelse);
    put(m_.s.functions, SpvOpBranch, {merge});
  }
  label(merge);
}

void Emitter::inst(kir::V v) {
  const kir::Inst& in = k_.insts[size_t(v)];
  Id& r = vals_[size_t(v)];
  switch (in.op) {
    case Opc::Const: r = constant(in); return;
    case Opc::GroupX: r = groupId(0); return;
    case Opc::GroupY: r = groupId(1); return;
    case Opc::Local: {
      Id var = builtin(localIndex_, SpvBuiltInLocalInvocationIndex, u32(), "local_index");
      r = op(SpvOpBitcast, i32(), {op(SpvOpLoad, u32(), {var})});
      return;
    }
    case Opc::Load: r = load(in.ref, val(in.args[0])); return;
    // One or two vector loads through the buffer's vector view (an aligned
    // run of imm elements is vectors index / n .. of n elements).
    case Opc::LoadVec: {
      const kir::Buffer& b = k_.buffers[size_t(in.ref)];
      uint32_t n = uint32_t(viewLanes(in.imm));
      Id vec = m_.vectorType(elemType(b.elem), n);
      Id first = op(SpvOpSDiv, i32(), {val(in.args[0]), m_.constant(i32(), n)});
      for (uint32_t part = 0; part < uint32_t(in.imm) / n; ++part) {
        Id at = part == 0 ? first : op(SpvOpIAdd, i32(), {first, m_.constant(i32(), part)});
        Id ptr = op(SpvOpAccessChain, m_.pointerType(SpvStorageClassStorageBuffer, vec),
                    {views_.at({in.ref, n}), m_.constant(i32(), 0), at});
        Id raw = op(SpvOpLoad, vec, {ptr});
        // 8- and 16-bit components cannot be extracted without Int8,
        // Int16 or Float16, but whole vectors convert under the storage
        // capabilities: to f32 (f16), u32 (u8, u16) or i32 (i8), exactly as
        // a scalar load widens.
        if (b.elem == Elem::F16) raw = op(SpvOpFConvert, m_.vectorType(f32(), n), {raw});
        if (b.elem == Elem::U8 || b.elem == Elem::U16) raw = op(SpvOpUConvert, m_.vectorType(u32(), n), {raw});
        if (b.elem == Elem::I8) raw = op(SpvOpSConvert, m_.vectorType(i32(), n), {raw});
        wide_[v].push_back(raw);
      }
      return;
    }
    case Opc::Lane: {
      const kir::Inst& vec = k_.insts[size_t(in.args[0])];
      const std::vector<Id>& words = wide_.at(in.args[0]);
      if (vec.op == Opc::SharedLoadVec) {
        r = words[size_t(in.imm)];
        return;
      }
      Elem e = k_.buffers[size_t(vec.ref)].elem;
      int64_t n = viewLanes(vec.imm);
      bool narrowInt = e == Elem::U8 || e == Elem::U16;
      Id part = words[size_t(in.imm / n)];
      r = op(SpvOpCompositeExtract, narrowInt ? u32() : scalar(in.type), {part, uint32_t(in.imm % n)});
      if (narrowInt) r = op(SpvOpBitcast, i32(), {r});
      return;
    }
    case Opc::Store: store(in); return;
    // Workgroup arrays are arrays of scalars: the elements load (or store)
    // one by one, all here, so the Lanes see them as they were (kir.h).
    case Opc::SharedLoadVec:
    case Opc::SharedStoreVec:
      for (int64_t e = 0; e < in.imm; ++e) {
        Id at = e == 0 ? val(in.args[0]) : op(SpvOpIAdd, i32(), {val(in.args[0]), m_.constant(i32(), uint32_t(e))});
        if (in.op == Opc::SharedLoadVec) wide_[v].push_back(sharedLoad(in, at));
        else sharedStore(in, at, val(in.args[size_t(e) + 1]));
      }
      return;
    case Opc::SharedLoad: r = sharedLoad(in, val(in.args[0])); return;
    case Opc::SharedStore: sharedStore(in, val(in.args[0]), val(in.args[1])); return;
    case Opc::GetVar: r = op(SpvOpLoad, scalar(in.type), {vars_[size_t(in.ref)]}); return;
    case Opc::SetVar: put(m_.s.functions, SpvOpStore, {vars_[size_t(in.ref)], val(in.args[0])}); return;
    case Opc::For: loop(v); return;
    case Opc::If: branch(v); return;
    case Opc::Barrier:
      put(m_.s.functions, SpvOpControlBarrier,
          {m_.constant(u32(), SpvScopeWorkgroup), m_.constant(u32(), SpvScopeWorkgroup),
           m_.constant(u32(), SpvMemorySemanticsAcquireReleaseMask | SpvMemorySemanticsWorkgroupMemoryMask)});
      return;
    case Opc::Select:
      r = op(SpvOpSelect, scalar(in.type), {val(in.args[0]), val(in.args[1]), val(in.args[2])});
      return;
    case Opc::Fma:
      r = ext(GLSLstd450Fma, scalar(Scalar::F32), {val(in.args[0]), val(in.args[1]), val(in.args[2])});
      return;
    case Opc::Convert: r = convert(in); return;
    case Opc::Bitcast: r = op(SpvOpBitcast, scalar(in.type), {val(in.args[0])}); return;
    default: break;
  }
  if (in.op >= Opc::Add && in.op <= Opc::ShrL)
    r = binary(in);
  else if (in.op >= Opc::Neg && in.op <= Opc::Floor)
    r = unary(in);
  else
    r = compare(in);
}

Expected<std::vector<uint32_t>> emit(const kir::Kernel& k) {
  Expected<Needs> needs = legalize(k);
  if (!needs) return needs.error();
  return Emitter(k, *needs).run();
}

}  // namespace poot::spirv

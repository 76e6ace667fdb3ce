// The Builder's bookkeeping (the open blocks, type checks) and the few
// lowerings it owns: graph dtypes to KIR storage and erf.
#include "codegen/kir/builder.h"

#include <cassert>
#include <cmath>
#include <utility>

namespace poot::kir {

namespace {

// For the type asserts (compiled out with NDEBUG).
[[maybe_unused]] bool isBinaryOp(Opc op) { return op >= Opc::Add && op <= Opc::ShrL; }
[[maybe_unused]] bool isUnaryOp(Opc op) { return op >= Opc::Neg && op <= Opc::Floor; }
[[maybe_unused]] bool isCompareOp(Opc op) { return op >= Opc::Lt && op <= Opc::Ne; }

Elem storageOf(DType t) {
  switch (t) {
    case DType::F32: return Elem::F32;
    case DType::F16: return Elem::F16;
    case DType::BF16: return Elem::BF16;
    case DType::I32: return Elem::I32;
    case DType::I64: return Elem::I64;
    case DType::Bool: return Elem::U8;
  }
  return Elem::F32;
}

Scalar graphValueOf(DType t) {
  if (isFloat(t)) return Scalar::F32;
  if (t == DType::I64) return Scalar::I64;
  if (t == DType::Bool) return Scalar::Bool;
  return Scalar::I32;
}

}  // namespace

Builder::Builder(std::string entry, int64_t workgroupSize, int64_t gridX) {
  k_.entry = std::move(entry);
  k_.workgroupSize = workgroupSize;
  k_.gridX = gridX;
}

int32_t Builder::buffer(std::string name, DType dtype, int64_t elems, bool written) {
  k_.buffers.push_back(Buffer{std::move(name), storageOf(dtype), elems, written});
  dtypes_.push_back(dtype);
  return int32_t(k_.buffers.size() - 1);
}

int32_t Builder::shared(std::string name, Scalar type, int64_t elems) {
  assert(type != Scalar::Bool);
  k_.shared.push_back(Shared{std::move(name), type, elems});
  return int32_t(k_.shared.size() - 1);
}

Block& Builder::current() {
  if (open_.empty()) return k_.body;
  auto [owner, which] = open_.back();
  return k_.insts[size_t(owner)].*which;
}

V Builder::shuffleXor(V x, int64_t mask) {
  assert(typeOf(x) == Scalar::F32 || typeOf(x) == Scalar::I32);
  assert(mask > 0 && mask < 32);
  Inst sh{Opc::ShuffleXor, typeOf(x), {x}};
  sh.imm = mask;
  return emit(std::move(sh));
}

V Builder::mmaShared(MatrixOp op, int32_t array, SharedTile a, SharedTile b, const std::vector<V>& c) {
  assert(matrixShape(op).threads == 128 && c.size() % 4 == 0 && int64_t(c.size()) * 2 <= matrixShape(op).n);
  Inst m{Opc::MmaShared, Scalar::F32, {a.start, a.rowStride, b.start, b.rowStride}};
  m.args.insert(m.args.end(), c.begin(), c.end());
  m.ref = int32_t(op);
  m.imm = array;
  return emit(std::move(m));
}

V Builder::mmaShared(V onto, SharedTile a, SharedTile b) {
  const Inst& prev = k_.insts[size_t(onto)];
  assert(prev.op == Opc::MmaShared);
  Inst m{Opc::MmaShared, Scalar::F32, {a.start, a.rowStride, b.start, b.rowStride, onto}};
  m.ref = prev.ref;
  m.imm = prev.imm;
  return emit(std::move(m));
}

V Builder::mmaSharedB(MatrixOp op, int32_t array, const std::vector<V>& a, NMajorTile b, const std::vector<V>& c) {
  assert(matrixShape(op).threads == 128 && a.size() == 8 && c.size() % 4 == 0 &&
         int64_t(c.size()) * 2 <= matrixShape(op).n);
  Inst m{Opc::MmaSharedB, Scalar::F32, a};
  m.args.insert(m.args.end(), {b.start, b.rowStride, b.blockStride});
  m.args.insert(m.args.end(), c.begin(), c.end());
  m.ref = int32_t(op);
  m.imm = array;
  return emit(std::move(m));
}

V Builder::mmaSharedB(V onto, const std::vector<V>& a, NMajorTile b) {
  const Inst& prev = k_.insts[size_t(onto)];
  assert(prev.op == Opc::MmaSharedB && a.size() == 8);
  Inst m{Opc::MmaSharedB, Scalar::F32, a};
  m.args.insert(m.args.end(), {b.start, b.rowStride, b.blockStride, onto});
  m.ref = prev.ref;
  m.imm = prev.imm;
  return emit(std::move(m));
}

std::vector<V> Builder::mmaResult(V m) {
  std::vector<V> out;
  for (int64_t i = 0; i < mmaSharedColumns(k_, m) / 2; ++i) {
    Inst lane{Opc::Lane, Scalar::F32, {m}};
    lane.imm = i;
    out.push_back(emit(std::move(lane)));
  }
  return out;
}

std::vector<V> Builder::mmaWait(int64_t n, const std::vector<V>& xs) {
  assert(n >= 0);
  Inst w{Opc::MmaWait, Scalar::F32, xs};
  w.imm = n;
  V m = emit(std::move(w));
  std::vector<V> out;
  for (size_t i = 0; i < xs.size(); ++i) {
    Inst lane{Opc::Lane, Scalar::F32, {m}};
    lane.imm = int64_t(i);
    out.push_back(emit(std::move(lane)));
  }
  return out;
}

std::array<V, 4> Builder::mma(MatrixOp op, const std::vector<V>& a, const std::vector<V>& b,
                              const std::array<V, 4>& c) {
  [[maybe_unused]] const MatrixShape& shape = matrixShape(op);
  assert(int64_t(a.size()) == shape.aRegs && int64_t(b.size()) == shape.bRegs);
  Inst mma{Opc::Mma, Scalar::F32, a};
  mma.args.insert(mma.args.end(), b.begin(), b.end());
  mma.args.insert(mma.args.end(), c.begin(), c.end());
  for ([[maybe_unused]] size_t i = 0; i < mma.args.size(); ++i)
    assert(typeOf(mma.args[i]) == (i < a.size() + b.size() ? mmaOperand(op) : Scalar::F32));
  mma.ref = int32_t(op);
  mma.imm = 4;
  V m = emit(std::move(mma));
  std::array<V, 4> out{};
  for (int64_t i = 0; i < 4; ++i) {
    Inst lane{Opc::Lane, Scalar::F32, {m}};
    lane.imm = i;
    out[size_t(i)] = emit(std::move(lane));
  }
  return out;
}

V Builder::toTf32(V x) {
  return bitcast(binary(Opc::And, bitcast(x, Scalar::I32), i32(int32_t(0xFFFFE000u))), Scalar::F32);
}

V Builder::emit(Inst inst) {
  k_.insts.push_back(std::move(inst));
  V v = V(k_.insts.size() - 1);
  current().items.push_back(v);
  return v;
}

V Builder::constant(Scalar t, double v) {
  Inst i{Opc::Const, t};
  if (t == Scalar::F32)
    i.fimm = double(float(v));
  else
    i.imm = t == Scalar::Bool ? int64_t(v != 0) : int64_t(v);
  return emit(std::move(i));
}
V Builder::i32(int64_t v) { return constant(Scalar::I32, double(int32_t(v))); }
V Builder::i64(int64_t v) {
  Inst i{Opc::Const, Scalar::I64};
  i.imm = v;
  return emit(std::move(i));
}
V Builder::f32(double v) { return constant(Scalar::F32, v); }
V Builder::boolean(bool v) { return constant(Scalar::Bool, v ? 1 : 0); }

V Builder::groupX() { return emit(Inst{Opc::GroupX, Scalar::I32}); }
V Builder::groupY() { return emit(Inst{Opc::GroupY, Scalar::I32}); }
V Builder::local() { return emit(Inst{Opc::Local, Scalar::I32}); }
V Builder::workgroupId() { return add(mul(groupY(), i32(k_.gridX)), groupX()); }

V Builder::binary(Opc op, V a, V b) {
  assert(isBinaryOp(op) && typeOf(a) == typeOf(b));
  return emit(Inst{op, typeOf(a), {a, b}});
}

V Builder::unary(Opc op, V a) {
  assert(isUnaryOp(op));
  return emit(Inst{op, typeOf(a), {a}});
}

V Builder::compare(Opc op, V a, V b) {
  assert(isCompareOp(op) && typeOf(a) == typeOf(b));
  return emit(Inst{op, Scalar::Bool, {a, b}});
}

V Builder::select(V cond, V a, V b) {
  assert(typeOf(cond) == Scalar::Bool && typeOf(a) == typeOf(b));
  return emit(Inst{Opc::Select, typeOf(a), {cond, a, b}});
}

V Builder::fma(V a, V b, V c) {
  assert(typeOf(a) == Scalar::F32 && typeOf(b) == Scalar::F32 && typeOf(c) == Scalar::F32);
  return emit(Inst{Opc::Fma, Scalar::F32, {a, b, c}});
}

V Builder::convert(V a, Scalar to) {
  if (typeOf(a) == to) return a;
  return emit(Inst{Opc::Convert, to, {a}});
}

V Builder::bitcast(V a, Scalar to) {
  assert((typeOf(a) == Scalar::F32 && to == Scalar::I32) || (typeOf(a) == Scalar::I32 && to == Scalar::F32));
  return emit(Inst{Opc::Bitcast, to, {a}});
}

// Abramowitz and Stegun 7.1.26 (absolute error under 1.5e-7):
// erf(x) = sign(x) * (1 - poly(t) * exp(-x^2)), t = 1 / (1 + p|x|).
V Builder::erf(V x) {
  assert(typeOf(x) == Scalar::F32);
  V ax = unary(Opc::Abs, x);
  V t = div(f32(1.0), add(f32(1.0), mul(f32(0.3275911), ax)));
  const double a[] = {1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592};
  V poly = f32(a[0]);
  for (int i = 1; i < 5; ++i) poly = add(mul(poly, t), f32(a[i]));
  poly = mul(poly, t);
  V y = sub(f32(1.0), mul(poly, exp(neg(mul(ax, ax)))));
  return select(lt(x, f32(0.0)), neg(y), y);
}

V Builder::pow(V x, V y) {
  assert(typeOf(x) == Scalar::F32 && typeOf(y) == Scalar::F32);
  V zero = f32(0.0), one = f32(1.0), inf = f32(INFINITY);
  V ax = unary(Opc::Abs, x);
  V r = select(eq(ax, zero), select(gt(y, zero), zero, inf), binary(Opc::Pow, ax, y));
  V integral = eq(unary(Opc::Floor, y), y);
  V half = mul(y, f32(0.5));
  V odd = binary(Opc::And, integral, ne(unary(Opc::Floor, half), half));
  V negative = select(integral, select(odd, neg(r), r), f32(NAN));
  r = select(lt(x, zero), negative, r);
  return select(binary(Opc::Or, eq(y, zero), eq(x, one)), one, r);
}

V Builder::fromStorage(int32_t buffer, V raw) {
  DType dt = dtypes_[size_t(buffer)];
  return dt == DType::Bool ? ne(raw, i32(0)) : convert(raw, graphValueOf(dt));
}

V Builder::roundTo(V x, DType t) {
  assert(typeOf(x) == Scalar::F32);
  if (t != DType::F16 && t != DType::BF16) return x;
  return convert(convert(x, valueOf(storageOf(t))), Scalar::F32);
}

V Builder::load(int32_t buffer, V index) {
  assert(typeOf(index) == Scalar::I32);
  const Buffer& buf = k_.buffers[size_t(buffer)];
  return fromStorage(buffer, emit(Inst{Opc::Load, valueOf(buf.elem), {index}, buffer}));
}

std::vector<V> Builder::loadVec(int32_t buffer, V index, int64_t width) {
  std::vector<V> out = loadVecStored(buffer, index, width);
  for (V& v : out) v = fromStorage(buffer, v);
  return out;
}

std::vector<V> Builder::loadVecStored(int32_t buffer, V index, int64_t width) {
  assert(typeOf(index) == Scalar::I32);
  const Buffer& buf = k_.buffers[size_t(buffer)];
  if (width == 1) return {emit(Inst{Opc::Load, valueOf(buf.elem), {index}, buffer})};
  Inst vec{Opc::LoadVec, valueOf(buf.elem), {index}, buffer};
  vec.imm = width;
  V v = emit(std::move(vec));
  std::vector<V> out;
  for (int64_t i = 0; i < width; ++i) {
    Inst lane{Opc::Lane, valueOf(buf.elem), {v}};
    lane.imm = i;
    out.push_back(emit(std::move(lane)));
  }
  return out;
}

void Builder::store(int32_t buffer, V index, V value) {
  assert(typeOf(index) == Scalar::I32);
  // Through the graph dtype's value (bool 0/1), then to the element's.
  value = convert(convert(value, graphValueOf(dtypes_[size_t(buffer)])), valueOf(k_.buffers[size_t(buffer)].elem));
  emit(Inst{Opc::Store, Scalar::I32, {index, value}, buffer});
}

V Builder::sharedLoad(int32_t array, V index) {
  assert(typeOf(index) == Scalar::I32);
  return emit(Inst{Opc::SharedLoad, k_.shared[size_t(array)].type, {index}, array});
}

std::vector<V> Builder::sharedLoadVec(int32_t array, V index, int64_t width) {
  assert(typeOf(index) == Scalar::I32);
  if (width == 1) return {sharedLoad(array, index)};
  Scalar t = k_.shared[size_t(array)].type;
  Inst vec{Opc::SharedLoadVec, t, {index}, array};
  vec.imm = width;
  V v = emit(std::move(vec));
  std::vector<V> out;
  for (int64_t i = 0; i < width; ++i) {
    Inst lane{Opc::Lane, t, {v}};
    lane.imm = i;
    out.push_back(emit(std::move(lane)));
  }
  return out;
}

void Builder::sharedStore(int32_t array, V index, V value) {
  assert(typeOf(index) == Scalar::I32 && typeOf(value) == k_.shared[size_t(array)].type);
  emit(Inst{Opc::SharedStore, Scalar::I32, {index, value}, array});
}

void Builder::sharedStoreVec(int32_t array, V index, const std::vector<V>& values) {
  if (values.size() == 1) return sharedStore(array, index, values[0]);
  assert(typeOf(index) == Scalar::I32);
  Inst st{Opc::SharedStoreVec, Scalar::I32, {index}, array};
  for (V v : values) {
    assert(typeOf(v) == k_.shared[size_t(array)].type);
    st.args.push_back(v);
  }
  st.imm = int64_t(values.size());
  emit(std::move(st));
}

int32_t Builder::var(Scalar type, V init) {
  k_.vars.push_back(type);
  int32_t v = int32_t(k_.vars.size() - 1);
  set(v, init);
  return v;
}

V Builder::get(int32_t var) { return emit(Inst{Opc::GetVar, k_.vars[size_t(var)], {}, var}); }

void Builder::set(int32_t var, V value) {
  assert(typeOf(value) == k_.vars[size_t(var)]);
  emit(Inst{Opc::SetVar, Scalar::I32, {value}, var});
}

void Builder::fill(Block Inst::*which, V owner, const std::function<void()>& body) {
  open_.push_back({owner, which});
  body();
  open_.pop_back();
}

void Builder::forRange(V lo, V hi, int64_t step, const std::function<void(V)>& body) {
  assert(typeOf(lo) == Scalar::I32 && typeOf(hi) == Scalar::I32 && step > 0);
  Inst f{Opc::For, Scalar::I32, {lo, hi}};
  f.imm = step;
  V loop = emit(std::move(f));
  fill(&Inst::body, loop, [&] { body(loop); });
}

void Builder::forUnrolled(int64_t count, int64_t unroll, const std::function<void(V)>& body) {
  int64_t whole = count / unroll * unroll;
  if (whole > 0)
    forRange(i32(0), i32(whole), unroll, [&](V at) {
      for (int64_t u = 0; u < unroll; ++u) body(u == 0 ? at : add(at, i32(u)));
    });
  for (int64_t i = whole; i < count; ++i) body(i32(i));
}

void Builder::ifThen(V cond, const std::function<void()>& then) { ifElse(cond, then, [] {}); }

void Builder::ifElse(V cond, const std::function<void()>& then, const std::function<void()>& orelse) {
  assert(typeOf(cond) == Scalar::Bool);
  V i = emit(Inst{Opc::If, Scalar::I32, {cond}});
  fill(&Inst::body, i, then);
  fill(&Inst::orelse, i, orelse);
}

void Builder::barrier() { emit(Inst{Opc::Barrier}); }

void Builder::copyAsync(int32_t buffer, V gindex, int32_t array, V sindex, V ok) {
  assert(typeOf(gindex) == Scalar::I32 && typeOf(sindex) == Scalar::I32 && typeOf(ok) == Scalar::Bool);
  Inst c{Opc::CopyAsync, Scalar::I32, {gindex, sindex, ok}, buffer};
  c.imm = array;
  emit(std::move(c));
}

void Builder::asyncCommit() { emit(Inst{Opc::AsyncCommit}); }

void Builder::asyncWait(int64_t pending) {
  Inst w{Opc::AsyncWait};
  w.imm = pending;
  emit(std::move(w));
}

Kernel Builder::finish() {
  assert(open_.empty());
  return std::move(k_);
}

}  // namespace poot::kir

// The elementwise generator: one thread per result element, id in row-major
// order, every shape a compile-time constant. Data movement computes the
// operand element a result element copies (Broadcast, Transpose, Slice, the
// clamped DynamicSlice start, Concat by the axis coordinate, Gather through a
// clamped index) and copies it through the Builder's load and store, which are
// exact for every dtype. DynamicUpdateSlice and ScatterUpdate decide per
// element whether it comes from the update or the operand; each thread reads
// and writes only its own element (and update elements), so the result may be
// the operand's own buffer (a state written in place). Arithmetic follows the
// oracle: floats in f32 (two-byte floats rounded on store), integers wrapping
// in their own width (the low bits of the oracle's int64), Max/Min propagating
// NaN, integer division truncating with x / -1 a wrapping negation and x / 0
// giving 0 (the oracle refuses it, a kernel cannot), float to integer
// conversion saturating with NaN to 0. A Constant list is a balanced select
// tree over the element index (runs of equal values collapse), at most
// kMaxConstantList values; a larger one is refused (ConstantSize): the
// compiler keeps such data in weights, not in kernels.
#include <algorithm>
#include <bit>
#include <cmath>

#include "codegen/gen/index.h"
#include "oracle/tensor.h"

namespace poot {

namespace {

using namespace gen;

constexpr size_t kMaxConstantList = 4096;

// A Constant value of dtype t, as the value the store then writes exactly.
V constValue(Builder& b, DType t, double v) {
  switch (t) {
    case DType::F32: return b.f32(v);
    case DType::F16:
    case DType::BF16: return b.f32(roundToOddF32(v));
    case DType::I32: return b.i32(int64_t(v));
    case DType::I64: return b.i64(int64_t(v));
    case DType::Bool: return b.boolean(v != 0);
  }
  return b.f32(v);
}

// Element `id` of vals[lo, hi): a balanced select tree, a leaf per run of
// bit-identical values.
V constTree(Builder& b, DType t, V id, const std::vector<double>& vals, size_t lo, size_t hi) {
  auto same = [&](double v) { return std::bit_cast<uint64_t>(v) == std::bit_cast<uint64_t>(vals[lo]); };
  if (std::all_of(vals.begin() + ptrdiff_t(lo), vals.begin() + ptrdiff_t(hi), same)) return constValue(b, t, vals[lo]);
  size_t mid = lo + (hi - lo) / 2;
  V left = constTree(b, t, id, vals, lo, mid), right = constTree(b, t, id, vals, mid, hi);
  return b.select(b.lt(id, b.i32(int64_t(mid))), left, right);
}

// x clamped to [0, hi] in its own integer type, then as an i32 index.
V clampIndex(Builder& b, V x, int64_t hi) {
  Scalar t = b.typeOf(x);
  return b.convert(b.min(b.max(x, intConst(b, t, 0)), intConst(b, t, hi)), Scalar::I32);
}

// Float to integer as the oracle stores it: truncate, saturate, NaN to 0.
V floatToInt(Builder& b, V x, DType to) {
  Scalar t = valueScalar(to);
  double top = to == DType::I64 ? 0x1p63 : 0x1p31;
  int64_t maxv = to == DType::I64 ? INT64_MAX : INT32_MAX;
  V inRange = b.min(b.max(x, b.f32(-top)), b.f32(std::nextafter(float(top), 0.0f)));
  V v = b.select(b.ge(x, b.f32(top)), intConst(b, t, maxv), b.convert(inRange, t));
  return b.select(b.isNan(x), intConst(b, t, 0), v);
}

V unaryValue(Builder& b, Op op, V x) {
  if (b.typeOf(x) != Scalar::F32) {
    if (op == Op::Not) return b.unary(Opc::Not, x);
    V neg = b.sub(intConst(b, b.typeOf(x), 0), x);  // wraps at the minimum, as the oracle's
    return op == Op::Neg ? neg : b.select(b.lt(x, intConst(b, b.typeOf(x), 0)), neg, x);
  }
  switch (op) {
    case Op::Exp: return b.exp(x);
    case Op::Log: return b.log(x);
    case Op::Neg: return b.neg(x);
    case Op::Sqrt: return b.sqrt(x);
    case Op::Rsqrt: return b.div(b.f32(1), b.sqrt(x));
    case Op::Recip: return b.div(b.f32(1), x);
    case Op::Tanh: return b.tanh(x);
    case Op::Sin: return b.unary(Opc::Sin, x);
    case Op::Cos: return b.unary(Opc::Cos, x);
    case Op::Abs: return b.unary(Opc::Abs, x);
    case Op::Erf: return b.erf(x);
    default: return b.div(b.f32(1), b.add(b.f32(1), b.exp(b.neg(x))));  // Sigmoid
  }
}

// Truncating integer division; x / -1 wraps, x / 0 is 0.
V intDiv(Builder& b, V x, V y) {
  Scalar t = b.typeOf(x);
  V zero = intConst(b, t, 0), minus1 = intConst(b, t, -1);
  V isZero = b.eq(y, zero), isMinus1 = b.eq(y, minus1);
  V q = b.div(x, b.select(b.binary(Opc::Or, isZero, isMinus1), intConst(b, t, 1), y));
  q = b.select(isMinus1, b.sub(zero, x), q);
  return b.select(isZero, zero, q);
}

V binaryValue(Builder& b, Op op, V x, V y) {
  bool isF = b.typeOf(x) == Scalar::F32;
  switch (op) {
    case Op::Add: return b.add(x, y);
    case Op::Sub: return b.sub(x, y);
    case Op::Mul: return b.mul(x, y);
    case Op::Div: return isF ? b.div(x, y) : intDiv(b, x, y);
    case Op::Max: return maxOf(b, x, y);
    case Op::Min: return minOf(b, x, y);
    case Op::Pow: return b.pow(x, y);
    case Op::And: return b.binary(Opc::And, x, y);
    case Op::Or: return b.binary(Opc::Or, x, y);
    case Op::Lt: return b.lt(x, y);
    case Op::Le: return b.le(x, y);
    case Op::Gt: return b.gt(x, y);
    case Op::Ge: return b.ge(x, y);
    case Op::Eq: return b.eq(x, y);
    default: return b.ne(x, y);  // Ne
  }
}

// What one thread sees: the request, the buffers, its element id.
struct Thread {
  Builder& b;
  const KernelRequest& r;
  const std::vector<int32_t>& in;
  int32_t out;
  V id;

  const Shape& outShape() const { return r.results[0].shape; }
  const Shape& shapeOf(size_t operand) const { return r.operands[operand].shape; }
  V load(size_t operand, V at) { return b.load(in[operand], at); }
  void store(V v) { b.store(out, id, v); }
  // The result element's coordinates when some operand broadcasts (a
  // same-shape operand reads at id), else none.
  std::vector<V> coordsIfBroadcast() {
    for (const Type& o : r.operands)
      if (o.shape != outShape()) return unravel(b, id, outShape());
    return {};
  }
  // Operand i's element that broadcasts to this result element.
  V bcastOffset(size_t i, const std::vector<V>& coords) {
    return shapeOf(i) == outShape() ? id : offsetOf(b, coords, bcastStrides(shapeOf(i), outShape()));
  }
};

void genConcat(Thread& t) {
  Builder& b = t.b;
  int64_t axis = axisAttr(t.r, int64_t(t.outShape().size()));
  int64_t n = t.outShape()[size_t(axis)];
  int64_t inner = rowMajor(t.outShape())[size_t(axis)];
  V o = divBy(b, t.id, n * inner), c = remBy(b, divBy(b, t.id, inner), n), i = remBy(b, t.id, inner);
  int64_t at = 0;
  for (size_t j = 0; j < t.in.size(); ++j) {
    int64_t nj = t.shapeOf(j)[size_t(axis)];
    V inside = b.binary(Opc::And, b.ge(c, b.i32(at)), b.lt(c, b.i32(at + nj)));
    b.ifThen(inside, [&] {
      V row = b.add(b.mul(o, b.i32(nj)), b.sub(c, b.i32(at)));
      t.store(t.load(j, b.add(b.mul(row, b.i32(inner)), i)));
    });
    at += nj;
  }
}

void genGather(Thread& t) {
  Builder& b = t.b;
  const Shape& table = t.shapeOf(0);
  int64_t axis = axisAttr(t.r, int64_t(table.size()));
  int64_t n = table[size_t(axis)], inner = rowMajor(table)[size_t(axis)], idxN = numel(t.shapeOf(1));
  V i = remBy(b, t.id, inner), rest = divBy(b, t.id, inner);
  V j = remBy(b, rest, idxN), o = divBy(b, rest, idxN);
  V k = clampIndex(b, t.load(1, j), n - 1);  // an index outside the table is the oracle's error
  t.store(t.load(0, b.add(b.mul(b.add(b.mul(o, b.i32(n)), k), b.i32(inner)), i)));
}

void genUpdateSlice(Thread& t) {
  Builder& b = t.b;
  const Shape &x = t.shapeOf(0), &u = t.shapeOf(1);
  int64_t axis = axisAttr(t.r, int64_t(x.size()));
  int64_t n = x[size_t(axis)], un = u[size_t(axis)], inner = rowMajor(x)[size_t(axis)];
  V o = divBy(b, t.id, n * inner), c = remBy(b, divBy(b, t.id, inner), n), i = remBy(b, t.id, inner);
  V start = clampIndex(b, t.load(2, b.i32(0)), n - un);
  V rel = b.sub(c, start);
  V inside = b.binary(Opc::And, b.ge(rel, b.i32(0)), b.lt(rel, b.i32(un)));
  b.ifElse(
      inside, [&] { t.store(t.load(1, b.add(b.mul(b.add(b.mul(o, b.i32(un)), rel), b.i32(inner)), i))); },
      [&] { t.store(t.load(0, t.id)); });
}

// Row r of the result is the last update whose index is r, else x's row;
// indices of -1 (and any other outside [0, rows)) name no row.
void genScatter(Thread& t) {
  Builder& b = t.b;
  int64_t rows = t.shapeOf(0)[0], row = numel(t.shapeOf(0)) / rows, n = t.shapeOf(1)[0];
  V r = divBy(b, t.id, row), col = remBy(b, t.id, row);
  Scalar it = valueScalar(t.r.operands[1].dtype);
  V rIdx = b.convert(r, it);
  int32_t found = b.var(Scalar::I32, b.i32(-1));
  b.forRange(b.i32(0), b.i32(n), 1, [&](V j) { b.set(found, b.select(b.eq(t.load(1, j), rIdx), j, b.get(found))); });
  V f = b.get(found);
  b.ifElse(
      b.ge(f, b.i32(0)), [&] { t.store(t.load(2, b.add(b.mul(f, b.i32(row)), col))); },
      [&] { t.store(t.load(0, t.id)); });
}

void genConvert(Thread& t) {
  DType from = t.r.operands[0].dtype, to = t.r.results[0].dtype;
  V x = t.load(0, t.id);
  if (isFloat(from) && isInt(to)) x = floatToInt(t.b, x, to);
  if (isFloat(from) && to == DType::Bool) x = t.b.ne(x, t.b.f32(0));
  t.store(x);  // every other pair is the store's own conversion
}

// Rope: result element (row, c) of x's [..., D] is one half of a rotated pair
// (j, H + j) for style half, (2j, 2j + 1) for interleaved, H = D / 2.
void genRope(Thread& t) {
  Builder& b = t.b;
  const Shape& xs = t.shapeOf(0);
  int64_t D = xs.back(), H = D / 2;
  bool half = attrSym(t.r, "style") == "half";
  Shape hs = xs;
  hs.back() = H;
  V row = divBy(b, t.id, D), c = remBy(b, t.id, D);
  V first = half ? b.lt(c, b.i32(H)) : b.eq(remBy(b, c, 2), b.i32(0));
  V j = half ? b.select(first, c, b.sub(c, b.i32(H))) : divBy(b, c, 2);
  V base = b.mul(row, b.i32(D));
  V i1 = b.add(base, half ? j : b.mul(j, b.i32(2)));
  V i2 = half ? b.add(i1, b.i32(H)) : b.add(i1, b.i32(1));
  std::vector<V> hc = unravel(b, b.add(b.mul(row, b.i32(H)), j), hs);
  V co = t.load(1, offsetOf(b, hc, bcastStrides(t.shapeOf(1), hs)));
  V si = t.load(2, offsetOf(b, hc, bcastStrides(t.shapeOf(2), hs)));
  V x1 = t.load(0, i1), x2 = t.load(0, i2);
  V rotated1 = b.sub(b.mul(x1, co), b.mul(x2, si)), rotated2 = b.add(b.mul(x2, co), b.mul(x1, si));
  t.store(b.select(first, rotated1, rotated2));
}

Status genElement(Thread& t) {
  Builder& b = t.b;
  const KernelRequest& r = t.r;
  const Shape& out = t.outShape();
  auto coords = [&] { return unravel(b, t.id, out); };
  switch (r.op) {
    case Op::Iota: {
      int64_t axis = axisAttr(r, int64_t(out.size()));
      t.store(remBy(b, divBy(b, t.id, rowMajor(out)[size_t(axis)]), out[size_t(axis)]));
      return ok();
    }
    case Op::Constant: {
      const std::vector<double>& vals = attrFloats(r, "value");
      t.store(constTree(b, r.results[0].dtype, t.id, vals, 0, vals.size()));
      return ok();
    }
    case Op::Reshape: t.store(t.load(0, t.id)); return ok();
    case Op::Broadcast: t.store(t.load(0, t.bcastOffset(0, coords()))); return ok();
    case Op::Transpose: {
      const std::vector<int64_t>& perm = attrInts(r, "perm");
      Strides own = rowMajor(t.shapeOf(0)), st(perm.size());
      for (size_t d = 0; d < perm.size(); ++d) st[d] = own[size_t(perm[d])];
      t.store(t.load(0, offsetOf(b, coords(), st)));
      return ok();
    }
    case Op::Slice:
    case Op::DynamicSlice: {
      const Shape& xs = t.shapeOf(0);
      int64_t axis = axisAttr(r, int64_t(xs.size()));
      Strides st = rowMajor(xs);
      V start = r.op == Op::Slice ? b.i32(attrInt(r, "start"))
                                  : clampIndex(b, t.load(1, b.i32(0)), xs[size_t(axis)] - attrInt(r, "size"));
      t.store(t.load(0, b.add(offsetOf(b, coords(), st), b.mul(start, b.i32(st[size_t(axis)])))));
      return ok();
    }
    case Op::Concat: genConcat(t); return ok();
    case Op::Gather: genGather(t); return ok();
    case Op::DynamicUpdateSlice: genUpdateSlice(t); return ok();
    case Op::ScatterUpdate: genScatter(t); return ok();
    case Op::Convert: genConvert(t); return ok();
    case Op::Rope: genRope(t); return ok();
    default: break;
  }
  switch (opInfo(r.op).cls) {
    case OpClass::Unary: t.store(unaryValue(b, r.op, t.load(0, t.id))); return ok();
    case OpClass::Binary:
    case OpClass::Compare: {
      std::vector<V> c = t.coordsIfBroadcast();
      V x = t.load(0, t.bcastOffset(0, c)), y = t.load(1, t.bcastOffset(1, c));
      t.store(binaryValue(b, r.op, x, y));
      return ok();
    }
    case OpClass::Select: {
      std::vector<V> c = t.coordsIfBroadcast();
      V cond = t.load(0, t.bcastOffset(0, c));
      t.store(b.select(cond, t.load(1, t.bcastOffset(1, c)), t.load(2, t.bcastOffset(2, c))));
      return ok();
    }
    default: return refuse("NoGenerator", r, "not an elementwise op");
  }
}

}  // namespace

Expected<kir::Kernel> genElementwise(const GenInput& in) {
  const KernelRequest& r = in.request;
  if (r.op == Op::Constant) {
    size_t n = attrFloats(r, "value").size();
    if (n > kMaxConstantList)
      return refuse("ConstantSize", r,
                    "a constant of " + std::to_string(n) + " values is more than the " +
                        std::to_string(kMaxConstantList) + " a kernel inlines");
  }
  auto f = openKernel(in);
  if (!f) return f.error();
  Status status = ok();
  perThread(f->b, r.schedule.workgroupSize, numel(r.results[0].shape), [&](V id) {
    Thread t{f->b, r, f->in, f->out[0], id};
    status = genElement(t);
  });
  if (!status) return status.error();
  return f->b.finish();
}

}  // namespace poot

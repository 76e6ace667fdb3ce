// The elementwise generator: one thread per result element, id in row-major
// order, every shape a compile-time constant. Data movement computes the
// operand element a result element copies (Broadcast, Transpose, Slice, the
// clamped DynamicSlice start, Concat by the axis coordinate, Gather through a
// clamped index) and copies it through the Builder's load and store, which are
// exact for every dtype. DynamicUpdateSlice and ScatterUpdate decide per
// element whether it comes from the update or the operand; each thread reads
// and writes only its own element (and update elements), so the result may be
// the operand's own buffer. When it is (a state written in place, schedule
// "in-place") they need a thread only per update element. Arithmetic follows
// the oracle as values.h spells it (two-byte floats rounded on store). A
// Constant list is a balanced select tree over the element index (runs of
// equal values collapse), at most kMaxConstantList values; a larger one is
// refused (ConstantSize): the compiler keeps such data in weights, not in
// kernels.
#include <algorithm>
#include <bit>
#include <cmath>

#include "codegen/gen/index.h"
#include "codegen/gen/values.h"

namespace poot {

namespace {

using namespace gen;

constexpr size_t kMaxConstantList = 4096;

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

// In place ("in-place"): thread id is an element of the update, stored
// where it goes in the state, which the result's buffer is. A slice's start
// is clamped as above. A scatter's row j goes to row indices[j] when that
// names a row and no later index names the same one (the last update wins,
// as above), so no two threads write one element.
void genInPlace(Thread& t) {
  Builder& b = t.b;
  const Shape& x = t.shapeOf(0);
  if (t.r.op == Op::DynamicUpdateSlice) {
    int64_t axis = axisAttr(t.r, int64_t(x.size()));
    b.store(t.out, sliceTarget(b, t.id, x, t.shapeOf(1), axis, t.load(2, b.i32(0))), t.load(1, t.id));
    return;
  }
  int64_t rows = x[0], row = numel(x) / rows, n = t.shapeOf(1)[0];
  V j = divBy(b, t.id, row), col = remBy(b, t.id, row);
  V idx = t.load(1, j);
  Scalar it = b.typeOf(idx);
  int32_t last = b.var(Scalar::Bool, b.binary(Opc::And, b.ge(idx, intConst(b, it, 0)), b.lt(idx, intConst(b, it, rows))));
  b.forRange(b.add(j, b.i32(1)), b.i32(n), 1, [&](V k) {
    b.set(last, b.binary(Opc::And, b.get(last), b.ne(t.load(1, k), idx)));
  });
  b.ifThen(b.get(last), [&] {
    b.store(t.out, b.add(b.mul(b.convert(idx, Scalar::I32), b.i32(row)), col), t.load(2, t.id));
  });
}

void genConvert(Thread& t) {
  t.store(convertValue(t.b, t.load(0, t.id), t.r.operands[0].dtype, t.r.results[0].dtype));
}

// Rope: result element (row, c) of x's [..., D] is one half of a rotated
// pair (index.h, ropePair); the tables are read at (row, j) of [..., D / 2].
void genRope(Thread& t) {
  Builder& b = t.b;
  const Shape& xs = t.shapeOf(0);
  int64_t D = xs.back(), H = D / 2;
  Shape hs = xs;
  hs.back() = H;
  V row = divBy(b, t.id, D);
  RopePair p = ropePair(b, remBy(b, t.id, D), D, attrSym(t.r, "style") == "half");
  V base = b.mul(row, b.i32(D));
  std::vector<V> hc = unravel(b, b.add(b.mul(row, b.i32(H)), p.j), hs);
  V co = t.load(1, offsetOf(b, hc, bcastStrides(t.shapeOf(1), hs)));
  V si = t.load(2, offsetOf(b, hc, bcastStrides(t.shapeOf(2), hs)));
  V x1 = t.load(0, b.add(base, p.c1)), x2 = t.load(0, b.add(base, p.c2));
  t.store(ropeRotate(b, p, x1, x2, co, si));
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
  bool inPlace = r.schedule.kind == "in-place";
  int64_t count = inPlace ? numel(r.operands[r.op == Op::ScatterUpdate ? 2 : 1].shape) : numel(r.results[0].shape);
  perThread(f->b, r.schedule.workgroupSize, count, [&](V id) {
    Thread t{f->b, r, f->in, f->out[0], id};
    if (inPlace) genInPlace(t);
    else status = genElement(t);
  });
  if (!status) return status.error();
  return f->b.finish();
}

}  // namespace poot

// The row-selection generator (TopK, BlockTopK): one thread per row. KIR has
// no private arrays, so a thread picks its k winners one at a time: pick j is
// the best element that ranks after pick j - 1, found by one scan of the row
// (O(k * n) a row). The rank order is the oracle's total order: larger first,
// NaN above everything, ties (and NaNs among themselves) by lower index, so
// the picks come out sorted and a scan in increasing index keeps the lower
// index of equals. TopK writes each winner's element and index; BlockTopK
// ranks the blocks j < qpos / block (clamped to [0, NB]) of a row's scores
// and writes -1 once they run out.
#include "codegen/gen/index.h"

namespace poot {

namespace {

using namespace gen;

// Whether (a, ia) ranks before (c, ic).
V ranksBefore(Builder& b, V a, V ia, V c, V ic) {
  V byIndex = b.lt(ia, ic);
  V byValue = b.select(b.ne(a, c), b.gt(a, c), byIndex);
  if (b.typeOf(a) != Scalar::F32) return byValue;
  V na = b.isNan(a), nc = b.isNan(c);
  return b.select(na, b.select(nc, byIndex, b.boolean(true)), b.select(nc, b.boolean(false), byValue));
}

// Picks `k` times among elements [0, count) of the row at `base` of buffer
// `x`, calling emit(j, index) with index -1 once no element is left.
void pickTop(Builder& b, int32_t x, V base, V count, int64_t k, Scalar t, const std::function<void(V, V)>& emit) {
  int32_t prevV = b.var(t, b.constant(t, 0)), prevI = b.var(Scalar::I32, b.i32(-1));
  b.forRange(b.i32(0), b.i32(k), 1, [&](V j) {
    int32_t bestV = b.var(t, b.constant(t, 0)), bestI = b.var(Scalar::I32, b.i32(-1));
    V pv = b.get(prevV), pi = b.get(prevI);
    b.forRange(b.i32(0), count, 1, [&](V e) {
      V v = b.load(x, b.add(base, e));
      V bi = b.get(bestI);
      V after = b.binary(Opc::Or, b.lt(pi, b.i32(0)), ranksBefore(b, pv, pi, v, e));
      V better = b.binary(Opc::Or, b.lt(bi, b.i32(0)), ranksBefore(b, v, e, b.get(bestV), bi));
      V take = b.binary(Opc::And, after, better);
      b.set(bestV, b.select(take, v, b.get(bestV)));
      b.set(bestI, b.select(take, e, bi));
    });
    V bi = b.get(bestI);
    emit(j, bi);
    // Once the row is exhausted, stay exhausted: keep the last real pick.
    V found = b.ge(bi, b.i32(0));
    b.set(prevV, b.select(found, b.get(bestV), pv));
    b.set(prevI, b.select(found, bi, pi));
  });
}

}  // namespace

Expected<kir::Kernel> genRows(const GenInput& in) {
  const KernelRequest& r = in.request;
  auto f = openKernel(in);
  if (!f) return f.error();
  Builder& b = f->b;
  const Shape& xs = r.operands[0].shape;
  int64_t n = xs.back(), k = attrInt(r, "k"), rows = numel(xs) / n;
  Scalar t = valueScalar(r.operands[0].dtype);
  perThread(b, r.schedule.workgroupSize, rows, [&](V row) {
    V base = b.mul(row, b.i32(n)), outBase = b.mul(row, b.i32(k));
    if (r.op == Op::TopK) {
      pickTop(b, f->in[0], base, b.i32(n), k, t, [&](V j, V idx) {
        V at = b.add(outBase, j);
        b.store(f->out[0], at, b.load(f->in[0], b.add(base, idx)));
        b.store(f->out[1], at, idx);
      });
      return;
    }
    V qpos = b.load(f->in[1], row);
    Scalar qt = b.typeOf(qpos);
    V own = b.div(qpos, intConst(b, qt, attrInt(r, "block")));
    V count = b.convert(b.min(b.max(own, intConst(b, qt, 0)), intConst(b, qt, n)), Scalar::I32);
    pickTop(b, f->in[0], base, count, k, t, [&](V j, V idx) { b.store(f->out[0], b.add(outBase, j), idx); });
  });
  return b.finish();
}

}  // namespace poot

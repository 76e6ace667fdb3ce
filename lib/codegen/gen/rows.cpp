// The row-selection generator (TopK, BlockTopK): one workgroup per row, of
// the "rows" schedule's T threads. KIR has no private arrays, so the
// workgroup picks its k winners one at a time: pick j is the best element
// that ranks after pick j - 1. Each thread scans its elements (e = tid, tid
// + T, ...) for its best such candidate, then the candidates fold pairwise
// in workgroup memory (T / 2, T / 4, ... 1 threads, a barrier between
// levels), and every thread reads the winner. The rank order is the
// oracle's total order: larger first, NaN above everything, ties (and NaNs
// among themselves) by lower index, so the picks come out sorted. TopK
// writes each winner's element and index; BlockTopK ranks the blocks j <
// qpos / block (clamped to [0, NB]) of a row's scores and writes -1 once
// they run out. A thread runs about k (n / T + 1) loop iterations, not the
// k (n + 1) of one thread a row: lavapipe's llvmpipe stops a shader
// invocation's loops after 65535 iterations in all (docs/codegen.md).
#include "codegen/gen/index.h"

namespace poot {

namespace {

using namespace gen;

// The workgroup picks `k` times among elements [0, count) of the row at
// `base` of buffer `x`, calling emit(j, index) in thread 0 with index -1 once
// no element is left. `sv` and `si` are workgroup arrays of T candidates.
void pickTop(Builder& b, int32_t x, V base, V count, int64_t k, Scalar t, int64_t T, int32_t sv, int32_t si,
             const std::function<void(V, V)>& emit) {
  V tid = b.local();
  int32_t prevV = b.var(t, b.constant(t, 0)), prevI = b.var(Scalar::I32, b.i32(-1));
  b.forRange(b.i32(0), b.i32(k), 1, [&](V j) {
    int32_t bestV = b.var(t, b.constant(t, 0)), bestI = b.var(Scalar::I32, b.i32(-1));
    V pv = b.get(prevV), pi = b.get(prevI);
    b.forRange(tid, count, T, [&](V e) {
      V v = b.load(x, b.add(base, e));
      V after = b.binary(Opc::Or, b.lt(pi, b.i32(0)), ranksBefore(b, pv, pi, v, e));
      V take = b.binary(Opc::And, after, betterCandidate(b, v, e, b.get(bestV), b.get(bestI)));
      b.set(bestV, b.select(take, v, b.get(bestV)));
      b.set(bestI, b.select(take, e, b.get(bestI)));
    });
    V mine = b.get(bestV), mineAt = b.get(bestI);
    foldBest(b, sv, si, T, mine, mineAt);
    V wv = b.sharedLoad(sv, b.i32(0)), wi = b.sharedLoad(si, b.i32(0));
    b.ifThen(b.eq(tid, b.i32(0)), [&] { emit(j, wi); });
    // Once the row is exhausted, stay exhausted: keep the last real pick.
    V found = b.ge(wi, b.i32(0));
    b.set(prevV, b.select(found, wv, pv));
    b.set(prevI, b.select(found, wi, pi));
    b.barrier();  // every thread has read the winner before the next pick's candidates
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
  const int64_t T = r.schedule.workgroupSize;
  int32_t sv = b.shared("candidates", t, T), si = b.shared("candidate_indices", Scalar::I32, T);
  V row = b.workgroupId();
  b.ifThen(b.lt(row, b.i32(rows)), [&] {
    V base = b.mul(row, b.i32(n)), outBase = b.mul(row, b.i32(k));
    if (r.op == Op::TopK) {
      pickTop(b, f->in[0], base, b.i32(n), k, t, T, sv, si, [&](V j, V idx) {
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
    pickTop(b, f->in[0], base, count, k, t, T, sv, si, [&](V j, V idx) { b.store(f->out[0], b.add(outBase, j), idx); });
  });
  return b.finish();
}

}  // namespace poot

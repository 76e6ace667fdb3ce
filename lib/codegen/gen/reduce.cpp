// The reduction generator (ReduceSum, ReduceMax, ReduceMin): one thread per
// result element. x is seen as [outer, n, inner] around the axis; result
// element (o, i) starts from x[o, 0, i] and folds x[o, 1..n-1, i] in
// increasing order, exactly the oracle's order: sums in an f32 (or the
// integer's own wrapping) accumulator, Max/Min sticky on NaN. keepdim does
// not change the flat layout, so it changes nothing here. Past
// kReduceIterations elements the loop body is written out several times an
// iteration (the same order), so that a thread runs at most that many
// iterations: llvmpipe stops a shader invocation's loops after 65535
// iterations in all (docs/codegen.md).
#include "codegen/gen/index.h"

namespace poot {

namespace {
// The most loop iterations a thread runs before the loop body is written out
// several times an iteration.
constexpr int64_t kReduceIterations = 16384;
}  // namespace

Expected<kir::Kernel> genReduce(const GenInput& in) {
  using namespace gen;
  const KernelRequest& r = in.request;
  auto f = openKernel(in);
  if (!f) return f.error();
  Builder& b = f->b;
  const Shape& xs = r.operands[0].shape;
  int64_t axis = axisAttr(r, int64_t(xs.size()));
  int64_t n = xs[size_t(axis)], inner = rowMajor(xs)[size_t(axis)];
  perThread(b, r.schedule.workgroupSize, numel(r.results[0].shape), [&](V id) {
    V o = divBy(b, id, inner), i = remBy(b, id, inner);
    V at = b.add(b.mul(o, b.i32(n * inner)), i);
    V first = b.load(f->in[0], at);
    int32_t acc = b.var(b.typeOf(first), first);
    auto fold = [&](V j) {
      V v = b.load(f->in[0], b.add(at, b.mul(j, b.i32(inner))));
      V a = b.get(acc);
      b.set(acc, r.op == Op::ReduceSum ? b.add(a, v) : r.op == Op::ReduceMax ? maxOf(b, a, v) : minOf(b, a, v));
    };
    int64_t unroll = 1;
    while ((n - 1) / unroll > kReduceIterations) unroll *= 2;
    if (unroll == 1) b.forRange(b.i32(1), b.i32(n), 1, fold);
    else b.forUnrolled(n - 1, unroll, [&](V j) { fold(b.add(j, b.i32(1))); });
    b.store(f->out[0], id, b.get(acc));
  });
  return b.finish();
}

}  // namespace poot

// The MatMul generator: one thread per result element of
// [batch..., m, n] = [a batch..., m, k] x [b batch..., k, n], the batch axes
// broadcasting numpy-style. The thread finds its batch coordinates, each
// operand's broadcast batch offset, then sums a[.., r, kk] * b[.., kk, j] for
// kk = 0..k-1 in order from 0, each product rounded before it is added (no
// fused multiply-add), in f32 for floats and wrapping in the integer's own
// width: the oracle's order and rounding.
#include "codegen/gen/index.h"

namespace poot {

Expected<kir::Kernel> genMatMul(const GenInput& in) {
  using namespace gen;
  const KernelRequest& r = in.request;
  auto f = openKernel(in);
  if (!f) return f.error();
  Builder& b = f->b;
  const Shape &as = r.operands[0].shape, &bs = r.operands[1].shape, &os = r.results[0].shape;
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape batch(os.begin(), os.end() - 2), ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  Scalar t = valueScalar(r.results[0].dtype);
  perThread(b, r.schedule.workgroupSize, numel(os), [&](V id) {
    V j = remBy(b, id, n), row = remBy(b, divBy(b, id, n), m);
    std::vector<V> bc = unravel(b, divBy(b, id, m * n), batch);
    V aAt = b.add(b.mul(offsetOf(b, bc, bcastStrides(ab, batch)), b.i32(m * k)), b.mul(row, b.i32(k)));
    V bAt = b.add(b.mul(offsetOf(b, bc, bcastStrides(bb, batch)), b.i32(k * n)), j);
    int32_t acc = b.var(t, b.constant(t, 0));
    b.forRange(b.i32(0), b.i32(k), 1, [&](V kk) {
      V x = b.load(f->in[0], b.add(aAt, kk));
      V y = b.load(f->in[1], b.add(bAt, b.mul(kk, b.i32(n))));
      b.set(acc, b.add(b.get(acc), b.mul(x, y)));
    });
    b.store(f->out[0], id, b.get(acc));
  });
  return b.finish();
}

}  // namespace poot

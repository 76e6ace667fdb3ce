// The IndexGuard generator: one workgroup. Thread l clamps the elements
// l, l + W, l + 2W, ... of x into [lo, hi] and keeps whether all of them were
// inside; it leaves that flag (0 or 1) in a workgroup array of W i32, and
// after a barrier thread 0 folds the W flags into the bool[] witness. The
// array is W * 4 bytes of workgroup memory, which the kernel declares itself
// (the plain schedule says 0).
#include "codegen/gen/index.h"

namespace poot {

Expected<kir::Kernel> genGuard(const GenInput& in) {
  using namespace gen;
  const KernelRequest& r = in.request;
  auto f = openKernel(in);
  if (!f) return f.error();
  Builder& b = f->b;
  int64_t w = r.schedule.workgroupSize;
  Scalar t = valueScalar(r.operands[0].dtype);
  V lo = intConst(b, t, attrInt(r, "lo")), hi = intConst(b, t, attrInt(r, "hi"));
  int32_t flags = b.shared("in_range", Scalar::I32, w);
  V l = b.local();
  int32_t inside = b.var(Scalar::Bool, b.boolean(true));
  b.forRange(l, b.i32(numel(r.operands[0].shape)), w, [&](V i) {
    V x = b.load(f->in[0], i);
    V ok = b.binary(Opc::And, b.ge(x, lo), b.le(x, hi));
    b.set(inside, b.binary(Opc::And, b.get(inside), ok));
    b.store(f->out[0], i, b.min(b.max(x, lo), hi));
  });
  b.sharedStore(flags, l, b.convert(b.get(inside), Scalar::I32));
  b.barrier();
  b.ifThen(b.eq(l, b.i32(0)), [&] {
    int32_t all = b.var(Scalar::I32, b.i32(1));
    b.forRange(b.i32(0), b.i32(w), 1, [&](V j) { b.set(all, b.min(b.get(all), b.sharedLoad(flags, j))); });
    b.store(f->out[1], b.i32(0), b.ne(b.get(all), b.i32(0)));
  });
  return b.finish();
}

}  // namespace poot

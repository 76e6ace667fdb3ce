// The routed-gemv generator (RoutedExperts for a decode's few rows): one
// workgroup a token row, of T threads (schedule.h, routedGemvRule).
//   1. scores: thread t computes the router logits of experts t, t + T, ...
//      (each a sequential f32 dot over H), into workgroup memory;
//   2. thread 0 scores them (softmax: the maximum, exp(l - max) and their
//      sum in increasing expert order, then the division; or sigmoid), picks
//      the k best one at a time in TopK's order (larger first, NaN above
//      everything, equal scores to the lower expert: gen/index.h's
//      ranksBefore), sums them in pick order for renormalization, and
//      writes each selected expert's flag and its weight (divided by the
//      sum when renormalized, times scale, rounded to h's dtype);
//   3. for each expert, in increasing index, only when it is selected (a
//      workgroup-uniform test of its flag): the threads compute the I
//      intermediate values silu(x gate^T) * (x up^T) into workgroup memory,
//      then each output's down-projection dot times the weight, added to the
//      row's running sums. An expert not selected is not read.
// Every dot is sequential (no reassociation) and every graph rounding of the
// dense form is kept (Builder::roundTo), so the kernel differs from the
// oracle only where an emitter's exp or a fused multiply-add differs in the
// last bit: docs/codegen.md states the bound. The grid is the token rows,
// whatever the routing. llvmpipe stops a shader invocation's loops after
// 65535 iterations in all (docs/codegen.md), so where a thread's dots would
// run more than kRoutedIterations their loop body is written out several
// times an iteration, in the same order.
#include "codegen/gen/generators.h"
#include "codegen/gen/index.h"
#include "codegen/gen/values.h"
#include "plan/schedule.h"

namespace poot {

using namespace gen;

namespace {
constexpr int64_t kRoutedIterations = 16384;
}  // namespace

Expected<kir::Kernel> genRoutedGemv(const GenInput& in) {
  const KernelRequest& r = in.request;
  auto f = openKernel(in);
  if (!f) return f.error();
  Builder& b = f->b;
  const DType dt = r.operands[0].dtype;
  const int64_t H = r.operands[0].shape.back(), rows = numel(r.operands[0].shape) / H;
  const int64_t E = attrInt(r, "experts"), k = attrInt(r, "k"), I = r.operands[kRoutedFirstExpert].shape[0];
  const int64_t T = r.schedule.workgroupSize;
  const bool softmax = attrSym(r, "scoring") == "softmax", renormalize = attrBool(r, "renormalize");
  const double scale = std::get<double>(attrOf(r, "scale"));
  const int32_t scores = b.shared("scores", Scalar::F32, E), weights = b.shared("weights", Scalar::F32, E);
  const int32_t chosen = b.shared("chosen", Scalar::I32, E), mid = b.shared("mid", Scalar::F32, I);
  const int32_t sums = b.shared("sums", Scalar::F32, H);
  // A thread's dot iterations: its router rows, then for each selected
  // expert its gate and up rows and its down rows.
  const int64_t iterations = ceilDiv(E, T) * H + k * (ceilDiv(I, T) * 2 * H + ceilDiv(H, T) * I);
  int64_t unroll = 1;
  while (iterations / unroll > kRoutedIterations) unroll *= 2;
  V row = b.workgroupId(), tid = b.local();
  b.ifThen(b.lt(row, b.i32(rows)), [&] {
    V xBase = b.mul(row, b.i32(H));
    // The sequential dot of n elements of `a` (a buffer, or workgroup array
    // `shared` when a < 0) from aAt with buffer w from wAt.
    auto dot = [&](int32_t a, int32_t shared, V aAt, int32_t w, V wAt, int64_t n) {
      int32_t acc = b.var(Scalar::F32, b.f32(0));
      auto term = [&](V j) {
        V x = a >= 0 ? b.load(a, b.add(aAt, j)) : b.sharedLoad(shared, j);
        b.set(acc, b.add(b.get(acc), b.mul(x, b.load(w, b.add(wAt, j)))));
      };
      if (unroll == 1) b.forRange(b.i32(0), b.i32(n), 1, term);
      else b.forUnrolled(n, unroll, term);
      return b.get(acc);
    };
    V zero = b.f32(0);
    b.forRange(tid, b.i32(E), T, [&](V e) {
      b.sharedStore(scores, e, dot(f->in[0], -1, xBase, f->in[1], b.mul(e, b.i32(H)), H));
      b.sharedStore(weights, e, zero);
      b.sharedStore(chosen, e, b.i32(0));
    });
    b.barrier();
    b.ifThen(b.eq(tid, b.i32(0)), [&] {
      if (softmax) {
        int32_t m = b.var(Scalar::F32, b.sharedLoad(scores, b.i32(0))), sum = b.var(Scalar::F32, zero);
        b.forRange(b.i32(1), b.i32(E), 1, [&](V e) { b.set(m, binaryValue(b, Op::Max, b.get(m), b.sharedLoad(scores, e))); });
        b.forRange(b.i32(0), b.i32(E), 1, [&](V e) {
          V ex = b.exp(b.sub(b.sharedLoad(scores, e), b.get(m)));
          b.sharedStore(scores, e, ex);
          b.set(sum, b.add(b.get(sum), ex));
        });
        b.forRange(b.i32(0), b.i32(E), 1, [&](V e) { b.sharedStore(scores, e, b.div(b.sharedLoad(scores, e), b.get(sum))); });
      } else {
        b.forRange(b.i32(0), b.i32(E), 1,
                   [&](V e) { b.sharedStore(scores, e, unaryValue(b, Op::Sigmoid, b.sharedLoad(scores, e))); });
      }
      int32_t prevV = b.var(Scalar::F32, zero), prevI = b.var(Scalar::I32, b.i32(-1)), total = b.var(Scalar::F32, zero);
      b.forRange(b.i32(0), b.i32(k), 1, [&](V) {
        int32_t bestV = b.var(Scalar::F32, zero), bestI = b.var(Scalar::I32, b.i32(-1));
        V pv = b.get(prevV), pi = b.get(prevI);
        b.forRange(b.i32(0), b.i32(E), 1, [&](V e) {
          V v = b.sharedLoad(scores, e);
          V after = b.binary(Opc::Or, b.lt(pi, b.i32(0)), ranksBefore(b, pv, pi, v, e));
          V take = b.binary(Opc::And, after, betterCandidate(b, v, e, b.get(bestV), b.get(bestI)));
          b.set(bestV, b.select(take, v, b.get(bestV)));
          b.set(bestI, b.select(take, e, b.get(bestI)));
        });
        b.sharedStore(chosen, b.get(bestI), b.i32(1));
        b.sharedStore(weights, b.get(bestI), b.get(bestV));
        b.set(total, b.add(b.get(total), b.get(bestV)));
        b.set(prevV, b.get(bestV));
        b.set(prevI, b.get(bestI));
      });
      b.forRange(b.i32(0), b.i32(E), 1, [&](V e) {
        V w = b.sharedLoad(weights, e);
        if (renormalize) w = b.div(w, b.get(total));
        b.sharedStore(weights, e, b.roundTo(b.mul(w, b.f32(scale)), dt));
      });
    });
    b.barrier();
    int32_t started = b.var(Scalar::I32, b.i32(0));
    for (int64_t e = 0; e < E; ++e) {
      size_t at = kRoutedFirstExpert + kRoutedPerExpert * size_t(e);
      int32_t gate = f->in[at], up = f->in[at + 1], down = f->in[at + 2];
      b.ifThen(b.ne(b.sharedLoad(chosen, b.i32(e)), b.i32(0)), [&] {
        b.forRange(tid, b.i32(I), T, [&](V i) {
          V wAt = b.mul(i, b.i32(H));
          V g = b.roundTo(dot(f->in[0], -1, xBase, gate, wAt, H), dt), u = b.roundTo(dot(f->in[0], -1, xBase, up, wAt, H), dt);
          V act = b.roundTo(b.mul(g, b.roundTo(unaryValue(b, Op::Sigmoid, g), dt)), dt);
          b.sharedStore(mid, i, b.roundTo(b.mul(act, u), dt));
        });
        b.barrier();
        V w = b.sharedLoad(weights, b.i32(e)), first = b.eq(b.get(started), b.i32(0));
        b.forRange(tid, b.i32(H), T, [&](V o) {
          V y = b.roundTo(b.mul(b.roundTo(dot(-1, mid, b.i32(0), down, b.mul(o, b.i32(I)), I), dt), w), dt);
          b.sharedStore(sums, o, b.select(first, y, b.roundTo(b.add(b.sharedLoad(sums, o), y), dt)));
        });
        b.barrier();  // mid is rewritten by the next expert
        b.set(started, b.i32(1));
      });
    }
    b.forRange(tid, b.i32(H), T, [&](V o) { b.store(f->out[0], b.add(xBase, o), b.sharedLoad(sums, o)); });
  });
  return b.finish();
}

}  // namespace poot

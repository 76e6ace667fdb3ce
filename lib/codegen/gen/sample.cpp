// The Sample generator ("sample" schedule): one workgroup of T threads a row
// of n logits, the rule of oracle/sample.h in f32.
//
// 0. The row's penalty list (the run of rows it belongs to): its length L,
//    the entries that count (seenLength), read only when the first entry is
//    a token; a row without penalties reads that one -1 and nothing more.
//    With L above 0 each logit read below is penalized as it is read: a
//    binary search of the list (ascending) for its token, log2(S) loads of
//    entries that stay in cache, so the row needs no copy.
// 1. The row's first largest logit m (NaN as -inf), by a strided scan and a
//    fold in workgroup memory. Greedy rows (temperature not above 0, or m
//    not finite) write its index and stop.
// 2. Each token's weight w = exp((x - m) / temperature) is recomputed on
//    every pass (a NaN logit weighs 0); the threshold t starts at
//    min(min_p, 1) when min_p is above 0, else 0.
// 3. top_k in [1, n): t rises to the k-th largest weight, found exactly by
//    bisection over the bit patterns of [0, 1] (non-negative floats order as
//    their bits): the largest pattern v with count(w >= v) >= k, 30 passes.
// 4. top_p below 1: the kept mass M, then the largest pattern v >= t with
//    mass(w >= v) >= top_p * M, 30 passes more.
// 5. The draw: r = uniform * (the kept mass); each thread owns a contiguous
//    chunk of the row, sums its kept weights, an inclusive scan gives each
//    chunk's starting mass, and each thread walks its chunk for the first
//    kept token at which the running mass passes r. The smallest such index
//    wins; none (uniform of 1 or more, or rounding) gives the last kept
//    token.
// The counts and sums fold in a fixed order, so a row's result does not
// depend on timing; it may differ from the oracle's double arithmetic where
// r falls within rounding of a token's edge (docs/oracle.md, "Sample"). The
// penalties are the oracle's f32 operations, so they agree bit for bit.
#include <cmath>

#include "codegen/gen/index.h"

namespace poot {

namespace {

using namespace gen;

constexpr int64_t kBisections = 30;        // 0x3F800001 patterns, under 2^30
constexpr int64_t kAboveOne = 0x3F800001;  // the pattern after 1.0f

}  // namespace

Expected<kir::Kernel> genSample(const GenInput& in) {
  const KernelRequest& r = in.request;
  auto f = openKernel(in);
  if (!f) return f.error();
  Builder& b = f->b;
  const int64_t n = r.operands[0].shape.back(), rows = numel(r.operands[0].shape) / n;
  const int64_t T = r.schedule.workgroupSize;
  const int32_t sf = b.shared("partials", Scalar::F32, T), si = b.shared("partial_indices", Scalar::I32, T);
  const int32_t x = f->in[0], out = f->out[0], seen = f->in[7], amounts = f->in[8];
  const int64_t runs = r.operands[7].shape[0], width = r.operands[7].shape[1], perRun = rows / runs;
  int64_t searchSteps = 0;  // halvings that empty any range of [0, width]
  while ((int64_t(1) << searchSteps) <= width) ++searchSteps;
  V tid = b.local(), row = b.workgroupId();

  // The fold of every thread's `mine` into one value, which every thread
  // gets; `combine(a, b)` for a f32 sum, an i32 sum, a min or a max.
  auto fold = [&](int32_t array, V mine, const std::function<V(V, V)>& combine) {
    b.sharedStore(array, tid, mine);
    for (int64_t half = T / 2; half >= 1; half /= 2) {
      b.barrier();
      b.ifThen(b.lt(tid, b.i32(half)), [&] {
        b.sharedStore(array, tid, combine(b.sharedLoad(array, tid), b.sharedLoad(array, b.add(tid, b.i32(half)))));
      });
    }
    b.barrier();
    V all = b.sharedLoad(array, b.i32(0));
    b.barrier();  // every thread has read it before the array is reused
    return all;
  };
  auto sum = [&](V a, V c) { return b.add(a, c); };
  // The sum over the row of each(e) (a value of `type`, e strided over the threads).
  auto rowSum = [&](Scalar type, const std::function<V(V)>& each) {
    int32_t acc = b.var(type, b.constant(type, 0));
    b.forRange(tid, b.i32(n), T, [&](V e) { b.set(acc, b.add(b.get(acc), each(e))); });
    return fold(type == Scalar::F32 ? sf : si, b.get(acc), sum);
  };

  b.ifThen(b.lt(row, b.i32(rows)), [&] {
    V base = b.mul(row, b.i32(n));
    V temperature = b.load(f->in[1], row), topK = b.load(f->in[2], row), topP = b.load(f->in[3], row),
      minP = b.load(f->in[4], row), uniform = b.load(f->in[5], row);
    V list = b.div(row, b.i32(perRun)), listBase = b.mul(list, b.i32(width));
    V repetition = b.load(f->in[6], list);
    auto token = [&](V j) { return b.load(seen, b.add(listBase, j)); };
    auto isToken = [&](V id) { return b.binary(Opc::And, b.ge(id, b.i32(0)), b.lt(id, b.i32(n))); };
    // 0. The list's length: the first entry j >= 1 that is no token or not
    // above the one before ends it.
    int32_t length = b.var(Scalar::I32, b.i32(0));
    b.ifThen(isToken(token(b.i32(0))), [&] {
      int32_t end = b.var(Scalar::I32, b.i32(width));
      b.forRange(b.add(tid, b.i32(1)), b.i32(width), T, [&](V j) {
        V id = token(j);
        V ends = b.binary(Opc::Or, b.unary(Opc::Not, isToken(id)), b.le(id, token(b.sub(j, b.i32(1)))));
        b.set(end, b.select(b.binary(Opc::And, ends, b.eq(b.get(end), b.i32(width))), j, b.get(end)));
      });
      b.set(length, fold(si, b.get(end), [&](V a, V c) { return b.min(a, c); }));
    });
    V listed = b.get(length), penalized = b.gt(listed, b.i32(0));
    // Logit e as the rule reads it: penalized where the list holds e.
    auto value = [&](V e) {
      int32_t v = b.var(Scalar::F32, b.load(x, b.add(base, e)));
      b.ifThen(penalized, [&] {
        // The first entry not below e, in [0, L].
        int32_t lo = b.var(Scalar::I32, b.i32(0)), hi = b.var(Scalar::I32, listed);
        b.forRange(b.i32(0), b.i32(searchSteps), 1, [&](V) {
          V l = b.get(lo), h = b.get(hi);
          V open = b.lt(l, h), mid = b.add(l, b.div(b.sub(h, l), b.i32(2)));
          V below = b.lt(token(b.min(mid, b.i32(width - 1))), e);
          b.set(lo, b.select(b.binary(Opc::And, open, below), b.add(mid, b.i32(1)), l));
          b.set(hi, b.select(b.binary(Opc::And, open, b.unary(Opc::Not, below)), mid, h));
        });
        V at = b.min(b.get(lo), b.i32(width - 1));
        b.ifThen(b.binary(Opc::And, b.lt(b.get(lo), listed), b.eq(token(at), e)), [&] {
          V y = b.get(v);
          V scaled = b.select(b.gt(y, b.f32(0)), b.div(y, repetition), b.mul(y, repetition));
          b.set(v, b.sub(scaled, b.load(amounts, b.add(listBase, at))));
        });
      });
      return b.get(v);
    };
    auto logit = [&](V e) {
      V v = value(e);
      return b.select(b.isNan(v), b.f32(-INFINITY), v);
    };

    // 1. The first largest: each thread's best of its elements (first of
    // equals, as it scans upward), then the fold keeps the larger, or the
    // lower index of equals (NaN is -inf here, so TopK's order is this one).
    int32_t bestV = b.var(Scalar::F32, b.f32(-INFINITY)), bestI = b.var(Scalar::I32, b.i32(-1));
    b.forRange(tid, b.i32(n), T, [&](V e) {
      V v = logit(e);
      V take = b.binary(Opc::Or, b.lt(b.get(bestI), b.i32(0)), b.gt(v, b.get(bestV)));
      b.set(bestV, b.select(take, v, b.get(bestV)));
      b.set(bestI, b.select(take, e, b.get(bestI)));
    });
    V mine = b.get(bestV), mineAt = b.get(bestI);
    foldBest(b, sf, si, T, mine, mineAt);
    V top = b.sharedLoad(sf, b.i32(0)), first = b.sharedLoad(si, b.i32(0));
    b.barrier();
    V finite = b.eq(b.sub(top, top), b.f32(0));  // inf - inf and NaN are NaN
    V greedy = b.binary(Opc::Or, b.unary(Opc::Not, b.gt(temperature, b.f32(0))), b.unary(Opc::Not, finite));
    b.ifElse(
        greedy, [&] { b.ifThen(b.eq(tid, b.i32(0)), [&] { b.store(out, row, first); }); },
        [&] {
          // 2. The weights and the first threshold.
          V inv = b.div(b.f32(1), temperature);
          auto weight = [&](V e) {
            V v = value(e);
            return b.select(b.isNan(v), b.f32(0), b.exp(b.mul(b.sub(v, top), inv)));
          };
          int32_t t = b.var(Scalar::F32, b.select(b.gt(minP, b.f32(0)), b.min(minP, b.f32(1)), b.f32(0)));
          // The largest pattern in [lo, kAboveOne) whose value v keeps holds(v) true (holds(lo) is).
          auto bisect = [&](V lo, const std::function<V(V)>& holds) {
            int32_t l = b.var(Scalar::I32, lo), h = b.var(Scalar::I32, b.i32(kAboveOne));
            b.forRange(b.i32(0), b.i32(kBisections), 1, [&](V) {
              V mid = b.add(b.get(l), b.div(b.sub(b.get(h), b.get(l)), b.i32(2)));
              V ok = holds(b.bitcast(mid, Scalar::F32));
              b.set(l, b.select(ok, mid, b.get(l)));
              b.set(h, b.select(ok, b.get(h), mid));
            });
            return b.bitcast(b.get(l), Scalar::F32);
          };
          // 3. top_k.
          b.ifThen(b.binary(Opc::And, b.ge(topK, b.i32(1)), b.lt(topK, b.i32(n))), [&] {
            V kth = bisect(b.i32(0), [&](V v) {
              return b.ge(rowSum(Scalar::I32, [&](V e) { return b.select(b.ge(weight(e), v), b.i32(1), b.i32(0)); }), topK);
            });
            b.set(t, b.max(b.get(t), kth));
          });
          auto massFrom = [&](V v) {
            return rowSum(Scalar::F32, [&](V e) {
              V w = weight(e);
              return b.select(b.ge(w, v), w, b.f32(0));
            });
          };
          // 4. top_p.
          b.ifThen(b.lt(topP, b.f32(1)), [&] {
            V target = b.mul(topP, massFrom(b.get(t)));
            b.set(t, bisect(b.bitcast(b.get(t), Scalar::I32), [&](V v) { return b.ge(massFrom(v), target); }));
          });
          // 5. The draw.
          V kept = b.get(t);
          V r0 = b.mul(b.select(b.gt(uniform, b.f32(0)), uniform, b.f32(0)), massFrom(kept));
          const int64_t chunk = (n + T - 1) / T;
          V lo = b.min(b.mul(tid, b.i32(chunk)), b.i32(n)), hi = b.min(b.add(lo, b.i32(chunk)), b.i32(n));
          int32_t own = b.var(Scalar::F32, b.f32(0));
          b.forRange(lo, hi, 1, [&](V e) {
            V w = weight(e);
            b.set(own, b.add(b.get(own), b.select(b.ge(w, kept), w, b.f32(0))));
          });
          // Inclusive scan of the chunks' masses (Hillis-Steele).
          b.sharedStore(sf, tid, b.get(own));
          for (int64_t off = 1; off < T; off *= 2) {
            b.barrier();
            V add = b.select(b.ge(tid, b.i32(off)), b.sharedLoad(sf, b.max(b.sub(tid, b.i32(off)), b.i32(0))), b.f32(0));
            b.barrier();
            b.sharedStore(sf, tid, b.add(b.sharedLoad(sf, tid), add));
          }
          b.barrier();
          V before = b.select(b.gt(tid, b.i32(0)), b.sharedLoad(sf, b.max(b.sub(tid, b.i32(1)), b.i32(0))), b.f32(0));
          b.barrier();
          int32_t run = b.var(Scalar::F32, before), found = b.var(Scalar::I32, b.i32(n)), last = b.var(Scalar::I32, b.i32(-1));
          b.forRange(lo, hi, 1, [&](V e) {
            V w = weight(e);
            V in = b.binary(Opc::And, b.ge(w, kept), b.gt(w, b.f32(0)));
            b.set(run, b.add(b.get(run), b.select(in, w, b.f32(0))));
            b.set(last, b.select(in, e, b.get(last)));
            b.set(found, b.select(b.binary(Opc::And, in, b.binary(Opc::And, b.gt(b.get(run), r0), b.eq(b.get(found), b.i32(n)))), e,
                                  b.get(found)));
          });
          V hit = fold(si, b.get(found), [&](V a, V c) { return b.min(a, c); });
          V end = fold(si, b.get(last), [&](V a, V c) { return b.max(a, c); });
          b.ifThen(b.eq(tid, b.i32(0)), [&] { b.store(out, row, b.select(b.lt(hit, b.i32(n)), hit, end)); });
        });
  });
  return b.finish();
}

}  // namespace poot

// How the tensor-core gemv ("gemv-mma", schedule.h) is written. The product
// r = a x b^T (a [m, k], b [n, k], both of one two-byte dtype, K a multiple
// of 8) is computed as r^T = b x a^T on m16n8k16: in a fragment the op's
// rows are 16 columns of r (rows of b) and its columns 8 rows of a.
//
// A workgroup (product, batch, column block c0, split) of NW warps owns
// tileN = 16 C columns and all tileM = 8 NT rows, and walks its keys [kLo,
// kHi) (the split's chunk, gemmChunkKeys) in steps of BK = tileK. Each step's rows of b (tileN) and of a
// (tileM) are copied asynchronously into one of kGemvMmaStages stage
// buffers (pipelineSteps: the copies of the next steps in flight while the
// warps multiply this one), 16 bytes a copy, so a warp's copies read 512
// contiguous bytes of a row; a stage row is BK keys and kGemvMmaPad more,
// and copies past the product (rows past m or n, keys past kHi: K and every
// chunk are multiples of 8) are zeros. So the bytes in flight are in
// workgroup memory, not in registers.
//
// Warp w multiplies keys w KW .. (w + 1) KW - 1 of each step (KW = BK / NW), in runs
// of 32: lane (g = lane / 4, t = lane % 4) reads the run's keys 8 t .. 8 t +
// 7 of rows g and g + 8 of each column tile and of row g of each row tile,
// one 16-byte workgroup-memory load each (the pad puts rows g and g + 1 in
// different banks). A fragment's k-index may stand for any key as long as A
// and B agree (kir.h), so half h of a run (its keys 8 t + 4 h .. + 3) is one
// k16 step: A's element e is row g + 8 ((e / 2) % 2) at the lane's key 4 h +
// e % 2 + 2 (e / 4), B's element e its key 4 h + e.
//
// At the end each warp leaves its fragments in workgroup memory and, after
// one barrier, each thread sums an output's NW warp partials, warp 0 first,
// and stores it: to the result, rounded once to its dtype, or with splits to
// the split's f32 partials (each product's chunk-major, one product after
// another, as the planner's scratch holds them) for the matmul-combine. Each
// output is the f32 sum of exact products of two-byte values in another
// order than the oracle's, so the gemm's bound holds (docs/codegen.md).
#include "codegen/gen/products.h"

namespace poot {

using namespace gen;

Expected<kir::Kernel> genGemvMma(const GenInput& in) {
  const KernelRequest& r = in.request;
  const Schedule& s = r.schedule;
  const MatrixOp op = *matrixOpNamed(s.matrix);
  std::vector<Product> ps = productsOf(r);
  const int64_t T = s.workgroupSize, NW = T / 32, NT = s.tileM / 8, C = s.tileN / 16, BK = s.tileK, KW = BK / NW;
  const int64_t SR = BK + kGemvMmaPad, ST = kGemvMmaStages, S = s.splits;
  const int64_t rowsA = 8 * NT, rowsB = 16 * C, stage = (rowsA + rowsB) * SR, runs = (rowsA + rowsB) * BK / 8;
  const int64_t chunk = gemmChunkKeys(s, ps[0].k);
  int64_t total = 0;
  std::vector<int64_t> scratchAt;  // each product's first partial
  for (const Product& p : ps) scratchAt.push_back(S * total), total += p.count();
  auto f = openKernel(in, S > 1 ? S * total : 0);
  if (!f) return f.error();
  Builder& b = f->b;
  // The stages (rows of b, then of a), and the warps' partials: output (c,
  // j, e, lane) of warp w at ((w C + c) NT + j) 128 + e 32 + lane.
  const int64_t outs = C * NT * 128;
  int32_t tiles = b.shared("stages", kir::mmaOperand(op), ST * stage);
  int32_t part = b.shared("partials", Scalar::F32, NW * outs);
  perWorkgroup(b, ps, s.tileM, s.tileN, S, [&](size_t pi, V bi, V r0, V c0, V split) {
    const Product& p = ps[pi];
    auto [aBase, bBase, oBase] = p.bases(b, bi);
    int32_t out = S > 1 ? f->out[0] : f->out[pi];
    if (S > 1) oBase = b.add(oBase, b.add(b.i32(scratchAt[pi]), b.mul(split, b.i32(p.count()))));
    V kLo = b.mul(split, b.i32(chunk)), kHi = b.min(b.add(kLo, b.i32(chunk)), b.i32(p.k));
    V tid = b.local(), warp = divBy(b, tid, 32), lane = remBy(b, tid, 32);
    V gq = divBy(b, lane, 4), tq = remBy(b, lane, 4);
    // Copy e of a step: stage row e / (BK / 8) (b's rows, then a's), keys
    // 8 (e % (BK / 8)) .. + 7 of the step.
    auto issue = [&](V st, V k0) {
      for (int64_t e0 = 0; e0 < runs; e0 += T) {
        V e = b.add(tid, b.i32(e0));
        auto copy = [&](bool isB) {
          V row = divBy(b, e, BK / 8), j = remBy(b, e, BK / 8);
          V key = b.add(k0, b.mul(j, b.i32(8)));
          V at = b.add(b.mul(st, b.i32(stage)), b.add(b.mul(row, b.i32(SR)), b.mul(j, b.i32(8))));
          V x = isB ? b.add(c0, row) : b.add(r0, b.sub(row, b.i32(rowsB)));
          V ok = b.binary(Opc::And, b.lt(x, b.i32(isB ? p.n : p.m)), b.lt(key, kHi));
          V src = b.add(isB ? bBase : aBase, b.add(b.mul(x, b.i32(p.k)), key));
          b.copyAsync(isB ? f->in[1 + pi] : f->in[0], b.select(ok, src, b.i32(0)), tiles, at, ok);
        };
        // Each copy is of b or of a as its row falls; runs split evenly.
        int64_t firstA = rowsB * BK / 8;
        if (e0 + T <= firstA) copy(true);
        else if (e0 >= firstA && e0 + T <= runs) copy(false);
        else
          b.ifThen(b.lt(e, b.i32(runs)), [&] {
            b.ifElse(b.lt(e, b.i32(firstA)), [&] { copy(true); }, [&] { copy(false); });
          });
      }
      b.asyncCommit();
    };
    std::vector<FragmentVars> acc;
    for (int64_t x = 0; x < C * NT; ++x) acc.push_back(zeroFragment(b));
    V first = b.add(b.mul(warp, b.i32(KW)), b.mul(tq, b.i32(8)));  // the lane's first key in a stage row
    pipelineSteps(b, kLo, kHi, BK, ST, issue, [&](V st) {
      V base = b.add(b.mul(st, b.i32(stage)), first);
      auto rowRun = [&](int64_t row, int64_t run) {
        return b.sharedLoadVec(tiles, b.add(base, b.add(b.mul(b.add(gq, b.i32(row)), b.i32(SR)), b.i32(32 * run))), 8);
      };
      for (int64_t run = 0; run < KW / 32; ++run) {
        std::vector<std::vector<V>> wb, xa;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t h = 0; h < 2; ++h) wb.push_back(rowRun(16 * c + 8 * h, run));
        for (int64_t j = 0; j < NT; ++j) xa.push_back(rowRun(rowsB + 8 * j, run));
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t c = 0; c < C; ++c) {
            std::vector<V> fa;
            for (int64_t e = 0; e < 8; ++e) fa.push_back(wb[size_t(2 * c + (e / 2) % 2)][size_t(4 * h + e % 2 + 2 * (e / 4))]);
            for (int64_t j = 0; j < NT; ++j) {
              std::vector<V> fb(xa[size_t(j)].begin() + 4 * h, xa[size_t(j)].begin() + 4 * h + 4);
              FragmentVars& d = acc[size_t(c * NT + j)];
              setFragment(b, d, b.mma(op, fa, fb, getFragment(b, d)));
            }
          }
      }
    });
    // The fold: warp partials to workgroup memory, then each thread sums
    // outputs tid, tid + T, ... of the workgroup's C NT 128.
    for (int64_t x = 0; x < C * NT; ++x) {
      std::array<V, 4> d = getFragment(b, acc[size_t(x)]);
      for (int64_t e = 0; e < 4; ++e)
        b.sharedStore(part, b.add(b.mul(warp, b.i32(outs)), b.add(b.i32(x * 128 + e * 32), lane)), d[size_t(e)]);
    }
    b.barrier();
    b.forRange(tid, b.i32(outs), T, [&](V o) {
      int32_t sum = b.var(Scalar::F32, b.sharedLoad(part, o));
      for (int64_t w = 1; w < NW; ++w) b.set(sum, b.add(b.get(sum), b.sharedLoad(part, b.add(o, b.i32(w * outs)))));
      // Output o = ((c NT + j) 4 + e) 32 + lane: fragment row g + 8 (e / 2)
      // is column c0 + 16 c + g + 8 (e / 2); its column 2 t + e % 2 is row
      // r0 + 8 j + 2 t + e % 2.
      V ol = remBy(b, o, 32), e = remBy(b, divBy(b, o, 32), 4), x = divBy(b, o, 128);
      V col = b.add(c0, b.add(b.mul(divBy(b, x, NT), b.i32(16)), b.add(divBy(b, ol, 4), b.mul(divBy(b, e, 2), b.i32(8)))));
      V row = b.add(r0, b.add(b.mul(remBy(b, x, NT), b.i32(8)), b.add(b.mul(remBy(b, ol, 4), b.i32(2)), remBy(b, e, 2))));
      b.ifThen(b.binary(Opc::And, b.lt(row, b.i32(p.m)), b.lt(col, b.i32(p.n))),
               [&] { b.store(out, b.add(oBase, b.add(b.mul(row, b.i32(p.n)), col)), b.get(sum)); });
    });
  });
  return b.finish();
}

}  // namespace poot

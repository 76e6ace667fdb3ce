// How the tensor-core gemv ("gemv-mma", schedule.h) is written. The product
// r = a x b^T (a [m, k], b [n, k], both of one two-byte dtype, K a multiple
// of 8) is computed as r^T = b x a^T on m16n8k16: in a fragment the op's
// rows are 16 columns of r (rows of b) and its columns 8 rows of a.
//
// A workgroup (product, batch, column block c0, split) of NW warps owns
// tileN columns and all tileM = 8 NT rows; warp w owns columns w CW 16 ..
// (CW column tiles of 16). It walks its keys [kLo, kHi) (the split's chunk,
// gemmChunkKeys) in steps of BK = tileK. Each step's rows of b (tileN) and
// of a (tileM), BK keys each, are one stage buffer's rows, copied
// asynchronously into one of kGemvMmaStages (pipelineSteps: the copies of
// the next steps in flight while the warps multiply this one), 16 bytes a
// copy: thread x copies run x % (BK / 8) of rows x / (BK / 8), + T / (BK /
// 8), ..., so a step's row is BK / 8 neighbouring threads' copies. Copies
// past the product (rows past m or n, keys past kHi: K and every chunk are
// multiples of 8) are zeros. So the bytes in flight are in workgroup
// memory, not in registers, and a's rows, which every workgroup reads, are
// tileM of the tileM + tileN rows staged.
//
// Each warp multiplies every key of a step for its columns, in runs of 32:
// lane (g = lane / 4, t = lane % 4) reads the run's keys 8 t .. 8 t + 7 of
// rows g and g + 8 of each of its column tiles and of row g of each row
// tile, one 16-byte workgroup-memory load each. The 16-byte runs of an odd
// row are stored with bit 2 of their index flipped (run j at j ^ 4), so the
// eight lanes that load at once (rows g and g + 1, t = 0..3) read 128
// distinct bytes. A fragment's k-index may stand for any key as long as A
// and B agree (kir.h), so half h of a run (its keys 8 t + 4 h .. + 3) is
// one k16 step: A's element e is row g + 8 ((e / 2) % 2) at the lane's key
// 4 h + e % 2 + 2 (e / 4), B's element e its key 4 h + e.
//
// At the end each warp stores its own fragments: to the result, rounded
// once to its dtype, or with splits to the split's f32 partials (each
// product's chunk-major, one product after another, as the planner's
// scratch holds them) for the matmul-combine. Each output is the f32 sum of
// exact products of two-byte values in another order than the oracle's, so
// the gemm's bound holds (docs/codegen.md).
#include "codegen/gen/products.h"

namespace poot {

using namespace gen;

Expected<kir::Kernel> genGemvMma(const GenInput& in) {
  const KernelRequest& r = in.request;
  const Schedule& s = r.schedule;
  const MatrixOp op = *matrixOpNamed(s.matrix);
  std::vector<Product> ps = productsOf(r);
  const int64_t T = s.workgroupSize, NW = T / 32, NT = s.tileM / 8, BN = s.tileN, CW = BN / NW / 16, BK = s.tileK;
  const int64_t ST = kGemvMmaStages, S = s.splits, stage = (BN + s.tileM) * BK;
  const int64_t RC = BK / 8, PR = T / RC;  // 16-byte runs of a stage row; rows a round of copies (even)
  const int64_t chunk = gemmChunkKeys(s, ps[0].k);
  int64_t total = 0;
  std::vector<int64_t> scratchAt;  // each product's first partial
  for (const Product& p : ps) scratchAt.push_back(S * total), total += p.count();
  auto f = openKernel(in, S > 1 ? S * total : 0);
  if (!f) return f.error();
  Builder& b = f->b;
  // The stages: b's tileN rows, then a's tileM, BK keys a row.
  int32_t tiles = b.shared("stages", kir::mmaOperand(op), ST * stage);
  perWorkgroup(b, ps, s.tileM, BN, S, [&](size_t pi, V bi, V r0, V c0, V split) {
    const Product& p = ps[pi];
    auto [aBase, bBase, oBase] = p.bases(b, bi);
    int32_t out = S > 1 ? f->out[0] : f->out[pi];
    if (S > 1) oBase = b.add(oBase, b.add(b.i32(scratchAt[pi]), b.mul(split, b.i32(p.count()))));
    V kLo = b.mul(split, b.i32(chunk)), kHi = b.min(b.add(kLo, b.i32(chunk)), b.i32(p.k));
    V tid = b.local(), warp = divBy(b, tid, 32), lane = remBy(b, tid, 32);
    V gq = divBy(b, lane, 4), tq = remBy(b, lane, 4), odd = remBy(b, gq, 2);
    // The thread's copies: row cr + i PR of the stage, its run cj (stored
    // at cj ^ 4 in an odd row; PR is even, so every row it copies is as
    // odd as cr).
    V cr = divBy(b, tid, RC), cj = remBy(b, tid, RC);
    V slot = b.add(b.mul(cr, b.i32(BK)), b.mul(b.binary(Opc::Xor, cj, b.mul(remBy(b, cr, 2), b.i32(4))), b.i32(8)));
    V bRow = b.add(c0, cr), aRow = b.add(r0, cr);
    V bFrom = b.add(bBase, b.mul(bRow, b.i32(p.k))), aFrom = b.add(aBase, b.mul(aRow, b.i32(p.k)));
    auto issue = [&](V st, V k0) {
      V key = b.add(k0, b.mul(cj, b.i32(8)));
      V keyOk = b.lt(key, kHi), at = b.add(b.mul(st, b.i32(stage)), slot);
      auto copy = [&](bool isB, int64_t i) {
        int64_t row = i * PR;
        V x = b.add(isB ? bRow : aRow, b.i32(row));
        V ok = b.binary(Opc::And, b.lt(x, b.i32(isB ? p.n : p.m)), keyOk);
        V src = b.add(isB ? bFrom : aFrom, b.add(b.i32(row * p.k), key));
        b.copyAsync(isB ? f->in[1 + pi] : f->in[0], b.select(ok, src, b.i32(0)), tiles,
                    b.add(at, b.i32((isB ? row : BN + row) * BK)), ok);
      };
      for (int64_t i = 0; i * PR < BN; ++i) copy(true, i);
      for (int64_t i = 0; i * PR < s.tileM; ++i) {
        if ((i + 1) * PR <= s.tileM) copy(false, i);
        else b.ifThen(b.lt(cr, b.i32(s.tileM - i * PR)), [&] { copy(false, i); });
      }
      b.asyncCommit();
    };
    std::vector<FragmentVars> acc;
    for (int64_t x = 0; x < CW * NT; ++x) acc.push_back(zeroFragment(b));
    // The lane's place in a stage row: row g, its run t of a run of 32 keys
    // (run r's at 32 (r ^ odd) + 8 t).
    V first = b.add(b.mul(gq, b.i32(BK)), b.mul(tq, b.i32(8)));
    V warpRows = b.mul(warp, b.i32(16 * CW * BK));
    V flip = b.mul(odd, b.i32(32));
    pipelineSteps(b, kLo, kHi, BK, ST, issue, [&](V st) {
      V base = b.add(b.mul(st, b.i32(stage)), first);
      V wBase = b.add(base, warpRows);
      for (int64_t run = 0; run < BK / 32; ++run) {
        V runAt = run % 2 ? b.sub(b.i32(32 * run), flip) : b.add(b.i32(32 * run), flip);
        auto rowRun = [&](V from, int64_t row) {
          return b.sharedLoadVec(tiles, b.add(from, b.add(b.i32(row * BK), runAt)), 8);
        };
        std::vector<std::vector<V>> wb, xa;
        for (int64_t c = 0; c < CW; ++c)
          for (int64_t h = 0; h < 2; ++h) wb.push_back(rowRun(wBase, 16 * c + 8 * h));
        for (int64_t j = 0; j < NT; ++j) xa.push_back(rowRun(base, BN + 8 * j));
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t c = 0; c < CW; ++c) {
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
    // Fragment (c, j)'s element e: its row g + 8 (e / 2) is column c0 +
    // warp CW 16 + 16 c + g + 8 (e / 2); its column 2 t + e % 2 is row r0 +
    // 8 j + 2 t + e % 2.
    V colAt = b.add(c0, b.add(b.mul(warp, b.i32(16 * CW)), gq)), rowAt = b.add(r0, b.mul(tq, b.i32(2)));
    for (int64_t c = 0; c < CW; ++c)
      for (int64_t j = 0; j < NT; ++j) {
        std::array<V, 4> d = getFragment(b, acc[size_t(c * NT + j)]);
        for (int64_t e = 0; e < 4; ++e) {
          V col = b.add(colAt, b.i32(16 * c + 8 * (e / 2))), row = b.add(rowAt, b.i32(8 * j + e % 2));
          b.ifThen(b.binary(Opc::And, b.lt(row, b.i32(p.m)), b.lt(col, b.i32(p.n))),
                   [&] { b.store(out, b.add(oBase, b.add(b.mul(row, b.i32(p.n)), col)), d[size_t(e)]); });
        }
      }
  });
  return b.finish();
}

}  // namespace poot

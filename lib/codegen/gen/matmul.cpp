// The MatMul generators, one per schedule (plan.h): [batch..., m, n] =
// a [batch..., m, k] x b [batch..., k, n], or b [batch..., n, k] read
// transposed ({transpose_b=true}), the batch axes broadcasting numpy-style
// and b possibly two-byte floats widened as they load.
//  - gemv: a workgroup owns threadM rows and workgroupSize / kLanes column
//    groups of threadN columns each; the kLanes threads of a group split K
//    between them in runs of `vector` keys (lane l takes the runs l,
//    l + kLanes, ...; `unroll` runs of b loaded before their products), keep
//    one partial sum per (row, column), then leave them in workgroup memory
//    for one barrier and a fold of each output's kLanes partials in two
//    levels (about sqrt(kLanes) lanes an output, then one). For a transposed b the lanes of a group are adjacent threads,
//    so a warp reads a contiguous stretch of one row of b, a run (one wide
//    load) each; for a plain b the column groups are adjacent, so it reads a
//    stretch of one row of b across columns.
//  - gemm: a workgroup owns a tileM x tileN block; for each tileK step of K
//    its threads stage the a and b tiles in workgroup memory (k-major, each
//    k row padded by kGemmPad words, out-of-range elements as 0; runs of
//    `vector` along K where the operand is read along K), loading the next
//    step's tiles into registers while they compute on this one; each thread
//    accumulates a threadM x threadN register tile made of runs of up to 4
//    rows (and columns), the runs strided by the thread grid: one wide
//    workgroup-memory load a run, neighbouring threads reading neighbouring
//    runs. A split gemm (splits > 1) gives each block one workgroup per chunk
//    of K, whose partial sums go to the scratch, chunk-major;
//  - matmul-combine then adds each element's partials in chunk order.
// A product group's gemv (fusion.h; the planner groups gemvs only) has
// several b and results: the blocks of each product follow those of the one
// before in one launch, and the body is written out once a product
// (perWorkgroup).
// Both sum each result in a different order from the oracle (partial sums,
// then a fold), f32 products fused into their sums; the error bound this
// keeps is in docs/codegen.md. Integers wrap as in the oracle, in
// any order exactly.
#include <array>
#include <functional>

#include "codegen/gen/products.h"
#include "plan/schedule.h"

namespace poot {

namespace {

using namespace gen;

// acc + x * y: one fused multiply-add for f32 (within the bound of
// docs/codegen.md either way), a product and a wrapping sum for integers.
V multiplyAdd(Builder& b, V x, V y, V acc) {
  return b.typeOf(acc) == Scalar::F32 ? b.fma(x, y, acc) : b.add(acc, b.mul(x, y));
}

// A run of `width` elements of a read-only buffer from an index that is a
// multiple of width, as wide loads of at most 16 bytes.
std::vector<V> loadRun(Builder& b, int32_t buf, DType t, V index, int64_t width) {
  int64_t piece = std::min(width, 16 / int64_t(dtypeBytes(t)));
  std::vector<V> out;
  for (int64_t at = 0; at < width; at += piece) {
    std::vector<V> part = b.loadVec(buf, at ? b.add(index, b.i32(at)) : index, piece);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// How many lanes fold each output's G partials (both powers of two): about
// sqrt(G), so a chain of G / F sums then one of F replaces one of G, while
// the group's G lanes cover its outs outputs F ways each; 1 (one lane an
// output, G sums) when there are more outputs than lanes.
int64_t foldWays(int64_t G, int64_t outs) {
  int64_t F = 1;
  while (F * F < G && F * 2 * outs <= G) F *= 2;
  return F;
}

Expected<kir::Kernel> gemvKernel(const GenInput& in) {
  const KernelRequest& r = in.request;
  const Schedule& s = r.schedule;
  auto f = openKernel(in);
  if (!f) return f.error();
  Builder& b = f->b;
  std::vector<Product> ps = productsOf(r);
  int64_t T = s.workgroupSize, G = s.kLanes, CG = T / G, TM = s.threadM, TN = s.threadN, U = s.unroll, W = s.vector;
  DType at = r.operands[0].dtype, bt = r.operands[1].dtype;
  Scalar t = valueScalar(r.results[0].dtype);
  int64_t outs = TM * TN, stride = T + 1;  // a partial row, padded against bank conflicts
  int32_t part = G > 1 ? b.shared("partials", t, outs * stride) : -1;
  perWorkgroup(b, ps, TM, CG * TN, 1, [&](size_t pi, V bi, V r0, V c0, V) {
    const Product& p = ps[pi];
    int32_t bBuf = f->in[1 + pi], oBuf = f->out[pi];
    auto [aBase, bBase, oBase] = p.bases(b, bi);
    V tid = b.local();
    V lane = p.transposed ? remBy(b, tid, G) : divBy(b, tid, CG);
    V cg = p.transposed ? divBy(b, tid, G) : remBy(b, tid, CG);
    // Columns c0 + cg + j * CG (strided, so neighbouring threads of a plain b
    // read neighbouring columns); one past n computes a copy of the last,
    // never stored. Rows past m likewise.
    std::vector<V> cols, colIn, aRow;
    for (int64_t j = 0; j < TN; ++j) {
      cols.push_back(b.add(c0, b.add(cg, b.i32(j * CG))));
      colIn.push_back(b.min(cols.back(), b.i32(p.n - 1)));
    }
    for (int64_t i = 0; i < TM; ++i)
      aRow.push_back(b.add(aBase, b.mul(b.min(b.add(r0, b.i32(i)), b.i32(p.m - 1)), b.i32(p.k))));
    std::vector<int32_t> acc;
    for (int64_t o = 0; o < outs; ++o) acc.push_back(b.var(t, b.constant(t, 0)));
    // The products of W keys from kk: a run of b for each column, then a run
    // of a for each row.
    auto runOf = [&](V kk) {
      std::vector<std::vector<V>> w;
      for (int64_t j = 0; j < TN; ++j) w.push_back(loadRun(b, bBuf, bt, p.bAt(b, bBase, kk, colIn[size_t(j)]), W));
      return w;
    };
    auto accumulate = [&](V kk, const std::vector<std::vector<V>>& w) {
      for (int64_t i = 0; i < TM; ++i) {
        std::vector<V> x = loadRun(b, f->in[0], at, b.add(aRow[size_t(i)], kk), W);
        for (int64_t j = 0; j < TN; ++j) {
          int32_t a = acc[size_t(i * TN + j)];
          for (int64_t e = 0; e < W; ++e) b.set(a, multiplyAdd(b, x[size_t(e)], w[size_t(j)][size_t(e)], b.get(a)));
        }
      }
    };
    // Whole steps of U runs for every lane, all their loads of b first; then
    // the remaining runs one at a time (K is a multiple of W).
    int64_t step = G * W * U, full = p.k / step * step;
    V first = b.mul(lane, b.i32(W));
    if (full > 0)
      b.forRange(b.i32(0), b.i32(full), step, [&](V k0) {
        std::vector<V> ks;
        std::vector<std::vector<std::vector<V>>> ws;
        for (int64_t u = 0; u < U; ++u) {
          ks.push_back(b.add(k0, b.add(first, b.i32(u * G * W))));
          ws.push_back(runOf(ks.back()));
        }
        for (int64_t u = 0; u < U; ++u) accumulate(ks[size_t(u)], ws[size_t(u)]);
      });
    if (full < p.k)
      b.forRange(b.add(b.i32(full), first), b.i32(p.k), G * W, [&](V kk) { accumulate(kk, runOf(kk)); });
    auto store = [&](V i, V j, V value) {
      V row = b.add(r0, i), col = b.add(c0, b.add(cg, b.mul(j, b.i32(CG))));
      V ok = b.binary(Opc::And, b.lt(col, b.i32(p.n)), b.lt(row, b.i32(p.m)));
      b.ifThen(ok, [&] { b.store(oBuf, b.add(oBase, b.add(b.mul(row, b.i32(p.n)), col)), value); });
    };
    if (G == 1) {
      for (int64_t o = 0; o < outs; ++o) store(b.i32(o / TN), b.i32(o % TN), b.get(acc[size_t(o)]));
      return;
    }
    // Every thread leaves its partials, one barrier, then the G lanes of each
    // column group fold them (foldWays).
    V slot = b.add(b.mul(cg, b.i32(G)), lane);
    for (int64_t o = 0; o < outs; ++o) b.sharedStore(part, b.add(b.i32(o * stride), slot), b.get(acc[size_t(o)]));
    b.barrier();
    // The partials of output o sum words [first, first + count) of its row,
    // every `step`-th.
    auto sumOf = [&](V o, V first, int64_t count, int64_t step) {
      V row = b.add(b.add(b.mul(o, b.i32(stride)), b.mul(cg, b.i32(G))), first);
      int32_t sum = b.var(t, b.sharedLoad(part, row));
      if (count > 1)
        b.forRange(b.i32(step), b.i32(count * step), step,
                   [&](V g) { b.set(sum, b.add(b.get(sum), b.sharedLoad(part, b.add(row, g)))); });
      return b.get(sum);
    };
    int64_t F = foldWays(G, outs);
    if (F == 1) {  // lane l sums the G partials of outputs l, l + G, ...
      b.forRange(lane, b.i32(outs), G, [&](V o) { store(divBy(b, o, TN), remBy(b, o, TN), sumOf(o, b.i32(0), G, 1)); });
      return;
    }
    // F lanes an output: lane f of output o sums its words f, f + F, ... and
    // leaves the sum in word f (which no other lane reads); one barrier; lane
    // o sums the F words of output o.
    b.ifThen(b.lt(lane, b.i32(outs * F)), [&] {
      V o = divBy(b, lane, F), f = remBy(b, lane, F);
      V sum = sumOf(o, f, G / F, F);
      b.sharedStore(part, b.add(b.add(b.mul(o, b.i32(stride)), b.mul(cg, b.i32(G))), f), sum);
    });
    b.barrier();
    b.ifThen(b.lt(lane, b.i32(outs)), [&] { store(divBy(b, lane, TN), remBy(b, lane, TN), sumOf(lane, b.i32(0), F, 1)); });
  });
  return b.finish();
}

// What a gemm or gemm-mma kernel opens with: its one product, K's split
// (splits chunks of `chunk` keys) and its frame, whose result is the
// split's f32 partials when splits > 1.
struct Gemm {
  Product p;
  int64_t splits, chunk, count;
  Frame f;
};

Expected<Gemm> openGemm(const GenInput& in) {
  Product p(in.request, 0);
  int64_t S = in.request.schedule.splits, count = p.count();
  auto f = openKernel(in, S > 1 ? S * count : 0);
  if (!f) return f.error();
  return Gemm{p, S, gemmChunkKeys(in.request.schedule, p.k), count, std::move(*f)};
}

// A workgroup's part of a split gemm: the batch's element offsets of a, b
// and the result (moved to the split's partials) and the keys [kLo, kHi)
// of its chunk (all of K when unsplit).
struct GemmPart {
  V aBase, bBase, oBase, kLo, kHi;
};

GemmPart gemmPart(Builder& b, const Gemm& g, V bi, V split) {
  auto [aBase, bBase, oBase] = g.p.bases(b, bi);
  V kLo = b.mul(split, b.i32(g.chunk)), kHi = b.min(b.add(kLo, b.i32(g.chunk)), b.i32(g.p.k));
  if (g.splits > 1) oBase = b.add(oBase, b.mul(split, b.i32(g.count)));
  return {aBase, bBase, oBase, kLo, kHi};
}

Expected<kir::Kernel> gemmKernel(const GenInput& in, Gemm& g) {
  const KernelRequest& r = in.request;
  const Schedule& s = r.schedule;
  const Product& p = g.p;
  Frame* f = &g.f;
  Builder& b = f->b;
  int64_t BM = s.tileM, BN = s.tileN, BK = s.tileK, TM = s.threadM, TN = s.threadN, W = s.vector;
  int64_t TX = BN / TN, TY = BM / TM, T = TX * TY, pad = kGemmPad;
  DType at = r.operands[0].dtype, bt = r.operands[1].dtype;
  Scalar t = valueScalar(r.results[0].dtype);
  // k-major tiles, each k row padded so the stores of neighbouring threads
  // (neighbouring k) fall in different banks.
  int64_t sa = BM + pad, sb = BN + pad;
  int32_t as = b.shared("a_tile", t, BK * sa), bs = b.shared("b_tile", t, BK * sb);
  perWorkgroup(b, {p}, BM, BN, g.splits, [&](size_t, V bi, V r0, V c0, V split) {
    auto [aBase, bBase, oBase, kLo, kHi] = gemmPart(b, g, bi, split);
    V tid = b.local();
    V tx = remBy(b, tid, TX), ty = divBy(b, tid, TX);
    V zero = b.constant(t, 0);
    // Register row i is tile row (i / RM) * TY * RM + ty * RM + i % RM: runs
    // of RM rows, one wide load each; columns likewise in runs of RN.
    int64_t RM = Builder::wideRun(TM), RN = Builder::wideRun(TN);
    V rowAt = b.mul(ty, b.i32(RM)), colAt = b.mul(tx, b.i32(RN));
    auto rowOffset = [&](int64_t i) { return i / RM * TY * RM + i % RM; };  // from rowAt
    auto colOffset = [&](int64_t j) { return j / RN * TX * RN + j % RN; };  // from colAt
    // One tile operand: which runs of W elements a thread moves, where each
    // comes from and goes, held in variables between its load (one tile
    // ahead) and its store into workgroup memory.
    struct Staged {
      int32_t buf, tile;
      int64_t stride;
      std::vector<std::pair<V, V>> runs;  // (tile row or column, k offset) of each run, -1 when idle
      std::vector<V> active;              // whether the run exists (the last step may be partial)
      std::vector<int32_t> vals;
    };
    auto stage = [&](int32_t buf, int32_t tile, int64_t rows, int64_t stride, bool alongK) {
      Staged st{buf, tile, stride, {}, {}, {}};
      int64_t w = alongK ? W : 1, count = rows * BK / w;
      for (int64_t e0 = 0; e0 < count; e0 += T) {
        V e = b.add(tid, b.i32(e0));
        // Along K: run e holds k (e % (BK / w)) * w of row e / (BK / w); across: k e / rows, column e % rows.
        V row = alongK ? divBy(b, e, BK / w) : remBy(b, e, rows);
        V kk = alongK ? b.mul(remBy(b, e, BK / w), b.i32(w)) : divBy(b, e, rows);
        st.runs.push_back({row, kk});
        st.active.push_back(e0 + T <= count ? b.boolean(true) : b.lt(e, b.i32(count)));
        for (int64_t x = 0; x < w; ++x) st.vals.push_back(b.var(t, zero));
      }
      return st;
    };
    Staged sA = stage(f->in[0], as, BM, sa, true), sB = stage(f->in[1], bs, BN, sb, p.transposed);
    int64_t wB = p.transposed ? W : 1;
    // Load the tile at k0 into the variables: out-of-range elements (and
    // keys past the chunk) are 0, their index clamped to 0 (K and the chunk
    // are multiples of W, so a run is all in or all out).
    auto fetch = [&](V k0) {
      for (size_t u = 0; u < sA.runs.size(); ++u) {
        auto [i, kk] = sA.runs[u];
        V row = b.add(r0, i), key = b.add(k0, kk);
        V ok = b.binary(Opc::And, sA.active[u], b.binary(Opc::And, b.lt(row, b.i32(p.m)), b.lt(key, kHi)));
        V at0 = b.select(ok, b.add(aBase, b.add(b.mul(row, b.i32(p.k)), key)), b.i32(0));
        std::vector<V> v = loadRun(b, sA.buf, at, at0, W);
        for (int64_t x = 0; x < W; ++x) b.set(sA.vals[u * size_t(W) + size_t(x)], b.select(ok, v[size_t(x)], zero));
      }
      for (size_t u = 0; u < sB.runs.size(); ++u) {
        auto [j, kk] = sB.runs[u];
        V col = b.add(c0, j), key = b.add(k0, kk);
        V ok = b.binary(Opc::And, sB.active[u], b.binary(Opc::And, b.lt(col, b.i32(p.n)), b.lt(key, kHi)));
        std::vector<V> v = loadRun(b, sB.buf, bt, b.select(ok, p.bAt(b, bBase, key, col), b.i32(0)), wB);
        for (int64_t x = 0; x < wB; ++x) b.set(sB.vals[u * size_t(wB) + size_t(x)], b.select(ok, v[size_t(x)], zero));
      }
    };
    auto deposit = [&](const Staged& st, int64_t w) {
      for (size_t u = 0; u < st.runs.size(); ++u) {
        auto [row, kk] = st.runs[u];
        b.ifThen(st.active[u], [&] {
          for (int64_t x = 0; x < w; ++x)
            b.sharedStore(st.tile, b.add(b.mul(b.add(kk, b.i32(x)), b.i32(st.stride)), row),
                          b.get(st.vals[u * size_t(w) + size_t(x)]));
        });
      }
    };
    std::vector<int32_t> acc;
    for (int64_t i = 0; i < TM * TN; ++i) acc.push_back(b.var(t, zero));
    fetch(kLo);
    b.forRange(kLo, kHi, BK, [&](V k0) {
      deposit(sA, W);
      deposit(sB, wB);
      b.barrier();
      fetch(b.add(k0, b.i32(BK)));  // the next tile's loads fly while this one computes
      // The tileK steps written out: straight-line loads and products, no
      // loop counter or index arithmetic between them.
      for (int64_t kk = 0; kk < BK; ++kk) {
        std::vector<V> av, bv;
        for (int64_t i = 0; i < TM; i += RM) {
          std::vector<V> run = b.sharedLoadVec(as, b.add(rowAt, b.i32(kk * sa + rowOffset(i))), RM);
          av.insert(av.end(), run.begin(), run.end());
        }
        for (int64_t j = 0; j < TN; j += RN) {
          std::vector<V> run = b.sharedLoadVec(bs, b.add(colAt, b.i32(kk * sb + colOffset(j))), RN);
          bv.insert(bv.end(), run.begin(), run.end());
        }
        for (int64_t i = 0; i < TM; ++i)
          for (int64_t j = 0; j < TN; ++j) {
            int32_t a = acc[size_t(i * TN + j)];
            b.set(a, multiplyAdd(b, av[size_t(i)], bv[size_t(j)], b.get(a)));
          }
      }
      b.barrier();
    });
    for (int64_t i = 0; i < TM; ++i)
      for (int64_t j = 0; j < TN; ++j) {
        V row = b.add(r0, b.add(rowAt, b.i32(rowOffset(i)))), col = b.add(c0, b.add(colAt, b.i32(colOffset(j))));
        b.ifThen(b.binary(Opc::And, b.lt(row, b.i32(p.m)), b.lt(col, b.i32(p.n))), [&] {
          b.store(f->out[0], b.add(oBase, b.add(b.mul(row, b.i32(p.n)), col)), b.get(acc[size_t(i * TN + j)]));
        });
      }
  });
  return b.finish();
}

// Lane `lane`'s first element (e = 0) of a warp's (or a wave's) A, B and C
// fragments, as (row, column) values: kir.h's layouts, where every other
// element is a constant offset from there (kir::mmaA(op, 0, e) and so on).
// PTX's m16n8k16, g = lane / 4 and t = lane % 4: A (g, 2t), B (2t, g), C
// (g, 2t). AMD's m16n16k16, r = lane % 16 and q = lane / 16: A (r, 4q), B
// (4q, r), C (4q, r).
struct LaneStart {
  V aRow, aCol, bRow, bCol, cRow, cCol;
};
LaneStart laneStart(Builder& b, const MatrixShape& shape, V lane) {
  if (shape.threads == 64) {
    V r = remBy(b, lane, 16), q4 = b.mul(divBy(b, lane, 16), b.i32(4));
    return {r, q4, q4, r, q4, r};
  }
  V g = divBy(b, lane, 4), t2 = b.mul(remBy(b, lane, 4), b.i32(2));
  return {g, t2, t2, g, g, t2};
}

// The gemm on matrix units (gemm-mma): warp (wm, wn) of the workgroup owns
// rows wm * threadM .. and columns wn * threadN .. of its block, as FM x FN
// fragments of the op's m x n (16 x 8 on PTX's m16n8k16, 16 x 16 on a wave
// of AMD's MFMA; the warp is the op's threads). For each tileK step the
// a tile (rows of tileK keys) and the b tile (columns of tileK keys) are in
// workgroup memory as the two-byte values they are, out-of-range elements
// 0, and each fragment operand pair is one 4-byte workgroup-memory load.
// With stages > 1 (gemmMmaStages: a short tile, every run 16 bytes along K) each step's
// tiles are copied asynchronously into one of the stage buffers, the copies
// of the next stages - 1 steps in flight while the warps multiply this one;
// else the threads load the next step's runs into variables while the warps
// multiply, and store them into the one buffer after.
Expected<kir::Kernel> gemmMmaKernel(const GenInput& in, Gemm& g) {
  const Schedule& s = in.request.schedule;
  const Product& p = g.p;
  Frame* f = &g.f;
  Builder& b = f->b;
  MatrixOp op = *matrixOpNamed(s.matrix);
  const MatrixShape& shape = matrixShape(op);
  Scalar ot = kir::mmaOperand(op);
  int64_t BM = s.tileM, BN = s.tileN, BK = s.tileK, WM = s.threadM, WN = s.threadN, W = s.vector;
  int64_t WX = BN / WN, T = s.workgroupSize, FM = WM / shape.m, FN = WN / shape.n, SA = BK + kGemmMmaPad;
  int64_t ST = gemmMmaStages(shape, BM, BN, W, p.transposed);
  int32_t as = b.shared("a_tile", ot, ST * BM * SA), bs = b.shared("b_tile", ot, ST * BN * SA);
  perWorkgroup(b, {p}, BM, BN, g.splits, [&](size_t, V bi, V r0, V c0, V split) {
    auto [aBase, bBase, oBase, kLo, kHi] = gemmPart(b, g, bi, split);
    V tid = b.local();
    V warp = divBy(b, tid, shape.threads), lane = remBy(b, tid, shape.threads);
    V wm = divBy(b, warp, WX), wn = remBy(b, warp, WX);
    LaneStart at = laneStart(b, shape, lane);
    V zero = b.convert(b.f32(0), ot);
    // The runs a thread moves: run u of W elements is (row or column of the
    // tile, key) for a run along K, or (key, column) for a plain b's run
    // along N; a run is all in or all out of range (K, and N for a plain b,
    // are multiples of W).
    struct Runs {
      std::vector<std::pair<V, V>> at;
      std::vector<V> active;
      std::vector<int32_t> vals;  // the register path's values between load and deposit
    };
    auto runsOf = [&](int64_t rows, bool alongK) {
      Runs st;
      int64_t per = alongK ? BK / W : rows / W, runs = rows * BK / W;
      for (int64_t e0 = 0; e0 < runs; e0 += T) {
        V e = b.add(tid, b.i32(e0));
        V major = divBy(b, e, per), minor = b.mul(remBy(b, e, per), b.i32(W));
        st.at.push_back(alongK ? std::pair{major, minor} : std::pair{minor, major});  // (row or column, key)
        st.active.push_back(e0 + T <= runs ? b.boolean(true) : b.lt(e, b.i32(runs)));
        if (ST == 1)
          for (int64_t x = 0; x < W; ++x) st.vals.push_back(b.var(ot, zero));
      }
      return st;
    };
    Runs rA = runsOf(BM, true), rB = runsOf(BN, p.transposed);
    // Run u's source index at step k0 (index 0 when out of range) and
    // whether it is in range.
    auto sourceA = [&](size_t u, V k0) {
      auto [i, kk] = rA.at[u];
      V row = b.add(r0, i), key = b.add(k0, kk);
      V ok = b.binary(Opc::And, rA.active[u], b.binary(Opc::And, b.lt(row, b.i32(p.m)), b.lt(key, kHi)));
      return std::pair{b.select(ok, b.add(aBase, b.add(b.mul(row, b.i32(p.k)), key)), b.i32(0)), ok};
    };
    auto sourceB = [&](size_t u, V k0) {
      auto [j, kk] = rB.at[u];
      V col = b.add(c0, j), key = b.add(k0, kk);
      V ok = b.binary(Opc::And, rB.active[u], b.binary(Opc::And, b.lt(col, b.i32(p.n)), b.lt(key, kHi)));
      return std::pair{b.select(ok, p.bAt(b, bBase, key, col), b.i32(0)), ok};
    };
    std::vector<std::array<int32_t, 4>> acc;
    for (int64_t i = 0; i < FM * FN; ++i) {
      std::array<int32_t, 4> c{};
      for (int32_t& x : c) x = b.var(Scalar::F32, b.f32(0));
      acc.push_back(c);
    }
    // This lane's first element of its warp's A and B fragments; every
    // other element is a constant offset from there, and neighbouring
    // elements (e, e + 1) are neighbouring keys. Tiles are row-major with K
    // fastest: a's row i at i * SA, b's column j at j * SA.
    V aLane = b.add(b.mul(b.add(b.mul(wm, b.i32(WM)), at.aRow), b.i32(SA)), at.aCol);
    V bLane = b.add(b.mul(b.add(b.mul(wn, b.i32(WN)), at.bCol), b.i32(SA)), at.bRow);
    // The warps' products of one step, from the stage buffers at aAt, bAt.
    auto multiply = [&](V aAt, V bAt) {
      for (int64_t ks = 0; ks < BK; ks += shape.k) {
        std::vector<std::vector<V>> af(static_cast<size_t>(FM)), bf(static_cast<size_t>(FN));
        for (int64_t fm = 0; fm < FM; ++fm)
          for (int e = 0; e < shape.aRegs; e += 2) {
            kir::RowCol rc = kir::mmaA(op, 0, e);
            std::vector<V> pair = b.sharedLoadVec(as, b.add(aAt, b.i32((fm * shape.m + rc.row) * SA + ks + rc.col)), 2);
            af[size_t(fm)].insert(af[size_t(fm)].end(), pair.begin(), pair.end());
          }
        for (int64_t fn = 0; fn < FN; ++fn)
          for (int e = 0; e < shape.bRegs; e += 2) {
            kir::RowCol rc = kir::mmaB(op, 0, e);
            std::vector<V> pair = b.sharedLoadVec(bs, b.add(bAt, b.i32((fn * shape.n + rc.col) * SA + ks + rc.row)), 2);
            bf[size_t(fn)].insert(bf[size_t(fn)].end(), pair.begin(), pair.end());
          }
        for (int64_t fm = 0; fm < FM; ++fm)
          for (int64_t fn = 0; fn < FN; ++fn) {
            std::array<int32_t, 4>& c = acc[size_t(fm * FN + fn)];
            std::array<V, 4> d =
                b.mma(op, af[size_t(fm)], bf[size_t(fn)], {b.get(c[0]), b.get(c[1]), b.get(c[2]), b.get(c[3])});
            for (size_t e = 0; e < 4; ++e) b.set(c[e], d[e]);
          }
      }
    };
    if (ST > 1) {
      // Step k0's copies into stage `stage`, as one group.
      auto issue = [&](V stage, V k0) {
        V aOff = b.mul(stage, b.i32(BM * SA)), bOff = b.mul(stage, b.i32(BN * SA));
        for (size_t u = 0; u < rA.at.size(); ++u)
          b.ifThen(rA.active[u], [&] {
            auto [src, ok] = sourceA(u, k0);
            b.copyAsync(f->in[0], src, as, b.add(aOff, b.add(b.mul(rA.at[u].first, b.i32(SA)), rA.at[u].second)), ok);
          });
        for (size_t u = 0; u < rB.at.size(); ++u)
          b.ifThen(rB.active[u], [&] {
            auto [src, ok] = sourceB(u, k0);
            b.copyAsync(f->in[1], src, bs, b.add(bOff, b.add(b.mul(rB.at[u].first, b.i32(SA)), rB.at[u].second)), ok);
          });
        b.asyncCommit();
      };
      pipelineSteps(b, kLo, kHi, BK, ST, issue, [&](V stage) {
        multiply(b.add(aLane, b.mul(stage, b.i32(BM * SA))), b.add(bLane, b.mul(stage, b.i32(BN * SA))));
      });
    } else {
      auto fetch = [&](V k0) {
        for (size_t u = 0; u < rA.at.size(); ++u) {
          auto [src, ok] = sourceA(u, k0);
          std::vector<V> v = b.loadVecStored(f->in[0], src, W);
          for (int64_t x = 0; x < W; ++x) b.set(rA.vals[u * size_t(W) + size_t(x)], b.select(ok, v[size_t(x)], zero));
        }
        for (size_t u = 0; u < rB.at.size(); ++u) {
          auto [src, ok] = sourceB(u, k0);
          std::vector<V> v = b.loadVecStored(f->in[1], src, W);
          for (int64_t x = 0; x < W; ++x) b.set(rB.vals[u * size_t(W) + size_t(x)], b.select(ok, v[size_t(x)], zero));
        }
      };
      // A plain b's run along N scatters over W columns.
      auto deposit = [&](const Runs& st, int32_t tile, bool alongK) {
        for (size_t u = 0; u < st.at.size(); ++u) {
          auto [row, kk] = st.at[u];
          b.ifThen(st.active[u], [&] {
            std::vector<V> vals;
            for (int64_t x = 0; x < W; ++x) vals.push_back(b.get(st.vals[u * size_t(W) + size_t(x)]));
            if (alongK) return b.sharedStoreVec(tile, b.add(b.mul(row, b.i32(SA)), kk), vals);
            for (int64_t x = 0; x < W; ++x)
              b.sharedStore(tile, b.add(b.mul(b.add(row, b.i32(x)), b.i32(SA)), kk), vals[size_t(x)]);
          });
        }
      };
      fetch(kLo);
      b.forRange(kLo, kHi, BK, [&](V k0) {
        deposit(rA, as, true);
        deposit(rB, bs, p.transposed);
        b.barrier();
        fetch(b.add(k0, b.i32(BK)));  // the next step's loads fly while this one multiplies
        multiply(aLane, bLane);
        b.barrier();
      });
    }
    // Element e of fragment (fm, fn): the lane's first, moved as kir::mmaC
    // moves element e.
    V rowAt = b.add(r0, b.add(b.mul(wm, b.i32(WM)), at.cRow)), colAt = b.add(c0, b.add(b.mul(wn, b.i32(WN)), at.cCol));
    for (int64_t fm = 0; fm < FM; ++fm)
      for (int64_t fn = 0; fn < FN; ++fn)
        for (int e = 0; e < 4; ++e) {
          kir::RowCol rc = kir::mmaC(op, 0, e);
          V row = b.add(rowAt, b.i32(fm * shape.m + rc.row)), col = b.add(colAt, b.i32(fn * shape.n + rc.col));
          b.ifThen(b.binary(Opc::And, b.lt(row, b.i32(p.m)), b.lt(col, b.i32(p.n))), [&] {
            b.store(f->out[0], b.add(oBase, b.add(b.mul(row, b.i32(p.n)), col)), b.get(acc[size_t(fm * FN + fn)][size_t(e)]));
          });
        }
  });
  return b.finish();
}

// The gemm on a warpgroup's matrix op (gemm-mma with m64nNk16, sm_90a):
// warpgroup (wm, wn) owns rows wm * 64 .. and columns wn * threadN .. of the
// block. Each step of tileK = 64 keys, the a tile (tileM rows) and the b tile
// (tileN columns, K fastest) are copied asynchronously into one of ST stage
// buffers in kir.h's 128-byte swizzle: a row's 128 bytes of keys are one
// row of the buffer, its 16-byte run j at j ^ (row % 8), so a warp reads 4
// whole rows from global memory and writes 4 whole rows of workgroup memory;
// out-of-range runs are zeros. The copies of the next ST - 1 steps fly while
// the warpgroups multiply one, a chain of 4 MmaShared a step onto their
// threadN / 2 accumulators, waited for (MmaWait) before the step ends.
// The 256-wide tile (kGemmGroupWideStages stages) leaves each step's chain
// running into the next step instead, onto accumulators the step takes
// over: the copies go ST - 2 steps ahead, and a step waits for the chain
// before it (MmaWait 1) once it has issued its own, so the chain's stage is
// free again before the copies two steps on overwrite it. At 128x128 that
// stage more costs a workgroup a unit and lost 11-25% on the H200; at
// 128x256, which holds one a unit anyway, it gained 5-16% at 2048 and 8192
// rows (bench/matmul NOTES, sessions 22 and 25).
Expected<kir::Kernel> gemmGroupKernel(const GenInput& in, Gemm& g) {
  const Schedule& s = in.request.schedule;
  const Product& p = g.p;
  Frame* f = &g.f;
  Builder& b = f->b;
  MatrixOp op = *matrixOpNamed(s.matrix);
  const MatrixShape& shape = matrixShape(op);
  int64_t BM = s.tileM, BN = s.tileN, BK = s.tileK, WN = s.threadN, T = s.workgroupSize;
  int64_t WX = BN / WN, ST = gemmMmaStages(shape, BM, BN, s.vector, p.transposed), stage = (BM + BN) * BK;
  int32_t tiles = b.shared("tiles", kir::mmaOperand(op), ST * stage);
  perWorkgroup(b, {p}, BM, BN, g.splits, [&](size_t, V bi, V r0, V c0, V split) {
    auto [aBase, bBase, oBase, kLo, kHi] = gemmPart(b, g, bi, split);
    V tid = b.local();
    V group = divBy(b, tid, 128);
    V wm = divBy(b, group, WX), wn = remBy(b, group, WX);
    std::vector<int32_t> acc;
    for (int64_t i = 0; i < WN / 2; ++i) acc.push_back(b.var(Scalar::F32, b.f32(0)));
    // Step k0's copies into stage st, as one group: run e of a tile (16
    // bytes, 8 keys) is row e / 8, keys from (e % 8) * 8.
    auto issue = [&](V st, V k0) {
      for (int64_t part = 0; part < 2; ++part) {
        int64_t rows = part == 0 ? BM : BN, runs = rows * BK / 8;
        for (int64_t e0 = 0; e0 < runs; e0 += T) {
          V e = b.add(tid, b.i32(e0));
          auto copy = [&] {
            V row = divBy(b, e, 8), j = remBy(b, e, 8);
            V key = b.add(k0, b.mul(j, b.i32(8)));
            V swizzled = b.add(b.mul(row, b.i32(64)), b.mul(b.binary(Opc::Xor, j, remBy(b, row, 8)), b.i32(8)));
            V at = b.add(b.mul(st, b.i32(stage)), b.add(b.i32(part * BM * BK), swizzled));
            V ok, src;
            if (part == 0) {
              V r = b.add(r0, row);
              ok = b.binary(Opc::And, b.lt(r, b.i32(p.m)), b.lt(key, kHi));
              src = b.add(aBase, b.add(b.mul(r, b.i32(p.k)), key));
            } else {
              V col = b.add(c0, row);
              ok = b.binary(Opc::And, b.lt(col, b.i32(p.n)), b.lt(key, kHi));
              src = p.bAt(b, bBase, key, col);
            }
            b.copyAsync(f->in[part], b.select(ok, src, b.i32(0)), tiles, at, ok);
          };
          if (e0 + T <= runs) copy();
          else b.ifThen(b.lt(e, b.i32(runs)), copy);
        }
      }
      b.asyncCommit();
    };
    V rowStride = b.i32(8 * BK);
    // The chain of stage st onto the accumulators `from`: its last MmaShared.
    auto chain = [&](V st, const std::vector<int32_t>& from) {
      V base = b.mul(st, b.i32(stage));
      V aAt = b.add(base, b.mul(wm, b.i32(64 * BK))), bAt = b.add(base, b.add(b.i32(BM * BK), b.mul(wn, b.i32(WN * BK))));
      V d = -1;
      for (int64_t ks = 0; ks < BK; ks += 16) {
        Builder::SharedTile at{b.add(aAt, b.i32(ks)), rowStride};
        Builder::SharedTile bt{b.add(bAt, b.i32(ks)), rowStride};
        if (d < 0) {
          std::vector<V> c;
          for (int32_t x : from) c.push_back(b.get(x));
          d = b.mmaShared(op, tiles, at, bt, c);
        } else {
          d = b.mmaShared(d, at, bt);
        }
      }
      return d;
    };
    if (ST < kGemmGroupWideStages) {
      pipelineSteps(b, kLo, kHi, BK, ST, issue, [&](V st) {
        std::vector<V> out = b.mmaWait(0, b.mmaResult(chain(st, acc)));
        for (size_t i = 0; i < acc.size(); ++i) b.set(acc[i], out[i]);
      });
    } else {
      // `run` holds the running chain's results, taken over step by step.
      std::vector<int32_t> run;
      for (size_t i = 0; i < acc.size(); ++i) run.push_back(b.var(Scalar::F32, b.f32(0)));
      for (int64_t st = 0; st + 2 < ST; ++st) issue(b.i32(st), b.add(kLo, b.i32(st * BK)));
      b.forRange(kLo, kHi, BK, [&](V k0) {
        V step = divBy(b, b.sub(k0, kLo), BK);
        b.asyncWait(ST - 3);
        b.barrier();
        std::vector<V> lanes = b.mmaResult(chain(remBy(b, step, ST), run));
        for (size_t i = 0; i < acc.size(); ++i) b.set(run[i], lanes[i]);
        issue(remBy(b, b.add(step, b.i32(ST - 2)), ST), b.add(k0, b.i32((ST - 2) * BK)));
        b.mmaWait(1, {});
      });
      std::vector<V> c;
      for (int32_t x : run) c.push_back(b.get(x));
      std::vector<V> out = b.mmaWait(0, c);
      b.asyncWait(0);
      for (size_t i = 0; i < acc.size(); ++i) b.set(acc[i], out[i]);
    }
    // Element e of the warpgroup's D (kir::mmaGroupC).
    V lane = remBy(b, tid, 128);
    V warp = divBy(b, lane, 32), gq = divBy(b, remBy(b, lane, 32), 4), t = remBy(b, lane, 4);
    V rowAt = b.add(r0, b.add(b.mul(wm, b.i32(64)), b.add(b.mul(warp, b.i32(16)), gq)));
    V colAt = b.add(c0, b.add(b.mul(wn, b.i32(WN)), b.mul(t, b.i32(2))));
    for (int64_t e = 0; e < WN / 2; ++e) {
      kir::RowCol rc = kir::mmaGroupC(0, int(e));
      V row = b.add(rowAt, b.i32(rc.row)), col = b.add(colAt, b.i32(rc.col));
      b.ifThen(b.binary(Opc::And, b.lt(row, b.i32(p.m)), b.lt(col, b.i32(p.n))), [&] {
        b.store(f->out[0], b.add(oBase, b.add(b.mul(row, b.i32(p.n)), col)), b.get(acc[size_t(e)]));
      });
    }
  });
  return b.finish();
}

}  // namespace

// A split product's sum: thread id adds element id of every chunk's
// partials, chunk 0 first, and stores it. A product group's results follow
// one another, each with its chunks' partials (chunk-major) in the scratch.
Expected<kir::Kernel> genMatMulCombine(const GenInput& in) {
  const KernelRequest& r = in.request;
  int64_t S = r.schedule.splits, total = 0;
  for (const Type& t : r.results) total += numel(t.shape);
  if (auto s = checkIndexWidth(in, S * total); !s) return s.error();
  Builder b(in.entry, r.schedule.workgroupSize, in.grid[0]);
  int32_t scratch = b.buffer("scratch", DType::F32, S * total, false);
  std::vector<int32_t> outs;
  for (size_t p = 0; p < r.results.size(); ++p)
    outs.push_back(b.buffer("result" + std::to_string(p), r.results[p].dtype, numel(r.results[p].shape), true));
  perThread(b, r.schedule.workgroupSize, total, [&](V id) {
    int64_t at = 0;
    for (size_t p = 0; p < outs.size(); ++p) {
      int64_t count = numel(r.results[p].shape);
      auto sum = [&] {
        V i = at ? b.sub(id, b.i32(at)) : id, base = b.add(i, b.i32(S * at));
        int32_t acc = b.var(Scalar::F32, b.load(scratch, base));
        for (int64_t c = 1; c < S; ++c) b.set(acc, b.add(b.get(acc), b.load(scratch, b.add(base, b.i32(c * count)))));
        b.store(outs[p], i, b.get(acc));
      };
      if (outs.size() == 1) sum();
      else b.ifThen(b.binary(Opc::And, b.ge(id, b.i32(at)), b.lt(id, b.i32(at + count))), sum);
      at += count;
    }
  });
  return b.finish();
}

Expected<kir::Kernel> genGemv(const GenInput& in) { return gemvKernel(in); }

Expected<kir::Kernel> genGemm(const GenInput& in) {
  auto g = openGemm(in);
  if (!g) return g.error();
  return gemmKernel(in, *g);
}

// A warpgroup's op (128 threads) takes its own kernel; a warp's or a wave's
// the fragments of gemmMmaKernel.
Expected<kir::Kernel> genGemmMma(const GenInput& in) {
  auto g = openGemm(in);
  if (!g) return g.error();
  if (matrixShape(*matrixOpNamed(in.request.schedule.matrix)).threads == 128) return gemmGroupKernel(in, *g);
  return gemmMmaKernel(in, *g);
}

}  // namespace poot

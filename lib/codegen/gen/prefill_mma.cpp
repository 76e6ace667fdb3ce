// How the tensor-core prefill schedule ("prefill-mma", schedule.h) is
// written. The workgroups, rows and key range are the SIMT prefill's
// (prefill.cpp): workgroup (batch row b, KV head g, block of Mq = tileM /
// n_rep positions) owns tileM rows, row rr being head g * n_rep + rr % n_rep
// at position rr / n_rep (rows past the block's are computed on a clamped
// row and never stored), and it walks the keys any of its rows can see in
// tiles of tileN. Here warp w owns rows 16w .. 16w + 15 and does all their
// arithmetic in the schedule's matrix op's fragments (kir.h): lane (g =
// lane / 4, t = lane % 4) holds the scores and output of rows 16w + g and
// 16w + g + 8, at keys (columns) 8j + 2t and 8j + 2t + 1 of each slice j of 8.
//
// On m16n8k8.tf32 each f32 product goes through the tf32 multiplier as
// three: x = X + x' with X = tf32(x) and x' = tf32(x - X) (x - X is exact,
// tf32 truncates), and a * b ~ A * B' + A' * B + A * B (the small products
// first). What is dropped (A' * B' and the bits past X + x') is under
// 3 * 2^-20 of |a * b|, and the multiplier's sums round as f32 does, so a
// score or output over n products stays within (3 * 2^-20 + n * 2^-22) of
// the sum of their magnitudes: about what f32 fused multiply-adds keep.
// Where q, k and v are bf16 or f16, tf32 holds them exactly (x' = 0): a
// score is one product, A * B, exact, and an output two, A * B + A' * B
// (the weights are f32).
// On the two-byte ops (m16n8k16.bf16 and .f16, q, k and v all of that
// dtype) the tiles hold the values as they are and a step takes 16 key dims
// or 16 keys: a score is the exact products summed in f32, and each weight
// w enters the value product as head h = dtype(w) and remainder dtype(w -
// h), two products (the remainders' first), so within 2^-16 of w (bf16).
//
// Workgroup memory (schedule.h, prefillMmaLayout): the q tile (row-major,
// the key width padded to whole steps of the op's k with zeros; on a tile
// with a non-finite value it holds the weights for a while), the key tile
// (row-major, padded likewise), the value tile (row-major; on the two-byte
// ops a row a pair of keys, their elements of a column side by side) and
// two flag words. A key past the bound is read
// at the last key in it and scores -inf. Each tile:
//  1. the key tile loaded and stored; barrier;
//  2. each warp's 16 x tileN scores: for each step of 8 key dims, its q
//     fragment and every slice's key fragment (split), three Mmas a
//     slice (two-byte: steps of 16, one Mma a slice); scale, softcap and mask (maskedScore); the rows'
//     maxima over the lane's 16 keys, then over the 4 lanes sharing the row
//     (ShuffleXor 1 and 2, so the 4 agree exactly); the rescale of the
//     running output and denominator share, and the weights exp(s - m)
//     (-0.0 for a -inf score, which no exp gives) kept in registers;
//  3. the value tile loaded and stored, its loaders raising the tile's flag
//     on a non-finite element; barrier;
//  4. output += weights x values: the score fragment of slice j is the A
//     fragment of 8 keys taken in the order 2t, 2t + 1 (k-index t stands for
//     key 8j + 2t, t + 4 for key 8j + 2t + 1, and the value fragment is read
//     at the same keys), so the weights never leave the registers (on the
//     two-byte ops slices 2i and 2i + 1 are the A fragment of 16 keys,
//     keys 2t, 2t + 1, 2t + 8, 2t + 9 of it in their k-index order). A -inf
//     key's value must not be used (the oracle never reads it), so where the
//     tile's flag is up the warps instead spill their weights over the q
//     tile (barrier), each lane adds its outputs' weight * value one key at
//     a time with 0 in place of the value where the weight is -0.0, and
//     after a barrier q is staged again; with finite values a -0.0 weight
//     adds nothing.
// Two barriers a tile suffice: the key tile is rewritten after step 3's
// barrier (every warp is past its scores), the value tile after the next
// tile's step 1 barrier (every warp is past its gather). Tile n's flag is
// word n % 2, cleared after step 1 of tile n - 1, when every warp has read
// its last use.
// At the end the 4 lanes of a row add their denominator shares and each
// output is o / l (0 / 0 = NaN for a row that saw no key, as the oracle).
// One difference from the SIMT schedules: an infinite f32 q or key element
// of a visible key makes its score NaN here (a remainder of inf - inf),
// where f32 arithmetic gives +-inf; finite inputs score as f32 does, to the
// bound above. Two-byte inputs have no remainder and score as f32 does.
//
// On a warpgroup's op (m64nNk16, schedule.h) the workgroup is two
// warpgroups of 64 rows (warp w still owns rows 16w .. 16w + 15, and the
// fragments above are the warpgroup product's accumulators as kir.h lays
// them out), the tiles one swizzled array with two stages of keys and
// values. Each tile: the tile's copies waited for, barrier, the next tile's
// copies issued into the other stage; step 2 as one mma.shared chain (q as
// A, the keys as B), the value runs read back for the flag while it runs;
// step 4 as one mma.shared.b chain (the weights' remainders and heads as A
// from registers, the value tile N-major as B). A tile every row sees whole
// skips the per-key mask and bound (any schedule here).
#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <vector>

#include "codegen/gen/attention_form.h"
#include "plan/schedule.h"

namespace poot::attn {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The scores' steps of 8 key dims written out this many times a loop step.
constexpr int64_t kUnrollSteps = 2;

// A fragment's elements split into tf32 heads and remainders; an exact
// fragment (values widened from bf16 or f16, which tf32 holds exactly) is
// its own head and has no remainder.
template <size_t N>
struct Split {
  std::array<V, N> head, rest;
  bool exact = false;
};

template <size_t N>
Split<N> split(Builder& b, const std::array<V, N>& x, bool exact) {
  Split<N> s;
  s.exact = exact;
  for (size_t i = 0; i < N; ++i) {
    s.head[i] = exact ? x[i] : b.toTf32(x[i]);
    if (!exact) s.rest[i] = b.toTf32(b.sub(x[i], s.head[i]));
  }
  return s;
}

// acc + a * x as three tf32 products, the small ones first, less the ones
// with an exact operand's remainder (zero): one product for two exact
// fragments, two for one.
std::array<V, 4> mma3(Builder& b, const Split<4>& a, const Split<2>& x, std::array<V, 4> acc) {
  auto mma = [&](const std::array<V, 4>& p, const std::array<V, 2>& q) {
    acc = b.mma(MatrixOp::M16N8K8Tf32, {p.begin(), p.end()}, {q.begin(), q.end()}, acc);
  };
  if (!x.exact) mma(a.head, x.rest);
  if (!a.exact) mma(a.rest, x.head);
  mma(a.head, x.head);
  return acc;
}

}  // namespace

kir::Kernel prefillMmaKernel(const GenInput& in, const Form& f) {
  const KernelRequest& r = in.request;
  const Schedule& s = r.schedule;
  const MatrixOp op = *matrixOpNamed(s.matrix);
  // k16: the two-byte ops, q, k and v staged and multiplied as the dtype
  // they are; else tf32 on f32 tiles. group: a warpgroup's op, the tiles one
  // swizzled array (schedule.h) and the products wgmma chains.
  const bool k16 = matrixShape(op).k == 16, group = matrixShape(op).threads == 128;
  const kir::Scalar tt = k16 ? kir::mmaOperand(op) : kir::Scalar::F32;
  const int64_t BM = s.tileM, BN = s.tileN, W = s.vector, T = s.workgroupSize, RW = s.threadM;
  const int64_t Mq = BM / f.nrep, blocks = ceilDiv(f.Lq, Mq), count = f.B * f.Hkv * blocks;
  const PrefillMmaLayout lay = prefillMmaLayout(s, f.Dk, f.Dv);
  const int64_t DKS = lay.dkStep, KSTEP = k16 ? 16 : 8, NS = BN / 8, NV = ceilDiv(f.Dv, 8), KS = DKS / KSTEP;
  // tf32 only: q, k and v all bf16 or f16, their fragments exact in tf32.
  const bool twoByte = std::all_of(r.operands.begin(), r.operands.begin() + 3, [](const Type& t) {
    return t.dtype == DType::BF16 || t.dtype == DType::F16;
  });
  Builder b(in.entry, T, in.grid[0]);
  declareOperands(b, r, f);
  int32_t out = b.buffer("out", r.results[0].dtype, f.B * f.Hq * f.Lq * f.Dv, true);
  int32_t qs, ks, vs;
  if (group) {
    qs = ks = vs = b.shared("q_weights_k_v_tiles", tt, lay.tileElems);
  } else {
    qs = b.shared("q_tile_or_weights", tt, BM * std::max(lay.qStride, lay.pStride));
    ks = b.shared("k_tile", tt, BN * lay.kStride);
    vs = b.shared("v_tile", tt, (k16 ? BN / 2 : BN) * lay.vStride);
  }
  int32_t flag = b.shared("nonfinite_values", kir::Scalar::F32, 4);
  // Element (r, col) of a swizzled tile of `rows` rows from `first`
  // (schedule.h): column block col / 64, row r, the 16-byte run (col % 64)
  // / 8 moved to run ((col % 64) / 8) ^ (r % 8) (kir.h's 128-byte swizzle).
  auto swizzled = [&](int64_t first, int64_t rows, V r, V col) {
    V block = b.mul(b.div(col, b.i32(64)), b.i32(rows * 64));
    V inRow = b.binary(kir::Opc::Xor, b.rem(col, b.i32(64)), b.mul(b.rem(r, b.i32(8)), b.i32(8)));
    return b.add(b.add(b.i32(first), block), b.add(b.mul(r, b.i32(64)), inRow));
  };
  // Where q's (row, col) and a key's (key, col) are staged.
  auto qPlace = [&](V r, V col) { return group ? swizzled(0, BM, r, col) : b.add(b.mul(r, b.i32(lay.qStride)), col); };
  auto kPlace = [&](V key, V col) {
    return group ? swizzled(lay.kAt, BN, key, col) : b.add(b.mul(key, b.i32(lay.kStride)), col);
  };
  const V zero = b.convert(b.f32(0), tt);
  // Runs of the operands as the tiles keep them.
  auto loadRun = [&](int32_t buffer, V at, int64_t w) {
    return k16 ? b.loadVecStored(buffer, at, w) : b.loadVec(buffer, at, w);
  };
  V wg = b.workgroupId(), tid = b.local();
  b.ifThen(b.lt(wg, b.i32(count)), [&] {
    PrefillBlock pb = prefillBlock(b, f, wg, Mq);
    V bi = pb.bi, g = pb.g, lo = pb.lo, hi = pb.hi, last = pb.last;
    V warp = b.div(tid, b.i32(32)), lane = b.rem(tid, b.i32(32));
    V gq = b.div(lane, b.i32(4)), tq = b.rem(lane, b.i32(4));
    V row0 = b.add(b.mul(warp, b.i32(RW)), gq);
    const std::array<V, 2> rows{row0, b.add(row0, b.i32(8))};
    // Where the lane's fragment reads start; each read is one of these plus
    // a constant (so the address is one register and an offset, not a
    // register of its own that the compiler would keep for the whole loop).
    // tf32: q at its rows and column t, keys at key g and column t, values
    // at key 2t and column g; two-byte: q at its rows and column 2t, keys at
    // key g and column 2t, values at the pair of keys t (keys 2t and 2t + 1)
    // and column g. The spilled weights at its rows and key 2t.
    V lanesCol = k16 ? b.mul(tq, b.i32(2)) : tq;
    const std::array<V, 2> qBase{b.add(b.mul(rows[0], b.i32(lay.qStride)), lanesCol),
                                 b.add(b.mul(rows[1], b.i32(lay.qStride)), lanesCol)};
    V kBase = b.add(b.mul(gq, b.i32(lay.kStride)), lanesCol);
    V vBase = k16 ? b.add(b.mul(tq, b.i32(lay.vStride)), b.mul(gq, b.i32(2)))
                  : b.add(b.mul(tq, b.i32(2 * lay.vStride)), gq);
    // A spilled weight is ws elements: f32, or two-byte head and remainder.
    const int64_t ws = k16 ? 2 : 1;
    const std::array<V, 2> pBase{b.add(b.mul(rows[0], b.i32(lay.pStride)), b.mul(tq, b.i32(2 * ws))),
                                 b.add(b.mul(rows[1], b.i32(lay.pStride)), b.mul(tq, b.i32(2 * ws)))};

    // Zeros in columns Dk .. DKS of `rowsOf` rows of an array.
    auto zeroPad = [&](int32_t array, int64_t rowsOf, const std::function<V(V, V)>& at) {
      const int64_t pad = DKS - f.Dk;
      for (int64_t e0 = 0; e0 < rowsOf * pad; e0 += T) {
        V e = b.add(tid, b.i32(e0));
        b.ifThen(b.lt(e, b.i32(rowsOf * pad)),
                 [&] { b.sharedStore(array, at(b.div(e, b.i32(pad)), b.add(b.i32(f.Dk), b.rem(e, b.i32(pad)))), zero); });
      }
    };
    // The q tile, row-major (run e of W elements is run e % (Dk / W) of row
    // e / (Dk / W)), its padding columns zero: at the start, and again
    // after a tile's weights were spilled over it.
    auto stageQ = [&] {
      const int64_t qRuns = f.Dk / W;
      for (int64_t e0 = 0; e0 < BM * qRuns; e0 += T) {
        V e = b.add(tid, b.i32(e0));
        b.ifThen(b.lt(e, b.i32(BM * qRuns)), [&] {
          V rr = b.div(e, b.i32(qRuns)), d = b.mul(b.rem(e, b.i32(qRuns)), b.i32(W));
          std::vector<V> x = loadRun(f.q, b.add(b.mul(pb.resultRow(b, rr), b.i32(f.Dk)), d), W);
          b.sharedStoreVec(qs, qPlace(rr, d), x);
        });
      }
      if (DKS > f.Dk) zeroPad(qs, BM, qPlace);
    };
    stageQ();
    if (DKS > f.Dk) {  // the copies write columns 0 .. Dk only
      zeroPad(ks, BN, kPlace);
      if (group) zeroPad(ks, BN, [&](V key, V col) { return b.add(kPlace(key, col), b.i32(lay.stageElems)); });
    }

    // The key and value tiles: each thread moves runs tid, tid + T, ... of
    // each segment (k, then k_shared, then v), run e being run e % per of key
    // e / per (a key past the bound is read at the last key in it); on the
    // two-byte ops a value run is one of the pair of keys e / per, both keys'
    // runs, their elements interleaved.
    const std::vector<TileSegment> segs = tileSegments(f);
    struct Run {
      size_t seg;
      V key, at, active;  // tile key (two-byte values: pair); element offset in the segment's row; whether the run exists
    };
    std::vector<Run> runs;
    for (size_t si = 0; si < segs.size(); ++si) {
      int64_t per = segs[si].width / W, total = (k16 && !group && segs[si].value ? BN / 2 : BN) * per;
      for (int64_t e0 = 0; e0 < total; e0 += T) {
        V e = b.add(tid, b.i32(e0));
        runs.push_back(Run{si, b.div(e, b.i32(per)), b.mul(b.rem(e, b.i32(per)), b.i32(W)),
                           e0 + T <= total ? b.boolean(true) : b.lt(e, b.i32(total))});
      }
    }
    // Where a run of the value tile is staged (on a warpgroup's op, in the
    // stage at element `stage`).
    auto vPlace = [&](const Run& run, V col, V stage) {
      return group ? b.add(swizzled(lay.vAt, BN, run.key, col), stage) : b.add(b.mul(run.key, b.i32(lay.vStride)), col);
    };
    // Raises flag word `flagAt` where one of x (a value run) is not finite:
    // then their sum is not either (it may also overflow, which only sends a
    // tile of finite values down the exact path).
    auto flagNonFinite = [&](const std::vector<V>& x, V flagAt) {
      V sum = b.convert(x[0], kir::Scalar::F32);
      for (size_t i = 1; i < x.size(); ++i) sum = b.add(sum, b.convert(x[i], kir::Scalar::F32));
      b.ifThen(b.ne(b.sub(sum, sum), b.f32(0)), [&] { b.sharedStore(flag, flagAt, b.f32(1)); });
    };
    // On a warpgroup's op: tile t0's keys and values copied asynchronously
    // into the stage at element `stage`, one group; and the value runs read
    // back from it, flagged where one is not finite.
    auto copyTile = [&](V t0, V stage) {
      for (const Run& run : runs) {
        const TileSegment& sg = segs[run.seg];
        b.ifThen(run.active, [&] {
          V t = b.min(b.add(t0, run.key), last), col = b.add(run.at, b.i32(sg.offset));
          V at = sg.value ? vPlace(run, col, stage) : b.add(kPlace(run.key, col), stage);
          b.copyAsync(sg.buffer, b.add(segmentRow(b, f, sg, bi, g, t), run.at), ks, at, b.boolean(true));
        });
      }
      b.asyncCommit();
    };
    auto checkValues = [&](V stage, V flagAt) {
      for (const Run& run : runs)
        if (segs[run.seg].value)
          b.ifThen(run.active, [&] {
            V col = b.add(run.at, b.i32(segs[run.seg].offset));
            flagNonFinite(b.sharedLoadVec(vs, vPlace(run, col, stage), W), flagAt);
          });
    };
    // On a warp's op: tile t0's keys (values false) or values (true) into
    // their array; a value run with a non-finite element raises flag word
    // `flagAt`.
    auto stage = [&](V t0, bool values, V flagAt) {
      for (const Run& run : runs) {
        const TileSegment& sg = segs[run.seg];
        if (sg.value != values) continue;
        b.ifThen(run.active, [&] {
          std::vector<V> x;
          V at;
          if (k16 && values) {
            V t = b.add(t0, b.mul(run.key, b.i32(2)));
            std::vector<V> even = loadRun(sg.buffer, b.add(segmentRow(b, f, sg, bi, g, b.min(t, last)), run.at), W);
            std::vector<V> odd =
                loadRun(sg.buffer, b.add(segmentRow(b, f, sg, bi, g, b.min(b.add(t, b.i32(1)), last)), run.at), W);
            for (int64_t c = 0; c < W; ++c) x.insert(x.end(), {even[size_t(c)], odd[size_t(c)]});
            at = b.add(b.mul(run.key, b.i32(lay.vStride)), b.mul(run.at, b.i32(2)));
          } else {
            V t = b.min(b.add(t0, run.key), last);
            x = loadRun(sg.buffer, b.add(segmentRow(b, f, sg, bi, g, t), run.at), W);
            V col = b.add(run.at, b.i32(sg.offset));
            at = sg.value ? vPlace(run, col, b.i32(0)) : kPlace(run.key, col);
          }
          for (size_t c = 0; c < x.size(); c += 8)
            b.sharedStoreVec(values ? vs : ks, b.add(at, b.i32(int64_t(c))),
                             {x.begin() + ptrdiff_t(c), x.begin() + ptrdiff_t(std::min(x.size(), c + 8))});
          if (values) flagNonFinite(x, flagAt);
        });
      }
    };

    // The lane's two rows: masks, running maxima and denominator shares; its
    // output fragments, slice n of 8 value columns each.
    std::array<MaskRow, 2> masks{};
    std::array<int32_t, 2> mv{}, lv{};
    for (size_t i = 0; i < 2; ++i) {
      if (f.masked || f.causal)
        masks[i] = maskRow(b, f, bi, pb.head(b, rows[i]), b.min(pb.pos(b, rows[i]), b.i32(f.Lq - 1)));
      mv[i] = b.var(kir::Scalar::F32, b.f32(-kInf));
      lv[i] = b.var(kir::Scalar::F32, b.f32(0));
    }
    std::vector<FragmentVars> ov(static_cast<size_t>(NV));
    for (auto& o : ov) o = zeroFragment(b);
    std::vector<FragmentVars> acc(group ? 0 : static_cast<size_t>(NS));
    for (auto& a : acc) a = zeroFragment(b);

    // A whole tile's weights (no additive mask), row i's key 2t + e of
    // slice j in weights[i][j * 2 + e].
    std::array<std::vector<int32_t>, 2> weights;
    if (!f.masked)
      for (auto& w : weights)
        for (int64_t k = 0; k < 2 * NS; ++k) w.push_back(b.var(kir::Scalar::F32, b.f32(0)));

    // The non-finite flag of tile number n is word n % 2: cleared a tile
    // ahead, once every warp has read the word's last use.
    b.ifThen(b.lt(tid, b.i32(2)), [&] { b.sharedStore(flag, tid, b.f32(0)); });
    // On a warpgroup's op tile n is copied into stage n % 2 while tile n - 1
    // is computed: the first before the loop.
    if (group) copyTile(lo, b.i32(0));
    b.forRange(lo, hi, BN, [&](V t0) {
      V parity = b.rem(b.div(b.sub(t0, lo), b.i32(BN)), b.i32(2));
      V here = group ? b.mul(parity, b.i32(lay.stageElems)) : b.i32(0);  // the tile's stage
      // 1. The key tile (every warp has read the last one's values, and
      // with them its keys, at the barrier that ended it). On a warpgroup's
      // op the tile's copies are waited for, and after the barrier (every
      // warp past the last tile, which read the other stage) the next tile's
      // are issued.
      if (group) {
        b.asyncWait(0);
      } else {
        stage(t0, false, parity);
      }
      b.barrier();
      b.ifThen(b.eq(tid, b.i32(0)), [&] { b.sharedStore(flag, b.sub(b.i32(1), parity), b.f32(0)); });
      if (group)
        b.ifThen(b.lt(b.add(t0, b.i32(BN)), hi),
                 [&] { copyTile(b.add(t0, b.i32(BN)), b.sub(b.i32(lay.stageElems), here)); });
      // 2. Scores, slice j of 8 keys at a time (on a warpgroup's op one
      // chain over the key width, warpgroup w's A rows 64w .. 64w + 63 of the
      // q tile, B the key tile; the value tile staged while it runs).
      std::vector<V> chained;  // its D: slice j's element 2i + e at 4j + 2i + e
      if (group) {
        V rowsOf = b.mul(b.div(tid, b.i32(128)), b.i32(8 * 512)), stride = b.i32(512);
        V link = -1;
        for (int64_t st = 0; st < KS; ++st) {
          const int64_t d = st * 16, col = d % 64;
          Builder::SharedTile at{b.add(rowsOf, b.i32((d / 64) * BM * 64 + col)), stride};
          Builder::SharedTile bt{b.add(here, b.i32(lay.kAt + (d / 64) * BN * 64 + col)), stride};
          link = st == 0 ? b.mmaShared(op, qs, at, bt, std::vector<V>(size_t(BN / 2), b.f32(0)))
                         : b.mmaShared(link, at, bt);
        }
        std::vector<V> d = b.mmaResult(link);
        checkValues(here, parity);
        chained = b.mmaWait(0, d);
      }
      if (!group) {
        for (auto& a : acc)
          for (int32_t x : a) b.set(x, b.f32(0));
        b.forUnrolled(KS, kUnrollSteps, [&](V step) {
          V d = b.mul(step, b.i32(KSTEP));
          V kAt = b.add(kBase, d);
          if (k16) {
            // A's pairs (kir.h): rows g and g + 8 at columns 2t, then 2t + 8;
            // B's: key 8j + g at columns 2t and 2t + 8.
            auto pair = [&](int32_t array, V at, int64_t plus) { return b.sharedLoadVec(array, b.add(at, b.i32(plus)), 2); };
            std::vector<V> qa;
            for (auto [i, plus] : {std::pair{0, 0}, {1, 0}, {0, 8}, {1, 8}}) {
              std::vector<V> x = pair(qs, b.add(qBase[size_t(i)], d), plus);
              qa.insert(qa.end(), x.begin(), x.end());
            }
            for (int64_t j = 0; j < NS; ++j) {
              int64_t at = 8 * j * lay.kStride;
              std::vector<V> kb = pair(ks, kAt, at), hi8 = pair(ks, kAt, at + 8);
              kb.insert(kb.end(), hi8.begin(), hi8.end());
              setFragment(b, acc[size_t(j)], b.mma(op, qa, kb, getFragment(b, acc[size_t(j)])));
            }
            return;
          }
          auto qAt = [&](size_t i, int64_t plus) { return b.sharedLoad(qs, b.add(b.add(qBase[i], d), b.i32(plus))); };
          Split<4> qa = split<4>(b, {qAt(0, 0), qAt(1, 0), qAt(0, 4), qAt(1, 4)}, twoByte);
          for (int64_t j = 0; j < NS; ++j) {
            int64_t at = 8 * j * lay.kStride;
            Split<2> kb = split<2>(
                b, {b.sharedLoad(ks, b.add(kAt, b.i32(at))), b.sharedLoad(ks, b.add(kAt, b.i32(at + 4)))}, twoByte);
            setFragment(b, acc[size_t(j)], mma3(b, qa, kb, getFragment(b, acc[size_t(j)])));
          }
        });
      }
      // The weights of row i, slice j, key 2t + e: p[i][j * 2 + e]; the
      // mask and the bound applied key by key unless `whole`.
      auto weigh = [&](bool whole, std::array<std::vector<V>, 2>& p) {
        for (size_t i = 0; i < 2; ++i) {
          std::vector<V> sc;
          V most = b.f32(-kInf);
          for (int64_t j = 0; j < NS; ++j)
            for (int64_t e = 0; e < 2; ++e) {
              V x = group ? chained[size_t(4 * j) + i * 2 + size_t(e)] : b.get(acc[size_t(j)][i * 2 + size_t(e)]);
              x = transformScore(b, r, x);
              if (!whole) {
                V t = b.add(t0, b.add(b.mul(tq, b.i32(2)), b.i32(8 * j + e)));
                if (f.masked || f.causal) x = maskedScore(b, f, masks[i], x, b.min(t, last));
                x = b.select(b.lt(t, hi), x, b.f32(-kInf));
              }
              sc.push_back(x);
              most = b.max(most, x);
            }
          V rescale = softmaxStep(b, most, sc, mv[i], lv[i], -0.0, p[i]);
          for (auto& o : ov)
            for (size_t e = 0; e < 2; ++e) b.set(o[i * 2 + e], b.mul(b.get(o[i * 2 + e]), rescale));
        }
      };
      // Without an additive mask, a tile that every row sees whole (inside
      // the bound and every row's causal range: most of a long prefill's)
      // takes its scores as they are, its weights through variables.
      std::array<std::vector<V>, 2> p;
      if (f.masked) {
        weigh(false, p);
      } else {
        auto into = [&](bool whole) {
          std::array<std::vector<V>, 2> q;
          weigh(whole, q);
          for (size_t i = 0; i < 2; ++i)
            for (size_t k = 0; k < q[i].size(); ++k) b.set(weights[i][k], q[i][k]);
        };
        V whole = b.binary(kir::Opc::And, b.ge(t0, pb.allLo), b.le(b.add(t0, b.i32(BN)), pb.allHi));
        b.ifElse(whole, [&] { into(true); }, [&] { into(false); });
        for (size_t i = 0; i < 2; ++i)
          for (int32_t w : weights[i]) p[i].push_back(b.get(w));
      }
      // 3. The value tile, flagged where one is not finite.
      if (!group) stage(t0, true, parity);
      b.barrier();
      V nonfinite = b.ne(b.sharedLoad(flag, parity), b.f32(0));
      // 4. weights x values.
      b.ifElse(
          nonfinite,
          [&] {
            for (size_t i = 0; i < 2; ++i)
              for (int64_t j = 0; j < NS; ++j)
                for (int64_t e = 0; e < 2; ++e) {
                  V at = b.add(pBase[i], b.i32(ws * (8 * j + e))), w = p[i][size_t(j * 2 + e)];
                  if (!k16) {
                    b.sharedStore(qs, at, w);
                    continue;
                  }
                  auto [h, rest] = headAndRest(b, w, tt);
                  b.sharedStore(qs, at, h);
                  b.sharedStore(qs, b.add(at, b.i32(1)), rest);
                }
            b.barrier();
            // Key k's weight of row i, at pBase[i] - ws (2t - k) (a dropped
            // key's head is -0.0); value column 2t + 8n + e of key k, at
            // k * vStride + 2t + 8n + e (two-byte: at (k / 2) * vStride +
            // k % 2 + 2 (2t + 8n + e)).
            b.forRange(b.i32(0), b.i32(BN), 1, [&](V key) {
              auto valueAt = [&](V col) {
                if (group) return b.add(here, swizzled(lay.vAt, BN, key, col));
                if (!k16) return b.add(b.mul(key, b.i32(lay.vStride)), col);
                V pair = b.add(b.mul(b.div(key, b.i32(2)), b.i32(lay.vStride)), b.rem(key, b.i32(2)));
                return b.add(pair, b.mul(col, b.i32(2)));
              };
              for (size_t i = 0; i < 2; ++i) {
                V at = b.add(b.sub(pBase[i], b.mul(tq, b.i32(2 * ws))), b.mul(key, b.i32(ws)));
                V w = b.convert(b.sharedLoad(qs, at), kir::Scalar::F32);
                V dropped = b.eq(b.bitcast(w, kir::Scalar::I32), b.i32(INT32_MIN));
                if (k16) w = b.add(w, b.convert(b.sharedLoad(qs, b.add(at, b.i32(1))), kir::Scalar::F32));
                for (int64_t n = 0; n < NV; ++n)
                  for (int64_t e = 0; e < 2; ++e) {
                    V col = b.add(b.mul(tq, b.i32(2)), b.i32(8 * n + e));
                    V v = b.convert(b.sharedLoad(vs, valueAt(col)), kir::Scalar::F32);
                    v = b.select(dropped, b.f32(0), v);
                    int32_t o = ov[size_t(n)][i * 2 + size_t(e)];
                    b.set(o, b.fma(w, v, b.get(o)));
                  }
              }
            });
            b.barrier();
            stageQ();
          },
          [&] {
            if (group) {
              // One chain over the tile's keys, 16 at a time: A the weights'
              // remainders, then their heads, as below; B the value tile's
              // keys 16jj .. 16jj + 15 (N-major: a row a key); C the output.
              std::vector<std::array<std::vector<V>, 2>> parts(size_t(NS / 2));
              for (int64_t jj = 0; jj < NS / 2; ++jj)
                for (size_t e = 0; e < 8; ++e) {
                  size_t row = (e / 2) % 2, key = size_t(4 * jj) + e % 2 + 2 * (e / 4);
                  auto [h, rest] = headAndRest(b, p[row][key], tt);
                  parts[size_t(jj)][0].push_back(rest);
                  parts[size_t(jj)][1].push_back(h);
                }
              std::vector<V> c;
              for (const FragmentVars& o : ov)
                for (int32_t x : o) c.push_back(b.get(x));
              V link = -1;
              for (int64_t jj = 0; jj < NS / 2; ++jj)
                for (const std::vector<V>& a : parts[size_t(jj)]) {
                  Builder::NMajorTile bt{b.add(here, b.i32(lay.vAt + jj * 1024)), b.i32(512), b.i32(BN * 64)};
                  link = link < 0 ? b.mmaSharedB(op, vs, a, bt, c) : b.mmaSharedB(link, a, bt);
                }
              std::vector<V> o = b.mmaWait(0, b.mmaResult(link));
              for (size_t n = 0; n < ov.size(); ++n)
                for (size_t e = 0; e < 4; ++e) b.set(ov[n][e], o[4 * n + e]);
              return;
            }
            if (k16) {
              // Keys 16jj .. 16jj + 15 at once: the A fragment's pairs
              // (kir.h) are rows g and g + 8 at keys 2t, 2t + 1 (slice 2jj's
              // weights), then at keys 2t + 8, 2t + 9 (slice 2jj + 1's); the
              // value fragment's pairs are keys 2t, 2t + 1 and 2t + 8, 2t + 9
              // of column 8n + g, one word each in the pair rows. Two
              // products a fragment: the weights' remainders, then their
              // heads.
              for (int64_t jj = 0; jj < NS / 2; ++jj) {
                std::vector<V> heads, rests;
                for (size_t e = 0; e < 8; ++e) {  // A's element e: p[row][4jj + key]
                  size_t row = (e / 2) % 2, key = size_t(4 * jj) + e % 2 + 2 * (e / 4);
                  auto [h, rest] = headAndRest(b, p[row][key], tt);
                  heads.push_back(h);
                  rests.push_back(rest);
                }
                for (int64_t n = 0; n < NV; ++n) {
                  V vAt = b.add(vBase, b.i32(8 * jj * lay.vStride + 16 * n));
                  std::vector<V> vb = b.sharedLoadVec(vs, vAt, 2),
                                 hi8 = b.sharedLoadVec(vs, b.add(vAt, b.i32(4 * lay.vStride)), 2);
                  vb.insert(vb.end(), hi8.begin(), hi8.end());
                  std::array<V, 4> o = b.mma(op, rests, vb, getFragment(b, ov[size_t(n)]));
                  setFragment(b, ov[size_t(n)], b.mma(op, heads, vb, o));
                }
              }
              return;
            }
            // Slice j's weights as the A fragment of keys 8j + 2t (k-index
            // t) and 8j + 2t + 1 (t + 4); the value fragment at those keys,
            // column 8n + g.
            for (int64_t j = 0; j < NS; ++j) {
              Split<4> pa = split<4>(
                  b, {p[0][size_t(j * 2)], p[1][size_t(j * 2)], p[0][size_t(j * 2 + 1)], p[1][size_t(j * 2 + 1)]}, false);
              for (int64_t n = 0; n < NV; ++n) {
                int64_t at = 8 * j * lay.vStride + 8 * n;
                Split<2> vb = split<2>(b,
                                       {b.sharedLoad(vs, b.add(vBase, b.i32(at))),
                                        b.sharedLoad(vs, b.add(vBase, b.i32(at + lay.vStride)))},
                                       twoByte);
                setFragment(b, ov[size_t(n)], mma3(b, pa, vb, getFragment(b, ov[size_t(n)])));
              }
            }
          });
    });
    if (group) b.asyncWait(0);  // the first tile's copies where the block has no key

    // The rows' denominators over their 4 lanes, then the outputs.
    for (size_t i = 0; i < 2; ++i) {
      V l = b.get(lv[i]);
      l = b.add(l, b.shuffleXor(l, 1));
      l = b.add(l, b.shuffleXor(l, 2));
      b.ifThen(pb.real(b, rows[i]), [&] {
        V at = b.mul(pb.resultRow(b, rows[i]), b.i32(f.Dv));
        for (int64_t n = 0; n < NV; ++n)
          for (int64_t e = 0; e < 2; ++e) {
            V col = b.add(b.mul(tq, b.i32(2)), b.i32(8 * n + e));
            auto put = [&] { b.store(out, b.add(at, col), b.div(b.get(ov[size_t(n)][i * 2 + size_t(e)]), l)); };
            if (8 * n + 8 <= f.Dv) put();
            else b.ifThen(b.lt(col, b.i32(f.Dv)), put);
          }
      });
    }
  });
  return b.finish();
}

}  // namespace poot::attn

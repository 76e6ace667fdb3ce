// How the tensor-core decode schedule ("decode-mma", schedule.h) is written.
// A workgroup (batch row b, KV head g[, split]) of W warps serves all Q =
// tileM query rows of g (row qi is head g * n_rep + qi / Lq, query row qi %
// Lq, as the SIMT decode numbers them) over its key range [lo, hi): the
// live range, a split's chunk of it, and under a causal mask (one query
// row, so every row of the head has the same position) only the keys it
// sees (visibleKeys). It walks the range in steps of W * KW keys (KW =
// tileK, a multiple of 16), warp w taking keys t0 + w KW .. t0 + (w + 1) KW
// - 1 of the step at t0, and keeps its own online softmax state in the op's
// fragments (kir.h): lane (g = lane / 4, t = lane % 4) holds rows g and g +
// 8 (rows Q .. 15 are zero q, never stored).
//
// No operand passes through workgroup memory: a fragment's k-index may
// stand for any key dim (for key) and any key (for value) as long as A and
// B agree, so each lane loads contiguous runs.
//  - Scores, per segment of w key dims (k, then k_shared): step i of 16
//    takes, in lane column t, the dims t * w / 4 + 4i + {0, 1, 2, 3} as the
//    k-indices 2t, 2t + 1, 2t + 8, 2t + 9 (A's and B's orders agree: kir.h).
//    So a lane reads dims t * w / 4 .. (t + 1) * w / 4 of its q rows once
//    (the A fragments, kept for the kernel) and of its KW / 8 keys a step
//    (B: key 8j + g of slice j); one product a step and slice, exact
//    products summed in f32.
//  - The values of the step's keys are loaded next (so every load of a step
//    is in flight together): column c of value slice n stands for value
//    dim c * Dv / 8 + n, so lane g reads dims g * Dv / 8 .. (g + 1) * Dv / 8
//    of its four keys of each block of 16 (16i + 2t, + 1, + 8, + 9). In a
//    step that crosses hi, the values of keys past it are replaced by 0
//    (they are read at hi - 1, a real key whose value may be anything; its
//    weight is 0, and 0 x inf would be NaN). A paged key's read word is
//    loaded a step ahead.
//  - Scale, softcap, and -inf past hi; each row's maximum over the KW keys
//    (the lane's, then ShuffleXor 1 and 2), the rescale, the weights exp(s -
//    m) (0 for a -inf score) and the lane's share of l.
//  - Output += weights x values, a block of 16 keys at a time: two score
//    slices are the A fragment (keys 2t, 2t + 1, 2t + 8, 2t + 9 in k order,
//    as the prefill-mma takes them), each weight a head and a remainder of
//    the dtype, two products a slice of 8 value columns.
// At the end the four lanes of a row add their l shares, each warp's state
// goes to workgroup memory and the warps fold as the SIMT decode's slices do
// (foldDecodeRows): to the output, or to the split's scratch slot.
//
// Every key a row drops is dropped by all rows of its head (the planner
// takes this schedule only then), so a -inf score comes from the mask or the
// bound alone, except where an infinite q or key element (or an overflowing
// dot) makes a visible key's score -inf: that key's value is then multiplied
// by weight 0, which gives NaN where the value is not finite, whereas the
// oracle leaves the value unread. This is the one difference from the SIMT
// decode, and no finite input reaches it.
#include <array>
#include <limits>
#include <vector>

#include "codegen/gen/attention_form.h"
#include "plan/schedule.h"

namespace poot::attn {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

kir::Kernel decodeMmaKernel(const GenInput& in, const Form& f) {
  const KernelRequest& r = in.request;
  const Schedule& s = r.schedule;
  const MatrixOp op = *matrixOpNamed(s.matrix);
  const kir::Scalar tt = kir::mmaOperand(op);
  const int64_t T = s.workgroupSize, NW = T / 32, W = s.vector, S = s.splits, Q = s.tileM, KW = s.tileK;
  const int64_t STEP = NW * KW, NV = f.Dv / 8, groups = f.B * f.Hkv, rows = f.B * f.Hq * f.Lq;
  Builder b(in.entry, T, in.grid[0]);
  declareOperands(b, r, f);
  int32_t out = S > 1 ? b.buffer("scratch", DType::F32, rows * S * (f.Dv + 2), true)
                      : b.buffer("out", r.results[0].dtype, rows * f.Dv, true);
  const DecodeFold fold = decodeFold(b, NW, Q, f.Dv);
  const V zero = b.convert(b.f32(0), tt);
  V wg = b.workgroupId(), tid = b.local();
  b.ifThen(b.lt(wg, b.i32(groups * S)), [&] {
    V grp = S > 1 ? b.div(wg, b.i32(S)) : wg, split = S > 1 ? b.rem(wg, b.i32(S)) : b.i32(0);
    V bi = b.div(grp, b.i32(f.Hkv)), g = b.rem(grp, b.i32(f.Hkv));
    V bound = keyBound(b, f, bi);
    KeyRange range{b.i32(0), bound};
    if (S > 1) range = splitChunk(b, split, S, bound, STEP);
    // Row qi of the head's Q: query head g * n_rep + qi / Lq, query row qi % Lq.
    auto headOf = [&](V qi) { return b.add(b.mul(g, b.i32(f.nrep)), b.div(qi, b.i32(f.Lq))); };
    auto queryRow = [&](V qi) {
      return b.add(b.mul(b.add(b.mul(bi, b.i32(f.Hq)), headOf(qi)), b.i32(f.Lq)), b.rem(qi, b.i32(f.Lq)));
    };
    if (f.causal) range = visibleKeys(b, f, maskRow(b, f, bi, headOf(b.i32(0)), b.i32(0)), range.lo, range.hi);
    const V lo = range.lo, hi = range.hi, last = b.max(b.sub(hi, b.i32(1)), b.i32(0));

    V warp = b.div(tid, b.i32(32)), lane = b.rem(tid, b.i32(32));
    V gq = b.div(lane, b.i32(4)), tq = b.rem(lane, b.i32(4));
    const std::array<V, 2> qrows{gq, b.add(gq, b.i32(8))};
    std::array<V, 2> real{};
    for (size_t h = 0; h < 2; ++h) real[h] = b.lt(qrows[h], b.i32(Q));

    // The key segments and each lane's run of them: dims t * w / 4 .. (t +
    // 1) * w / 4 of a w-wide segment.
    std::vector<TileSegment> keySegs = tileSegments(f);
    const TileSegment valueSeg = keySegs.back();
    keySegs.pop_back();
    auto quarter = [&](const TileSegment& sg) { return b.mul(tq, b.i32(sg.width / 4)); };
    // A lane's run of `count` elements from `at` of a buffer, as stored.
    auto loadRun = [&](int32_t buffer, V at, int64_t count) {
      std::vector<V> x;
      for (int64_t e = 0; e < count; e += W) {
        std::vector<V> part = b.loadVecStored(buffer, b.add(at, b.i32(e)), W);
        x.insert(x.end(), part.begin(), part.end());
      }
      return x;
    };

    // q's A fragments, one a segment and step of 16 dims: element e is row
    // g + 8 ((e / 2) % 2) at the step's dim e % 2 + 2 (e / 4) of the lane's
    // four.
    std::vector<std::vector<V>> qa;
    for (const TileSegment& sg : keySegs) {
      std::array<std::vector<V>, 2> run;
      for (size_t h = 0; h < 2; ++h) {
        // Rows g + 8 are all past Q when Q <= 8: zero, known here (so the
        // compiler keeps no registers for them).
        if (h == 1 && Q <= 8) {
          run[h].assign(size_t(sg.width / 4), zero);
          continue;
        }
        V qAt = b.add(b.mul(queryRow(b.min(qrows[h], b.i32(Q - 1))), b.i32(f.Dk)), b.i32(sg.offset));
        run[h] = loadRun(f.q, b.add(qAt, quarter(sg)), sg.width / 4);
        for (V& x : run[h]) x = b.select(real[h], x, zero);
      }
      for (int64_t i = 0; i < sg.width / 16; ++i) {
        std::vector<V> a;
        for (int64_t e = 0; e < 8; ++e) a.push_back(run[size_t((e / 2) % 2)][size_t(4 * i + e % 2 + 2 * (e / 4))]);
        qa.push_back(a);
      }
    }

    // The rows' running maxima, the lane's shares of their denominators, and
    // the output fragments (slice n: value dims c * NV + n).
    std::array<int32_t, 2> mv{}, lv{};
    for (size_t h = 0; h < 2; ++h) {
      mv[h] = b.var(kir::Scalar::F32, b.f32(-kInf));
      lv[h] = b.var(kir::Scalar::F32, b.f32(0));
    }
    std::vector<FragmentVars> ov(static_cast<size_t>(NV));
    for (auto& o : ov) o = zeroFragment(b);

    // The keys of the lane in a step, as offsets from the warp's first (k0
    // = t0 + w * KW): key k0 + 8j + g of each score slice j (the B
    // fragment's key), then keys k0 + 16i + 2t, + 1, + 8, + 9 of each
    // value block i of 16 (B's elements 0..3).
    const int64_t NB = KW / 8, NP = KW / 16;
    std::vector<V> offsets;
    for (int64_t j = 0; j < NB; ++j) offsets.push_back(b.add(b.i32(8 * j), gq));
    for (int64_t i = 0; i < NP; ++i)
      for (int64_t kk : {0, 1, 8, 9}) offsets.push_back(b.add(b.mul(tq, b.i32(2)), b.i32(16 * i + kk)));
    V warpKeys = b.mul(warp, b.i32(KW));
    auto keyOf = [&](V t0, size_t k) { return b.min(b.add(b.add(t0, warpKeys), offsets[k]), last); };
    // Paged: each key's read word is loaded a step ahead, into words[k], so
    // that a step's row loads need not wait for it.
    auto wordAt = [&](V t) { return loadIndex(b, f.read, b.add(b.mul(bi, b.i32(f.Lk)), t), 0, f.S - 1); };
    std::vector<int32_t> words;
    if (f.paged)
      for (size_t k = 0; k < offsets.size(); ++k) words.push_back(b.var(kir::Scalar::I32, wordAt(keyOf(lo, k))));
    // The first element of the lane's key k in segment sg (t: that key,
    // clamped into the range).
    auto rowOf = [&](const TileSegment& sg, V t, size_t k) {
      if (!f.paged || sg.buffer == f.ks) return segmentRow(b, f, sg, bi, g, t);
      return b.mul(b.add(b.mul(b.get(words[k]), b.i32(f.Hkv)), g), b.i32(sg.width));
    };

    // One step: `edge` where its keys may reach past hi.
    auto step = [&](V t0, bool edge) {
      V k0 = b.add(t0, warpKeys);
      // Scores of slice j (keys k0 + 8j + c): B element e is key k0 + 8j +
      // g at the step's dim e of the lane's four.
      std::vector<std::array<V, 4>> acc(static_cast<size_t>(NB));
      for (size_t j = 0; j < size_t(NB); ++j) {
        V t = keyOf(t0, j);
        acc[j] = {b.f32(0), b.f32(0), b.f32(0), b.f32(0)};
        size_t at = 0;
        for (const TileSegment& sg : keySegs) {
          std::vector<V> run = loadRun(sg.buffer, b.add(rowOf(sg, t, j), quarter(sg)), sg.width / 4);
          for (int64_t i = 0; i < sg.width / 16; ++i) {
            std::vector<V> kb(run.begin() + 4 * i, run.begin() + 4 * i + 4);
            acc[j] = b.mma(op, qa[at++], kb, acc[j]);
          }
        }
      }
      // The values of each block's keys (vals[4i + e]: B's element e of
      // block i), dims g * NV .. g * NV + NV - 1; past hi, zeros.
      std::vector<std::vector<V>> vals;
      for (size_t k = size_t(NB); k < offsets.size(); ++k) {
        vals.push_back(loadRun(f.v, b.add(rowOf(valueSeg, keyOf(t0, k), k), b.mul(gq, b.i32(NV))), NV));
        if (edge) {
          V inside = b.lt(b.add(k0, offsets[k]), hi);
          for (V& x : vals.back()) x = b.select(inside, x, zero);
        }
      }
      if (f.paged)
        for (size_t k = 0; k < offsets.size(); ++k) b.set(words[k], wordAt(keyOf(b.add(t0, b.i32(STEP)), k)));
      // The weights of row g + 8h at key k0 + 8j + 2t + e: p[h][2j + e].
      std::array<std::vector<V>, 2> p;
      std::array<V, 2> rescale{};
      for (size_t h = 0; h < 2; ++h) {
        std::vector<V> sc;
        V most = b.f32(-kInf);
        for (size_t j = 0; j < size_t(NB); ++j)
          for (size_t e = 0; e < 2; ++e) {
            V x = transformScore(b, r, acc[j][2 * h + e]);
            if (edge) {
              V t = b.add(k0, b.add(b.mul(tq, b.i32(2)), b.i32(int64_t(8 * j + e))));
              x = b.select(b.lt(t, hi), x, b.f32(-kInf));
            }
            sc.push_back(x);
            most = b.max(most, x);
          }
        rescale[h] = softmaxStep(b, most, sc, mv[h], lv[h], 0, p[h]);
      }
      for (int64_t n = 0; n < NV; ++n) {
        std::array<V, 4> o = getFragment(b, ov[size_t(n)]);
        for (size_t e = 0; e < 4; ++e) o[e] = b.mul(o[e], rescale[e / 2]);
        setFragment(b, ov[size_t(n)], o);
      }
      // Block i of 16 keys: A's element e is row g + 8 ((e / 2) % 2), key
      // 2t + e % 2 + 8 (e / 4): slice 2i + e / 4's weight e % 2.
      for (int64_t i = 0; i < NP; ++i) {
        std::vector<V> heads, rests;
        for (int64_t e = 0; e < 8; ++e) {
          auto [hd, rest] = headAndRest(b, p[size_t((e / 2) % 2)][size_t(4 * i + 2 * (e / 4) + e % 2)], tt);
          heads.push_back(hd);
          rests.push_back(rest);
        }
        for (int64_t n = 0; n < NV; ++n) {
          std::vector<V> vb;
          for (size_t e = 0; e < 4; ++e) vb.push_back(vals[size_t(4 * i) + e][size_t(n)]);
          std::array<V, 4> o = b.mma(op, rests, vb, getFragment(b, ov[size_t(n)]));
          setFragment(b, ov[size_t(n)], b.mma(op, heads, vb, o));
        }
      }
    };
    b.forRange(lo, hi, STEP, [&](V t0) {
      b.ifElse(b.le(b.add(t0, b.i32(STEP)), hi), [&] { step(t0, false); }, [&] { step(t0, true); });
    });

    // Each row's l over its four lanes, the warps' states to workgroup
    // memory (warp w's state of row qi at slot w * Q + qi), their fold.
    for (size_t h = 0; h < 2; ++h) {
      V l = b.get(lv[h]);
      l = b.add(l, b.shuffleXor(l, 1));
      l = b.add(l, b.shuffleXor(l, 2));
      b.ifThen(real[h], [&] {
        V slot = b.add(b.mul(warp, b.i32(Q)), qrows[h]);
        for (int64_t n = 0; n < NV; ++n)
          for (size_t e = 0; e < 2; ++e) {
            V dim = b.add(b.mul(b.add(b.mul(tq, b.i32(2)), b.i32(int64_t(e))), b.i32(NV)), b.i32(n));
            b.sharedStore(fold.o, b.add(b.mul(slot, b.i32(f.Dv)), dim), b.get(ov[size_t(n)][2 * h + e]));
          }
        b.ifThen(b.eq(tq, b.i32(0)), [&] {
          b.sharedStore(fold.m, slot, b.get(mv[h]));
          b.sharedStore(fold.l, slot, l);
        });
      });
    }
    b.barrier();
    foldDecodeRows(b, f, fold, queryRow, tid, T, S, split, out);
  });
  return b.finish();
}

}  // namespace poot::attn

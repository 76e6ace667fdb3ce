// How the GQA-packed decode schedule ("decode", schedule.h) is written. A
// workgroup (batch row b, KV head g[, split][, row group rg]) serves Q =
// tileM of the n_rep * Lq query rows of g, rows rg * Q + qi for qi < Q, a
// KV head's row r being head g * n_rep + r / Lq, query row r % Lq, and walks
// its key range [lo, hi) in tiles of tileK keys. Each tile:
//  1. Loads. The key threads load their keys' runs and the value threads
//     their keys' value runs into variables, all at once, so a tile's bytes
//     are in flight together; the next tile's loads are issued once this
//     tile's scores are in workgroup memory, so they arrive while its values
//     are folded in. A key past hi is read at hi - 1 (so nothing past the
//     live length or the split's chunk is ever read) and scores -inf. A
//     split's chunk is whole tiles of the row's live range (splitChunk). A
//     paged key's read word is loaded a tile earlier still, so that its
//     row loads do not wait on it.
//  2. Scores. Key thread (kt, j) of kLanes holds slice j of every row's q in
//     registers (runs j, j + kLanes, ... of `vector` elements, loaded once)
//     and leaves each row's partial dot (fused multiply-adds) in plane j of
//     workgroup memory; barrier; thread (row, key) sums the planes, applies
//     scale, softcap and mask (maskedScore, as the streaming schedule does)
//     and stores the score; barrier.
//  3. Values. Value thread (slice ks, lane c) of decodeValueLanes owns value
//     runs c, c + lanes, ... and runs each row's online softmax over the keys
//     ks, ks + slices, ... of the tile at tile granularity: the tile's
//     maximum, one rescale, then each key's weight exp(s - m) into l and,
//     unless s is -inf (that key's value row is not used, as in the oracle),
//     weight * value into o by a fused multiply-add. A tile with no score
//     other than -inf leaves the state as it is; a NaN score makes the row
//     NaN as the streaming lanes do.
// At the end each slice's state (o, m, l) per row goes to workgroup memory
// and the slices fold as the streaming lanes do (foldStates): to the output,
// or when split to the scratch slot of (query row, split) exactly as the
// split-kv-partials kernel writes it, so the same combine follows.
#include <limits>
#include <vector>

#include "codegen/gen/attention_form.h"
#include "plan/schedule.h"

namespace poot::attn {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

// A run slot of a thread: the element offset of its run within a row (the
// run index clamped into the row) and whether the run is really in the row
// (-1: always).
struct Run {
  V at = -1, valid = -1;
};

// Runs first, first + lanes, ... of a row of `width` elements in runs of w.
std::vector<Run> runsOf(Builder& b, V first, int64_t lanes, int64_t width, int64_t w) {
  int64_t runs = width / w;
  std::vector<Run> out;
  for (int64_t i = 0; i < ceilDiv(runs, lanes); ++i) {
    V run = b.add(first, b.i32(i * lanes));
    Run r;
    r.at = b.mul(b.min(run, b.i32(runs - 1)), b.i32(w));
    if (runs % lanes != 0) r.valid = b.lt(run, b.i32(runs));
    out.push_back(r);
  }
  return out;
}

// One key segment: k (per-head, Dh wide, q's elements from 0) or k_shared
// (Ds wide, q's elements from Dh), and the key thread's runs of it.
struct Segment {
  int32_t buffer;
  int64_t width, qOffset;
  std::vector<Run> runs;
};

}  // namespace

DecodeFold decodeFold(Builder& b, int64_t slices, int64_t rows, int64_t dv) {
  return {b.shared("o", kir::Scalar::F32, slices * rows * dv), b.shared("m", kir::Scalar::F32, slices * rows),
          b.shared("l", kir::Scalar::F32, slices * rows), slices, rows};
}

void foldDecodeRows(Builder& b, const Form& f, const DecodeFold& fold, const std::function<V(V)>& queryRow, V tid,
                    int64_t threads, int64_t splits, V split, int32_t out) {
  for (int64_t qi = 0; qi < fold.rows; ++qi) {
    auto slotOf = [&, qi](V i) { return b.add(b.mul(i, b.i32(fold.rows)), b.i32(qi)); };
    States st{fold.slices, [&, slotOf](V i) { return b.sharedLoad(fold.m, slotOf(i)); },
              [&, slotOf](V i) { return b.sharedLoad(fold.l, slotOf(i)); },
              [&, slotOf](V i, V ch) { return b.sharedLoad(fold.o, b.add(b.mul(slotOf(i), b.i32(f.Dv)), ch)); }};
    V qrow = queryRow(b.i32(qi));
    if (splits == 1) {
      foldInto(b, st, tid, threads, f.Dv, out, b.mul(qrow, b.i32(f.Dv)));
      continue;
    }
    V at = b.mul(b.add(b.mul(qrow, b.i32(splits)), split), b.i32(f.Dv + 2));
    Folded whole = foldStates(b, st, tid, threads, f.Dv, [&](V ch, V num, V) { b.store(out, b.add(at, ch), num); });
    b.ifThen(b.eq(tid, b.i32(0)), [&] {
      b.store(out, b.add(at, b.i32(f.Dv)), whole.max);
      b.store(out, b.add(at, b.i32(f.Dv + 1)), whole.den);
    });
  }
}

kir::Kernel decodeKernel(const GenInput& in, const Form& f) {
  const KernelRequest& r = in.request;
  const Schedule& s = r.schedule;
  const int64_t T = s.workgroupSize, J = s.kLanes, W = s.vector, Tk = s.tileK, S = s.splits;
  const int64_t Q = s.tileM, R = f.nrep * f.Lq / Q, CG = decodeValueLanes(f.Dv, W, T), KS = T / CG;
  const int64_t plane = decodePlane(s, Q), groups = f.B * f.Hkv, rows = f.B * f.Hq * f.Lq, passes = Tk / (T / J),
                perSlice = Tk / KS;
  Builder b(in.entry, T, in.grid[0]);
  declareOperands(b, r, f);
  int32_t out = S > 1 ? b.buffer("scratch", DType::F32, rows * S * (f.Dv + 2), true)
                      : b.buffer("out", r.results[0].dtype, rows * f.Dv, true);
  int32_t parts = b.shared("partials", kir::Scalar::F32, J * plane);
  int32_t scores = b.shared("scores", kir::Scalar::F32, Q * Tk);
  const DecodeFold fold = decodeFold(b, KS, Q, f.Dv);
  V wg = b.workgroupId(), tid = b.local();
  b.ifThen(b.lt(wg, b.i32(groups * S * R)), [&] {
    // The R row groups of a (group, split) are neighbours in the grid, so
    // they run together and read its keys through the cache once.
    V rg = R > 1 ? b.rem(wg, b.i32(R)) : b.i32(0), rest = R > 1 ? b.div(wg, b.i32(R)) : wg;
    V grp = S > 1 ? b.div(rest, b.i32(S)) : rest, split = S > 1 ? b.rem(rest, b.i32(S)) : b.i32(0);
    V firstRow = b.mul(rg, b.i32(Q));
    V bi = b.div(grp, b.i32(f.Hkv)), g = b.rem(grp, b.i32(f.Hkv));
    V bound = keyBound(b, f, bi);
    V lo = b.i32(0), hi = bound;
    if (S > 1) {
      KeyRange chunk = splitChunk(b, split, S, bound, Tk);
      lo = chunk.lo;
      hi = chunk.hi;
    }
    // Row qi of this workgroup's Q is the KV head's row firstRow + qi: query
    // head g * n_rep + that / Lq, query row that % Lq.
    auto headRow = [&](V qi) { return b.add(firstRow, qi); };
    auto headOf = [&](V row) { return b.add(b.mul(g, b.i32(f.nrep)), b.div(row, b.i32(f.Lq))); };
    auto queryRow = [&](V qi) {
      V row = headRow(qi);
      return b.add(b.mul(b.add(b.mul(bi, b.i32(f.Hq)), headOf(row)), b.i32(f.Lq)), b.rem(row, b.i32(f.Lq)));
    };

    // The key threads' q slices, in registers for the whole kernel.
    V j = b.rem(tid, b.i32(J)), kt = b.div(tid, b.i32(J));
    std::vector<Segment> segs{{f.k, f.Dh, 0, runsOf(b, j, J, f.Dh, W)}};
    if (f.split) segs.push_back({f.ks, f.Ds, f.Dh, runsOf(b, j, J, f.Ds, W)});
    std::vector<std::vector<V>> qreg(static_cast<size_t>(Q));
    for (int64_t qi = 0; qi < Q; ++qi) {
      V qAt = b.mul(queryRow(b.i32(qi)), b.i32(f.Dk));
      for (const Segment& sg : segs)
        for (const Run& run : sg.runs) {
          std::vector<V> x = b.loadVec(f.q, b.add(qAt, b.add(b.i32(sg.qOffset), run.at)), W);
          for (V e : x) qreg[size_t(qi)].push_back(run.valid < 0 ? e : b.select(run.valid, e, b.f32(0)));
        }
    }

    // The value threads' runs and running states, one per row.
    V c = b.rem(tid, b.i32(CG)), ks = b.div(tid, b.i32(CG));
    std::vector<Run> vruns = runsOf(b, c, CG, f.Dv, W);
    std::vector<int32_t> mv, lv;
    std::vector<std::vector<int32_t>> ov(static_cast<size_t>(Q));
    for (int64_t qi = 0; qi < Q; ++qi) {
      mv.push_back(b.var(kir::Scalar::F32, b.f32(-kInf)));
      lv.push_back(b.var(kir::Scalar::F32, b.f32(0)));
      for (size_t e = 0; e < vruns.size() * size_t(W); ++e) ov[size_t(qi)].push_back(b.var(kir::Scalar::F32, b.f32(0)));
    }

    // 1. Loads: the key runs of each pass and the value runs of each key of
    // the slice for the tile from t0, into variables (the next tile's are
    // loaded while this one's values are folded in). A key past hi - 1 reads
    // key hi - 1 (key 0 when the range is empty), inside every buffer.
    V last = b.max(b.sub(hi, b.i32(1)), b.i32(0));
    std::vector<V> keyLocal;
    for (int64_t p = 0; p < passes; ++p) keyLocal.push_back(b.add(kt, b.i32(p * (T / J))));
    std::vector<V> valueLocal;
    for (int64_t i = 0; i < perSlice; ++i) valueLocal.push_back(b.add(ks, b.i32(i * KS)));
    // Paged: each key's read word is loaded a tile before its key and value
    // rows (words[p] for key pass p, then one for each of the slice's keys),
    // so a tile's row loads do not wait on its words.
    std::vector<int32_t> words;
    auto wordAt = [&](V t0, V local) {
      return loadIndex(b, f.read, b.add(b.mul(bi, b.i32(f.Lk)), b.min(b.add(t0, local), last)), 0, f.S - 1);
    };
    if (f.paged) {
      for (V local : keyLocal) words.push_back(b.var(kir::Scalar::I32, wordAt(lo, local)));
      for (V local : valueLocal) words.push_back(b.var(kir::Scalar::I32, wordAt(lo, local)));
    }
    // The row of key t, at `local` of the tile from t0; paged, the word-th
    // of the words (which then moves on to the next tile's key).
    auto rowAt = [&](V t, V t0, V local, size_t word) {
      if (!f.paged) return keyRow(b, f, bi, g, t);
      V row = b.add(b.mul(b.get(words[word]), b.i32(f.Hkv)), g);
      b.set(words[word], wordAt(b.add(t0, b.i32(Tk)), local));
      return row;
    };
    std::vector<std::vector<int32_t>> kvar(static_cast<size_t>(passes)), vvar(static_cast<size_t>(perSlice));
    auto loadTile = [&](V t0, bool first) {
      auto keyAt = [&](V local) { return b.min(b.add(t0, local), last); };
      auto into = [&](std::vector<int32_t>& vars, size_t at, V x) {
        if (first) vars.push_back(b.var(kir::Scalar::F32, x));
        else b.set(vars[at], x);
      };
      for (int64_t p = 0; p < passes; ++p) {
        V t = keyAt(keyLocal[size_t(p)]), row = rowAt(t, t0, keyLocal[size_t(p)], size_t(p));
        size_t at = 0;
        for (const Segment& sg : segs) {
          V base = sg.buffer == f.k ? b.mul(row, b.i32(f.Dh)) : b.mul(b.add(b.mul(bi, b.i32(f.Lk)), t), b.i32(f.Ds));
          for (const Run& run : sg.runs)
            for (V e : b.loadVec(sg.buffer, b.add(base, run.at), W)) into(kvar[size_t(p)], at++, e);
        }
      }
      for (int64_t i = 0; i < perSlice; ++i) {
        V row = rowAt(keyAt(valueLocal[size_t(i)]), t0, valueLocal[size_t(i)], size_t(passes + i));
        size_t at = 0;
        for (const Run& run : vruns)
          for (V e : b.loadVec(f.v, b.add(b.mul(row, b.i32(f.Dv)), run.at), W)) into(vvar[size_t(i)], at++, e);
      }
    };
    loadTile(lo, true);

    b.forRange(lo, hi, Tk, [&](V t0) {
      auto keyAt = [&](V local) { return b.min(b.add(t0, local), last); };
      std::vector<std::vector<V>> kv, vv;
      for (const std::vector<int32_t>& vars : kvar) {
        kv.emplace_back();
        for (int32_t x : vars) kv.back().push_back(b.get(x));
      }
      for (const std::vector<int32_t>& vars : vvar) {
        vv.emplace_back();
        for (int32_t x : vars) vv.back().push_back(b.get(x));
      }
      // 2. Scores: each key thread's partial dots into its plane, then the
      // planes summed per (row, key).
      for (int64_t p = 0; p < passes; ++p)
        for (int64_t qi = 0; qi < Q; ++qi) {
          const std::vector<V>& qs = qreg[size_t(qi)];
          V acc = b.mul(qs[0], kv[size_t(p)][0]);
          for (size_t e = 1; e < kv[size_t(p)].size(); ++e) acc = b.fma(qs[e], kv[size_t(p)][e], acc);
          b.sharedStore(parts, b.add(b.mul(j, b.i32(plane)), b.add(b.i32(qi * Tk), keyLocal[size_t(p)])), acc);
        }
      b.barrier();
      for (int64_t i = 0; i < ceilDiv(Q * Tk, T); ++i) {
        V pair = b.add(tid, b.i32(i * T));  // qi * Tk + key
        b.ifThen(b.lt(pair, b.i32(Q * Tk)), [&] {
          V dot = b.f32(0);
          for (int64_t jj = 0; jj < J; ++jj) dot = b.add(dot, b.sharedLoad(parts, b.add(b.i32(jj * plane), pair)));
          V qi = b.div(pair, b.i32(Tk)), key = b.rem(pair, b.i32(Tk));
          V sc = transformScore(b, r, dot);
          if (f.masked || f.causal) {
            V row = headRow(qi);
            sc = maskedScore(b, f, maskRow(b, f, bi, headOf(row), b.rem(row, b.i32(f.Lq))), sc, keyAt(key));
          }
          b.sharedStore(scores, pair, b.select(b.lt(b.add(t0, key), hi), sc, b.f32(-kInf)));
        });
      }
      b.barrier();
      loadTile(b.add(t0, b.i32(Tk)), false);
      // 3. Values: each row's online softmax over the slice's keys.
      for (int64_t qi = 0; qi < Q; ++qi) {
        std::vector<V> sv, seen;
        V tileMax = b.f32(-kInf), any = b.boolean(false), all = b.boolean(true);
        for (int64_t i = 0; i < perSlice; ++i) {
          sv.push_back(b.sharedLoad(scores, b.add(b.i32(qi * Tk), b.add(ks, b.i32(i * KS)))));
          seen.push_back(b.ne(sv.back(), b.f32(-kInf)));
          tileMax = b.max(tileMax, sv.back());
          any = b.binary(kir::Opc::Or, any, seen.back());
          all = b.binary(kir::Opc::And, all, seen.back());
        }
        b.ifThen(any, [&] {
          std::vector<int32_t>& o = ov[size_t(qi)];
          V m = b.get(mv[size_t(qi)]), mNew = b.max(m, tileMax);
          V rescale = b.exp(b.sub(m, mNew));
          V l = b.mul(b.get(lv[size_t(qi)]), rescale);
          std::vector<V> acc;
          for (int32_t x : o) acc.push_back(b.mul(b.get(x), rescale));
          std::vector<V> w;
          for (int64_t i = 0; i < perSlice; ++i) {
            w.push_back(b.exp(b.sub(sv[size_t(i)], mNew)));
            l = b.add(l, w.back());
          }
          // Every key seen (the common case) multiplies straight in; else a
          // -inf key's value is replaced by 0 first.
          auto accumulate = [&](bool masked) {
            for (size_t e = 0; e < acc.size(); ++e) {
              V x = acc[e];
              for (int64_t i = 0; i < perSlice; ++i) {
                V val = vv[size_t(i)][e];
                x = b.fma(w[size_t(i)], masked ? b.select(seen[size_t(i)], val, b.f32(0)) : val, x);
              }
              b.set(o[e], x);
            }
          };
          b.ifElse(all, [&] { accumulate(false); }, [&] { accumulate(true); });
          b.set(lv[size_t(qi)], l);
          b.set(mv[size_t(qi)], mNew);
        });
      }
    });

    // The slices' states, then their fold per row.
    for (int64_t qi = 0; qi < Q; ++qi) {
      V slot = b.add(b.mul(ks, b.i32(Q)), b.i32(qi));
      for (size_t k = 0; k < vruns.size(); ++k) {
        auto publish = [&, k] {
          for (int64_t e = 0; e < W; ++e)
            b.sharedStore(fold.o, b.add(b.mul(slot, b.i32(f.Dv)), b.add(vruns[k].at, b.i32(e))),
                          b.get(ov[size_t(qi)][k * size_t(W) + size_t(e)]));
        };
        if (vruns[k].valid < 0) publish();
        else b.ifThen(vruns[k].valid, publish);
      }
      b.ifThen(b.eq(c, b.i32(0)), [&] {
        b.sharedStore(fold.m, slot, b.get(mv[size_t(qi)]));
        b.sharedStore(fold.l, slot, b.get(lv[size_t(qi)]));
      });
    }
    b.barrier();
    foldDecodeRows(b, f, fold, [&](V qi) { return queryRow(qi); }, tid, T, S, split, out);
  });
  return b.finish();
}

}  // namespace poot::attn

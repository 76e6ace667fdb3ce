// How the tiled prefill schedule ("prefill", schedule.h) is written. A
// workgroup (batch row b, KV head g, block of Mq = tileM / n_rep query
// positions) owns tileM rows, row rr being query head g * n_rep + rr % n_rep
// at position rr / n_rep of the block (rows past the block's are padding,
// computed on a clamped row and never stored). Its q rows are staged once in
// workgroup memory, d-major. It walks the keys in tiles of tileN, from the
// first to the last key any of its rows can see (under a causal mask, the
// union of its positions' visible keys). The key tile, the weights and the
// value tile take turns in one array: the keys until the scores have read
// them, then the weights and the values beside them until the gather has.
// Each tile's keys and values are loaded into registers a tile ahead (a key
// past the bound is read at the last key in it and scores -inf); each tile:
//  1. the key tile (d-major) from its registers to workgroup memory, and the
//     next tile's keys into the registers; barrier;
//  2. thread (ty, tx) computes the threadM x threadN scores of its rows
//     (runs of 4 consecutive rows, ty * 4 + i, each run read with one wide
//     load a key dim) and keys tx + j * (tileN / threadN) by fused
//     multiply-adds over d, applies scale, softcap and mask (maskedScore),
//     and leaves its rows' maxima over its keys in workgroup memory;
//     barrier;
//  3. each row's new maximum from those partials, one rescale of the
//     thread's running sums, the weights exp(s - m) into workgroup memory
//     (key-major, one wide store a key and run of rows, over the key tile,
//     which is read by then; a -inf score's weight as -0.0, which no exp
//     gives) and into the thread's share of the row's denominator; the value
//     tile (key-major) from its registers beside the weights, and the next
//     tile's values into the registers; barrier;
//  4. the thread's output block (its rows x its value columns: runs of 4
//     where the value width splits into whole runs, one wide load a key,
//     else tx + j * (tileN / threadN)) gathers weight * value over the
//     tile's keys. A
//     -inf key's value row must not be used (the oracle never reads it), so
//     where the value tile holds a non-finite element (its loaders raise a
//     flag) a weight of -0.0 multiplies 0 instead; with finite values
//     -0.0 * v adds nothing, the same result without the test.
// At the end the threads sharing a row sum their denominators, and each
// output is o / l (0 / 0 = NaN for a row that saw no key, as the oracle).
#include <limits>
#include <vector>

#include "codegen/gen/attention_form.h"
#include "plan/schedule.h"

namespace poot::attn {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
// The scores' key dims and the gather's keys written out this many times a
// loop step: straight-line wide loads and products between the counters.
constexpr int64_t kUnrollDims = 8, kUnrollKeys = 4;
}  // namespace

kir::Kernel prefillKernel(const GenInput& in, const Form& f) {
  const KernelRequest& r = in.request;
  const Schedule& s = r.schedule;
  const int64_t BM = s.tileM, BN = s.tileN, TM = s.threadM, TN = s.threadN, W = s.vector;
  const int64_t TX = BN / TN, TY = BM / TM, T = TX * TY, Mq = BM / f.nrep;
  const int64_t blocks = ceilDiv(f.Lq, Mq), count = f.B * f.Hkv * blocks, CV = ceilDiv(f.Dv, TX);
  const PrefillLayout lay = prefillLayout(s, f.Dk, f.Dv);
  Builder b(in.entry, T, in.grid[0]);
  declareOperands(b, r, f);
  int32_t out = b.buffer("out", r.results[0].dtype, f.B * f.Hq * f.Lq * f.Dv, true);
  // Each array a multiple of 4 words, so every one starts 16-byte aligned.
  // The key tile, then the weights and the value tile (from word
  // BN * qStride, a multiple of 4), share one: the scores have read every
  // key (a barrier) before the first weight or value goes in, and the gather
  // has read every weight and value (the barrier that starts the next tile)
  // before the next key tile does.
  int32_t qs = b.shared("q_tile", kir::Scalar::F32, f.Dk * lay.qStride);
  int32_t ks = b.shared("k_tile_weights_v_tile", kir::Scalar::F32, prefillSharedWords(s, f.Dk, f.Dv));
  int32_t ps = ks, vs = ks;
  const int64_t vAt = BN * lay.qStride;
  // The rows' partial maxima (then denominators), and past them one word:
  // 1 when this tile's values hold a non-finite element.
  int32_t part = b.shared("row_partials", kir::Scalar::F32, BM * lay.partStride + 1);
  V flagAt = b.i32(BM * lay.partStride);
  // A thread's rows come in runs of RM (one wide load of q or of the
  // weights per key dim or key), its value columns in runs of RV where the
  // value width splits into whole runs for every thread (else one column at
  // a time, strided by TX, the last clamped into the row).
  const int64_t RM = Builder::wideRun(TM);
  const int64_t RV = f.Dv % (4 * TX) == 0 ? 4 : f.Dv % (2 * TX) == 0 ? 2 : 1;
  V wg = b.workgroupId(), tid = b.local();
  b.ifThen(b.lt(wg, b.i32(count)), [&] {
    PrefillBlock pb = prefillBlock(b, f, wg, Mq);
    V bi = pb.bi, g = pb.g, lo = pb.lo, hi = pb.hi, last = pb.last;
    V ty = b.div(tid, b.i32(TX)), tx = b.rem(tid, b.i32(TX));
    // Row rr's TX partials folded by op (Max or Add), in wide loads.
    auto rowFold = [&](V rr, kir::Opc op) {
      V acc = -1, row = b.mul(rr, b.i32(lay.partStride));
      int64_t run = Builder::wideRun(TX);
      for (int64_t x = 0; x < TX; x += run)
        for (V w : b.sharedLoadVec(part, b.add(row, b.i32(x)), run)) acc = acc < 0 ? w : b.binary(op, acc, w);
      return acc;
    };

    // The q tile, d-major: run e of W elements of row e % BM (neighbouring
    // threads store neighbouring rows of one d, in distinct banks).
    for (int64_t e0 = 0; e0 < BM * (f.Dk / W); e0 += T) {
      V e = b.add(tid, b.i32(e0));
      b.ifThen(b.lt(e, b.i32(BM * (f.Dk / W))), [&] {
        V rr = b.rem(e, b.i32(BM)), d = b.mul(b.div(e, b.i32(BM)), b.i32(W));
        std::vector<V> x = b.loadVec(f.q, b.add(b.mul(pb.resultRow(b, rr), b.i32(f.Dk)), d), W);
        for (int64_t c = 0; c < W; ++c) b.sharedStore(qs, b.add(b.mul(b.add(d, b.i32(c)), b.i32(lay.qStride)), rr), x[size_t(c)]);
      });
    }

    // The key and value tiles: each thread moves runs tid, tid + T, ... of
    // each segment (k, then k_shared, then v), held in variables from their
    // load (one tile ahead) to their store.
    const std::vector<TileSegment> segs = tileSegments(f);
    struct Run {
      size_t seg;
      V key, at;         // tile key, element offset in the segment's row
      V active;          // the run exists (the last round may be partial)
      std::vector<int32_t> vals;
    };
    std::vector<Run> runs;
    // A key run e is at key e % BN (neighbouring threads store neighbouring
    // keys of one d, in distinct banks), a value run at key e / per (one
    // wide store each, neighbouring threads filling one row).
    for (size_t si = 0; si < segs.size(); ++si) {
      int64_t per = segs[si].width / W, total = BN * per;
      for (int64_t e0 = 0; e0 < total; e0 += T) {
        V e = b.add(tid, b.i32(e0));
        V key = segs[si].value ? b.div(e, b.i32(per)) : b.rem(e, b.i32(BN));
        V at = b.mul(segs[si].value ? b.rem(e, b.i32(per)) : b.div(e, b.i32(BN)), b.i32(W));
        Run run{si, key, at, e0 + T <= total ? b.boolean(true) : b.lt(e, b.i32(total)), {}};
        for (int64_t c = 0; c < W; ++c) run.vals.push_back(b.var(kir::Scalar::F32, b.f32(0)));
        runs.push_back(std::move(run));
      }
    }
    // The key runs (values false) or the value runs (true) of tile t0.
    auto fetch = [&](V t0, bool values) {
      for (Run& run : runs) {
        const TileSegment& sg = segs[run.seg];
        if (sg.value != values) continue;
        V t = b.min(b.add(t0, b.min(run.key, b.i32(BN - 1))), last);
        V base = segmentRow(b, f, sg, bi, g, t);
        std::vector<V> x = b.loadVec(sg.buffer, b.add(base, b.min(run.at, b.i32(sg.width - W))), W);
        for (int64_t c = 0; c < W; ++c) b.set(run.vals[size_t(c)], x[size_t(c)]);
      }
    };
    auto deposit = [&](bool values) {
      for (const Run& run : runs) {
        const TileSegment& sg = segs[run.seg];
        if (sg.value != values) continue;
        b.ifThen(run.active, [&] {
          std::vector<V> x;
          for (int64_t c = 0; c < W; ++c) x.push_back(b.get(run.vals[size_t(c)]));
          if (!sg.value) {
            for (int64_t c = 0; c < W; ++c)
              b.sharedStore(ks, b.add(b.mul(b.add(run.at, b.i32(sg.offset + c)), b.i32(lay.kStride)), run.key),
                            x[size_t(c)]);
            return;
          }
          b.sharedStoreVec(vs, b.add(b.i32(vAt), b.add(b.mul(run.key, b.i32(lay.vStride)), run.at)), x);
          V bad = b.boolean(false);
          for (V v : x) bad = b.binary(kir::Opc::Or, bad, b.ne(b.sub(v, v), b.f32(0)));
          b.ifThen(bad, [&] { b.sharedStore(part, flagAt, b.f32(1)); });
        });
      }
    };

    // The thread's rows, their running maxima, denominator shares and output
    // block.
    std::vector<V> rows, runAt;  // the thread's rows; where each run of RM starts
    std::vector<MaskRow> masks;  // each row's mask, once
    for (int64_t i = 0; i < TM; i += RM) runAt.push_back(b.add(b.mul(ty, b.i32(RM)), b.i32(i / RM * TY * RM)));
    for (int64_t i = 0; i < TM; ++i) {
      rows.push_back(b.add(runAt[size_t(i / RM)], b.i32(i % RM)));
      if (f.masked || f.causal)
        masks.push_back(maskRow(b, f, bi, pb.head(b, rows.back()), b.min(pb.pos(b, rows.back()), b.i32(f.Lq - 1))));
    }
    std::vector<int32_t> mv, lv, ov;
    for (int64_t i = 0; i < TM; ++i) {
      mv.push_back(b.var(kir::Scalar::F32, b.f32(-kInf)));
      lv.push_back(b.var(kir::Scalar::F32, b.f32(0)));
      for (int64_t j = 0; j < CV; ++j) ov.push_back(b.var(kir::Scalar::F32, b.f32(0)));
    }
    // Value column j: in runs of RV (all inside the row), or strided by TX
    // and clamped into the row (a copy past Dv is never stored).
    auto colOf = [&](int64_t j) { return b.add(b.mul(tx, b.i32(RV)), b.i32(j / RV * TX * RV + j % RV)); };
    std::vector<V> cols;
    for (int64_t j = 0; j < CV; ++j) cols.push_back(RV > 1 ? colOf(j) : b.min(colOf(j), b.i32(f.Dv - 1)));

    fetch(lo, false);
    fetch(lo, true);
    b.forRange(lo, hi, BN, [&](V t0) {
      // 1. The key tile into workgroup memory, the next one into registers;
      // the non-finite flag cleared (the last gather has read it, the value
      // loaders raise it in step 3).
      b.barrier();
      b.ifThen(b.eq(tid, b.i32(0)), [&] { b.sharedStore(part, flagAt, b.f32(0)); });
      deposit(false);
      fetch(b.add(t0, b.i32(BN)), false);
      b.barrier();
      // 2. Scores.
      std::vector<int32_t> acc;
      for (int64_t x = 0; x < TM * TN; ++x) acc.push_back(b.var(kir::Scalar::F32, b.f32(0)));
      b.forUnrolled(f.Dk, kUnrollDims, [&](V d) {
        std::vector<V> qv, kv;
        for (V at : runAt) {
          std::vector<V> run = b.sharedLoadVec(qs, b.add(b.mul(d, b.i32(lay.qStride)), at), RM);
          qv.insert(qv.end(), run.begin(), run.end());
        }
        for (int64_t j = 0; j < TN; ++j)
          kv.push_back(b.sharedLoad(ks, b.add(b.mul(d, b.i32(lay.kStride)), b.add(tx, b.i32(j * TX)))));
        for (int64_t i = 0; i < TM; ++i)
          for (int64_t j = 0; j < TN; ++j) {
            int32_t a = acc[size_t(i * TN + j)];
            b.set(a, b.fma(qv[size_t(i)], kv[size_t(j)], b.get(a)));
          }
      });
      std::vector<V> sc;
      for (int64_t i = 0; i < TM; ++i) {
        V rr = rows[size_t(i)], most = b.f32(-kInf);
        for (int64_t j = 0; j < TN; ++j) {
          V key = b.add(tx, b.i32(j * TX)), t = b.add(t0, key);
          V x = transformScore(b, r, b.get(acc[size_t(i * TN + j)]));
          if (f.masked || f.causal) x = maskedScore(b, f, masks[size_t(i)], x, b.min(t, last));
          x = b.select(b.lt(t, hi), x, b.f32(-kInf));
          sc.push_back(x);
          most = b.max(most, x);
        }
        b.sharedStore(part, b.add(b.mul(rr, b.i32(lay.partStride)), tx), most);
      }
      b.barrier();
      // 3. Each row's new maximum, the rescale, the weights; the value tile
      // beside them, the next one into registers.
      std::vector<V> weights(size_t(TM * TN));
      for (int64_t i = 0; i < TM; ++i) {
        V rr = rows[size_t(i)], m = b.get(mv[size_t(i)]);
        V mNew = b.max(m, rowFold(rr, kir::Opc::Max));
        V rescale = b.select(b.eq(mNew, b.f32(-kInf)), b.f32(1), b.exp(b.sub(m, mNew)));
        V l = b.mul(b.get(lv[size_t(i)]), rescale);
        for (int64_t j = 0; j < TN; ++j) {
          V x = sc[size_t(i * TN + j)];
          V p = b.select(b.eq(x, b.f32(-kInf)), b.f32(-0.0), b.exp(b.sub(x, mNew)));
          l = b.add(l, p);
          weights[size_t(i * TN + j)] = p;
        }
        b.set(lv[size_t(i)], l);
        b.set(mv[size_t(i)], mNew);
        for (int64_t j = 0; j < CV; ++j) {
          int32_t o = ov[size_t(i * CV + j)];
          b.set(o, b.mul(b.get(o), rescale));
        }
      }
      // Key j's weights of each run of rows, one wide store (key-major).
      for (int64_t j = 0; j < TN; ++j)
        for (int64_t i = 0; i < TM; i += RM) {
          std::vector<V> run;
          for (int64_t e = 0; e < RM; ++e) run.push_back(weights[size_t((i + e) * TN + j)]);
          b.sharedStoreVec(ps, b.add(b.mul(b.add(tx, b.i32(j * TX)), b.i32(lay.qStride)), runAt[size_t(i / RM)]), run);
        }
      deposit(true);
      fetch(b.add(t0, b.i32(BN)), true);
      b.barrier();
      V nonfinite = b.ne(b.sharedLoad(part, flagAt), b.f32(0));
      // 4. weight * value over the tile's keys.
      auto gather = [&](bool exact) {
        b.forUnrolled(BN, kUnrollKeys, [&](V key) {
          std::vector<V> pv, vv;
          for (V at : runAt) {
            std::vector<V> run = b.sharedLoadVec(ps, b.add(b.mul(key, b.i32(lay.qStride)), at), RM);
            pv.insert(pv.end(), run.begin(), run.end());
          }
          for (int64_t j = 0; j < CV; j += RV) {
            std::vector<V> run =
                b.sharedLoadVec(vs, b.add(b.i32(vAt), b.add(b.mul(key, b.i32(lay.vStride)), cols[size_t(j)])), RV);
            vv.insert(vv.end(), run.begin(), run.end());
          }
          for (int64_t i = 0; i < TM; ++i) {
            V dropped = exact ? b.eq(b.bitcast(pv[size_t(i)], kir::Scalar::I32), b.i32(INT32_MIN)) : -1;
            for (int64_t j = 0; j < CV; ++j) {
              int32_t o = ov[size_t(i * CV + j)];
              V v = exact ? b.select(dropped, b.f32(0), vv[size_t(j)]) : vv[size_t(j)];
              b.set(o, b.fma(pv[size_t(i)], v, b.get(o)));
            }
          }
        });
      };
      b.ifElse(nonfinite, [&] { gather(true); }, [&] { gather(false); });
    });

    // The rows' denominators, then the outputs.
    b.barrier();
    for (int64_t i = 0; i < TM; ++i)
      b.sharedStore(part, b.add(b.mul(rows[size_t(i)], b.i32(lay.partStride)), tx), b.get(lv[size_t(i)]));
    b.barrier();
    for (int64_t i = 0; i < TM; ++i) {
      V rr = rows[size_t(i)], l = rowFold(rr, kir::Opc::Add);
      b.ifThen(pb.real(b, rr), [&] {
        V at = b.mul(pb.resultRow(b, rr), b.i32(f.Dv));
        for (int64_t j = 0; j < CV; ++j) {
          V c = colOf(j);
          auto put = [&] { b.store(out, b.add(at, c), b.div(b.get(ov[size_t(i * CV + j)]), l)); };
          if (RV > 1 || (j + 1) * TX <= f.Dv) put();
          else b.ifThen(b.lt(c, b.i32(f.Dv)), put);
        }
      });
    }
  });
  return b.finish();
}

}  // namespace poot::attn

// The Attention form and the addressing its schedules share
// (attention_form.h).
#include "codegen/gen/attention_form.h"

#include <algorithm>
#include <limits>

#include "plan/schedule.h"

namespace poot::attn {

Form formOf(const KernelRequest& r) {
  TypeQuery a = attrsOf(r);
  Form f;
  f.split = a.attrSym("key") == "split";
  f.paged = a.attrSym("key") == "paged";
  f.masked = a.attrSym("mask") == "additive";
  f.causal = a.attrSym("mask") == "causal";
  f.window = f.causal && a.attr("window") ? a.attrInt("window") : 0;
  f.live = a.attrSym("bound") == "live";
  int32_t i = 0;
  f.q = i++;
  f.k = i++;
  if (f.split) f.ks = i++;
  f.v = i++;
  if (f.paged) f.read = i++;
  if (f.masked) f.mask = i++;
  if (f.causal) f.qpos = i++;
  if (f.live) f.len = i++;
  const Shape& q = r.operands[size_t(f.q)].shape;
  f.B = q[0], f.Hq = q[1], f.Lq = q[2], f.Dk = q[3];
  f.Dv = r.results[0].shape[3];
  f.nrep = a.attrInt("n_rep");
  f.Hkv = f.Hq / f.nrep;
  f.Lk = f.paged ? r.operands[size_t(f.read)].shape[1] : r.operands[size_t(f.k)].shape[2];
  f.S = f.paged ? r.operands[size_t(f.k)].shape[0] : 0;
  f.Ds = f.split ? r.operands[size_t(f.ks)].shape[3] : 0;
  f.Dh = f.Dk - f.Ds;
  f.Hm = f.masked ? r.operands[size_t(f.mask)].shape[1] : 0;
  return f;
}

void declareOperands(Builder& b, const KernelRequest& r, const Form& f) {
  const char* names[] = {"q", "k", "k_shared", "v", "read", "mask", "qpos", "len"};
  int32_t slots[] = {f.q, f.k, f.ks, f.v, f.read, f.mask, f.qpos, f.len};
  for (int i = 0; i < 8; ++i)
    if (slots[i] >= 0) {
      const Type& t = r.operands[size_t(slots[i])];
      b.buffer(names[i], t.dtype, numel(t.shape), false);
    }
}

V keyBound(Builder& b, const Form& f, V bi) { return f.live ? loadIndex(b, f.len, bi, 0, f.Lk) : b.i32(f.Lk); }

KeyRange splitChunk(Builder& b, V split, int64_t splits, V bound, int64_t granule) {
  V per = b.div(b.add(bound, b.i32(splits - 1)), b.i32(splits));
  V chunk = b.mul(b.div(b.add(per, b.i32(granule - 1)), b.i32(granule)), b.i32(granule));
  V lo = b.min(b.mul(split, chunk), bound);
  return KeyRange{lo, b.min(b.add(lo, chunk), bound)};
}

V keyRow(Builder& b, const Form& f, V bi, V g, V t) {
  if (!f.paged) return b.add(b.mul(b.add(b.mul(bi, b.i32(f.Hkv)), g), b.i32(f.Lk)), t);
  V word = loadIndex(b, f.read, b.add(b.mul(bi, b.i32(f.Lk)), t), 0, f.S - 1);
  return b.add(b.mul(word, b.i32(f.Hkv)), g);
}

MaskRow maskRow(Builder& b, const Form& f, V bi, V h, V rq) {
  MaskRow m;
  if (f.masked) {
    V head = b.add(b.mul(bi, b.i32(f.Hm)), f.Hm == 1 ? b.i32(0) : h);
    m.maskAt = b.mul(b.add(b.mul(head, b.i32(f.Lq)), rq), b.i32(f.Lk));
  }
  if (f.causal) {
    int64_t top = f.window > 0 ? std::min<int64_t>(f.Lk - 1 + f.window, std::numeric_limits<int32_t>::max()) : f.Lk;
    m.pos = loadIndex(b, f.qpos, b.add(b.mul(bi, b.i32(f.Lq)), rq), -1, top);
  }
  return m;
}

PrefillBlock prefillBlock(Builder& b, const Form& f, V wg, int64_t Mq) {
  PrefillBlock p;
  p.f = &f, p.Mq = Mq;
  int64_t blocks = ceilDiv(f.Lq, Mq);
  V grp = b.div(wg, b.i32(blocks));
  p.bi = b.div(grp, b.i32(f.Hkv)), p.g = b.rem(grp, b.i32(f.Hkv));
  p.i0 = b.mul(b.rem(wg, b.i32(blocks)), b.i32(Mq));
  p.hi = keyBound(b, f, p.bi), p.lo = b.i32(0);
  p.allLo = p.lo, p.allHi = p.hi;
  if (f.causal) {
    int32_t loV = b.var(kir::Scalar::I32, p.hi), hiV = b.var(kir::Scalar::I32, b.i32(0));
    int32_t allLoV = b.var(kir::Scalar::I32, b.i32(0)), allHiV = b.var(kir::Scalar::I32, p.hi);
    b.forRange(p.i0, b.min(b.add(p.i0, b.i32(Mq)), b.i32(f.Lq)), 1, [&](V pos) {
      KeyRange seen = visibleKeys(b, f, maskRow(b, f, p.bi, b.i32(0), pos), b.i32(0), p.hi);
      b.set(loV, b.min(b.get(loV), seen.lo));
      b.set(hiV, b.max(b.get(hiV), seen.hi));
      b.set(allLoV, b.max(b.get(allLoV), seen.lo));
      b.set(allHiV, b.min(b.get(allHiV), seen.hi));
    });
    p.lo = b.get(loV), p.hi = b.get(hiV), p.allLo = b.get(allLoV), p.allHi = b.get(allHiV);
  }
  p.last = b.max(b.sub(p.hi, b.i32(1)), b.i32(0));
  return p;
}

std::vector<TileSegment> tileSegments(const Form& f) {
  std::vector<TileSegment> segs{{f.k, f.Dh, 0, false}};
  if (f.split) segs.push_back({f.ks, f.Ds, f.Dh, false});
  segs.push_back({f.v, f.Dv, 0, true});
  return segs;
}

V segmentRow(Builder& b, const Form& f, const TileSegment& sg, V bi, V g, V t) {
  if (sg.buffer == f.ks) return b.mul(b.add(b.mul(bi, b.i32(f.Lk)), t), b.i32(f.Ds));
  return b.mul(keyRow(b, f, bi, g, t), b.i32(sg.width));
}

V PrefillBlock::head(Builder& b, V rr) const { return b.add(b.mul(g, b.i32(f->nrep)), b.rem(rr, b.i32(f->nrep))); }

V PrefillBlock::pos(Builder& b, V rr) const { return b.add(i0, b.div(rr, b.i32(f->nrep))); }

V PrefillBlock::real(Builder& b, V rr) const {
  return b.binary(kir::Opc::And, b.lt(rr, b.i32(Mq * f->nrep)), b.lt(pos(b, rr), b.i32(f->Lq)));
}

V PrefillBlock::resultRow(Builder& b, V rr) const {
  V at = b.min(pos(b, rr), b.i32(f->Lq - 1));
  return b.add(b.mul(b.add(b.mul(bi, b.i32(f->Hq)), head(b, rr)), b.i32(f->Lq)), at);
}

V maskedScore(Builder& b, const Form& f, const MaskRow& row, V score, V t) {
  if (f.masked) return b.add(score, b.load(f.mask, b.add(row.maskAt, t)));
  if (!f.causal) return score;
  V visible = b.le(t, row.pos);
  if (f.window > 0) visible = b.binary(kir::Opc::And, visible, b.lt(b.sub(row.pos, t), b.i32(f.window)));
  return b.select(visible, score, b.f32(-std::numeric_limits<double>::infinity()));
}

KeyRange visibleKeys(Builder& b, const Form& f, const MaskRow& row, V lo, V hi) {
  if (!f.causal) return {lo, hi};
  hi = b.min(hi, b.add(b.min(row.pos, b.i32(f.Lk - 1)), b.i32(1)));
  if (f.window > 0) lo = b.max(lo, b.sub(row.pos, b.i32(f.window - 1)));
  return {lo, hi};
}

std::pair<V, V> headAndRest(Builder& b, V w, kir::Scalar t) {
  V h = b.convert(w, t);
  return {h, b.convert(b.sub(w, b.convert(h, kir::Scalar::F32)), t)};
}

V softmaxStep(Builder& b, V laneMax, const std::vector<V>& scores, int32_t m, int32_t l, double dropped,
              std::vector<V>& weights) {
  const double inf = std::numeric_limits<double>::infinity();
  V most = b.max(laneMax, b.shuffleXor(laneMax, 1));
  most = b.max(most, b.shuffleXor(most, 2));
  V old = b.get(m), mNew = b.max(old, most);
  // e^d as 2^(d log2(e)): one multiply and the device's 2^x (a few ulp, and
  // 0 for d = -inf), where an accurate e^x takes a dozen instructions a
  // weight; the multiply's rounding moves a weight e^d by at most |d| 2^-24
  // of itself, under 1e-6 for every weight above e^-16 of the row's largest.
  const double log2e = 1.4426950408889634074;
  auto expOf = [&](V d) { return b.exp2(b.mul(d, b.f32(log2e))); };
  V rescale = b.select(b.eq(mNew, b.f32(-inf)), b.f32(1), expOf(b.sub(old, mNew)));
  V sum = b.mul(b.get(l), rescale);
  for (V x : scores) {
    V w = b.select(b.eq(x, b.f32(-inf)), b.f32(dropped), expOf(b.sub(x, mNew)));
    sum = b.add(sum, w);
    weights.push_back(w);
  }
  b.set(l, sum);
  b.set(m, mNew);
  return rescale;
}

}  // namespace poot::attn

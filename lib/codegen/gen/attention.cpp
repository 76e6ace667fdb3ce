// The attention families' generators: the streaming, split-kv-partials and
// split-kv-combine schedules over the shared streaming body (streaming.h)
// here, the decode, decode-mma, prefill and prefill-mma bodies in their own
// files, each behind the checks every attention kernel makes. The request fixes the form
// (attention_form.h), so the operand layout is resolved once. A streaming
// workgroup's query row is (b * Hq + h) * Lq + r, the result's row; split-KV
// partials number their workgroups row * splits + split, the scratch slot
// they write. A causal row's lane loop runs only over the keys it can see
// (visibleKeys: none past its position, none before its window), so the keys
// past the causal edge are never read; the mask still scores every visited
// key (maskedScore), the one definition the decode schedule uses too.
#include <string>

#include "codegen/gen/attention_form.h"
#include "codegen/gen/generators.h"
#include "codegen/gen/index.h"
#include "codegen/gen/streaming.h"

namespace poot {

namespace {

using namespace attn;

// Query row `row`: its batch row, KV head and mask row.
struct QueryRow {
  V bi, g;
  MaskRow mask;
};

QueryRow queryRow(Builder& b, const Form& f, V row) {
  V rq = b.rem(row, b.i32(f.Lq));
  V bh = b.div(row, b.i32(f.Lq));
  V h = b.rem(bh, b.i32(f.Hq));
  V bi = b.div(bh, b.i32(f.Hq));
  return QueryRow{bi, b.div(h, b.i32(f.nrep)), maskRow(b, f, bi, h, rq)};
}

// The keys of query row `row` as the lane loop reads them.
attn::KeyReader keysOf(Builder& b, const KernelRequest& r, const Form& f, V row, const QueryRow& qr) {
  V bi = qr.bi, g = qr.g;
  V qAt = b.mul(row, b.i32(f.Dk));
  MaskRow mask = qr.mask;
  attn::KeyReader keys;
  keys.row = [&b, f, bi, g](V t) { return keyRow(b, f, bi, g, t); };
  keys.score = [&b, &r, f, bi, qAt, mask](V t, V at) {
    V dot = attn::dotProduct(b, f.q, qAt, f.k, b.mul(at, b.i32(f.Dh)), f.Dh, b.f32(0));
    if (f.split) {
      V shared = b.mul(b.add(b.mul(bi, b.i32(f.Lk)), t), b.i32(f.Ds));  // k_shared[b, 0, t, 0]
      dot = attn::dotProduct(b, f.q, b.add(qAt, b.i32(f.Dh)), f.ks, shared, f.Ds, dot);
    }
    return maskedScore(b, f, mask, attn::transformScore(b, r, dot), t);
  };
  keys.value = [&b, f](V at, V d) { return b.load(f.v, b.add(b.mul(at, b.i32(f.Dv)), d)); };
  return keys;
}

// Runs the lane loop of query row `row` over the keys of [lo, hi) it can see
// (hi at most its key bound) and publishes.
void streamRow(Builder& b, const KernelRequest& r, const Form& f, attn::LaneStates& lanes, V lane, V row, V lo,
               V hi) {
  QueryRow qr = queryRow(b, f, row);
  KeyRange keys = visibleKeys(b, f, qr.mask, lo, b.min(hi, keyBound(b, f, qr.bi)));
  lanes.begin(lane);
  lanes.stream(keys.lo, keys.hi, keysOf(b, r, f, row, qr));
  lanes.publish();
}

kir::Kernel streaming(const GenInput& in, const Form& f) {
  const KernelRequest& r = in.request;
  int64_t lanes = r.schedule.lanes, rows = f.B * f.Hq * f.Lq;
  Builder b(in.entry, lanes, in.grid[0]);
  declareOperands(b, r, f);
  int32_t out = b.buffer("out", r.results[0].dtype, rows * f.Dv, true);
  attn::LaneStates states(b, lanes, f.Dv);
  V row = b.workgroupId(), lane = b.local();
  b.ifThen(b.lt(row, b.i32(rows)), [&] {
    streamRow(b, r, f, states, lane, row, b.i32(0), b.i32(f.Lk));
    attn::foldInto(b, states.states(), lane, lanes, f.Dv, out, b.mul(row, b.i32(f.Dv)));
  });
  return b.finish();
}

// One workgroup per (row, split): the split's chunk of the live range (whole
// strides of the lanes, splitChunk), folded over the lanes and written
// unnormalized as (o[dv], m, l).
kir::Kernel partials(const GenInput& in, const Form& f) {
  const KernelRequest& r = in.request;
  int64_t lanes = r.schedule.lanes, splits = r.schedule.splits, count = f.B * f.Hq * f.Lq * splits;
  Builder b(in.entry, lanes, in.grid[0]);
  declareOperands(b, r, f);
  int32_t scratch = b.buffer("scratch", DType::F32, count * (f.Dv + 2), true);
  attn::LaneStates states(b, lanes, f.Dv);
  V wg = b.workgroupId(), lane = b.local();
  b.ifThen(b.lt(wg, b.i32(count)), [&] {
    V row = b.div(wg, b.i32(splits)), split = b.rem(wg, b.i32(splits));
    KeyRange chunk = splitChunk(b, split, splits, keyBound(b, f, queryRow(b, f, row).bi), lanes);
    streamRow(b, r, f, states, lane, row, chunk.lo, chunk.hi);
    V at = b.mul(wg, b.i32(f.Dv + 2));
    attn::Folded whole = attn::foldStates(b, states.states(), lane, lanes, f.Dv,
                                          [&](V c, V num, V) { b.store(scratch, b.add(at, c), num); });
    b.ifThen(b.eq(lane, b.i32(0)), [&] {
      b.store(scratch, b.add(at, b.i32(f.Dv)), whole.max);
      b.store(scratch, b.add(at, b.i32(f.Dv + 1)), whole.den);
    });
  });
  return b.finish();
}

// One workgroup per row: the row's partials folded as the lanes are.
kir::Kernel combine(const GenInput& in, const Form& f) {
  const KernelRequest& r = in.request;
  int64_t lanes = r.schedule.lanes, splits = r.schedule.splits, rows = f.B * f.Hq * f.Lq, width = f.Dv + 2;
  Builder b(in.entry, lanes, in.grid[0]);
  int32_t scratch = b.buffer("scratch", DType::F32, rows * splits * width, false);
  int32_t out = b.buffer("out", r.results[0].dtype, rows * f.Dv, true);
  V row = b.workgroupId(), lane = b.local();
  b.ifThen(b.lt(row, b.i32(rows)), [&] {
    auto slot = [&](V i) { return b.mul(b.add(b.mul(row, b.i32(splits)), i), b.i32(width)); };
    attn::States parts{splits, [&](V i) { return b.load(scratch, b.add(slot(i), b.i32(f.Dv))); },
                       [&](V i) { return b.load(scratch, b.add(slot(i), b.i32(f.Dv + 1))); },
                       [&](V i, V c) { return b.load(scratch, b.add(slot(i), c)); }};
    attn::foldInto(b, parts, lane, lanes, f.Dv, out, b.mul(row, b.i32(f.Dv)));
  });
  return b.finish();
}

}  // namespace

namespace {

// What every attention kernel checks before its body: lanes, and indices
// within i32 (the split schedules' scratch too).
template <class Body>
Expected<kir::Kernel> attentionKernel(const GenInput& in, Body body) {
  const Schedule& s = in.request.schedule;
  Form f = formOf(in.request);
  if (s.lanes < 1) return makeError(ErrorKind::Capability, {}, "attention schedule " + s.kind + " has no lanes");
  int64_t scratch = s.splits > 1 ? f.B * f.Hq * f.Lq * s.splits * (f.Dv + 2) : 0;
  if (auto indexable = gen::checkIndexWidth(in, scratch); !indexable) return indexable.error();
  return body(in, f);
}

// The split schedules' rows are one query row a head.
template <class Body>
Expected<kir::Kernel> splitKernel(const GenInput& in, Body body) {
  return attentionKernel(in, [&](const GenInput& gi, const Form& f) -> Expected<kir::Kernel> {
    if (f.Lq != 1)
      return makeError(ErrorKind::Capability, {},
                       "split-kv attention needs one query row per head, got " + std::to_string(f.Lq));
    return body(gi, f);
  });
}

}  // namespace

Expected<kir::Kernel> genStreaming(const GenInput& in) { return attentionKernel(in, streaming); }
Expected<kir::Kernel> genSplitKvPartials(const GenInput& in) { return splitKernel(in, partials); }
Expected<kir::Kernel> genSplitKvCombine(const GenInput& in) { return splitKernel(in, combine); }
Expected<kir::Kernel> genDecode(const GenInput& in) { return attentionKernel(in, decodeKernel); }
Expected<kir::Kernel> genDecodeMma(const GenInput& in) { return attentionKernel(in, decodeMmaKernel); }
Expected<kir::Kernel> genPrefill(const GenInput& in) { return attentionKernel(in, prefillKernel); }
Expected<kir::Kernel> genPrefillMma(const GenInput& in) { return attentionKernel(in, prefillMmaKernel); }

}  // namespace poot

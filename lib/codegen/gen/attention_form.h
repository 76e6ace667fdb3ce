// The Attention request's form as the generators (attention.cpp, the
// streaming and split-KV schedules; decode.cpp, the GQA-packed one) read it:
// which operands it has, their sizes and buffers, and the addressing every
// schedule shares. The key row of key t is (b * Hkv + g) * Lk + t for a
// dense or split key and read[b, t] * Hkv + g for a paged one (the read word
// clamped into the pool, so no word can address outside it); the live bound
// len[b] is clamped into 0..=Lk. The mask is applied by one helper every
// schedule calls (maskedScore, over the row's MaskRow): an additive mask adds
// mask[b, h, i, t]; a causal one keeps the score of a key t <= qpos[b, i]
// (and qpos[b, i] - t < window) and gives -inf for any other key, whatever
// its score. Private to lib/codegen/gen.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "codegen/gen/generators.h"
#include "codegen/gen/index.h"
#include "codegen/gen/streaming.h"

namespace poot::attn {

// The request's form and sizes, and the operands' buffers (graph-format
// order: q, k, [k_shared], v, [read], [mask | qpos], [len]; -1 when absent).
// masked: an additive mask; causal: the query positions qpos i32 [B, Lq]
// instead, with window 0 for none.
struct Form {
  bool split = false, paged = false, masked = false, causal = false, live = false;
  int64_t B = 0, Hq = 0, Lq = 0, Dk = 0, Dv = 0, nrep = 1, Hkv = 0, Lk = 0;
  int64_t S = 0, Ds = 0, Dh = 0, Hm = 0;  // pool slots; shared and per-head key widths; mask heads
  int64_t window = 0;
  int32_t q = -1, k = -1, ks = -1, v = -1, read = -1, mask = -1, qpos = -1, len = -1;
};

Form formOf(const KernelRequest& r);

// The operands' buffers, in binding order.
void declareOperands(Builder& b, const KernelRequest& r, const Form& f);

// A half-open range of key positions.
struct KeyRange {
  V lo, hi;
};

// The key bound of batch row bi: Lk, or len[bi] clamped into 0..=Lk.
V keyBound(Builder& b, const Form& f, V bi);

// Split `split` of `splits` of the keys [0, bound): the live range cut into
// contiguous chunks of ceil(bound / splits) keys rounded up to a multiple of
// `granule`, so the work follows the live length, not the capacity, and a
// chunk is whole tiles. Splits past the live length get an empty range at
// bound (lo == hi).
KeyRange splitChunk(Builder& b, V split, int64_t splits, V bound, int64_t granule);

// The key (and value) row of key t of batch row bi, KV head g.
V keyRow(Builder& b, const Form& f, V bi, V g, V t);

// What the mask needs of query row rq of batch row bi, head h, computed once
// per row: the index of mask[bi, Hm == 1 ? 0 : h, rq, 0] (additive), or the
// row's position qpos[bi, rq] clamped into -1..=Lk (causal; with a window
// -1..=Lk - 1 + window, at most 2^31 - 1), which keeps what each key t in
// [0, Lk) sees and makes every difference below fit i32.
struct MaskRow {
  V maskAt = -1, pos = -1;
};
MaskRow maskRow(Builder& b, const Form& f, V bi, V h, V rq);

// The score of key t (i32) under the row's mask: score + mask[.., t]
// (additive), score or -inf (causal), score (none).
V maskedScore(Builder& b, const Form& f, const MaskRow& row, V score, V t);

// The keys [lo, hi) narrowed to the ones a causal row can see: at most its
// position plus one, and with a window from position - window + 1; the same
// range for any other mask. May leave lo >= hi (no key).
KeyRange visibleKeys(Builder& b, const Form& f, const MaskRow& row, V lo, V hi);

// A prefill workgroup's block (prefill.cpp, prefill_mma.cpp): workgroup wg
// of B * Hkv * ceil(Lq / Mq) is batch row bi, KV head g and positions i0 ..
// i0 + Mq - 1; its row rr is query head g * n_rep + rr % n_rep at position
// i0 + rr / n_rep, real when rr < Mq * n_rep and the position < Lq (other
// rows are computed on the last position and never stored). It visits the
// keys [lo, hi): the bound's, narrowed under a causal mask to the union of
// what its positions see, so tiles wholly past the causal edge (or before
// every row's window) are never loaded; last = max(hi - 1, 0). Every row
// sees (before an additive mask) the keys [allLo, allHi): the bound's, under
// a causal mask what all its positions see (empty when allLo >= allHi).
struct PrefillBlock {
  const Form* f = nullptr;
  int64_t Mq = 0;
  V bi = -1, g = -1, i0 = -1, lo = -1, hi = -1, last = -1, allLo = -1, allHi = -1;

  V head(Builder& b, V rr) const;
  V pos(Builder& b, V rr) const;
  V real(Builder& b, V rr) const;
  V resultRow(Builder& b, V rr) const;  // the row of q and out: (bi * Hq + head) * Lq + position, clamped
};
PrefillBlock prefillBlock(Builder& b, const Form& f, V wg, int64_t Mq);

// What a prefill stages of each key, segment by segment: the key (k, then
// k_shared for a split key, at its offset in the tile's row) and the value.
struct TileSegment {
  int32_t buffer;
  int64_t width, offset;  // elements a row; where they start in the tile's row
  bool value;
};
std::vector<TileSegment> tileSegments(const Form& f);
// The index in sg's buffer of the first element of key t's row (batch row
// bi, KV head g).
V segmentRow(Builder& b, const Form& f, const TileSegment& sg, V bi, V g, V t);

// The end both decode schedules share (decode.cpp): `slices` states (o, m,
// l) of each of a workgroup's `rows` rows in workgroup memory, state i of
// row qi at slot i * rows + qi (o: dv f32 a slot), folded after a barrier
// into the output row queryRow(qi), or with splits > 1 into its scratch
// slot (row, split) exactly as the split-kv partials write it.
struct DecodeFold {
  int32_t o, m, l;
  int64_t slices, rows;
};
DecodeFold decodeFold(Builder& b, int64_t slices, int64_t rows, int64_t dv);
void foldDecodeRows(Builder& b, const Form& f, const DecodeFold& fold, const std::function<V(V)>& queryRow, V tid,
                    int64_t threads, int64_t splits, V split, int32_t out);

// What the tensor-core kernels (prefill_mma.cpp, decode_mma.cpp) share:
// accumulator fragments (index.h), and a weight w (f32) as the two-byte type
// t's head h = t(w) and remainder t(w - h) (w - h is exact in f32), which
// the value products take one after the other.
using gen::FragmentVars;
using gen::getFragment;
using gen::setFragment;
using gen::zeroFragment;
std::pair<V, V> headAndRest(Builder& b, V w, kir::Scalar t);
// One online-softmax step of a fragment row, which the 4 lanes t of its g
// share (each holding `scores` of some of its keys, `laneMax` their
// maximum): the row's maximum over the 4 (ShuffleXor 1 and 2, so they agree
// exactly), the running maximum and denominator share in variables m and l
// updated, the weights exp(s - m) appended to `weights` (`dropped` for a
// -inf score); gives the rescale exp(m - m_new) of the running output (1
// while the row has seen no key).
V softmaxStep(Builder& b, V laneMax, const std::vector<V>& scores, int32_t m, int32_t l, double dropped,
              std::vector<V>& weights);

// The decode and prefill schedules' kernels (decode.cpp, decode_mma.cpp,
// prefill.cpp, prefill_mma.cpp).
kir::Kernel decodeKernel(const GenInput& in, const Form& f);
kir::Kernel decodeMmaKernel(const GenInput& in, const Form& f);
kir::Kernel prefillKernel(const GenInput& in, const Form& f);
kir::Kernel prefillMmaKernel(const GenInput& in, const Form& f);

}  // namespace poot::attn

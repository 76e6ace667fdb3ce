// The Attention request's form as the generators (attention.cpp, the
// streaming and split-KV schedules; decode.cpp, the GQA-packed one) read it:
// which operands it has, their sizes and buffers, and the addressing every
// schedule shares. The key row of key t is (b * Hkv + g) * Lk + t for a
// dense or split key and read[b, t] * Hkv + g for a paged one (the read word
// clamped into the pool, so no word can address outside it); the live bound
// len[b] is clamped into 0..=Lk. Private to lib/codegen/gen.
#pragma once

#include <cstdint>

#include "codegen/gen/generators.h"
#include "codegen/gen/streaming.h"

namespace poot::attn {

// The request's form and sizes, and the operands' buffers (graph-format
// order: q, k, [k_shared], v, [read], [mask], [len]; -1 when absent).
struct Form {
  bool split = false, paged = false, masked = false, live = false;
  int64_t B = 0, Hq = 0, Lq = 0, Dk = 0, Dv = 0, nrep = 1, Hkv = 0, Lk = 0;
  int64_t S = 0, Ds = 0, Dh = 0, Hm = 0;  // pool slots; shared and per-head key widths; mask heads
  int32_t q = -1, k = -1, ks = -1, v = -1, read = -1, mask = -1, len = -1;
};

Form formOf(const KernelRequest& r);

// The operands' buffers, in binding order.
void declareOperands(Builder& b, const KernelRequest& r, const Form& f);

// The key bound of batch row bi: Lk, or len[bi] clamped into 0..=Lk.
V keyBound(Builder& b, const Form& f, V bi);

// The key (and value) row of key t of batch row bi, KV head g.
V keyRow(Builder& b, const Form& f, V bi, V g, V t);

// The index of mask[bi, Hm == 1 ? 0 : h, rq, 0].
V maskBase(Builder& b, const Form& f, V bi, V h, V rq);

// The decode and prefill schedules' kernels (decode.cpp, prefill.cpp).
kir::Kernel decodeKernel(const GenInput& in, const Form& f);
kir::Kernel prefillKernel(const GenInput& in, const Form& f);

}  // namespace poot::attn

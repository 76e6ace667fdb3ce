// ops::, the building blocks every model family is traced from. Each function
// appends the primitive decomposition the seed (attention-and-kv-cache.txt)
// fixes for it, so the compiler's passes recognize the chains and substitute
// the formed ops (Attention, Rope) whose semantics docs/graph-format.md and
// the oracle define. Attention has one core shared by every form: the KV
// layout (fixed capacity or paged pools), the live length, the split key,
// sliding windows, ALiBi biases and the softcap are options of a Step and an
// AttentionSpec, not separate copies. Functions take the Builder, record a
// refusal in it rather than fail, and return the value they built.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "trace/builder.h"

namespace poot::trace::ops {

// ---------------------------------------------------------------------------
// The step: what every layer of one traced call shares.

enum class KvLayout { Fixed, Paged };

// Block size of a paged KV cache, in positions (the runtime's block tables).
inline constexpr int64_t kBlockSize = 16;

struct StepSpec {
  int64_t batch = 1;         // B: batch rows (mixed: the step's T tokens, one a row)
  int64_t tokens = 1;        // L: new tokens (query rows) per batch row (mixed: 1)
  // Mixed (ragged) paged step: R, the sequences its T tokens belong to (the
  // rows of the read map and of the logits); 0 for every other step.
  int64_t sequences = 0;
  int64_t capacity = 256;    // cap: KV positions held per batch row
  KvLayout kv = KvLayout::Fixed;
  int64_t poolSlots = 0;     // paged: slots of each layer's pool; 0 means rows * capacity
  bool live = false;         // bound attention by the live length len = pos + L
  bool nextToken = false;    // also output `next`: each logits row's token, greedy or drawn (ops::logits)
  DType dtype = DType::F32;    // activations
  DType kvDtype = DType::F32;  // the KV caches (converted from and to dtype around their writes and reads)
  DType weightDtype = DType::F32;  // weights, as the checkpoint stores them (ops::weight)
};

// The step's graph-level values, made by begin_step. Masks are memoized here
// so every layer of the same kind shares one.
struct Step {
  StepSpec spec;
  // slot `pos` range [0, cap - L], the first new position: i32[] for the
  // whole step (fixed), i32[B] one a batch row (paged)
  ValueId pos = kNone;
  ValueId positions = kNone;  // pos + j, the position of query row j: i32[L] (fixed), i32[B, L] (paged)
  ValueId write = kNone;      // paged: slot `write` i32[B*L] range [-1, poolSlots - 1]
  ValueId read = kNone;       // paged: slot `read` i32[B, cap] range [0, poolSlots - 1]; mixed: the
                              // token's row of it, Gather(read [R, cap], row) i32[T, cap]
  ValueId sample = kNone;     // mixed: slot `sample` i32[R] range [0, T - 1], the token whose logits row r returns
  ValueId len = kNone;        // live: i32[B] len = pos + L (per row when paged) after its IndexGuard{1, cap}
  ValueId active = kNone;     // live: bool[B, cap], key position t < len[b]
  std::map<std::tuple<int64_t, ValueId>, ValueId> masks;  // (window, bias) -> additive mask
};

// Checks the spec (positive sizes, L <= cap, paged capacity a multiple of
// kBlockSize, enough pool slots) and declares the step's slots: `pos`, the
// paged `write` and `read` maps, and for a live step `len` with its guard
// (the witness `len.ok` declared a validation output). A paged step's rows
// are independent sequences, so each has its own position; a fixed cache is
// written at one position for all rows (DynamicUpdateSlice). A mixed step's
// rows are its T tokens, each at its own position, and several may belong to
// one sequence (a prefill chunk beside decodes): it declares `read` as
// [R, cap], a slot `row` i32[T] (range [0, R - 1]) naming each token's row of
// it, and the slot `sample` that picks the logits' rows.
Step begin_step(Builder& b, const StepSpec& spec);

// The shape that puts the query positions on the axis before a last axis
// (keys, blocks) they are compared with: [L, 1] (fixed) or [B, L, 1] (paged).
Shape query_column(const Step& s);

// ---------------------------------------------------------------------------
// KV caches.

// One layer's cache of one stream (K, V, or one part of a split key): a
// state f32[B, heads, cap, dim] for a fixed layout, a pool
// f32[poolSlots, heads, dim] for a paged one. `name` is taken verbatim.
ValueId declare_cache(Builder& b, const Step& s, const std::string& name, int64_t heads, int64_t dim);

// Writes the step's new rows [B, heads, L, dim] into `cache` and declares the
// state_out; returns the [B, heads, cap, dim] view attention reads.
//   fixed: DynamicUpdateSlice(cache, rows, pos) along axis 2, the view is the new cache;
//   paged: ScatterUpdate(pool, write, rows as [B*L, heads, dim]), then
//          Gather(pool, read, axis 0) -> [B, cap, heads, dim] -> Transpose -> view.
// A live step then selects the rows at t >= len to zero (a true Select).
ValueId cache_update(Builder& b, Step& s, ValueId cache, ValueId rows);

struct KvCache {
  ValueId k = kNone, v = kNone;
};
// Declares `<prefix>k_cache` and `<prefix>v_cache` (fixed) or `<prefix>k_pool`
// and `<prefix>v_pool` (paged); prefix is e.g. "layers.0.".
KvCache declare_kv(Builder& b, const Step& s, const std::string& prefix, int64_t kvHeads, int64_t keyDim,
                   int64_t valueDim);

// The split key of multi-head latent attention: a per-head part, one rotary
// part shared by every head, and a value of its own width.
struct SplitKvCache {
  ValueId kNope = kNone;  // [B, H, cap, Dn]   (paged: [S, H, Dn])
  ValueId kPe = kNone;    // [B, 1, cap, s]    (paged: [S, 1, s])
  ValueId v = kNone;      // [B, H, cap, Dv]   (paged: [S, H, Dv])
};
// Declares `<prefix>k_nope_cache`, `<prefix>k_pe_cache`, `<prefix>v_cache`
// (paged: `_pool` in place of `_cache`).
SplitKvCache declare_split_kv(Builder& b, const Step& s, const std::string& prefix, int64_t heads, int64_t nopeDim,
                              int64_t ropeDim, int64_t valueDim);

// ---------------------------------------------------------------------------
// Attention.

struct AttentionSpec {
  double scale = 0;                // the score scale, usually 1/sqrt(Dk)
  std::optional<double> softcap;   // scores -> tanh(s / c) * c, before the mask
  int64_t window = 0;              // > 0: sliding window, key t visible to row j only if t > pos + j - window
  ValueId bias = kNone;            // an extra additive bias f32[1, Hq, 1, cap] (ALiBi, see alibi_bias);
                                   // the mask's head axis becomes Hq
  bool causal = true;              // false: no causal mask (only window, bias and the live bound)
};

// GQA repeat over the head axis: x [B, Hkv, T, D] -> Reshape [B, Hkv, 1, T, D]
// -> Broadcast [B, Hkv, n_rep, T, D] -> Reshape [B, Hkv*n_rep, T, D]. No eqns
// (x returned) when n_rep == 1.
ValueId repeat_kv(Builder& b, ValueId x, int64_t n_rep);

// The additive mask [B, Hm, L, cap] of the step (0 visible, -inf hidden):
// visible(j, t) = t <= pos + j (causal) and t > pos + j - window (window > 0),
// with row b's own pos when the step is paged,
// built from `positions` against an Iota, plus `bias` (Hm = Hq) when given.
// Memoized in the step. kNone when nothing is masked (a live decode without
// window or bias: the live bound already hides t > pos).
ValueId attention_mask(Builder& b, Step& s, const AttentionSpec& spec);

// The core every form shares, on keys and values in their [B, Hkv, cap, D]
// view (already written and, when live, row-selected): repeat_kv, scores =
// MatMul(q, Transpose(k)), Mul by the scale, the softcap (Div, Tanh, Mul),
// Add of the mask, for a live step Select of the scores at t >= len to -inf,
// then ReduceMax -> Sub -> Exp -> ReduceSum -> Div and MatMul(p, v).
// q [B, Hq, L, Dk] -> [B, Hq, L, Dv].
ValueId attention_core(Builder& b, Step& s, ValueId q, ValueId k, ValueId v, const AttentionSpec& spec);

// Writes k_new / v_new [B, Hkv, L, D] into the layer's caches and attends:
// cache_update twice, then attention_core. The form follows the step.
ValueId attention(Builder& b, Step& s, ValueId q, ValueId kNew, ValueId vNew, const KvCache& cache,
                  const AttentionSpec& spec);
// The seed's named forms, each `attention` with its precondition checked
// (a mismatch is a recorded error):
// decode over a fixed or paged cache (L == 1, not live);
ValueId attention_masked(Builder& b, Step& s, ValueId q, ValueId kNew, ValueId vNew, const KvCache& cache,
                         const AttentionSpec& spec);
// L query rows at positions pos + j, causal (not live);
ValueId attention_prefill(Builder& b, Step& s, ValueId q, ValueId kNew, ValueId vNew, const KvCache& cache,
                          const AttentionSpec& spec);
// bounded by the live length (a live step; decode or prefill).
ValueId attention_live(Builder& b, Step& s, ValueId q, ValueId kNew, ValueId vNew, const KvCache& cache,
                       const AttentionSpec& spec);
// Split key (MLA): writes kNope [B, H, L, Dn], kPe [B, 1, L, s] and vNew
// [B, H, L, Dv] into their caches, builds key = Concat(k_nope, Broadcast(k_pe)
// to [B, H, cap, s]) along the last axis, and runs attention_core (n_rep 1).
// q is [B, H, L, Dn + s].
ValueId attention_split(Builder& b, Step& s, ValueId q, ValueId kNope, ValueId kPe, ValueId vNew,
                        const SplitKvCache& cache, const AttentionSpec& spec);

// The standard ALiBi slopes for n heads (Press et al.; BLOOM's
// build_alibi_tensor): for the largest power of two p <= n, 2^(-8i/p) for
// i = 1..p, then 2^(-4(2i-1)/p) for the remaining n - p heads.
std::vector<double> alibi_slopes(int64_t heads);
// bias[0, h, 0, t] = slope_h * t, f32[1, heads, 1, cap]: a Constant of the
// slopes times the key positions (Iota). Pass it as AttentionSpec::bias.
ValueId alibi_bias(Builder& b, const Step& s, int64_t heads);

// ---------------------------------------------------------------------------
// Rotary position embedding.

enum class RopeStyle { Half, Interleaved };

// inv_freq[i] = theta^(-2i / dim), i < dim/2, computed on the host in double.
std::vector<double> rope_inv_freq(double theta, int64_t dim);
// Llama 3's rope_scaling (type "llama3") applied to inv_freq on the host, as
// transformers' _compute_llama3_parameters does.
std::vector<double> rope_llama3_scale(std::vector<double> invFreq, double factor, double lowFreqFactor,
                                      double highFreqFactor, double originalMaxPositions);

struct RopeTables {
  ValueId cos = kNone, sin = kNone;  // f32[L, D/2] each (paged: f32[B, 1, L, D/2], one row's positions a batch row)
};
// cos/sin tables in the graph: freqs = Convert(positions)[L,1] ([B,1,L,1] paged) * inv_freq
// (a Constant [1, D/2]), then Cos and Sin, each times `attentionScaling`
// when it is not 1 (YaRN's mscale).
RopeTables rope_tables(Builder& b, const Step& s, const std::vector<double>& invFreq, double attentionScaling = 1.0);
// x [B, H, L, D]. Half (rotate-half): x * cat(cos, cos) + cat(-x2, x1) * cat(sin, sin)
// with x1, x2 the two halves of the last axis. Interleaved: pairs (x[2i],
// x[2i+1]) rotated by the i-th angle, through a [.., D/2, 2] reshape. Both
// equal Rope(x, cos, sin){style} of the formed op.
ValueId rope(Builder& b, ValueId x, const RopeTables& t, RopeStyle style);

// ---------------------------------------------------------------------------
// Around attention. Weights are declared by the family with their checkpoint
// names (ops::weight) and passed in; these functions only compute. A weight
// may have another dtype than the activations (StepSpec::weightDtype): each
// function converts it where it computes, so the weight itself is read in
// its stored dtype: linear as MatMul(x, Transpose(Convert(W))) (the form
// the matmul-operands pass folds into a MatMul reading W as stored), the
// embedding as Convert(Gather(table)), the norms' weights through the
// Convert to f32 they compute in, a bias converted before its Add.

// A weight named `name` of the step's weight dtype.
ValueId weight(Builder& b, const Step& s, const std::string& name, Shape shape);

// Gather(table [V, H], tokens [B, L], axis 0) -> [B, L, H], in dtype `dt`
// (Convert after the Gather when the table's dtype differs).
ValueId embedding(Builder& b, ValueId table, ValueId tokens, DType dt);
// x * rsqrt(mean(x^2, -1) + eps) * w, computed in f32 (Convert around it
// when x is not f32). unitOffset: Gemma's (1 + w).
ValueId rms_norm(Builder& b, ValueId x, ValueId w, double eps, bool unitOffset = false);
// (x - mean) * rsqrt(var + eps) * w + bias over the last axis, in f32.
ValueId layer_norm(Builder& b, ValueId x, ValueId w, ValueId bias, double eps);
// MatMul(x, Transpose(W)) (+ bias): HF's W is [out, in]; W and the bias
// converted to x's dtype first when theirs differs.
ValueId linear(Builder& b, ValueId x, ValueId w, ValueId bias = kNone);
// x * sigmoid(x)
ValueId silu(Builder& b, ValueId x);
// exact: 0.5 x (1 + erf(x / sqrt 2)); tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
ValueId gelu(Builder& b, ValueId x, bool tanhApprox);

enum class Activation { Silu, Gelu, GeluTanh };
ValueId activation(Builder& b, ValueId x, Activation act);

// Gated MLP: down(act(gate(x)) * up(x)): SwiGLU with Silu, GeGLU with Gelu*.
ValueId glu_mlp(Builder& b, ValueId x, ValueId gate, ValueId up, ValueId down, Activation act);
// Plain MLP: down(act(up(x) + upBias)) + downBias (BLOOM, GPT-2).
ValueId mlp(Builder& b, ValueId x, ValueId up, ValueId upBias, ValueId down, ValueId downBias, Activation act);
// tanh(x / c) * c (Div, Tanh, Mul).
ValueId softcap(Builder& b, ValueId x, double cap);

// [B, L, H*D] -> [B, H, L, D] (Reshape, Transpose) and back.
ValueId split_heads(Builder& b, ValueId x, int64_t heads, int64_t headDim);
ValueId merge_heads(Builder& b, ValueId x);

// Final logits: x [B, L, H] times the head [V, H] (lm_head, or the tied
// embedding table), optional softcap, in f32, named exactly `logits`, and
// declared an output. A mixed step first takes the rows `sample` names, so
// its logits are [R, 1, V]: one token a sequence. With StepSpec::nextToken
// the output `next` i32[B, L] follows: Sample of the logits under the inputs
// temperature, top_k, top_p, min_p and uniform (each [B, L], one a row of
// logits; oracle/sample.h) after the penalties repetition_penalty f32[B],
// seen i32[B, capacity] and seen_penalty f32[B, capacity] (a list a
// sequence, ir/ops.h kSamplePenalties), so a caller reads B * L ids, not
// B * L * V logits.
ValueId logits(Builder& b, const Step& s, ValueId x, ValueId head, std::optional<double> finalSoftcap = {});

}  // namespace poot::trace::ops

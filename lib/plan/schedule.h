// The schedule rules: how many lanes an attention workgroup gets, when a
// decode is split over the keys and into how many chunks, how a workgroup
// count is laid over the device's grid, and the plain schedule of every other
// kernel. Each rule reads only the device profile and the shape, so the
// planner (planner.h) and its tests share one definition; docs/planner.md
// states them in words. The rules a family registry walks (family.h) are
// declared here, family by family, and listed in families.cpp. Schedules are
// plain data (plan.h) and print as one line.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "plan/family.h"
#include "plan/plan.h"
#include "plan/profile.h"

namespace poot {

// The widest attention lane count: lanes threads per workgroup, each lane's
// running state (o[dv], m, l) kept in workgroup memory.
constexpr int64_t kMaxLanes = 64;
// Split-KV bounds: at most this many chunks, none shorter than this.
constexpr int64_t kMaxSplits = 16;
constexpr int64_t kMinChunkKeys = 128;
// Threads per workgroup of the plain (non-attention) kernels, at most.
constexpr int64_t kPlainWorkgroup = 256;

// Bytes of one lane's running state: (dv + 2) f32.
inline int64_t laneStateBytes(int64_t dv) { return (dv + 2) * 4; }

// The widest power of two, at most 64 and at most max_workgroup_size, with
// lanes * (dv + 2) * 4 bytes within workgroup_memory_bytes; 0 when even one
// lane does not fit (the planner refuses with AttentionLds).
int64_t attentionLanes(int64_t dv, const DeviceProfile& d);

// `workgroups` laid over the grid: x = min(count, limit x),
// y = ceil(count / x), z = 1; nullopt when y passes the y limit.
std::optional<std::array<int64_t, 3>> foldGrid(int64_t workgroups, const DeviceProfile& d);

// The split-KV decision for an attention of Lq queries a row over Lk keys of
// value width dv, launched as `groups` workgroups that each serve `packed`
// query rows (streaming: B * Hq of one row; decode: B * Hkv of n_rep rows).
// splits == 1 keeps one workgroup per group; `reason` says why (or, when
// split, how it was chosen), for remarks and tests.
struct SplitDecision {
  int64_t splits = 1;
  std::string reason;
};
SplitDecision chooseSplits(int64_t groups, int64_t packed, int64_t lq, int64_t lk, int64_t dv,
                           const DeviceProfile& d);

// Bytes of the split-KV partial state: rows * splits * (dv + 2) f32.
inline int64_t partialStateBytes(int64_t rows, int64_t splits, int64_t dv) { return rows * splits * laneStateBytes(dv); }

// The widest load, `most` (a power of two), ..., 2 or 1 elements, that
// divides every width given (so every row of those widths, and every run of
// it, stays aligned to it).
int64_t widestLoad(std::initializer_list<int64_t> widths, int64_t most = 4);

// The GQA-packed decode schedule ("decode", plan.h): one workgroup per (batch
// row, KV head[, split][, row group]) serves `packed` query rows of that head
// (all n_rep * Lq of them, or a row group's share: tileM) from one read of
// each key and value row. Its fields: workgroupSize
// (= lanes) threads; kLanes threads share each key's dot products (q held in
// their registers, a slice each); `vector` elements a wide load; tileK keys a
// tile (16 bytes of the dtype q, the keys and the values share: 4 f32 or
// 8 two-byte elements, fewer where a width needs it; `operands` is F32
// where they differ). A tile's value rows are shared by decodeValueLanes
// threads each, so workgroupSize / decodeValueLanes key slices run the
// online softmax side by side and fold at the end. chooseDecode gives no
// schedule (and says why) past kMaxPackedRows rows or when no workgroup
// fits the device.
constexpr int64_t kMaxPackedRows = 8;
Choice chooseDecode(int64_t packed, int64_t dh, int64_t ds, int64_t dv, DType operands, const DeviceProfile& d);
// The decode family's rule: chooseDecode for all `packed` rows of a KV head,
// then its splits (chooseSplits over B * Hkv workgroups), then its row
// groups (chooseRowGroups), the decode chosen again for a row group's rows.
Choice decodeRule(const AttentionShape& a, const DeviceProfile& d);
// The tensor-core decode ("decode-mma"), tried before chooseDecode: where
// q, k and v are all bf16 (or all f16) and the profile lists the warp op
// m16n8k16 of that dtype, a workgroup of warps serves all `packed` rows of
// its KV head (tileM, at most kDecodeMmaRows: the op's 16 rows, the rest
// zero) from one read of its keys. Each step of tileK * warps keys, warp w
// takes keys w * tileK .. + tileK - 1: their scores are tileK / 8 m16n8k16
// products a step of 16 key dims, the weights a head and a remainder of the
// dtype (two products a slice of 8 value columns and 16 keys); the key and
// value fragments are loaded from memory straight into the registers, `vector`
// elements a load (16 bytes where the widths allow), and only the warps'
// final states pass through workgroup memory (their fold: warps * packed *
// (dv + 2) f32). It needs every row of a KV head to drop the same keys
// (`rowsShareMask`: no additive mask, a causal one only at one query row),
// key segments of whole steps of 16 and a value a multiple of 8 wide, and
// at most kDecodeMmaKeyWidth and kDecodeMmaValueWidth (the q and output
// fragments live in registers). No schedule and no reason where the
// profile has no such op; otherwise the reason says why it declined.
//
// Its workgroups: the `groups` (B * Hkv) split as chooseSplits splits them
// (at least one a compute unit), or, where every chunk then keeps
// kDecodeMmaChunkKeys keys or more, into the fewest splits (a power of two,
// kMaxSplits at most) that make kDecodeMmaFill workgroups a compute unit;
// then kDecodeMmaWideWarps warps a workgroup where the workgroups are at
// most one a compute unit, else kDecodeMmaWarps. On the H200 (bench/attention
// NOTES, session 19) the 4-warp kernel keeps 3 workgroups a unit: four a
// unit gained 2 to 10% over one at B = 8 and 32 where the chunks are long,
// two a unit (1.3 waves) lost 12%, short chunks lost 10 to 26%, and 8 warps
// where one workgroup holds a unit gained 1.4 to 1.6x at B = 1; 32 keys a
// warp and step (tileK) rather than 16, 2 to 12% but at B = 1 and 1k keys.
constexpr int64_t kDecodeMmaWarps = 4, kDecodeMmaWideWarps = 8, kDecodeMmaRows = 16, kDecodeMmaKeys = 32;
constexpr int64_t kDecodeMmaKeyWidth = 192, kDecodeMmaValueWidth = 128;
constexpr int64_t kDecodeMmaChunkKeys = 1024, kDecodeMmaFill = 4;
Choice decodeMma(const AttentionShape& a, const DeviceProfile& d);
// Row groups: when the decode's (group, split) workgroups would keep at most
// a quarter of the compute units busy, a KV head's `packed` query rows are
// shared out over R workgroups that each read the same keys (together, so
// mostly from the cache): the largest divisor R of `packed` with
// workgroups * R <= compute_units (one wave). 1 otherwise.
int64_t chooseRowGroups(int64_t workgroups, int64_t packed, const DeviceProfile& d);
// Threads sharing one value row: the runs of `vector` elements of a dv-wide
// row, rounded up to a power of two, at most `threads` (one run a thread
// where the workgroup has enough).
int64_t decodeValueLanes(int64_t dv, int64_t vector, int64_t threads);
// The decode kernel's workgroup memory, in f32 words, as the generator
// declares it: the score partials (kLanes planes of decodePlane words), the
// tile's scores (packed * tileK) and the key slices' states for the final
// fold (slices * packed * (dv + 2)).
int64_t decodePlane(const Schedule& s, int64_t packed);
int64_t decodeWords(const Schedule& s, int64_t packed, int64_t dv);

// The tiled prefill schedule ("prefill", plan.h) for many query rows: one
// workgroup per (batch row, KV head, block of tileM / n_rep query positions)
// owns tileM query rows (the n_rep heads of each position) and walks the keys
// in tiles of tileN staged in workgroup memory; each of its (tileM /
// threadM) * (tileN / threadN) threads keeps a threadM x threadN block of
// scores and threadM rows of the output in registers; `vector` elements a
// load. choosePrefill takes the largest of the 64 x 64 (4 x 4 a thread),
// 32 x 32 (4 x 2) and 16 x 16 (4 x 4) tiles that fits the device and holds
// n_rep rows, or gives no schedule and says why. `operands` is the dtype q,
// k and v share (F32 where they differ). prefillRule, the family's rule,
// does not apply to one query row (a decode).
Choice choosePrefill(int64_t nrep, int64_t dh, int64_t ds, int64_t dv, DType operands, const DeviceProfile& d);
Choice prefillRule(const AttentionShape& a, const DeviceProfile& d);
// Where the profile has a warp matrix multiply a prefill can use, a prefill
// first tries the tensor-core form of the same schedule ("prefill-mma"):
// tileM = 64 rows a workgroup, 16 a warp (so 128 threads), tileN = 64 keys
// a tile, scores and output in the warps' matrix fragments, for key and
// value widths up to kMaxMmaHeadWidth (the output fragment is Dv / 2
// registers a thread). `matrix` names the op: the first of the profile's
// list that is a warp's (not a warpgroup's) and takes the operands as they
// are: m16n8k16.bf16 (or .f16) where q, k and v are all bf16 (f16), each
// weight a head and a remainder of that dtype (two value products); else
// m16n8k8.tf32, each product of f32 operands taken as three tf32 products
// (the operands split into a head and a remainder). prefillMma gives no
// schedule and no reason where the profile has no such op; otherwise the
// reason says why it declined. prefillMmaRule, the family's rule, does not
// apply to one query row.
constexpr int64_t kMaxMmaHeadWidth = 256;
Choice prefillMma(int64_t nrep, int64_t dh, int64_t ds, int64_t dv, DType operands, const DeviceProfile& d);
Choice prefillMmaRule(const AttentionShape& a, const DeviceProfile& d);
// The staged tiles' row strides in words (docs/codegen.md says why each):
// q and the weights tileM + 4 (one row a key dim or a key), keys tileN + 1
// (one row a key dim), values dv rounded up to 4 (one row a key), the row
// partials tileN / threadN + 4 (one row a tile row).
struct PrefillLayout {
  int64_t qStride, kStride, vStride, partStride;
};
PrefillLayout prefillLayout(const Schedule& s, int64_t dk, int64_t dv);
// The prefill kernel's workgroup memory in f32 words: the q tile, one array
// for the key tile or else the weights and the value tile side by side
// (prefillSharedWords: the larger, rounded up to 4 words), tileM row
// partials and one flag word (each array a multiple of 4 words, the last
// but one).
int64_t prefillSharedWords(const Schedule& s, int64_t dk, int64_t dv);
int64_t prefillWords(const Schedule& s, int64_t dk, int64_t dv);
// "prefill-mma"'s tiles, strides in elements of the operand type (f32 for
// tf32, else the two-byte dtype). On tf32: q and keys (one row a query row
// or key) the key width rounded up to 8 (a matrix step) plus 4, values (one
// row a key) likewise, the weights (one row a query row, spilled over the q
// tile only on a tile with a non-finite value) tileN + 4. On the two-byte
// ops: q and keys the key width rounded up to 16 plus 8, the weights (a
// head and a remainder each) 2 tileN + 8, and the values a row for each pair of keys, the two keys' elements
// of a column side by side (so a B fragment's two keys are one word), the
// value width rounded up to 8 plus 8, twice. (Each keeps a warp's fragment
// loads off shared banks: docs/codegen.md.) Bytes: the q tile (or the
// weights, the larger), the key tile, the value tile and 16 bytes of flag
// words.
// On a warpgroup's op (m64nNk16) the tiles are one array in the 128-byte
// swizzle (kir.h, MmaShared): each tile a row a query row or key, its
// columns in blocks of 64 (128 bytes a row), the blocks one after the
// other, each block's rows one after the other: q (the weights spilled over
// it as above), then two stages of stageElems, each the keys (from kAt) and
// then the values (from vAt; a row a key), each start a multiple of 512
// elements (1024 bytes); row strides 64.
struct PrefillMmaLayout {
  int64_t qStride, kStride, vStride, pStride;
  int64_t elemBytes;  // 4 or 2
  int64_t dkStep;     // the key width rounded up to the op's k: 8 or 16
  int64_t kAt = 0, vAt = 0, stageElems = 0, tileElems = 0;  // warpgroup op: the one array's tiles
};
PrefillMmaLayout prefillMmaLayout(const Schedule& s, int64_t dk, int64_t dv);
int64_t prefillMmaBytes(const Schedule& s, int64_t dk, int64_t dv);

// The streaming schedules: one workgroup of `lanes` a query row, split
// over the keys where chooseSplits splits B * Hq workgroups (splitKvRule:
// "split-kv-partials", declining with chooseSplits' reason otherwise), else
// one (streamingRule, which always accepts), and the combine of a split
// schedule's partials.
Schedule streamingSchedule(int64_t lanes, int64_t dv);
Schedule partialsSchedule(int64_t lanes, int64_t splits, int64_t dv);
Schedule combineSchedule(int64_t lanes, int64_t splits);
Choice splitKvRule(const AttentionShape& a, const DeviceProfile& d);
Choice streamingRule(const AttentionShape& a, const DeviceProfile& d);
// kind "elementwise", "reduce" or "guard": min(256,
// max_workgroup_size) threads; no workgroup memory, except a guard's one
// i32 flag per thread.
Schedule plainSchedule(const std::string& kind, const DeviceProfile& d);

// The row selections' schedule ("rows": TopK, BlockTopK; gen/rows.cpp): one
// workgroup a row of n elements, of the smallest power of two of threads
// that is n or more, at most the plain workgroup; its workgroup memory a
// candidate of each thread (the element, widened as kernels load it, and
// an i32 index).
Schedule rowsSchedule(int64_t n, DType element, const DeviceProfile& d);

// Sample's schedule ("sample": gen/sample.cpp): one workgroup a row of n
// logits, of the smallest power of two of threads that is n or more, at most
// kWideRowsWorkgroup (a step has few rows, each rereads its row some 60
// times); its workgroup memory an f32 and an i32 a thread.
Schedule sampleSchedule(int64_t n, const DeviceProfile& d);

// A fused kernel (ir/fusion.h): a group without reductions runs the plain
// workgroup, one thread an element ("fused"); a group of `rowCount` rows of
// n elements ("fused-rows") runs the widest power of two of threads that n
// still gives work to all (at least one), within the plain workgroup, or
// within kWideRowsWorkgroup when the rows are fewer than the compute units,
// and keeps one partial a thread for each reduction: `partialBytes` is the
// bytes of one thread's partials (4 for each reduction).
constexpr int64_t kWideRowsWorkgroup = 1024;
Schedule fusedSchedule(bool rows, int64_t n, int64_t rowCount, int64_t partialBytes, const DeviceProfile& d);

// The MatMul schedule for a [batch..., m, k] x [k, n] (or transposed [n, k])
// product (a and b of those dtypes), and the reason it was chosen: the walk
// of matmulRules (family.h). Up to kGemvMaxRows rows a "gemv", reading b
// once for all of them (gemvRule; an i64 product too), or before it, for 2
// to kGemvMmaRows rows of two-byte operands, the "gemv-mma" (gemvMmaRule);
// more rows a "gemm-mma" (gemmMmaRule) or "gemm" (gemmRule): the largest
// tile no taller than the rows need that, with K split into at most
// kMaxGemmSplits chunks of at least kMinGemmSplitKeys keys (partials within
// one buffer), gives every compute unit a workgroup; one no gemm tile fits
// is a gemv of any rows, reading b once for every kGemvRows
// (gemvFallbackRule). A split gemm writes its partial sums to the eqn's
// scratch and a "matmul-combine" adds them. `groups` is the winning rule's
// (family.h, MatMulRule). The rules, in words, are in docs/planner.md.
constexpr int64_t kGemvRows = 16;
constexpr int64_t kGemvMaxRows = 8;
constexpr int64_t kMaxGemmSplits = 16;
constexpr int64_t kMinGemmSplitKeys = 512;
struct MatMulDecision {
  Schedule schedule;
  std::string reason;
  bool groups = false;
};
Choice gemvMmaRule(const MatMulShape& p, const DeviceProfile& d);
Choice gemvRule(const MatMulShape& p, const DeviceProfile& d);
Choice gemmMmaRule(const MatMulShape& p, const DeviceProfile& d);
Choice gemmRule(const MatMulShape& p, const DeviceProfile& d);
Choice gemvFallbackRule(const MatMulShape& p, const DeviceProfile& d);

// RoutedExperts for a decode ("routed-gemv": gen/experts.cpp): one
// workgroup a token row, for at most kRoutedGemvRows rows, of
// min(kPlainWorkgroup, max_workgroup_size) threads. The workgroup scores the
// E experts, picks the k best, then runs only those experts' gated MLPs as
// gemvs over their weight rows, so a row reads the router and k of the E
// experts. Footprint (routedGemvBytes): the scores, weights and selection
// flags of the E experts, one expert's I intermediate values and the H
// running sums, 4 bytes each. Declines: more rows, more bindings than
// max_bindings, or a footprint past workgroup_memory_bytes.
inline constexpr int64_t kRoutedGemvRows = 8;
int64_t routedGemvBytes(const RoutedShape& s);
Choice routedGemvRule(const RoutedShape& s, const DeviceProfile& d);
MatMulDecision chooseMatMul(int64_t batch, int64_t m, int64_t k, int64_t n, bool transposedB, DType a, DType b,
                            const DeviceProfile& d);
// ceil(a / b) for a >= 0, b > 0: blocks of b covering a (the MatMul
// schedules' row and column blocks, in the planner and the generators).
inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The tensor-core gemm ("gemm-mma", plan.h) for two-byte operands of one
// dtype on a profile with a matrix op for it: a workgroup of (tileM /
// threadM) x (tileN / threadN) warps owns a tileM x tileN block, each warp a
// threadM x threadN part of it as m16n8k16 fragments; the a and b tiles are
// staged in workgroup memory one row (of a) or column (of b) of tileK
// two-byte elements each, padded by kGemmMmaPad elements; `vector` elements
// a global load (along K, or along N for a plain b: the widest of 8, 4, 2,
// 1 that divides K, and N for a plain b). Splits as the gemm's. A tile of
// at most 64 rows whose every run is 16 bytes along K (a transposed b,
// vector 8) is copied asynchronously into kGemmMmaStages buffers, the
// copies of the next steps in flight while the warps multiply one; other
// tiles use one buffer, staged through registers (gemmMmaStages). On the
// H200 the copies gained 5-20% on the short tiles of most products and lost
// about 10% on the 128-row ones (bench/matmul NOTES, session 16).
//
// On a warpgroup's op (m64nNk16, kir.h's MmaShared) each warpgroup owns
// threadM = 64 rows and threadN columns of the block; the tiles are rows of
// tileK = 64 keys (128 bytes) in kir.h's 128-byte swizzle, unpadded, every
// step copied asynchronously into one of kGemmGroupStages buffers
// (kGemmGroupWideStages for the 256-wide tile, whose chains run across a
// step's barrier). It needs b K-major and K a multiple of 8.
//
// On a wave's op (m16n16k16, AMD's MFMA, 64 threads) the tilings are the
// warps' with each warp a wave of 64 (twice the threads), fragments of 16 x
// 16, and one buffer staged through registers: AMDGPU has no asynchronous
// copy in KIR. No AMD GPU has run them: the KIR interpreter checks them and
// LLVM's AMDGPU backend compiles them.
constexpr int64_t kGemmMmaPad = 8;
constexpr int64_t kGemmMmaStages = 3;
constexpr int64_t kGemmGroupStages = 3;
constexpr int64_t kGemmGroupWideStages = 4;  // the 256-wide warpgroup tile's (gen/matmul.cpp)
int64_t gemmMmaStages(const MatrixShape& op, int64_t tileM, int64_t tileN, int64_t vector, bool transposedB);
int64_t gemmMmaBytes(const MatrixShape& op, int64_t tileM, int64_t tileN, int64_t tileK, int64_t stages);
int64_t gemmMmaVector(int64_t k, int64_t n, bool transposedB, DType t);

// The tensor-core gemv ("gemv-mma", plan.h): a product of 2 to
// kGemvMmaRows rows (one row streams b faster on the gemv's SIMT lanes:
// bench/matmul NOTES, session 20) of a two-byte a and a K-major b of the same dtype (a
// weight [n, k] as models keep it), K a multiple of 8, on the profile's
// first warp m16n8k16 of that dtype. It is computed transposed: 16 rows of
// b are the op's A and 8 rows of a its B, so the op's 16 rows are columns
// of the result and its 8 columns rows of a. A workgroup of kGemvMmaWarps
// warps owns tileM = 8 NT rows (NT = ceil(m / 8)) and tileN =
// kGemvMmaWarps * kGemvMmaWarpColumns columns, a warp a share of them, and
// walks K in steps of tileK = kGemvMmaKeys; each step's rows of b and a are
// copied asynchronously into one of kGemvMmaStages stage buffers (a row of
// the step's keys each: workgroup memory kGemvMmaStages (tileM + tileN)
// tileK 2 bytes), and every warp multiplies the whole step for its columns
// (so a's rows, which every workgroup reads, are at most a third of the
// bytes staged, and no warp's sums need folding). On the H200 16 columns a
// warp streamed b faster than 32 or 64 at every shape of 8 to 32 rows, and
// 8 stages or 3 workgroups a compute unit gained nothing (bench/matmul
// NOTES, session 21). K splits as the gemm's (f32 partials, then a matmul-combine,
// chunks of gemmChunkKeys) into the most chunks that still keep the launch
// within one wave of kGemvMmaFill workgroups a compute unit, each chunk at
// least kGemvMmaChunkSteps steps: a second wave, partly filled, would
// stream at a fraction of the rate.
constexpr int64_t kGemvMmaRows = 32, kGemvMmaWarps = 4, kGemvMmaWarpColumns = 16, kGemvMmaKeys = 64;
constexpr int64_t kGemvMmaStages = 5, kGemvMmaFill = 2, kGemvMmaChunkSteps = 8;

// Words of padding after each k row of a gemm's staged tiles: 4, so every k
// row starts 16-byte aligned (the compute loop reads 4 words at once) while
// the stores of neighbouring threads (neighbouring k) spread over half the
// banks rather than a quarter.
constexpr int64_t kGemmPad = 4;
// The workgroups a MatMul schedule launches for products of one a with ns[i]
// columns each (one, or a product group's; a split gemm: every split's).
int64_t matmulWorkgroups(const Schedule& s, int64_t batch, int64_t m, const std::vector<int64_t>& ns);
// The keys of each chunk of a split gemm: K over its splits, rounded up to
// the tile's K step (the last chunk may be shorter).
int64_t gemmChunkKeys(const Schedule& s, int64_t k);
// The combine of a split gemm's `splits` partials: one thread an element of
// the result, in plain workgroups.
Schedule matmulCombineSchedule(int64_t splits, const DeviceProfile& d);

// "streaming lanes=64 splits=1 workgroup=64 memory=16896": the kind, then
// every field, always in this order; the fields of the kind's family
// (family.h, KernelFamily::fields) follow ("gemv ... k_lanes=32 unroll=4
// vector=4 thread=1x1", "gemm ... tile=128x128x8 thread=8x8", "decode ...
// k_lanes=8 vector=4 tile_k=64", "decode-mma ... rows=4 vector=8 tile_k=16
// matrix=m16n8k16.bf16").
std::string printSchedule(const Schedule& s);

}  // namespace poot

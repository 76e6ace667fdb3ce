// The plan in memory: plain data that the planner (requests, schedules,
// refusals), the buffer planner (liveness, arena coloring) and the plan file
// writer share, and that `pootc inspect` and `--emit=plan-text` print. The
// runtime never sees this header: it reads the plan file (schemas/plan.fbs).
//
// Who fills what: planGraph (planner.h) turns each eqn of a compiled graph
// into a KernelRequest with its Schedule, dedups identical requests into
// kernels and emits one or two Dispatches per eqn (split-KV: partials, then
// combine) plus the scratch each eqn declares; planBuffers (buffers.h) gives
// every value and scratch a Buffer and places the arena; codegen (codegen.h)
// fills each Kernel's blob; writePlan (plan_file.h) serializes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "plan/profile.h"

namespace poot {

// How a kernel runs. Streaming attention: one workgroup of `lanes` threads per
// (batch row, query head, query row); split-KV: `splits` partial workgroups
// per row, then a combine. Other kernels: `workgroupSize` threads over a grid.
// The kinds (docs/planner.md has the rules; schedule.h chooses them):
//   "streaming"          Attention / SelectedAttention, one workgroup per row
//   "split-kv-partials"  Attention decode, one workgroup per (row, split);
//                        split i covers keys [i*Lk/splits, (i+1)*Lk/splits)
//                        (floor division), writes the eqn's Scratch
//   "split-kv-combine"   one workgroup of `lanes` threads per row, reads the
//                        Scratch, writes the result
//   "decode"             Attention with few query rows a KV head: one
//                        workgroup per (batch row, KV head, split, row
//                        group) serves tileM of its n_rep * Lq rows from one
//                        read of the keys; with splits > 1 it writes the
//                        Scratch as the partials do and a combine follows
//                        (schedule.h, chooseDecode, chooseRowGroups)
//   "decode-mma"         the decode on a warp matrix op (bf16/f16 q, k, v):
//                        one workgroup per (batch row, KV head, split),
//                        tileM rows, warps of tileK keys a step, `matrix`
//                        the op (schedule.h, decodeMma)
//   "prefill"            Attention with many query rows: one workgroup per
//                        (batch row, KV head, block of tileM / n_rep query
//                        positions), key tiles of tileN in workgroup memory,
//                        a threadM x threadN block of scores a thread
//                        (schedule.h, choosePrefill)
//   "prefill-mma"        the same workgroups and tiles on a profile with
//                        tf32 matrix multiplies: threadM = 16 rows a warp,
//                        scores and output in matrix fragments
//   "elementwise"        one thread per result element (every data-movement,
//                        unary, binary, compare, select, convert and Rope op)
//   "in-place"           DynamicUpdateSlice, ScatterUpdate writing a
//                        state's new value over the state: one thread per
//                        element of the update, which it stores where it
//                        goes; the rest of the state is left as it is
//   "reduce"             one thread per result element
//   "gemv"               MatMul with few rows (decode): `kLanes` threads
//                        share each group of threadN output columns,
//                        splitting K between them in runs of `vector`
//                        elements (one wide load each), `unroll` runs of b
//                        in flight, then fold their partial sums in
//                        workgroup memory; a workgroup computes threadM
//                        rows of workgroupSize / kLanes * threadN columns
//   "gemm"               MatMul with many rows (prefill): a workgroup
//                        computes a tileM x tileN block of the result,
//                        stepping K by tileK through tiles of a and b staged
//                        in workgroup memory; each thread keeps a threadM x
//                        threadN register tile. With splits > 1 each block
//                        has one workgroup per chunk of K (gemmChunkKeys),
//                        chunk-major, writing its partial sums to the eqn's
//                        Scratch
//   "gemm-mma"           the gemm's blocks and splits on matrix units, for
//                        two-byte operands: a threadM x threadN block a
//                        warp, as fragments of `matrix` (schedule.h)
//   "gemv-mma"           MatMul with 2 to 32 rows of two-byte operands and
//                        b read along K, on a warp matrix op, computed
//                        transposed: a workgroup of 4 warps owns tileM rows
//                        and tileN columns, steps of tileK keys staged by
//                        asynchronous copies, each warp multiplying a step
//                        for its share of the columns (schedule.h); splits
//                        as gemm
//   "matmul-combine"     a split gemm's sum: one thread per result element
//                        adds its `splits` partials in chunk order
//   "fused"              a fusion group without reductions (ir/fusion.h):
//                        one thread per element of the root's shape
//                        computes every member it needs and stores each
//                        output
//   "fused-rows"         a fusion group with reductions: one workgroup per
//                        row of the row shape S; each reduction strides
//                        the row over the workgroup's threads, then folds
//                        their partials as a tree in workgroup memory
//   "rows"               TopK, BlockTopK: one workgroup per row (rowsSchedule)
//   "sample"             Sample: one workgroup per row (sampleSchedule)
//   "guard"              IndexGuard: one workgroup striding over the elements
struct Schedule {
  std::string kind;            // "streaming", "split-kv-partials", "elementwise", ...
  int64_t lanes = 0;           // attention: threads per workgroup
  int64_t splits = 1;          // split-KV: chunks of the key range; gemm: of K
  int64_t workgroupSize = 0;   // threads per workgroup
  int64_t workgroupMemory = 0; // bytes of workgroup memory
  // MatMul tiling; 0 in every kind that has none.
  int64_t kLanes = 0, unroll = 0, vector = 0;        // gemv; decode: kLanes and vector
  int64_t tileM = 0, tileN = 0, tileK = 0;           // gemm: a workgroup's block and K step; decode: tileM query rows
                                                     // a workgroup, tileK keys a tile; prefill: tileM rows, tileN keys
                                                     // a tile
  int64_t threadM = 0, threadN = 0;                  // gemv, gemm: a thread's rows x columns; prefill: rows x keys;
                                                     // gemm-mma: a warp's
  std::string matrix;                                // gemm-mma, gemv-mma, prefill-mma, decode-mma: the matrix op
                                                     // (ir/matrix.h) by name
  bool operator==(const Schedule&) const = default;
};

// One member of a fused kernel, in the group's eqn order: its op, attributes
// (without the fusion id) and result type, and where each operand comes
// from: an earlier step (arg >= 0) or the kernel's operand -1 - arg.
struct FusedStep {
  Op op;
  std::vector<int32_t> args;
  Type type;
  Attrs attrs;
  bool operator==(const FusedStep&) const = default;
};

// Exactly what to generate. Two eqns with equal requests share one kernel.
// A fused kernel's request (schedule "fused" or "fused-rows") carries its
// group's members as steps, and for each result the step it stores; op is
// then the root's op and attrs are empty.
struct KernelRequest {
  Op op;                       // the eqn's op (Attention, Add, MatMul, ...)
  std::vector<Type> operands;
  std::vector<Type> results;
  Attrs attrs;                 // the eqn's attributes (scale, softcap, key, mask, bound, ...)
  Schedule schedule;
  std::vector<FusedStep> steps;
  std::vector<int32_t> stores;  // fused: the step each result is
  bool operator==(const KernelRequest&) const = default;
};

enum class BufferRole : uint8_t {
  Input, Weight, State, Slot, Output, Validation, Temp, Scratch, View
};

struct Buffer {
  std::string name;      // the value's name, or "<eqn result>.scratch"
  BufferRole role;
  Type type;
  ValueId value = -1;    // -1 for scratch
  int64_t offset = 0;    // in the arena (Temp, Scratch); views: their base's
  int64_t bytes = 0;
  int32_t aliasOf = -1;  // a View's base buffer
  int64_t lo = 0, hi = 0;  // a Slot's declared range
  // Lifetime in eqn indices, inclusive, for arena buffers (Temp, Scratch) and
  // views of them: from the defining eqn to the last eqn that reads it
  // (through any view). -1 for buffers that live the whole run.
  int32_t first = -1, last = -1;
};

struct Kernel {
  std::string entry;          // entry point name in the blob
  KernelRequest request;
  std::vector<uint8_t> blob;  // SPIR-V words, PTX text or HSACO; filled by generateKernels
};

// A buffer a dispatch touches, named before buffers exist: a graph value, or
// (value == -1) the scratch an eqn declares, as an index into Plan::scratch.
struct Access {
  ValueId value = -1;
  int32_t scratch = -1;
  bool operator==(const Access&) const = default;
};

struct Dispatch {
  int32_t kernel;
  int32_t eqn;                     // the graph eqn it runs
  int64_t grid[3] = {1, 1, 1};
  std::vector<int32_t> bindings;   // buffer indices: operands, results, scratch
  std::vector<int64_t> params;     // push constants / scalar parameters
  // What it reads and writes, filled by planGraph for the buffer planner:
  // bindings are the buffers of `reads` then of `writes`, in order. Most
  // dispatches read their eqn's operands and write its results; a split-KV
  // partials dispatch reads the operands and writes the scratch, its combine
  // reads the scratch and writes the results.
  std::vector<Access> reads;
  std::vector<Access> writes;
};

// Plan-local scratch an eqn declares: `floats` f32 elements. Split-KV
// partials: rows * splits * (dv + 2), laid out as (o[dv], m, l) per
// (row * splits + split). Split-K MatMul partials: splits * the result's
// elements, chunk-major, each chunk laid out as the result. Written by the
// eqn's first dispatch, read by its combine, dead after it: never an
// export, never initialized.
struct Scratch {
  int32_t eqn;
  int64_t floats;
  int64_t bytes() const { return floats * 4; }
};

struct Plan {
  std::string deviceName;
  uint64_t deviceHash = 0;     // of the profile's fields (profileHash)
  Target target = Target::Spirv;  // the profile's target and arch (kernels are built for them)
  std::string deviceArch;
  int64_t memoryBandwidth = 0;  // the profile's memory_bandwidth_bytes_per_s, 0 where it gives none
  std::string key;             // hash of the requests and the device, hex
  std::vector<Buffer> buffers;
  int64_t arenaBytes = 0;
  std::vector<Kernel> kernels;
  std::vector<Dispatch> dispatches;  // in execution order
  std::vector<Scratch> scratch;      // in eqn order; Access::scratch indexes it
  Graph source;                // the compiled graph, for checking against the oracle
};

}  // namespace poot

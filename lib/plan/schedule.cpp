// The schedule rules of schedule.h. Everything here is integer arithmetic on
// the profile's figures; sizes stay far inside int64 because every type has
// at most 2^48 elements.
#include "plan/schedule.h"

#include <algorithm>
#include <bit>
#include <span>

namespace poot {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

int64_t attentionLanes(int64_t dv, const DeviceProfile& d) {
  int64_t lanes = kMaxLanes;
  while (lanes >= 1 && (lanes > d.max_workgroup_size || lanes * laneStateBytes(dv) > d.workgroup_memory_bytes))
    lanes /= 2;
  return lanes;
}

std::optional<std::array<int64_t, 3>> foldGrid(int64_t workgroups, const DeviceProfile& d) {
  int64_t x = std::min(workgroups, d.grid_limits[0]);
  int64_t y = (workgroups + x - 1) / x;
  if (y > d.grid_limits[1]) return std::nullopt;
  return std::array<int64_t, 3>{x, y, 1};
}

SplitDecision chooseSplits(int64_t groups, int64_t packed, int64_t lq, int64_t lk, int64_t dv,
                           const DeviceProfile& d) {
  if (lq != 1) return {1, "not a decode: " + str(lq) + " query rows"};
  if (groups >= d.compute_units)
    return {1, "the " + str(groups) + " workgroups fill the " + str(d.compute_units) + " compute units"};
  int64_t cap = std::min(kMaxSplits, lk / kMinChunkKeys);
  if (cap < 2) return {1, str(lk) + " keys make fewer than two chunks of " + str(kMinChunkKeys)};
  // The smallest power of two that fills the compute units, capped.
  int64_t s = 2;
  while (groups * s < d.compute_units && s < kMaxSplits) s *= 2;
  s = std::min(s, cap);
  int64_t bytes = partialStateBytes(groups * packed, s, dv);
  if (bytes > d.max_buffer_bytes)
    return {1, "the partial state of " + str(bytes) + " bytes for " + str(s) +
                   " splits would pass the device's single-buffer limit of " + str(d.max_buffer_bytes)};
  if (!foldGrid(groups * s, d))
    return {1, "the " + str(groups * s) + " partial workgroups for " + str(s) +
                   " splits would pass the device's grid of " + str(d.grid_limits[0]) + " x " + str(d.grid_limits[1])};
  return {s, str(groups) + " workgroups on " + str(d.compute_units) + " compute units, " + str(lk) + " keys: " +
                 str(s) + " splits"};
}

int64_t widestLoad(std::initializer_list<int64_t> widths, int64_t most) {
  int64_t w = most;
  auto divides = [&] {
    for (int64_t x : widths)
      if (x % w) return false;
    return true;
  };
  while (w > 1 && !divides()) w /= 2;
  return w;
}

PrefillLayout prefillLayout(const Schedule& s, int64_t, int64_t dv) {
  return {s.tileM + 4, s.tileN + 1, ceilDiv(dv, 4) * 4, s.tileN / s.threadN + 4};
}

int64_t prefillSharedWords(const Schedule& s, int64_t dk, int64_t dv) {
  PrefillLayout l = prefillLayout(s, dk, dv);
  return ceilDiv(std::max(s.tileN * (l.qStride + l.vStride), dk * l.kStride), 4) * 4;
}

int64_t prefillWords(const Schedule& s, int64_t dk, int64_t dv) {
  PrefillLayout l = prefillLayout(s, dk, dv);
  return dk * l.qStride + prefillSharedWords(s, dk, dv) + s.tileM * l.partStride + 1;
}

PrefillMmaLayout prefillMmaLayout(const Schedule& s, int64_t dk, int64_t dv) {
  if (matrixShape(*matrixOpNamed(s.matrix)).k == 8)
    return {ceilDiv(dk, 8) * 8 + 4, ceilDiv(dk, 8) * 8 + 4, ceilDiv(dv, 8) * 8 + 4, s.tileN + 4, 4, ceilDiv(dk, 8) * 8};
  int64_t dk16 = ceilDiv(dk, 16) * 16;
  if (matrixShape(*matrixOpNamed(s.matrix)).threads == 128) {
    int64_t qElems = ceilDiv(std::max(s.tileM * ceilDiv(dk16, 64) * 64, s.tileM * (2 * s.tileN + 8)), 512) * 512;
    int64_t kAt = qElems, vAt = kAt + s.tileN * ceilDiv(dk16, 64) * 64;
    int64_t stage = vAt + s.tileN * ceilDiv(dv, 64) * 64 - kAt;
    return {64, 64, 64, 2 * s.tileN + 8, 2, dk16, kAt, vAt, stage, kAt + 2 * stage};
  }
  return {dk16 + 8, dk16 + 8, 2 * (ceilDiv(dv, 8) * 8 + 8), 2 * s.tileN + 8, 2, dk16};
}

int64_t prefillMmaBytes(const Schedule& s, int64_t dk, int64_t dv) {
  PrefillMmaLayout l = prefillMmaLayout(s, dk, dv);
  if (l.tileElems > 0) return 2 * l.tileElems + 16;
  int64_t valueRows = l.elemBytes == 4 ? s.tileN : s.tileN / 2;
  return l.elemBytes * (s.tileM * std::max(l.qStride, l.pStride) + s.tileN * l.kStride + valueRows * l.vStride) + 16;
}

Choice prefillMma(int64_t nrep, int64_t dh, int64_t ds, int64_t dv, DType operands, const DeviceProfile& d) {
  std::string declined;
  for (MatrixOp op : d.matrix_ops) {
    const MatrixShape& m = matrixShape(op);
    const bool group = m.threads == 128;
    if ((m.threads != 32 && !group) || (op != MatrixOp::M16N8K8Tf32 && m.operand != operands)) continue;
    Schedule s{"prefill-mma", group ? 256 : 128, 1, group ? 256 : 128, 0};
    s.tileM = group ? 128 : 64, s.tileN = 64, s.threadM = 16, s.vector = widestLoad({dh, ds, dv}, m.k == 16 ? 8 : 4);
    s.matrix = m.name;
    s.workgroupMemory = prefillMmaBytes(s, dh + ds, dv);
    const std::string no = "not on " + s.matrix + ": ";
    std::string why;
    if (nrep > s.tileM) why = no + str(nrep) + " query heads a KV head, more than its " + str(s.tileM) + " rows";
    else if (dh + ds > kMaxMmaHeadWidth || dv > kMaxMmaHeadWidth)
      why = no + "a " + str(dh + ds) + "-wide key or " + str(dv) + "-wide value, past its " + str(kMaxMmaHeadWidth) +
            " in registers";
    else if (group && s.vector != 8)
      why = no + "a " + str(dh) + "-wide key, " + str(ds) + "-wide shared key or " + str(dv) +
            "-wide value is no multiple of 8 (its copies move 16 bytes)";
    else if (s.workgroupSize > d.max_workgroup_size || s.workgroupMemory > d.workgroup_memory_bytes)
      why = no + "its workgroup does not fit the device";
    if (!why.empty()) {
      declined += (declined.empty() ? "" : "; ") + why;
      continue;
    }
    const char* how = s.matrix == "m16n8k8.tf32" ? " matrix multiplies (three a product of f32 operands)"
                                                 : " matrix multiplies (each weight a head and a remainder in its dtype)";
    std::string rows = group ? ", 64 rows a warpgroup on " : ", 16 rows a warp on ";
    return {s, str(s.tileM / nrep) + " query positions of " + str(nrep) + " heads a workgroup" + rows + s.matrix + how +
                   ", against tiles of 64 keys in workgroup memory"};
  }
  return {std::nullopt, declined};
}

Choice prefillMmaRule(const AttentionShape& a, const DeviceProfile& d) {
  if (a.Lq == 1) return {std::nullopt, ""};
  return prefillMma(a.nrep, a.dh, a.ds, a.dv, a.operands, d);
}

// The prefill tilings, largest first: rows x keys a workgroup, rows x keys a
// thread.
struct PrefillTile {
  int64_t m, n, tm, tn;
};
constexpr PrefillTile kPrefillTiles[] = {{64, 64, 4, 4}, {32, 32, 4, 2}, {16, 16, 4, 4}};

Choice choosePrefill(int64_t nrep, int64_t dh, int64_t ds, int64_t dv, DType operands, const DeviceProfile& d) {
  for (const PrefillTile& t : kPrefillTiles) {
    if (t.m < nrep) continue;
    Schedule s{"prefill", 0, 1, (t.m / t.tm) * (t.n / t.tn), 0};
    if (s.workgroupSize > d.max_workgroup_size) continue;
    s.tileM = t.m, s.tileN = t.n, s.threadM = t.tm, s.threadN = t.tn, s.vector = widestLoad({dh, ds, dv});
    s.workgroupMemory = 4 * prefillWords(s, dh + ds, dv);
    if (s.workgroupMemory > d.workgroup_memory_bytes) continue;
    s.lanes = s.workgroupSize;
    return {s, str(t.m / nrep) + " query positions of " + str(nrep) + " heads a workgroup against tiles of " +
                   str(t.n) + " keys in workgroup memory"};
  }
  return {std::nullopt, "no prefill tile of " + str(std::max<int64_t>(16, nrep)) +
                            " rows or more fits the device's workgroup (" + str(d.max_workgroup_size) + " threads, " +
                            str(d.workgroup_memory_bytes) + " bytes)"};
}

Choice prefillRule(const AttentionShape& a, const DeviceProfile& d) {
  if (a.Lq == 1) return {std::nullopt, ""};
  return choosePrefill(a.nrep, a.dh, a.ds, a.dv, a.operands, d);
}

int64_t decodeValueLanes(int64_t dv, int64_t vector, int64_t threads) {
  int64_t runs = ceilDiv(dv, vector), g = 1;
  while (g < runs && g < threads) g *= 2;
  return g;
}

// A plane holds one kLanes slot of every (row, key) of a tile; it is padded
// to 32 / kLanes words past a multiple of 32, so that the 32 / kLanes keys
// a warp's writers cover in one store land in distinct banks.
int64_t decodePlane(const Schedule& s, int64_t packed) {
  int64_t want = std::max<int64_t>(1, 32 / s.kLanes);
  return packed * s.tileK + ((want - packed * s.tileK) % 32 + 32) % 32;
}

int64_t decodeWords(const Schedule& s, int64_t packed, int64_t dv) {
  int64_t slices = s.workgroupSize / decodeValueLanes(dv, s.vector, s.workgroupSize);
  return s.kLanes * decodePlane(s, packed) + packed * s.tileK + slices * packed * (dv + 2);
}

Choice chooseDecode(int64_t packed, int64_t dh, int64_t ds, int64_t dv, DType operands, const DeviceProfile& d) {
  if (packed > kMaxPackedRows)
    return {std::nullopt, str(packed) + " query rows a KV head (n_rep * Lq) are more than the decode schedule's " +
                              str(kMaxPackedRows)};
  int64_t w = widestLoad({dh, ds, dv}, 16 / dtypeBytes(operands)), dk = dh + ds;
  // A key thread keeps its runs of every row's q in registers (runs j, j +
  // kLanes, ... of each key segment), a value thread every row's sums of its
  // value runs: at most 64 floats each (past that the compiler spills them).
  auto qFloats = [&](int64_t lanes) { return packed * (ceilDiv(dh / w, lanes) + ceilDiv(ds / w, lanes)) * w; };
  std::string tooMany;
  for (int64_t t = 256; t >= 32; t /= 2) {
    if (t > d.max_workgroup_size) continue;
    Schedule s{"decode", t, 1, t, 0};
    s.vector = w;
    // A key for every fourth thread (64 keys for 256 threads, so a tile's
    // loads keep the memory busy), halved while a thread would stage more
    // than 96 of a tile's key and value floats in registers.
    s.tileK = t / 4;
    while (s.tileK > 1 && s.tileK * (dk + dv) > 96 * t) s.tileK /= 2;
    // The fewest threads a key that keep at most 64 floats of q each and
    // whose one pass over the keys takes at most a tile.
    s.kLanes = 1;
    while (s.kLanes < t && (qFloats(s.kLanes) > 64 || t / s.kLanes > s.tileK)) s.kLanes *= 2;
    int64_t lanes = decodeValueLanes(dv, w, t), qs = qFloats(s.kLanes), sums = packed * ceilDiv(ceilDiv(dv, w), lanes) * w;
    if (qs > 64 || sums > 64) {
      tooMany = str(packed) + " query rows of a " + str(dk) + "-wide key and a " + str(dv) + "-wide value keep " +
                str(qs) + " floats of q a key thread and " + str(sums) + " running sums a value thread of " + str(t) +
                ", more than the decode schedule's 64";
      break;
    }
    // At least one key for every key slice of the value threads.
    s.tileK = std::max(s.tileK, t / lanes);
    s.workgroupMemory = 4 * decodeWords(s, packed, dv);
    if (s.workgroupMemory > d.workgroup_memory_bytes) continue;
    s.tileM = packed;
    return {s, str(packed) + " query rows a KV head share each key and value read: " + str(t) + " threads, " +
                   str(s.kLanes) + " a key, tiles of " + str(s.tileK) + " keys"};
  }
  if (!tooMany.empty()) return {std::nullopt, tooMany};
  return {std::nullopt, "no decode workgroup of 32 threads or more fits the device's " +
                            str(d.workgroup_memory_bytes) + " bytes of workgroup memory"};
}

Choice decodeMma(const AttentionShape& a, const DeviceProfile& d) {
  const int64_t packed = a.packed(), dh = a.dh, ds = a.ds, dv = a.dv, groups = a.B * a.Hkv, lq = a.Lq, lk = a.Lk;
  const DType operands = a.operands;
  auto op = std::find_if(d.matrix_ops.begin(), d.matrix_ops.end(), [&](MatrixOp o) {
    const MatrixShape& m = matrixShape(o);
    return m.threads == 32 && m.k == 16 && m.operand == operands;
  });
  if (op == d.matrix_ops.end()) return {std::nullopt, ""};
  const std::string name = matrixShape(*op).name, no = "not on " + name + ": ";
  if (packed > kDecodeMmaRows) return {std::nullopt, no + str(packed) + " query rows a KV head, more than its 16"};
  if (!a.rowsShareMask) return {std::nullopt, no + "the rows of a KV head do not drop the same keys"};
  if (dh % 16 || ds % 16 || dv % 8)
    return {std::nullopt, no + "key widths " + str(dh) + (ds ? " and " + str(ds) : "") +
                              " not whole steps of 16, or value width " + str(dv) + " not a multiple of 8"};
  if (dh + ds > kDecodeMmaKeyWidth || dv > kDecodeMmaValueWidth)
    return {std::nullopt, no + "a " + str(dh + ds) + "-wide key or " + str(dv) + "-wide value, past its " +
                              str(kDecodeMmaKeyWidth) + " and " + str(kDecodeMmaValueWidth) + " in registers"};
  SplitDecision split = chooseSplits(groups, packed, lq, lk, dv, d);
  int64_t splits = split.splits, fill = std::max<int64_t>(splits, 1);
  while (groups * fill < kDecodeMmaFill * d.compute_units && fill < kMaxSplits) fill *= 2;
  if (lq == 1 && fill > splits && lk / fill >= kDecodeMmaChunkKeys &&
      partialStateBytes(groups * packed, fill, dv) <= d.max_buffer_bytes && foldGrid(groups * fill, d)) {
    splits = fill;
    split.reason += ", then " + str(splits) + " (" + str(kDecodeMmaFill) +
                    " workgroups a compute unit, chunks of " + str(kDecodeMmaChunkKeys) + " keys or more)";
  }
  int64_t warps = groups * splits <= d.compute_units ? kDecodeMmaWideWarps : kDecodeMmaWarps;
  Schedule s{"decode-mma", 32 * warps, splits, 32 * warps, 0};
  s.tileM = packed, s.tileK = kDecodeMmaKeys, s.matrix = name;
  s.vector = widestLoad({dh / 4, ds / 4, dv / 8}, 16 / dtypeBytes(operands));
  s.workgroupMemory = warps * packed * laneStateBytes(dv);
  if (s.workgroupSize > d.max_workgroup_size || s.workgroupMemory > d.workgroup_memory_bytes)
    return {std::nullopt, no + "its workgroup does not fit the device"};
  return {s, str(packed) + " query rows a KV head share each key and value read on " + name + ": " + str(warps) +
                 " warps, " + str(kDecodeMmaKeys) +
                 " keys each a step, fragments loaded straight from memory; " + split.reason};
}

Choice decodeRule(const AttentionShape& a, const DeviceProfile& d) {
  const int64_t packed = a.packed(), groups = a.B * a.Hkv;
  Choice c = chooseDecode(packed, a.dh, a.ds, a.dv, a.operands, d);
  if (!c.schedule) return c;
  SplitDecision split = chooseSplits(groups, packed, a.Lq, a.Lk, a.dv, d);
  c.reason += "; " + split.reason;
  // A decode that leaves most units idle shares each head's rows out over
  // row groups, when the decode schedule takes their fewer rows.
  int64_t rowGroups = chooseRowGroups(groups * split.splits, packed, d);
  if (rowGroups > 1)
    if (Choice fewer = chooseDecode(packed / rowGroups, a.dh, a.ds, a.dv, a.operands, d); fewer.schedule) {
      c.schedule = fewer.schedule;
      c.reason +=
          "; " + str(rowGroups) + " row groups of " + str(packed / rowGroups) + " rows a KV head: " + fewer.reason;
    }
  c.schedule->splits = split.splits;
  return c;
}

int64_t chooseRowGroups(int64_t workgroups, int64_t packed, const DeviceProfile& d) {
  if (4 * workgroups > d.compute_units) return 1;
  int64_t r = 1;
  for (int64_t x = 2; x <= packed; ++x)
    if (packed % x == 0 && workgroups * x <= d.compute_units) r = x;
  return r;
}

Schedule streamingSchedule(int64_t lanes, int64_t dv) {
  return Schedule{"streaming", lanes, 1, lanes, lanes * laneStateBytes(dv)};
}

Schedule partialsSchedule(int64_t lanes, int64_t splits, int64_t dv) {
  return Schedule{"split-kv-partials", lanes, splits, lanes, lanes * laneStateBytes(dv)};
}

// The combine reads each row's partials straight from the scratch (at most 16
// per channel), so it reserves no workgroup memory.
Schedule combineSchedule(int64_t lanes, int64_t splits) { return Schedule{"split-kv-combine", lanes, splits, lanes, 0}; }

Choice splitKvRule(const AttentionShape& a, const DeviceProfile& d) {
  SplitDecision split = chooseSplits(a.B * a.Hq, 1, a.Lq, a.Lk, a.dv, d);
  if (split.splits == 1) return {std::nullopt, split.reason};
  return {partialsSchedule(a.lanes, split.splits, a.dv), split.reason};
}

// Streaming always fits (the planner has refused an attention whose one
// lane does not); what it serves is said by the schedule line, and why no
// other was taken by the declines before it.
Choice streamingRule(const AttentionShape& a, const DeviceProfile&) { return {streamingSchedule(a.lanes, a.dv), ""}; }

Schedule plainSchedule(const std::string& kind, const DeviceProfile& d) {
  int64_t w = std::min(kPlainWorkgroup, d.max_workgroup_size);
  // A guard folds one in-range flag (an i32) per thread in workgroup memory.
  return Schedule{kind, 0, 1, w, kind == "guard" ? w * 4 : 0};
}

Schedule rowsSchedule(int64_t n, DType element, const DeviceProfile& d) {
  int64_t most = std::min(kPlainWorkgroup, d.max_workgroup_size), t = 1;
  while (t < n && t < most) t *= 2;
  // A two-byte element is widened to f32 as kernels load it.
  int64_t bytes = std::max<int64_t>(4, dtypeBytes(element));
  return Schedule{"rows", 0, 1, t, t * (bytes + 4)};
}

int64_t routedGemvBytes(const RoutedShape& s) { return 4 * (3 * s.E + s.I + s.H); }

Choice routedGemvRule(const RoutedShape& s, const DeviceProfile& d) {
  auto no = [](std::string why) { return Choice{std::nullopt, "not a routed gemv: " + std::move(why)}; };
  if (s.rows > kRoutedGemvRows)
    return no(str(s.rows) + " rows are more than the " + str(kRoutedGemvRows) + " of a decode");
  if (s.bindings > d.max_bindings)
    return no(str(s.bindings) + " bindings (3 an expert) are more than max_bindings " + str(d.max_bindings));
  int64_t bytes = routedGemvBytes(s);
  if (bytes > d.workgroup_memory_bytes)
    return no(str(bytes) + " bytes of workgroup memory are more than workgroup_memory_bytes " +
              str(d.workgroup_memory_bytes));
  Schedule sch{"routed-gemv", 0, 1, std::min(kPlainWorkgroup, d.max_workgroup_size), bytes};
  return Choice{sch, "routed gemv: " + str(s.rows) + " rows of " + str(s.k) + " of " + str(s.E) + " experts, one workgroup a row"};
}

Schedule sampleSchedule(int64_t n, const DeviceProfile& d) {
  int64_t most = std::min(kWideRowsWorkgroup, d.max_workgroup_size), t = 1;
  while (t < n && t < most && t * 2 * 8 <= d.workgroup_memory_bytes) t *= 2;
  return Schedule{"sample", 0, 1, t, t * 8};
}

Schedule fusedSchedule(bool rows, int64_t n, int64_t rowCount, int64_t partialBytes, const DeviceProfile& d) {
  Schedule s = plainSchedule(rows ? "fused-rows" : "fused", d);
  if (!rows) return s;
  // Fewer rows than compute units leave each row's workgroup alone on its
  // unit: it takes as many threads as the device allows, so that each
  // thread waits for fewer of the row's loads (a decode step's norm of 4096
  // took 10 us on an H200 with 256 threads).
  int64_t cap = rowCount < d.compute_units ? std::min(kWideRowsWorkgroup, d.max_workgroup_size) : s.workgroupSize;
  int64_t w = 1;
  while (w * 2 <= cap && w * 2 <= n && w * 2 * partialBytes <= d.workgroup_memory_bytes) w *= 2;
  s.workgroupSize = w;
  s.workgroupMemory = w * partialBytes;
  return s;
}

namespace {

// Threads a device needs resident to cover its memory latency, per compute
// unit: an H200 SM holds 2048, and half of that already keeps enough loads
// in flight for a streaming read (Little's law at about 4 TB/s and 1 us).
constexpr int64_t kThreadsPerUnit = 1024;

// The gemm tilings, largest first, and (tileM + tileN + 2 pads) * tileK f32
// of workgroup memory each. The 128- and 64-row tiles have 256 threads; the
// short ones, for products of few rows, 128 threads with a 4x4 (or 2x4)
// register tile, so each wide workgroup-memory load still serves 4 products,
// and a K step of 32, so each thread has 6 runs of 4 in flight as it
// computes; the last (64 threads) is for devices that hold no other, and
// the smallest when no tile gives every compute unit a workgroup.
struct GemmTile {
  int64_t m, n, k, tm, tn;
  int64_t group = 1;  // the threads a tm x tn part takes: 1 (gemm), a warp (32) or a warpgroup (128) (gemm-mma)
  int64_t fills = 0;  // the threads a workgroup counts as toward kThreadsPerUnit; 0: its own
  int64_t minRows = 0;  // taken only for products of at least this many rows
  int64_t threads() const { return (m / tm) * (n / tn) * group; }
  int64_t weight() const { return fills ? fills : threads(); }
};
constexpr GemmTile kGemmTiles[] = {{128, 128, 16, 8, 8}, {128, 64, 16, 8, 4}, {64, 64, 16, 4, 4},
                                   {32, 64, 32, 4, 4},   {16, 64, 32, 2, 4},  {16, 16, 16, 2, 2}};
// The gemm-mma tilings, largest first, over a K step of 64 (four m16n8k16
// steps a barrier): 128 rows in warps of 64 x 64 outputs (128 f32
// accumulators a thread), eight or four of them; fewer rows in eight warps
// of 32 x 32 or 16 x 32 (four for 16 rows). On the H200 (bench/matmul
// NOTES, session 16) the 64 x 64 warps and the K step of 64 each gained
// about a fifth over 64 x 32 and 32 (warp tiles of 64 x 32, and K steps of
// 32, spend more of workgroup memory's bandwidth and more barriers a
// product). The 128-row tiles are arithmetic-bound: one workgroup keeps a
// unit's matrix units busy, so it counts as a unit's worth of threads and K
// splits only to give every unit one (each split costs f32 partials and a
// combine).
constexpr GemmTile kGemmMmaTiles[] = {{128, 256, 64, 64, 64, 32, kThreadsPerUnit},
                                      {128, 128, 64, 64, 64, 32, kThreadsPerUnit},
                                      {64, 128, 64, 32, 32, 32},
                                      {32, 128, 64, 16, 32, 32},
                                      {16, 128, 64, 16, 32, 32}};
// The tilings for a warpgroup's op (m64nNk16, sm_90a): each warpgroup owns
// 64 rows of the block and all its columns, one instruction of n = tileN a
// K step of 16. Every one keeps a unit's matrix units busy. On the H200
// (bench/matmul NOTES, session 17) 128 x 128 in three stages (96 KiB, two
// workgroups a unit) ran as fast as 128 x 256 (one a unit, four stages) at
// 2048 rows and more, and up to 1.4x faster at 512. With the 256-wide
// tile's chains running across the step's barrier (session 25) it gained
// 5-16% at 2048 and 8192 rows (the whole Llama-3-8B prefill of 2048 tokens
// 87.2 to 82.4 ms) and lost at 512 (24.00 against 23.19 ms), so it serves
// 2048 rows and more; the rows between are not measured.
constexpr GemmTile kGemmGroupTiles[] = {{128, 256, 64, 64, 256, 128, kThreadsPerUnit, 2048},
                                        {128, 128, 64, 64, 128, 128, kThreadsPerUnit},
                                        {64, 128, 64, 64, 128, 128, kThreadsPerUnit}};

// The widest run of b a thread loads at once: 16 bytes, when K keeps every
// row of a and b (and so every run) aligned to it; 1 for a plain b, whose
// runs would go along N.
int64_t vectorOf(int64_t k, bool transposedB, DType b) {
  if (!transposedB) return 1;
  int64_t v = 16 / dtypeBytes(b);
  while (v > 1 && k % v != 0) v /= 2;
  return v;
}

// The gemv of this product, its reason `why` and then how it was laid out.
Choice gemv(const MatMulShape& p, const DeviceProfile& d, std::string why) {
  const int64_t batch = p.batch, m = p.m, k = p.k, n = p.n;
  const bool transposedB = p.transposedB;
  Schedule s{"gemv", 0, 1, std::min(kPlainWorkgroup, d.max_workgroup_size), 0};
  s.threadM = std::min(m, kGemvRows);
  s.threadN = 1, s.kLanes = 1, s.unroll = 1, s.vector = 1;
  if (p.a == DType::I64) {
    why += "; i64 partial sums do not fold in workgroup memory (f32 or i32 only), so one thread a column";
    return {s, why};
  }
  // Each thread keeps up to 4 columns, so one load of a row of a serves
  // them all, and about 64 bytes of b in flight.
  s.vector = vectorOf(k, transposedB, p.b);
  s.threadN = std::min<int64_t>(4, m);
  // The partials of every output and thread fold in workgroup memory, one
  // padding word a row (the fold reads down a column without bank conflicts).
  auto memory = [&] { return s.threadM * s.threadN * (s.workgroupSize + 1) * 4; };
  while (s.threadN > 1 && memory() > d.workgroup_memory_bytes) s.threadN /= 2;
  while (s.workgroupSize > 32 && memory() > d.workgroup_memory_bytes) s.workgroupSize /= 2;
  if (memory() > d.workgroup_memory_bytes) {
    why += "; its partials do not fit the workgroup memory, so one thread a column";
    s.threadN = 1, s.vector = 1;
    return {s, why};
  }
  // K lanes: a transposed b is read along its rows, so start at 32 lanes (a
  // run of 32 vectors of one row); a plain b along its columns, so keep at
  // least 8 column groups a workgroup (a 32-byte run of one row). Then double
  // the lanes while the columns alone do not give the device kThreadsPerUnit
  // threads a unit, and while every lane still gets a vector of K.
  int64_t cap = 1;
  while (cap * 2 * s.vector <= k && cap * 2 <= (transposedB ? s.workgroupSize : s.workgroupSize / 8)) cap *= 2;
  int64_t g = std::min(transposedB ? int64_t(32) : int64_t(1), cap);
  auto threads = [&](int64_t lanes) {
    return batch * ceilDiv(m, s.threadM) * ceilDiv(n, s.workgroupSize / lanes * s.threadN) * s.workgroupSize;
  };
  while (g * 2 <= cap && threads(g) < d.compute_units * kThreadsPerUnit) g *= 2;
  s.kLanes = g;
  s.workgroupMemory = g > 1 ? memory() : 0;
  while (s.unroll * s.threadN < 4 && g * s.vector * s.unroll * 2 <= k) s.unroll *= 2;
  why += "; " + str(g) + " lanes split K=" + str(k) + " in runs of " + str(s.vector) + " for " +
         str(s.workgroupSize / g * s.threadN) + " columns a workgroup, " + str(threads(g)) + " threads on " +
         str(d.compute_units) + " compute units";
  return {s, why};
}

// Whether `splits` chunks of f32 partials of `count` elements fit one buffer
// and i32 indices (the split gemm's and gemv-mma's scratch).
bool splitFits(int64_t splits, int64_t count, const DeviceProfile& d) {
  return splits * count * 4 <= d.max_buffer_bytes && splits * count <= INT32_MAX;
}

// A gemm's pick among its tiles: the tile, its workgroups, its K splits.
struct TilePick {
  const GemmTile* tile = nullptr;
  int64_t workgroups = 0, splits = 1;
};

// A tile taller than the rows rounded up to a power of two (16 at least)
// would compute more rows that do not exist than rows that do.
int64_t tallestTile(int64_t m) { return std::max<int64_t>(16, int64_t(std::bit_ceil(uint64_t(m)))); }

// A tile's workgroup memory: the gemm-mma's on `shape`, or the SIMT gemm's.
int64_t tileBytes(const GemmTile& t, const MatrixShape* shape, const MatMulShape& p) {
  return shape ? gemmMmaBytes(*shape, t.m, t.n, t.k,
                              gemmMmaStages(*shape, t.m, t.n, gemmMmaVector(p.k, p.n, p.transposedB, p.b), p.transposedB))
               : (t.m + t.n + 2 * kGemmPad) * t.k * 4;
}

// The largest of `tiles` (on `shape`, or SIMT) that fits the device and is no
// taller than tallestTile, with K split, for a float result (the partials
// are f32 scratch, the combine rounds the sum once to the result's dtype),
// while the launch has fewer than kThreadsPerUnit threads a compute unit (a
// tile's loads are one step ahead of its products, so other workgroups cover
// their latency) and the partials still fit one buffer and i32 indices,
// that gives every compute unit a workgroup; else the smallest that fits.
TilePick pickTile(std::span<const GemmTile> tiles, const MatrixShape* shape, const MatMulShape& p,
                  const DeviceProfile& d) {
  const int64_t count = p.batch * p.m * p.n;
  TilePick pick;
  for (const GemmTile& t : tiles) {
    if (t.threads() > d.max_workgroup_size || tileBytes(t, shape, p) > d.workgroup_memory_bytes ||
        t.m > tallestTile(p.m) || p.m < t.minRows)
      continue;
    pick = TilePick{&t, p.batch * ceilDiv(p.m, t.m) * ceilDiv(p.n, t.n), 1};
    while (isFloat(p.a) && pick.workgroups * pick.splits * t.weight() < d.compute_units * kThreadsPerUnit &&
           pick.splits * 2 <= kMaxGemmSplits && p.k / (pick.splits * 2) >= kMinGemmSplitKeys &&
           splitFits(pick.splits * 2, count, d))
      pick.splits *= 2;
    if (pick.workgroups * pick.splits >= d.compute_units) break;
  }
  return pick;
}

// The gemm (shape null) or gemm-mma schedule of a pick, and why.
Choice tiled(const TilePick& pick, const MatrixShape* shape, const MatMulShape& p, const DeviceProfile& d) {
  const GemmTile& t = *pick.tile;
  Schedule s{shape ? "gemm-mma" : "gemm", 0, pick.splits, t.threads(), tileBytes(t, shape, p)};
  s.tileM = t.m, s.tileN = t.n, s.tileK = t.k, s.threadM = t.tm, s.threadN = t.tn;
  s.vector = shape ? gemmMmaVector(p.k, p.n, p.transposedB, p.b) : vectorOf(p.k, p.transposedB, p.b);
  if (shape) s.matrix = shape->name;
  std::string why = str(p.m) + " rows" + (shape ? std::string(" of ") + dtypeName(p.a) + " on " + s.matrix : "") +
                    ": the largest tile no taller than " + str(tallestTile(p.m)) + " rows giving " +
                    str(d.compute_units) + " compute units a workgroup each (" + str(pick.workgroups) + " workgroups";
  if (pick.splits > 1)
    why += " times " + str(pick.splits) + " chunks of K=" + str(p.k) + ", " + str(gemmChunkKeys(s, p.k)) +
           " keys each, for " + str(kThreadsPerUnit) + " threads a unit";
  return {s, why + "), or the smallest that fits"};
}

}  // namespace

Choice gemvMmaRule(const MatMulShape& p, const DeviceProfile& d) {
  const int64_t batch = p.batch, m = p.m, k = p.k, n = p.n;
  if (m < 2 || m > kGemvMmaRows) return {std::nullopt, ""};
  auto op = std::find_if(d.matrix_ops.begin(), d.matrix_ops.end(), [&](MatrixOp o) {
    const MatrixShape& sh = matrixShape(o);
    return sh.threads == 32 && sh.k == 16 && sh.operand == p.a;
  });
  if (p.a != p.b || op == d.matrix_ops.end()) return {std::nullopt, ""};
  const std::string name = matrixShape(*op).name;
  auto no = [&](const std::string& why) { return Choice{std::nullopt, "not on " + name + " as a gemv: " + why}; };
  if (!p.transposedB) return no("b is not K-major");
  if (k % 8) return no("K=" + str(k) + " is not a multiple of 8");
  Schedule s{"gemv-mma", 0, 1, 32 * kGemvMmaWarps, 0};
  s.tileM = 8 * ceilDiv(m, 8), s.tileN = kGemvMmaWarps * kGemvMmaWarpColumns, s.tileK = kGemvMmaKeys;
  s.workgroupMemory = kGemvMmaStages * (s.tileM + s.tileN) * s.tileK * 2, s.vector = 8, s.matrix = name;
  if (s.workgroupSize > d.max_workgroup_size || s.workgroupMemory > d.workgroup_memory_bytes)
    return no("its workgroup does not fit the device");
  const int64_t workgroups = batch * ceilDiv(n, s.tileN), count = batch * m * n, wave = kGemvMmaFill * d.compute_units;
  // The most chunks within one wave, each of whole steps, none empty.
  for (int64_t c = std::min(kMaxGemmSplits, wave / workgroups); c > 1; --c) {
    Schedule t = s;
    t.splits = c;
    int64_t chunk = gemmChunkKeys(t, k);
    if (chunk >= kGemvMmaChunkSteps * s.tileK && (c - 1) * chunk < k && splitFits(c, count, d)) {
      s.splits = c;
      break;
    }
  }
  std::string why = str(m) + " rows of " + dtypeName(p.a) + " on " + name + " as a gemv, b's rows the op's A: " +
                    str(workgroups) + " workgroups of " + str(s.tileN) + " columns, " + str(kGemvMmaWarps) +
                    " warps of " + str(kGemvMmaWarpColumns) + " columns in steps of " + str(s.tileK) +
                    " keys through " + str(kGemvMmaStages) + " stages";
  if (s.splits > 1)
    why += ", times " + str(s.splits) + " chunks of K=" + str(k) + " (" + str(gemmChunkKeys(s, k)) +
           " keys) within one wave of " + str(wave) + " workgroups";
  return {s, why};
}

Choice gemvRule(const MatMulShape& p, const DeviceProfile& d) {
  if (p.m <= kGemvMaxRows)
    return gemv(p, d, str(p.m) + " rows: one read of b serves " + str(std::min(p.m, kGemvRows)) + " of them");
  if (p.a == DType::I64) return gemv(p, d, str(p.m) + " rows of i64");
  return {std::nullopt, ""};
}

// Two-byte operands of one dtype go to the first matrix op of the profile
// that takes them (ir/matrix.h) and has a tile for the product: a
// warpgroup's op on the group tiles (b K-major, every row 16-byte aligned),
// a wave's on the warps' tilings with each warp a wave, a warp's m16n8k16 on
// the gemm-mma tiles.
Choice gemmMmaRule(const MatMulShape& p, const DeviceProfile& d) {
  const std::string no = "not on matrix units: ";
  if (p.a != p.b || (p.a != DType::BF16 && p.a != DType::F16))
    return {std::nullopt, no + "operands " + dtypeName(p.a) + " and " + dtypeName(p.b) +
                              " (a matrix op takes two of one two-byte dtype)"};
  std::vector<GemmTile> waveTiles(std::begin(kGemmMmaTiles), std::end(kGemmMmaTiles));
  for (GemmTile& t : waveTiles) t.group = 64;
  std::string notMma;  // the ops of the dtype that declined, and why
  for (MatrixOp o : d.matrix_ops) {
    const MatrixShape& sh = matrixShape(o);
    if (sh.operand != p.a || sh.k != 16) continue;
    std::string declined;
    TilePick pick;
    if (sh.threads == 128 && (!p.transposedB || gemmMmaVector(p.k, p.n, p.transposedB, p.b) != 8))
      declined = !p.transposedB ? "b is not K-major" : "K=" + str(p.k) + " is not a multiple of 8";
    else
      pick = pickTile(sh.threads == 128  ? std::span<const GemmTile>(kGemmGroupTiles)
                      : sh.threads == 64 ? std::span<const GemmTile>(waveTiles)
                                         : std::span<const GemmTile>(kGemmMmaTiles),
                      &sh, p, d);
    if (pick.tile) {
      Choice c = tiled(pick, &sh, p, d);
      if (!notMma.empty()) c.reason += "; not on " + notMma;
      return c;
    }
    notMma += (notMma.empty() ? "" : "; ") + std::string(sh.name) + ": " +
              (declined.empty() ? "no tile of at most " + str(tallestTile(p.m)) + " rows fits the device's workgroup"
                                : declined);
  }
  if (notMma.empty()) notMma = std::string("the profile lists no matrix op for ") + dtypeName(p.a);
  return {std::nullopt, no + notMma};
}

Choice gemmRule(const MatMulShape& p, const DeviceProfile& d) {
  TilePick pick = pickTile(kGemmTiles, nullptr, p, d);
  if (!pick.tile)
    return {std::nullopt, "no gemm tile fits the device's workgroup (" + str(d.max_workgroup_size) + " threads, " +
                              str(d.workgroup_memory_bytes) + " bytes)"};
  return tiled(pick, nullptr, p, d);
}

Choice gemvFallbackRule(const MatMulShape& p, const DeviceProfile& d) {
  return gemv(p, d, str(p.m) + " rows as a gemv: one read of b serves " + str(std::min(p.m, kGemvRows)) + " of them");
}

MatMulDecision chooseMatMul(int64_t batch, int64_t m, int64_t k, int64_t n, bool transposedB, DType a, DType b,
                            const DeviceProfile& d) {
  const MatMulRule* rule = nullptr;
  Choice c = walkRules(matmulRules(), MatMulShape{batch, m, k, n, transposedB, a, b}, d, &rule);
  // The last rule accepts every product.
  return {*c.schedule, c.reason, rule->groups};
}

int64_t matmulWorkgroups(const Schedule& s, int64_t batch, int64_t m, const std::vector<int64_t>& ns) {
  bool tiled = s.kind != "gemv";
  int64_t rows = tiled ? s.tileM : s.threadM, cols = tiled ? s.tileN : s.workgroupSize / s.kLanes * s.threadN;
  int64_t blocks = 0;
  for (int64_t n : ns) blocks += ceilDiv(n, cols);
  return batch * ceilDiv(m, rows) * blocks * (tiled ? s.splits : 1);
}

int64_t gemmMmaStages(const MatrixShape& op, int64_t tileM, int64_t tileN, int64_t vector, bool transposedB) {
  if (op.threads == 128) return tileN > 128 ? kGemmGroupWideStages : kGemmGroupStages;
  if (op.threads == 64) return 1;  // AMDGPU: no asynchronous copies (KIR's CopyAsync is PTX's)
  return tileM <= 64 && transposedB && vector == 8 ? kGemmMmaStages : 1;
}

int64_t gemmMmaBytes(const MatrixShape& op, int64_t tileM, int64_t tileN, int64_t tileK, int64_t stages) {
  return stages * (tileM + tileN) * (tileK + (op.threads == 128 ? 0 : kGemmMmaPad)) * 2;
}

int64_t gemmMmaVector(int64_t k, int64_t n, bool transposedB, DType t) {
  int64_t v = 16 / dtypeBytes(t);
  while (v > 1 && (k % v != 0 || (!transposedB && n % v != 0))) v /= 2;
  return v;
}

int64_t gemmChunkKeys(const Schedule& s, int64_t k) { return ceilDiv(ceilDiv(k, s.splits), s.tileK) * s.tileK; }

Schedule matmulCombineSchedule(int64_t splits, const DeviceProfile& d) {
  Schedule s = plainSchedule("matmul-combine", d);
  s.splits = splits;
  return s;
}

std::string printSchedule(const Schedule& s) {
  std::string out = s.kind + " lanes=" + str(s.lanes) + " splits=" + str(s.splits) +
                    " workgroup=" + str(s.workgroupSize) + " memory=" + str(s.workgroupMemory);
  // Every family of one kind prints the same fields (streaming's two).
  for (const KernelFamily& f : kernelFamilies())
    if (f.kind == s.kind) return out + f.fields(s);
  return out;
}

}  // namespace poot

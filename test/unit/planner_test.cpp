// Unit tests of the planner (lib/plan/planner.h, schedule.h, request.h): the
// attention lane count on large and small workgroup memories, the split-KV
// decision for decode and prefill on the shipped profiles, every typed
// refusal with its exact message on small synthetic profiles, the plain
// schedules, request printing and dedup across layers, and the plan key.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "ir/fusion.h"
#include "ir/io.h"
#include "ir/text.h"
#include "passes/pass.h"
#include "plan/planner.h"
#include "plan/request.h"
#include "plan/schedule.h"
#include "testing.h"

using namespace poot;

namespace {

const std::string kSource = POOT_SOURCE_DIR;

DeviceProfile target(const std::string& name) {
  auto p = loadProfile(kSource + "/targets/" + name + ".yaml");
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  return p.take();
}

// A valid synthetic profile; tests change single fields of it.
struct Synth {
  std::string target = "spirv", arch = "vulkan1.3";
  int64_t cus = 8, lds = 32768, maxwg = 1024, subgroup = 8, gx = 65535, gy = 65535;
  int64_t maxBuffer = 134217728, bindings = 32, memory = 2147483648;
  std::string f16 = "[storage, arith]", bf16 = "[]";

  DeviceProfile make() const {
    std::string text = "name: synth\ntarget: " + target + "\narch: " + arch +
                       "\ncompute_units: " + std::to_string(cus) +
                       "\nworkgroup_memory_bytes: " + std::to_string(lds) +
                       "\nmax_workgroup_size: " + std::to_string(maxwg) +
                       "\nsubgroup_size: " + std::to_string(subgroup) + "\ngrid_limits:\n  x: " + std::to_string(gx) +
                       "\n  y: " + std::to_string(gy) + "\n  z: 65535\nmax_buffer_bytes: " + std::to_string(maxBuffer) +
                       "\nmax_bindings: " + std::to_string(bindings) + "\nmemory_bytes: " + std::to_string(memory) + "\ntwo_byte_floats:\n  f16: " + f16 +
                       "\n  bf16: " + bf16 + "\n";
    auto p = parseProfile(text, "synth.yaml");
    REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
    return p.take();
  }
};

using testing::parse;

std::string ty(const char* dt, std::initializer_list<int64_t> dims) {
  std::string s = std::string(dt) + "[";
  for (int64_t d : dims) s += (s.back() == '[' ? "" : ",") + std::to_string(d);
  return s + "]";
}

// One dense attention: q [B,Hq,Lq,64], k [B,Hkv,Lk,64], v [B,Hkv,Lk,dv].
// The Attention eqn is on line 5, its op name at column 8.
Graph attention(int64_t B, int64_t Hq, int64_t Lq, int64_t Lk, int64_t dv, int64_t nrep = 1, const char* dt = "f32",
                double scale = 0.125) {
  int64_t Hkv = Hq / nrep;
  return parse("graph attn\n"
               "input %q : " + ty(dt, {B, Hq, Lq, 64}) + "\n" +
               "input %k : " + ty(dt, {B, Hkv, Lk, 64}) + "\n" +
               "input %v : " + ty(dt, {B, Hkv, Lk, dv}) + "\n" +
               "%out = Attention(%q, %k, %v) {scale=" + formatNumber(scale) + ", n_rep=" + std::to_string(nrep) +
               ", key=dense, mask=none, bound=capacity} : " + ty(dt, {B, Hq, Lq, dv}) + "\n" +
               "output %out\n");
}

Plan plan(const Graph& g, const DeviceProfile& d, std::vector<ScheduleNote>* notes = nullptr) {
  auto p = planGraph(g, d, notes);
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  return p.take();
}

// The refusal's capability and its full diagnostic text.
std::pair<std::string, std::string> refusal(const Graph& g, const DeviceProfile& d) {
  auto p = planGraph(g, d);
  REQUIRE(!p);
  CHECK(p.error().kind == ErrorKind::Capability);
  return {p.error().capability, p.error().str()};
}

const Schedule& attentionSchedule(const Plan& p) {
  for (const Kernel& k : p.kernels)
    if (k.request.op == Op::Attention) return k.request.schedule;
  FAIL("no attention kernel");
  return p.kernels.front().request.schedule;
}

int64_t splitsOf(const Graph& g, const DeviceProfile& d) {
  Plan p = plan(g, d);
  return attentionSchedule(p).splits;
}

Graph compiled(const std::string& example, const DeviceProfile& d) {
  Graph g = testing::loadGraphFile(testing::exampleGraph(example));
  testing::runPasses(g, d);
  return g;
}

}  // namespace

TEST_CASE("plan: attention lanes follow the workgroup memory") {
  struct Row { const char* target; int64_t dv, lanes; };
  // H200 (227 KiB) holds 64 lanes at every width; the Raspberry Pi's 16 KiB and
  // lavapipe's 32 KiB halve the lanes as the value widens.
  for (Row r : {Row{"nvidia-h200", 64, 64}, Row{"nvidia-h200", 128, 64}, Row{"nvidia-h200", 256, 64},
                Row{"nvidia-h200", 512, 64}, Row{"raspberrypi5-v3d", 64, 32}, Row{"raspberrypi5-v3d", 128, 16},
                Row{"raspberrypi5-v3d", 256, 8}, Row{"raspberrypi5-v3d", 512, 4}, Row{"lavapipe", 64, 64},
                Row{"lavapipe", 128, 32}, Row{"lavapipe", 256, 16}, Row{"lavapipe", 512, 8}}) {
    CAPTURE(r.target);
    CAPTURE(r.dv);
    DeviceProfile d = target(r.target);
    CHECK(attentionLanes(r.dv, d) == r.lanes);
    // A streaming attention carries the same lanes in its request: 16 query
    // heads of one KV head (too many to pack), 255 keys (too few to split).
    Plan p = plan(attention(1, 16, 1, 255, r.dv, 16), d);
    const Schedule& s = attentionSchedule(p);
    CHECK(s.kind == "streaming");
    CHECK(s.lanes == r.lanes);
    CHECK(s.workgroupSize == r.lanes);
    CHECK(s.workgroupMemory == r.lanes * (r.dv + 2) * 4);
    CHECK(s.workgroupMemory <= d.workgroup_memory_bytes);
  }
}

TEST_CASE("plan: lanes never pass the workgroup size") {
  Synth s;
  s.maxwg = 16;
  CHECK(attentionLanes(64, s.make()) == 16);
  s.maxwg = 48;
  CHECK(attentionLanes(64, s.make()) == 32);
}

TEST_CASE("plan: streaming attention launches B x Hq x Lq workgroups, folded 2-D past the x limit") {
  // Eight threads a workgroup: too few for a decode or prefill tile.
  Synth s;
  s.maxwg = 8;
  Plan p = plan(attention(2, 4, 16, 256, 64), s.make());
  REQUIRE(p.dispatches.size() == 1);
  CHECK(attentionSchedule(p).kind == "streaming");
  const Dispatch& d = p.dispatches[0];
  CHECK(d.grid[0] == 128);
  CHECK(d.grid[1] == 1);
  CHECK(d.grid[2] == 1);
  s.gx = 100;
  Plan folded = plan(attention(2, 4, 16, 256, 64), s.make());
  CHECK(folded.dispatches[0].grid[0] == 100);
  CHECK(folded.dispatches[0].grid[1] == 2);
  CHECK(foldGrid(65535 * 3 + 1, target("lavapipe")) == std::array<int64_t, 3>{65535, 4, 1});
}

TEST_CASE("plan: a decode packs a KV head's query rows into one workgroup") {
  DeviceProfile h200 = target("nvidia-h200");
  // Four query rows a KV head (Llama-3's grouping): q slices of 16 dims, so
  // 4 threads a 64-wide key, 64 keys a tile; 4 * (4 * 64 + 8) + 4 * 64 +
  // 8 * 4 * 130 words.
  Plan p = plan(attention(1, 32, 1, 4096, 128, 4), h200);
  CHECK(printSchedule(attentionSchedule(p)) ==
        "decode lanes=256 splits=16 workgroup=256 memory=21888 rows=4 k_lanes=4 vector=4 tile_k=64");
  // One query row a head (n_rep 1): a 64-dim slice would cover the key in
  // one thread, but one key a thread would make a tile of 256 keys (192
  // floats staged a thread), so 4 threads a key and tiles of 64; eight rows:
  // 8-dim slices, 8 threads a key.
  CHECK(printSchedule(attentionSchedule(plan(attention(1, 4, 1, 4096, 128), h200))) ==
        "decode lanes=256 splits=16 workgroup=256 memory=5568 rows=1 k_lanes=4 vector=4 tile_k=64");
  CHECK(chooseDecode(8, 64, 0, 128, DType::F32, h200).schedule->kLanes == 8);
  // Eight rows of 512-wide heads: 64 threads a key (8 dims of q a row each)
  // and one 4-wide value run a value thread keep q and the sums at 64 floats
  // a thread; 16 keys a tile stage 64 floats a thread. 64 planes of 129
  // words, 8 * 16 scores, 2 slices of 8 * 514.
  Choice wide = chooseDecode(8, 512, 0, 512, DType::F32, h200);
  REQUIRE(wide.schedule);
  CHECK(printSchedule(*wide.schedule) ==
        "decode lanes=256 splits=1 workgroup=256 memory=66432 rows=8 k_lanes=64 vector=4 tile_k=16");
  // 256-wide heads: 32 keys a tile (64 would stage 128 floats a thread).
  CHECK(chooseDecode(2, 256, 0, 256, DType::F32, h200).schedule->tileK == 32);
  // Eight rows of 4096-wide heads would keep 128 floats of q a key thread and
  // 128 sums a value thread even with 256 of each.
  Choice huge = chooseDecode(8, 4096, 0, 4096, DType::F32, h200);
  CHECK(!huge.schedule);
  CHECK(huge.reason == "8 query rows of a 4096-wide key and a 4096-wide value keep 128 floats of q a key thread and "
                       "128 running sums a value thread of 256, more than the decode schedule's 64");
  // An odd value width loads one element at a time.
  CHECK(attentionSchedule(plan(attention(1, 8, 1, 4096, 37, 2), h200)).vector == 1);
  // More than 8 query rows a KV head stream, one workgroup a row.
  Choice many = chooseDecode(16, 64, 0, 64, DType::F32, h200);
  CHECK(!many.schedule);
  CHECK(many.reason == "16 query rows a KV head (n_rep * Lq) are more than the decode schedule's 8");
  CHECK(attentionSchedule(plan(attention(1, 16, 1, 4096, 128, 16), h200)).kind == "split-kv-partials");
  CHECK(attentionSchedule(plan(attention(1, 4, 16, 4096, 128), h200)).kind == "prefill-mma");
  CHECK(attentionSchedule(plan(attention(1, 8, 3, 4096, 128, 4), h200)).kind == "prefill-mma");
  CHECK(attentionSchedule(plan(attention(1, 8, 2, 4096, 128, 4), h200)).kind == "decode");
  // Small workgroup memories halve the threads; a device with under 32
  // threads a workgroup, or too little memory for 32, streams.
  Synth s;
  s.lds = 16384;
  CHECK(chooseDecode(4, 64, 0, 64, DType::F32, s.make()).schedule->workgroupSize == 128);
  s.lds = 8192;
  CHECK(chooseDecode(4, 64, 0, 64, DType::F32, s.make()).schedule->workgroupSize == 64);
  s.lds = 4096;
  CHECK(printSchedule(*chooseDecode(4, 64, 0, 64, DType::F32, s.make()).schedule) ==
        "decode lanes=32 splits=1 workgroup=32 memory=2880 rows=4 k_lanes=4 vector=4 tile_k=8");
  s.lds = 2048;
  Choice none = chooseDecode(4, 64, 0, 64, DType::F32, s.make());
  CHECK(!none.schedule);
  CHECK(none.reason == "no decode workgroup of 32 threads or more fits the device's 2048 bytes of workgroup memory");
  s.lds = 32768;
  s.maxwg = 16;
  CHECK(!chooseDecode(1, 64, 0, 64, DType::F32, s.make()).schedule);
}

TEST_CASE("plan: a decode that leaves most units idle shares a KV head's rows out over row groups") {
  DeviceProfile h200 = target("nvidia-h200");
  // One KV head of 8 query rows at B = 1, 16 splits: 16 workgroups for 132
  // units, so each row gets workgroups of its own (8 x 16 = 128 still fits
  // one wave), each re-planned for one row.
  Plan mqa = plan(attention(1, 8, 1, 16384, 64, 8), h200);
  CHECK(printSchedule(attentionSchedule(mqa)) ==
        "decode lanes=256 splits=16 workgroup=256 memory=5632 rows=1 k_lanes=4 vector=4 tile_k=64");
  CHECK(mqa.dispatches[0].grid[0] == 128);
  // Llama-3's 8 KV heads at B = 1 fill 128 of the 132 units with their
  // splits: their 4 rows stay together.
  CHECK(attentionSchedule(plan(attention(1, 32, 1, 4096, 128, 4), h200)).tileM == 4);
  // The largest divisor of the rows that keeps to one wave; none past a
  // quarter of the units.
  CHECK(chooseRowGroups(16, 8, h200) == 8);
  CHECK(chooseRowGroups(33, 4, h200) == 4);
  CHECK(chooseRowGroups(30, 6, h200) == 3);
  CHECK(chooseRowGroups(20, 6, h200) == 6);
  CHECK(chooseRowGroups(34, 4, h200) == 1);
  CHECK(chooseRowGroups(64, 4, h200) == 1);
  CHECK(chooseRowGroups(2, 1, h200) == 1);
}

TEST_CASE("plan: a prefill tiles its query rows and keys") {
  // The SIMT tiles: the H200 without its tf32 matrix multiplies.
  DeviceProfile h200 = target("nvidia-h200");
  h200.matrix_ops.clear();
  // 64 rows (16 positions of 4 heads) against 64-key tiles: 256 threads of
  // 4 x 4 scores; q 64 x 68, row partials 64 x 20 and a flag; the weights
  // (64 x 68) and values (64 x 128) side by side in one array, which the
  // keys' 64 x 65 words share.
  Plan p = plan(attention(1, 32, 512, 512, 128, 4), h200);
  CHECK(printSchedule(attentionSchedule(p)) ==
        "prefill lanes=256 splits=1 workgroup=256 memory=" + std::to_string(4 * (64 * 68 + 64 * (68 + 128) + 64 * 20 + 1)) +
            " tile=64x64 vector=4 thread=4x4");
  // B * Hkv * ceil(Lq / 16) workgroups.
  CHECK(p.dispatches[0].grid[0] == 8 * 32);
  CHECK(plan(attention(2, 32, 100, 512, 128, 4), h200).dispatches[0].grid[0] == 2 * 8 * 7);
  // Lavapipe's 32 KiB takes the 32 x 32 tile, 16 KiB the 16 x 16 one.
  CHECK(attentionSchedule(plan(attention(1, 4, 16, 256, 64), target("lavapipe"))).tileM == 32);
  CHECK(attentionSchedule(plan(attention(1, 4, 16, 256, 64), target("raspberrypi5-v3d"))).tileM == 16);
  // A tile holds every query head of a KV head: 32 heads of one KV head need
  // the 32-row tile at least; 65 fit none.
  CHECK(attentionSchedule(plan(attention(1, 32, 16, 256, 64, 32), h200)).tileM == 64);
  Choice many = choosePrefill(65, 64, 0, 64, DType::F32, h200);
  CHECK(!many.schedule);
  CHECK(many.reason == "no prefill tile of 65 rows or more fits the device's workgroup (1024 threads, 232448 bytes)");
  CHECK(attentionSchedule(plan(attention(1, 65, 16, 256, 64, 65), h200)).kind == "streaming");
}

TEST_CASE("plan: a prefill takes the tensor-core tile where the profile has tf32 matrix multiplies") {
  DeviceProfile h200 = target("nvidia-h200");
  // 64 rows in 4 warps of 16 against 64-key tiles: q and keys 64 rows of
  // 64 + 4 words, values of 128 + 4, two flag words (rounded to 4).
  Plan p = plan(attention(1, 32, 512, 512, 128, 4), h200);
  CHECK(printSchedule(attentionSchedule(p)) == "prefill-mma lanes=128 splits=1 workgroup=128 memory=" +
                                                   std::to_string(4 * (64 * 68 + 64 * (68 + 132) + 4)) +
                                                   " tile=64x64 vector=4 matrix=m16n8k8.tf32");
  CHECK(p.dispatches[0].grid[0] == 8 * 32);
  Choice d = prefillMma(4, 128, 0, 128, DType::F32, h200);
  CHECK(d.reason ==
        "16 query positions of 4 heads a workgroup, 16 rows a warp on m16n8k8.tf32 matrix multiplies (three a "
        "product of f32 operands), against tiles of 64 keys in workgroup memory");
  // Widths pad to whole steps of 8; a narrow key's q rows still hold a row
  // of weights (64 + 4 words).
  CHECK(prefillMma(2, 33, 0, 17, DType::F32, h200).schedule->workgroupMemory == 4 * (64 * 68 + 64 * 44 + 64 * 28 + 4));
  // Past 256 wide, or past 64 query heads a KV head, it declines, saying
  // why, and the SIMT tile takes the prefill (the remark says both).
  Choice wide = prefillMma(1, 512, 0, 512, DType::F32, h200);
  CHECK(!wide.schedule);
  CHECK(wide.reason == "not on m16n8k8.tf32: a 512-wide key or 512-wide value, past its 256 in registers");
  CHECK(!prefillMma(1, 64, 0, 512, DType::F32, h200).schedule);
  CHECK(prefillMma(65, 64, 0, 64, DType::F32, h200).reason ==
        "not on m16n8k8.tf32: 65 query heads a KV head, more than its 64 rows");
  std::vector<ScheduleNote> notes;
  Plan simt = plan(attention(1, 1, 16, 256, 512), h200, &notes);
  CHECK(attentionSchedule(simt).kind == "prefill");
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].reason ==
        "16 query rows a KV head (n_rep * Lq) are more than the decode schedule's 8; not on m16n8k8.tf32: a 64-wide "
        "key or 512-wide value, past its 256 in registers; 64 query positions of 1 heads a workgroup against tiles "
        "of 64 keys in workgroup memory");
}

TEST_CASE("plan: a two-byte prefill takes the profile's first matrix op of its dtype") {
  DeviceProfile h200 = target("nvidia-h200");
  // bf16 q, keys and values on the H200: its warpgroup op, 128 rows in two
  // warpgroups. One swizzled array: q (or the weights, 128 rows of 2 * 64 +
  // 8, the larger, rounded up to 512 elements), then two stages of keys and
  // values, 64 rows of 128 each; 16 flag bytes.
  Choice b = prefillMma(4, 128, 0, 128, DType::BF16, h200);
  REQUIRE(b.schedule);
  CHECK(printSchedule(*b.schedule) == "prefill-mma lanes=256 splits=1 workgroup=256 memory=" +
                                          std::to_string(2 * (128 * 136 + 2 * (64 * 128 + 64 * 128)) + 16) +
                                          " tile=128x64 vector=8 matrix=m64nNk16.bf16");
  CHECK(b.reason ==
        "32 query positions of 4 heads a workgroup, 64 rows a warpgroup on m64nNk16.bf16 matrix multiplies (each "
        "weight a head and a remainder in its dtype), against tiles of 64 keys in workgroup memory");
  CHECK(prefillMma(4, 128, 0, 128, DType::F16, h200).schedule->matrix == "m64nNk16.f16");
  // Widths pad to 16 (key) and to whole blocks of 64 columns: a 40-wide key
  // and 24-wide value take a block each.
  CHECK(prefillMma(2, 40, 0, 24, DType::BF16, h200).schedule->workgroupMemory ==
        2 * (128 * 136 + 2 * (64 * 64 + 64 * 64)) + 16);
  // Its copies move 16 bytes: a width that is no multiple of 8 takes the
  // warp's op, single loads where 33 allows no more.
  Choice narrow = prefillMma(2, 33, 0, 18, DType::BF16, h200);
  CHECK(narrow.schedule->matrix == "m16n8k16.bf16");
  CHECK(narrow.schedule->vector == 1);
  // Past 128 query heads a KV head the warpgroup op declines and the warp's
  // takes none either; past 64 the warp op would decline first.
  CHECK(prefillMma(129, 64, 0, 64, DType::BF16, h200).reason ==
        "not on m64nNk16.bf16: 129 query heads a KV head, more than its 128 rows; not on m16n8k16.bf16: 129 query "
        "heads a KV head, more than its 64 rows; not on m16n8k8.tf32: 129 query heads a KV head, more than its 64 rows");
  // Without the warpgroup ops, the warp's: q and keys 64 rows of 128 + 8
  // elements, values 32 rows of two keys' 2 * (128 + 8).
  std::erase_if(h200.matrix_ops, [](MatrixOp op) { return matrixShape(op).threads == 128; });
  b = prefillMma(4, 128, 0, 128, DType::BF16, h200);
  CHECK(printSchedule(*b.schedule) == "prefill-mma lanes=128 splits=1 workgroup=128 memory=" +
                                          std::to_string(2 * (64 * 136 + 64 * 136 + 32 * 272) + 16) +
                                          " tile=64x64 vector=8 matrix=m16n8k16.bf16");
  CHECK(b.reason ==
        "16 query positions of 4 heads a workgroup, 16 rows a warp on m16n8k16.bf16 matrix multiplies (each weight a "
        "head and a remainder in its dtype), against tiles of 64 keys in workgroup memory");
  CHECK(prefillMma(2, 33, 0, 18, DType::BF16, h200).schedule->workgroupMemory ==
        2 * (64 * 136 + 64 * 56 + 32 * 2 * 32) + 16);
  // Without the two-byte op in the profile, tf32 (two-byte values are exact
  // in it).
  h200.matrix_ops = {MatrixOp::M16N8K8Tf32};
  CHECK(prefillMma(4, 128, 0, 128, DType::BF16, h200).schedule->matrix == "m16n8k8.tf32");
  // No op takes bf16: the family does not apply, and says nothing.
  h200.matrix_ops = {MatrixOp::M16N8K16F16};
  Choice none = prefillMma(4, 128, 0, 128, DType::BF16, h200);
  CHECK(!none.schedule);
  CHECK(none.reason.empty());
}

TEST_CASE("plan: split-KV decode on the H200 and on lavapipe") {
  DeviceProfile h200 = target("nvidia-h200"), lava = target("lavapipe");
  // H200, 132 SMs: the decode schedule's workgroups are B * Hkv. 8 KV heads
  // want 32 splits, capped at 16; 4 heads likewise, and at Lk / 128 = 8 for
  // 1024 keys; 16 heads (n_rep 2) need 16 (16 * 8 = 128 < 132).
  CHECK(splitsOf(attention(1, 32, 1, 4096, 128, 4), h200) == 16);
  CHECK(splitsOf(attention(1, 4, 1, 4096, 128), h200) == 16);
  CHECK(splitsOf(attention(1, 4, 1, 1024, 128), h200) == 8);
  CHECK(splitsOf(attention(1, 4, 1, 384, 128), h200) == 3);
  CHECK(splitsOf(attention(1, 32, 1, 4096, 128, 2), h200) == 16);
  CHECK(splitsOf(attention(4, 32, 1, 4096, 128, 2), h200) == 4);
  // B = 64: 64 * 8 = 512 workgroups fill the device.
  CHECK(splitsOf(attention(64, 32, 1, 4096, 128, 4), h200) == 1);
  // Too few keys for two chunks of 128.
  CHECK(splitsOf(attention(1, 4, 1, 255, 128), h200) == 1);
  // lavapipe, 2 compute units: one row splits in two; B = 64 fills it.
  CHECK(splitsOf(attention(1, 1, 1, 512, 64), lava) == 2);
  CHECK(splitsOf(attention(64, 1, 1, 512, 64), lava) == 1);
  CHECK(splitsOf(attention(1, 2, 1, 512, 64), lava) == 1);
  // Prefill is never split.
  CHECK(splitsOf(attention(1, 4, 16, 4096, 128), h200) == 1);
}

TEST_CASE("plan: a split-KV decode is two dispatches around a declared scratch") {
  Plan p = plan(attention(1, 32, 1, 4096, 128, 4), target("nvidia-h200"));
  REQUIRE(p.kernels.size() == 2);
  REQUIRE(p.dispatches.size() == 2);
  REQUIRE(p.scratch.size() == 1);
  const Dispatch &partials = p.dispatches[0], &combine = p.dispatches[1];
  const Schedule& cs = p.kernels[size_t(combine.kernel)].request.schedule;
  CHECK(p.kernels[size_t(partials.kernel)].request.schedule.kind == "decode");
  CHECK(printSchedule(cs) == "split-kv-combine lanes=64 splits=16 workgroup=64 memory=0");
  CHECK(partials.eqn == 0);
  CHECK(combine.eqn == 0);
  CHECK(partials.grid[0] == 8 * 16);
  CHECK(combine.grid[0] == 32);
  CHECK(p.scratch[0].eqn == 0);
  CHECK(p.scratch[0].floats == 32 * 16 * 130);
  CHECK(p.scratch[0].bytes() == 32 * 16 * 130 * 4);
  // The partials read the operands and write the scratch; the combine reads
  // the scratch and writes the result.
  const Graph& g = p.source;
  CHECK(partials.reads == std::vector<Access>{{g.eqns[0].operands[0], -1}, {g.eqns[0].operands[1], -1},
                                               {g.eqns[0].operands[2], -1}});
  CHECK(partials.writes == std::vector<Access>{{-1, 0}});
  CHECK(combine.reads == std::vector<Access>{{-1, 0}});
  CHECK(combine.writes == std::vector<Access>{{g.eqns[0].results[0], -1}});
  CHECK(partials.bindings.empty());
  CHECK(p.kernels[0].entry == "attention_decode_0");
  CHECK(p.kernels[1].entry == "attention_split_kv_combine_1");
  // The streaming schedule splits the same way, B * Hq workgroups of one
  // row (16 query rows a KV head are too many to pack).
  Plan streamed = plan(attention(1, 16, 1, 4096, 128, 16), target("nvidia-h200"));
  CHECK(printSchedule(streamed.kernels[0].request.schedule) ==
        "split-kv-partials lanes=64 splits=16 workgroup=64 memory=33280");
}

TEST_CASE("plan: split-KV keeps one workgroup a group when the scratch or the partials' grid would not fit") {
  Synth s;
  s.cus = 64;
  // 4 rows, 4096 keys: 16 splits, 4 * 16 * 66 * 4 = 16896 bytes of partials.
  CHECK(splitsOf(attention(1, 4, 1, 4096, 64), s.make()) == 16);
  SplitDecision fits = chooseSplits(4, 1, 1, 4096, 64, s.make());
  CHECK(fits.splits == 16);
  // Two KV heads of two rows each: the same partial state.
  CHECK(chooseSplits(2, 2, 1, 4096, 64, s.make()).splits == 16);
  s.maxBuffer = 16895;
  SplitDecision big = chooseSplits(4, 1, 1, 4096, 64, s.make());
  CHECK(big.splits == 1);
  CHECK(big.reason ==
        "the partial state of 16896 bytes for 16 splits would pass the device's single-buffer limit of 16895");
  CHECK(chooseSplits(2, 2, 1, 4096, 64, s.make()).reason == big.reason);
  CHECK(splitsOf(attention(1, 4, 1, 4096, 64), s.make()) == 1);
  s.maxBuffer = 134217728;
  s.gx = 8;
  s.gy = 1;
  SplitDecision grid = chooseSplits(4, 1, 1, 4096, 64, s.make());
  CHECK(grid.splits == 1);
  CHECK(grid.reason == "the 64 partial workgroups for 16 splits would pass the device's grid of 8 x 1");
  Plan p = plan(attention(1, 4, 1, 4096, 64), s.make());
  CHECK(attentionSchedule(p).kind == "decode");
  CHECK(attentionSchedule(p).splits == 1);
  CHECK(p.scratch.empty());
  CHECK(chooseSplits(4, 1, 16, 4096, 64, s.make()).reason == "not a decode: 16 query rows");
  CHECK(chooseSplits(64, 1, 1, 4096, 64, s.make()).reason == "the 64 workgroups fill the 64 compute units");
}

TEST_CASE("plan: split chunks never hold fewer than 128 keys") {
  DeviceProfile h200 = target("nvidia-h200");
  for (int64_t lk : {128, 255, 256, 300, 383, 1000, 2049, 4097, 100000}) {
    int64_t s = chooseSplits(1, 1, 1, lk, 64, h200).splits;
    CAPTURE(lk);
    CHECK(s >= 1);
    CHECK(s <= 16);
    // Split i covers [i * Lk / s, (i + 1) * Lk / s).
    for (int64_t i = 0; i < s; ++i) CHECK((i + 1) * lk / s - i * lk / s >= (s > 1 ? 128 : 1));
  }
}

TEST_CASE("plan: AttentionLds when one lane's state does not fit") {
  Synth s;
  s.lds = 1024;
  auto [check, text] = refusal(attention(1, 4, 1, 64, 512), s.make());
  CHECK(check == "AttentionLds");
  CHECK(text ==
        "t.pg:5:8: error: attention needs 2056 bytes of workgroup memory for one lane (value width 512) but the "
        "device has 1024 [AttentionLds]");
  // 254 + 2 floats fit exactly.
  CHECK(attentionLanes(254, s.make()) == 1);
  CHECK(attentionLanes(255, s.make()) == 0);
}

TEST_CASE("plan: GridLimit for an attention and for a plain kernel") {
  // 2^20 heads of 2^24 query rows: 2^38 prefill blocks of 64 rows.
  Graph big = parse(
      "graph big\n"
      "input %q : f32[1,1048576,16777216,1]\n"
      "input %k : f32[1,1048576,2,1]\n"
      "input %v : f32[1,1048576,2,1]\n"
      "%out = Attention(%q, %k, %v) {scale=0.5, n_rep=1, key=dense, mask=none, bound=capacity} : "
      "f32[1,1048576,16777216,1]\n"
      "output %out\n");
  auto [check, text] = refusal(big, target("lavapipe"));
  CHECK(check == "GridLimit");
  CHECK(text ==
        "t.pg:5:8: error: attention launches 274877906944 workgroups (B * Hkv * query blocks) but the device's grid "
        "holds 65535 x 65535 [GridLimit]");
  CHECK(plan(big, target("nvidia-h200")).dispatches[0].grid[1] == 129);

  Synth s;
  s.gx = 1;
  s.gy = 1;
  Graph add = parse(
      "graph add\n"
      "input %a : f32[512]\n"
      "%b = Add(%a, %a) : f32[512]\n"
      "output %b\n");
  auto [check2, text2] = refusal(add, s.make());
  CHECK(check2 == "GridLimit");
  CHECK(text2 ==
        "t.pg:3:6: error: op Add launches 2 workgroups (512 elements, 256 per workgroup) but the device's grid holds 1 "
        "x 1 [GridLimit]");
}

TEST_CASE("plan: BindingLimit when a dispatch binds more storage buffers than the device allows") {
  // A Concat of n operands binds n + 1 buffers.
  auto concat = [](int n) {
    std::string text = "graph cat\n", args;
    for (int i = 0; i < n; ++i) {
      text += "input %x" + std::to_string(i) + " : f32[2]\n";
      args += (i ? ", %x" : "%x") + std::to_string(i);
    }
    return parse(text + "%y = Concat(" + args + ") {axis=0} : f32[" + std::to_string(2 * n) + "]\noutput %y\n");
  };
  Synth s;
  s.bindings = 4;
  CHECK(plan(concat(3), s.make()).dispatches.size() == 1);
  auto [check, text] = refusal(concat(4), s.make());
  CHECK(check == "BindingLimit");
  CHECK(text ==
        "t.pg:6:6: error: op Concat %y binds 5 storage buffers (4 read, 1 written) but synth allows 4 per kernel "
        "[BindingLimit]");
  // lavapipe's 32, the Concat of 33 from issue 16 and the one of 32.
  CHECK(refusal(concat(33), target("lavapipe")).second.find("binds 34 storage buffers (33 read, 1 written) but "
                                                              "lavapipe allows 32 per kernel") != std::string::npos);
  CHECK(refusal(concat(32), target("lavapipe")).first == "BindingLimit");
  CHECK(plan(concat(31), target("lavapipe")).dispatches.size() == 1);
}

TEST_CASE("plan: DtypeLowering names the op, the dtype and the device") {
  const std::string head = "graph g\ninput %c : bool[8]\ninput %a : ";
  auto sel = [&](const char* dt) {
    return parse(head + dt + "[8]\n%s = Select(%c, %a, %a) : " + dt + "[8]\noutput %s\n");
  };
  auto add = [&](const char* dt) {
    return parse(head + dt + "[8]\n%s = Add(%a, %a) : " + dt + "[8]\noutput %s\n");
  };
  // Storage is the one two-byte capability a kernel needs: a device that
  // lists none for bf16 refuses every op that touches it.
  Synth s;
  for (const Graph& g : {add("bf16"), sel("bf16")}) {
    auto [check, text] = refusal(g, s.make());
    CHECK(check == "DtypeLowering");
    CHECK(text == std::string("t.pg:4:6: error: op ") + opName(g.eqns[0].op) +
                      " on bf16 does not lower on synth: the device does not list bf16 storage [DtypeLowering]");
  }
  {
    auto [check, text] = refusal(attention(1, 4, 1, 256, 64, 1, "bf16"), s.make());
    CHECK(check == "DtypeLowering");
    CHECK(text == "t.pg:5:8: error: op Attention on bf16 does not lower on synth: the device does not list bf16 storage "
                  "[DtypeLowering]");
  }
  // Kernels compute in f32 and round each result: storage is all an f16 Add
  // or Select needs (the Raspberry Pi lowers no f16 arithmetic; SPIR-V
  // lowers no two-byte select, a PTX device here lists none), and a
  // two-byte Attention plans wherever its dtype loads and stores.
  CHECK(plan(add("f16"), target("raspberrypi5-v3d")).kernels.size() == 1);
  CHECK(plan(sel("f16"), target("lavapipe")).kernels.size() == 1);
  s.target = "ptx";
  s.arch = "sm_90";
  CHECK(plan(sel("f16"), s.make()).kernels.size() == 1);
  CHECK(plan(sel("bf16"), target("nvidia-h200")).kernels.size() == 1);
  CHECK(plan(sel("f16"), target("amd-mi300x")).kernels.size() == 1);
  CHECK(plan(attention(1, 4, 1, 256, 64, 1, "f16"), target("nvidia-h200")).kernels.size() >= 1);
  CHECK(plan(attention(1, 4, 1, 256, 64, 1, "bf16"), target("lavapipe")).kernels.size() >= 1);
  // A Select of f32 values under an f16-free condition needs nothing.
  CHECK(plan(sel("f32"), target("lavapipe")).kernels.size() == 1);
}

TEST_CASE("plan: ScratchBytes refuses a scratch the device cannot bind") {
  Plan p = plan(attention(1, 32, 1, 4096, 128, 4), target("nvidia-h200"));
  REQUIRE(p.scratch.size() == 1);
  CHECK(bool(checkScratch(p, target("nvidia-h200"))));
  Synth s;
  s.maxBuffer = 100000;
  auto st = checkScratch(p, s.make());
  REQUIRE(!st);
  CHECK(st.error().kind == ErrorKind::Capability);
  CHECK(st.error().capability == "ScratchBytes");
  CHECK(st.error().json().find(R"("figures":{"scratch_bytes":266240,"max_buffer_bytes":100000})") != std::string::npos);
  CHECK(st.error().str() ==
        "t.pg:5:8: error: split-kv scratch of 266240 bytes (32 rows * 16 splits * (value width 128 + 2) floats) exceeds "
        "the device's single-buffer limit of 100000 bytes [ScratchBytes]");
  // A split-K MatMul's partials: q_proj of 512 rows in 8 chunks.
  Plan mm = plan(testing::parse("graph g\ninput %x : f32[512,4096]\ninput %w : f32[4096,4096]\n"
                                "%y = MatMul(%x, %w) {transpose_b=true} : f32[512,4096]\noutput %y\n"),
                 target("nvidia-h200"));
  REQUIRE(mm.scratch.size() == 1);
  auto big = checkScratch(mm, s.make());
  REQUIRE(!big);
  CHECK(big.error().capability == "ScratchBytes");
  CHECK(big.error().str().find("split-K scratch of 67108864 bytes (8 splits * 2097152 result elements) exceeds") !=
        std::string::npos);
}

TEST_CASE("plan: MemoryBudget counts the arena and every buffer outside it") {
  Plan p = plan(attention(1, 4, 1, 256, 64), target("lavapipe"));
  p.arenaBytes = 1000;
  p.buffers.push_back(Buffer{"w", BufferRole::Weight, Type{}, -1, 0, 600});
  p.buffers.push_back(Buffer{"s", BufferRole::State, Type{}, -1, 0, 300});
  p.buffers.push_back(Buffer{"x", BufferRole::Input, Type{}, -1, 0, 50});
  p.buffers.push_back(Buffer{"y", BufferRole::Output, Type{}, -1, 0, 50});
  p.buffers.push_back(Buffer{"t", BufferRole::Temp, Type{}, -1, 0, 900});     // in the arena
  p.buffers.push_back(Buffer{"v", BufferRole::View, Type{}, -1, 0, 900, 0});  // no memory of its own
  Synth s;
  s.memory = 2000;
  s.maxBuffer = 2000;
  CHECK(bool(checkMemoryBudget(p, s.make())));
  s.memory = 1999;
  s.maxBuffer = 1999;
  auto st = checkMemoryBudget(p, s.make());
  REQUIRE(!st);
  CHECK(st.error().capability == "MemoryBudget");
  CHECK(st.error().json().find(R"("figures":{"bytes":2000,"arena_bytes":1000,"weight_bytes":600,"state_bytes":300,)"
                               R"("io_bytes":100,"memory_bytes":1999})") != std::string::npos);
  CHECK(st.error().str() ==
        "t.pg: error: the plan needs 2000 bytes of device memory (arena 1000, weights 600, state 300, inputs, slots "
        "and outputs 100) but the device has 1999 [MemoryBudget]");
}

TEST_CASE("plan: plain kernels get one thread per result element, 256 per workgroup") {
  Graph g = parse(
      "graph g\n"
      "input %a : f32[4,1000]\n"
      "input %b : f32[1000,8]\n"
      "input %i : i32[4]\n"
      "%e = Exp(%a) : f32[4,1000]\n"
      "%r = ReduceSum(%e) {axis=-1, keepdim=false} : f32[4]\n"
      "%m = MatMul(%a, %b) : f32[4,8]\n"
      "%t, %ti = TopK(%a) {k=2} : f32[4,2], i32[4,2]\n"
      "%c, %ok = IndexGuard(%i) {lo=0, hi=3} : i32[4], bool[]\n"
      "output %r\n"
      "output %m\n"
      "output %t\n"
      "output %c\n"
      "validation %ok\n");
  Plan p = plan(g, target("lavapipe"));
  REQUIRE(p.dispatches.size() == 5);
  std::vector<std::string> kinds;
  for (const Dispatch& d : p.dispatches) kinds.push_back(p.kernels[size_t(d.kernel)].request.schedule.kind);
  CHECK(kinds == std::vector<std::string>{"elementwise", "reduce", "gemv", "rows", "guard"});
  CHECK(p.dispatches[0].grid[0] == 16);  // 4000 elements
  CHECK(p.dispatches[1].grid[0] == 1);
  CHECK(p.dispatches[2].grid[0] == 1);
  CHECK(p.dispatches[3].grid[0] == 4);  // 4 rows, a workgroup each
  CHECK(p.dispatches[4].grid[0] == 1);
  for (size_t i = 0; i < p.dispatches.size(); ++i) CHECK(p.dispatches[i].eqn == int32_t(i));
  CHECK(p.dispatches[3].writes.size() == 2);
  CHECK(printSchedule(p.kernels[0].request.schedule) == "elementwise lanes=0 splits=1 workgroup=256 memory=0");
  // A row selection: the threads a power of two up to the row's 1000, at
  // most 256; a candidate and its index a thread in workgroup memory.
  CHECK(printSchedule(p.kernels[size_t(p.dispatches[3].kernel)].request.schedule) ==
        "rows lanes=0 splits=1 workgroup=256 memory=2048");
  CHECK(rowsSchedule(5, DType::I64, target("lavapipe")).workgroupMemory == 8 * (8 + 4));
  CHECK(rowsSchedule(9, DType::BF16, target("lavapipe")).workgroupSize == 16);
  Synth s;
  s.maxwg = 64;
  CHECK(plan(g, s.make()).kernels[0].request.schedule.workgroupSize == 64);
  CHECK(plan(g, s.make()).dispatches[0].grid[0] == 63);
}

TEST_CASE("plan: MatMul schedules follow the rows, the layout, the dtypes and the device") {
  DeviceProfile h200 = target("nvidia-h200");
  // Decode on the H200: a transposed f32 weight in runs of 4, lanes doubled
  // until the launch has 1024 threads a compute unit.
  MatMulDecision q = chooseMatMul(1, 1, 4096, 4096, true, DType::F32, DType::F32, h200);
  CHECK(printSchedule(q.schedule) ==
        "gemv lanes=0 splits=1 workgroup=256 memory=1028 k_lanes=64 unroll=4 vector=4 thread=1x1");
  CHECK(q.reason ==
        "1 rows: one read of b serves 1 of them; 64 lanes split K=4096 in runs of 4 for 4 columns a workgroup, "
        "262144 threads on 132 compute units");
  CHECK(matmulWorkgroups(q.schedule, 1, 1, {4096}) == 1024);
  // A bf16 weight in runs of 8; K = 4100 only in runs of 4 (4100 = 4 * 1025).
  CHECK(chooseMatMul(1, 1, 4096, 4096, true, DType::F32, DType::BF16, h200).schedule.vector == 8);
  CHECK(chooseMatMul(1, 1, 4100, 4096, true, DType::F32, DType::BF16, h200).schedule.vector == 4);
  CHECK(chooseMatMul(1, 1, 4101, 4096, true, DType::F32, DType::F32, h200).schedule.vector == 1);
  // A plain b is read across columns: one element at a time, at most T / 8 lanes.
  Schedule plain = chooseMatMul(1, 8, 4096, 4096, false, DType::F32, DType::F32, h200).schedule;
  CHECK(plain.vector == 1);
  CHECK(plain.kLanes <= 32);
  CHECK(plain.threadM == 8);
  CHECK(plain.threadN == 4);
  // 8 rows are still a gemv; 9 a gemm of the 16-row tile, whose 64
  // workgroups of 128 threads take 8 chunks of K (of 512 keys, the least)
  // toward 1024 threads a compute unit.
  CHECK(chooseMatMul(1, 8, 4096, 4096, true, DType::F32, DType::F32, h200).schedule.kind == "gemv");
  MatMulDecision nine = chooseMatMul(1, 9, 4096, 4096, true, DType::F32, DType::F32, h200);
  CHECK(printSchedule(nine.schedule) ==
        "gemm lanes=0 splits=8 workgroup=128 memory=11264 tile=16x64x32 vector=4 thread=2x4");
  CHECK(nine.reason ==
        "not on matrix units: operands f32 and f32 (a matrix op takes two of one two-byte dtype); 9 rows: the largest "
        "tile no taller than 16 rows giving 132 compute units a workgroup each (64 workgroups times 8 chunks of "
        "K=4096, 512 keys each, for 1024 threads a unit), or the smallest that fits");
  CHECK(matmulWorkgroups(nine.schedule, 1, 9, {4096}) == 512);
  // 512 rows: the 128x128 tile, 8 chunks of K for q_proj, 2 for gate_proj.
  Schedule g = chooseMatMul(1, 512, 4096, 4096, true, DType::F32, DType::F32, h200).schedule;
  CHECK(printSchedule(g) == "gemm lanes=0 splits=8 workgroup=256 memory=16896 tile=128x128x16 vector=4 thread=8x8");
  CHECK(matmulWorkgroups(g, 1, 512, {4096}) == 1024);
  CHECK(chooseMatMul(1, 512, 4096, 14336, true, DType::F32, DType::F32, h200).schedule.splits == 2);
  // The partials stay within one buffer: under a 20 MiB limit q_proj's 8
  // chunks of 8 MiB would not fit, 2 do.
  DeviceProfile oneBuffer = h200;
  oneBuffer.max_buffer_bytes = 20 << 20;
  CHECK(chooseMatMul(1, 512, 4096, 4096, true, DType::F32, DType::F32, oneBuffer).schedule.splits == 2);
  // 4096 rows fill the device unsplit.
  CHECK(chooseMatMul(1, 4096, 4096, 4096, true, DType::F32, DType::F32, h200).schedule.splits == 1);
  CHECK(chooseMatMul(1, 512, 4096, 128256, true, DType::F32, DType::F32, h200).schedule.tileM == 128);
  // i64 sums do not fold in workgroup memory; 16-byte tiles do not fit 2 KiB.
  MatMulDecision i64 = chooseMatMul(1, 100, 8, 8, true, DType::I64, DType::I64, h200);
  CHECK(i64.schedule.kind == "gemv");
  CHECK(i64.schedule.kLanes == 1);
  CHECK(i64.schedule.workgroupMemory == 0);
  CHECK(i64.reason.find("i64 partial sums do not fold") != std::string::npos);
  Synth tiny;
  tiny.lds = 2048;
  MatMulDecision small = chooseMatMul(1, 100, 64, 64, true, DType::F32, DType::F32, tiny.make());
  CHECK(small.schedule.kind == "gemv");
  CHECK(small.reason.find("no gemm tile fits the device's workgroup (1024 threads, 2048 bytes)") != std::string::npos);
  CHECK(small.schedule.workgroupMemory <= 2048);
}

TEST_CASE("plan: a request prints as one line with its types, attributes and schedule") {
  Plan p = plan(attention(1, 4, 16, 256, 64, 2), target("lavapipe"));
  CHECK(printRequest(p.kernels[0].request) ==
        "Attention(f32[1,4,16,64], f32[1,2,256,64], f32[1,2,256,64]) -> f32[1,4,16,64] {scale=0.125, n_rep=2, "
        "key=dense, mask=none, bound=capacity} schedule=prefill lanes=128 splits=1 workgroup=128 memory=24580 "
        "tile=32x32 vector=4 thread=4x2");
  CHECK(p.kernels[0].entry == "attention_prefill_0");
  Graph c = parse(
      "graph c\n"
      "%k = Constant() {value=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]} : f32[17]\n"
      "%z = Constant() {value=[-0]} : f32[]\n"
      "%o = Constant() {value=[0]} : f32[]\n"
      "output %k\noutput %z\noutput %o\n");
  Plan pc = plan(c, target("lavapipe"));
  std::string line = printRequest(pc.kernels[0].request);
  CHECK(line.find("{value=[17 values #") != std::string::npos);
  CHECK(line.find('\n') == std::string::npos);
  // -0 and 0 are different constants: two kernels.
  CHECK(pc.kernels.size() == 3);
}

TEST_CASE("plan: identical requests share one kernel across layers") {
  DeviceProfile lava = target("lavapipe");
  Graph g = compiled("tiny-llama-decode.pg", lava);
  Plan p = plan(g, lava);
  int attentionKernels = 0, attentionDispatches = 0;
  for (const Kernel& k : p.kernels) attentionKernels += k.request.op == Op::Attention;
  for (const Dispatch& d : p.dispatches)
    attentionDispatches += p.kernels[size_t(d.kernel)].request.op == Op::Attention;
  CHECK(attentionKernels == 1);
  CHECK(attentionDispatches == 2);  // two layers, 4 rows on 2 compute units: streaming
  CHECK(p.kernels.size() < p.dispatches.size());
  std::set<std::string> lines, entries;
  for (const Kernel& k : p.kernels) {
    lines.insert(requestIdentity(k.request));
    entries.insert(k.entry);
  }
  CHECK(lines.size() == p.kernels.size());
  CHECK(entries.size() == p.kernels.size());
  // Every eqn is dispatched, in order.
  int32_t last = -1;
  for (const Dispatch& d : p.dispatches) {
    CHECK(d.eqn >= last);
    last = d.eqn;
  }
  CHECK(last == int32_t(g.eqns.size()) - 1);
  CHECK(p.deviceName == "lavapipe");
  CHECK(p.deviceHash == profileHash(lava));
  CHECK(p.target == Target::Spirv);
  CHECK(p.deviceArch == "vulkan1.3");
}

TEST_CASE("plan: the key is stable and follows the requests and the profile") {
  DeviceProfile lava = target("lavapipe");
  Graph g = attention(1, 4, 1, 512, 64);
  std::string k1 = plan(g, lava).key, k2 = plan(attention(1, 4, 1, 512, 64), lava).key;
  CHECK(k1.size() == 16);
  CHECK(k1 == k2);
  CHECK(plan(g, lava).key == planKey(plan(g, lava)));
  // A changed attribute, a changed shape, a changed split count.
  CHECK(plan(attention(1, 4, 1, 512, 64, 1, "f32", 0.25), lava).key != k1);
  CHECK(plan(attention(1, 4, 1, 640, 64), lava).key != k1);
  Synth a, b;
  a.cus = 4;  // 4 rows fill 4 compute units: streaming
  b.cus = 64;  // 4 rows now split: a different request
  CHECK(splitsOf(g, a.make()) == 1);
  CHECK(splitsOf(g, b.make()) == 4);
  CHECK(plan(g, a.make()).key != plan(g, b.make()).key);
  // A profile change that changes no request still changes the key.
  Synth c;
  c.cus = 4;
  c.memory = 2147483647;
  CHECK(plan(g, a.make()).kernels[0].request == plan(g, c.make()).kernels[0].request);
  CHECK(plan(g, a.make()).key != plan(g, c.make()).key);
  // Every shipped profile hashes differently, and the same on every load.
  std::set<uint64_t> hashes;
  for (const char* t : {"amd-mi300x", "amd-rx7900xtx-radv", "amd-rx7900xtx", "intel-arc-a770", "lavapipe",
                        "nvidia-h200-vulkan", "nvidia-h200", "raspberrypi5-v3d"}) {
    hashes.insert(profileHash(target(t)));
    CHECK(profileHash(target(t)) == profileHash(target(t)));
  }
  CHECK(hashes.size() == 8);
  // matrix_multiply is part of the device too: the H200 without it hashes
  // differently.
  DeviceProfile simt = target("nvidia-h200");
  simt.matrix_ops.clear();
  CHECK(profileHash(simt) != profileHash(target("nvidia-h200")));
  // So is the memory bandwidth, where given (the H200's is).
  DeviceProfile unmeasured = target("nvidia-h200");
  REQUIRE(unmeasured.memory_bandwidth_bytes_per_s == 4270000000000);
  unmeasured.memory_bandwidth_bytes_per_s = 0;
  CHECK(profileHash(unmeasured) != profileHash(target("nvidia-h200")));
  CHECK(fnv1a("") == 0xcbf29ce484222325ull);
  CHECK(fnv1a("a") == 0xaf63dc4c8601ec8cull);
}

TEST_CASE("plan: every example graph plans on every shipped profile or refuses with a capability error") {
  for (const char* t : {"lavapipe", "nvidia-h200", "raspberrypi5-v3d", "amd-mi300x"}) {
    DeviceProfile d = target(t);
    for (const char* ex : {"tiny-llama-decode.pg", "tiny-llama-prefill.pg", "tiny-llama-decode-paged-live.pg",
                           "tiny-gemma2-decode.pg", "tiny-deepseek-v2-decode.pg", "tiny-sparse-decode.pg",
                           "tiny-bloom-prefill.pg"}) {
      CAPTURE(t);
      CAPTURE(ex);
      Graph g = compiled(ex, d);
      auto p = planGraph(g, d);
      if (!p) {
        CHECK(p.error().kind == ErrorKind::Capability);
        continue;
      }
      // One dispatch or more for each eqn, but one for a whole fusion group.
      auto groups = fusionGroups(g);
      REQUIRE(bool(groups));
      size_t planned = g.eqns.size();
      for (const FusionGroup& grp : *groups) planned -= grp.members.size() - 1;
      CHECK(planned < g.eqns.size());
      CHECK(p->dispatches.size() >= planned);
      for (const Dispatch& disp : p->dispatches) {
        CHECK(disp.grid[0] >= 1);
        CHECK(disp.grid[0] <= d.grid_limits[0]);
        CHECK(disp.grid[1] <= d.grid_limits[1]);
      }
    }
  }
}

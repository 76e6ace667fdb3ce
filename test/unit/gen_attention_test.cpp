// Tests of the attention generators (gen/attention.cpp, gen/decode.cpp,
// gen/selected.cpp): one-eqn graphs of every Attention form, each on the
// decode schedule (few query rows a KV head) and on the streaming one (more),
// with and without split-KV, and of SelectedAttention are
// planned, generated, verified and run on the KIR interpreter (kir_plan.h)
// and (in the optimized build) on lavapipe through the runtime
// (vulkan_plan.h), both against the
// oracle on fresh random parameters. Every output element must
// be within 2e-5 of the oracle's (outputs are softmax averages of values in
// (-1, 1); the score dots, the folds and the split-KV combine reassociate
// the sums),
// and NaN exactly where the oracle has NaN. Profiles: lavapipe (32 KiB of
// workgroup memory, so wide heads get few lanes), a 16 KiB copy (fewer
// still, and one compute unit, so nothing splits) and a copy with 64 compute
// units, so a decode with Lk >= 256 splits. A last case hands the kernels
// to the emitters of all three target kinds.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kir_plan.h"
#include "plan/schedule.h"
#include "vulkan_plan.h"
#include "testing.h"

namespace poot {
namespace {

using testing::freshSeed;

constexpr double kTol = 2e-5;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

// One Attention eqn: its shape and form.
struct Case {
  int64_t B = 1, Hq = 2, nrep = 1, Lq = 1, Lk = 37, Dk = 32, Dv = 32;
  std::string key = "dense";  // dense, split, paged
  int64_t Ds = 8;             // split: the shared key width
  int64_t S = 0;              // paged: pool slots (0: B * Lk + 5)
  int64_t Hm = 0;             // 0: no mask; 1 or Hq: an additive mask's heads
  bool causal = false;        // mask=causal over qpos [B, Lq] (instead of Hm)
  int64_t window = 0;         // with causal: the window, 0 for none
  bool live = false;
  double softcap = 0;         // 0: none
  std::string dtype = "f32";  // q, k, v and the output's
};

// An output element x's distance from the oracle's: kTol, and for two-byte
// outputs one unit in the last place of x more (at most 2^-7 |x| in bf16,
// 2^-10 |x| in f16): the kernel's output is within kTol of the exact one
// (the two-byte ops take each weight as a head and a remainder, 16 bits or
// more), and it and the oracle's round to the dtype apart where a rounding
// boundary falls between them.
struct Tol {
  double abs, rel;
};
Tol tolerance(const Case& c) { return {kTol, c.dtype == "f32" ? 0 : c.dtype == "bf16" ? 0x1p-7 : 0x1p-10}; }

std::string dims(std::vector<int64_t> d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

int64_t poolSlots(const Case& c) { return c.S ? c.S : c.B * c.Lk + 5; }

std::string graphText(const Case& c) {
  int64_t Hkv = c.Hq / c.nrep;
  bool paged = c.key == "paged", split = c.key == "split";
  std::string s = "graph t\ninput %q : " + c.dtype + dims({c.B, c.Hq, c.Lq, c.Dk}) + "\n", ops = "%q, %k";
  if (paged) {
    s += "input %k : " + c.dtype + dims({poolSlots(c), Hkv, c.Dk}) + "\n";
    s += "input %v : " + c.dtype + dims({poolSlots(c), Hkv, c.Dv}) + "\n";
    s += "slot %read : i32" + dims({c.B, c.Lk}) + " range [0, " + std::to_string(poolSlots(c) - 1) + "]\n";
  } else {
    s += "input %k : " + c.dtype + dims({c.B, Hkv, c.Lk, c.Dk - (split ? c.Ds : 0)}) + "\n";
    s += "input %v : " + c.dtype + dims({c.B, Hkv, c.Lk, c.Dv}) + "\n";
  }
  if (split) {
    s += "input %k_shared : " + c.dtype + dims({c.B, 1, c.Lk, c.Ds}) + "\n";
    ops += ", %k_shared";
  }
  ops += ", %v";
  if (paged) ops += ", %read";
  if (c.Hm) {
    s += "input %mask : " + c.dtype + dims({c.B, c.Hm, c.Lq, c.Lk}) + "\n";
    ops += ", %mask";
  }
  if (c.causal) {
    s += "input %qpos : i32" + dims({c.B, c.Lq}) + "\n";
    ops += ", %qpos";
  }
  if (c.live) {
    s += "input %len : i32" + dims({c.B}) + "\n";
    ops += ", %len";
  }
  std::string mask = c.Hm ? "additive" : c.causal ? "causal" : "none";
  if (c.window) mask += ", window=" + std::to_string(c.window);
  s += "%out = Attention(" + ops + ") {scale=" + std::to_string(1 / std::sqrt(double(c.Dk)));
  if (c.softcap) s += ", softcap=" + std::to_string(c.softcap);
  s += ", n_rep=" + std::to_string(c.nrep) + ", key=" + c.key + ", mask=" + mask +
       ", bound=" + (c.live ? "live" : "capacity") + "} : " + c.dtype + dims({c.B, c.Hq, c.Lq, c.Dv}) + "\n";
  return s + "output %out\n";
}

DeviceProfile withMemory(int64_t bytes, int64_t units) {
  DeviceProfile d = testing::loadTarget("lavapipe");
  d.name = "lavapipe-" + std::to_string(bytes) + "-" + std::to_string(units);
  d.workgroup_memory_bytes = bytes;
  d.compute_units = units;
  return d;
}
const DeviceProfile& lavapipe() {
  static const DeviceProfile d = testing::loadTarget("lavapipe");
  return d;
}
const DeviceProfile& small() {
  static const DeviceProfile d = withMemory(16384, 1);
  return d;
}
// Eight threads a workgroup: too few for the decode and prefill schedules,
// so every attention streams (8 lanes).
const DeviceProfile& narrow() {
  static const DeviceProfile d = [] {
    DeviceProfile p = testing::loadTarget("lavapipe");
    p.name = "lavapipe-8-threads";
    p.max_workgroup_size = 8;
    return p;
  }();
  return d;
}
const DeviceProfile& wide() {
  static const DeviceProfile d = withMemory(32768, 64);
  return d;
}

// The schedule kinds of the plan's dispatches, in order.
std::vector<std::string> kindsOf(const Graph& g, const DeviceProfile& d) {
  auto p = planGraph(g, d);
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  std::vector<std::string> out;
  for (const Dispatch& dp : p->dispatches) out.push_back(p->kernels[size_t(dp.kernel)].request.schedule.kind);
  return out;
}
const std::vector<std::string> kStreaming = {"streaming"};
const std::vector<std::string> kDecode = {"decode"};
const std::vector<std::string> kPrefill = {"prefill"};
const std::vector<std::string> kSplit = {"split-kv-partials", "split-kv-combine"};
const std::vector<std::string> kDecodeSplit = {"decode", "split-kv-combine"};

// An executor's output against the oracle's: NaN where it is NaN, else
// within tol.
void compare(const Tensor& a, const Tensor& b, Tol tol) {
  REQUIRE(a.type == b.type);
  int64_t bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    double x = a.get(i), y = b.get(i);
    bool ok = std::isnan(x) || std::isnan(y) ? std::isnan(x) && std::isnan(y) : std::fabs(x - y) <= tol.abs + tol.rel * std::fabs(x);
    if (!std::isnan(x) && !std::isnan(y)) worst = std::max(worst, std::fabs(x - y));
    if (!ok && ++bad <= 3) FAIL_CHECK("element " << i << ": " << y << " vs the oracle's " << x);
  }
  CHECK_MESSAGE(bad == 0, bad << " elements differ; the largest finite difference is " << worst);
}

// The plan on the KIR interpreter and, unless told, on lavapipe (SPIR-V
// through the runtime) against the oracle on `params`.
void check(const Graph& g, const DeviceProfile& d, const std::map<std::string, Tensor>& params, Tol tol = {kTol, 0},
           bool onLavapipe = true) {
  auto want = evaluate(g, params);
  REQUIRE_MESSAGE(bool(want), (want ? "" : want.error().str()));
  const Tensor& a = want->outputs.at("out");
  auto kir = testing::runOnKir(g, d, params);
  REQUIRE_MESSAGE(bool(kir), (kir ? "" : kir.error().str()));
  {
    INFO("kir");
    compare(a, kir->outputs.at("out"), tol);
  }
  if (!onLavapipe || d.target != Target::Spirv || !testing::kGeneratorsOnLavapipe) return;
  auto vulkan = testing::runOnVulkan(g, d, params);
  REQUIRE_MESSAGE(bool(vulkan), (vulkan ? "" : vulkan.error().str()));
  INFO("lavapipe");
  compare(a, vulkan->outputs.at("out"), tol);
}

// Fresh parameters for c, with `tweak(c, params, seed)` applied before the
// check.
using Params = std::map<std::string, Tensor>;
template <class Tweak>
void run(const Case& c, const DeviceProfile& d, const std::vector<std::string>& kinds, Tweak tweak) {
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  CAPTURE(graphText(c));
  Graph g = testing::parse(graphText(c));
  std::vector<std::string> got = kindsOf(g, d);
  std::string gotText;
  for (const std::string& k : got) gotText += k + " ";
  CAPTURE(gotText);
  REQUIRE(got == kinds);
  auto params = completeParams(g, {}, seed);
  tweak(c, params, seed);
  check(g, d, params, tolerance(c));
}
void run(const Case& c, const DeviceProfile& d, const std::vector<std::string>& kinds) {
  run(c, d, kinds, [](const Case&, Params&, uint64_t) {});
}

// A form on every schedule: the decode schedule at c's own query rows
// (n_rep * Lq of them a KV head, at most 8); the prefill one at enough more
// rows that they no longer pack (streaming where no prefill tile fits the
// device: a wide value on 16 or 32 KiB); and the streaming one at those rows on a
// device too narrow for the other two.
template <class Tweak>
void runBoth(Case c, const DeviceProfile& d, Tweak tweak) {
  REQUIRE(c.nrep * c.Lq <= kMaxPackedRows);
  {
    INFO("decode");
    run(c, d, kDecode, tweak);
  }
  c.Lq = kMaxPackedRows / c.nrep + 1;
  {
    INFO("prefill");
    int64_t ds = c.key == "split" ? c.Ds : 0;
    bool tiles = bool(choosePrefill(c.nrep, c.Dk - ds, ds, c.Dv, DType::F32, d).schedule);
    run(c, d, tiles ? kPrefill : kStreaming, tweak);
  }
  INFO("streaming");
  run(c, narrow(), kStreaming, tweak);
}
void runBoth(const Case& c, const DeviceProfile& d) {
  runBoth(c, d, [](const Case&, Params&, uint64_t) {});
}

// The key row of (b, g, t): a dense row, or the pool row read[b, t] * Hkv + g.
int64_t keyRow(const Case& c, const std::map<std::string, Tensor>& p, int64_t b, int64_t g, int64_t t) {
  int64_t Hkv = c.Hq / c.nrep;
  if (c.key == "paged") return int64_t(p.at("read").get(b * c.Lk + t)) * Hkv + g;
  return (b * Hkv + g) * c.Lk + t;
}

// NaN in every key and value element of key t of batch row b, in every KV
// head (and its shared key part).
void poisonKey(const Case& c, std::map<std::string, Tensor>& p, int64_t b, int64_t t) {
  int64_t Hkv = c.Hq / c.nrep, Dkh = c.Dk - (c.key == "split" ? c.Ds : 0);
  for (int64_t g = 0; g < Hkv; ++g) {
    int64_t row = keyRow(c, p, b, g, t);
    for (int64_t d = 0; d < Dkh; ++d) p.at("k").set(row * Dkh + d, kNaN);
    for (int64_t d = 0; d < c.Dv; ++d) p.at("v").set(row * c.Dv + d, kNaN);
  }
  for (int64_t d = 0; c.key == "split" && d < c.Ds; ++d) p.at("k_shared").set((b * c.Lk + t) * c.Ds + d, kNaN);
}

// NaN in every key and value element of the keys at or past len[b].
void poisonPastLen(const Case& c, std::map<std::string, Tensor>& p) {
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = std::max<int64_t>(0, int64_t(p.at("len").get(b))); t < c.Lk; ++t) poisonKey(c, p, b, t);
}

void setLens(std::map<std::string, Tensor>& p, const std::vector<int64_t>& lens) {
  for (size_t b = 0; b < lens.size(); ++b) p.at("len").set(int64_t(b), double(lens[b]));
}

// The causal positions of row (b, i): pos(b, i).
template <class Pos>
void setPositions(const Case& c, std::map<std::string, Tensor>& p, Pos pos) {
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t i = 0; i < c.Lq; ++i) p.at("qpos").set(b * c.Lq + i, double(pos(b, i)));
}

// NaN in every key and value element of the keys no query row of their
// batch row sees under the causal mask (past every position, before every
// window): the kernel must neither score them into a row nor read their
// values.
void poisonHidden(const Case& c, std::map<std::string, Tensor>& p) {
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < c.Lk; ++t) {
      bool seen = false;
      for (int64_t i = 0; i < c.Lq; ++i) {
        int64_t pos = int64_t(p.at("qpos").get(b * c.Lq + i));
        seen = seen || (t <= pos && (c.window == 0 || pos - t < c.window));
      }
      if (!seen) poisonKey(c, p, b, t);
    }
}

TEST_CASE("attention gen: dense value widths, lanes from the workgroup memory") {
  std::set<int64_t> lanes;
  for (int64_t dv : {32, 48, 64, 80, 96, 112, 128, 192, 256, 512})
    for (const DeviceProfile* d : {&lavapipe(), &small()}) {
      CAPTURE(dv);
      CAPTURE(d->name);
      Case c;
      c.Hq = 4, c.nrep = 2, c.Lq = 2, c.Dv = dv, c.Dk = dv > 128 ? 64 : dv;
      c.Lk = dv > 128 ? 45 : 77;  // never a multiple of the lane count or the tile
      c.B = dv > 128 ? 1 : 2;
      // Every schedule at three widths (the decode test below covers more of
      // them); the streaming lanes at every width.
      if (dv == 48 || dv == 128 || dv == 512) runBoth(c, *d);
      // Nine query heads of one KV head, one row each: too many to pack,
      // too few rows for a prefill, too few keys to split: they stream.
      c.Hq = 9, c.nrep = 9, c.Lq = 1;
      run(c, *d, kStreaming);
      auto p = planGraph(testing::parse(graphText(c)), *d);
      REQUIRE(bool(p));
      lanes.insert(p->kernels[0].request.schedule.lanes);
    }
  CHECK(lanes == std::set<int64_t>{4, 8, 16, 32, 64});  // 512 wide on 16 KiB: 4 lanes
}

TEST_CASE("attention gen: decode packs n_rep 1 to 8 query heads, key widths 32 to 512") {
  struct Shape {
    int64_t nrep, Lq, Dk, Dv, Lk;
  };
  // Key lengths that are no multiple of a tile, a pass or a slice; value
  // widths unlike the key's; widths that load 4, 2 or 1 elements at a time
  // (in bf16 also 8: 16 bytes).
  for (Shape sh : {Shape{1, 1, 32, 32, 77}, Shape{2, 1, 64, 48, 131}, Shape{4, 1, 128, 128, 300},
                   Shape{8, 1, 96, 80, 70}, Shape{3, 1, 40, 24, 65}, Shape{4, 2, 64, 64, 99},
                   Shape{1, 1, 256, 256, 45}, Shape{2, 1, 512, 64, 40}, Shape{1, 1, 34, 18, 93},
                   Shape{2, 1, 33, 17, 129}})
    for (const DeviceProfile* d : {&lavapipe(), &small()})
      for (const char* dtype : {"f32", "bf16"}) {
        Case c;
        c.B = 2, c.nrep = sh.nrep, c.Hq = 2 * sh.nrep, c.Lq = sh.Lq, c.Dk = sh.Dk, c.Dv = sh.Dv, c.Lk = sh.Lk;
        c.dtype = dtype;
        CAPTURE(d->name);
        run(c, *d, kDecode);
      }
}

TEST_CASE("attention gen: masks and softcap") {
  Case c;
  c.B = 2, c.Hq = 4, c.nrep = 2, c.Lq = 3, c.Lk = 70, c.Dk = 48, c.Dv = 64;
  SUBCASE("shared mask") { c.Hm = 1; }
  SUBCASE("alibi per-head mask") { c.Hm = c.Hq; }
  SUBCASE("softcap") { c.softcap = 0.7; }  // small enough that the cap bends every score
  SUBCASE("softcap and per-head mask") { c.softcap = 2.5, c.Hm = c.Hq; }
  runBoth(c, lavapipe());
}

// Row (b = 0, i = 1) sees nothing. Batch row 1 hides about every third key
// from all its query rows, and those keys' values are NaN: a hidden value
// row must not be read. (A shared additive mask, two batch rows.)
void hideKeys(const Case& c, Params& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tensor &mask = p.at("mask"), &v = p.at("v");
  for (int64_t t = 0; t < c.Lk; ++t) mask.set((0 * c.Lq + 1) * c.Lk + t, -kInf);
  for (int64_t t = 0; t < c.Lk; ++t)
    if (rng() % 3 == 0) {
      for (int64_t i = 0; i < c.Lq; ++i) mask.set((1 * c.Lq + i) * c.Lk + t, -kInf);
      for (int64_t h = 0; h < c.Hq; ++h)
        for (int64_t d = 0; d < c.Dv; ++d) v.set(((1 * c.Hq + h) * c.Lk + t) * c.Dv + d, kNaN);
    }
}

TEST_CASE("attention gen: -inf keys add no weight and a fully masked row is NaN") {
  Case c;
  c.B = 2, c.Hq = 2, c.Lq = 2, c.Lk = 90, c.Dk = 32, c.Dv = 32, c.Hm = 1;
  runBoth(c, lavapipe(), hideKeys);
}

TEST_CASE("attention gen: a NaN score makes its row NaN") {
  Case c;
  c.B = 1, c.Hq = 4, c.nrep = 2, c.Lk = 150, c.Dk = 32, c.Dv = 32, c.Hm = c.Hq;
  runBoth(c, lavapipe(), [](const Case& c, Params& p, uint64_t) {
    // Head 1, row 0: one NaN among finite scores; head 2, row 0: a NaN
    // among keys that are otherwise all -inf.
    Tensor& mask = p.at("mask");
    mask.set((1 * c.Lq) * c.Lk + 77, kNaN);
    for (int64_t t = 0; t < c.Lk; ++t) mask.set((2 * c.Lq) * c.Lk + t, t == 140 ? kNaN : -kInf);
  });
}

TEST_CASE("attention gen: split key") {
  Case c;
  c.B = 2, c.Hq = 4, c.nrep = 4, c.Lq = 2, c.Lk = 53, c.Dk = 48, c.Ds = 16, c.Dv = 32;
  SUBCASE("plain") {}
  SUBCASE("masked and capped") { c.Hm = c.Hq, c.softcap = 3.0; }
  SUBCASE("a shared part that loads two at a time") { c.Dk = 46, c.Ds = 6, c.nrep = 2, c.Lq = 1; }
  runBoth(c, lavapipe());
}

TEST_CASE("attention gen: paged key through a permuted read map") {
  Case c;
  c.B = 2, c.Hq = 4, c.nrep = 2, c.Lq = 2, c.Lk = 41, c.Dk = 32, c.Dv = 48, c.key = "paged";
  SUBCASE("plain") {}
  SUBCASE("masked") { c.Hm = 1; }
  // The decode loads each key's read word a tile ahead: keys over several
  // tiles, the last one partial.
  SUBCASE("several tiles") { c.Lk = 299; }
  runBoth(c, lavapipe());
}

TEST_CASE("attention gen: live length visits only the live keys") {
  Case c;
  c.B = 3, c.Hq = 2, c.Lq = 2, c.Lk = 67, c.Dk = 32, c.Dv = 32, c.live = true;
  SUBCASE("dense") {}
  SUBCASE("paged") { c.key = "paged"; }
  SUBCASE("split key, masked") { c.key = "split", c.Hm = 1; }
  runBoth(c, lavapipe(), [](const Case& c, Params& p, uint64_t) {
    setLens(p, {1, c.Lk, 30});
    poisonPastLen(c, p);
  });
}

TEST_CASE("attention gen: live length outside 1..=Lk is clamped as the oracle clamps it") {
  Case c;
  c.B = 2, c.Hq = 2, c.Lk = 20, c.live = true;
  runBoth(c, lavapipe(), [](const Case& c, Params& p, uint64_t) { setLens(p, {0, c.Lk + 9}); });
}

TEST_CASE("attention gen: causal and windowed masks computed in the kernel") {
  Case c;
  c.B = 2, c.Hq = 4, c.nrep = 2, c.Lq = 3, c.Lk = 70, c.Dk = 32, c.Dv = 48, c.causal = true;
  SUBCASE("causal") {}
  SUBCASE("window") { c.window = 9; }
  SUBCASE("a window of one key") { c.window = 1; }
  SUBCASE("a window past every position") { c.window = 500; }
  SUBCASE("paged, softcap and window") { c.key = "paged", c.softcap = 1.5, c.window = 17; }
  SUBCASE("split key, live, window") { c.key = "split", c.live = true, c.window = 23; }
  SUBCASE("one KV head for eight query rows") { c.Hq = 8, c.nrep = 8, c.Lq = 1, c.window = 12; }
  CAPTURE(c.key);
  CAPTURE(c.window);
  runBoth(c, lavapipe(), [](const Case& c, Params& p, uint64_t) {
    // Batch row 0: positions 20 + 7i, an offset prefill (with a window, rows
    // whose windows do not overlap). Batch row 1: a negative position (the
    // row sees nothing: NaN), one past the keys, then the last keys, going
    // down.
    setPositions(c, p, [&](int64_t b, int64_t i) -> int64_t {
      if (b == 0) return 20 + 7 * i;
      return i == 0 ? -1 : i == 1 ? c.Lk + 5 : c.Lk - 1 - 3 * i;
    });
    if (c.live) {
      setLens(p, {50, c.Lk});
      poisonPastLen(c, p);
    }
    poisonHidden(c, p);
  });
}

TEST_CASE("attention gen: prefill value columns in runs of 4, 2 and 1, on every tile") {
  struct Shape {
    int64_t nrep, Dk, Dv;
  };
  // On lavapipe's 32 x 32 tile, and the 64 x 64 tile of a device with 128
  // KiB of workgroup memory on the KIR interpreter alone (lavapipe holds 32
  // KiB), both of 16 column threads, two key tiles: value widths in runs of
  // 4 (64), of 2 (96) or one column at a time (17, 18, 48, 80), and odd key
  // widths (the key tile last, at an odd offset).
  for (Shape sh : {Shape{2, 40, 48}, Shape{1, 33, 17}, Shape{4, 34, 18}, Shape{2, 64, 80}, Shape{1, 32, 96},
                   Shape{2, 40, 64}})
    for (bool big : {false, true}) {
      Case c;
      c.B = 1, c.nrep = sh.nrep, c.Hq = 2 * sh.nrep, c.Lq = 8 / sh.nrep + 3, c.Dk = sh.Dk, c.Dv = sh.Dv, c.Lk = 70;
      CAPTURE(graphText(c));
      DeviceProfile d = big ? withMemory(131072, 1) : lavapipe();
      auto tile = choosePrefill(c.nrep, c.Dk, 0, c.Dv, DType::F32, d).schedule;
      REQUIRE(tile);
      CAPTURE(tile->tileM);
      if (big) CHECK(tile->tileM == 64);
      Graph g = testing::parse(graphText(c));
      REQUIRE(kindsOf(g, d) == kPrefill);
      uint64_t seed = freshSeed();
      CAPTURE(seed);
      check(g, d, completeParams(g, {}, seed), {kTol, 0}, !big);
    }
}

TEST_CASE("attention gen: a causal prefill at a length no tile or lane count divides") {
  Case c;
  c.B = 1, c.Hq = 4, c.nrep = 4, c.Lq = 2, c.Lk = 131, c.Dk = 64, c.Dv = 64, c.causal = true;
  SUBCASE("causal") {}
  SUBCASE("window") { c.window = 37; }
  runBoth(c, lavapipe(), [](const Case& c, Params& p, uint64_t) {
    // A prefill of Lq rows at the end of the cache: positions Lk - Lq + i.
    setPositions(c, p, [&](int64_t, int64_t i) { return c.Lk - c.Lq + i; });
    poisonHidden(c, p);
  });
}

// The tensor-core prefill ("prefill-mma", prefill_mma.cpp) of the H200's
// profile (two-byte inputs on its warpgroup op, and on its warp op with the
// warpgroup ops taken out), on the KIR interpreter (lavapipe has no matrix
// multiply):
// every form, n_rep 1 to 8, key and value widths 17 to 256 that are no
// multiple of the 8-wide matrix step or of each other, lengths no tile
// divides, more than one block of rows, and the exact path a tile with a
// non-finite (hidden) value takes. Its three tf32 products a pair keep the
// same 2e-5 as the f32 schedules.
const DeviceProfile& h200() {
  static const DeviceProfile d = testing::loadTarget("nvidia-h200");
  return d;
}
const std::vector<std::string> kPrefillMma = {"prefill-mma"};
// The H200's profile without its warpgroup ops, as an sm_80 or sm_89 part
// would list them: two-byte prefills on the warp's m16n8k16.
const DeviceProfile& h200Warps() {
  static const DeviceProfile d = [] {
    DeviceProfile p = h200();
    p.name += "-warps";
    std::erase_if(p.matrix_ops, [](MatrixOp op) { return matrixShape(op).threads == 128; });
    return p;
  }();
  return d;
}

TEST_CASE("attention gen: tensor-core prefill, widths and row blocks") {
  struct Shape {
    int64_t nrep, Lq, Dk, Dv, Lk;
  };
  for (Shape sh : {Shape{1, 70, 32, 32, 77}, Shape{2, 37, 64, 48, 131}, Shape{4, 17, 128, 128, 70},
                   Shape{8, 9, 96, 80, 70}, Shape{3, 23, 40, 24, 65}, Shape{1, 9, 256, 256, 45},
                   Shape{2, 9, 33, 17, 40}, Shape{4, 45, 64, 64, 100}, Shape{1, 150, 32, 48, 170}})
    for (const char* dtype : {"f32", "bf16", "f16"}) {
      Case c;
      c.B = 2, c.nrep = sh.nrep, c.Hq = 2 * sh.nrep, c.Lq = sh.Lq, c.Dk = sh.Dk, c.Dv = sh.Dv, c.Lk = sh.Lk;
      c.dtype = dtype;
      run(c, h200(), kPrefillMma);
      if (std::string(dtype) == "bf16") run(c, h200Warps(), kPrefillMma);
    }
  // Past 256 wide the output fragment would not fit the registers: the SIMT
  // tile.
  Case wide;
  wide.Lq = 9, wide.Dk = 64, wide.Dv = 512, wide.Lk = 20;
  run(wide, h200(), kPrefill);
}

TEST_CASE("attention gen: tensor-core prefill, every form") {
  Case c;
  c.B = 2, c.Hq = 4, c.nrep = 2, c.Lq = 35, c.Lk = 83, c.Dk = 48, c.Dv = 40;
  SUBCASE("shared mask") { c.Hm = 1; }
  SUBCASE("per-head mask and softcap") { c.Hm = c.Hq, c.softcap = 2.5; }
  SUBCASE("split key") { c.key = "split", c.Dk = 56, c.Ds = 8; }
  SUBCASE("paged key") { c.key = "paged"; }
  SUBCASE("live, paged") { c.key = "paged", c.live = true; }
  SUBCASE("causal") { c.causal = true; }
  SUBCASE("causal window, split key, live") { c.causal = true, c.window = 23, c.key = "split", c.Ds = 8, c.live = true; }
  for (const char* dtype : {"f32", "bf16"}) {
    c.dtype = dtype;
    CAPTURE(graphText(c));
    auto setUp = [](const Case& c, Params& p, uint64_t) {
      if (c.causal)
        setPositions(c, p, [&](int64_t b, int64_t i) -> int64_t { return b == 0 ? 20 + i : i == 0 ? -1 : c.Lk - 1 - i; });
      if (c.live) {
        setLens(p, {50, c.Lk});
        poisonPastLen(c, p);
      }
      if (c.causal) poisonHidden(c, p);
    };
    run(c, h200(), kPrefillMma, setUp);
    if (std::string(dtype) == "bf16") run(c, h200Warps(), kPrefillMma, setUp);
  }
}

// Two-byte q, k and v take the profile's first op of their dtype: on the
// H200 the warpgroup's (m64nNk16), the scores one chain of mma.shared over
// the key width (16 key dims a link) and the output one of mma.shared.b
// over the tile's keys (16 keys a link, two products each); without it the
// warp's (m16n8k16), every Mma of that op: 16 key dims a score product and
// 16 keys a value product.
TEST_CASE("attention gen: tensor-core prefill on two-byte inputs runs the op of their dtype") {
  Case c;
  c.B = 1, c.Hq = 4, c.nrep = 2, c.Lq = 40, c.Lk = 90, c.Dk = 64, c.Dv = 64;
  const DeviceProfile& warps = h200Warps();
  for (auto [dtype, group, warp] : {std::tuple{"bf16", MatrixOp::M64NK16Bf16, MatrixOp::M16N8K16Bf16},
                                    {"f16", MatrixOp::M64NK16F16, MatrixOp::M16N8K16F16}})
    for (const DeviceProfile* d : {&h200(), &warps}) {
      c.dtype = dtype;
      MatrixOp op = d == &warps ? warp : group;
      auto p = planGraph(testing::parse(graphText(c)), *d);
      REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
      CHECK(p->kernels.at(0).request.schedule.matrix == matrixShape(op).name);
      auto ks = generateKir(*p, *d);
      REQUIRE_MESSAGE(bool(ks), (ks ? "" : ks.error().str()));
      std::map<kir::Opc, int64_t> count;
      for (const kir::Inst& in : ks->at(0).insts)
        if (in.op == kir::Opc::Mma || kir::isGroupMma(in.op)) {
          CHECK(MatrixOp(in.ref) == op);
          ++count[in.op];
        }
      if (d == &warps) {
        // Scores: 2 unrolled steps of 8 slices; values: 4 groups of 16 keys
        // over 8 slices of value columns, two products each.
        CHECK(count == std::map<kir::Opc, int64_t>{{kir::Opc::Mma, 2 * 8 + 2 * 4 * 8}});
      } else {
        CHECK(count == std::map<kir::Opc, int64_t>{{kir::Opc::MmaShared, 64 / 16}, {kir::Opc::MmaSharedB, 2 * 64 / 16}});
      }
    }
}

// On a profile with tf32 alone, q, k and v in bf16 (or f16), which tf32
// holds exactly, the kernel drops the products of their (zero) remainders:
// a score slice takes one mma instead of three and an output slice two, so
// the kernel holds between a third and two thirds of the f32 kernel's mma.
TEST_CASE("attention gen: tf32 prefill on two-byte inputs takes one product a score") {
  Case c;
  c.B = 1, c.Hq = 4, c.nrep = 2, c.Lq = 40, c.Lk = 90, c.Dk = 64, c.Dv = 64;
  DeviceProfile tf32 = h200();
  tf32.matrix_ops = {MatrixOp::M16N8K8Tf32};
  auto mmas = [&](const std::string& text) {
    auto p = planGraph(testing::parse(text), tf32);
    REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
    REQUIRE(p->kernels.at(0).request.schedule.kind == "prefill-mma");
    auto ks = generateKir(*p, tf32);
    REQUIRE_MESSAGE(bool(ks), (ks ? "" : ks.error().str()));
    return std::count_if(ks->at(0).insts.begin(), ks->at(0).insts.end(),
                         [](const kir::Inst& in) { return in.op == kir::Opc::Mma; });
  };
  std::string f32 = graphText(c), two = f32;
  for (size_t at = two.find("f32"); at != std::string::npos; at = two.find("f32", at)) two.replace(at, 3, "bf16");
  auto full = mmas(f32), exact = mmas(two);
  CAPTURE(full);
  CAPTURE(exact);
  CHECK(full % 3 == 0);
  CHECK(3 * exact > full);
  CHECK(3 * exact < 2 * full);
}

TEST_CASE("attention gen: tensor-core prefill, -inf keys with NaN values and a fully masked row") {
  Case c;
  c.B = 2, c.Hq = 2, c.Lq = 40, c.Lk = 90, c.Dk = 32, c.Dv = 32, c.Hm = 1;
  // hideKeys' tiles take the exact path (a non-finite value in the tile).
  for (const char* dtype : {"f32", "bf16"}) {
    c.dtype = dtype;
    run(c, h200(), kPrefillMma, hideKeys);
    if (std::string(dtype) == "bf16") run(c, h200Warps(), kPrefillMma, hideKeys);
  }
}

// The tensor-core decode ("decode-mma", decode_mma.cpp) of the H200's
// profile on two-byte q, K and V, on the KIR interpreter: n_rep 1 to 16
// rows a KV head (the op's 16 rows part zero), key and value widths 16 to
// 192 in whole steps, lengths that are no multiple of a warp's 32 keys or a
// step's 128 or 256, split over the keys and not, every form it takes. The same
// bound as the prefill-mma (each weight a head and a remainder).
const std::vector<std::string> kDecodeMma = {"decode-mma"};
const std::vector<std::string> kDecodeMmaSplit = {"decode-mma", "split-kv-combine"};

// The H200's profile with `units` compute units: 4 keeps the workgroups of
// these small shapes past one a unit, so they take 4 warps, not 8.
DeviceProfile h200Units(int64_t units) {
  DeviceProfile d = h200();
  d.name += "-" + std::to_string(units) + "-units";
  d.compute_units = units;
  return d;
}

TEST_CASE("attention gen: tensor-core decode, rows, widths and splits") {
  struct Shape {
    int64_t B, nrep, Lq, Dk, Dv, Lk;
  };
  const DeviceProfile four = h200Units(4);
  for (Shape sh : {Shape{2, 4, 1, 128, 128, 77}, Shape{1, 1, 1, 64, 64, 45}, Shape{3, 5, 1, 32, 48, 130},
                   Shape{1, 16, 1, 16, 8, 23}, Shape{2, 8, 2, 192, 128, 70}, Shape{1, 4, 1, 128, 128, 1100},
                   Shape{2, 2, 1, 64, 40, 300}})
    for (const char* dtype : {"bf16", "f16"})
      for (const DeviceProfile* d : {&h200(), &four}) {
        Case c;
        c.B = sh.B, c.nrep = sh.nrep, c.Hq = 2 * sh.nrep, c.Lq = sh.Lq, c.Dk = sh.Dk, c.Dv = sh.Dv, c.Lk = sh.Lk;
        c.dtype = dtype;
        CAPTURE(d->name);
        bool split = c.Lk >= 256 && c.B * 2 < d->compute_units;
        run(c, *d, split ? kDecodeMmaSplit : kDecodeMma);
      }
}

// One KV head of 8200 keys on one compute unit: chooseSplits leaves it
// whole (one workgroup fills the unit); the tensor-core decode splits it in
// 4 chunks of 2048 keys and more (4 workgroups a unit), of 4 warps.
TEST_CASE("attention gen: tensor-core decode splits long chunks further") {
  Case c;
  c.B = 1, c.Hq = 2, c.nrep = 2, c.Lk = 8200, c.Dk = 16, c.Dv = 8, c.dtype = "bf16";
  const DeviceProfile one = h200Units(1);
  auto p = planGraph(testing::parse(graphText(c)), one);
  REQUIRE(bool(p));
  const Schedule& s = p->kernels.at(0).request.schedule;
  CHECK(printSchedule(s) == "decode-mma lanes=128 splits=4 workgroup=128 memory=320 rows=2 vector=1 tile_k=32 "
                            "matrix=m16n8k16.bf16");
  run(c, one, kDecodeMmaSplit);
}

TEST_CASE("attention gen: tensor-core decode, every form it takes") {
  Case c;
  c.B = 3, c.Hq = 8, c.nrep = 4, c.Lq = 1, c.Lk = 83, c.Dk = 64, c.Dv = 64, c.dtype = "bf16";
  SUBCASE("softcap") { c.softcap = 2.5; }
  SUBCASE("split key") { c.key = "split", c.Dk = 80, c.Ds = 16; }
  SUBCASE("paged key") { c.key = "paged"; }
  SUBCASE("live, paged, split over the keys") { c.key = "paged", c.live = true, c.Lk = 700; }
  SUBCASE("causal") { c.causal = true; }
  SUBCASE("causal window, split key, live, split over the keys") {
    c.causal = true, c.window = 150, c.key = "split", c.Dk = 80, c.Ds = 16, c.live = true, c.Lk = 600;
  }
  CAPTURE(graphText(c));
  run(c, h200(), c.Lk >= 256 ? kDecodeMmaSplit : kDecodeMma, [](const Case& c, Params& p, uint64_t) {
    // Row 0 sees every key, row 1 the first 40 (its later keys NaN), row
    // 2 none (NaN).
    if (c.causal) setPositions(c, p, [&](int64_t b, int64_t) -> int64_t { return b == 0 ? c.Lk - 1 : b == 1 ? 39 : -1; });
    if (c.live) {
      setLens(p, {c.Lk, 50, 131});
      poisonPastLen(c, p);
    }
    if (c.causal) poisonHidden(c, p);
  });
}

// Where rows of a KV head may drop different keys (an additive mask, a
// causal mask over several query rows), where q, K and V are f32, or where
// a width is not a whole step, the SIMT decode runs, and --remarks says why
// the tensor-core one declined.
TEST_CASE("attention gen: tensor-core decode declines what it does not take") {
  Case c;
  c.B = 1, c.Hq = 4, c.nrep = 4, c.Lq = 1, c.Lk = 40, c.Dk = 64, c.Dv = 64, c.dtype = "bf16";
  std::string why;
  SUBCASE("additive mask") { c.Hm = 1, why = "do not drop the same keys"; }
  SUBCASE("causal over two query rows") { c.causal = true, c.Lq = 2, c.nrep = 2, why = "do not drop the same keys"; }
  SUBCASE("a key width of 40") { c.Dk = 40, why = "not whole steps of 16"; }
  SUBCASE("a value 256 wide") { c.Dv = 256, why = "past its 192 and 128 in registers"; }
  SUBCASE("f32") { c.dtype = "f32"; }
  std::vector<ScheduleNote> notes;
  auto p = planGraph(testing::parse(graphText(c)), h200(), &notes);
  REQUIRE(bool(p));
  CHECK(p->kernels.at(0).request.schedule.kind == "decode");
  REQUIRE(notes.size() == 1);
  const std::string& reason = notes[0].reason;
  CAPTURE(reason);
  if (why.empty()) CHECK(reason.find("m16n8k16") == std::string::npos);
  else CHECK(reason.find("not on m16n8k16.bf16: ") != std::string::npos);
  CHECK(reason.find(why) != std::string::npos);
  run(c, h200(), kDecode, [](const Case& c, Params& p, uint64_t) {
    if (c.causal) setPositions(c, p, [&](int64_t, int64_t i) -> int64_t { return 20 + 9 * i; });
  });
}

// The split-KV forms on both schedules: c's query heads packed over its KV
// heads (B * Hkv workgroups), then nine query heads of one KV head (too many
// to pack: B * Hq streamed workgroups).
template <class Tweak>
void runSplit(Case c, const DeviceProfile& d, Tweak tweak) {
  {
    INFO("decode");
    run(c, d, kDecodeSplit, tweak);
  }
  c.Hq = 9, c.nrep = 9;
  if (c.Hm > 1) c.Hm = c.Hq;
  INFO("streaming");
  run(c, d, kSplit, tweak);
}
void runSplit(const Case& c, const DeviceProfile& d) { runSplit(c, d, [](const Case&, Params&, uint64_t) {}); }

TEST_CASE("attention gen: decode of wide heads, key and value threads past a warp") {
  struct Shape {
    int64_t nrep, Lq, Dk, Dv, Lk;
  };
  // Eight rows of 512-wide heads take 64 threads a key and one value run a
  // thread (128 a row on the H200's 256 threads, 64 on lavapipe's 64), tiles
  // of 16 and 4 keys; 256-wide heads 64 value threads a row and 32-key
  // tiles. Key lengths no tile divides; a value narrower than the key.
  for (Shape sh : {Shape{8, 1, 512, 512, 53}, Shape{2, 1, 256, 256, 77}, Shape{4, 2, 512, 384, 37}})
    for (const DeviceProfile* d : {&lavapipe(), &h200()}) {
      Case c;
      c.B = 2, c.nrep = sh.nrep, c.Hq = 2 * sh.nrep, c.Lq = sh.Lq, c.Dk = sh.Dk, c.Dv = sh.Dv, c.Lk = sh.Lk;
      CAPTURE(d->name);
      run(c, *d, kDecode);
    }
  // Split over the H200's units: one KV head of 8 rows, 1100 keys in 8 chunks
  // of whole 16-key tiles (the last one shorter), through the combine.
  Case c;
  c.B = 1, c.nrep = 8, c.Hq = 8, c.Lq = 1, c.Dk = 512, c.Dv = 512, c.Lk = 1100;
  run(c, h200(), kDecodeSplit);
}

TEST_CASE("attention gen: decode row groups, a KV head's rows over several workgroups") {
  // One KV head at B = 1 leaves most units idle: its rows go to row groups
  // (each row's query head and position from the group's first row), with
  // and without splits, under a causal window (positions per row) and per
  // head ALiBi-like masks, on the H200's profile (interpreter) and on 64
  // units (lavapipe).
  Case c;
  c.B = 1, c.Hq = 8, c.nrep = 8, c.Lq = 1, c.Lk = 77, c.Dk = 32, c.Dv = 48;
  const DeviceProfile* d = &h200();
  SUBCASE("eight rows, one a group") {}
  SUBCASE("split over the keys too") { c.Lk = 1100; }
  SUBCASE("per-head mask") { c.Hm = c.Hq; }
  SUBCASE("two rows of three heads, a causal window") {
    c.Hq = 3, c.nrep = 3, c.Lq = 2, c.causal = true, c.window = 30;
  }
  SUBCASE("paged on lavapipe's 64 units") { c.key = "paged", d = &wide(); }
  CAPTURE(c.key);
  auto p = planGraph(testing::parse(graphText(c)), *d);
  REQUIRE(bool(p));
  const Schedule& s = p->kernels[0].request.schedule;
  CAPTURE(printSchedule(s));
  CHECK(s.kind == "decode");
  CHECK(s.tileM < c.nrep * c.Lq);
  run(c, *d, s.splits > 1 ? kDecodeSplit : kDecode, [](const Case& c, Params& p, uint64_t) {
    if (c.causal) setPositions(c, p, [&](int64_t, int64_t i) -> int64_t { return 40 + 9 * i; });
  });
}

TEST_CASE("attention gen: split-kv decode") {
  Case c;
  c.B = 1, c.Hq = 2, c.nrep = 2, c.Lq = 1, c.Lk = 600, c.Dk = 64, c.Dv = 64;
  const DeviceProfile* d = &wide();
  SUBCASE("dense") {}
  SUBCASE("wide value") { c.Dv = 192, c.Lk = 300; }
  SUBCASE("per-head mask and softcap") { c.Hm = c.Hq, c.softcap = 1.5; }
  SUBCASE("paged") { c.key = "paged"; }
  SUBCASE("split key") { c.key = "split"; }
  SUBCASE("one row on lavapipe") {
    // Lavapipe's 2 compute units: one KV head splits in two; 9 query rows
    // already fill it.
    c.Hq = 1, c.nrep = 1, c.Lk = 260;
    run(c, lavapipe(), kDecodeSplit);
    return;
  }
  CAPTURE(c.key);
  runSplit(c, *d);
}

TEST_CASE("attention gen: split-kv decode with live lengths leaves neutral partials") {
  Case c;
  c.B = 4, c.Hq = 2, c.Lq = 1, c.Lk = 520, c.Dk = 32, c.Dv = 80, c.live = true;
  SUBCASE("dense") {}
  SUBCASE("paged") { c.key = "paged"; }
  runSplit(c, wide(), [](const Case& c, Params& p, uint64_t) {
    setLens(p, {1, c.Lk, 200, 131});  // chunks past the length are empty
    poisonPastLen(c, p);
  });
}

TEST_CASE("attention gen: split-kv decode under a causal mask skips nothing it must see") {
  Case c;
  c.B = 3, c.Hq = 2, c.Lq = 1, c.Lk = 520, c.Dk = 32, c.Dv = 32, c.causal = true;
  SUBCASE("causal") {}
  SUBCASE("window") { c.window = 150; }
  runSplit(c, wide(), [](const Case& c, Params& p, uint64_t) {
    // Row 0 at the last key, row 1 at 200 (the later chunks see nothing),
    // row 2 at -1 (NaN).
    setPositions(c, p, [&](int64_t b, int64_t) { return b == 0 ? c.Lk - 1 : b == 1 ? 200 : -1; });
    poisonHidden(c, p);
  });
}

TEST_CASE("attention gen: split-kv decode of a fully masked row is NaN") {
  Case c;
  c.B = 2, c.Hq = 2, c.Lq = 1, c.Lk = 512, c.Dk = 32, c.Dv = 32, c.Hm = 1;
  runSplit(c, wide(), [](const Case& c, Params& p, uint64_t) {
    for (int64_t t = 0; t < c.Lk; ++t) p.at("mask").set(t, -kInf);          // batch row 0 sees nothing
    for (int64_t t = 300; t < c.Lk; ++t) p.at("mask").set(c.Lk + t, -kInf);  // row 1: its last chunks
  });
}

// One SelectedAttention eqn.
struct Selected {
  int64_t B = 2, Hq = 4, nrep = 2, Lq = 3, Lk = 96, Dk = 32, Dv = 48, K = 3, block = 8;
  double softcap = 0;
};

std::string selectedText(const Selected& c) {
  std::string s = "graph t\ninput %q : f32" + dims({c.B, c.Hq, c.Lq, c.Dk}) + "\n";
  s += "input %k : f32" + dims({c.B, c.Hq / c.nrep, c.Lk, c.Dk}) + "\n";
  s += "input %v : f32" + dims({c.B, c.Hq / c.nrep, c.Lk, c.Dv}) + "\n";
  s += "input %ids : i32" + dims({c.B, c.Lq, c.K}) + "\n";
  s += "input %qpos : i32" + dims({c.B, c.Lq}) + "\n";
  s += "%out = SelectedAttention(%q, %k, %v, %ids, %qpos) {scale=" + std::to_string(1 / std::sqrt(double(c.Dk)));
  if (c.softcap) s += ", softcap=" + std::to_string(c.softcap);
  s += ", n_rep=" + std::to_string(c.nrep) + ", block=" + std::to_string(c.block) + "} : f32" +
       dims({c.B, c.Hq, c.Lq, c.Dv}) + "\n";
  return s + "output %out\n";
}

TEST_CASE("attention gen: selected attention visits the selected blocks and its own") {
  Selected c;
  SUBCASE("plain") {}
  SUBCASE("softcap, one lane block") { c.softcap = 1.2, c.block = 32, c.K = 2; }
  SUBCASE("wide value") { c.Dv = 256, c.Lk = 40, c.block = 4, c.K = 4; }
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  Graph g = testing::parse(selectedText(c));
  REQUIRE(kindsOf(g, lavapipe()) == kStreaming);
  auto p = completeParams(g, {}, seed);
  std::mt19937_64 rng(seed);
  int64_t NB = c.Lk / c.block;
  for (int64_t row = 0; row < c.B * c.Lq; ++row) {
    // Positions: one negative (sees nothing), one at the very end, the rest
    // anywhere; ids: -1, repeats, the own block and blocks past the position.
    int64_t pos = row == 0 ? -1 : row == 1 ? c.Lk - 1 : int64_t(rng() % uint64_t(c.Lk));
    p.at("qpos").set(row, double(pos));
    for (int64_t j = 0; j < c.K; ++j) {
      int64_t id = int64_t(rng() % uint64_t(NB + 1)) - 1;
      if (j == 1) id = p.at("ids").get(row * c.K);  // a repeat
      if (j == 2 && pos >= 0) id = pos / c.block;   // the own block
      p.at("ids").set(row * c.K + j, double(id));
    }
  }
  // NaN in the keys and values no row visits: blocks no id names and past
  // every position.
  std::vector<bool> seen(size_t(c.B * c.Lk), false);  // per batch row
  for (int64_t row = 0; row < c.B * c.Lq; ++row) {
    int64_t pos = int64_t(p.at("qpos").get(row)), b = row / c.Lq;
    for (int64_t t = 0; t <= pos && t < c.Lk; ++t) {
      bool chosen = t / c.block == pos / c.block;
      for (int64_t j = 0; j < c.K; ++j) chosen |= int64_t(p.at("ids").get(row * c.K + j)) == t / c.block;
      if (chosen) seen[size_t(b * c.Lk + t)] = true;
    }
  }
  for (int64_t bg = 0; bg < c.B * c.Hq / c.nrep; ++bg)
    for (int64_t t = 0; t < c.Lk; ++t)
      if (!seen[size_t(bg / (c.Hq / c.nrep) * c.Lk + t)]) {
        for (int64_t d = 0; d < c.Dk; ++d) p.at("k").set((bg * c.Lk + t) * c.Dk + d, kNaN);
        for (int64_t d = 0; d < c.Dv; ++d) p.at("v").set((bg * c.Lk + t) * c.Dv + d, kNaN);
      }
  check(g, lavapipe(), p);
}

// The generated kernels also pass the emitters: SPIR-V (validated), PTX and
// HSACO, for the decode, streaming, split-KV and selected schedules.
TEST_CASE("attention gen: every schedule emits for the spirv, ptx and hsaco targets") {
  Case c;
  c.B = 1, c.Hq = 4, c.Lk = 600, c.key = "paged", c.Hm = 4, c.live = true, c.softcap = 2;
  Case prefill = c;
  prefill.Lq = 9;
  Case causal = c, causalPrefill = prefill;
  for (Case* x : {&causal, &causalPrefill}) x->Hm = 0, x->causal = true, x->window = 33;
  Selected sel;
  for (const char* target : {"lavapipe", "nvidia-h200", "amd-mi300x"})
    for (const std::string& text :
         {graphText(c), graphText(prefill), graphText(causal), graphText(causalPrefill), selectedText(sel)}) {
      CAPTURE(target);
      CAPTURE(text);
      DeviceProfile d = testing::loadTarget(target);
      auto p = planGraph(testing::parse(text), d);
      REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
      REQUIRE(bool(planBuffers(*p)));
      auto s = generateKernels(*p, d);
      CHECK_MESSAGE(bool(s), (s ? "" : s.error().str()));
      for (const Kernel& k : p->kernels) CHECK(!k.blob.empty());
    }
}

}  // namespace
}  // namespace poot

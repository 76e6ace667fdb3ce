// The MatMul schedules (gemv, every gemm tile) against the oracle, on the KIR
// interpreter and on lavapipe, on fresh random data: rows 1, 2, 3, 7, 16, 17,
// 64, 65 and 513, K and N that are multiples of no tile or vector width, plain
// and transposed b, broadcast batch axes, f16 and f32 results, bf16 and f16
// weights widened by an f32 product. Both the kernel and the oracle sum K
// rounded products, in different orders: each is within gamma_K *
// sum |a_k b_k| of the exact sum (gamma_K = K u / (1 - K u), u = 2^-24, for
// any order, fused multiply-adds or not), so they differ by at most twice
// that, the bound docs/codegen.md states. The test evaluates sum |a_k b_k|
// with the oracle (the same MatMul over Abs of both operands) and holds every
// element to that bound; a two-byte result adds one ulp of its own rounding.
// Integer products wrap and must be equal.
#include <cmath>

#include "kir_plan.h"
#include "plan/schedule.h"
#include "testing.h"
#include "vulkan_plan.h"

namespace poot {
namespace {

struct Case {
  std::string a, b, r;  // types, e.g. "f32[3,37]"
  bool transposed = false;
};

std::string graphText(const Case& c, bool abs) {
  std::string t = "graph g\ninput %a : " + c.a + "\ninput %b : " + c.b + "\n";
  std::string x = "%a", y = "%b";
  if (abs) {
    t += "%aa = Abs(%a) : " + c.a + "\n%ba = Abs(%b) : " + c.b + "\n";
    x = "%aa", y = "%ba";
  }
  t += "%r = MatMul(" + x + ", " + y + ")" + (c.transposed ? " {transpose_b=true}" : "") + " : " + c.r + "\n";
  return t + "output %r\n";
}

// |got - want| <= 2 gamma_K bound (+ one ulp of a two-byte result); integers equal.
void checkWithin(const std::string& what, const Tensor& want, const Tensor& got, const Tensor& bound, int64_t k) {
  double u = std::ldexp(1.0, -24), gamma = double(k) * u / (1 - double(k) * u);
  double ulp = want.dtype() == DType::F16 ? std::ldexp(1.0, -10) : want.dtype() == DType::BF16 ? std::ldexp(1.0, -7) : 0;
  testing::checkWithinEach(what, want, got, [&](int64_t i) {
    return isFloat(want.dtype()) ? 2.02 * gamma * bound.get(i) + ulp * std::fabs(want.get(i)) : 0;
  });
}

// A graph's oracle run on fresh random parameters, and its twin's over the
// operands' absolute values (the bound), which the runs below check against.
// (The caller captures the seed, so that any failure of its checks names it.)
struct Reference {
  Graph g;
  uint64_t seed = 0;
  std::map<std::string, Tensor> params;
  Evaluation want, bound;
};

Reference reference(const std::string& text, const std::string& absText) {
  Reference r{testing::parse(text), testing::freshSeed(), {}, {}, {}};
  CAPTURE(r.seed);
  r.params = completeParams(r.g, {}, r.seed);
  auto want = evaluate(r.g, r.params);
  REQUIRE_MESSAGE(bool(want), (want ? "" : want.error().str()));
  auto bound = evaluate(testing::parse(absText), r.params);
  REQUIRE(bool(bound));
  r.want = want.take(), r.bound = bound.take();
  return r;
}

// Runs the case on the KIR interpreter for `d` and, when `vulkan`, on
// lavapipe; returns the schedule kind the planner chose.
std::string run(const Case& c, const DeviceProfile& d, bool vulkan) {
  CAPTURE(graphText(c, false));
  Reference ref = reference(graphText(c, false), graphText(c, true));
  CAPTURE(ref.seed);
  const Graph& g = ref.g;
  const auto& params = ref.params;
  const Tensor& w = ref.want.outputs.at("r");
  const Tensor& bnd = ref.bound.outputs.at("r");
  int64_t k = testing::ty(c.a).shape.back();
  auto kir = testing::runOnKir(g, d, params);
  REQUIRE_MESSAGE(bool(kir), (kir ? "" : kir.error().str()));
  checkWithin("kir", w, kir->outputs.at("r"), bnd, k);
  if (vulkan && testing::kGeneratorsOnLavapipe) {
    auto vk = testing::runOnVulkan(g, d, params);
    REQUIRE_MESSAGE(bool(vk), (vk ? "" : vk.error().str()));
    checkWithin("lavapipe", w, vk->outputs.at("r"), bnd, k);
  }
  auto p = planGraph(g, d);
  REQUIRE(bool(p));
  return p->kernels.at(0).request.schedule.kind;
}

std::string dims(std::initializer_list<int64_t> d) {
  std::string s = "[";
  for (int64_t x : d) s += (s.size() > 1 ? "," : "") + std::to_string(x);
  return s + "]";
}

// a [m, k] x b [k, n] or [n, k], f32 unless told.
Case plain2d(int64_t m, int64_t k, int64_t n, bool transposed, const char* bType = "f32") {
  return Case{"f32" + dims({m, k}), std::string(bType) + (transposed ? dims({n, k}) : dims({k, n})),
              "f32" + dims({m, n}), transposed};
}

TEST_CASE("gen matmul: every row count, both layouts, on the KIR interpreter and lavapipe") {
  DeviceProfile d = testing::loadTarget("lavapipe");
  for (int64_t m : {1, 2, 3, 7, 16, 17, 64, 65, 513})
    for (bool tr : {false, true}) {
      std::string kind = run(plain2d(m, 37, 19, tr), d, true);
      CHECK(kind == (m <= kGemvMaxRows ? "gemv" : "gemm"));
    }
  // K a multiple of 4 but of no tile: runs of 4 (wide loads) and a tail of runs.
  for (int64_t m : {1, 3, 7, 16}) run(plain2d(m, 36, 19, true), d, true);
  // K long enough for whole unrolled steps and a tail, N past several workgroups.
  run(plain2d(1, 1000, 300, true), d, true);
  run(plain2d(5, 1000, 300, false), d, true);
  run(plain2d(40, 300, 130, true), d, true);
  // Many compute units: 256 lanes split K, and the fold takes 1, 9 and 32
  // outputs a thread 16, 16 and 8 lanes an output.
  DeviceProfile wide = d;
  wide.compute_units = 1000;
  for (int64_t m : {1, 3, 8}) {
    CAPTURE(m);
    CHECK(chooseMatMul(1, m, 2048, 40, true, DType::F32, DType::F32, wide).schedule.kLanes == 256);
    run(plain2d(m, 2048, 40, true), wide, true);
  }
}

TEST_CASE("gen matmul: every gemm tile and the gemv fallback, chosen by the profile") {
  DeviceProfile base = testing::loadTarget("lavapipe");
  struct Variant {
    int64_t units, threads, memory;
    const char* tile;  // the 133-row product's tile, "gemv" for none
  };
  // One compute unit takes the largest tile (128x128: 4 workgroups for 133 x
  // 141); 6 units the next (128x64: 6), 8 the 64x64 (9), 12 the 32x64 (15),
  // 20 the 16x64 (27); a million the smallest that fits (K = 29 is too short
  // to split); 64 threads only the 16x16 tile; 1 KiB of
  // workgroup memory none, so gemv (whose partials then do not fit either:
  // one lane a column).
  for (Variant v : {Variant{1, 1024, 32768, "128x128"}, Variant{6, 1024, 32768, "128x64"},
                    Variant{8, 1024, 32768, "64x64"}, Variant{12, 1024, 32768, "32x64"},
                    Variant{20, 1024, 32768, "16x64"},
                    Variant{1000000, 1024, 32768, "16x16"}, Variant{1, 64, 32768, "16x16"},
                    Variant{1, 1024, 1024, "gemv"}}) {
    DeviceProfile d = base;
    d.compute_units = v.units, d.max_workgroup_size = v.threads, d.workgroup_memory_bytes = v.memory;
    CAPTURE(v.units);
    CAPTURE(v.threads);
    CAPTURE(v.memory);
    Schedule s = chooseMatMul(1, 133, 29, 141, true, DType::F32, DType::F32, d).schedule;
    CHECK((s.kind == "gemm" ? std::to_string(s.tileM) + "x" + std::to_string(s.tileN) : s.kind) == v.tile);
    for (bool tr : {false, true}) {
      run(plain2d(133, 29, 141, tr), d, false);
      run(plain2d(40, 29, 141, tr), d, false);
      run(plain2d(3, 29, 141, tr), d, false);
    }
  }
}

// Split K: the chunks of K give the compute units a workgroup each, on every
// tile: K of 1100, 3000 and 5000 are multiples of no chunk (560 + 540 for
// 128x128 and 64x64; 768 * 3 + 696; 640 * 7 + 520; 8192 is 16 chunks of 512),
// the rows and columns of no tile; both layouts, a bf16 weight (runs of 8), a
// batch; the partials add up in chunk order.
TEST_CASE("gen matmul: split-K gemm and its combine") {
  DeviceProfile d = testing::loadTarget("lavapipe");
  d.bf16 = d.f16;
  struct Split {
    int64_t m, k, n, units, splits;
    const char* tile;
    bool lavapipe;
  };
  for (Split c : {Split{70, 1100, 9, 2, 2, "128x128", false}, Split{33, 1100, 20, 2, 2, "64x64", false},
                  Split{20, 3000, 20, 4, 4, "32x64", true}, Split{9, 5000, 20, 8, 8, "16x64", false},
                  Split{9, 8192, 9, 1000, 16, "16x16", false}}) {
    CAPTURE(c.m);
    CAPTURE(c.k);
    d.compute_units = c.units;
    Schedule s = chooseMatMul(1, c.m, c.k, c.n, true, DType::F32, DType::F32, d).schedule;
    CHECK(s.kind == "gemm");
    CHECK(std::to_string(s.tileM) + "x" + std::to_string(s.tileN) == c.tile);
    CHECK(s.splits == c.splits);
    CHECK((c.k - 1) / gemmChunkKeys(s, c.k) + 1 == c.splits);  // every chunk holds keys
    // The interpreter runs every thread of every tile (128x128: 18M
    // multiply-adds for K = 1100), so the largest tile runs once; lavapipe
    // (about 2 s a run, building the unrolled kernel) takes the 32x64 tile's
    // plain and bf16 runs and the batch.
    run(plain2d(c.m, c.k, c.n, true), d, false);
    if (std::string(c.tile) == "128x128") continue;
    run(plain2d(c.m, c.k, c.n, false), d, c.lavapipe);
    run(plain2d(c.m, c.k, c.n, true, "bf16"), d, c.lavapipe);
  }
  d.compute_units = 1000;
  CHECK(run(Case{"f32[2,1,20,1024]", "f32[3,9,1024]", "f32[2,3,20,9]", true}, d, true) == "gemm");
  CHECK(chooseMatMul(6, 20, 1024, 9, true, DType::F32, DType::F32, d).schedule.splits == 2);
  auto p = planGraph(testing::parse(graphText(plain2d(33, 1100, 70, true), false)), d);
  REQUIRE(bool(p));
  REQUIRE(p->kernels.size() == 2);
  CHECK(p->kernels[1].request.schedule.kind == "matmul-combine");
  REQUIRE(p->scratch.size() == 1);
  CHECK(p->scratch[0].floats == 2 * 33 * 70);
  // A two-byte product splits as an f32 one does: its partials are f32
  // scratch and the combine rounds the sum once to the result's dtype (the
  // bound: 2 gamma_K plus one ulp of the result).
  CHECK(chooseMatMul(1, 33, 8192, 70, true, DType::F16, DType::F16, d).schedule.splits ==
        chooseMatMul(1, 33, 8192, 70, true, DType::F32, DType::F32, d).schedule.splits);
  d.compute_units = 4;
  for (const char* t : {"bf16", "f16"}) {
    CAPTURE(t);
    std::string dt = t;
    CHECK(chooseMatMul(1, 20, 3000, 20, true, *parseDType(dt), *parseDType(dt), d).schedule.splits == 4);
    CHECK(run(Case{dt + "[20,3000]", dt + "[20,3000]", dt + "[20,20]", true}, d, true) == "gemm");
  }
}

// Every gemm-mma tile on the profile's warp (or wave) op of each two-byte
// dtype (`prefix` + the dtype), both layouts of b, on the interpreter: each
// case's rows, K and N, its compute units, and the tile and splits the
// planner must choose.
struct MmaCase {
  int64_t m, k, n, units;
  const char* tile;
  int64_t splits;
};
void checkMmaTiles(DeviceProfile d, const std::string& prefix, std::initializer_list<MmaCase> cases) {
  for (const char* t : {"bf16", "f16"})
    for (MmaCase c : cases) {
      CAPTURE(t);
      CAPTURE(c.m);
      d.compute_units = c.units;
      DType dt = *parseDType(t);
      for (bool transposed : {true, false}) {
        CAPTURE(transposed);
        Schedule s = chooseMatMul(1, c.m, c.k, c.n, transposed, dt, dt, d).schedule;
        CHECK(s.kind == "gemm-mma");
        CHECK(s.matrix == prefix + t);
        CHECK(std::to_string(s.tileM) + "x" + std::to_string(s.tileN) == c.tile);
        CHECK(s.splits == c.splits);
        CHECK(s.workgroupSize == s.tileM / s.threadM * (s.tileN / s.threadN) * matrixShape(*matrixOpNamed(s.matrix)).threads);
        std::string a = t + dims({c.m, c.k}), b = t + (transposed ? dims({c.n, c.k}) : dims({c.k, c.n}));
        CHECK(run(Case{a, b, t + dims({c.m, c.n}), transposed}, d, false) == "gemm-mma");
      }
    }
}

// The tensor-core gemm (gemm-mma) on the H200 profile's m16n8k16 ops (its
// warpgroup ops left out), on the KIR interpreter (which gives mma its
// meaning; the H200 runs in test/device): every tile, both layouts of b,
// bf16 and f16, rows, K and N that are multiples of no tile, fragment or
// run (the tiles of at most 32 rows take a K that is not a multiple of 8,
// which the gemv-mma declines), and a split K. The bound is checkWithin's:
// the products of two-byte values are exact in f32 and each result is a sum
// of them, so 2 gamma_K plus one ulp of the result.
TEST_CASE("gen matmul: gemm-mma, every tile, both layouts, bf16 and f16, split K") {
  DeviceProfile d = testing::loadTarget("nvidia-h200");
  std::erase_if(d.matrix_ops, [](MatrixOp op) { return matrixShape(op).threads != 32; });
  checkMmaTiles(d, "m16n8k16.", {{130, 72, 260, 1, "128x256", 1}, {130, 72, 136, 3, "128x128", 1}, {40, 40, 23, 1, "64x128", 1},
                                 {20, 202, 9, 1, "32x128", 1}, {17, 2100, 130, 8, "32x128", 4}, {16, 45, 7, 132, "16x128", 1}});
  // Batched and broadcast (the MLA forms), and what stays on SIMT units:
  // f32, mixed dtypes, few rows, a profile without the op.
  d.compute_units = 132;
  CHECK(run(Case{"bf16[2,1,20,42]", "bf16[3,9,42]", "bf16[2,3,20,9]", true}, d, false) == "gemm-mma");
  MatMulDecision f32 = chooseMatMul(1, 64, 64, 64, true, DType::F32, DType::F32, d);
  CHECK(f32.schedule.kind == "gemm");
  CHECK(f32.reason.rfind("not on matrix units: operands f32 and f32 (a matrix op takes two of one two-byte dtype); ",
                         0) == 0);
  CHECK(chooseMatMul(1, 64, 64, 64, true, DType::F32, DType::BF16, d).schedule.kind == "gemm");
  CHECK(chooseMatMul(1, 8, 64, 64, false, DType::BF16, DType::BF16, d).schedule.kind == "gemv");
  std::string why = chooseMatMul(1, 64, 64, 64, true, DType::BF16, DType::BF16, d).reason;
  CHECK(why.rfind("64 rows of bf16 on m16n8k16.bf16: ", 0) == 0);
  d.matrix_ops = {MatrixOp::M16N8K8Tf32, MatrixOp::M16N8K16F16};
  MatMulDecision noOp = chooseMatMul(1, 64, 64, 64, true, DType::BF16, DType::BF16, d);
  CHECK(noOp.schedule.kind == "gemm");
  CHECK(noOp.reason.rfind("not on matrix units: the profile lists no matrix op for bf16; 64 rows: ", 0) == 0);
  CHECK(chooseMatMul(1, 64, 64, 64, true, DType::F16, DType::F16, d).schedule.matrix == "m16n8k16.f16");
}

// The gemm-mma on a wave's op (m16n16k16, AMD's MFMA, the MI300X profile's)
// on the KIR interpreter, which gives the op its meaning from AMD's
// layouts (no AMD GPU runs it here: LLVM compiles it, test/lit/codegen):
// every tile, both layouts of b, bf16 and f16, sizes that are multiples of
// no tile, fragment or run, and a split K, under the m16n8k16's bound.
TEST_CASE("gen matmul: gemm-mma on waves of 64, every tile, both layouts, bf16 and f16, split K") {
  DeviceProfile d = testing::loadTarget("amd-mi300x");
  REQUIRE(d.matrix_ops == std::vector<MatrixOp>{MatrixOp::M16N16K16Bf16, MatrixOp::M16N16K16F16});
  checkMmaTiles(d, "m16n16k16.", {{130, 72, 260, 1, "128x256", 1}, {130, 72, 136, 3, "128x128", 1}, {40, 40, 23, 1, "64x128", 1},
                                  {20, 202, 9, 1, "32x128", 1}, {17, 2100, 130, 8, "32x128", 4}, {16, 45, 7, 304, "16x128", 1}});
  // One buffer, no copies ahead (AMDGPU has no asynchronous copy in KIR).
  Schedule s = chooseMatMul(1, 40, 40, 23, true, DType::BF16, DType::BF16, d).schedule;
  CHECK(s.workgroupMemory == (s.tileM + s.tileN) * (64 + kGemmMmaPad) * 2);
}

// The gemm-mma on a warpgroup's op (m64nNk16, the H200 profile's first):
// every tile, bf16 and f16, rows, K and N that are multiples of no tile or
// block, a split K, on the interpreter under the same bound; and the
// products it declines, which go to the warp's m16n8k16 saying why.
TEST_CASE("gen matmul: gemm-mma on warpgroups, every tile, bf16 and f16, split K, what it declines") {
  DeviceProfile d = testing::loadTarget("nvidia-h200");
  struct Tile {
    int64_t m, k, n, units;
    const char* tile;
    int64_t splits;
  };
  for (const char* t : {"bf16", "f16"})
    for (Tile c : {Tile{130, 72, 260, 1, "128x128", 1}, Tile{130, 200, 136, 3, "128x128", 1},
                   Tile{40, 40, 23, 1, "64x128", 1}, Tile{65, 1096, 20, 4, "64x128", 2}}) {
      CAPTURE(t);
      CAPTURE(c.m);
      d.compute_units = c.units;
      DType dt = *parseDType(t);
      Schedule s = chooseMatMul(1, c.m, c.k, c.n, true, dt, dt, d).schedule;
      CHECK(s.kind == "gemm-mma");
      CHECK(s.matrix == std::string("m64nNk16.") + t);
      CHECK(std::to_string(s.tileM) + "x" + std::to_string(s.tileN) == c.tile);
      CHECK(s.splits == c.splits);
      CHECK(s.workgroupSize == s.tileM / 64 * 128);
      CHECK(s.workgroupMemory == kGemmGroupStages * (s.tileM + s.tileN) * 64 * 2);
      CHECK(run(Case{t + dims({c.m, c.k}), t + dims({c.n, c.k}), t + dims({c.m, c.n}), true}, d, false) == "gemm-mma");
    }
  // From 2048 rows the 256-wide tile, its chains running across the step's
  // barrier in four stages: rows, K and N past its tile, K of 5 steps (the
  // ring of stages wraps), and once split K.
  for (auto [m, k, n, units] : {std::array<int64_t, 4>{2050, 320, 300, 20}, std::array<int64_t, 4>{2049, 1096, 20, 30}}) {
    CAPTURE(m);
    d.compute_units = units;  // a workgroup each from 34 blocks; 17 blocks split in two
    Schedule s = chooseMatMul(1, m, k, n, true, DType::BF16, DType::BF16, d).schedule;
    CHECK(s.tileM == 128);
    CHECK(s.tileN == 256);
    CHECK(s.splits == (n == 20 ? 2 : 1));
    CHECK(s.workgroupMemory == kGemmGroupWideStages * (128 + 256) * 64 * 2);
    CHECK(run(Case{"bf16" + dims({m, k}), "bf16" + dims({n, k}), "bf16" + dims({m, n}), true}, d, false) == "gemm-mma");
  }
  d.compute_units = 20;
  CHECK(chooseMatMul(1, 2047, 320, 300, true, DType::BF16, DType::BF16, d).schedule.tileN == 128);
  d.compute_units = 132;
  d.compute_units = 132;
  CHECK(run(Case{"bf16[2,1,70,40]", "bf16[3,9,40]", "bf16[2,3,70,9]", true}, d, false) == "gemm-mma");
  MatMulDecision plain = chooseMatMul(1, 130, 64, 64, false, DType::BF16, DType::BF16, d);
  CHECK(plain.schedule.matrix == "m16n8k16.bf16");
  CHECK(plain.reason.find("; not on m64nNk16.bf16: b is not K-major") != std::string::npos);
  MatMulDecision odd = chooseMatMul(1, 130, 45, 64, true, DType::F16, DType::F16, d);
  CHECK(odd.schedule.matrix == "m16n8k16.f16");
  CHECK(odd.reason.find("; not on m64nNk16.f16: K=45 is not a multiple of 8") != std::string::npos);
  // Few rows go to the gemv-mma (20 rows: 5 stages of 24 + 64 rows of 64
  // keys, 56320 bytes); where its stages do not fit, neither does any
  // m16n8k16 tile (the 16x128 one takes 62208 bytes) and the warpgroup's
  // tiles are too tall: the SIMT gemm, each refusal in its reason.
  d.workgroup_memory_bytes = 56320;
  CHECK(chooseMatMul(1, 20, 64, 64, true, DType::BF16, DType::BF16, d).schedule.kind == "gemv-mma");
  d.workgroup_memory_bytes = 56319;
  MatMulDecision few = chooseMatMul(1, 20, 64, 64, true, DType::BF16, DType::BF16, d);
  CHECK(few.schedule.kind == "gemm");
  CAPTURE(few.reason);
  CHECK(few.reason.rfind("not on m16n8k16.bf16 as a gemv: its workgroup does not fit the device; "
                         "not on matrix units: m64nNk16.bf16: no tile of at most 32 rows fits the device's workgroup; "
                         "m16n8k16.bf16: no tile of at most 32 rows fits the device's workgroup; 20 rows: ",
                         0) == 0);
}

TEST_CASE("gen matmul: batched, broadcast, two-byte and integer forms") {
  DeviceProfile d = testing::loadTarget("lavapipe");
  d.bf16 = d.f16;  // bf16 is integer arithmetic around f32 on every target
  run(Case{"f32[2,1,3,5]", "f32[4,5,7]", "f32[2,4,3,7]"}, d, true);
  run(Case{"f32[2,1,33,5]", "f32[4,7,5]", "f32[2,4,33,7]", true}, d, true);
  CHECK(run(Case{"f32[2,1,70,5]", "f32[4,7,5]", "f32[2,4,70,7]", true}, d, true) == "gemm");
  CHECK(run(Case{"f32[3,1,70,6]", "f32[1,5,6,9]", "f32[3,5,70,9]"}, d, true) == "gemm");
  run(Case{"f32[1,4,1,16]", "f32[1,4,40,16]", "f32[1,4,1,40]", true}, d, true);
  run(Case{"f16[17,33]", "f16[33,9]", "f16[17,9]"}, d, true);
  run(Case{"f16[3,33]", "f16[9,33]", "f16[3,9]", true}, d, true);
  // Odd K (one element a run) and K = 40 and 48 (runs of 8 two-byte values,
  // read against two runs of 4 of a).
  for (int64_t m : {1, 7, 65})
    for (int64_t k : {45, 40, 48}) {
      run(plain2d(m, k, 23, true, "bf16"), d, false);
      run(plain2d(m, k, 23, true, "f16"), d, true);
    }
  run(Case{"i32[3,1,2,4]", "i32[2,4,2]", "i32[3,2,2,2]"}, d, true);
  run(Case{"i32[40,9]", "i32[11,9]", "i32[40,11]", true}, d, true);
  CHECK(run(Case{"i64[3,4]", "i64[1,4,2]", "i64[1,3,2]"}, d, true) == "gemv");
  CHECK(run(Case{"i64[30,4]", "i64[2,4]", "i64[30,2]", true}, d, true) == "gemv");
}

// A product group (ir/fusion.h): products of one a with weights of
// different widths, as the fuse pass tags a layer's q, k and v; each result
// held to the bound above.
struct Group {
  std::string a;               // a's type, e.g. "f32[3,24]"
  int64_t k = 0;
  std::vector<int64_t> ns;     // each product's columns
  bool transposed = true;
  const char* bType = "f32";
};

std::string groupText(const Group& c, bool abs) {
  Shape as = testing::ty(c.a).shape;
  std::string t = "graph g\ninput %a : " + c.a + "\n", x = "%a", rt = c.a.substr(0, c.a.find('['));
  std::vector<std::string> bs;
  for (size_t i = 0; i < c.ns.size(); ++i) {
    bs.push_back(std::string(c.bType) + (c.transposed ? dims({c.ns[i], c.k}) : dims({c.k, c.ns[i]})));
    t += "weight %b" + std::to_string(i) + " : " + bs.back() + "\n";
  }
  if (abs) t += "%aa = Abs(%a) : " + c.a + "\n", x = "%aa";
  for (size_t i = 0; i < c.ns.size(); ++i) {
    std::string b = "%b" + std::to_string(i);
    if (abs) t += "%ba" + std::to_string(i) + " = Abs(" + b + ") : " + bs[i] + "\n", b = "%ba" + std::to_string(i);
    Shape rs = as;
    rs.back() = c.ns[i];
    t += "%r" + std::to_string(i) + " = MatMul(" + x + ", " + b + ") {" + (c.transposed ? "transpose_b=true, " : "") +
         "fusion=0} : " + rt + shapeStr(rs) + "\n";
  }
  // Outside the bound's graph each result is read through a Neg, so it is a
  // temporary in the arena, beside the other products' scratch.
  for (size_t i = 0; i < c.ns.size(); ++i) {
    std::string r = std::to_string(i);
    Shape rs = as;
    rs.back() = c.ns[i];
    if (!abs) t += "%o" + r + " = Neg(%r" + r + ") : " + rt + shapeStr(rs) + "\n";
    t += "output %" + std::string(abs ? "r" : "o") + r + "\n";
  }
  return t;
}

// Runs the group on the KIR interpreter (and lavapipe when asked) against
// the oracle; returns its plan.
Plan runGroup(const Group& c, const DeviceProfile& d, bool vulkan) {
  CAPTURE(groupText(c, false));
  Reference ref = reference(groupText(c, false), groupText(c, true));
  CAPTURE(ref.seed);
  const Graph& g = ref.g;
  const auto& params = ref.params;
  auto check = [&](const char* where, const std::map<std::string, Tensor>& got) {
    for (size_t i = 0; i < c.ns.size(); ++i) {
      std::string o = "o" + std::to_string(i);
      checkWithin(std::string(where) + " " + o, ref.want.outputs.at(o), got.at(o),
                  ref.bound.outputs.at("r" + std::to_string(i)), c.k);
    }
  };
  auto kir = testing::runOnKir(g, d, params);
  REQUIRE_MESSAGE(bool(kir), (kir ? "" : kir.error().str()));
  check("kir", kir->outputs);
  if (vulkan && testing::kGeneratorsOnLavapipe) {
    auto vk = testing::runOnVulkan(g, d, params);
    REQUIRE_MESSAGE(bool(vk), (vk ? "" : vk.error().str()));
    check("lavapipe", vk->outputs);
  }
  auto p = planGraph(g, d);
  REQUIRE(bool(p));
  return std::move(*p);
}

// Widths that are multiples of no column block, both layouts, the gemv (one
// row, a few, a batch axis of one) as one kernel, bf16 weights; and groups
// whose schedule is a gemm, which the planner runs as their products apart
// (split K too, each product's scratch and combine in the arena beside the
// group's other results).
TEST_CASE("gen matmul: product groups, one kernel for products of one a") {
  DeviceProfile d = testing::loadTarget("lavapipe");
  d.bf16 = d.f16;
  // The MatMul dispatches of a plan (the others are the Negs).
  auto products = [](const Plan& p) {
    std::vector<const Dispatch*> out;
    for (const Dispatch& x : p.dispatches)
      if (p.kernels[size_t(x.kernel)].request.op == Op::MatMul) out.push_back(&x);
    return out;
  };
  for (bool tr : {true, false}) {
    Plan p = runGroup(Group{"f32[1,37]", 37, {37, 20, 5}, tr}, d, true);
    auto one = products(p);
    REQUIRE(one.size() == 1);
    const KernelRequest& r = p.kernels[size_t(one[0]->kernel)].request;
    CHECK(r.schedule.kind == "gemv");
    CHECK(r.results.size() == 3);
    CHECK(one[0]->reads.size() == 4);
    CHECK(one[0]->writes.size() == 3);
    Plan apart = runGroup(Group{"f32[20,36]", 36, {40, 9, 9}, tr}, d, true);
    REQUIRE(products(apart).size() == 3);
    for (const Dispatch* x : products(apart)) {
      CHECK(apart.kernels[size_t(x->kernel)].request.schedule.kind == "gemm");
      CHECK(x->writes.size() == 1);
    }
  }
  runGroup(Group{"f32[3,1000]", 1000, {300, 19}}, d, true);
  runGroup(Group{"f32[1,1,24]", 24, {7, 130}}, d, true);
  runGroup(Group{"f32[7,40]", 40, {23, 8}, true, "bf16"}, d, false);
  runGroup(Group{"f32[70,40]", 40, {23, 8}, true, "bf16"}, d, true);
  // Two compute units: K = 1100 splits in two chunks (560 + 540) for each
  // product of 33 rows, each with its scratch and combine, while the
  // results of the products before it are live.
  d.compute_units = 2;
  for (bool tr : {true, false}) {
    Plan p = runGroup(Group{"f32[33,1100]", 1100, {20, 9, 5}, tr}, d, tr);
    CHECK(products(p).size() == 6);  // each gemm and its combine
    REQUIRE(p.scratch.size() == 3);
    CHECK(p.scratch[0].floats == 2 * 33 * 20);
  }
}

// The tensor-core gemv (gemv-mma) on the H200 profile's m16n8k16 ops, on
// the KIR interpreter (the H200 runs in test/device): every row tile (1 to
// 4 of 8 rows), bf16 and f16, K a multiple of 8 but of no step (whole steps
// and a partial one), N past two column blocks, split K in even and uneven
// chunks, 2 to 6 of them (the partials and their combine), a broadcast batch axis, a product group with and without
// splits; and what it declines. The bound is the gemm-mma's.
TEST_CASE("gen matmul: gemv-mma, every row tile, bf16 and f16, split K, groups, what it declines") {
  DeviceProfile d = testing::loadTarget("nvidia-h200");
  struct Skinny {
    int64_t m, k, n, units, splits;
  };
  for (const char* t : {"bf16", "f16"})
    for (Skinny c : {Skinny{2, 40, 23, 132, 1}, Skinny{5, 264, 50, 132, 1}, Skinny{8, 1000, 17, 1, 2},
                     Skinny{9, 2056, 40, 4, 4}, Skinny{17, 520, 70, 1, 1}, Skinny{32, 4104, 33, 2, 4},
                     Skinny{12, 1032, 300, 132, 2}, Skinny{3, 3000, 20, 3, 6}}) {
      CAPTURE(t);
      CAPTURE(c.m);
      d.compute_units = c.units;
      DType dt = *parseDType(t);
      Schedule s = chooseMatMul(1, c.m, c.k, c.n, true, dt, dt, d).schedule;
      CHECK(s.kind == "gemv-mma");
      CHECK(s.matrix == std::string("m16n8k16.") + t);
      CHECK(s.tileM == 8 * ceilDiv(c.m, 8));
      CHECK(s.tileN == kGemvMmaWarps * kGemvMmaWarpColumns);
      CHECK(s.splits == c.splits);
      CHECK(run(Case{t + dims({c.m, c.k}), t + dims({c.n, c.k}), t + dims({c.m, c.n}), true}, d, false) == "gemv-mma");
    }
  d.compute_units = 132;
  CHECK(run(Case{"bf16[2,1,3,40]", "bf16[3,9,40]", "bf16[2,3,3,9]", true}, d, false) == "gemv-mma");
  for (int64_t units : {132, 4}) {
    d.compute_units = units;
    int64_t k = units == 4 ? 2056 : 488;  // long enough to split (chunks of kGemvMmaChunkSteps steps) or not
    Plan p = runGroup(Group{"bf16[3," + std::to_string(k) + "]", k, {40, 9, 24}, true, "bf16"}, d, false);
    const KernelRequest& r = p.kernels.at(0).request;
    CHECK(r.schedule.kind == "gemv-mma");
    CHECK(r.results.size() == 3);
    CHECK(r.schedule.splits == (units == 4 ? 4 : 1));
    CHECK(p.scratch.size() == (units == 4 ? 1 : 0));
  }
  // Declined: b plain, K not a multiple of 8, more than 32 rows, f32; one
  // row stays on the gemv (which streams b faster there).
  d.compute_units = 132;
  MatMulDecision plain = chooseMatMul(1, 4, 64, 64, false, DType::BF16, DType::BF16, d);
  CHECK(plain.schedule.kind == "gemv");
  CHECK(plain.reason.rfind("not on m16n8k16.bf16 as a gemv: b is not K-major; 4 rows: ", 0) == 0);
  MatMulDecision odd = chooseMatMul(1, 20, 45, 64, true, DType::F16, DType::F16, d);
  CHECK(odd.schedule.kind == "gemm-mma");
  CHECK(odd.reason.rfind("not on m16n8k16.f16 as a gemv: K=45 is not a multiple of 8; 20 rows of f16 on ", 0) == 0);
  CHECK(chooseMatMul(1, 33, 64, 64, true, DType::BF16, DType::BF16, d).schedule.kind == "gemm-mma");
  CHECK(chooseMatMul(1, 4, 64, 64, true, DType::F32, DType::F32, d).schedule.kind == "gemv");
  CHECK(chooseMatMul(1, 1, 64, 64, true, DType::BF16, DType::BF16, d).schedule.kind == "gemv");
}

}  // namespace
}  // namespace poot

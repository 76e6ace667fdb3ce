// Unit tests of RoutedExperts (ir/ops, the oracle), of the passes that form
// it and write it back (lib/passes/experts.cpp, experts_dense.cpp) and of
// its decode kernel (routed-gemv, gen/experts.cpp):
// fresh traces of the tiny DeepSeek-V2 config (decode and prefill, f32 and
// bf16) get one RoutedExperts per MoE layer with the config's attributes and
// give the same outputs, bit for bit, on fresh random data before the pass,
// after it and after the dense lowering; the op agrees with its dense form
// for softmax and sigmoid scoring, with and without renormalization, and on
// tied router scores, where the lower expert wins (TopK's order); a
// group-limited router declines with its remark; the op round-trips through
// the text and binary formats and its type rule names what is wrong. The
// routed-gemv kernel agrees with the oracle bit for bit on the KIR
// interpreter and within its stated bound on lavapipe (f32, bf16, f32 over
// bf16 weights, softmax and sigmoid, ties), launches one workgroup a token
// row whatever the routing, and declines many rows and too many bindings.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "codegen/llvm/llvm.h"
#include "ir/binary.h"
#include "ir/text.h"
#include "kernel_checks.h"
#include "kir_plan.h"
#include "oracle/interp.h"
#include "oracle/random.h"
#include "passes/pass.h"
#include "testing.h"
#include "trace/model.h"
#include "vulkan_plan.h"

using namespace poot;
using namespace poot::testing;

namespace {

int count(const Graph& g, Op op) {
  return int(std::count_if(g.eqns.begin(), g.eqns.end(), [&](const Eqn& e) { return e.op == op; }));
}

// Bit-for-bit: the op does the dense form's arithmetic (docs/oracle.md).
const Tolerance kExact = relativeToBefore(0.0);

// The tiny DeepSeek-V2 config traced, then through the pipeline up to the
// pass's place in it (after selection).
Graph tracedUpToSelection(const trace::ModelConfig& cfg, trace::Phase phase, DType dtype, DType weights) {
  trace::TraceOptions o;
  o.phase = phase;
  o.dtype = dtype;
  o.weightsDtype = weights;
  if (phase == trace::Phase::Prefill) o.tokens = 3;
  auto g = trace::traceModel(cfg, o);
  REQUIRE_MESSAGE(bool(g), (g ? "" : g.error().str()));
  PassContext ctx;
  PipelineOptions opts;
  opts.stopAfter = "selection";
  REQUIRE(bool(runPipeline(*g, ctx, opts)));
  return std::move(*g);
}

// A RoutedExperts graph: h [2, 3, H] f32, E experts of width I whose
// weights have dtype `weights`.
std::string routedGraph(int64_t H, int64_t I, int64_t E, int64_t k, const std::string& scoring, bool renormalize,
                        double scale, const std::string& weights = "f32", const std::string& h = "f32[2,3,") {
  std::string s = "graph moe\ninput %h : " + h + std::to_string(H) + "]\nweight %router : f32[" +
                  std::to_string(E) + "," + std::to_string(H) + "]\n";
  std::string ops = "%h, %router";
  std::string in = "[" + std::to_string(I) + "," + std::to_string(H) + "]";
  for (int64_t e = 0; e < E; ++e) {
    std::string p = "%e" + std::to_string(e);
    s += "weight " + p + ".gate : " + weights + in + "\nweight " + p + ".up : " + weights + in + "\nweight " + p + ".down : " + weights + "[" +
         std::to_string(H) + "," + std::to_string(I) + "]\n";
    ops += ", " + p + ".gate, " + p + ".up, " + p + ".down";
  }
  s += "%y = RoutedExperts(" + ops + ") {experts=" + std::to_string(E) + ", k=" + std::to_string(k) +
       ", scoring=" + scoring + ", renormalize=" + (renormalize ? "true" : "false") + ", scale=" + formatNumber(scale) +
       ", activation=silu} : " + h + std::to_string(H) + "]\noutput %y\n";
  return s;
}

// Fresh random parameters of a routedGraph(9, 6, 4, 2, ...) where every
// router row is the first one (all four experts tie on every token, so the
// top 2 are experts 0 and 1) and experts 0 and 1 have zero down weights.
std::map<std::string, Tensor> tiedParams(const Graph& g) {
  auto params = completeParams(g, {}, freshSeed());
  std::vector<uint8_t>& router = params.at("router").bytes;
  for (int64_t e = 1; e < 4; ++e) std::copy(router.begin(), router.begin() + 9 * 4, router.begin() + e * 9 * 4);
  for (const char* down : {"e0.down", "e1.down"}) params.at(down) = Tensor(ty("f32[9,6]"));
  return params;
}

Graph lowered(Graph g) {
  PassContext ctx;
  auto changed = runRoutedExpertsDense(g, ctx);
  REQUIRE(bool(changed));
  CHECK(*changed);
  CHECK(count(g, Op::RoutedExperts) == 0);
  REQUIRE(bool(verify(g)));
  return g;
}

}  // namespace

TEST_CASE("routed-experts forms DeepSeek-V2's MoE layers and keeps their results, and the dense form keeps them too") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-deepseek-v2.json");
  struct Dtypes {
    DType activations, weights;
  };
  for (trace::Phase phase : {trace::Phase::Decode, trace::Phase::Prefill})
    for (Dtypes dt : {Dtypes{DType::F32, DType::F32}, Dtypes{DType::BF16, DType::BF16}, Dtypes{DType::F32, DType::BF16}}) {
      CAPTURE(int(phase));
      std::string dtypes = std::string(dtypeName(dt.activations)) + " activations, " + dtypeName(dt.weights) + " weights";
      CAPTURE(dtypes);
      Graph before = tracedUpToSelection(cfg, phase, dt.activations, dt.weights);
      Graph formed = before;
      PassContext ctx;
      auto changed = runRoutedExperts(formed, ctx);
      REQUIRE(bool(changed));
      CHECK(*changed);
      for (const Remark& r : ctx.remarks) FAIL_CHECK(r.eqn << ": " << r.message);
      REQUIRE(bool(verify(formed)));
      // tiny-deepseek-v2: 2 layers, the first dense; 4 experts, top 2, scale 1.5.
      REQUIRE(count(formed, Op::RoutedExperts) == 1);
      CHECK(count(formed, Op::TopK) == 0);
      for (const Eqn& e : formed.eqns) {
        if (e.op != Op::RoutedExperts) continue;
        CHECK(std::get<int64_t>(*e.attr("experts")) == 4);
        CHECK(std::get<int64_t>(*e.attr("k")) == 2);
        CHECK(std::get<std::string>(*e.attr("scoring")) == "softmax");
        CHECK(std::get<double>(*e.attr("scale")) == 1.5);
        CHECK(e.operands.size() == kRoutedFirstExpert + 4 * kRoutedPerExpert);
        CHECK(formed.value(e.results[0]).name == "layers.1.mlp.moe.routed");
        // The weights themselves, a bf16 checkpoint's not widened first.
        CHECK(formed.value(e.operands[3]).name == "model.layers.1.mlp.experts.0.up_proj.weight");
        CHECK(formed.type(e.operands[3]).dtype == dt.weights);
      }
      uint64_t seed = freshSeed();
      checkSameResults(before, formed, seed, kExact);
      checkSameResults(before, lowered(formed), seed, kExact);
    }
}

TEST_CASE("routed-experts forms DeepSeek-V2-Lite's 64-expert layer, and forms its dense form back into the same op") {
  Graph g = loadGraphFile(exampleGraph("deepseek-v2-lite-decode.pg"));
  PassContext ctx;
  PipelineOptions opts;
  opts.stopAfter = "selection";
  REQUIRE(bool(runPipeline(g, ctx, opts)));
  auto formedOnce = [](Graph& graph) {
    PassContext c;
    auto changed = runRoutedExperts(graph, c);
    REQUIRE(bool(changed));
    CHECK(*changed);
    CHECK(c.remarks.empty());
    REQUIRE(bool(verify(graph)));
    REQUIRE(count(graph, Op::RoutedExperts) == 1);
    for (const Eqn& e : graph.eqns)
      if (e.op == Op::RoutedExperts) return e;
    return Eqn{};
  };
  auto names = [](const Graph& graph, const Eqn& e) {
    std::vector<std::string> out;
    for (ValueId v : e.operands) out.push_back(graph.value(v).name);
    return out;
  };
  Eqn first = formedOnce(g);
  // deepseek-v2-lite.json: 64 routed experts, 6 a token, routed_scaling_factor 1 (no Mul to match).
  CHECK(std::get<int64_t>(*first.attr("experts")) == 64);
  CHECK(std::get<int64_t>(*first.attr("k")) == 6);
  CHECK(std::get<double>(*first.attr("scale")) == 1.0);
  CHECK(names(g, first)[1] == "model.layers.1.mlp.gate.weight");
  CHECK(names(g, first).back() == "model.layers.1.mlp.experts.63.down_proj.weight");
  Graph again = lowered(g);
  Eqn second = formedOnce(again);
  CHECK(second.attrs == first.attrs);
  CHECK(names(again, second) == names(g, first));
}

TEST_CASE("RoutedExperts agrees with its dense form for every scoring, renormalization and scale") {
  struct Case {
    const char* scoring;
    bool renormalize;
    double scale;
    const char* weights;
  };
  for (Case c : {Case{"softmax", false, 1.0, "f32"}, Case{"softmax", true, 2.5, "bf16"}, Case{"sigmoid", false, 1.0, "f16"},
                 Case{"sigmoid", true, 0.75, "f32"}}) {
    CAPTURE(c.scoring);
    CAPTURE(c.renormalize);
    CAPTURE(c.weights);
    // Widths that are no multiple of any tile; k = 3 of 5 experts.
    Graph g = parse(routedGraph(13, 7, 5, 3, c.scoring, c.renormalize, c.scale, c.weights));
    checkSameResults(g, lowered(g), freshSeed(), kExact);
  }
}

TEST_CASE("RoutedExperts on tied router scores selects the lower experts, as its dense form does") {
  // Every router row equal: all four experts tie on every token, so top 2 is
  // experts 0 and 1. Their down weights are zero, the others' random, so the
  // result is exactly zero only when the tie goes to the lower index.
  Graph g = parse(routedGraph(9, 6, 4, 2, "softmax", false, 1.0));
  auto params = tiedParams(g);
  auto op = evaluate(g, params);
  auto dense = evaluate(lowered(g), params);
  REQUIRE(bool(op));
  REQUIRE(bool(dense));
  const Tensor& y = op->outputs.at("y");
  for (int64_t i = 0; i < y.size(); ++i) CHECK(y.get(i) == 0.0);
  checkClose("the tied dense form", dense->outputs.at("y"), y, kExact);
}

TEST_CASE("routed-experts declines a group-limited router and says why") {
  auto cfg = trace::parseConfig(R"({"model_type": "deepseek_v2", "hidden_size": 32, "intermediate_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 64,
      "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "first_k_dense_replace": 0,
      "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 0, "moe_intermediate_size": 8,
      "topk_method": "group_limited_greedy", "n_group": 2, "topk_group": 1, "max_position_embeddings": 64})",
                                "grouped.json");
  REQUIRE_MESSAGE(bool(cfg), (cfg ? "" : cfg.error().str()));
  Graph g = tracedUpToSelection(*cfg, trace::Phase::Decode, DType::F32, DType::F32);
  std::string text = printGraph(g);
  PassContext ctx;
  auto changed = runRoutedExperts(g, ctx);
  REQUIRE(bool(changed));
  CHECK_FALSE(*changed);
  CHECK(printGraph(g) == text);
  REQUIRE(ctx.remarks.size() == 1);
  CHECK(ctx.remarks[0].pass == "routed-experts");
  CHECK(ctx.remarks[0].eqn == "%layers.0.mlp.moe.topk.2");  // the group TopK is topk, topk.1
  CHECK(ctx.remarks[0].message == "the scores are masked before the top-k (group-limited routing is not formed)");
}

TEST_CASE("RoutedExperts round-trips through text and binary, and its type rule names what is wrong") {
  std::string text = routedGraph(8, 4, 3, 2, "sigmoid", true, 1.25);
  Graph g = parse(text);
  CHECK(printGraph(g) == text);
  auto back = readBinaryGraph(writeBinaryGraph(g), "moe.pgb");
  REQUIRE(bool(back));
  CHECK(printGraph(*back) == text);

  auto fails = [](std::string bad, const std::string& message) {
    auto r = parseGraph(bad, "bad.pg");
    std::string error = !r ? r.error().str() : verify(*r) ? "" : verify(*r).error().str();
    CAPTURE(error);
    CHECK(error.find(message) != std::string::npos);
    CHECK(error.find("bad.pg:") != std::string::npos);
  };
  std::string three = routedGraph(8, 4, 3, 2, "softmax", false, 1.0);
  auto replace = [&](std::string from, std::string to) {
    std::string s = three;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  fails(replace("experts=3", "experts=2"), "11 operands, but experts 2 needs 8");
  fails(replace("k=2", "k=4"), "k 4 is not within the 3 experts");
  fails(replace("weight %e1.down : f32[8,4]", "weight %e1.down : f32[4,8]"),
        "the down weight of expert 1, must be f32[8,4] (or f16 or bf16, widened exactly)");
  fails(replace("weight %router : f32[3,8]", "weight %router : f32[3,9]"), "the router, must be [3,8]");
  fails(replace("scoring=softmax", "scoring=relu"), "scoring");
}

// ---------------------------------------------------------------- routed-gemv

namespace {

// Lavapipe, with bf16 storage (a bf16 kernel is integer arithmetic around
// f32, which lavapipe and the interpreter run like any other).
const DeviceProfile& lavapipeBf16() {
  static const DeviceProfile d = [] {
    DeviceProfile p = loadTarget("lavapipe");
    p.bf16 = p.f16;
    return p;
  }();
  return d;
}

// The kernel against the oracle (docs/codegen.md, routed-gemv): on the KIR
// interpreter bit for bit; on lavapipe every element within ulps * u *
// max|y| of the oracle's, u the unit roundoff of h's dtype (a GPU's exp and
// fused multiply-adds differ in f32's last bit: (H + I) ulps of f32, or 4k
// of a two-byte dtype whose rounding of an intermediate that moves).
void checkRouted(const Graph& g, std::map<std::string, Tensor> params, double ulps) {
  auto want = evaluate(g, params);
  REQUIRE_MESSAGE(bool(want), (want ? "" : want.error().str()));
  const Tensor& y = want->outputs.at("y");
  double largest = 0;
  for (int64_t i = 0; i < y.size(); ++i) largest = std::max(largest, std::fabs(y.get(i)));
  double u = y.dtype() == DType::F32 ? 0x1p-24 : y.dtype() == DType::BF16 ? 0x1p-8 : 0x1p-11;
  auto bound = [&](int64_t) { return ulps * u * largest; };
  auto kir = runOnKir(g, lavapipeBf16(), params);
  REQUIRE_MESSAGE(bool(kir), (kir ? "" : kir.error().str()));
  checkClose("kir", y, kir->outputs.at("y"), kExact);
  if (!kGeneratorsOnLavapipe) return;
  auto vulkan = runOnVulkan(g, lavapipeBf16(), params);
  REQUIRE_MESSAGE(bool(vulkan), (vulkan ? "" : vulkan.error().str()));
  checkWithinEach("lavapipe", y, vulkan->outputs.at("y"), bound);
}

}  // namespace

TEST_CASE("routed-gemv runs RoutedExperts within its bound on the KIR interpreter and lavapipe, one workgroup a row") {
  struct Case {
    int64_t H, I, E, k;
    const char *scoring, *weights, *h;
    bool renormalize;
    double scale, ulps;
  };
  // Widths that are no multiple of any tile or of the 256 threads; f32,
  // bf16 activations and weights, f32 activations over bf16 weights.
  for (Case c : {Case{13, 7, 5, 3, "softmax", "f32", "f32[2,3,", false, 1.5, 13 + 7},
                 Case{19, 9, 6, 2, "sigmoid", "bf16", "bf16[1,1,", true, 2.0, 4 * 2},
                 Case{300, 17, 4, 2, "softmax", "bf16", "f32[1,2,", false, 1.0, 300 + 17}}) {
    std::string text = routedGraph(c.H, c.I, c.E, c.k, c.scoring, c.renormalize, c.scale, c.weights, c.h);
    CAPTURE(text);
    Graph g = parse(text);
    auto plan = planGraph(g, lavapipeBf16());
    REQUIRE_MESSAGE(bool(plan), (plan ? "" : plan.error().str()));
    REQUIRE(plan->dispatches.size() == 1);
    CHECK(plan->kernels[0].request.schedule.kind == "routed-gemv");
    // The launch is the token rows, whatever the routing.
    CHECK(plan->dispatches[0].grid[0] * plan->dispatches[0].grid[1] == numel(g.type(g.params[0]).shape) / c.H);
    uint64_t seed = freshSeed();
    CAPTURE(seed);
    checkRouted(g, completeParams(g, {}, seed), c.ulps);
  }
}

TEST_CASE("routed-gemv keeps a thread's loops within llvmpipe's 65535 iterations") {
  // 8 threads a workgroup: a thread's dots run 512 + 2 * (32 * 1024 + 64 *
  // 256) = 98816 iterations, written out 8 times an iteration.
  DeviceProfile narrow = lavapipeBf16();
  narrow.max_workgroup_size = 8;
  Graph g = parse(routedGraph(512, 256, 4, 2, "softmax", false, 1.0, "f32", "f32[1,1,"));
  auto params = completeParams(g, {}, freshSeed());
  auto want = evaluate(g, params);
  REQUIRE(bool(want));
  if (!kGeneratorsOnLavapipe) return;
  auto vulkan = runOnVulkan(g, narrow, params);
  REQUIRE_MESSAGE(bool(vulkan), (vulkan ? "" : vulkan.error().str()));
  const Tensor& y = want->outputs.at("y");
  double largest = 0;
  for (int64_t i = 0; i < y.size(); ++i) largest = std::max(largest, std::fabs(y.get(i)));
  checkWithinEach("lavapipe", y, vulkan->outputs.at("y"), [&](int64_t) { return (512 + 256) * 0x1p-24 * largest; });
}

TEST_CASE("routed-gemv picks the lower experts on tied router scores, and declines what a decode kernel cannot hold") {
  // As the oracle's tie test: every router row equal, experts 0 and 1 (the
  // ones a tie selects) with zero down weights, so the output is exactly 0.
  Graph g = parse(routedGraph(9, 6, 4, 2, "softmax", false, 1.0, "f32", "f32[1,3,"));
  auto params = tiedParams(g);
  auto kir = runOnKir(g, lavapipeBf16(), params);
  REQUIRE(bool(kir));
  const Tensor& y = kir->outputs.at("y");
  for (int64_t i = 0; i < y.size(); ++i) CHECK(y.get(i) == 0.0);
  checkRouted(g, params, 9 + 6);

  // 9 rows: more than a decode's; 10 experts: 33 bindings on lavapipe's 32.
  for (auto [text, why] : {std::pair{routedGraph(9, 6, 4, 2, "softmax", false, 1.0, "f32", "f32[3,3,"),
                                     "not a routed gemv: 9 rows are more than the 8 of a decode"},
                           std::pair{routedGraph(9, 6, 10, 2, "softmax", false, 1.0, "f32", "f32[1,1,"),
                                     "not a routed gemv: 33 bindings (3 an expert) are more than max_bindings 32"}}) {
    auto plan = planGraph(parse(text), lavapipeBf16());
    REQUIRE_FALSE(bool(plan));
    CHECK(plan.error().capability == "NoGenerator");
    CHECK(plan.error().message.find(std::string("(") + why + ")") != std::string::npos);
  }
}

TEST_CASE("routed-gemv compiles to PTX that ptxas assembles and to HSACO, f32 and bf16") {
  for (const char* profile : {"nvidia-h200", "amd-mi300x"}) {
    DeviceProfile d = loadTarget(profile);
    auto lowering = llvmgen::Lowering::create(d.target, d.arch);
    REQUIRE_MESSAGE(bool(lowering), (lowering ? "" : lowering.error().str()));
    for (const char* h : {"f32[1,4,", "bf16[2,1,"}) {
      CAPTURE(profile);
      CAPTURE(h);
      std::string dtype = std::string(h).substr(0, std::string(h).find('['));
      Graph g = parse(routedGraph(40, 24, 6, 2, "sigmoid", true, 2.0, dtype, h));
      auto plan = planGraph(g, d);
      REQUIRE_MESSAGE(bool(plan), (plan ? "" : plan.error().str()));
      auto kernels = generateKir(*plan, d);
      REQUIRE_MESSAGE(bool(kernels), (kernels ? "" : kernels.error().str()));
      REQUIRE(kernels->size() == 1);
      const kir::Kernel& k = kernels->front();
      auto blob = (*lowering)->compile(k);
      REQUIRE_MESSAGE(bool(blob), (blob ? "" : blob.error().str()));
      if (d.target == Target::Hsaco) checkHsaco(k, *blob);
      else checkPtx(k, std::string(blob->begin(), blob->end()), d.arch);
    }
  }
}

// Unit tests of the attention rewrite (lib/passes/attention.cpp) with the
// oracle: on every example graph and on fresh traces of the tiny config of
// every family, in every phase, KV layout and live setting, the rewritten
// graph gives the same outputs, states and validation witnesses as the
// primitive chain on fresh random inputs (a new seed each run, printed on
// failure), within |a - b| <= 1e-4 * (1 + |b|) in f32: the fused op sums the
// weighted values before dividing, the chain divides first. Also: the Llama
// decode graph has exactly one Attention per layer with n_rep = heads /
// kv_heads and no softmax left; compiling twice prints the same IR; and the
// declines of real traces (a bf16 chain, a grid too small, a length or read
// map the witness rule leaves unproved) keep the graph and say why.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ir/binary.h"
#include "ir/text.h"
#include "oracle/interp.h"
#include "oracle/random.h"
#include "passes/pass.h"
#include "testing.h"
#include "trace/model.h"

using namespace poot;

namespace {

using namespace poot::testing;

constexpr double kTol = 1e-4;
// Example graphs with more parameter elements than this (the full-size
// configs) are left to the lit tests: the oracle would take minutes.
constexpr int64_t kMaxParamElems = int64_t(8) << 20;

int count(const Graph& g, Op op) {
  return int(std::count_if(g.eqns.begin(), g.eqns.end(), [&](const Eqn& e) { return e.op == op; }));
}

std::vector<const Eqn*> eqnsOf(const Graph& g, Op op) {
  std::vector<const Eqn*> out;
  for (const Eqn& e : g.eqns)
    if (e.op == op) out.push_back(&e);
  return out;
}

std::string sym(const Eqn& e, const char* name) { return std::get<std::string>(*e.attr(name)); }
int64_t intAttr(const Eqn& e, const char* name) { return std::get<int64_t>(*e.attr(name)); }

std::string remarksOf(const PassContext& ctx) {
  std::string out;
  for (const Remark& r : ctx.remarks) out += r.eqn + ": " + r.message + "\n";
  return out;
}

const std::string kStaysAdditive = "the mask stays additive: ";

// The remarks that say a fused chain's mask stays additive, and whether every
// remark is one.
int maskRemarks(const PassContext& ctx) {
  return int(std::count_if(ctx.remarks.begin(), ctx.remarks.end(),
                           [](const Remark& r) { return r.message.rfind(kStaysAdditive, 0) == 0; }));
}
bool onlyMaskRemarks(const PassContext& ctx) { return maskRemarks(ctx) == int(ctx.remarks.size()); }

// Whether some compare, And or Select of the graph gives a value ending in
// [Lq, Lk]: a mask or its visibility.
bool holdsMask(const Graph& g, int64_t Lq, int64_t Lk) {
  for (const Eqn& e : g.eqns) {
    bool maskOp = e.op == Op::Select || e.op == Op::And || e.op == Op::Le || e.op == Op::Lt || e.op == Op::Ge ||
                  e.op == Op::Gt;
    const Shape& s = g.type(e.results[0]).shape;
    if (maskOp && s.size() >= 2 && s[s.size() - 2] == Lq && s.back() == Lk) return true;
  }
  return false;
}

// ranges -> attention-rewrite -> cleanup on a copy of g.
Graph rewritten(const Graph& g, PassContext& ctx) {
  Graph out = g;
  REQUIRE(bool(runRanges(out, ctx)));
  auto changed = runAttentionRewrite(out, ctx);
  REQUIRE(bool(changed));
  REQUIRE(bool(runCleanup(out, ctx)));
  auto ok = verify(out);
  REQUIRE_MESSAGE(bool(ok), (ok ? "" : ok.error().str()));
  return out;
}

// The oracle on both graphs with the same fresh random parameters.
void checkSameResults(const Graph& before, const Graph& after, uint64_t seed) {
  testing::checkSameResults(before, after, seed, relativeToBefore(kTol));
}

trace::TraceOptions options(bool prefill, bool paged, bool live, int64_t batch) {
  trace::TraceOptions o;
  o.phase = prefill ? trace::Phase::Prefill : trace::Phase::Decode;
  o.tokens = prefill ? 5 : 1;
  o.kv = paged ? trace::ops::KvLayout::Paged : trace::ops::KvLayout::Fixed;
  o.live = live;
  o.batch = batch;
  o.capacity = 32;
  return o;
}

std::string describe(const trace::TraceOptions& o) {
  return std::string(o.phase == trace::Phase::Prefill ? "prefill" : "decode") +
         (o.kv == trace::ops::KvLayout::Paged ? " paged" : " fixed") + (o.live ? " live" : "") + " batch " +
         std::to_string(o.batch);
}

}  // namespace

TEST_CASE("attention-rewrite: every example graph keeps its results under the oracle") {
  uint64_t seed = runSeed();
  int checked = 0;
  for (const auto& path : exampleGraphs()) {
    CAPTURE(path.filename().string());
    Graph g = loadGraphFile(path);
    PassContext ctx;
    Graph after = rewritten(g, ctx);
    CHECK_MESSAGE(count(after, Op::Attention) >= 1, remarksOf(ctx));
    // Only BLOOM's ALiBi bias and the sparse indexer's block mask stay
    // additive (and say so); every other example's mask is causal.
    std::string file = path.filename().string();
    bool additive = file.find("bloom") != std::string::npos || file.find("sparse") != std::string::npos;
    CHECK_MESSAGE(onlyMaskRemarks(ctx), remarksOf(ctx));
    for (const Eqn* e : eqnsOf(after, Op::Attention)) CHECK(sym(*e, "mask") != (additive ? "causal" : "additive"));
    if (paramElements(g) > kMaxParamElems) continue;
    checkSameResults(g, after, seed);
    ++checked;
  }
  CHECK(checked >= 10);
}

TEST_CASE("attention-rewrite: fresh traces of every family keep their results, one Attention per layer") {
  uint64_t seed = runSeed();
  struct Family {
    const char* config;
    const char* key;  // the form a fixed layout gets
  };
  const Family families[] = {{"tiny-llama.json", "dense"},   {"tiny-mistral.json", "dense"},
                             {"tiny-qwen2.json", "dense"},   {"tiny-llama-3.1.json", "dense"},
                             {"tiny-gemma2.json", "dense"},  {"tiny-bloom.json", "dense"},
                             {"tiny-deepseek-v2.json", "split"}, {"tiny-sparse.json", "dense"}};
  for (const Family& fam : families) {
    trace::ModelConfig cfg = loadExampleConfig(fam.config);
    for (bool prefill : {false, true})
      for (bool paged : {false, true})
        for (bool live : {false, true})
          for (int64_t batch : {1, 2}) {
            trace::TraceOptions o = options(prefill, paged, live, batch);
            CAPTURE(fam.config);
            CAPTURE(describe(o));
            auto traced = trace::traceModel(cfg, o);
            REQUIRE_MESSAGE(bool(traced), (traced ? "" : traced.error().str()));
            PassContext ctx;
            Graph after = rewritten(*traced, ctx);
            // The dense families' masks become mask=causal; BLOOM's (ALiBi)
            // and the sparse indexer's stay additive, with a remark each.
            std::string config = fam.config;
            bool additive = config == "tiny-bloom.json" || config == "tiny-sparse.json";
            CHECK_MESSAGE(onlyMaskRemarks(ctx), remarksOf(ctx));
            auto formed = eqnsOf(after, Op::Attention);
            CHECK(int64_t(formed.size()) == cfg.numLayers);
            bool split = std::string(fam.key) == "split";
            for (const Eqn* e : formed) {
              CHECK(sym(*e, "key") == (split ? "split" : paged ? "paged" : "dense"));
              CHECK(sym(*e, "bound") == (live ? "live" : "capacity"));
              CHECK(sym(*e, "mask") != (additive ? "causal" : "additive"));
            }
            if (additive) CHECK(maskRemarks(ctx) == int(cfg.numLayers));
            if (!additive && prefill) CHECK_FALSE(holdsMask(after, *o.tokens, *o.capacity));
            CHECK(count(after, Op::ReduceMax) == count(*traced, Op::ReduceMax) - int(cfg.numLayers));
            checkSameResults(*traced, after, seed);
          }
  }
}

TEST_CASE("attention-rewrite: the Llama decode graph has one Attention per layer with n_rep = heads / kv_heads") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  auto traced = trace::traceModel(cfg, options(false, false, false, 1));
  REQUIRE(bool(traced));
  PassContext ctx;
  Graph after = rewritten(*traced, ctx);
  auto formed = eqnsOf(after, Op::Attention);
  REQUIRE(int64_t(formed.size()) == cfg.numLayers);
  for (size_t l = 0; l < formed.size(); ++l) {
    const Eqn& e = *formed[l];
    CHECK(intAttr(e, "n_rep") == cfg.numHeads / cfg.numKvHeads);
    CHECK(sym(e, "key") == "dense");
    CHECK(sym(e, "mask") == "causal");
    CHECK(std::get<double>(*e.attr("scale")) == doctest::Approx(1.0 / std::sqrt(double(cfg.headDim))));
    // k and v are the un-repeated caches, written in place (no copy)
    CHECK(after.value(e.operands[1]).name == "layers." + std::to_string(l) + ".attn.k_cache");
    CHECK(after.value(e.operands[2]).name == "layers." + std::to_string(l) + ".attn.v_cache");
    CHECK(after.type(e.operands[1]).shape[1] == cfg.numKvHeads);
    CHECK(after.type(e.results[0]) == Type{DType::F32, {1, cfg.numHeads, 1, cfg.headDim}});
  }
  CHECK(count(after, Op::ReduceMax) == 0);
  CHECK(count(after, Op::Exp) == 0);
  CHECK(count(after, Op::Broadcast) == count(*traced, Op::Broadcast) - 2 * int(cfg.numLayers));
}

TEST_CASE("attention-rewrite: compiling twice prints byte-identical IR") {
  for (const char* file : {"tiny-llama-prefill-paged-live.pg", "tiny-gemma2-decode.pg", "tiny-deepseek-v2-prefill.pg"}) {
    CAPTURE(file);
    std::string printed[2];
    for (std::string& out : printed) {
      Graph g = loadGraphFile(exampleGraph(file));
      PassContext ctx;
      auto s = runPipeline(g, ctx, PipelineOptions{});
      REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
      out = printGraph(g);
    }
    CHECK(printed[0] == printed[1]);
    CHECK(printed[0].find("Attention(") != std::string::npos);
  }
}

TEST_CASE("attention-rewrite: a bf16 or f16 chain forms the op at its dtype, the f32 softmax inside") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  for (DType dt : {DType::BF16, DType::F16})
    for (bool live : {false, true}) {
      CAPTURE(dtypeName(dt));
      CAPTURE(live);
      trace::TraceOptions o = options(false, false, live, 2);
      o.dtype = dt;
      auto traced = trace::traceModel(cfg, o);
      REQUIRE_MESSAGE(bool(traced), (traced ? "" : traced.error().str()));
      PassContext ctx;
      Graph after = rewritten(*traced, ctx);
      CHECK(ctx.remarks.empty());
      std::vector<const Eqn*> formed = eqnsOf(after, Op::Attention);
      REQUIRE(int64_t(formed.size()) == cfg.numLayers);
      for (const Eqn* e : formed) {
        CHECK(after.type(e->results[0]).dtype == dt);
        for (ValueId v : e->operands)
          if (isFloat(after.type(v).dtype)) CHECK(after.type(v).dtype == dt);
      }
      // The f32 softmax between its two Converts went with the chain.
      CHECK(count(after, Op::Exp) == 0);
      CHECK(count(after, Op::ReduceMax) == 0);
    }
}

TEST_CASE("attention-rewrite: a launch past the device's 2-D grid is refused with a remark") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  auto traced = trace::traceModel(cfg, options(true, false, false, 2));  // 2 * 4 * 5 = 40 workgroups
  REQUIRE(bool(traced));
  SUBCASE("fits when folded") {
    PassContext ctx;
    ctx.gridLimits[0] = 16;
    ctx.gridLimits[1] = 3;  // 16 x 3 = 48 >= 40
    Graph after = rewritten(*traced, ctx);
    CHECK(count(after, Op::Attention) == cfg.numLayers);
  }
  SUBCASE("does not fit") {
    PassContext ctx;
    ctx.gridLimits[0] = 16;
    ctx.gridLimits[1] = 2;  // 32 < 40
    Graph after = rewritten(*traced, ctx);
    CHECK(count(after, Op::Attention) == 0);
    REQUIRE(!ctx.remarks.empty());
    CHECK(ctx.remarks[0].message == "the launch of 40 workgroups (B * Hq * Lq) does not fit the device's grid of 16 x 2");
  }
}

TEST_CASE("attention-rewrite: the live length fuses only when proved under the witness rule") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  auto traced = trace::traceModel(cfg, options(false, false, true, 2));
  REQUIRE(bool(traced));
  // Widen pos past the capacity: len = pos + 1 is then proved only by the
  // guard's clamp, which counts only while its witness is a validation.
  Graph wide = *traced;
  for (ValueId p : wide.params)
    if (wide.value(p).name == "pos") wide.value(p).hi = 100;
  SUBCASE("witness declared: the clamp counts") {
    PassContext ctx;
    Graph after = rewritten(wide, ctx);
    CHECK(count(after, Op::Attention) == cfg.numLayers);
    for (const Eqn* e : eqnsOf(after, Op::Attention)) CHECK(sym(*e, "bound") == "live");
    CHECK(ctx.remarks.empty());
  }
  SUBCASE("witness dropped: unproved, declined") {
    Graph g = wide;
    g.validations.clear();  // no longer a verified graph: the pass alone
    PassContext ctx;
    REQUIRE(bool(runRanges(g, ctx)));
    auto changed = runAttentionRewrite(g, ctx);
    REQUIRE(bool(changed));
    CHECK_FALSE(*changed);
    REQUIRE(int64_t(ctx.remarks.size()) == cfg.numLayers);
    CHECK(ctx.remarks[0].message ==
          "cannot prove 1 <= %len.guarded <= 32: its range is [-2147483648, 2147483647] (a guard's clamp counts only "
          "when its witness is a declared validation output)");
  }
}

TEST_CASE("attention-rewrite: a paged read map fuses only when every word is proved a slot of the pool") {
  trace::ModelConfig cfg = loadExampleConfig("tiny-llama.json");
  auto traced = trace::traceModel(cfg, options(false, true, false, 2));
  REQUIRE(bool(traced));
  Graph g = *traced;
  for (ValueId p : g.params)
    if (g.value(p).name == "read") g.value(p).hi = 64;  // the pool has 64 slots: [0, 64] is one too many
  PassContext ctx;
  REQUIRE(bool(runRanges(g, ctx)));
  auto changed = runAttentionRewrite(g, ctx);
  REQUIRE(bool(changed));
  CHECK_FALSE(*changed);
  REQUIRE(int64_t(ctx.remarks.size()) == cfg.numLayers);
  CHECK(ctx.remarks[0].message ==
        "cannot prove every word of the read map %read is a slot of the pool [0, 64): its range is [0, 64]");
}

TEST_CASE("attention-rewrite: sliding windows become the window of mask=causal") {
  struct Family {
    const char* config;
    std::vector<int64_t> windows;  // per layer, 0 for a global layer
  };
  // tiny-gemma2 alternates sliding (even layers) and global ones; every
  // tiny-mistral layer slides. Both windows are 4 keys.
  for (const Family& fam : {Family{"tiny-gemma2.json", {4, 0}}, Family{"tiny-mistral.json", {4, 4}}})
    for (bool live : {false, true})
      for (int64_t batch : {1, 2}) {
        CAPTURE(fam.config);
        CAPTURE(live);
        CAPTURE(batch);
        trace::ModelConfig cfg = loadExampleConfig(fam.config);
        REQUIRE(int64_t(fam.windows.size()) == cfg.numLayers);
        auto traced = trace::traceModel(cfg, options(true, false, live, batch));
        REQUIRE_MESSAGE(bool(traced), (traced ? "" : traced.error().str()));
        PassContext ctx;
        Graph after = rewritten(*traced, ctx);
        CHECK_MESSAGE(ctx.remarks.empty(), remarksOf(ctx));
        auto formed = eqnsOf(after, Op::Attention);
        REQUIRE(formed.size() == fam.windows.size());
        for (size_t l = 0; l < formed.size(); ++l) {
          CAPTURE(l);
          CHECK(sym(*formed[l], "mask") == "causal");
          const AttrValue* w = formed[l]->attr("window");
          CHECK(int64_t(w ? std::get<int64_t>(*w) : 0) == fam.windows[l]);
          // the query positions: i32 [B, Lq], one value shared by every layer
          CHECK(after.type(formed[l]->operands[3]) == Type{DType::I32, {batch, 5}});
          CHECK(formed[l]->operands[3] == formed[0]->operands[3]);
        }
        CHECK_FALSE(holdsMask(after, 5, 32));
        checkSameResults(*traced, after, runSeed());
      }
}

namespace {

// A prefill chain (2 batch rows, 4 heads, 4 query rows at pos + j, a 16-key
// cache) whose mask is `mask` f32 [4, 16] built by the eqns `maskEqns` from
// %kpos i32[1,16], %qpos i32[4,1] and %positions i32[4].
std::string prefillWith(const std::string& maskEqns, const std::string& posRange = "[0, 12]") {
  return "graph prefill\n"
         "input %q : f32[2,4,4,8]\n"
         "input %k : f32[2,4,4,8]\n"
         "input %v : f32[2,4,4,8]\n"
         "state %k_cache : f32[2,4,16,8]\n"
         "state %v_cache : f32[2,4,16,8]\n"
         "slot %pos : i32[] range " + posRange + "\n"
         "%kc = DynamicUpdateSlice(%k_cache, %k, %pos) {axis=2} : f32[2,4,16,8]\n"
         "%vc = DynamicUpdateSlice(%v_cache, %v, %pos) {axis=2} : f32[2,4,16,8]\n"
         "%rows = Iota() {axis=0} : i32[4]\n"
         "%positions = Add(%rows, %pos) : i32[4]\n"
         "%qpos = Reshape(%positions) : i32[4,1]\n"
         "%kpos0 = Iota() {axis=0} : i32[16]\n"
         "%kpos = Reshape(%kpos0) : i32[1,16]\n"
         "%zero = Constant() {value=[0]} : f32[]\n"
         "%neg = Constant() {value=[-inf]} : f32[]\n" +
         maskEqns +
         "%kt = Transpose(%kc) {perm=[0, 1, 3, 2]} : f32[2,4,8,16]\n"
         "%scores = MatMul(%q, %kt) : f32[2,4,4,16]\n"
         "%scale = Constant() {value=[0.35]} : f32[]\n"
         "%scaled = Mul(%scores, %scale) : f32[2,4,4,16]\n"
         "%masked = Add(%scaled, %mask) : f32[2,4,4,16]\n"
         "%m = ReduceMax(%masked) {axis=-1, keepdim=true} : f32[2,4,4,1]\n"
         "%xs = Sub(%masked, %m) : f32[2,4,4,16]\n"
         "%ex = Exp(%xs) : f32[2,4,4,16]\n"
         "%s = ReduceSum(%ex) {axis=-1, keepdim=true} : f32[2,4,4,1]\n"
         "%p = Div(%ex, %s) : f32[2,4,4,16]\n"
         "%out = MatMul(%p, %vc) : f32[2,4,4,8]\n"
         "output %out\n"
         "state_out %k_cache = %kc\n"
         "state_out %v_cache = %vc\n";
}

}  // namespace

TEST_CASE("attention-rewrite: the causal mask in its spellings, and the masks that stay additive") {
  struct Spelling {
    const char* what;
    std::string eqns;
    std::string mask;       // the Attention's mask attribute
    int64_t window;         // 0: none
    std::string remark;     // for an additive mask
    std::string posRange = "[0, 12]";
  };
  const std::string sel = "%mask = Select(%visible, %zero, %neg) : f32[4,16]\n";
  const std::string win = "%w = Constant() {value=[3]} : i32[]\n%start = Sub(%qpos, %w) : i32[4,1]\n";
  std::vector<Spelling> cases = {
      {"Le(kpos, qpos)", "%visible = Le(%kpos, %qpos) : bool[4,16]\n" + sel, "causal", 0, ""},
      {"Ge(qpos, kpos)", "%visible = Ge(%qpos, %kpos) : bool[4,16]\n" + sel, "causal", 0, ""},
      {"window first, Lt spelled",
       win + "%inw = Lt(%start, %kpos) : bool[4,16]\n%le = Le(%kpos, %qpos) : bool[4,16]\n"
             "%visible = And(%inw, %le) : bool[4,16]\n" + sel,
       "causal", 3, ""},
      {"a window that might wrap",
       win + "%inw = Gt(%kpos, %start) : bool[4,16]\n%le = Le(%kpos, %qpos) : bool[4,16]\n"
             "%visible = And(%le, %inw) : bool[4,16]\n" + sel,
       "additive", 0,
       "cannot prove %positions - 3 does not wrap in i32: its range is [-2147483648, 15]",
       "[-2147483648, 12]"},
      {"t < qpos", "%visible = Lt(%kpos, %qpos) : bool[4,16]\n" + sel, "additive", 0,
       "the visible keys are not t <= qpos (and t > qpos - window)"},
      {"a window alone",
       win + "%visible = Gt(%kpos, %start) : bool[4,16]\n" + sel, "additive", 0,
       "a window without the causal bound t <= qpos is not a causal mask"},
      {"compared with the keys, not the positions",
       "%visible = Le(%kpos, %kpos) : bool[1,16]\n%mask = Select(%visible, %zero, %neg) : f32[1,16]\n", "additive", 0,
       "the positions the keys are compared with vary over the keys"},
      {"the keys' iota on the query axis",
       "%rows2 = Reshape(%kpos0) : i32[16,1]\n%v16 = Le(%rows2, %kpos) : bool[16,16]\n"
       "%visible = Slice(%v16) {axis=0, start=0, limit=4} : bool[4,16]\n" + sel,
       "additive", 0, "the visible keys are not t <= qpos (and t > qpos - window)"},
      {"a mask that is 1 / -inf", "%visible = Le(%kpos, %qpos) : bool[4,16]\n%one = Constant() {value=[1]} : f32[]\n"
       "%mask = Select(%visible, %one, %neg) : f32[4,16]\n", "additive", 0, "it is not Select(visible, 0, -inf) but Select"},
      {"a mask that is an input", "", "additive", 0, "it is not Select(visible, 0, -inf) but the parameter %mask"},
  };
  for (const Spelling& c : cases) {
    CAPTURE(c.what);
    std::string text = prefillWith(c.eqns, c.posRange);
    if (c.eqns.empty()) text.replace(text.find("state %k_cache"), 0, "input %mask : f32[4,16]\n");
    Graph g = parse(text);
    PassContext ctx;
    Graph after = rewritten(g, ctx);
    auto formed = eqnsOf(after, Op::Attention);
    REQUIRE(formed.size() == 1);
    CHECK(sym(*formed[0], "mask") == c.mask);
    const AttrValue* w = formed[0]->attr("window");
    CHECK(int64_t(w ? std::get<int64_t>(*w) : 0) == c.window);
    if (c.remark.empty()) {
      CHECK_MESSAGE(ctx.remarks.empty(), remarksOf(ctx));
      CHECK(after.type(formed[0]->operands[3]) == Type{DType::I32, {2, 4}});
      CHECK_FALSE(holdsMask(after, 4, 16));
    } else {
      REQUIRE(ctx.remarks.size() == 1);
      CHECK(ctx.remarks[0].eqn == "%scores");
      CHECK(ctx.remarks[0].message == kStaysAdditive + c.remark);
    }
    checkSameResults(g, after, runSeed());
  }
}

TEST_CASE("attention-rewrite: positions per batch row and one position for every row") {
  // qpos [B, Lq, 1] from a per-row slot (batch row b at pos[b] + j), and a
  // decode-like mask against one scalar position.
  const std::string perRow =
      "graph prefill\ninput %q : f32[2,4,3,8]\ninput %k : f32[2,4,16,8]\ninput %v : f32[2,4,16,8]\n"
      "slot %pos : i32[2,1] range [0, 13]\n"
      "%rows = Iota() {axis=1} : i32[1,3]\n%positions = Add(%pos, %rows) : i32[2,3]\n"
      "%qpos = Reshape(%positions) : i32[2,1,3,1]\n"
      "%kpos = Iota() {axis=3} : i32[1,1,1,16]\n%visible = Le(%kpos, %qpos) : bool[2,1,3,16]\n"
      "%zero = Constant() {value=[0]} : f32[]\n%neg = Constant() {value=[-inf]} : f32[]\n"
      "%mask = Select(%visible, %zero, %neg) : f32[2,1,3,16]\n";
  const std::string oneRow =
      "graph prefill\ninput %q : f32[2,4,3,8]\ninput %k : f32[2,4,16,8]\ninput %v : f32[2,4,16,8]\n"
      "slot %pos : i32[] range [0, 15]\n"
      "%kpos = Iota() {axis=0} : i32[16]\n%visible = Le(%kpos, %pos) : bool[16]\n"
      "%zero = Constant() {value=[0]} : f32[]\n%neg = Constant() {value=[-inf]} : f32[]\n"
      "%mask = Select(%visible, %zero, %neg) : f32[16]\n";
  const std::string chain =
      "%kt = Transpose(%k) {perm=[0, 1, 3, 2]} : f32[2,4,8,16]\n%scores = MatMul(%q, %kt) : f32[2,4,3,16]\n"
      "%masked = Add(%scores, %mask) : f32[2,4,3,16]\n"
      "%m = ReduceMax(%masked) {axis=-1, keepdim=true} : f32[2,4,3,1]\n%xs = Sub(%masked, %m) : f32[2,4,3,16]\n"
      "%ex = Exp(%xs) : f32[2,4,3,16]\n%s = ReduceSum(%ex) {axis=-1, keepdim=true} : f32[2,4,3,1]\n"
      "%p = Div(%ex, %s) : f32[2,4,3,16]\n%out = MatMul(%p, %v) : f32[2,4,3,8]\noutput %out\n";
  for (const std::string* head : {&perRow, &oneRow}) {
    Graph g = parse(*head + chain);
    PassContext ctx;
    Graph after = rewritten(g, ctx);
    CHECK_MESSAGE(ctx.remarks.empty(), remarksOf(ctx));
    auto formed = eqnsOf(after, Op::Attention);
    REQUIRE(formed.size() == 1);
    CHECK(sym(*formed[0], "mask") == "causal");
    CHECK(after.type(formed[0]->operands[3]) == Type{DType::I32, {2, 3}});
    checkSameResults(g, after, runSeed());
  }
}

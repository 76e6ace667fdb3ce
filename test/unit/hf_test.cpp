// Compares poot's traced model families with Hugging Face transformers. Every
// folder under test/hf/fixtures/ (or under $POOT_HF_FIXTURES when set) made
// by test/hf/make_fixtures.py holds a tiny model's config.json, its weights
// as a checkpoint (one model.safetensors, or bf16 or f16 shards with their
// index), token ids (tokens.npy, i32 [B, L]) and the logits transformers
// computed for them at position 0 in f32 (logits.npy, f32 [B, L, V]). For
// each, this test traces the config for prefill (L tokens, capacity the next
// multiple of 16, weights declared in the config's torch_dtype), binds the
// checkpoint's directory, the tokens, pos = 0 and zero KV caches, evaluates
// the graph with the oracle and requires max |poot - transformers| <= 1e-3 *
// max(1, max |transformers|). A two-byte checkpoint must also give exactly
// the logits of the f32 graph on the same weights widened, and stay within
// its dtype's rounding of the logits transformers computed in that dtype
// (logits-native.npy). With no fixture folder it passes and says that
// nothing was compared.
//
// Fidelity of two-byte compute: for every two-byte fixture the config is
// traced with its activations and KV cache in the checkpoint's dtype too
// (--dtype), run through the compiler's passes (so attention is the formed
// op the kernels compute) and evaluated with the oracle. Its distance to the
// f32 reference (logits.npy) must be at most 1.5 times transformers' own
// two-byte run's distance to it (logits-native.npy), both as the largest
// and as the root-mean-square difference. Greedy tokens: how often each
// run's equal the reference's is printed; on every decisive row (the
// reference's top two logits further apart than either run's largest error
// on the row, so no rounding of that size can swap them) poot's must equal
// the reference's. A near tie is a coin toss for both runs: on the 64-token
// deepseek_v2 fixture poot matches 62 rows and transformers 63, the one
// difference a row whose top two are 0.015 apart where transformers itself
// is 0.057 off.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "oracle/interp.h"
#include "oracle/checkpoint.h"
#include "oracle/npy.h"
#include "passes/pass.h"
#include "trace/model.h"

namespace fs = std::filesystem;
using namespace poot;

namespace {

constexpr double kTolerance = 1e-3;  // times max(1, max |reference logit|)
// Against transformers run in the checkpoint's own two-byte dtype (every
// activation rounded to 8 or 11 significant bits): times max(1, max |ref|).
constexpr double kNativeTolerance = 1e-1;

fs::path fixturesRoot() {
  if (const char* env = std::getenv("POOT_HF_FIXTURES"); env && *env) return env;
  return fs::path(POOT_SOURCE_DIR) / "test" / "hf" / "fixtures";
}

std::vector<fs::path> fixtureDirs() {
  std::vector<fs::path> dirs;
  std::error_code ec;
  fs::path root = fixturesRoot();
  if (!fs::is_directory(root, ec)) return dirs;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory() && fs::exists(e.path() / "config.json")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

struct Comparison {
  double maxAbs = 0, maxRef = 0;
};

Comparison compareLogits(const Tensor& got, const Tensor& ref) {
  Comparison c;
  for (int64_t i = 0; i < got.size(); ++i) {
    double r = ref.get(i), d = std::abs(got.get(i) - r);
    c.maxRef = std::max(c.maxRef, std::abs(r));
    c.maxAbs = std::max(c.maxAbs, std::isnan(d) ? INFINITY : d);
  }
  return c;
}

// The logits of the fixture's prefill graph with the given weights dtype
// and weights (by name), or an error naming what failed.
using WeightsOf = std::function<Expected<std::map<std::string, Tensor>>(const Graph&)>;

// The fixture's prefill logits, activations in `dtype`; `compiled` runs the
// compiler's passes first (the formed attention op instead of its chain).
Expected<Tensor> logitsOf(const trace::ModelConfig& cfg, const Tensor& tokens, DType weightsDtype,
                          const WeightsOf& weights, DType dtype = DType::F32, bool compiled = false) {
  trace::TraceOptions opts;
  opts.dtype = dtype;
  opts.phase = trace::Phase::Prefill;
  opts.batch = tokens.shape()[0];
  opts.tokens = tokens.shape()[1];
  opts.capacity = (tokens.shape()[1] + 15) / 16 * 16;
  opts.weightsDtype = weightsDtype;
  auto graph = trace::traceModel(cfg, opts);
  if (!graph) return graph.error();
  if (compiled) {
    PassContext ctx;
    if (auto s = runPipeline(*graph, ctx, PipelineOptions{}); !s) return s.error();
  }
  auto bound = weights(*graph);
  if (!bound) return bound.error();
  std::map<std::string, Tensor> params = bound.take();
  Tensor tok(Type{DType::I32, tokens.shape()});
  for (int64_t i = 0; i < tok.size(); ++i) tok.set(i, tokens.get(i));
  params["tokens"] = std::move(tok);
  Tensor pos(Type{DType::I32, {}});
  pos.set(0, 0);
  params["pos"] = std::move(pos);
  // KV caches start at zero: at pos 0 the mask hides every slot not written.
  for (ValueId id : graph->params)
    if (graph->value(id).storage == Storage::State) params[graph->value(id).name] = Tensor(graph->type(id));
  auto ev = evaluate(*graph, params);
  if (!ev) return ev.error();
  auto it = ev->outputs.find("logits");
  if (it == ev->outputs.end()) return makeError(ErrorKind::Verify, {}, "the graph has no output 'logits'");
  return it->second;
}

// The graph's weights from the checkpoint, bound as stored (checked against
// the graph's declarations).
WeightsOf storedWeights(const Checkpoint& checkpoint) {
  return [&checkpoint](const Graph& g) -> Expected<std::map<std::string, Tensor>> {
    auto binding = bindCheckpoint(g, checkpoint);
    if (!binding) return binding.error();
    std::map<std::string, Tensor> out;
    for (const auto& [wname, t] : binding->weights) out[wname] = checkpoint.read(*t);
    return out;
  };
}

struct FixtureResult {
  Comparison f32, native;
  bool hasNative = false;
};

// Traces, binds and evaluates one fixture; a failure is reported as a
// doctest failure naming the fixture and returns nullopt.
std::optional<FixtureResult> compare(const fs::path& dir) {
  std::string name = dir.filename().string();
  auto fail = [&](const std::string& what) {
    FAIL_CHECK(name << ": " << what);
    return std::nullopt;
  };
  auto cfg = trace::loadConfig((dir / "config.json").string());
  if (!cfg) return fail(cfg.error().str());
  auto dtype = trace::checkpointDtype(*cfg);
  if (!dtype) return fail(dtype.error().str());
  auto tokens = readNpy((dir / "tokens.npy").string());
  if (!tokens) return fail(tokens.error().str());
  auto ref = readNpy((dir / "logits.npy").string());
  if (!ref) return fail(ref.error().str());
  if (tokens->shape().size() != 2) return fail("tokens.npy must be [B, L]");
  auto checkpoint = Checkpoint::open(dir.string());
  if (!checkpoint) return fail(checkpoint.error().str());
  // The graph's weights from the checkpoint as stored, or each tensor of the
  // graph's name widened to f32.
  WeightsOf asStored = storedWeights(*checkpoint);
  auto widened = [&](const Graph& g) -> Expected<std::map<std::string, Tensor>> {
    std::map<std::string, Tensor> out;
    for (ValueId id : g.params) {
      const std::string& wname = g.value(id).name;
      if (g.value(id).storage != Storage::Weight) continue;
      const CheckpointTensor* t = checkpoint->find(wname);
      if (!t) return makeError(ErrorKind::Bind, {}, "no tensor '" + wname + "' in the checkpoint");
      Tensor stored = checkpoint->read(*t);
      Tensor wide(Type{DType::F32, stored.shape()});
      for (int64_t i = 0; i < wide.size(); ++i) wide.set(i, stored.get(i));
      out[wname] = std::move(wide);
    }
    return out;
  };
  auto got = logitsOf(*cfg, *tokens, *dtype, asStored);
  if (!got) return fail(got.error().str());
  if (got->shape() != ref->shape())
    return fail("logits " + shapeStr(got->shape()) + " but transformers gave " + shapeStr(ref->shape()));
  FixtureResult res;
  res.f32 = compareLogits(*got, *ref);
  if (*dtype == DType::F32) return res;
  if (!checkpoint->sharded())
    return fail(std::string("a ") + dtypeName(*dtype) + " fixture is expected in shards with an index");
  auto wide = logitsOf(*cfg, *tokens, DType::F32, widened);
  if (!wide) return fail(wide.error().str());
  Comparison same = compareLogits(*got, *wide);
  CHECK_MESSAGE(same.maxAbs == 0, name << ": the " << dtypeName(*dtype) << " weights give logits up to " << same.maxAbs
                                       << " away from the same weights widened to f32");
  auto native = readNpy((dir / "logits-native.npy").string());
  if (!native) return fail(native.error().str());
  if (native->shape() != ref->shape()) return fail("logits-native.npy is " + shapeStr(native->shape()));
  res.native = compareLogits(*got, *native);
  res.hasNative = true;
  return res;
}

}  // namespace

TEST_CASE("hf: traced families match transformers' logits") {
  std::vector<fs::path> dirs = fixtureDirs();
  int compared = 0;
  for (const fs::path& dir : dirs) {
    std::string name = dir.filename().string();
    auto r = compare(dir);
    if (!r) continue;
    auto report = [&](const char* what, const Comparison& c, double tolerance) {
      double bound = tolerance * std::max(1.0, c.maxRef);
      std::ostringstream msg;
      msg << name << what << ": max abs error " << c.maxAbs << ", max rel error "
          << c.maxAbs / std::max(1.0, c.maxRef) << " (max |ref| " << c.maxRef << ", bound " << bound << ")";
      MESSAGE(msg.str());
      CHECK_MESSAGE(c.maxAbs <= bound, msg.str());
    };
    report("", r->f32, kTolerance);
    if (r->hasNative) report(" against transformers in its own dtype", r->native, kNativeTolerance);
    ++compared;
  }
  MESSAGE("compared " << compared << " of " << dirs.size() << " transformers fixture(s) under "
                      << fixturesRoot().string());
}

namespace {

struct Distance {
  double maxAbs = 0, rms = 0;
  int64_t agree = 0, rows = 0;  // greedy tokens equal to the reference's
  std::vector<double> rowMax;   // the largest error of each row
  std::vector<bool> rowAgrees;  // whether the row's greedy token is the reference's
};

// The reference's top-two margin of row r.
double margin(const Tensor& ref, int64_t r) {
  int64_t V = ref.shape().back();
  double first = -INFINITY, second = -INFINITY;
  for (int64_t j = 0; j < V; ++j) {
    double x = ref.get(r * V + j);
    if (x > first) second = first, first = x;
    else if (x > second) second = x;
  }
  return first - second;
}

Distance distance(const Tensor& got, const Tensor& ref) {
  Distance d;
  double sq = 0;
  int64_t V = ref.shape().back();
  d.rows = ref.size() / V;
  for (int64_t r = 0; r < d.rows; ++r) {
    int64_t best = 0, bestRef = 0;
    double row = 0;
    for (int64_t j = 0; j < V; ++j) {
      int64_t i = r * V + j;
      double e = std::abs(got.get(i) - ref.get(i));
      row = std::max(row, std::isnan(e) ? INFINITY : e);
      sq += e * e;
      if (got.get(i) > got.get(r * V + best)) best = j;
      if (ref.get(i) > ref.get(r * V + bestRef)) bestRef = j;
    }
    d.maxAbs = std::max(d.maxAbs, row);
    d.rowMax.push_back(row);
    d.rowAgrees.push_back(best == bestRef);
    d.agree += best == bestRef;
  }
  d.rms = std::sqrt(sq / double(ref.size()));
  return d;
}

}  // namespace

TEST_CASE("hf: two-byte activations hold transformers' own two-byte fidelity") {
  constexpr double kRatio = 1.5;
  int compared = 0;
  for (const fs::path& dir : fixtureDirs()) {
    std::string name = dir.filename().string();
    CAPTURE(name);
    auto cfg = trace::loadConfig((dir / "config.json").string());
    REQUIRE_MESSAGE(bool(cfg), (cfg ? "" : cfg.error().str()));
    auto dtype = trace::checkpointDtype(*cfg);
    REQUIRE(bool(dtype));
    if (*dtype == DType::F32) continue;
    auto tokens = readNpy((dir / "tokens.npy").string());
    auto ref = readNpy((dir / "logits.npy").string());
    auto native = readNpy((dir / "logits-native.npy").string());
    auto checkpoint = Checkpoint::open(dir.string());
    REQUIRE((tokens && ref && native && checkpoint));
    auto got = logitsOf(*cfg, *tokens, *dtype, storedWeights(*checkpoint), *dtype, true);
    REQUIRE_MESSAGE(bool(got), (got ? "" : got.error().str()));
    REQUIRE(got->shape() == ref->shape());
    Distance ours = distance(*got, *ref), theirs = distance(*native, *ref), apart = distance(*got, *native);
    std::ostringstream msg;
    msg << name << " in " << dtypeName(*dtype) << ": to the f32 reference, poot max " << ours.maxAbs << " rms "
        << ours.rms << ", transformers max " << theirs.maxAbs << " rms " << theirs.rms << " (ratios "
        << ours.maxAbs / theirs.maxAbs << ", " << ours.rms / theirs.rms << "); greedy tokens equal to the reference's: "
        << ours.agree << " and " << theirs.agree << " of " << ours.rows << "; poot to transformers' own run: max "
        << apart.maxAbs << " rms " << apart.rms;
    MESSAGE(msg.str());
    CHECK_MESSAGE(ours.maxAbs <= kRatio * theirs.maxAbs, msg.str());
    CHECK_MESSAGE(ours.rms <= kRatio * theirs.rms, msg.str());
    int64_t decisive = 0;
    for (int64_t r = 0; r < ours.rows; ++r) {
      if (margin(*ref, r) <= std::max(ours.rowMax[size_t(r)], theirs.rowMax[size_t(r)])) continue;
      ++decisive;
      CHECK_MESSAGE(ours.rowAgrees[size_t(r)], msg.str() << "; decisive row " << r << " has another greedy token");
    }
    MESSAGE(name << ": " << decisive << " of " << ours.rows << " rows decisive");
    CHECK(decisive * 2 > ours.rows);
    ++compared;
  }
  MESSAGE("compared " << compared << " two-byte fixture(s) under " << fixturesRoot().string());
}

// Compares poot's traced model families with Hugging Face transformers. Every
// folder under test/hf/fixtures/ (or under $POOT_HF_FIXTURES when set) made
// by test/hf/make_fixtures.py holds a tiny model's config.json, its weights
// (model.safetensors), token ids (tokens.npy, i32 [B, L]) and the logits
// transformers computed for them at position 0 (logits.npy, f32 [B, L, V]).
// For each, this test traces the config for prefill (L tokens, capacity the
// next multiple of 16), binds the weights by their checkpoint names, the
// tokens, pos = 0 and zero KV caches, evaluates the graph with the oracle and
// requires max |poot - transformers| <= 1e-3 * max(1, max |transformers|).
// With no fixture folder it passes and says that nothing was compared.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "oracle/interp.h"
#include "oracle/npy.h"
#include "oracle/safetensors.h"
#include "trace/model.h"

namespace fs = std::filesystem;
using namespace poot;

namespace {

constexpr double kTolerance = 1e-3;  // times max(1, max |reference logit|)

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

// Traces, binds and evaluates one fixture; a failure is reported as a
// doctest failure naming the fixture and returns nullopt.
std::optional<Comparison> compare(const fs::path& dir) {
  std::string name = dir.filename().string();
  auto fail = [&](const std::string& what) {
    FAIL_CHECK(name << ": " << what);
    return std::nullopt;
  };
  auto cfg = trace::loadConfig((dir / "config.json").string());
  if (!cfg) return fail(cfg.error().str());
  auto tokens = readNpy((dir / "tokens.npy").string());
  if (!tokens) return fail(tokens.error().str());
  auto ref = readNpy((dir / "logits.npy").string());
  if (!ref) return fail(ref.error().str());
  if (tokens->shape().size() != 2) return fail("tokens.npy must be [B, L]");

  trace::TraceOptions opts;
  opts.phase = trace::Phase::Prefill;
  opts.batch = tokens->shape()[0];
  opts.tokens = tokens->shape()[1];
  opts.capacity = (tokens->shape()[1] + 15) / 16 * 16;
  auto graph = trace::traceModel(*cfg, opts);
  if (!graph) return fail(graph.error().str());

  std::string weightsPath = (dir / "model.safetensors").string();
  auto file = readSafetensors(weightsPath);
  if (!file) return fail(file.error().str());
  auto weights = bindWeights(*graph, *file, weightsPath);
  if (!weights) return fail(weights.error().str());
  std::map<std::string, Tensor> params = std::move(*weights);
  Tensor tok(Type{DType::I32, tokens->shape()});
  for (int64_t i = 0; i < tok.size(); ++i) tok.set(i, tokens->get(i));
  params["tokens"] = std::move(tok);
  Tensor pos(Type{DType::I32, {}});
  pos.set(0, 0);
  params["pos"] = std::move(pos);
  // KV caches start at zero: at pos 0 the mask hides every slot not written.
  for (ValueId id : graph->params)
    if (graph->value(id).storage == Storage::State) params[graph->value(id).name] = Tensor(graph->type(id));

  auto ev = evaluate(*graph, params);
  if (!ev) return fail(ev.error().str());
  auto it = ev->outputs.find("logits");
  if (it == ev->outputs.end()) return fail("the graph has no output 'logits'");
  const Tensor& got = it->second;
  if (got.shape() != ref->shape())
    return fail("logits " + shapeStr(got.shape()) + " but transformers gave " + shapeStr(ref->shape()));
  Comparison c;
  for (int64_t i = 0; i < got.size(); ++i) {
    double r = ref->get(i), g = got.get(i);
    c.maxRef = std::max(c.maxRef, std::abs(r));
    double d = std::abs(g - r);
    if (std::isnan(d)) d = INFINITY;
    c.maxAbs = std::max(c.maxAbs, d);
  }
  return c;
}

}  // namespace

TEST_CASE("hf: traced families match transformers' logits") {
  std::vector<fs::path> dirs = fixtureDirs();
  int compared = 0;
  for (const fs::path& dir : dirs) {
    std::string name = dir.filename().string();
    auto c = compare(dir);
    if (!c) continue;
    double bound = kTolerance * std::max(1.0, c->maxRef);
    std::ostringstream msg;
    msg << name << ": max abs error " << c->maxAbs << ", max rel error " << c->maxAbs / std::max(1.0, c->maxRef)
        << " (max |ref| " << c->maxRef << ", bound " << bound << ")";
    MESSAGE(msg.str());
    CHECK_MESSAGE(c->maxAbs <= bound, msg.str());
    ++compared;
  }
  MESSAGE("compared " << compared << " of " << dirs.size() << " transformers fixture(s) under "
                      << fixturesRoot().string());
}

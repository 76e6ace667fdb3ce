// Helpers shared by the unit tests: the few pieces of set-up and checking that
// several *_test.cpp files need in exactly the same form, so that each test file
// holds only what is particular to it. Here are the paths of the example graphs
// and tiny model configs under the source tree, parse-or-fail and load-or-fail of
// graphs and configs (a failure is a REQUIRE with the diagnostic as its message),
// "f32[1,2]" type parsing, fresh random seeds, random tensors, and the oracle
// comparison of two graphs on the same random parameters (outputs, states and
// validations, within a tolerance the caller names). Everything is inline, in
// namespace poot::testing, and only for test inputs: no error handling beyond
// the doctest assertions.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ir/binary.h"
#include "ir/graph.h"
#include "ir/text.h"
#include "oracle/interp.h"
#include "oracle/random.h"
#include "passes/pass.h"
#include "plan/profile.h"
#include "trace/model.h"

namespace poot::testing {

// A vector's elements as raw bytes, and element i of type T back from them
// (the KIR interpreter's buffers and workgroup memory are bytes).
template <class T>
std::vector<uint8_t> bytesOf(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

template <class T>
T elementAt(const std::vector<uint8_t>& bytes, size_t i) {
  T x;
  std::memcpy(&x, bytes.data() + i * sizeof(T), sizeof(T));
  return x;
}

// The source tree's root, as CMake passes it.
// A 64-bit hash step (v folded into h, then splitmix64's finalizer): the
// kv tests' stand-ins for token-chain hashes and a model's next token.
inline uint64_t mix(uint64_t h, uint64_t v) {
  uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline const std::filesystem::path& sourceDir() {
  static const std::filesystem::path dir = POOT_SOURCE_DIR;
  return dir;
}

// Files in dir whose names start with prefix and end with ext, sorted.
inline std::vector<std::filesystem::path> filesIn(const std::filesystem::path& dir, const std::string& prefix,
                                                  const std::string& ext) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && e.path().extension() == ext) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// examples/graphs/<name>, and every .pg there.
inline std::filesystem::path exampleGraph(const std::string& name) { return sourceDir() / "examples" / "graphs" / name; }
inline std::vector<std::filesystem::path> exampleGraphs() { return filesIn(sourceDir() / "examples" / "graphs", "", ".pg"); }

// examples/models/<name>, and every tiny-*.json there.
inline std::filesystem::path exampleConfig(const std::string& name) { return sourceDir() / "examples" / "models" / name; }
inline std::vector<std::filesystem::path> tinyConfigs() {
  return filesIn(sourceDir() / "examples" / "models", "tiny-", ".json");
}

// "f32[1,2,3]" -> Type; "i32[]" is a scalar.
inline Type ty(const std::string& s) {
  size_t open = s.find('[');
  Type t{*parseDType(s.substr(0, open)), {}};
  size_t i = open + 1;
  while (s[i] != ']') {
    size_t j = s.find_first_of(",]", i);
    t.shape.push_back(std::stoll(s.substr(i, j - i)));
    i = s[j] == ',' ? j + 1 : j;
  }
  return t;
}

// Parses .pg text, which must parse; not verified.
inline Graph parseUnverified(const std::string& text, const std::string& file = "t.pg") {
  auto g = parseGraph(text, file);
  REQUIRE_MESSAGE(bool(g), (g ? "" : g.error().str()));
  return g.take();
}

// Parses .pg text, which must parse and verify.
inline Graph parse(const std::string& text, const std::string& file = "t.pg") {
  Graph g = parseUnverified(text, file);
  auto v = verify(g);
  REQUIRE_MESSAGE(bool(v), (v ? "" : v.error().str()));
  return g;
}

// Loads a graph file (text or binary), which must load and verify.
inline Graph loadGraphFile(const std::filesystem::path& path) {
  auto g = loadGraph(path.string());
  REQUIRE_MESSAGE(bool(g), (g ? "" : g.error().str()));
  return g.take();
}

// Loads examples/models/<name>, which must load.
// A device profile from targets/, e.g. loadTarget("lavapipe").
inline DeviceProfile loadTarget(const std::string& name) {
  auto p = loadProfile((sourceDir() / "targets" / (name + ".yaml")).string());
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  return p.take();
}

// g through the pass pipeline with d's grid and binding limits, as pootc
// compile runs it.
inline void runPasses(Graph& g, const DeviceProfile& d) {
  PassContext ctx;
  for (int i = 0; i < 3; ++i) ctx.gridLimits[i] = d.grid_limits[i];
  ctx.maxBindings = d.max_bindings;
  auto s = runPipeline(g, ctx, {});
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
}

inline trace::ModelConfig loadExampleConfig(const std::string& name) {
  auto cfg = trace::loadConfig(exampleConfig(name).string());
  REQUIRE_MESSAGE(bool(cfg), (cfg ? "" : cfg.error().str()));
  return cfg.take();
}

// Sets POOT_HOST_MEMORY_BYTES (ir/budget.h) for its lifetime, then restores
// what was there.
class HostBudget {
 public:
  explicit HostBudget(const char* bytes) {
    if (const char* old = std::getenv("POOT_HOST_MEMORY_BYTES")) saved_ = old;
    setenv("POOT_HOST_MEMORY_BYTES", bytes, 1);
  }
  ~HostBudget() {
    if (saved_) setenv("POOT_HOST_MEMORY_BYTES", saved_->c_str(), 1);
    else unsetenv("POOT_HOST_MEMORY_BYTES");
  }
  HostBudget(const HostBudget&) = delete;
  HostBudget& operator=(const HostBudget&) = delete;

 private:
  std::optional<std::string> saved_;
};

// A fresh 64-bit seed from the system's entropy source.
inline uint64_t freshSeed() { return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}(); }

// One fresh seed drawn on first use and then kept for the rest of the run.
inline uint64_t runSeed() {
  static const uint64_t seed = std::random_device{}();
  return seed;
}

// Random bytes for any dtype (bools 0 or 1), never all zero.
inline Tensor randomTensor(Type type) {
  static std::mt19937_64 rng{std::random_device{}()};
  Tensor t(std::move(type));
  for (uint8_t& b : t.bytes) b = uint8_t(t.dtype() == DType::Bool ? rng() & 1 : rng());
  t.bytes[0] |= 1;
  return t;
}

// Elements of every parameter of g.
inline int64_t paramElements(const Graph& g) {
  int64_t n = 0;
  for (ValueId p : g.params) n += numel(g.type(p).shape);
  return n;
}

// When an element of `after` matches the element of `before`. NaN always
// matches NaN, and equal values (infinities included) always match.
struct Tolerance {
  enum Kind {
    OfLarger,  // |a - b| <= tol * max(|a|, |b|) + 1e-30
    OfBefore,  // |a - b| <= tol * (1 + |before|)
  };
  Kind kind;
  double tol;

  bool accepts(double before, double after) const {
    if ((std::isnan(before) && std::isnan(after)) || before == after) return true;
    if (kind == OfLarger)
      return std::fabs(before - after) <= tol * std::max(std::fabs(before), std::fabs(after)) + 1e-30;
    return std::abs(after - before) <= tol * (1 + std::abs(before));
  }
};
inline Tolerance relativeToLarger(double rel) { return {Tolerance::OfLarger, rel}; }
inline Tolerance relativeToBefore(double tol) { return {Tolerance::OfBefore, tol}; }

// `after` has the type of `before` and all its elements within tol; the first
// three that are not are reported each.
inline void checkClose(const std::string& what, const Tensor& before, const Tensor& after, Tolerance tol) {
  REQUIRE_MESSAGE(after.type == before.type, what);
  int64_t bad = 0;
  for (int64_t i = 0; i < after.size(); ++i) {
    double b = before.get(i), a = after.get(i);
    if (!tol.accepts(b, a) && ++bad <= 3) FAIL_CHECK(what << " element " << i << ": " << a << " vs " << b);
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " elements differ");
}

// `got` has the type of `want` and each element is within tolOf(i), an
// absolute bound, of want's (equal values, infinities included, always match;
// so does NaN against NaN); the first three that are not are reported each,
// with their bound.
template <class TolOf>
inline void checkWithinEach(const std::string& what, const Tensor& want, const Tensor& got, TolOf tolOf) {
  REQUIRE_MESSAGE(got.type == want.type, what);
  int64_t bad = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    double w = want.get(i), g = got.get(i), tol = tolOf(i);
    bool match = w == g || (std::isnan(w) && std::isnan(g)) || std::fabs(g - w) <= tol;
    if (!match && ++bad <= 3)
      FAIL_CHECK(what << " element " << i << ": " << g << " vs " << w << " (bound " << tol << ")");
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << want.size() << " elements out of bound");
}

// The oracle on both graphs with the same random parameters (drawn from
// `seed` for `before`): the same outputs and states, by name, within tol,
// and the same validations.
// The same names in `want` and `got`, each tensor within tol (checkClose);
// `kind` ("output", "state") labels the failures.
inline void checkSameByName(const char* kind, const std::map<std::string, Tensor>& want,
                            const std::map<std::string, Tensor>& got, Tolerance tol) {
  REQUIRE(want.size() == got.size());
  for (const auto& [name, t] : want) {
    std::string what = std::string(kind) + " " + name;
    REQUIRE_MESSAGE(got.count(name), what);
    checkClose(what, t, got.at(name), tol);
  }
}

inline void checkSameResults(const Graph& before, const Graph& after, uint64_t seed, Tolerance tol) {
  CAPTURE(seed);
  auto params = completeParams(before, {}, seed);
  auto a = evaluate(before, params);
  auto b = evaluate(after, params);
  REQUIRE_MESSAGE(bool(a), (a ? "" : a.error().str()));
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  CHECK(a->validations == b->validations);
  checkSameByName("output", a->outputs, b->outputs, tol);
  checkSameByName("state", a->states, b->states, tol);
}

}  // namespace poot::testing

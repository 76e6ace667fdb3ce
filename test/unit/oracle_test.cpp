// Unit tests of the oracle (lib/oracle: tensor, interp, random). The formed
// attention ops are checked against independent double-precision references
// written here from the contract (never calling the oracle's own code), on
// fresh random data that is never zero; the seed's primitive decomposition is
// checked against the formed Attention eqn; every primitive op is checked on
// small hand-computed cases with exact values; the f16/bf16 conversions on
// known bit patterns; binding errors by their exact messages; the
// command-line binding of slot values; and the parameter generator for
// determinism, ranges and distinctness. Each random test prints its seed when
// it fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/budget.h"
#include "ir/text.h"
#include "oracle/interp.h"
#include "oracle/params.h"
#include "oracle/random.h"
#include "testing.h"

using namespace poot;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

using testing::freshSeed;
using testing::ty;

Tensor T(const std::string& type, std::vector<double> vals) {
  Tensor t(ty(type));
  REQUIRE(int64_t(vals.size()) == t.size());
  for (int64_t i = 0; i < t.size(); ++i) t.set(i, vals[size_t(i)]);
  return t;
}

std::vector<double> vals(const Tensor& t) {
  std::vector<double> out(size_t(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) out[size_t(i)] = t.get(i);
  return out;
}

std::string fmt(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + formatNumber(v[i]);
  return s + "]";
}

// A graph body, "graph t" prepended, which must parse and verify.
Graph parse(const std::string& body) { return testing::parse("graph t\n" + body); }

// Evaluates a graph body ("graph t" is prepended) and returns output `out`
// formatted as "[v0, v1, ...]", or "error: ..." with the diagnostic.
std::string run(const std::string& body, const std::map<std::string, Tensor>& params, const std::string& out = "y") {
  Graph g = parse(body);
  auto ev = evaluate(g, params);
  if (!ev) return ev.error().str();
  return fmt(vals(ev->outputs.at(out)));
}

Evaluation evalOk(const Graph& g, const std::map<std::string, Tensor>& params) {
  auto ev = evaluate(g, params);
  REQUIRE_MESSAGE(bool(ev), (ev ? "" : ev.error().str()));
  return ev.take();
}

// Fresh random floats, magnitude in [0.25, 1], random sign: never zero.
Tensor randomT(const Type& type, std::mt19937& rng) {
  Tensor t(type);
  std::uniform_real_distribution<double> mag(0.25, 1.0);
  for (int64_t i = 0; i < t.size(); ++i) t.set(i, (rng() & 1 ? -1 : 1) * mag(rng));
  return t;
}

Tensor randomInts(const Type& type, int64_t lo, int64_t hi, std::mt19937& rng) {
  Tensor t(type);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  for (int64_t i = 0; i < t.size(); ++i) t.set(i, double(d(rng)));
  return t;
}

// got == want within tol * (1 + |want|) elementwise; NaN must meet NaN.
void checkClose(const Tensor& got, const std::vector<double>& want, double tol = 1e-5) {
  REQUIRE(got.size() == int64_t(want.size()));
  int bad = 0;
  for (int64_t i = 0; i < got.size() && bad < 5; ++i) {
    double g = got.get(i), w = want[size_t(i)];
    bool okv = std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= tol * (1 + std::fabs(w));
    if (!okv) {
      ++bad;
      FAIL_CHECK("element " << i << ": got " << g << ", want " << w);
    }
  }
}

// ---------------------------------------------------------------- attention reference

struct AttnCase {
  int64_t B = 2, Hq = 4, Hkv = 2, Lq = 3, Lk = 9, Dk = 16, Dv = 8;
  int64_t Ds = 0;  // shared key width (key=split)
  int64_t S = 0;   // pool slots (key=paged)
  int64_t Hm = 0;  // mask heads (mask=additive): 1 or Hq
  bool causal = false;  // mask=causal over qpos [B, Lq]
  int64_t window = 0;   // with causal: the window, 0 for none
  bool live = false;
  double scale = 0.25;
  std::optional<double> softcap;
  std::string dtype = "f32";

  int64_t nrep() const { return Hq / Hkv; }
  bool split() const { return Ds > 0; }
  bool paged() const { return S > 0; }
  bool masked() const { return Hm > 0; }
};

std::string dims(std::initializer_list<int64_t> d) { return shapeStr(Shape(d)); }

Graph attnGraph(const AttnCase& c) {
  std::string dt = c.dtype, s;
  s += "input %q : " + dt + dims({c.B, c.Hq, c.Lq, c.Dk}) + "\n";
  std::string ops = "%q, %k";
  if (c.paged()) {
    s += "input %k : " + dt + dims({c.S, c.Hkv, c.Dk}) + "\ninput %v : " + dt + dims({c.S, c.Hkv, c.Dv}) + "\n";
    s += "input %read : i32" + dims({c.B, c.Lk}) + "\n";
  } else {
    s += "input %k : " + dt + dims({c.B, c.Hkv, c.Lk, c.Dk - c.Ds}) + "\n";
    s += "input %v : " + dt + dims({c.B, c.Hkv, c.Lk, c.Dv}) + "\n";
  }
  if (c.split()) s += "input %ks : " + dt + dims({c.B, 1, c.Lk, c.Ds}) + "\n", ops += ", %ks";
  ops += ", %v";
  if (c.paged()) ops += ", %read";
  if (c.masked()) s += "input %mask : " + dt + dims({c.B, c.Hm, c.Lq, c.Lk}) + "\n", ops += ", %mask";
  if (c.causal) s += "input %qpos : i32" + dims({c.B, c.Lq}) + "\n", ops += ", %qpos";
  if (c.live) s += "input %len : i32" + dims({c.B}) + "\n", ops += ", %len";
  std::string mask = c.masked() ? "additive" : c.causal ? "causal" : "none";
  if (c.window) mask += ", window=" + std::to_string(c.window);
  s += "%y = Attention(" + ops + ") {scale=" + formatNumber(c.scale) +
       (c.softcap ? ", softcap=" + formatNumber(*c.softcap) : "") + ", n_rep=" + std::to_string(c.nrep()) +
       ", key=" + (c.split() ? "split" : c.paged() ? "paged" : "dense") + ", mask=" + mask +
       ", bound=" + (c.live ? "live" : "capacity") + "} : " + dt + dims({c.B, c.Hq, c.Lq, c.Dv}) + "\noutput %y\n";
  return parse(s);
}

std::map<std::string, Tensor> attnData(const Graph& g, const AttnCase& c, std::mt19937& rng) {
  std::map<std::string, Tensor> p;
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    if (v.name == "read") p[v.name] = randomInts(v.type, 0, c.S - 1, rng);
    else if (v.name == "len") p[v.name] = randomInts(v.type, 1, c.Lk, rng);
    else if (v.name == "qpos") p[v.name] = randomInts(v.type, -2, c.Lk + 2, rng);
    else p[v.name] = randomT(v.type, rng);
  }
  if (c.masked())  // an ALiBi-like finite bias, with a few keys masked out
    for (int64_t i = 0; i < p["mask"].size(); ++i) p["mask"].set(i, rng() % 5 == 0 ? -kInf : -0.1 * double(rng() % 8));
  return p;
}

// softmax(scores) . values over the keys the row visits, in double. A key
// scoring -inf has weight zero and its value is not read; no finite key: NaN.
template <class ScoreFn, class ValueFn>
void refRow(const std::vector<int64_t>& keys, ScoreFn score, ValueFn value, int64_t Dv, double* out) {
  std::vector<double> s;
  double m = -kInf;
  for (int64_t t : keys) s.push_back(score(t)), m = s.back() > m ? s.back() : m;
  std::vector<double> acc(size_t(Dv), 0.0);
  double l = 0;
  for (size_t j = 0; j < keys.size(); ++j) {
    if (s[j] == -kInf) continue;
    double w = std::exp(s[j] - m);
    l += w;
    for (int64_t e = 0; e < Dv; ++e) acc[size_t(e)] += w * value(keys[j], e);
  }
  for (int64_t e = 0; e < Dv; ++e) out[e] = (m == -kInf) ? kNaN : acc[size_t(e)] / l;
}

double capScore(double s, const std::optional<double>& cap) { return cap ? std::tanh(s / *cap) * *cap : s; }

std::vector<double> refAttention(const AttnCase& c, std::map<std::string, Tensor>& p) {
  std::vector<double> q = vals(p["q"]), k = vals(p["k"]), v = vals(p["v"]);
  std::vector<double> ks = c.split() ? vals(p["ks"]) : std::vector<double>();
  std::vector<double> mask = c.masked() ? vals(p["mask"]) : std::vector<double>();
  std::vector<double> read = c.paged() ? vals(p["read"]) : std::vector<double>();
  std::vector<double> len = c.live ? vals(p["len"]) : std::vector<double>();
  std::vector<double> qpos = c.causal ? vals(p["qpos"]) : std::vector<double>();
  int64_t Dh = c.Dk - c.Ds;
  std::vector<double> out(size_t(c.B * c.Hq * c.Lq * c.Dv));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.Hq; ++h)
      for (int64_t i = 0; i < c.Lq; ++i) {
        int64_t g = h / c.nrep();
        int64_t n = c.live ? std::clamp<int64_t>(int64_t(len[size_t(b)]), 0, c.Lk) : c.Lk;
        std::vector<int64_t> keys;
        for (int64_t t = 0; t < n; ++t) keys.push_back(t);
        auto slot = [&](int64_t t) { return int64_t(read[size_t(b * c.Lk + t)]); };
        auto score = [&](int64_t t) {
          if (c.causal) {
            double pos = qpos[size_t(b * c.Lq + i)];
            if (double(t) > pos || (c.window > 0 && pos - double(t) >= double(c.window))) return -kInf;
          }
          double d = 0;
          for (int64_t e = 0; e < c.Dk; ++e) {
            double kv = c.paged()  ? k[size_t((slot(t) * c.Hkv + g) * c.Dk + e)]
                        : e < Dh   ? k[size_t(((b * c.Hkv + g) * c.Lk + t) * Dh + e)]
                                   : ks[size_t((b * c.Lk + t) * c.Ds + e - Dh)];
            d += q[size_t(((b * c.Hq + h) * c.Lq + i) * c.Dk + e)] * kv;
          }
          double s = capScore(d * c.scale, c.softcap);
          if (c.masked()) s += mask[size_t(((b * c.Hm + (c.Hm == 1 ? 0 : h)) * c.Lq + i) * c.Lk + t)];
          return s;
        };
        auto value = [&](int64_t t, int64_t e) {
          return c.paged() ? v[size_t((slot(t) * c.Hkv + g) * c.Dv + e)] : v[size_t(((b * c.Hkv + g) * c.Lk + t) * c.Dv + e)];
        };
        refRow(keys, score, value, c.Dv, out.data() + ((b * c.Hq + h) * c.Lq + i) * c.Dv);
      }
  return out;
}

// Builds, fills with fresh data (then `tweak`), evaluates and compares.
template <class Tweak>
void checkAttention(const AttnCase& c, Tweak tweak) {
  uint32_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  Graph g = attnGraph(c);
  auto p = attnData(g, c, rng);
  tweak(p, rng);
  Evaluation ev = evalOk(g, p);
  checkClose(ev.outputs.at("y"), refAttention(c, p));
}
void checkAttention(const AttnCase& c) {
  checkAttention(c, [](auto&, auto&) {});
}

}  // namespace

// ================================================================ tensors

TEST_CASE("oracle: f16 conversion rounds to nearest even on known bit patterns") {
  CHECK(floatToHalf(1.0f) == 0x3c00);
  CHECK(floatToHalf(-2.0f) == 0xc000);
  CHECK(floatToHalf(-0.0f) == 0x8000);
  CHECK(floatToHalf(65504.0f) == 0x7bff);
  CHECK(floatToHalf(65519.0f) == 0x7bff);                // below the tie to inf
  CHECK(floatToHalf(65520.0f) == 0x7c00);                // the tie rounds to even: inf
  CHECK(floatToHalf(1.0f + 0x1p-11f) == 0x3c00);         // tie, down to even
  CHECK(floatToHalf(1.0f + 3 * 0x1p-11f) == 0x3c02);     // tie, up to even
  CHECK(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);  // above the tie
  CHECK(floatToHalf(0x1p-24f) == 0x0001);                // smallest subnormal
  CHECK(floatToHalf(0x1p-25f) == 0x0000);                // tie to even zero
  CHECK(floatToHalf(3 * 0x1p-26f) == 0x0001);            // above the tie
  CHECK(floatToHalf(0x1p-14f - 0x1p-25f) == 0x0400);     // rounds up into the normals
  CHECK(floatToHalf(1e-30f) == 0x0000);
  CHECK(floatToHalf(std::numeric_limits<float>::infinity()) == 0x7c00);
  uint16_t n = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  CHECK((n & 0x7c00) == 0x7c00);
  CHECK((n & 0x03ff) != 0);
  CHECK(halfToFloat(0x0001) == 0x1p-24f);
  CHECK(halfToFloat(0x7bff) == 65504.0f);
  CHECK(halfToFloat(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(halfToFloat(0x7e00)));
  CHECK(halfToFloat(0x3555) == 0.333251953125f);
  for (uint32_t h = 0; h < 0x10000; ++h)  // every finite half survives the round trip
    if ((h & 0x7c00) != 0x7c00) CHECK_MESSAGE(floatToHalf(halfToFloat(uint16_t(h))) == h, h);
}

TEST_CASE("oracle: bf16 conversion rounds to nearest even on known bit patterns") {
  CHECK(floatToBf16(1.0f) == 0x3f80);
  CHECK(floatToBf16(1.0f + 0x1p-8f) == 0x3f80);      // tie, down to even
  CHECK(floatToBf16(1.0f + 3 * 0x1p-8f) == 0x3f82);  // tie, up to even
  CHECK(floatToBf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81);
  CHECK(floatToBf16(-3.0f) == 0xc040);
  CHECK(floatToBf16(std::numeric_limits<float>::max()) == 0x7f80);  // rounds to inf
  uint16_t n = floatToBf16(std::numeric_limits<float>::quiet_NaN());
  CHECK(std::isnan(bf16ToFloat(n)));
  CHECK(std::isnan(bf16ToFloat(floatToBf16(std::bit_cast<float>(0x7f800001u)))));  // a NaN whose payload is low
  CHECK(bf16ToFloat(0x4049) == 3.140625f);
}

TEST_CASE("oracle: Tensor set and get") {
  // A double just above an f16/bf16 tie, which a plain narrowing to f32 would
  // move onto the tie, still rounds up.
  Tensor h(ty("f16[2]")), b(ty("bf16[1]"));
  h.set(0, 1.0 + 0x1p-11 + 0x1p-40);
  h.set(1, 1.0 + 0x1p-11);
  b.set(0, 1.0 + 0x1p-8 + 0x1p-30);
  CHECK(h.bytes == std::vector<uint8_t>{0x01, 0x3c, 0x00, 0x3c});
  CHECK(b.bytes == std::vector<uint8_t>{0x81, 0x3f});
  CHECK(fmt(vals(T("i32[6]", {-2.7, 2.7, 1e10, -1e10, kNaN, kInf}))) == "[-2, 2, 2147483647, -2147483648, 0, 2147483647]");
  Tensor big = T("i64[2]", {1e30, -0.5});
  int64_t i64s[2];
  std::memcpy(i64s, big.bytes.data(), 16);
  CHECK(i64s[0] == std::numeric_limits<int64_t>::max());
  CHECK(i64s[1] == 0);
  CHECK(fmt(vals(T("bool[4]", {0, 0.5, -1, kNaN}))) == "[0, 1, 1, 1]");
  CHECK(fmt(vals(T("f32[2]", {0.1, -kInf}))) == "[0.10000000149011612, -inf]");
}

// ================================================================ primitive ops

TEST_CASE("oracle: creation and data movement on hand-checked cases") {
  CHECK(run("%y = Iota() {axis=1} : i32[2,3]\noutput %y\n", {}) == "[0, 1, 2, 0, 1, 2]");
  CHECK(run("%y = Iota() {axis=-2} : f16[3,2]\noutput %y\n", {}) == "[0, 0, 1, 1, 2, 2]");
  CHECK(run("%y = Constant() {value=[1.5]} : f32[3]\noutput %y\n", {}) == "[1.5, 1.5, 1.5]");
  CHECK(run("%y = Constant() {value=[1, -2, 0.1]} : bf16[3]\noutput %y\n", {}) == "[1, -2, 0.10009765625]");
  Tensor x23 = T("f32[2,3]", {1, 2, 3, 4, 5, 6});
  CHECK(run("input %x : f32[2,3]\n%y = Reshape(%x) : f32[3,2]\noutput %y\n", {{"x", x23}}) == "[1, 2, 3, 4, 5, 6]");
  CHECK(run("input %x : f32[2,3]\n%y = Transpose(%x) {perm=[1, 0]} : f32[3,2]\noutput %y\n", {{"x", x23}}) ==
        "[1, 4, 2, 5, 3, 6]");
  CHECK(run("input %x : f32[2,1]\n%y = Broadcast(%x) : f32[2,2,3]\noutput %y\n", {{"x", T("f32[2,1]", {7, 8})}}) ==
        "[7, 7, 7, 8, 8, 8, 7, 7, 7, 8, 8, 8]");
  CHECK(run("input %x : f32[2,3]\n%y = Slice(%x) {axis=1, start=1, limit=3} : f32[2,2]\noutput %y\n", {{"x", x23}}) ==
        "[2, 3, 5, 6]");
  CHECK(run("input %x : f32[2,3]\n%y = Concat(%x, %x) {axis=1} : f32[2,6]\noutput %y\n", {{"x", x23}}) ==
        "[1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6]");
  CHECK(run("input %x : f32[2,3]\n%y = Concat(%x, %x) {axis=0} : f32[4,3]\noutput %y\n", {{"x", x23}}) ==
        "[1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6]");
  // Gather: the index shape replaces the gathered axis.
  CHECK(run("input %x : f32[2,3]\ninput %i : i32[2,2]\n%y = Gather(%x, %i) {axis=1} : f32[2,2,2]\noutput %y\n",
            {{"x", x23}, {"i", T("i32[2,2]", {2, 0, 1, 1})}}) == "[3, 1, 2, 2, 6, 4, 5, 5]");
  CHECK(run("input %x : f32[2,3]\ninput %i : i64[]\n%y = Gather(%x, %i) {axis=0} : f32[3]\noutput %y\n",
            {{"x", x23}, {"i", T("i64[]", {1})}}) == "[4, 5, 6]");
  // DynamicSlice and DynamicUpdateSlice clamp the start so the window fits.
  std::string ds = "input %x : f32[2,3]\ninput %s : i32[]\n%y = DynamicSlice(%x, %s) {axis=1, size=2} : f32[2,2]\noutput %y\n";
  CHECK(run(ds, {{"x", x23}, {"s", T("i32[]", {1})}}) == "[2, 3, 5, 6]");
  CHECK(run(ds, {{"x", x23}, {"s", T("i32[]", {7})}}) == "[2, 3, 5, 6]");
  CHECK(run(ds, {{"x", x23}, {"s", T("i32[]", {-3})}}) == "[1, 2, 4, 5]");
  std::string dus = "input %x : f32[2,3]\ninput %u : f32[2,2]\ninput %s : i64[1]\n"
                    "%y = DynamicUpdateSlice(%x, %u, %s) {axis=1} : f32[2,3]\noutput %y\n";
  Tensor u = T("f32[2,2]", {-1, -2, -3, -4});
  CHECK(run(dus, {{"x", x23}, {"u", u}, {"s", T("i64[1]", {0})}}) == "[-1, -2, 3, -3, -4, 6]");
  CHECK(run(dus, {{"x", x23}, {"u", u}, {"s", T("i64[1]", {5})}}) == "[1, -1, -2, 4, -3, -4]");
  // Convert: float to int truncates and saturates, NaN -> 0; int to int wraps.
  CHECK(run("input %x : f32[5]\n%y = Convert(%x) : i32[5]\noutput %y\n", {{"x", T("f32[5]", {-2.7, 2.7, 3e9, kNaN, -kInf})}}) ==
        "[-2, 2, 2147483647, 0, -2147483648]");
  CHECK(run("input %x : i64[2]\n%y = Convert(%x) : i32[2]\noutput %y\n", {{"x", T("i64[2]", {4294967297.0, -1})}}) ==
        "[1, -1]");
  CHECK(run("input %x : f32[3]\n%y = Convert(%x) : bool[3]\noutput %y\n", {{"x", T("f32[3]", {0, -0.0, 0.25})}}) ==
        "[0, 0, 1]");
  CHECK(run("input %x : f32[2]\n%y = Convert(%x) : f16[2]\noutput %y\n", {{"x", T("f32[2]", {1.0 + 0x1p-11, 70000})}}) ==
        "[1, inf]");
  CHECK(run("input %x : bool[2]\n%y = Convert(%x) : f32[2]\noutput %y\n", {{"x", T("bool[2]", {1, 0})}}) == "[1, 0]");
}

TEST_CASE("oracle: ScatterUpdate skips -1, lets the later row win, and refuses other indices") {
  std::string g = "input %x : i32[4,2]\ninput %i : i32[4]\ninput %u : i32[4,2]\n"
                  "%y = ScatterUpdate(%x, %i, %u) : i32[4,2]\noutput %y\n";
  Tensor x = T("i32[4,2]", {0, 1, 2, 3, 4, 5, 6, 7}), u = T("i32[4,2]", {10, 11, 20, 21, 30, 31, 40, 41});
  CHECK(run(g, {{"x", x}, {"i", T("i32[4]", {2, -1, 0, 2})}, {"u", u}}) == "[30, 31, 2, 3, 40, 41, 6, 7]");
  CHECK(run(g, {{"x", x}, {"i", T("i32[4]", {-1, -1, -1, -1})}, {"u", u}}) == "[0, 1, 2, 3, 4, 5, 6, 7]");
  CHECK(run(g, {{"x", x}, {"i", T("i32[4]", {0, 4, 1, 1})}, {"u", u}}) ==
        "t.pg:5:6: error: ScatterUpdate %y: index 4 is outside [0, 4) and is not -1");
  CHECK(run(g, {{"x", x}, {"i", T("i32[4]", {0, -2, 1, 1})}, {"u", u}}) ==
        "t.pg:5:6: error: ScatterUpdate %y: index -2 is outside [0, 4) and is not -1");
}

TEST_CASE("oracle: a Gather index out of range is a range error at the eqn") {
  std::string g = "input %x : f32[4,2]\ninput %i : i32[3]\n%y = Gather(%x, %i) {axis=0} : f32[3,2]\noutput %y\n";
  Graph graph = parse(g);
  auto ev = evaluate(graph, {{"x", T("f32[4,2]", {1, 2, 3, 4, 5, 6, 7, 8})}, {"i", T("i32[3]", {0, 4, 1})}});
  REQUIRE(!ev);
  CHECK(ev.error().kind == ErrorKind::Range);
  CHECK(ev.error().str() == "t.pg:4:6: error: Gather %y: index 4 is outside [0, 4)");
  CHECK(run(g, {{"x", T("f32[4,2]", {1, 2, 3, 4, 5, 6, 7, 8})}, {"i", T("i32[3]", {0, -1, 1})}}) ==
        "t.pg:4:6: error: Gather %y: index -1 is outside [0, 4)");
}

TEST_CASE("oracle: elementwise ops broadcast, integers wrap, division by zero is an error") {
  auto bin = [](const std::string& op, const std::string& ta, const std::string& tb, const std::string& tr) {
    return "input %a : " + ta + "\ninput %b : " + tb + "\n%y = " + op + "(%a, %b) : " + tr + "\noutput %y\n";
  };
  Tensor a = T("f32[2,1]", {1, 2}), b = T("f32[3]", {10, 20, 30});
  CHECK(run(bin("Add", "f32[2,1]", "f32[3]", "f32[2,3]"), {{"a", a}, {"b", b}}) == "[11, 21, 31, 12, 22, 32]");
  CHECK(run(bin("Sub", "f32[2,1]", "f32[3]", "f32[2,3]"), {{"a", a}, {"b", b}}) == "[-9, -19, -29, -8, -18, -28]");
  CHECK(run(bin("Div", "f32[3]", "f32[3]", "f32[3]"), {{"a", T("f32[3]", {1, -1, 0})}, {"b", T("f32[3]", {0, 0, 0})}}) ==
        "[inf, -inf, nan]");
  CHECK(run(bin("Max", "f32[3]", "f32[3]", "f32[3]"), {{"a", T("f32[3]", {1, kNaN, 3})}, {"b", T("f32[3]", {2, 0, kNaN})}}) ==
        "[2, nan, nan]");
  CHECK(run(bin("Min", "f32[3]", "f32[3]", "f32[3]"), {{"a", T("f32[3]", {1, kNaN, -kInf})}, {"b", T("f32[3]", {2, 0, 5})}}) ==
        "[1, nan, -inf]");
  CHECK(run(bin("Pow", "f32[2]", "f32[2]", "f32[2]"), {{"a", T("f32[2]", {2, 9})}, {"b", T("f32[2]", {10, 0.5})}}) == "[1024, 3]");
  // Integer math in int64, wrapped to i32; division truncates toward zero.
  Tensor ia = T("i32[4]", {2147483647, -7, 7, -2147483648.0}), ib = T("i32[4]", {1, 2, -2, -1});
  CHECK(run(bin("Add", "i32[4]", "i32[4]", "i32[4]"), {{"a", ia}, {"b", ib}}) == "[-2147483648, -5, 5, 2147483647]");
  CHECK(run(bin("Mul", "i32[4]", "i32[4]", "i32[4]"), {{"a", ia}, {"b", ib}}) == "[2147483647, -14, -14, -2147483648]");
  CHECK(run(bin("Div", "i32[4]", "i32[4]", "i32[4]"), {{"a", ia}, {"b", ib}}) == "[2147483647, -3, -3, -2147483648]");
  CHECK(run(bin("Max", "i32[4]", "i32[4]", "i32[4]"), {{"a", ia}, {"b", ib}}) == "[2147483647, 2, 7, -1]");
  CHECK(run(bin("Div", "i64[2]", "i64[]", "i64[2]"), {{"a", T("i64[2]", {1, 2})}, {"b", T("i64[]", {0})}}) ==
        "t.pg:4:6: error: Div %y: integer division by zero");
  CHECK(run(bin("And", "bool[2,1]", "bool[2]", "bool[2,2]"), {{"a", T("bool[2,1]", {0, 1})}, {"b", T("bool[2]", {0, 1})}}) ==
        "[0, 0, 0, 1]");
  CHECK(run(bin("Or", "bool[2]", "bool[2]", "bool[2]"), {{"a", T("bool[2]", {0, 1})}, {"b", T("bool[2]", {0, 0})}}) == "[0, 1]");
  // Comparisons: IEEE, so NaN is unordered and unequal to itself.
  Tensor ca = T("f32[4]", {1, kNaN, 2, -0.0}), cb = T("f32[4]", {2, kNaN, 2, 0});
  CHECK(run(bin("Lt", "f32[4]", "f32[4]", "bool[4]"), {{"a", ca}, {"b", cb}}) == "[1, 0, 0, 0]");
  CHECK(run(bin("Le", "f32[4]", "f32[4]", "bool[4]"), {{"a", ca}, {"b", cb}}) == "[1, 0, 1, 1]");
  CHECK(run(bin("Gt", "f32[4]", "f32[4]", "bool[4]"), {{"a", ca}, {"b", cb}}) == "[0, 0, 0, 0]");
  CHECK(run(bin("Ge", "f32[4]", "f32[4]", "bool[4]"), {{"a", ca}, {"b", cb}}) == "[0, 0, 1, 1]");
  CHECK(run(bin("Eq", "f32[4]", "f32[4]", "bool[4]"), {{"a", ca}, {"b", cb}}) == "[0, 0, 1, 1]");
  CHECK(run(bin("Ne", "f32[4]", "f32[4]", "bool[4]"), {{"a", ca}, {"b", cb}}) == "[1, 1, 0, 0]");
  CHECK(run(bin("Lt", "i64[2]", "i64[1]", "bool[2]"), {{"a", T("i64[2]", {-5, 5})}, {"b", T("i64[1]", {0})}}) == "[1, 0]");
  CHECK(run(bin("Eq", "bool[2]", "bool[2]", "bool[2]"), {{"a", T("bool[2]", {1, 0})}, {"b", T("bool[2]", {1, 1})}}) == "[1, 0]");
  // Select broadcasts all three operands.
  CHECK(run("input %c : bool[2,1]\ninput %a : f32[3]\ninput %b : f32[]\n%y = Select(%c, %a, %b) : f32[2,3]\noutput %y\n",
            {{"c", T("bool[2,1]", {1, 0})}, {"a", T("f32[3]", {1, 2, 3})}, {"b", T("f32[]", {-kInf})}}) ==
        "[1, 2, 3, -inf, -inf, -inf]");
  // Unary integer ops wrap; Not on bool.
  CHECK(run("input %x : i32[3]\n%y = Neg(%x) : i32[3]\noutput %y\n", {{"x", T("i32[3]", {5, -2147483648.0, 0})}}) ==
        "[-5, -2147483648, 0]");
  CHECK(run("input %x : i64[2]\n%y = Abs(%x) : i64[2]\noutput %y\n", {{"x", T("i64[2]", {-5, 3})}}) == "[5, 3]");
  CHECK(run("input %x : bool[2]\n%y = Not(%x) : bool[2]\noutput %y\n", {{"x", T("bool[2]", {1, 0})}}) == "[0, 1]");
}

TEST_CASE("oracle: float unary ops are the f32 functions") {
  uint32_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  struct Row {
    const char* op;
    float (*f)(float);
  };
  const Row rows[] = {
      {"Exp", [](float x) { return std::exp(x); }},     {"Log", [](float x) { return std::log(x); }},
      {"Neg", [](float x) { return -x; }},              {"Sqrt", [](float x) { return std::sqrt(x); }},
      {"Rsqrt", [](float x) { return 1.0f / std::sqrt(x); }}, {"Recip", [](float x) { return 1.0f / x; }},
      {"Tanh", [](float x) { return std::tanh(x); }},   {"Sin", [](float x) { return std::sin(x); }},
      {"Cos", [](float x) { return std::cos(x); }},     {"Abs", [](float x) { return std::fabs(x); }},
      {"Erf", [](float x) { return std::erf(x); }},     {"Sigmoid", [](float x) { return 1.0f / (1.0f + std::exp(-x)); }},
  };
  Tensor x = randomT(ty("f32[64]"), rng);
  for (int64_t i = 0; i < x.size(); ++i) x.set(i, std::fabs(x.get(i)) * 4);  // positive, so Log and Sqrt are defined
  for (const Row& r : rows) {
    CAPTURE(r.op);
    Graph g = parse(std::string("input %x : f32[64]\n%y = ") + r.op + "(%x) : f32[64]\noutput %y\n");
    Tensor y = evalOk(g, {{"x", x}}).outputs.at("y");
    for (int64_t i = 0; i < x.size(); ++i) CHECK(y.get(i) == double(r.f(float(x.get(i)))));
  }
  CHECK(run("input %x : f32[3]\n%y = Log(%x) : f32[3]\noutput %y\n", {{"x", T("f32[3]", {0, -1, kInf})}}) == "[-inf, nan, inf]");
}

TEST_CASE("oracle: two-byte floats compute in f32 and round each op's result") {
  // 1 + 2^-11 is a tie in f16: rounds to 1; 1 + 3 * 2^-11 rounds up to 1 + 2^-9.
  std::string add = "input %a : f16[2]\ninput %b : f16[2]\n%y = Add(%a, %b) : f16[2]\noutput %y\n";
  CHECK(run(add, {{"a", T("f16[2]", {1, 1})}, {"b", T("f16[2]", {0x1p-11, 3 * 0x1p-11})}}) == "[1, 1.001953125]");
  // The f32 accumulator of a bf16 MatMul keeps four 2^-9 steps that bf16 would
  // drop one by one: 1 + 2^-7 is exact in bf16.
  std::string mm = "input %a : bf16[1,5]\ninput %b : bf16[5,1]\n%y = MatMul(%a, %b) : bf16[1,1]\noutput %y\n";
  CHECK(run(mm, {{"a", T("bf16[1,5]", {1, 0x1p-9, 0x1p-9, 0x1p-9, 0x1p-9})}, {"b", T("bf16[5,1]", {1, 1, 1, 1, 1})}}) ==
        "[1.0078125]");
  // A bf16 ReduceSum likewise.
  CHECK(run("input %a : bf16[5]\n%y = ReduceSum(%a) {axis=0, keepdim=false} : bf16[]\noutput %y\n",
            {{"a", T("bf16[5]", {1, 0x1p-9, 0x1p-9, 0x1p-9, 0x1p-9})}}) == "[1.0078125]");
}

TEST_CASE("oracle: reductions run in index order, keep or drop the axis, and propagate NaN") {
  Tensor x = T("f32[2,3,2]", {1, 2, 3, 4, 5, 6, -1, -2, -3, -4, -5, -6});
  auto red = [](const std::string& op, const std::string& axis, bool keep, const std::string& rt) {
    return "input %x : f32[2,3,2]\n%y = " + op + "(%x) {axis=" + axis + ", keepdim=" + (keep ? "true" : "false") + "} : " + rt +
           "\noutput %y\n";
  };
  CHECK(run(red("ReduceSum", "1", false, "f32[2,2]"), {{"x", x}}) == "[9, 12, -9, -12]");
  CHECK(run(red("ReduceSum", "-1", true, "f32[2,3,1]"), {{"x", x}}) == "[3, 7, 11, -3, -7, -11]");
  CHECK(run(red("ReduceMax", "1", true, "f32[2,1,2]"), {{"x", x}}) == "[5, 6, -1, -2]");
  CHECK(run(red("ReduceMin", "0", false, "f32[3,2]"), {{"x", x}}) == "[-1, -2, -3, -4, -5, -6]");
  Tensor n = T("f32[2,3,2]", {1, kNaN, 3, 4, 5, 6, -kInf, -2, kNaN, -4, -5, -6});
  CHECK(run(red("ReduceMax", "1", false, "f32[2,2]"), {{"x", n}}) == "[5, nan, nan, -2]");
  CHECK(run(red("ReduceMin", "1", false, "f32[2,2]"), {{"x", n}}) == "[1, nan, nan, -6]");
  // Sequential f32 sum: 2^24 + 1 + 1 stays 2^24 in increasing order.
  CHECK(run("input %x : f32[3]\n%y = ReduceSum(%x) {axis=0, keepdim=false} : f32[]\noutput %y\n",
            {{"x", T("f32[3]", {16777216, 1, 1})}}) == "[16777216]");
  CHECK(run("input %x : i32[3]\n%y = ReduceSum(%x) {axis=0, keepdim=false} : i32[]\noutput %y\n",
            {{"x", T("i32[3]", {2147483647, 1, 5})}}) == "[-2147483643]");
  CHECK(run("input %x : i64[3]\n%y = ReduceMax(%x) {axis=0, keepdim=false} : i64[]\noutput %y\n",
            {{"x", T("i64[3]", {-7, 3, 2})}}) == "[3]");
}

TEST_CASE("oracle: MatMul on hand-checked and batched cases") {
  Tensor a = T("f32[2,3]", {1, 2, 3, 4, 5, 6}), b = T("f32[3,2]", {1, 0, 0, 1, 1, 1});
  CHECK(run("input %a : f32[2,3]\ninput %b : f32[3,2]\n%y = MatMul(%a, %b) : f32[2,2]\noutput %y\n", {{"a", a}, {"b", b}}) ==
        "[4, 5, 10, 11]");
  // Batch axes broadcast: a [2,1,1,2] x b [3,2,1] -> [2,3,1,1].
  CHECK(run("input %a : i32[2,1,1,2]\ninput %b : i32[3,2,1]\n%y = MatMul(%a, %b) : i32[2,3,1,1]\noutput %y\n",
            {{"a", T("i32[2,1,1,2]", {1, 2, 3, 4})}, {"b", T("i32[3,2,1]", {1, 1, 10, 0, 0, 100})}}) ==
        "[3, 10, 200, 7, 30, 400]");
  // Summed in increasing k: (2^24 + 1) + 1 loses both ones, unlike 2^24 + 2.
  CHECK(run("input %a : f32[1,3]\ninput %b : f32[3,1]\n%y = MatMul(%a, %b) : f32[1,1]\noutput %y\n",
            {{"a", T("f32[1,3]", {16777216, 1, 1})}, {"b", T("f32[3,1]", {1, 1, 1})}}) == "[16777216]");
}

TEST_CASE("oracle: TopK orders descending, NaN first, ties by lower index") {
  std::string g = "input %x : f32[2,5]\n%v, %i = TopK(%x) {k=3} : f32[2,3], i32[2,3]\noutput %v\noutput %i\n";
  std::map<std::string, Tensor> p{{"x", T("f32[2,5]", {1, 3, 3, kNaN, 2, 0, -1, 0, -0.0, 5})}};
  CHECK(run(g, p, "v") == "[nan, 3, 3, 5, 0, 0]");
  CHECK(run(g, p, "i") == "[3, 1, 2, 4, 0, 2]");
  std::string gi = "input %x : i64[4]\n%v, %i = TopK(%x) {k=4} : i64[4], i32[4]\noutput %v\noutput %i\n";
  CHECK(run(gi, {{"x", T("i64[4]", {2, 7, 2, -1})}}, "i") == "[1, 0, 2, 3]");
}

TEST_CASE("oracle: IndexGuard clamps and its witness says whether it had to") {
  std::string g = "input %x : i32[3]\n%c, %ok = IndexGuard(%x) {lo=0, hi=4} : i32[3], bool[]\noutput %c\nvalidation %ok\n";
  Graph graph = parse(g);
  Evaluation in = evalOk(graph, {{"x", T("i32[3]", {0, 4, 2})}});
  CHECK(in.valid());
  CHECK(in.validations.at("ok"));
  CHECK(fmt(vals(in.outputs.at("c"))) == "[0, 4, 2]");
  Evaluation out = evalOk(graph, {{"x", T("i32[3]", {-1, 9, 2})}});
  CHECK(!out.valid());
  CHECK(!out.validations.at("ok"));
  CHECK(fmt(vals(out.outputs.at("c"))) == "[0, 4, 2]");
  Evaluation high = evalOk(graph, {{"x", T("i32[3]", {0, 5, 4})}});
  CHECK(!high.validations.at("ok"));
  CHECK(fmt(vals(high.outputs.at("c"))) == "[0, 4, 4]");
}

TEST_CASE("oracle: an evaluation reports states, outputs and every value") {
  Graph g = parse("input %x : f32[2]\nstate %s : f32[2]\n%n = Add(%s, %x) : f32[2]\n%y = Neg(%n) : f32[2]\n"
                  "output %y\nstate_out %s = %n\n");
  Evaluation ev = evalOk(g, {{"x", T("f32[2]", {1, 2})}, {"s", T("f32[2]", {10, 20})}});
  CHECK(fmt(vals(ev.states.at("s"))) == "[11, 22]");
  CHECK(fmt(vals(ev.outputs.at("y"))) == "[-11, -22]");
  REQUIRE(ev.values.size() == g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) CHECK(ev.values[i].type == g.values[i].type);
  CHECK(ev.validations.empty());
  CHECK(ev.valid());
}

TEST_CASE("oracle: bind errors name the parameter, before any eqn runs") {
  std::string body = "input %x : f32[2,4]\nslot %pos : i32[] range [0, 31]\nslot %read : i64[4] range [0, 7]\n"
                     "input %i : i32[]\n%g = Gather(%x, %i) {axis=0} : f32[4]\noutput %g\noutput %pos\noutput %read\n";
  Graph g = parse(body);
  std::map<std::string, Tensor> good{{"x", T("f32[2,4]", {1, 2, 3, 4, 5, 6, 7, 8})},
                                     {"pos", T("i32[]", {31})},
                                     {"read", T("i64[4]", {0, 7, 3, 3})},
                                     {"i", T("i32[]", {9})}};  // out of range: only an eqn would see it
  auto err = [&](std::map<std::string, Tensor> p) {
    auto ev = evaluate(g, p);
    REQUIRE(!ev);
    return std::make_pair(ev.error().kind, ev.error().str());
  };
  auto p = good;
  p.erase("x");
  CHECK(err(p) == std::make_pair(ErrorKind::Bind, std::string("error: input %x is not bound")));
  p = good;
  p["x"] = T("f32[4,2]", {1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(err(p) == std::make_pair(ErrorKind::Bind, std::string("error: input %x is bound to f32[4,2] but the graph declares f32[2,4]")));
  p["x"] = T("f32[2,3]", {1, 2, 3, 4, 5, 6});
  CHECK(err(p) == std::make_pair(ErrorKind::Bind, std::string("error: input %x is bound to f32[2,3] but the graph declares f32[2,4]")));
  p = good;
  p["pos"] = T("i64[]", {3});
  CHECK(err(p) == std::make_pair(ErrorKind::Bind, std::string("error: slot %pos is bound to i64[] but the graph declares i32[]")));
  p = good;
  p["pos"] = T("i32[]", {32});
  CHECK(err(p) == std::make_pair(ErrorKind::Range, std::string("error: slot %pos has value 32 outside its range [0, 31]")));
  p = good;
  p["read"] = T("i64[4]", {0, 1, -1, 9});
  CHECK(err(p) ==
        std::make_pair(ErrorKind::Range, std::string("error: slot %read has value -1 at element 2 outside its range [0, 7]")));
  CHECK(err(good) == std::make_pair(ErrorKind::Range, std::string("t.pg:6:6: error: Gather %g: index 9 is outside [0, 2)")));
  good["i"] = T("i32[]", {1});
  CHECK(fmt(vals(evalOk(g, good).outputs.at("g"))) == "[5, 6, 7, 8]");
}

// ================================================================ attention

TEST_CASE("oracle: Attention matches a double reference: GQA with n_rep 1, 2 and 4") {
  for (int64_t nrep : {1, 2, 4}) {
    CAPTURE(nrep);
    AttnCase c;
    c.Hkv = 2, c.Hq = 2 * nrep, c.Dv = 12;
    checkAttention(c);
  }
}

TEST_CASE("oracle: Attention matches a double reference: additive masks, per head (ALiBi) and shared") {
  for (int64_t hm : {4, 1}) {
    CAPTURE(hm);
    AttnCase c;
    c.Hm = hm;
    checkAttention(c);
  }
}

TEST_CASE("oracle: Attention matches a double reference: causal masks, windowed, per batch row") {
  for (int64_t window : {0, 1, 3, 20}) {
    CAPTURE(window);
    AttnCase c;
    c.causal = true, c.window = window, c.Lk = 11, c.Lq = 4;
    checkAttention(c);
    c.live = true, c.softcap = 2.0, c.Ds = 4;
    checkAttention(c);
    c.live = false, c.Ds = 0, c.S = 29;
    checkAttention(c);
  }
}

// mask=causal is the additive mask that is 0 where t <= qpos[b, i] (and
// qpos[b, i] - t < window) and -inf elsewhere, bit for bit wherever every
// score is finite: offsets, a position past the keys, negative positions
// (the row sees nothing: NaN), windows that hide everything.
TEST_CASE("oracle: mask=causal gives exactly the 0 / -inf additive mask of its positions") {
  const int64_t B = 2, Hq = 4, Lq = 5, Lk = 13, D = 8;
  for (int64_t window : {0, 1, 4, 100}) {
    CAPTURE(window);
    std::string w = window ? ", window=" + std::to_string(window) : "";
    std::string attrs = "{scale=0.3, n_rep=2, key=dense, mask=";
    Graph g = parse("input %q : f32" + dims({B, Hq, Lq, D}) + "\ninput %k : f32" + dims({B, 2, Lk, D}) +
                    "\ninput %v : f32" + dims({B, 2, Lk, D}) + "\ninput %qpos : i32" + dims({B, Lq}) +
                    "\ninput %mask : f32" + dims({B, 1, Lq, Lk}) + "\n%c = Attention(%q, %k, %v, %qpos) " + attrs +
                    "causal" + w + ", bound=capacity} : f32" + dims({B, Hq, Lq, D}) +
                    "\n%a = Attention(%q, %k, %v, %mask) " + attrs + "additive, bound=capacity} : f32" +
                    dims({B, Hq, Lq, D}) + "\noutput %c\noutput %a\n");
    uint32_t seed = freshSeed();
    CAPTURE(seed);
    std::mt19937 rng(seed);
    std::map<std::string, Tensor> p;
    for (ValueId id : g.params) p[g.value(id).name] = randomT(g.value(id).type, rng);
    // Row 0: 3 + i (an offset); row 1: -1, -7, 0, Lk - 1, Lk + 40.
    std::vector<double> pos = {3, 4, 5, 6, 7, -1, -7, 0, double(Lk - 1), double(Lk + 40)};
    p["qpos"] = T("i32" + dims({B, Lq}), pos);
    for (int64_t r = 0; r < B * Lq; ++r)
      for (int64_t t = 0; t < Lk; ++t) {
        bool visible = double(t) <= pos[size_t(r)] && (window == 0 || pos[size_t(r)] - double(t) < double(window));
        p["mask"].set(r * Lk + t, visible ? 0.0 : -kInf);
      }
    Evaluation ev = evalOk(g, p);
    const Tensor &c = ev.outputs.at("c"), &a = ev.outputs.at("a");
    int64_t nan = 0;
    for (int64_t i = 0; i < c.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(a.get(i))) {
        CHECK(std::isnan(c.get(i)));
        ++nan;
      } else {
        CHECK(c.get(i) == a.get(i));
      }
    }
    // Rows at -1 and -7 see nothing in every head; so does Lk + 40 with a window.
    CHECK(nan == (window > 0 && window <= Lk + 40 - (Lk - 1) ? 3 : 2) * Hq * D);
  }
}

TEST_CASE("oracle: Attention matches a double reference: softcap") {
  AttnCase c;
  c.scale = 1.0, c.softcap = 2.5, c.Hm = 1;  // scores up to 16, capped well below
  checkAttention(c);
}

TEST_CASE("oracle: Attention matches a double reference: split key (MLA)") {
  AttnCase c;
  c.Hq = 4, c.Hkv = 4, c.Dk = 64, c.Ds = 16, c.Dv = 32, c.scale = 0.125;
  checkAttention(c);
  c.Hkv = 1, c.Hm = 4, c.live = true;
  checkAttention(c);
}

TEST_CASE("oracle: Attention matches a double reference: paged key over a pool") {
  AttnCase c;
  c.S = 23, c.Lk = 11;
  checkAttention(c);
  c.Hm = 1, c.live = true;
  checkAttention(c);
}

TEST_CASE("oracle: a paged read word outside the pool is a range error") {
  AttnCase c;
  c.S = 8, c.Lk = 6, c.live = true;
  uint32_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  Graph g = attnGraph(c);
  auto p = attnData(g, c, rng);
  p["len"] = T("i32[2]", {6, 3});
  p["read"].set(1 * 6 + 4, 8);  // row 1 visits keys 0..2 only: not read
  evalOk(g, p);
  p["read"].set(1 * 6 + 2, 8);
  auto ev = evaluate(g, p);
  REQUIRE(!ev);
  CHECK(ev.error().kind == ErrorKind::Range);
  CHECK(ev.error().message == "Attention %y: read word 8 of row 1, key 2 is outside the pool [0, 8)");
}

TEST_CASE("oracle: live length visits only the first len keys, NaN past it cannot reach the output") {
  AttnCase c;
  c.live = true, c.Lk = 10;
  checkAttention(c, [&](std::map<std::string, Tensor>& p, std::mt19937&) {
    p["len"] = T("i32[2]", {4, 12});  // 12 clamps to Lk
    for (int64_t g = 0; g < c.Hkv; ++g)
      for (int64_t t : {4, 7}) {  // rows past len of batch row 0
        for (int64_t e = 0; e < c.Dk; ++e) p["k"].set(((0 * c.Hkv + g) * c.Lk + t) * c.Dk + e, kNaN);
        for (int64_t e = 0; e < c.Dv; ++e) p["v"].set(((0 * c.Hkv + g) * c.Lk + t) * c.Dv + e, kNaN);
      }
  });
  // With every key and value row past len NaN, the whole output is finite.
  uint32_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  Graph g = attnGraph(c);
  auto p = attnData(g, c, rng);
  p["len"] = T("i32[2]", {3, 1});
  for (int64_t row = 0; row < c.B * c.Hkv * c.Lk; ++row)
    if (row % c.Lk >= 3 || (row / (c.Hkv * c.Lk) == 1 && row % c.Lk >= 1)) {
      for (int64_t e = 0; e < c.Dk; ++e) p["k"].set(row * c.Dk + e, kNaN);
      for (int64_t e = 0; e < c.Dv; ++e) p["v"].set(row * c.Dv + e, kNaN);
    }
  Tensor y = evalOk(g, p).outputs.at("y");
  for (int64_t i = 0; i < y.size(); ++i) CHECK(std::isfinite(y.get(i)));
}

TEST_CASE("oracle: a masked key's value row is not read, a fully masked row or len 0 is NaN") {
  AttnCase c;
  c.Hm = 1, c.live = true, c.Lq = 2, c.Lk = 6;
  uint32_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  Graph g = attnGraph(c);
  auto p = attnData(g, c, rng);
  p["len"] = T("i32[2]", {6, 0});  // batch row 1 visits nothing
  for (int64_t t = 0; t < c.Lk; ++t) {
    p["mask"].set((0 * c.Lq + 0) * c.Lk + t, t == 2 ? -kInf : 0.0);  // (b0, i0): key 2 masked
    p["mask"].set((0 * c.Lq + 1) * c.Lk + t, -kInf);                  // (b0, i1): every key masked
  }
  for (int64_t h = 0; h < c.Hkv; ++h)
    for (int64_t e = 0; e < c.Dv; ++e) p["v"].set(((0 * c.Hkv + h) * c.Lk + 2) * c.Dv + e, kNaN);
  Tensor y = evalOk(g, p).outputs.at("y");
  checkClose(y, refAttention(c, p));
  for (int64_t h = 0; h < c.Hq; ++h)
    for (int64_t e = 0; e < c.Dv; ++e) {
      CHECK(std::isfinite(y.get(((0 * c.Hq + h) * c.Lq + 0) * c.Dv + e)));
      CHECK(std::isnan(y.get(((0 * c.Hq + h) * c.Lq + 1) * c.Dv + e)));
      for (int64_t i = 0; i < c.Lq; ++i) CHECK(std::isnan(y.get(((1 * c.Hq + h) * c.Lq + i) * c.Dv + e)));
    }
}

TEST_CASE("oracle: bf16 Attention is the f32 computation rounded once") {
  AttnCase c;
  c.Hm = 4, c.softcap = 3.0;
  uint32_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  AttnCase cb = c;
  cb.dtype = "bf16";
  Graph gb = attnGraph(cb), gf = attnGraph(c);
  auto pb = attnData(gb, cb, rng);
  std::map<std::string, Tensor> pf;
  for (auto& [name, t] : pb) {
    Tensor f(Type{t.dtype() == DType::BF16 ? DType::F32 : t.dtype(), t.shape()});
    for (int64_t i = 0; i < t.size(); ++i) f.set(i, t.get(i));
    pf[name] = f;
  }
  Tensor yb = evalOk(gb, pb).outputs.at("y"), yf = evalOk(gf, pf).outputs.at("y");
  for (int64_t i = 0; i < yb.size(); ++i) {
    uint16_t want = floatToBf16(float(yf.get(i))), got;
    std::memcpy(&got, yb.bytes.data() + 2 * i, 2);
    CHECK(got == want);
  }
}

TEST_CASE("oracle: the seed's primitive decomposition equals the formed Attention") {
  // The decode chain of ops::attention_masked (KV write, repeat_kv, QK^T,
  // scale, in-graph causal mask, max-subtracted softmax, PV), beside the formed
  // Attention with the same mask and the live form with len = pos + 1.
  const std::string body = R"(input %q : f32[1,4,1,16]
input %k : f32[1,2,1,16]
input %v : f32[1,2,1,16]
state %k_cache : f32[1,2,32,16]
state %v_cache : f32[1,2,32,16]
slot %pos : i32[] range [0, 31]
%kc = DynamicUpdateSlice(%k_cache, %k, %pos) {axis=2} : f32[1,2,32,16]
%vc = DynamicUpdateSlice(%v_cache, %v, %pos) {axis=2} : f32[1,2,32,16]
%k_r = Reshape(%kc) : f32[1,2,1,32,16]
%k_b = Broadcast(%k_r) : f32[1,2,2,32,16]
%k_exp = Reshape(%k_b) : f32[1,4,32,16]
%v_r = Reshape(%vc) : f32[1,2,1,32,16]
%v_b = Broadcast(%v_r) : f32[1,2,2,32,16]
%v_exp = Reshape(%v_b) : f32[1,4,32,16]
%kt = Transpose(%k_exp) {perm=[0, 1, 3, 2]} : f32[1,4,16,32]
%scores = MatMul(%q, %kt) : f32[1,4,1,32]
%scale = Constant() {value=[0.25]} : f32[]
%scaled = Mul(%scores, %scale) : f32[1,4,1,32]
%kpos = Iota() {axis=0} : i32[32]
%visible = Le(%kpos, %pos) : bool[32]
%zero = Constant() {value=[0]} : f32[]
%neg = Constant() {value=[-inf]} : f32[]
%mask_row = Select(%visible, %zero, %neg) : f32[32]
%mask = Reshape(%mask_row) : f32[1,1,1,32]
%masked = Add(%scaled, %mask) : f32[1,4,1,32]
%m = ReduceMax(%masked) {axis=-1, keepdim=true} : f32[1,4,1,1]
%xs = Sub(%masked, %m) : f32[1,4,1,32]
%ex = Exp(%xs) : f32[1,4,1,32]
%s = ReduceSum(%ex) {axis=-1, keepdim=true} : f32[1,4,1,1]
%p = Div(%ex, %s) : f32[1,4,1,32]
%out = MatMul(%p, %v_exp) : f32[1,4,1,16]
%formed = Attention(%q, %kc, %vc, %mask) {scale=0.25, n_rep=2, key=dense, mask=additive, bound=capacity} : f32[1,4,1,16]
%pos1 = Reshape(%pos) : i32[1]
%one = Constant() {value=[1]} : i32[1]
%len = Add(%pos1, %one) : i32[1]
%live = Attention(%q, %kc, %vc, %len) {scale=0.25, n_rep=2, key=dense, mask=none, bound=live} : f32[1,4,1,16]
output %out
output %formed
output %live
state_out %k_cache = %kc
state_out %v_cache = %vc
)";
  Graph g = parse(body);
  uint32_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  for (int64_t pos : {int64_t(0), int64_t(rng() % 30) + 1, int64_t(31)}) {
    CAPTURE(pos);
    std::map<std::string, Tensor> p;
    for (ValueId id : g.params) p[g.value(id).name] = randomT(g.type(id), rng);
    p["pos"] = T("i32[]", {double(pos)});
    Evaluation ev = evalOk(g, p);
    std::vector<double> prim = vals(ev.outputs.at("out"));
    checkClose(ev.outputs.at("formed"), prim, 1e-5);
    checkClose(ev.outputs.at("live"), prim, 1e-5);
    // The new row landed at pos in the returned state.
    CHECK(ev.states.at("k_cache").get(pos * 16 + 3) == p["k"].get(3));
  }
}

// ================================================================ rope, block selection

TEST_CASE("oracle: Rope in both styles matches the direct formula") {
  uint32_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  const int64_t B = 2, H = 3, L = 4, D = 8, P = D / 2;
  for (std::string style : {"half", "interleaved"}) {
    CAPTURE(style);
    Graph g = parse("input %x : f32[2,3,4,8]\ninput %c : f32[4,4]\ninput %s : f32[2,1,4,4]\n%y = Rope(%x, %c, %s) {style=" +
                    style + "} : f32[2,3,4,8]\noutput %y\n");
    std::map<std::string, Tensor> p{{"x", randomT(ty("f32[2,3,4,8]"), rng)},
                                    {"c", randomT(ty("f32[4,4]"), rng)},
                                    {"s", randomT(ty("f32[2,1,4,4]"), rng)}};
    std::vector<double> x = vals(p["x"]), co = vals(p["c"]), si = vals(p["s"]), want(x.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t l = 0; l < L; ++l)
          for (int64_t j = 0; j < P; ++j) {
            double cj = co[size_t(l * P + j)], sj = si[size_t((b * L + l) * P + j)];
            size_t row = size_t(((b * H + h) * L + l) * D);
            size_t i1 = row + size_t(style == "half" ? j : 2 * j), i2 = row + size_t(style == "half" ? P + j : 2 * j + 1);
            want[i1] = x[i1] * cj - x[i2] * sj;
            want[i2] = x[i2] * cj + x[i1] * sj;
          }
    checkClose(evalOk(g, p).outputs.at("y"), want, 1e-6);
  }
}

TEST_CASE("oracle: BlockTopK picks completed blocks by score, ties by lower block, -1 past the candidates") {
  CHECK(run("input %s : f32[1,3,5]\ninput %p : i32[1,3]\n%y = BlockTopK(%s, %p) {k=3, block=4} : i32[1,3,3]\noutput %y\n",
            {{"s", T("f32[1,3,5]", {2, 7, 7, 1, 9, 2, 7, 7, 1, 9, 2, 7, 7, 1, 9})}, {"p", T("i32[1,3]", {3, 9, 19})}}) ==
        "[-1, -1, -1, 1, 0, -1, 1, 2, 0]");
  uint32_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  const int64_t B = 2, Lq = 6, NB = 7, K = 3, block = 4;
  Graph g = parse("input %s : f32[2,6,7]\ninput %p : i64[2,6]\n%y = BlockTopK(%s, %p) {k=3, block=4} : i32[2,6,3]\noutput %y\n");
  Tensor s = randomInts(ty("f32[2,6,7]"), 1, 4, rng);  // few values: many ties
  Tensor qp = randomInts(ty("i64[2,6]"), 0, NB * block - 1, rng);
  Tensor y = evalOk(g, {{"s", s}, {"p", qp}}).outputs.at("y");
  for (int64_t r = 0; r < B * Lq; ++r) {
    int64_t own = int64_t(qp.get(r)) / block;
    std::vector<int64_t> cand;
    for (int64_t j = 0; j < own && j < NB; ++j) cand.push_back(j);
    std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) { return s.get(r * NB + a) > s.get(r * NB + b); });
    for (int64_t j = 0; j < K; ++j) CHECK(y.get(r * K + j) == (j < int64_t(cand.size()) ? double(cand[size_t(j)]) : -1.0));
  }
}

TEST_CASE("oracle: SelectedAttention matches a double reference") {
  uint32_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  const int64_t B = 2, Hq = 4, Hkv = 2, Lq = 5, Lk = 24, D = 8, Dv = 6, K = 2, block = 4, NB = Lk / block;
  for (bool capped : {false, true}) {
    CAPTURE(capped);
    double scale = 0.5, cap = 1.5;
    Graph g = parse("input %q : f32[2,4,5,8]\ninput %k : f32[2,2,24,8]\ninput %v : f32[2,2,24,6]\ninput %ids : i32[2,5,2]\n"
                    "input %qp : i32[2,5]\n%y = SelectedAttention(%q, %k, %v, %ids, %qp) {scale=0.5" +
                    std::string(capped ? ", softcap=1.5" : "") + ", n_rep=2, block=4} : f32[2,4,5,6]\noutput %y\n");
    std::map<std::string, Tensor> p{{"q", randomT(ty("f32[2,4,5,8]"), rng)},
                                    {"k", randomT(ty("f32[2,2,24,8]"), rng)},
                                    {"v", randomT(ty("f32[2,2,24,6]"), rng)},
                                    {"ids", randomInts(ty("i32[2,5,2]"), -1, NB - 1, rng)},
                                    {"qp", randomInts(ty("i32[2,5]"), 0, Lk - 1, rng)}};
    std::vector<double> q = vals(p["q"]), k = vals(p["k"]), v = vals(p["v"]), ids = vals(p["ids"]), qp = vals(p["qp"]);
    std::vector<double> want(size_t(B * Hq * Lq * Dv));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t i = 0; i < Lq; ++i) {
          int64_t pos = int64_t(qp[size_t(b * Lq + i)]), g = h / (Hq / Hkv);
          std::vector<int64_t> keys;
          for (int64_t t = 0; t <= pos; ++t) {
            bool sel = t / block == pos / block;
            for (int64_t j = 0; j < K; ++j) sel = sel || ids[size_t((b * Lq + i) * K + j)] == double(t / block);
            if (sel) keys.push_back(t);
          }
          auto score = [&](int64_t t) {
            double d = 0;
            for (int64_t e = 0; e < D; ++e) d += q[size_t(((b * Hq + h) * Lq + i) * D + e)] * k[size_t(((b * Hkv + g) * Lk + t) * D + e)];
            return capScore(d * scale, capped ? std::optional<double>(cap) : std::nullopt);
          };
          auto value = [&](int64_t t, int64_t e) { return v[size_t(((b * Hkv + g) * Lk + t) * Dv + e)]; };
          refRow(keys, score, value, Dv, want.data() + ((b * Hq + h) * Lq + i) * Dv);
        }
    checkClose(evalOk(g, p).outputs.at("y"), want);
  }
}

// ================================================================ performance

TEST_CASE("oracle: a tiny one-layer model evaluates well under a second") {
  // hidden 64 (4 heads of 16), vocab 256, capacity 64, a 16-token prefill: an
  // embedding Gather, the QKV and output projections, the primitive attention
  // chain over the whole cache, and the LM head.
  std::string s = R"(input %tokens : i32[1,16]
weight %emb : f32[256,64]
weight %wq : f32[64,64]
weight %wk : f32[64,64]
weight %wv : f32[64,64]
weight %wo : f32[64,64]
weight %head : f32[256,64]
state %kc : f32[1,4,64,16]
state %vc : f32[1,4,64,16]
slot %pos : i32[] range [0, 48]
%x = Gather(%emb, %tokens) {axis=0} : f32[1,16,64]
%wqt = Transpose(%wq) {perm=[1, 0]} : f32[64,64]
%wkt = Transpose(%wk) {perm=[1, 0]} : f32[64,64]
%wvt = Transpose(%wv) {perm=[1, 0]} : f32[64,64]
%wot = Transpose(%wo) {perm=[1, 0]} : f32[64,64]
%ht = Transpose(%head) {perm=[1, 0]} : f32[64,256]
%q0 = MatMul(%x, %wqt) : f32[1,16,64]
%k0 = MatMul(%x, %wkt) : f32[1,16,64]
%v0 = MatMul(%x, %wvt) : f32[1,16,64]
%q1 = Reshape(%q0) : f32[1,16,4,16]
%k1 = Reshape(%k0) : f32[1,16,4,16]
%v1 = Reshape(%v0) : f32[1,16,4,16]
%q = Transpose(%q1) {perm=[0, 2, 1, 3]} : f32[1,4,16,16]
%k = Transpose(%k1) {perm=[0, 2, 1, 3]} : f32[1,4,16,16]
%v = Transpose(%v1) {perm=[0, 2, 1, 3]} : f32[1,4,16,16]
%kn = DynamicUpdateSlice(%kc, %k, %pos) {axis=2} : f32[1,4,64,16]
%vn = DynamicUpdateSlice(%vc, %v, %pos) {axis=2} : f32[1,4,64,16]
%kt = Transpose(%kn) {perm=[0, 1, 3, 2]} : f32[1,4,16,64]
%sc = MatMul(%q, %kt) : f32[1,4,16,64]
%scale = Constant() {value=[0.25]} : f32[]
%ss = Mul(%sc, %scale) : f32[1,4,16,64]
%qi = Iota() {axis=0} : i32[16,1]
%qpos = Add(%qi, %pos) : i32[16,1]
%ki = Iota() {axis=1} : i32[16,64]
%vis = Le(%ki, %qpos) : bool[16,64]
%zero = Constant() {value=[0]} : f32[]
%ninf = Constant() {value=[-inf]} : f32[]
%mask = Select(%vis, %zero, %ninf) : f32[16,64]
%sm = Add(%ss, %mask) : f32[1,4,16,64]
%m = ReduceMax(%sm) {axis=-1, keepdim=true} : f32[1,4,16,1]
%d = Sub(%sm, %m) : f32[1,4,16,64]
%e = Exp(%d) : f32[1,4,16,64]
%z = ReduceSum(%e) {axis=-1, keepdim=true} : f32[1,4,16,1]
%pr = Div(%e, %z) : f32[1,4,16,64]
%o = MatMul(%pr, %vn) : f32[1,4,16,16]
%ot = Transpose(%o) {perm=[0, 2, 1, 3]} : f32[1,16,4,16]
%o2 = Reshape(%ot) : f32[1,16,64]
%a = MatMul(%o2, %wot) : f32[1,16,64]
%h = Add(%x, %a) : f32[1,16,64]
%logits = MatMul(%h, %ht) : f32[1,16,256]
output %logits
state_out %kc = %kn
state_out %vc = %vn
)";
  Graph g = parse(s);
  auto params = completeParams(g, {}, 7);
  auto start = std::chrono::steady_clock::now();
  Evaluation ev = evalOk(g, params);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("tiny model evaluated in " << secs * 1e3 << " ms");
  CHECK(secs < 0.5);
  for (int64_t i = 0; i < ev.outputs.at("logits").size(); ++i) REQUIRE(std::isfinite(ev.outputs.at("logits").get(i)));
}

// ================================================================ generator

TEST_CASE("oracle: the generator is deterministic, seeded, never zero, and keeps its ranges") {
  const std::string body = R"(input %x : f32[3,16]
input %xh : f16[64]
weight %w : f32[8,16]
weight %gain : bf16[16]
weight %emb : f32[50,16]
input %tok : i32[4,8]
input %other : i64[10]
input %flags : bool[32]
slot %pos : i32[] range [3, 9]
slot %write : i32[20] range [-1, 30]
slot %dense : i64[6] range [10, 15]
slot %small : i32[40] range [0, 3]
slot %sparse : i32[200] range [0, 999]
%t2 = Reshape(%tok) : i32[32]
%e = Gather(%emb, %t2) {axis=0} : f32[32,16]
%o = Add(%other, %other) : i64[10]
output %e
output %o
)";
  Graph g = parse(body);
  auto a = completeParams(g, {}, 1), a2 = completeParams(g, {}, 1), b = completeParams(g, {}, 2);
  REQUIRE(a.size() == g.params.size());
  for (ValueId id : g.params) {
    const std::string& name = g.value(id).name;
    const Tensor& t = a[name];
    CAPTURE(name);
    CHECK(t.type == g.type(id));
    CHECK(t.bytes == a2[name].bytes);
    if (t.size() > 1 && name != "small") CHECK(t.bytes != b[name].bytes);
  }
  auto within = [](const Tensor& t, double lo, double hi) {
    for (int64_t i = 0; i < t.size(); ++i)
      if (!(std::fabs(t.get(i)) >= lo && std::fabs(t.get(i)) <= hi)) return false;
    return true;
  };
  for (auto* ps : {&a, &b}) {
    auto& p = *ps;
    CHECK(within(p["x"], 0.5, 1.0));
    CHECK(within(p["xh"], 0.5, 1.0));
    CHECK(within(p["w"], 0.5 / 4 * 0.999999, 1.0 / 4 * 1.000001));  // fan-in 16: scale 1/4
    CHECK(within(p["emb"], 0.5 / 4 * 0.999999, 1.0 / 4 * 1.000001));
    CHECK(within(p["gain"], 0.5, 1.0));
    std::vector<double> x = vals(p["x"]);
    CHECK(std::count_if(x.begin(), x.end(), [](double v) { return v < 0; }) > 4);  // both signs
    CHECK(std::count_if(x.begin(), x.end(), [](double v) { return v > 0; }) > 4);
    std::vector<double> tok = vals(p["tok"]);  // gathered along 50 (through a Reshape)
    for (double t : tok) CHECK((t >= 0 && t < 50));
    CHECK(*std::max_element(tok.begin(), tok.end()) >= 16);
    for (double o : vals(p["other"])) CHECK((o >= 0 && o < 16 && o == std::floor(o)));
    std::vector<double> f = vals(p["flags"]);
    CHECK(std::count(f.begin(), f.end(), 1.0) > 0);
    CHECK(std::count(f.begin(), f.end(), 0.0) > 0);
    double pos = p["pos"].get(0);
    CHECK((pos >= 3 && pos <= 9));
    for (const char* name : {"write", "dense", "sparse"}) {
      std::vector<double> w = vals(p[name]);
      std::set<double> distinct(w.begin(), w.end());
      CHECK(distinct.size() == w.size());
    }
    for (double w : vals(p["write"])) CHECK((w >= -1 && w <= 30));
    for (double w : vals(p["dense"])) CHECK((w >= 10 && w <= 15));
    for (double w : vals(p["sparse"])) CHECK((w >= 0 && w <= 999));
    for (double w : vals(p["small"])) CHECK((w >= 0 && w <= 3));
    std::vector<double> sm = vals(p["small"]);
    CHECK(std::set<double>(sm.begin(), sm.end()).size() > 1);
  }
  // Stable by name: another parameter does not move the others; given wins.
  Graph g2 = parse("input %zzz : f32[4]\n" + body);
  auto c = completeParams(g2, {{"x", T("f32[3,16]", std::vector<double>(48, 3.0))}}, 1);
  for (auto& [name, t] : a)
    if (name != "x") CHECK(c[name].bytes == t.bytes);
  CHECK(c["x"].get(5) == 3.0);
  CHECK(fmt(vals(randomParam(g, g.params[0], 1))) == fmt(vals(a["x"])));
}

TEST_CASE("oracle: work past the host memory budget is refused before anything is allocated") {
  // An Iota of 2^40 floats (within the verifier's 2^48 elements) and its
  // output's copy: 8 TiB, more than any host here.
  Graph huge = testing::parse("graph huge\n%y = Iota() {axis=0} : f32[1099511627776]\noutput %y\n");
  auto ev = evaluate(huge, {});
  REQUIRE(!ev);
  CHECK(ev.error().kind == ErrorKind::Memory);
  CHECK(ev.error().message.rfind("evaluating graph 'huge' (every value held at once) needs 8796093022208 bytes of host "
                                 "memory, more than the budget of ", 0) == 0);
  // An input of 2^40 floats is refused before the generator draws it.
  Graph wide = testing::parse("graph wide\ninput %x : f32[1099511627776]\n%y = Neg(%x) : f32[1099511627776]\noutput %y\n");
  auto drawn = bindParamArgs(wide, ParamArgs{});
  REQUIRE(!drawn);
  CHECK(drawn.error().kind == ErrorKind::Memory);
  CHECK(drawn.error().message.rfind("drawing the 1 parameter that no --weights, --input or --slot names needs "
                                    "4398046511104 bytes of host memory", 0) == 0);

  // Under a stated budget: x (400 bytes) is drawn, the evaluation (x, y and
  // y's copy: 1200 bytes) is refused.
  Graph small = testing::parse("graph small\ninput %x : f32[100]\n%y = Neg(%x) : f32[100]\noutput %y\n");
  testing::HostBudget budget("1000");
  auto p = bindParamArgs(small, ParamArgs{});
  REQUIRE(p);
  auto refused = evaluate(small, p->hostTensors());
  REQUIRE(!refused);
  CHECK(refused.error().str() ==
        "t.pg: error: evaluating graph 'small' (every value held at once) needs 1200 bytes of host memory, more than "
        "the budget of 1000 bytes (POOT_HOST_MEMORY_BYTES)");
  {
    testing::HostBudget roomy("1200");
    CHECK(bool(evaluate(small, p->hostTensors())));
  }
  testing::HostBudget bad("12GB");
  auto usage = evaluate(small, p->hostTensors());
  REQUIRE(!usage);
  CHECK(usage.error().kind == ErrorKind::Usage);
  CHECK(usage.error().message == "POOT_HOST_MEMORY_BYTES='12GB' is not a positive integer of bytes");
}

TEST_CASE("budget: a failed host allocation becomes a Memory error, any other exit code passes through") {
  for (int which : {0, 1}) {
    auto code = catchingOutOfMemory([&]() -> int {
      if (which == 0) throw std::bad_alloc();
      throw std::length_error("vector");
    });
    REQUIRE(!code);
    CHECK(code.error().kind == ErrorKind::Memory);
    CHECK(code.error().message.rfind("out of host memory: an allocation failed", 0) == 0);
  }
  auto three = catchingOutOfMemory([] { return 3; });
  REQUIRE(three);
  CHECK(*three == 3);
}

TEST_CASE("oracle: gatherBound follows a value through the ops that move its elements") {
  Graph g = parse(
      "input %t : i32[4]\ninput %s : i32[]\nweight %emb : f32[10,2]\nweight %small : f32[3,6]\n"
      "%r = Reshape(%t) : i32[2,2]\n%w = Convert(%r) : i64[2,2]\n%e = Gather(%emb, %w) {axis=0} : f32[2,2,2]\n"
      "%c = Slice(%t) {axis=0, start=0, limit=2} : i32[2]\n%f = Gather(%small, %c) {axis=1} : f32[3,2]\n"
      "%d = DynamicSlice(%t, %s) {axis=0, size=2} : i32[2]\n%u = Add(%d, %d) : i32[2]\n"
      "output %e\noutput %f\noutput %u\n");
  auto id = [&](const char* name) {
    for (size_t i = 0; i < g.values.size(); ++i)
      if (g.values[i].name == name) return ValueId(i);
    FAIL("no value " << name);
    return ValueId(-1);
  };
  CHECK(gatherBound(g, id("t")) == 6);  // the smaller of the two axes it indexes: 10 rows, 6 columns
  CHECK(gatherBound(g, id("w")) == 10);
  CHECK(gatherBound(g, id("s")) == 0);  // a DynamicSlice start is not moved into the slice
  CHECK(gatherBound(g, id("u")) == 0);
}

TEST_CASE("oracle: a --slot VALUE is an integer that fits the slot, or a file ending in .npy") {
  Graph g = testing::parse("graph g\nslot %pos : i32[] range [0, 9]\nslot %big : i64[2] range [0, 9]\n"
                           "%y = Add(%pos, %pos) : i32[]\n%z = Add(%big, %big) : i64[2]\noutput %y\noutput %z\n");
  auto bound = [&](std::vector<std::string> slots) { return bindParamArgs(g, ParamArgs{{}, std::move(slots), "", 0}); };
  auto refused = [&](std::vector<std::string> slots, ErrorKind kind) {
    auto p = bound(std::move(slots));
    REQUIRE(!p);
    CHECK(p.error().kind == kind);
    return p.error().str();
  };
  auto p = bound({"pos=7", "big=-3"});
  REQUIRE(p);
  CHECK(p->tensors.at("pos").get(0) == 7);
  CHECK(p->tensors.at("big").get(1) == -3);
  CHECK(refused({"pos=abc"}, ErrorKind::Usage) ==
        "error: --slot pos=abc: 'abc' is not an integer (nor a file ending in .npy)");
  CHECK(refused({"pos=5x"}, ErrorKind::Usage) == "error: --slot pos=5x: '5x' is not an integer (nor a file ending in .npy)");
  CHECK(refused({"pos=2.5"}, ErrorKind::Usage) ==
        "error: --slot pos=2.5: '2.5' is not an integer (nor a file ending in .npy)");
  CHECK(refused({"pos=3000000000"}, ErrorKind::Range) == "error: --slot pos=3000000000 does not fit i32");
  CHECK(refused({"big=99999999999999999999"}, ErrorKind::Range) == "error: --slot big=99999999999999999999 does not fit i64");
  CHECK(refused({"pos=/nonexistent/p.npy"}, ErrorKind::Io).find("/nonexistent/p.npy") != std::string::npos);
}

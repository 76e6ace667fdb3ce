// Unit tests of the .pg text form: exact round trips (print(parse(t)) == t),
// number formatting that reads back bit for bit, canonical attribute order,
// and parse errors with their exact locations.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "ir/io.h"
#include "ir/text.h"
#include "testing.h"

using namespace poot;

namespace {

std::string roundTrip(const std::string& text) { return printGraph(testing::parseUnverified(text)); }

std::string parseError(const std::string& text) {
  auto g = parseGraph(text, "t.pg");
  REQUIRE(!g);
  return g.error().str();
}

}  // namespace

TEST_CASE("every example graph prints back exactly and verifies") {
  int seen = 0;
  for (const auto& path : testing::exampleGraphs()) {
    auto text = readFile(path.string());
    REQUIRE(bool(text));
    auto g = parseGraph(*text, path.string());
    REQUIRE_MESSAGE(bool(g), (g ? "" : g.error().str()));
    auto v = verify(*g);
    CHECK_MESSAGE(bool(v), (v ? "" : v.error().str()));
    CHECK(printGraph(*g) == *text);
    ++seen;
  }
  CHECK(seen >= 1);
}

TEST_CASE("printing is canonical: spacing, attribute order and numbers") {
  std::string messy =
      "# a comment\n"
      "graph   g   # trailing comment\n"
      "\n"
      "input %x:f32[ 2 , 3 ]\n"
      "%m = ReduceMax( %x ) { keepdim = true , axis = -1 } : f32[2,1]\n"
      "%c = Constant() {value=[1.50, 2e3, -inf, +inf, nan, -0.0]} : f32[6]\n"
      "output %m\n"
      "output %c\n";
  std::string canonical =
      "graph g\n"
      "input %x : f32[2,3]\n"
      "%m = ReduceMax(%x) {axis=-1, keepdim=true} : f32[2,1]\n"
      "%c = Constant() {value=[1.5, 2000, -inf, inf, nan, -0]} : f32[6]\n"
      "output %m\n"
      "output %c\n";
  CHECK(roundTrip(messy) == canonical);
  CHECK(roundTrip(canonical) == canonical);
}

TEST_CASE("interface declarations print in a fixed order after the eqns") {
  std::string text =
      "graph g\n"
      "state %kv : f32[4,2]\n"
      "input %row : f32[1,2]\n"
      "slot %pos : i32[] range [0, 3]\n"
      "slot %len : i32[1] range [-5, 9]\n"
      "%n = DynamicUpdateSlice(%kv, %row, %pos) {axis=0} : f32[4,2]\n"
      "%l, %ok = IndexGuard(%len) {lo=1, hi=4} : i32[1], bool[]\n"
      "output %n\n"
      "output %l\n"
      "state_out %kv = %n\n"
      "validation %ok\n";
  CHECK(roundTrip(text) == text);
  auto g = parseGraph(text, "t.pg");
  REQUIRE(bool(g));
  CHECK(bool(verify(*g)));
  CHECK(g->value(g->params[3]).lo == -5);
  CHECK(g->value(g->params[3]).hi == 9);
}

TEST_CASE("formatNumber reads back bit for bit") {
  std::mt19937_64 rng(std::random_device{}());
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (std::isnan(d)) continue;
    std::string text = "graph g\n%c = Constant() {value=[" + formatNumber(d) + "]} : f32[]\noutput %c\n";
    auto g = parseGraph(text, "t.pg");
    REQUIRE(bool(g));
    double back = std::get<std::vector<double>>(*g->eqns[0].attr("value"))[0];
    uint64_t backBits;
    std::memcpy(&backBits, &back, sizeof back);
    CHECK(backBits == bits);
  }
  CHECK(formatNumber(0.125) == "0.125");
  CHECK(formatNumber(3.0) == "3");
  CHECK(formatNumber(-INFINITY) == "-inf");
  CHECK(formatNumber(1e-5) == "1e-05");
}

TEST_CASE("parse errors name the line and column") {
  struct Case { const char* text; const char* error; };
  const Case cases[] = {
      {"", "t.pg:1:1: error: expected 'graph NAME' before anything else"},
      {"graph\n", "t.pg:1:6: error: expected a graph name, got end of line"},
      {"graph g\ninput x : f32[1]\n", "t.pg:2:7: error: expected a value name such as %x, got 'x'"},
      {"graph g\ninput %x : f32[1\n", "t.pg:2:17: error: expected ',', got end of line"},
      {"graph g\ninput %x : f32\n", "t.pg:2:15: error: expected '[', got end of line"},
      {"graph g\ninput %x : f32[-1]\n", "t.pg:2:16: error: dimension -1 must be 1 or more"},
      {"graph g\nfrobnicate %x\n", "t.pg:2:1: error: unknown statement 'frobnicate' (expected input, weight, state, slot, output, state_out, validation or %name = Op(...))"},
      {"graph g\ninput %x : f32[4]\n%y = Exp %x : f32[4]\n", "t.pg:3:10: error: expected '(', got '%x'"},
      {"graph g\ninput %x : f32[4]\n%y = Exp(%x) : f32[4], f32[4]\n", "t.pg:3:22: error: more result types than results"},
      {"graph g\ninput %x : f32[4]\n%y, %y = TopK(%x) {k=2} : f32[2], i32[2]\n", "t.pg:3:1: error: result '%y' is named twice"},
      {"graph g\ninput %x : f32[4]\n%y = Slice(%x) {axis=0, start=1, limit=1e3} : f32[1]\n", "t.pg:3:40: error: attribute 'limit' must be an integer"},
      {"graph g\ninput %x : f32[4]\n%y = Constant() {value=[1, two]} : f32[4]\n", "t.pg:3:28: error: expected a number, got 'two'"},
      {"graph g\ninput %x : f32[4]\n%y = ReduceSum(%x) {axis=0, keepdim=yes} : f32[1]\n", "t.pg:3:37: error: attribute 'keepdim' must be a bool"},
      {"graph g\nstate_out %a = %b\n", "t.pg:2:11: error: use of undefined value '%a'"},
      {"graph g\ninput %x : f32[4]\n%y = Exp(%x) : f32[4]\noutput\n", "t.pg:4:7: error: expected a value such as %x, got end of line"},
      {"graph g\ninput % : f32[4]\n", "t.pg:2:7: error: expected a value name after '%'"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    CHECK(parseError(c.text) == c.error);
  }
}

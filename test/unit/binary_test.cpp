// Unit tests of the .pgb binary form: it carries the same graph as the text
// form (print(read(write(g))) == print(g)), drops values a pass orphaned, and
// any damage to the bytes is an error, never a crash.
#include <doctest/doctest.h>

#include <random>

#include "ir/binary.h"
#include "ir/io.h"
#include "ir/text.h"
#include "passes/pass.h"
#include "testing.h"

using namespace poot;

namespace {

Graph example() { return testing::loadGraphFile(testing::exampleGraph("decode-attention.pg")); }

}  // namespace

TEST_CASE("the binary form carries the same graph") {
  Graph g = example();
  std::string bytes = writeBinaryGraph(g);
  CHECK(isBinaryGraph(bytes));
  auto back = readBinaryGraph(bytes, "g.pgb");
  REQUIRE_MESSAGE(bool(back), (back ? "" : back.error().str()));
  CHECK(bool(verify(*back)));
  CHECK(printGraph(*back) == printGraph(g));
  CHECK(writeBinaryGraph(*back) == bytes);
}

TEST_CASE("values orphaned by a pass are not written") {
  auto g = parseGraph("graph g\ninput %x : f32[4]\n%dead = Neg(%x) : f32[4]\n%y = Exp(%x) : f32[4]\noutput %y\n", "t.pg");
  REQUIRE(bool(g));
  PassContext ctx;
  auto changed = runCleanup(*g, ctx);
  REQUIRE(bool(changed));
  CHECK(*changed);
  auto back = readBinaryGraph(writeBinaryGraph(*g), "g.pgb");
  REQUIRE(bool(back));
  CHECK(back->values.size() == 2);
  CHECK(printGraph(*back) == "graph g\ninput %x : f32[4]\n%y = Exp(%x) : f32[4]\noutput %y\n");
}

TEST_CASE("text is not mistaken for a binary graph") {
  CHECK_FALSE(isBinaryGraph("graph g\n"));
  CHECK_FALSE(isBinaryGraph(""));
}

TEST_CASE("damaged bytes give an error or a graph that verifies, never a crash") {
  std::string bytes = writeBinaryGraph(example());
  std::mt19937 rng(std::random_device{}());
  int rejected = 0;
  for (int trial = 0; trial < 500; ++trial) {
    std::string bad = bytes;
    if (trial % 2) {
      bad.resize(rng() % bytes.size());
    } else {
      for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = char(rng());
    }
    auto g = readBinaryGraph(bad, "bad.pgb");
    if (!g) {
      ++rejected;
      CHECK(g.error().str().rfind("bad.pgb", 0) == 0);
      continue;
    }
    auto v = verify(*g);
    if (!v) ++rejected;
    else printGraph(*g);  // a graph that verifies must also print
  }
  CHECK(rejected > 0);
}

// diff_tests: doctest's runner, after taking this test's own options:
//   --seeds=FIRST:LAST  the seeds FIRST .. LAST - 1 (default 1:101)
//   --seed=S            that seed alone
//   --verbose           a line per seed: its recipe and what the passes formed
//   --print             each seed's graph and the graph of its bound, as .pg text
//                       (`pootc eval G.pg --seed S` draws the same parameters)
// Every other option goes to doctest (-s, -tc=..., --help).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "seeds.h"

namespace poot::diff {
SeedRange& seedRange() {
  static SeedRange r;
  return r;
}
}  // namespace poot::diff

int main(int argc, char** argv) {
  poot::diff::SeedRange& r = poot::diff::seedRange();
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    try {
      if (a.starts_with("--seeds=")) {
        std::string v(a.substr(8));
        size_t colon = v.find(':');
        if (colon == std::string::npos) throw std::invalid_argument("no ':'");
        r.first = std::stoull(v.substr(0, colon));
        r.last = std::stoull(v.substr(colon + 1));
      } else if (a.starts_with("--seed=")) {
        r.first = std::stoull(std::string(a.substr(7)));
        r.last = r.first + 1;
      } else if (a == "--verbose") {
        r.verbose = true;
      } else if (a == "--print") {
        r.print = true;
      } else {
        rest.push_back(argv[i]);
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "%s: bad option %s (--seeds=FIRST:LAST, --seed=S)\n", argv[0], argv[i]);
      return 2;
    }
  }
  doctest::Context ctx(int(rest.size()), rest.data());
  return ctx.run();
}

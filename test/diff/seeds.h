// The seeds the differential test runs, [first, last), which main.cpp takes
// from the command line (--seeds=FIRST:LAST, or --seed=S for one).
#pragma once

#include <cstdint>

namespace poot::diff {

struct SeedRange {
  uint64_t first = 1, last = 101;
  bool verbose = false;  // print each seed's recipe as it runs
  bool print = false;    // print each seed's graph and bound graph (.pg text)
};
SeedRange& seedRange();

}  // namespace poot::diff

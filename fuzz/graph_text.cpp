// libFuzzer target: any bytes given to the .pg parser, then to the verifier
// and printer when they parse, must give a graph or an error, never a crash,
// and a graph that verifies must print back to text that parses to the same
// printed text.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ir/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto g = poot::parseGraph(text, "fuzz.pg");
  if (!g || !poot::verify(*g)) return 0;
  std::string printed = poot::printGraph(*g);
  auto again = poot::parseGraph(printed, "printed.pg");
  if (!again || poot::printGraph(*again) != printed) std::abort();
  return 0;
}

// libFuzzer target: any bytes given to the .pgb reader and the verifier must
// give a graph or an error, never a crash; a graph that verifies must print
// and write back to the same bytes' graph.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "ir/binary.h"
#include "ir/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto g = poot::readBinaryGraph(bytes, "fuzz.pgb");
  if (!g || !poot::verify(*g)) return 0;
  auto back = poot::readBinaryGraph(poot::writeBinaryGraph(*g), "back.pgb");
  if (!back || poot::printGraph(*back) != poot::printGraph(*g)) std::abort();
  return 0;
}

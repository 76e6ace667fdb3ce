// libFuzzer target: any bytes given to the .npy reader must give a tensor or
// a typed error, never a crash; a tensor that reads must write back to bytes
// that read as the same tensor.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "oracle/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto t = poot::parseNpy(bytes, "fuzz.npy");
  if (!t) return 0;
  auto back = poot::parseNpy(poot::npyBytes(*t), "back.npy");
  if (!back || back->type != t->type || back->bytes != t->bytes) std::abort();
  return 0;
}

// libFuzzer target: any bytes given to the .safetensors reader, and to the
// shard index reader (model.safetensors.index.json), must give tensors (a
// weight map) or a typed error, never a crash. Every input goes to both: the
// corpus holds files of each kind. Tensors that read must write back to bytes
// that read as the same tensors.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "oracle/checkpoint.h"
#include "oracle/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)poot::parseShardIndex(bytes, "fuzz.index.json");
  auto m = poot::parseSafetensors(bytes, "fuzz.safetensors");
  if (!m) return 0;
  auto back = poot::parseSafetensors(poot::safetensorsBytes(*m), "back.safetensors");
  if (!back || back->size() != m->size()) std::abort();
  for (const auto& [name, t] : *m) {
    auto it = back->find(name);
    if (it == back->end() || it->second.type != t.type || it->second.bytes != t.bytes) std::abort();
  }
  return 0;
}

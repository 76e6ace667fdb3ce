// libFuzzer target: any text given to the model config reader (a Hugging
// Face config.json) must give a config or a typed error naming the field,
// never a crash or an uncaught exception; a config that reads must resolve
// its default step (or refuse it with a typed error).
#include <cstdint>
#include <string>

#include "trace/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto cfg = poot::trace::parseConfig(text, "config.json");
  if (cfg) (void)poot::trace::resolveStep(*cfg, poot::trace::TraceOptions{});
  return 0;
}

// libFuzzer target: any text given as a chat template must parse or give a
// typed error naming its line and column, and a template that parses must
// render a small conversation or give a typed error, within its bounds
// (steps and output, set small here so that no input runs long), never a
// crash, a hang or an uncaught exception.
#include <cstdint>
#include <string>

#include "text/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string source(reinterpret_cast<const char*>(data), size);
  auto t = poot::text::ChatTemplate::parse(source);
  if (!t) return 0;
  poot::text::RenderLimits limits;
  limits.maxSteps = 200000;
  limits.maxOutput = size_t(1) << 20;
  limits.now = 0;
  (void)t->render(R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hé {{x}}"},
    {"role": "assistant", "content": "<think>\nr\n</think>\n\na"}], "add_generation_prompt": true,
    "bos_token": "<s>", "eos_token": "</s>", "tools": null, "d": {"k": [1, 2.5, null, true]}})",
                  limits);
  return 0;
}

// Chat templates as Hugging Face publishes them: the Jinja2 `chat_template`
// of a model's tokenizer_config.json, rendered as transformers'
// apply_chat_template renders it (Jinja with trim_blocks and lstrip_blocks,
// its tojson, raise_exception and strftime_now, the special tokens as
// variables). poot implements the subset of Jinja published templates use
// (docs/text.md, "Chat templates", lists it); anything else is refused with
// a typed error. Every error is a value naming the template's line and
// column; a hostile template is bounded (nesting, steps, output size).
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/result.h"

namespace poot::text {

struct RenderLimits {
  size_t maxOutput = size_t(16) << 20;  // bytes of output, and of any one string or list
  int64_t maxSteps = 10'000'000;        // expressions and statements evaluated (large values count more: jinja_eval.cpp)
  std::time_t now = -1;                 // the time strftime_now formats (local time); -1: the clock's
};

class ChatTemplate {
 public:
  // A Template error (or Unsupported for a Jinja tag poot does not
  // implement) at its line and column where source does not parse.
  static TextResult<ChatTemplate> parse(const std::string& source);

  // The text of the template with `variablesJson`, a JSON object whose
  // members are the variables (any other name is undefined). Errors:
  // BadInput (not a JSON object), Template, Unsupported, Raised (the
  // template's raise_exception).
  TextResult<std::string> render(std::string_view variablesJson, const RenderLimits& limits = {}) const;

  struct Parsed;  // the statements (jinja_ast.h)

 private:
  std::shared_ptr<const Parsed> parsed_;
};

// What tokenizer_config.json says about chat: its template and the special
// tokens the template sees.
class ChatConfig {
 public:
  // PATH: a model directory, or its tokenizer.json or tokenizer_config.json;
  // tokenizer_config.json is read beside it. `chat_template` is a string or
  // a list of {name, template} (the one named "default"); without it,
  // chat_template.jinja beside the config; with neither, a Format error.
  // bos_token, eos_token, unk_token, pad_token, sep_token, cls_token and
  // mask_token are strings or {"content": ...} objects (null: left out).
  static TextResult<ChatConfig> load(const std::string& path);

  // The conversation `messagesJson` (a JSON array of message objects, as
  // transformers takes them) rendered with `messages`, `add_generation_prompt`,
  // `tools` and `documents` (none) and the special tokens as variables.
  TextResult<std::string> apply(std::string_view messagesJson, bool addGenerationPrompt, const RenderLimits& limits = {}) const;

  const std::vector<std::pair<std::string, std::string>>& specialTokens() const { return tokens_; }

 private:
  ChatTemplate template_;
  std::vector<std::pair<std::string, std::string>> tokens_;  // bos_token -> "<s>", ...
};

}  // namespace poot::text

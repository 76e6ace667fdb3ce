// The text inputs of `poot generate`: the prompts file (one prompt a line,
// token ids separated by spaces or tabs; every id an integer in [0, vocab);
// a line whose first word is @NAME runs on the adapter --adapter NAME=DIR
// named, the others on the base model)
// (or, with --chat, conversations) and the end-of-sequence ids of a model config (`eos_token_id` of a
// config.json or generation_config.json: an integer or a list of them),
// and the tokenizer's errors as diagnostics.
// Errors name the file, and the line and column where there is one.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace poot {

struct Prompt {
  std::vector<int32_t> tokens;
  int line = 0;         // 1-based, in the prompts file
  std::string adapter;  // empty: the base model
};

// Every line a prompt: an empty line (or one with only @NAME), a word that
// is not a decimal integer (an @NAME past the first word among them) or an
// id outside [0, vocab) is a Syntax or Range error at its line and column,
// and so is an @NAME not in `adapters` (a Usage error there); a file with no
// prompt is an error too. With a tokenizer each line (after an optional
// @NAME and the one space or tab after it) is text, encoded with the
// template's special tokens; text the tokenizer refuses (not UTF-8) or an
// id it gives outside [0, vocab) is an error at its line. With a chat
// config too, each line's text is a conversation (a JSON array of
// messages) rendered through its template with add_generation_prompt and
// encoded without adding special tokens (the template writes them), as
// transformers' apply_chat_template(tokenize=True); messages that are not
// JSON or that the template refuses are an error at their line.
Expected<std::vector<Prompt>> readPrompts(const std::string& path, int64_t vocab,
                                          const std::set<std::string>& adapters,
                                          const text::Tokenizer* tokenizer = nullptr,
                                          const text::ChatConfig* chat = nullptr);

// A text-layer error (lib/text) as a diagnostic, its message after
// `where` when given: an unsupported component is a capability refusal
// (exit 3), a file that cannot be read Io, text or an id the tokenizer
// refuses or a conversation the chat template refuses Bind, a chat template
// that does not parse or fails as it renders Syntax, a malformed file Format;
// at loc where given.
Error textError(const text::TextError& e, const std::string& where = {}, Loc loc = {});

// The eos_token_id of a config file; none when the file has no such key.
Expected<std::set<int32_t>> readEosIds(const std::string& configPath);

// The end-of-sequence ids a command stops at: `given` (--eos) when any, else
// eos_token_id of `config` when one is named, else of generation_config.json
// or config.json in a `weights` directory, else none.
Expected<std::set<int32_t>> eosIds(const std::vector<int32_t>& given, const std::string& config,
                                   const std::string& weights);

}  // namespace poot

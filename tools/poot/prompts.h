// The text inputs of `poot generate`: the prompts file (one prompt a line,
// token ids separated by spaces or tabs; every id an integer in [0, vocab))
// and the end-of-sequence ids of a model config (`eos_token_id` of a
// config.json or generation_config.json: an integer or a list of them).
// Errors name the file, and the line and column where there is one.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ir/diag.h"

namespace poot {

struct Prompt {
  std::vector<int32_t> tokens;
  int line = 0;  // 1-based, in the prompts file
};

// Every line a prompt: an empty line, a word that is not a decimal integer
// or an id outside [0, vocab) is a Syntax or Range error at its line and
// column; a file with no prompt is an error too.
Expected<std::vector<Prompt>> readPrompts(const std::string& path, int64_t vocab);

// The eos_token_id of a config file; none when the file has no such key.
Expected<std::set<int32_t>> readEosIds(const std::string& configPath);

}  // namespace poot

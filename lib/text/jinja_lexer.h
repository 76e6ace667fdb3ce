// A chat template's source as tokens (docs/text.md, "Chat templates"):
// text between tags, the tags' delimiters and the words inside them.
// Whitespace is handled here, as Jinja's lexer does with transformers'
// settings (trim_blocks, lstrip_blocks): `{%-`, `{{-` and `{#-` take every
// whitespace character before the tag, `-%}`, `-}}` and `-#}` every one
// after it; otherwise a `{%` or `{#` alone on its line after spaces and
// tabs takes them (not with `{%+`), and a `%}` or `#}` takes one newline
// after it (not with `+%}`). Comments leave nothing. "\r\n" and "\r" read
// as "\n", and one newline at the source's end is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace poot::text::jinja {

struct Token {
  enum Kind { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, End } kind;
  std::string text;  // Text, Name, String (unescaped), Op
  int64_t i = 0;
  double f = 0;
  int line = 0, column = 0;
};

// The tokens of source, ending with End; an unterminated tag, comment or
// string or a character no token starts with is a Template Failure.
std::vector<Token> lex(const std::string& source);

}  // namespace poot::text::jinja

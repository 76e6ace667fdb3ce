// Errors of the text layer as values. lib/text stands on nothing of poot's
// (docs/text.md), so, as lib/kv, it has its own small error type: a TextError
// carries a kind (for a caller to act on) and a lower-case message naming the
// file and field where there is one (for a person), and a chat template's
// line and column where the error is in one; TextResult<T> is a value
// or a TextError.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace poot::text {

enum class TextErrorKind {
  Io,           // a file could not be read
  Format,       // a file is not what its format says (bad JSON, a missing or mistyped field)
  Unsupported,  // a well-formed component poot does not implement (named in the message)
  BadInput,     // text that is not UTF-8, an id the vocabulary does not have, messages that are not a conversation
  Template,     // a chat template that does not parse, or fails as it renders (a type error, a limit passed)
  Raised,       // the chat template refused the conversation (its raise_exception)
};

struct TextError {
  TextErrorKind kind;
  std::string message;
  int line = 0, column = 0;  // where in a chat template (1-based), 0 where none
};

template <class T>
class [[nodiscard]] TextResult {
 public:
  TextResult(T value) : v_(std::move(value)) {}
  TextResult(TextError error) : v_(std::move(error)) {}

  explicit operator bool() const { return v_.index() == 0; }
  T& operator*() { assert(*this); return std::get<0>(v_); }
  const T& operator*() const { assert(*this); return std::get<0>(v_); }
  T* operator->() { return &**this; }
  const T* operator->() const { return &**this; }
  const TextError& error() const { assert(!*this); return std::get<1>(v_); }

 private:
  std::variant<T, TextError> v_;
};

}  // namespace poot::text

// Diagnostics as values. Every library function that can fail on user input
// returns Expected<T>: either the value or an Error that carries a kind, the
// place in the input it concerns and a lower-case message with no final
// period. Nothing in lib/ prints or exits; the tools format errors with
// Error::str() and map kinds to exit codes.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace poot {

// A place in an input file. line and col are 1-based; 0 means "the file as a
// whole" (a missing field). A binary file has no lines: `item` names the
// record instead ("eqn 3", "value 7").
struct Loc {
  std::string file;
  int line = 0;
  int col = 0;
  std::string item;

  // "file:line:col", "file:item" or "file", as much as is known.
  std::string str() const;
};

enum class ErrorKind {
  Io,       // a file could not be read or written
  Syntax,   // text that does not follow its grammar
  Verify,   // a well-formed graph that breaks a type, shape or storage rule
  Profile,  // a device profile field is missing, mistyped or nonsensical
  Format,   // a binary file that is not what it claims to be
  Usage,    // a command line that cannot be acted on
  Bind,     // a bound input, weight or slot that does not fit the graph
  Range,    // a slot value outside its declared range
  Capability,  // the device cannot hold what the graph needs (exit code 3)
  Memory,   // host work past the host memory budget (ir/budget.h)
};

struct Error {
  ErrorKind kind;
  Loc loc;
  std::string message;
  // For ErrorKind::Capability, which check refused: AttentionLds,
  // ScratchBytes, GridLimit, DtypeLowering, BindingLimit, MemoryBudget. The
  // figures that decided it are in the message.
  std::string capability;

  // "file:line:col: error: message" (or "file:item: error: message"),
  // dropping the parts Loc does not have.
  std::string str() const;
};

inline Error makeError(ErrorKind kind, Loc loc, std::string message) {
  return Error{kind, std::move(loc), std::move(message)};
}

template <class T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Error error) : v_(std::move(error)) {}

  explicit operator bool() const { return v_.index() == 0; }
  T& operator*() { assert(*this); return std::get<0>(v_); }
  const T& operator*() const { assert(*this); return std::get<0>(v_); }
  T* operator->() { return &**this; }
  const T* operator->() const { return &**this; }
  const Error& error() const { assert(!*this); return std::get<1>(v_); }
  T take() { return std::move(**this); }

 private:
  std::variant<T, Error> v_;
};

// For functions that produce nothing but can fail.
struct Ok {};
using Status = Expected<Ok>;
inline Status ok() { return Ok{}; }

}  // namespace poot

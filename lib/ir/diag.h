// Diagnostics as values. Every library function that can fail on user input
// returns Expected<T>: either the value or an Error that carries a kind, the
// place in the input it concerns and a lower-case message with no final
// period. Nothing in lib/ prints or exits; the tools format errors (and the
// warnings and notes they print, Errors of another severity) with
// Error::str() or Error::json() and map kinds to exit codes.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

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
  Trust,    // a plan that is not signed by a trusted key (runtime/signature.h)
};

// "Io", "Syntax", ...: the enumerator's name.
const char* kindName(ErrorKind kind);

enum class Severity { Error, Warning, Note };

// "error", "warning", "note".
const char* severityName(Severity s);

// A figure that decided a diagnostic, by a stable snake_case name: for a
// refusal what was needed and the device's limit, the limit named as the
// profile field it comes from ("workgroup_memory_bytes").
struct Figure {
  std::string name;
  std::variant<int64_t, std::string> value;
};

struct Error {
  ErrorKind kind;
  Loc loc;
  std::string message;
  // For ErrorKind::Capability, which check refused: AttentionLds,
  // ScratchBytes, GridLimit, DtypeLowering, BindingLimit, MemoryBudget, ...
  std::string capability;
  // What decided it, in the order the message names them (the message
  // words them too); empty where the site computed none.
  std::vector<Figure> figures;
  // An Error is an error; a tool also prints its warnings and notes as
  // Errors of another severity.
  Severity severity = Severity::Error;

  // The capability check where there is one, else kindName(kind).
  std::string kindStr() const;

  // "file:line:col: error: message" (or "file:item: error: message"),
  // dropping the parts Loc does not have; a capability refusal ends with its
  // check in brackets, "... but the device has 1024 [AttentionLds]".
  std::string str() const;

  // The same as one line of JSON (no newline), fields always present and in
  // this order: file, line, column, item ("", 0, 0 and "" where Loc has
  // none), severity, kind (kindStr()), message, figures (an object of the
  // figures by name). Invalid UTF-8 becomes U+FFFD.
  std::string json() const;
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

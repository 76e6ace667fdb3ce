// How pootc and poot print diagnostics on stderr: each error, warning and
// note as one line, the compiler-style text (Error::str()) or, with
// --diagnostics=json, one JSON object (Error::json()); and the exit code an
// error's kind calls for: 0 ok, 1 a diagnostic about the input, 2 bad usage,
// 3 a capability refusal.
#pragma once

#include <string>

#include "ir/diag.h"

namespace poot {

enum class DiagFormat { Text, Json };

// Set once, from the command line, before anything is printed.
void setDiagnosticFormat(DiagFormat f);
DiagFormat diagnosticFormat();

// Prints an error and returns the exit code its kind calls for.
int report(const Error& e);

// Prints a warning or a note (an Error of that severity).
void notice(const Error& e);

// A progress line for a person at a terminal; left out in the JSON form.
void progress(const std::string& line);

}  // namespace poot

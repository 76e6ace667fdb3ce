// The command-line part both tools share: --diagnostics=text|json and what a
// command line that does not parse prints. Only the tools' main.cpp include
// it, CLI11 being header-only and slow to compile.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "diagnostics.h"

namespace poot {

// Adds --diagnostics to `app` (accepted before a subcommand or among its
// options), parses the command line and sets the diagnostic format. nullopt
// to go on; else the exit code: 0 after --help, 2 for a command line that
// does not parse, its complaint printed in the format it asked for (as text
// when the parser stopped before reading --diagnostics).
inline std::optional<int> parseCommandLine(CLI::App& app, int argc, char** argv) {
  std::string format = "text";
  CLI::Option* opt = app.add_option("--diagnostics", format,
                                    "how errors, warnings and notes print on stderr: text (file:line:col: error: "
                                    "message) or json (one object a line, docs/diagnostics.md) (default: text)")
                         ->check(CLI::IsMember({"text", "json"}));
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0 && opt->count() && opt->results().back() == "json") {
      setDiagnosticFormat(DiagFormat::Json);
      return report(makeError(ErrorKind::Usage, {}, e.what()));
    }
    return app.exit(e) == 0 ? 0 : 2;
  }
  setDiagnosticFormat(format == "json" ? DiagFormat::Json : DiagFormat::Text);
  return std::nullopt;
}

}  // namespace poot

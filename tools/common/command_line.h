// The command-line part both tools share: --diagnostics=text|json and what a
// command line that does not parse prints. Only the tools' main.cpp include
// it, CLI11 being header-only and slow to compile.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "diagnostics.h"

namespace poot {

// A float option's check: a finite number in [lo, hi] (above lo, not at it,
// when `aboveLo`), NaN and infinities refused, the bounds stated as written
// (CLI11's Range prints them with six decimals, 1e-9 as 0.000000).
inline CLI::Validator floatIn(double lo, double hi, bool aboveLo = false) {
  auto text = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    return std::string(buf);
  };
  std::string range = (aboveLo ? "(" : "[") + text(lo) + ", " + text(hi) + "]";
  return CLI::Validator(
      [=](std::string& in) -> std::string {
        char* end = nullptr;
        double v = std::strtod(in.c_str(), &end);
        bool inside = end != in.c_str() && *end == '\0' && (aboveLo ? v > lo : v >= lo) && v <= hi;
        return inside ? std::string() : "value " + in + " is not a number in " + range;
      },
      "FLOAT in " + range);
}

// The subcommand of `app` nearest to `word` by edit distance, when one is
// at most two edits away (a typo); empty otherwise.
inline std::string nearestSubcommand(CLI::App& app, const std::string& word) {
  std::string best;
  size_t bestDistance = 3;
  for (CLI::App* sub : app.get_subcommands({})) {
    const std::string& name = sub->get_name();
    std::vector<size_t> row(name.size() + 1);
    for (size_t j = 0; j <= name.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      size_t diagonal = row[0];
      row[0] = i;
      for (size_t j = 1; j <= name.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (word[i - 1] == name[j - 1] ? 0 : 1)});
        diagonal = up;
      }
    }
    if (row[name.size()] < bestDistance) bestDistance = row[name.size()], best = name;
  }
  return best;
}

// Adds --diagnostics and --version (printing `version`) to `app` (accepted
// before a subcommand or among its options), parses the command line and
// sets the diagnostic format. nullopt to go on; else the exit code: 0 after
// --help or --version, 2 for a command line that does not parse, its
// complaint printed in the format it asked for (as text when the parser
// stopped before reading --diagnostics). A first word that is no subcommand
// is named, with the nearest one when it looks like a typo of it.
inline std::optional<int> parseCommandLine(CLI::App& app, int argc, char** argv, const std::string& version) {
  std::string format = "text";
  CLI::Option* opt = app.add_option("--diagnostics", format,
                                    "how errors, warnings and notes print on stderr: text (file:line:col: error: "
                                    "message) or json (one object a line, docs/diagnostics.md) (default: text)")
                         ->check(CLI::IsMember({"text", "json"}));
  app.set_version_flag("--version", version, "print the version and exit");
  for (CLI::App* sub : app.get_subcommands({})) sub->fallthrough();
  // The first word that is not an option (or --diagnostics' value).
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "--diagnostics" && i + 1 < argc) {
      json = std::string(argv[++i]) == "json";
      continue;
    }
    if (word.rfind("--diagnostics=", 0) == 0) json = word == "--diagnostics=json";
    if (word.empty() || word[0] == '-') continue;
    std::string names, near = nearestSubcommand(app, word);
    for (CLI::App* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
    if (near == word) break;
    setDiagnosticFormat(json ? DiagFormat::Json : DiagFormat::Text);
    return report(makeError(ErrorKind::Usage, {},
                            "unknown subcommand '" + word + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?") +
                                " (subcommands: " + names + ")"));
  }
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

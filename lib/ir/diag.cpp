// Formatting of diagnostics: the compiler-style "file:line:col: error:" line
// and its JSON form (nlohmann/json, which escapes the strings).
#include "ir/diag.h"

#include <nlohmann/json.hpp>

namespace poot {

namespace {
// How a diagnostic names a file: standard input ("-") as <stdin>.
std::string fileName(const std::string& file) { return file == "-" ? "<stdin>" : file; }
}  // namespace

std::string Loc::str() const {
  std::string out = fileName(file);
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (col > 0) out += ":" + std::to_string(col);
  } else if (!item.empty()) {
    out += ":" + item;
  }
  return out;
}

const char* kindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Io: return "Io";
    case ErrorKind::Syntax: return "Syntax";
    case ErrorKind::Verify: return "Verify";
    case ErrorKind::Profile: return "Profile";
    case ErrorKind::Format: return "Format";
    case ErrorKind::Usage: return "Usage";
    case ErrorKind::Bind: return "Bind";
    case ErrorKind::Range: return "Range";
    case ErrorKind::Capability: return "Capability";
    case ErrorKind::Memory: return "Memory";
    case ErrorKind::Trust: return "Trust";
  }
  return "?";
}

const char* severityName(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "?";
}

std::string Error::kindStr() const { return capability.empty() ? kindName(kind) : capability; }

std::string Error::str() const {
  std::string where = loc.str();
  return (where.empty() ? "" : where + ": ") + severityName(severity) + ": " + message +
         (capability.empty() ? "" : " [" + capability + "]");
}

std::string Error::json() const {
  using json = nlohmann::ordered_json;
  json figs = json::object();
  for (const Figure& f : figures) std::visit([&](const auto& v) { figs[f.name] = v; }, f.value);
  json j = {{"file", fileName(loc.file)},      {"line", loc.line}, {"column", loc.col},   {"item", loc.item},
            {"severity", severityName(severity)}, {"kind", kindStr()}, {"message", message}, {"figures", figs}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace poot

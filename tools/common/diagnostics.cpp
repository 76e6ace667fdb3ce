// The tools' one place that prints diagnostics (diagnostics.h).
#include "diagnostics.h"

#include <cstdio>

namespace poot {

namespace {

DiagFormat format = DiagFormat::Text;

void print(const Error& e) {
  std::string line = format == DiagFormat::Json ? e.json() : e.str();
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

void setDiagnosticFormat(DiagFormat f) { format = f; }
DiagFormat diagnosticFormat() { return format; }

int report(const Error& e) {
  print(e);
  if (e.kind == ErrorKind::Usage) return 2;
  return e.kind == ErrorKind::Capability ? 3 : 1;
}

void notice(const Error& e) { print(e); }

void progress(const std::string& line) {
  if (format == DiagFormat::Text) std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace poot

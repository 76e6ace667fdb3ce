// Formatting of diagnostics in the compiler-style "file:line:col: error:" form.
#include "ir/diag.h"

namespace poot {

std::string Loc::str() const {
  std::string out = file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (col > 0) out += ":" + std::to_string(col);
  } else if (!item.empty()) {
    out += ":" + item;
  }
  return out;
}

std::string Error::str() const {
  std::string where = loc.str();
  return (where.empty() ? "" : where + ": ") + "error: " + message;
}

}  // namespace poot

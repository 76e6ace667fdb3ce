// Whole-file reading and all-or-nothing writing. A failed compile must leave no
// partial output behind, so every output goes through writeFileAtomic: the bytes
// land in a temporary file beside the target and are renamed over it only once
// they are all written.
#pragma once

#include <string>
#include <string_view>

#include "ir/diag.h"

namespace poot {

// A directory is refused as a file that cannot be opened. "-" reads standard
// input to its end (diagnostics name it <stdin>).
Expected<std::string> readFile(const std::string& path);
// An output path that is a symlink writes its target (the link stays); one
// that is a directory, device, FIFO or socket is refused, untouched. "-"
// writes standard output (all at once, at the end, as a file would be).
Status writeFileAtomic(const std::string& path, const std::string& bytes);

// Text read from an input file, fit to quote in a diagnostic: every byte
// outside printable ASCII written as \xHH.
std::string printable(std::string_view text);

}  // namespace poot

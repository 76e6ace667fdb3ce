// Whole-file reading and all-or-nothing writing. A failed compile must leave no
// partial output behind, so every output goes through writeFileAtomic: the bytes
// land in a temporary file beside the target and are renamed over it only once
// they are all written.
#pragma once

#include <string>

#include "ir/diag.h"

namespace poot {

Expected<std::string> readFile(const std::string& path);
Status writeFileAtomic(const std::string& path, const std::string& bytes);

}  // namespace poot

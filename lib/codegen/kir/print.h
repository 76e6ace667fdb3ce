// KIR as text, for `pootc compile --emit=kir`, lit tests and debugging: one
// line a header field, buffer, shared array and variable, then the body with
// nested blocks indented. The form is stable (lit tests check it) and every
// value prints as %N, its instruction index.
#pragma once

#include <string>

#include "codegen/kir/kir.h"

namespace poot::kir {

std::string print(const Kernel& k);

}  // namespace poot::kir

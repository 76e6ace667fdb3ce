// Kernel requests as text: the one-line form that names exactly what a kernel
// generates (op, operand and result types, attributes, schedule). The same
// line is what `--emit=plan-text` shows for a kernel and what the plan key
// hashes, so it is stable: no pointers, no hash-map order, numbers printed
// the way the graph text prints them. The key hashes these lines with
// FNV-1a (ir/hash.h, included here for every user of the key).
#pragma once

#include <cstdint>
#include <string>

#include "ir/hash.h"
#include "plan/plan.h"

namespace poot {

// `{scale=0.125, n_rep=2, key=dense}` in the graph text's syntax, or "" when
// there are none. A list longer than `maxList` items prints as
// `[N values #HASH]`, HASH the FNV-1a of its items' bit patterns (a large
// Constant stays one short line); maxList < 0 prints every item.
std::string printAttrs(const Attrs& attrs, int64_t maxList = 16);

// One line, no newline:
//   Attention(f32[1,4,1,64], f32[1,2,256,64], f32[1,2,256,64]) -> f32[1,4,1,64]
//   {scale=0.125, n_rep=2, key=dense, mask=none, bound=capacity}
//   schedule=streaming lanes=64 splits=1 workgroup=64 memory=16896
// (shown wrapped here). Lists of more than 16 items are abbreviated.
std::string printRequest(const KernelRequest& r);

// The same with every list item: two requests are one kernel exactly when
// these texts are equal (doubles print as the shortest text that reads back
// bit for bit, so -0 and 0 differ; every NaN prints as nan).
std::string requestIdentity(const KernelRequest& r);

}  // namespace poot

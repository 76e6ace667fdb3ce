// The host memory budget: the most bytes that one tool's own host data may
// take (the oracle's tensors, the parameters the generator draws, the graph
// the tracer builds). It is the host's physical memory, or the value of
// POOT_HOST_MEMORY_BYTES when that is set (a positive decimal integer), for
// a host shared with other work and for tests. Work past it is refused with
// an ErrorKind::Memory error before the bytes are allocated, rather than
// ending in std::bad_alloc or in growth until the system stops the process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ir/diag.h"

namespace poot {

// The budget in bytes; a Usage error when POOT_HOST_MEMORY_BYTES is set to
// anything but a positive decimal integer.
Expected<int64_t> hostMemoryBudget();

// ok() when `bytes` fit the budget, else an ErrorKind::Memory error at loc:
// "WHAT needs N bytes of host memory, more than the budget of B bytes (...)".
Status checkHostBytes(int64_t bytes, const std::string& what, Loc loc = {});

// body()'s exit code, or, when a host allocation in it fails despite the
// budget (std::bad_alloc, std::length_error: the system had less to give),
// a Memory error for the tool to report.
Expected<int> catchingOutOfMemory(const std::function<int()>& body);

// a + b and n * size, or INT64_MAX where they would pass it (all
// non-negative).
inline int64_t addBytes(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }
inline int64_t mulBytes(int64_t n, int64_t size) { return size != 0 && n > INT64_MAX / size ? INT64_MAX : n * size; }

}  // namespace poot

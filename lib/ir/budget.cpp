// The budget is read once per call (the environment can change in a test),
// the physical memory from sysconf.
#include "ir/budget.h"

#include <unistd.h>

#include <cstdlib>
#include <new>
#include <stdexcept>

namespace poot {

Expected<int64_t> hostMemoryBudget() {
  if (const char* env = std::getenv("POOT_HOST_MEMORY_BYTES")) {
    std::string s = env;
    int64_t v = 0;
    bool digits = !s.empty() && s[0] != '0';
    for (char c : s) {
      if (c < '0' || c > '9' || v > (INT64_MAX - (c - '0')) / 10) {
        digits = false;
        break;
      }
      v = v * 10 + (c - '0');
    }
    if (!digits)
      return makeError(ErrorKind::Usage, {}, "POOT_HOST_MEMORY_BYTES='" + s + "' is not a positive integer of bytes");
    return v;
  }
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return INT64_MAX;  // not reported: no budget of our own
  return int64_t(pages) > INT64_MAX / page ? INT64_MAX : int64_t(pages) * page;
}

Expected<int> catchingOutOfMemory(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return makeError(ErrorKind::Memory, {},
                   "out of host memory: an allocation failed (the system had less free memory than the host memory "
                   "budget; POOT_HOST_MEMORY_BYTES sets a lower one)");
}

Status checkHostBytes(int64_t bytes, const std::string& what, Loc loc) {
  auto budget = hostMemoryBudget();
  if (!budget) return budget.error();
  if (bytes <= *budget) return ok();
  const char* source = std::getenv("POOT_HOST_MEMORY_BYTES") ? "POOT_HOST_MEMORY_BYTES" : "the host's physical memory";
  return makeError(ErrorKind::Memory, std::move(loc),
                   what + " needs " + std::to_string(bytes) + " bytes of host memory, more than the budget of " +
                       std::to_string(*budget) + " bytes (" + source + ")");
}

}  // namespace poot

// poot probe: a device profile of the live device (profile_text.h),
// written atomically.
#include "ir/io.h"
#include "profile_text.h"
#include "runtime/backends/backends.h"
#include "tool.h"

namespace poot {

int runProbe(const ProbeOptions& opts) {
  auto backend = rt::openBackend(opts.backend, opts.device);
  if (!backend) return report(backend.error());
  if (auto s = writeFileAtomic(opts.output, profileText((*backend)->info())); !s) return report(s.error());
  return 0;
}

}  // namespace poot

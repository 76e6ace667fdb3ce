// poot kernels: what the driver made of each kernel of a plan. The plan is
// read and verified and checked against the live device as poot run checks
// it (no parameter is read and no buffer made), every kernel a dispatch runs
// is built once, as a Session builds it, and after a line naming the device
// each kernel has one line, in plan order: its entry and workgroup size
// (the plan's), then the figures the driver gives (Backend::kernelStats),
// then whatever else the driver reports, a line each, "  NAME = VALUE". A
// driver that reports nothing still has every kernel built and named, and
// its refusal ends the command (exit 3).
#include <cstdio>
#include <optional>

#include "runtime/backends/backends.h"
#include "runtime/session.h"
#include "tool.h"

namespace poot {

int runKernels(const KernelsOptions& opts) {
  auto trusted = rt::loadTrustedKeys(opts.trust);
  if (!trusted) return report(trusted.error());
  auto plan = rt::loadPlanFile(opts.plan, *trusted);
  if (!plan) return report(plan.error());
  auto backend = rt::openBackend(opts.backend, opts.device);
  if (!backend) return report(backend.error());
  rt::Backend& b = **backend;
  if (auto s = rt::checkDevice(*plan, b.info(), {opts.allowOtherDevice}); !s) return report(s.error());
  auto kernels = rt::buildKernels(*plan, b);
  if (!kernels) return report(kernels.error());

  std::printf("device %s, driver %s\n", b.info().name.c_str(), b.info().driver.c_str());
  std::optional<Error> unreported;  // why the driver gives no figures
  for (size_t k = 0; k < kernels->size(); ++k) {
    const rt::Kernel& kn = plan->kernels[k];
    std::string line = "kernel " + kn.entry + "  workgroup " + std::to_string(kn.workgroupSize);
    rt::KernelStats s;
    if ((*kernels)[k] < 0) {
      line += "  not built: no dispatch runs it";
    } else if (auto got = b.kernelStats((*kernels)[k])) {
      s = got.take();
    } else if (got.error().kind == ErrorKind::Capability) {
      unreported = got.error();
    } else {
      return report(got.error());
    }
    if (s.registers) line += "  registers " + std::to_string(*s.registers);
    if (s.localBytes) line += "  local " + std::to_string(*s.localBytes) + " B";
    if (s.workgroupMemoryBytes) line += "  workgroup memory " + std::to_string(*s.workgroupMemoryBytes) + " B";
    if (s.residentWorkgroups) line += "  resident " + std::to_string(*s.residentWorkgroups) + " a compute unit";
    std::printf("%s\n", line.c_str());
    for (const auto& [name, value] : s.driver) std::printf("  %s = %s\n", name.c_str(), value.c_str());
  }
  return unreported ? report(*unreported) : 0;
}

}  // namespace poot

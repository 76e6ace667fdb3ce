// pootc compile: read and verify the graph and the device profile, run the
// pass pipeline, and emit what --emit asks for. Output is written only when
// everything before it succeeded, and atomically.
#include <cstdio>

#include "driver.h"
#include "ir/binary.h"
#include "ir/io.h"
#include "ir/text.h"
#include "passes/pass.h"
#include "plan/buffers.h"
#include "plan/plan_file.h"
#include "plan/plan_text.h"
#include "plan/planner.h"
#include "plan/profile.h"

namespace poot {

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Error usage(std::string msg) { return makeError(ErrorKind::Usage, {}, std::move(msg)); }

// The plan stage: kernels and dispatches (planGraph), buffers and the arena
// (planBuffers), the device's memory budget, then the plan file or its text.
int emitPlan(const Graph& g, const DeviceProfile& d, const CompileOptions& opts) {
  auto plan = planGraph(g, d);
  if (!plan) return report(plan.error());
  if (auto s = planBuffers(*plan); !s) return report(s.error());
  if (auto s = checkMemoryBudget(*plan, d); !s) return report(s.error());
  return emitBytes(opts.emit == "plan" ? writePlan(*plan) : printPlan(*plan), opts.output);
}

std::string passNames() {
  std::string out;
  for (const Pass& p : pipeline()) out += std::string(out.empty() ? "" : ", ") + p.name;
  return out;
}

}  // namespace

int report(const Error& e) {
  std::fprintf(stderr, "%s\n", e.str().c_str());
  if (e.kind == ErrorKind::Usage) return 2;
  return e.kind == ErrorKind::Capability ? 3 : 1;
}

int runCompile(const CompileOptions& opts) {
  if (!opts.printAfter.empty() && opts.printAfter != "all" && !findPass(opts.printAfter))
    return report(usage("--print-after: unknown pass '" + opts.printAfter + "' (passes: " + passNames() + ", or all)"));
  if (!opts.stopAfter.empty() && !findPass(opts.stopAfter))
    return report(usage("--stop-after: unknown pass '" + opts.stopAfter + "' (passes: " + passNames() + ")"));
  if (opts.emit == "plan" && (opts.output.empty() || opts.output == "-"))
    return report(usage("--emit=plan writes a binary plan file: name it with -o FILE.plan (or use --emit=plan-text)"));
  auto graph = loadGraph(opts.graph);
  if (!graph) return report(graph.error());
  auto profile = loadProfile(opts.device);
  if (!profile) return report(profile.error());

  PassContext ctx;
  for (int i = 0; i < 3; ++i) ctx.gridLimits[i] = profile->grid_limits[i];
  PipelineOptions popts;
  popts.stopAfter = opts.stopAfter;
  popts.afterPass = [&](const Pass& p, const Graph& g, bool changed) {
    if (opts.printAfter != "all" && opts.printAfter != p.name) return;
    std::fprintf(stderr, "# after %s (%s)\n%s", p.name, changed ? "changed" : "unchanged", printGraph(g).c_str());
    // The ranges pass changes no eqn: what it computed is shown as comments.
    if (std::string(p.name) == "ranges" && ctx.ranges) std::fprintf(stderr, "%s", ctx.ranges->print(g).c_str());
  };
  if (auto s = runPipeline(*graph, ctx, popts); !s) return report(s.error());
  if (opts.remarks)
    for (const Remark& r : ctx.remarks) {
      std::string where = r.loc.str();
      std::fprintf(stderr, "%s%sremark: [%s] %s: %s\n", where.c_str(), where.empty() ? "" : ": ", r.pass.c_str(),
                   r.eqn.c_str(), r.message.c_str());
    }

  if (opts.emit == "kir")
    return report(usage("--emit=kir is not available yet: kernels are generated in issue 6 (use --emit=graph, plan-text or plan)"));
  if (opts.emit == "plan" || opts.emit == "plan-text") return emitPlan(*graph, *profile, opts);
  return emitGraph(*graph, opts.output);
}

int emitGraph(const Graph& g, const std::string& output) {
  std::string bytes = endsWith(output, ".pgb") ? writeBinaryGraph(g) : printGraph(g);
  return emitBytes(bytes, output);
}

int emitBytes(const std::string& bytes, const std::string& output) {
  if (output.empty() || output == "-") {
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return 0;
  }
  if (auto s = writeFileAtomic(output, bytes); !s) return report(s.error());
  return 0;
}

}  // namespace poot

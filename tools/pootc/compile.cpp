// pootc compile: read and verify the graph and the device profile, run the
// pass pipeline, and emit what --emit asks for. Output is written only when
// everything before it succeeded, and atomically.
#include <cstdio>

#include "driver.h"
#include "ir/binary.h"
#include "ir/io.h"
#include "ir/text.h"
#include "passes/pass.h"
#include "plan/profile.h"

namespace poot {

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Error usage(std::string msg) { return makeError(ErrorKind::Usage, {}, std::move(msg)); }

std::string passNames() {
  std::string out;
  for (const Pass& p : pipeline()) out += std::string(out.empty() ? "" : ", ") + p.name;
  return out;
}

}  // namespace

int report(const Error& e) {
  std::fprintf(stderr, "%s\n", e.str().c_str());
  return e.kind == ErrorKind::Usage ? 2 : 1;
}

int runCompile(const CompileOptions& opts) {
  if (!opts.printAfter.empty() && opts.printAfter != "all" && !findPass(opts.printAfter))
    return report(usage("--print-after: unknown pass '" + opts.printAfter + "' (passes: " + passNames() + ", or all)"));
  if (!opts.stopAfter.empty() && !findPass(opts.stopAfter))
    return report(usage("--stop-after: unknown pass '" + opts.stopAfter + "' (passes: " + passNames() + ")"));
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
  };
  if (auto s = runPipeline(*graph, ctx, popts); !s) return report(s.error());
  if (opts.remarks)
    for (const Remark& r : ctx.remarks) {
      std::string where = r.loc.str();
      std::fprintf(stderr, "%s%sremark: [%s] %s: %s\n", where.c_str(), where.empty() ? "" : ": ", r.pass.c_str(),
                   r.eqn.c_str(), r.message.c_str());
    }

  if (opts.emit != "graph")
    return report(usage("--emit=" + opts.emit + " is not available yet: only the graph stage is built (use --emit=graph)"));
  bool binary = endsWith(opts.output, ".pgb");
  std::string bytes = binary ? writeBinaryGraph(*graph) : printGraph(*graph);
  if (opts.output.empty() || opts.output == "-") {
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return 0;
  }
  if (auto s = writeFileAtomic(opts.output, bytes); !s) return report(s.error());
  return 0;
}

}  // namespace poot

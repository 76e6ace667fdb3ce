// pootc compile: read and verify the graph and the device profile, run the
// pass pipeline, and emit what --emit asks for. Output is written only when
// everything before it succeeded, and atomically.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include <unistd.h>

#include "codegen/codegen.h"
#include "codegen/kir/print.h"
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
#include "plan/schedule.h"
#include "runtime/signature.h"

namespace poot {

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Expected<DeviceProfile> deviceProfile(const std::string& device) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(device, ec) || device.find('/') != std::string::npos || endsWith(device, ".yaml"))
    return loadProfile(device);
  fs::path installed = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "share/poot/targets";
  std::string shipped;
  for (const fs::path& dir : {installed, fs::path(POOT_SOURCE_TARGETS)}) {
    fs::path file = dir / (device + ".yaml");
    if (fs::exists(file, ec)) return loadProfile(file.string());
    if (shipped.empty() && fs::is_directory(dir, ec)) {
      std::vector<std::string> names;
      for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
        if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
      std::sort(names.begin(), names.end());
      for (const std::string& n : names) shipped += (shipped.empty() ? "" : ", ") + n;
    }
  }
  return makeError(ErrorKind::Io, Loc{device},
                   "no such file, and no shipped target of that name (" +
                       (shipped.empty() ? std::string("none found") : "shipped: " + shipped) + ")");
}

namespace {

Error usage(std::string msg) { return makeError(ErrorKind::Usage, {}, std::move(msg)); }

// --time-phases: wall time of each phase since the previous mark, printed
// to stderr when the compile ends (successfully or not).
class PhaseTimer {
 public:
  explicit PhaseTimer(bool on) : on_(on), last_(std::chrono::steady_clock::now()) {}
  ~PhaseTimer() {
    if (!on_ || phases_.empty()) return;
    double total = 0;
    for (const auto& [name, secs] : phases_) {
      std::fprintf(stderr, "time %-18s %9.4f s\n", name.c_str(), secs);
      total += secs;
    }
    std::fprintf(stderr, "time %-18s %9.4f s\n", "total", total);
  }
  void mark(std::string phase) {
    auto now = std::chrono::steady_clock::now();
    phases_.emplace_back(std::move(phase), std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

 private:
  bool on_;
  std::chrono::steady_clock::time_point last_;
  std::vector<std::pair<std::string, double>> phases_;
};

// The plan stage: kernels and dispatches (planGraph), buffers and the arena
// (planBuffers), the device's memory budget.
Expected<Plan> makePlan(const Graph& g, const DeviceProfile& d, const CompileOptions& opts, PhaseTimer& timer) {
  std::vector<ScheduleNote> notes;
  auto plan = planGraph(g, d, &notes);
  if (!plan) return plan.error();
  if (opts.remarks)
    for (const ScheduleNote& n : notes) {
      const Eqn& e = g.eqns[size_t(n.eqn)];
      std::string where = e.loc.str();
      const Kernel& k = plan->kernels[size_t(n.kernel)];
      std::fprintf(stderr, "%s%sremark: [planner] %%%s: %s: %s\n", where.c_str(), where.empty() ? "" : ": ",
                   g.value(e.results[0]).name.c_str(), printSchedule(k.request.schedule).c_str(), n.reason.c_str());
    }
  timer.mark("plan");
  if (auto s = planBuffers(*plan); !s) return s.error();
  if (auto s = checkWeightBytes(*plan, d); !s) return s.error();
  if (auto s = checkMemoryBudget(*plan, d); !s) return s.error();
  timer.mark("buffers");
  return plan;
}

const char* blobSuffix(Target t) {
  switch (t) {
    case Target::Spirv: return ".spv";
    case Target::Ptx: return ".ptx";
    case Target::Hsaco: return ".hsaco";
  }
  return "";
}

// Every blob into dir, written only after the whole plan compiled.
Status dumpKernels(const Plan& p, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return makeError(ErrorKind::Io, Loc{dir}, "cannot create the directory: " + ec.message());
  for (const Kernel& k : p.kernels) {
    std::string path = (std::filesystem::path(dir) / (k.entry + blobSuffix(p.target))).string();
    if (auto s = writeFileAtomic(path, std::string(k.blob.begin(), k.blob.end())); !s) return s;
  }
  return ok();
}

// Then the kernels (KIR, emitted for the target) and the plan file or its
// text; --emit=kir stops at the KIR.
int emitPlan(const Graph& g, const DeviceProfile& d, const CompileOptions& opts, PhaseTimer& timer) {
  auto plan = makePlan(g, d, opts, timer);
  if (!plan) return report(plan.error());
  auto kernels = generateKir(*plan, d);
  if (!kernels) return report(kernels.error());
  timer.mark("kir");
  if (opts.emit == "kir") {
    std::string text;
    for (const kir::Kernel& k : *kernels) text += kir::print(k) + "\n";
    return emitBytes(text, opts.output);
  }
  if (auto s = emitKernels(*plan, d, *kernels); !s) return report(s.error());
  timer.mark("emit");
  std::string bytes = opts.emit == "plan" ? writePlan(*plan) : printPlan(*plan);
  std::string signature;
  if (!opts.sign.empty()) {
    auto sig = rt::signPlan(bytes, opts.sign);
    if (!sig) return report(sig.error());
    signature = std::move(*sig);
  }
  if (!opts.dumpKernels.empty())
    if (auto s = dumpKernels(*plan, opts.dumpKernels); !s) return report(s.error());
  int rc = emitBytes(bytes, opts.output);
  if (rc == 0 && !signature.empty()) rc = emitBytes(signature, rt::signaturePath(opts.output));
  timer.mark("write");
  return rc;
}

std::string passNames() {
  std::string out;
  for (const Pass& p : pipeline()) out += std::string(out.empty() ? "" : ", ") + p.name;
  return out;
}

}  // namespace

int runKeygen(const std::string& name) {
  auto id = rt::writeKeyPair(name);
  if (!id) return report(id.error());
  std::printf("wrote %s.key (secret: keep it private) and %s.pub, key %s\n", name.c_str(), name.c_str(), id->c_str());
  return 0;
}

int runCompile(const CompileOptions& opts) {
  if (!opts.printAfter.empty() && opts.printAfter != "all" && !findPass(opts.printAfter))
    return report(usage("--print-after: unknown pass '" + opts.printAfter + "' (passes: " + passNames() + ", or all)"));
  if (!opts.stopAfter.empty() && !findPass(opts.stopAfter))
    return report(usage("--stop-after: unknown pass '" + opts.stopAfter + "' (passes: " + passNames() + ")"));
  // A binary plan goes to a file, or with -o - into a pipe, never onto a terminal.
  if (opts.emit == "plan" && (opts.output.empty() || (opts.output == "-" && isatty(STDOUT_FILENO))))
    return report(usage("--emit=plan writes a binary plan file: name it with -o FILE.plan, or -o - into a pipe (or use "
                        "--emit=plan-text)"));
  if (!opts.sign.empty() && (opts.emit != "plan" || opts.output == "-"))
    return report(usage("--sign writes FILE.plan.sig beside the plan: use it with --emit=plan and -o FILE.plan"));
  if (!opts.dumpKernels.empty() && opts.emit != "plan" && opts.emit != "plan-text")
    return report(usage("--dump-kernels writes the kernels of a plan: use it with --emit=plan or plan-text"));
  // What they print is text for a person; JSON mode prints nothing else on stderr.
  if (diagnosticFormat() == DiagFormat::Json && (opts.remarks || !opts.printAfter.empty() || opts.timePhases))
    return report(usage("--remarks, --print-after and --time-phases print text on stderr: use them without "
                        "--diagnostics=json"));
  PhaseTimer timer(opts.timePhases);
  auto graph = loadGraph(opts.graph);
  if (!graph) return report(graph.error());
  auto profile = deviceProfile(opts.device);
  if (!profile) return report(profile.error());
  timer.mark("read");

  PassContext ctx;
  for (int i = 0; i < 3; ++i) ctx.gridLimits[i] = profile->grid_limits[i];
  ctx.maxBindings = profile->max_bindings;
  PipelineOptions popts;
  popts.stopAfter = opts.stopAfter;
  popts.afterPass = [&](const Pass& p, const Graph& g, bool changed) {
    timer.mark(p.name);
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

  if (opts.emit != "graph") return emitPlan(*graph, *profile, opts, timer);
  return emitGraph(*graph, opts.output);
}

int emitGraph(const Graph& g, const std::string& output) {
  std::string bytes = endsWith(output, ".pgb") ? writeBinaryGraph(g) : printGraph(g);
  return emitBytes(bytes, output);
}

int emitBytes(const std::string& bytes, const std::string& output) {
  if (auto s = writeFileAtomic(output.empty() ? "-" : output, bytes); !s) return report(s.error());
  return 0;
}

}  // namespace poot

// The table of dispatch_profile.h. A dispatch's bytes are the sizes of the
// ranges its bindings span (reads and writes), an upper bound of what it
// moves where a kernel reads part of a binding (a live attention over a
// long cache); its FLOPs are a MatMul's 2 * M * N * K, the others' none.
#include "dispatch_profile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "diagnostics.h"

namespace poot {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int64_t flopsOf(const rt::Request& r) {
  // A split product's combine adds its partials: no product of its own.
  if (r.op != Op::MatMul || r.schedule.kind == "matmul-combine" || r.operands.empty() || r.results.empty()) return 0;
  return 2 * numel(r.results[0].shape) * r.operands[0].shape.back();
}

}  // namespace

void printDispatchProfile(const rt::PlanFile& plan, const std::vector<std::vector<double>>& steps) {
  const size_t n = steps.empty() ? 0 : steps.front().size();
  std::vector<double> times(n);
  double total = 0;
  for (size_t d = 0; d < n; ++d) {
    std::vector<double> each;
    for (const auto& s : steps)
      if (d < s.size()) each.push_back(s[d]);
    times[d] = median(each);
    total += times[d];
  }
  const bool json = diagnosticFormat() == DiagFormat::Json;
  if (!json)
    std::printf("profile: %zu dispatches, each the median of %zu steps timed dispatch by dispatch: %.4f ms in all\n"
                "  %-6s %-13s %-18s %-12s %10s %7s %10s %9s %9s\n",
                n, steps.size(), total * 1e3, "", "op", "schedule", "grid", "us", "share", "MB", "GB/s", "TFLOP/s");
  for (size_t d = 0; d < n && d < plan.dispatches.size(); ++d) {
    const rt::Dispatch& dp = plan.dispatches[d];
    const rt::Kernel& k = plan.kernels[size_t(dp.kernel)];
    int64_t bytes = 0;
    for (int32_t b : dp.bindings) bytes += plan.buffers[size_t(b)].bytes;
    const int64_t flops = flopsOf(k.request);
    const double t = times[d];
    const std::string grid = std::to_string(dp.grid[0]) + "x" + std::to_string(dp.grid[1]) + "x" + std::to_string(dp.grid[2]);
    if (json) {
      nlohmann::json o = {{"dispatch", d},     {"kernel", k.entry}, {"op", opName(k.request.op)},
                          {"schedule", k.request.schedule.kind}, {"grid", {dp.grid[0], dp.grid[1], dp.grid[2]}},
                          {"seconds", t},      {"share", total > 0 ? t / total : 0.0}, {"bytes", bytes}};
      if (flops > 0) o["flops"] = flops;
      std::printf("%s\n", o.dump().c_str());
      continue;
    }
    std::printf("  d%-5zu %-13s %-18s %-12s %10.2f %6.1f%% %10.3f %9.1f", d, opName(k.request.op),
                k.request.schedule.kind.c_str(), grid.c_str(), t * 1e6, total > 0 ? 100 * t / total : 0.0, bytes / 1e6,
                t > 0 ? bytes / t / 1e9 : 0.0);
    if (flops > 0) std::printf(" %9.2f", t > 0 ? flops / t / 1e12 : 0.0);
    std::printf("\n");
  }
  // The same by op and schedule, largest first: where a model's step goes.
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, double>> groups;
  for (size_t d = 0; d < n && d < plan.dispatches.size(); ++d) {
    const rt::Request& r = plan.kernels[size_t(plan.dispatches[d].kernel)].request;
    auto& g = groups[{opName(r.op), r.schedule.kind}];
    ++g.first;
    g.second += times[d];
  }
  std::vector<std::pair<std::pair<std::string, std::string>, std::pair<int64_t, double>>> ranked(groups.begin(), groups.end());
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  if (!json) std::printf("by op and schedule:\n");
  for (const auto& [key, g] : ranked) {
    if (json) {
      std::printf("%s\n", nlohmann::json({{"group", {{"op", key.first}, {"schedule", key.second}, {"dispatches", g.first},
                                                      {"seconds", g.second}, {"share", total > 0 ? g.second / total : 0.0}}}})
                               .dump()
                               .c_str());
      continue;
    }
    std::printf("  %-13s %-18s %5lld dispatches %10.3f ms %6.1f%%\n", key.first.c_str(), key.second.c_str(),
                static_cast<long long>(g.first), g.second * 1e3, total > 0 ? 100 * g.second / total : 0.0);
  }
  if (json)
    std::printf("%s\n", nlohmann::json({{"profile", {{"dispatches", n}, {"steps", steps.size()}, {"seconds", total}}}})
                            .dump()
                            .c_str());
}

}  // namespace poot

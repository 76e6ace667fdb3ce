// poot run: load and verify a plan, open the backend, start a Session (the
// plan against the live device), and only then bind what the command line
// names (--input for inputs and states' first values, --slot, --weights: a
// checkpoint, by its tensor names) and the rest from the generator pootc
// eval uses (bindParamArgs; its notices go to stderr): a plan the device
// refuses is refused before any parameter is read or drawn. Weights are
// bound once, each copied from its mapped file to the device and nowhere
// else, with progress lines on a large load and the load rate at the end;
// each iteration resets the states and runs one step. A failed validation
// publishes nothing (exit 1). --check runs the oracle on the same
// parameters (the checkpoint's copied out for it) and compares every output
// and every state's new value (read back from the device) with the
// tolerance of its dtype, and writes the outputs only when all of them pass;
// without it every output is written as OUTDIR/NAME.npy. With more than one
// iteration it prints the medians over the steps of the step time, the
// device time and the host overhead per dispatch (docs/runtime.md,
// "Timing", defines them). --profile then runs as many steps again, each
// dispatch timed on the device, and prints where the time went
// (dispatch_profile.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "oracle/interp.h"
#include "oracle/npy.h"
#include "oracle/params.h"
#include "runtime/backends/backends.h"
#include "runtime/session.h"
#include "runtime/weights.h"
#include "dispatch_profile.h"
#include "tool.h"

namespace poot {

namespace {

struct Tol {
  double abs, rel;
};

Tol toleranceOf(DType t) {
  switch (t) {
    case DType::F32: return {1e-4, 1e-3};
    case DType::F16: return {1e-2, 1e-2};
    case DType::BF16: return {1e-2, 2e-2};
    default: return {0, 0};
  }
}

// Of two float dtypes, the one with fewer significand bits.
DType coarser(DType a, DType b) { return a == DType::BF16 || b == DType::BF16 ? DType::BF16 : a == DType::F16 ? a : b; }

// The coarsest float dtype the graph computes in: of the results of eqns
// that round (arithmetic, and Converts), not of those that only move or pick
// values, so a bf16 weight gathered and widened to f32 adds nothing. A float
// output carries that dtype's rounding even when it is converted to f32 at
// the end.
DType computeDtype(const Graph& g) {
  DType coarsest = DType::F32;
  for (const Eqn& e : g.eqns) {
    OpClass cls = opInfo(e.op).cls;
    if ((cls == OpClass::Data && e.op != Op::Convert) || cls == OpClass::Select) continue;
    for (ValueId r : e.results)
      if (isFloat(g.type(r).dtype)) coarsest = coarser(coarsest, g.type(r).dtype);
  }
  return coarsest;
}

// Prints one line per output; whether all are within tolerance.
bool compare(const std::map<std::string, Tensor>& device, const std::map<std::string, Tensor>& oracle,
             DType computed) {
  bool all = true;
  for (const auto& [name, want] : oracle) {
    const Tensor& got = device.at(name);
    DType held = isFloat(want.dtype()) ? coarser(want.dtype(), computed) : want.dtype();
    Tol tol = toleranceOf(held);
    // In two-byte arithmetic a value's error follows the magnitude of what it
    // was summed from, not its own: a logit near zero carries the rounding
    // of the hidden state the whole row shares. The absolute part then scales
    // with the output's largest magnitude (at least 1).
    if (held == DType::F16 || held == DType::BF16) {
      double largest = 1;
      for (int64_t i = 0; i < want.size(); ++i)
        if (std::isfinite(want.get(i))) largest = std::max(largest, std::fabs(want.get(i)));
      tol.abs *= largest;
    }
    double maxAbs = 0, maxRel = 0;
    bool pass = true;
    for (int64_t i = 0; i < want.size(); ++i) {
      double o = want.get(i), d = got.get(i);
      if (std::isnan(o) && std::isnan(d)) continue;
      double diff = std::fabs(d - o);
      if (std::isnan(diff)) diff = INFINITY;
      maxAbs = std::max(maxAbs, diff);
      maxRel = std::max(maxRel, o == 0 ? (diff == 0 ? 0 : INFINITY) : diff / std::fabs(o));
      if (!(diff <= tol.abs + tol.rel * std::fabs(o))) pass = false;
    }
    std::printf("%s %s: max abs %.3g, max rel %.3g: %s\n", name.c_str(), want.type.str().c_str(), maxAbs, maxRel,
                pass ? "PASS" : "FAIL");
    all = all && pass;
  }
  return all;
}

std::string failedWitnesses(const Graph& g, const Evaluation& ev) {
  std::string out;
  for (const Export& v : g.validations) {
    const std::string& name = g.value(v.value).name;
    if (!ev.validations.at(name)) out += (out.empty() ? "%" : ", %") + name;
  }
  return out;
}

}  // namespace

int runRun(const RunOptions& opts) {
  auto trusted = rt::loadTrustedKeys(opts.trust);
  if (!trusted) return report(trusted.error());
  auto plan = rt::loadPlanFile(opts.plan, *trusted);
  if (!plan) return report(plan.error());
  Graph graph = plan->source;
  auto backend = rt::openBackend(opts.backend, opts.device, !opts.noReplay);
  if (!backend) return report(backend.error());
  if (auto why = (*backend)->replayFallback()) {
    why->severity = Severity::Note;
    notice(*why);
  }
  auto session = rt::Session::create(plan.take(), backend.take(), {opts.allowOtherDevice});
  if (!session) return report(session.error());
  rt::Session& s = **session;
  auto params = bindParamArgs(graph, ParamArgs{opts.inputs, opts.slots, opts.weights, opts.seed});
  if (!params) return report(params.error());
  for (const Error& n : bindNotices(graph, *params)) notice(n);

  std::map<std::string, Tensor> states, perCall;
  for (ValueId id : graph.params) {
    const Value& p = graph.value(id);
    auto it = params->tensors.find(p.name);
    if (it == params->tensors.end() || p.storage == Storage::Weight) continue;  // bound above
    (p.storage == Storage::State ? states : perCall)[p.name] = it->second;
  }
  // Weights go to the device once each, the checkpoint's straight from its
  // mapped files, in the order they lie on disk; the rest from host tensors.
  std::optional<LoadProgress> progress;
  auto load = uploadWeights(s, graph, *params, [&](int64_t done, int64_t total) {
    if (!progress) progress.emplace(total);
    if (auto line = progress->advance(done)) poot::progress(*line);
  });
  if (!load) return report(load.error());
  if (params->checkpoint)
    poot::progress(loadSummary(load->bytes, params->checkpoint->files().size(), load->seconds));

  std::vector<double> times, deviceTimes, overheads;  // overheads: per dispatch
  const size_t dispatches = s.plan().dispatches.size();
  Expected<rt::StepResult> result = makeError(ErrorKind::Usage, {}, "no step ran");
  for (int64_t i = 0; i < opts.iterations; ++i) {
    for (const auto& [name, t] : states)
      if (auto b = s.setState(name, t); !b) return report(b.error());
    result = s.step(perCall);
    if (!result) break;
    times.push_back(result->seconds);
    if (!result->deviceSeconds) continue;
    deviceTimes.push_back(*result->deviceSeconds);
    if (dispatches) overheads.push_back((result->seconds - *result->deviceSeconds) / double(dispatches));
  }

  // The profile: as many steps again, each dispatch timed on the device.
  std::vector<std::vector<double>> profiled;
  for (int64_t i = 0; opts.profile && result && i < opts.iterations; ++i) {
    for (const auto& [name, t] : states)
      if (auto b = s.setState(name, t); !b) return report(b.error());
    auto timed = s.step(perCall, false, true);  // the outputs stay on the device: the timed steps are read no further
    if (!timed) return report(timed.error());
    profiled.push_back(std::move(timed->dispatchSeconds));
  }

  // The oracle checks a step that ran, and a failed validation (does the
  // oracle's fail too?); a refused bind is reported as it is.
  bool validationFailed = !result && result.error().message.rfind("validation failed", 0) == 0;
  Expected<Evaluation> oracle = makeError(ErrorKind::Usage, {}, "no check");
  if (opts.check && (result || validationFailed)) {
    oracle = evaluate(graph, params->hostTensors());
    if (!oracle) return report(oracle.error());
  }
  if (!result) {
    int code = report(result.error());
    if (opts.check && validationFailed) {
      std::string failed = failedWitnesses(graph, *oracle);
      if (failed.empty()) std::printf("check: the oracle's validation passes, the device's failed: FAIL\n");
      else std::printf("check: the oracle's validation fails too (%s)\n", failed.c_str());
    }
    return code;
  }
  if (opts.check && !oracle->valid()) {
    std::printf("check: the oracle's validation fails (%s), the device's passed: FAIL\n",
                failedWitnesses(graph, *oracle).c_str());
    return 1;
  }

  if (opts.iterations > 1) {
    std::sort(times.begin(), times.end());
    std::printf("median step time: %.3f ms over %zu steps\n", times[times.size() / 2] * 1e3, times.size());
    if (deviceTimes.size() == times.size()) {
      std::sort(deviceTimes.begin(), deviceTimes.end());
      std::printf("median device time: %.4f ms (the step's launches on the device, by its own timer)\n",
                  deviceTimes[deviceTimes.size() / 2] * 1e3);
    }
    if (overheads.size() == times.size()) {
      std::sort(overheads.begin(), overheads.end());
      std::printf("median host overhead per dispatch: %.3f us ((step time - device time) / %zu dispatches, %s)\n",
                  overheads[overheads.size() / 2] * 1e6, dispatches,
                  s.backend().submission() == rt::Submission::Replay ? "replayed" : "launched in order");
    }
  }
  if (opts.profile) printDispatchProfile(s.plan(), profiled);
  if (opts.check) {
    // Every output, then every state's new value (the KV caches), read back.
    std::map<std::string, Tensor> deviceStates;
    for (const auto& [name, t] : oracle->states) {
      auto state = s.readState(name);
      if (!state) return report(state.error());
      deviceStates[name] = state.take();
    }
    DType computed = computeDtype(graph);
    bool outputsOk = compare(result->outputs, oracle->outputs, computed);
    if (!(compare(deviceStates, oracle->states, computed) && outputsOk)) return 1;
  }
  // Every state is read back before anything is written, so a failed read
  // writes nothing.
  std::map<std::string, Tensor> newStates;
  if (!opts.saveStates.empty())
    for (const auto& [name, t] : states) {
      auto state = s.readState(name);
      if (!state) return report(state.error());
      newStates[name] = state.take();
    }
  for (const auto& [dir, tensors] : {std::pair{&opts.outputDir, &result->outputs}, std::pair{&opts.saveStates, &newStates}}) {
    if (dir->empty()) continue;
    std::error_code ec;
    std::filesystem::create_directories(*dir, ec);
    if (ec) return report(makeError(ErrorKind::Io, {*dir}, "cannot create the directory: " + ec.message()));
    for (const auto& [name, t] : *tensors)
      if (auto w = writeNpy((std::filesystem::path(*dir) / (name + ".npy")).string(), t); !w) return report(w.error());
  }
  return 0;
}

}  // namespace poot

// Runs a graph's plan on lavapipe through the runtime, the way a user's plan
// runs: plan it for a SPIR-V profile (planGraph, planBuffers), generate and
// emit every kernel (generateKernels), write the plan file and read it back
// (the runtime's reader), start a Session on the Vulkan backend, bind the
// parameters by name and run one step; outputs and the states' new values
// come back by name, as runOnKir (kir_plan.h) gives them (a failed witness
// fails the step instead, so no validations come back), so a generator's
// test checks both executors against the oracle. The profile may be a test
// copy of lavapipe's with other figures (fewer bytes of workgroup memory,
// more compute units): the session allows the other device name.
#pragma once

#include <map>
#include <string>

#include "kir_plan.h"
#include "lavapipe.h"
#include "plan/plan_file.h"
#include "runtime/session.h"

namespace poot::testing {

// Whether the generator tests (gen_attention_test, gen_matmul_test) run each
// plan on lavapipe as well as on the KIR interpreter. Not in the sanitizer
// build: there nearly all their time was Mesa's LLVM compiling the shaders
// under the sanitizers' allocator (the causal-mask case alone took 435 s of a
// CI run, 45 s in the optimized build), which tests nothing of poot's. The
// optimized build runs them on lavapipe, scripts/test.sh checks that both
// trees write the same plans, and the runtime's Vulkan code runs under the
// sanitizers in the runtime, lit and end-to-end tests.
#ifdef POOT_TEST_SANITIZED
inline constexpr bool kGeneratorsOnLavapipe = false;
#else
inline constexpr bool kGeneratorsOnLavapipe = true;
#endif

// The plan file of g (already through the passes, or formed by hand) for d,
// with every kernel emitted, as the runtime reads it.
inline Expected<rt::PlanFile> planFileFor(const Graph& g, const DeviceProfile& d) {
  auto p = planGraph(g, d);
  if (!p) return p.error();
  if (auto s = planBuffers(*p); !s) return s.error();
  if (auto s = generateKernels(*p, d); !s) return s.error();
  return rt::readPlanFile(writePlan(*p), g.name + ".plan");
}

// A Session on lavapipe for the plan file.
inline Expected<std::unique_ptr<rt::Session>> lavapipeSession(rt::PlanFile plan) {
  return rt::Session::create(std::move(plan), lavapipe(), {true});
}

inline Expected<PlanRun> runOnVulkan(const Graph& g, const DeviceProfile& d,
                                     const std::map<std::string, Tensor>& params) {
  auto file = planFileFor(g, d);
  if (!file) return file.error();
  auto session = lavapipeSession(file.take());
  if (!session) return session.error();
  rt::Session& s = **session;
  std::map<std::string, Tensor> weights, perCall;
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    auto it = params.find(v.name);
    if (it == params.end()) return makeError(ErrorKind::Bind, {}, "parameter " + v.name + " not bound");
    if (v.storage == Storage::Weight) weights[v.name] = it->second;
    else if (v.storage == Storage::State) {
      if (auto st = s.setState(v.name, it->second); !st) return st.error();
    } else
      perCall[v.name] = it->second;
  }
  if (auto st = s.bindWeights(weights); !st) return st.error();
  auto step = s.step(perCall);
  if (!step) return step.error();
  PlanRun run;
  run.outputs = std::move(step->outputs);
  for (const StateOut& so : g.stateOuts) {
    const std::string& name = g.value(so.state).name;
    auto t = s.readState(name);
    if (!t) return t.error();
    run.states[name] = t.take();
  }
  return run;
}

}  // namespace poot::testing

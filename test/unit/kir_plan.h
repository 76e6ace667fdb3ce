// Runs a graph's whole plan on the KIR interpreter, so a generator's test is a
// small graph, the oracle's random parameters and a comparison: plan the
// graph, place its buffers, generate (and verify) every kernel's KIR, then run
// the dispatches in order on the CPU with the buffers bound as the plan binds
// them. Parameters are copied in by name; a state's buffer is shared by its
// old and new value; the temporaries and scratch live in ONE arena byte vector
// at the plan's offsets (each dispatch gets a copy of its arena buffers' slices
// and writes back those the kernel stores to, so two live buffers placed over
// each other show up as wrong results); outputs, witnesses and the arena start
// as all-ones bytes, so a value never written shows (a bool read back must
// hold 0 or 1 in every byte). checkKirMatchesOracle
// compares the run with the oracle by name through testing.h's checkClose.
#pragma once

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/kir/interp.h"
#include "oracle/interp.h"
#include "oracle/random.h"
#include "oracle/tensor.h"
#include "plan/buffers.h"
#include "plan/planner.h"
#include "testing.h"

namespace poot::testing {

struct PlanRun {
  std::map<std::string, Tensor> outputs;      // by output value name
  std::map<std::string, Tensor> states;       // each state's new value, by state name
  std::map<std::string, bool> validations;    // each witness, by name
};

inline Expected<PlanRun> runOnKir(const Graph& g, const DeviceProfile& d, const std::map<std::string, Tensor>& params) {
  auto fail = [](const std::string& msg) { return makeError(ErrorKind::Verify, {}, msg); };
  auto planned = planGraph(g, d);
  if (!planned) return planned.error();
  Plan& p = *planned;
  if (auto s = planBuffers(p); !s) return s.error();
  auto kernels = generateKir(p, d);
  if (!kernels) return kernels.error();

  auto base = [&](int32_t b) { return p.buffers[size_t(b)].role == BufferRole::View ? p.buffers[size_t(b)].aliasOf : b; };
  auto inArena = [&](int32_t b) {
    BufferRole r = p.buffers[size_t(b)].role;
    return r == BufferRole::Temp || r == BufferRole::Scratch;
  };
  std::vector<uint8_t> arena(size_t(p.arenaBytes), 0xff);
  std::vector<std::vector<uint8_t>> own(p.buffers.size());  // every buffer outside the arena
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer& buf = p.buffers[b];
    switch (buf.role) {
      case BufferRole::Input: case BufferRole::Weight: case BufferRole::State: case BufferRole::Slot: {
        auto it = params.find(buf.name);
        if (it == params.end()) return makeError(ErrorKind::Bind, {}, "parameter " + buf.name + " not bound");
        if (it->second.type != buf.type || int64_t(it->second.bytes.size()) != buf.bytes)
          return makeError(ErrorKind::Bind, {}, "parameter " + buf.name + " bound to " + it->second.type.str() +
                                                    ", expected " + buf.type.str());
        own[b] = it->second.bytes;
        break;
      }
      case BufferRole::Output: case BufferRole::Validation: own[b].assign(size_t(buf.bytes), 0xff); break;
      case BufferRole::Temp: case BufferRole::Scratch:
        if (buf.offset < 0 || buf.offset + buf.bytes > p.arenaBytes)
          return fail("buffer " + buf.name + " at [" + std::to_string(buf.offset) + ", " +
                      std::to_string(buf.offset + buf.bytes) + ") outside the arena of " + std::to_string(p.arenaBytes));
        break;
      case BufferRole::View: break;
    }
  }

  for (size_t di = 0; di < p.dispatches.size(); ++di) {
    const Dispatch& dp = p.dispatches[di];
    const kir::Kernel& k = (*kernels)[size_t(dp.kernel)];
    std::string where = "dispatch " + std::to_string(di) + " (eqn " + std::to_string(dp.eqn) + ", kernel " + k.entry + ")";
    if (dp.grid[0] != k.gridX)
      return fail(where + ": grid x " + std::to_string(dp.grid[0]) + " but the kernel folds " + std::to_string(k.gridX));
    if (dp.grid[2] != 1) return fail(where + ": grid z " + std::to_string(dp.grid[2]) + " is not 1");
    if (!dp.params.empty()) return fail(where + ": push constants are not interpreted");
    if (dp.bindings.size() != k.buffers.size())
      return fail(where + ": " + std::to_string(dp.bindings.size()) + " bindings for " +
                  std::to_string(k.buffers.size()) + " kernel buffers");
    std::map<int32_t, std::vector<uint8_t>> slices;  // this dispatch's arena buffers
    std::vector<std::vector<uint8_t>*> bound;
    for (int32_t bi : dp.bindings) {
      int32_t b = base(bi);
      if (!inArena(b)) {
        bound.push_back(&own[size_t(b)]);
        continue;
      }
      const Buffer& buf = p.buffers[size_t(b)];
      auto [it, fresh] = slices.try_emplace(b);
      if (fresh) it->second.assign(arena.begin() + buf.offset, arena.begin() + buf.offset + buf.bytes);
      bound.push_back(&it->second);
    }
    if (auto s = kir::interpret(k, dp.grid[1], bound); !s) return fail(where + ": " + s.error().message);
    for (size_t i = 0; i < dp.bindings.size(); ++i) {
      int32_t b = base(dp.bindings[i]);
      if (k.buffers[i].written && inArena(b))
        std::memcpy(arena.data() + p.buffers[size_t(b)].offset, slices[b].data(), slices[b].size());
    }
  }

  const Graph& src = p.source;
  std::vector<int32_t> bufferOf = valueBuffers(p);
  auto read = [&](ValueId v) -> Expected<Tensor> {
    Tensor t(src.type(v));
    int32_t b = bufferOf[size_t(v)];
    if (b < 0) return fail("value " + src.value(v).name + " has no buffer");
    b = base(b);
    const uint8_t* from = inArena(b) ? arena.data() + p.buffers[size_t(b)].offset : own[size_t(b)].data();
    if (int64_t(t.bytes.size()) > p.buffers[size_t(b)].bytes)
      return fail("value " + src.value(v).name + " larger than its buffer " + p.buffers[size_t(b)].name);
    std::memcpy(t.bytes.data(), from, t.bytes.size());
    if (t.dtype() == DType::Bool)
      for (size_t i = 0; i < t.bytes.size(); ++i)
        if (t.bytes[i] > 1)
          return fail("bool value " + src.value(v).name + " holds byte " + std::to_string(t.bytes[i]) + " at element " +
                      std::to_string(i) + " (never written?)");
    return t;
  };
  PlanRun run;
  for (const Export& e : src.outputs) {
    auto t = read(e.value);
    if (!t) return t.error();
    run.outputs[src.value(e.value).name] = t.take();
  }
  for (const StateOut& s : src.stateOuts) {
    auto t = read(s.value);
    if (!t) return t.error();
    run.states[src.value(s.state).name] = t.take();
  }
  for (const Export& e : src.validations) {
    auto t = read(e.value);
    if (!t) return t.error();
    run.validations[src.value(e.value).name] = t->bytes.at(0) == 1;
  }
  return run;
}

// The oracle and the plan on the interpreter, on the same random parameters
// (drawn from `seed`): the same outputs and states by name within tol, and
// the same validations.
inline void checkKirMatchesOracle(const Graph& g, const DeviceProfile& d, uint64_t seed, Tolerance tol) {
  CAPTURE(seed);
  auto params = completeParams(g, {}, seed);
  auto want = evaluate(g, params);
  REQUIRE_MESSAGE(bool(want), (want ? "" : want.error().str()));
  auto got = runOnKir(g, d, params);
  REQUIRE_MESSAGE(bool(got), (got ? "" : got.error().str()));
  CHECK(got->validations == want->validations);
  checkSameByName("output", want->outputs, got->outputs, tol);
  checkSameByName("state", want->states, got->states, tol);
}

}  // namespace poot::testing

// The planner: turns every eqn of a compiled graph (after the passes) into
// the kernels and dispatches that run it on one device. Each eqn becomes a
// KernelRequest naming exactly what to generate (op, operand and result
// types, attributes, Schedule); identical requests share one Kernel; the
// Dispatches follow the eqns in order, with their grids and the values each
// reads and writes; a split-KV attention also declares its Scratch. When the
// device cannot hold an eqn, planning stops with a typed capability error
// (ErrorKind::Capability, Error::capability naming the check) located at the
// eqn. Buffers are planBuffers' (buffers.h) job; the memory budget is checked
// after it, with checkMemoryBudget. docs/planner.md states the rules.
#pragma once

#include <cstdint>
#include <string>

#include "ir/diag.h"
#include "ir/fusion.h"
#include "ir/graph.h"
#include "plan/plan.h"
#include "plan/profile.h"

namespace poot {

// Why a kernel got its schedule, for `pootc compile --remarks`: the first
// eqn that uses the kernel, and the rule's reason (schedule.h). Recorded for
// the schedules chosen from the shape and the device (split-KV attention and
// MatMul).
struct ScheduleNote {
  int32_t eqn;
  int32_t kernel;
  std::string reason;
};

// Plans every eqn of `g` for `d`: kernels, dispatches (bindings left empty),
// scratch, the device's name, target, arch and hash, and the plan key;
// `source` is a copy of g. Refusals: AttentionLds, GridLimit, DtypeLowering,
// BindingLimit, ScratchBytes. With `notes`, appends one ScheduleNote per chosen kernel.
Expected<Plan> planGraph(const Graph& g, const DeviceProfile& d, std::vector<ScheduleNote>* notes = nullptr);

// The request of a fusion group's kernel (fused steps in the members'
// order, operands the group's inputs, results its outputs) with schedule s;
// `pootc inspect` rebuilds it from a plan's graph the same way.
KernelRequest fusedRequest(const Graph& g, const FusionGroup& grp, Schedule s);

// FNV-1a 64 over every profile field in a fixed order (name, target, arch,
// compute units, workgroup memory and size, subgroup size, grid limits,
// buffer bytes, bindings, memory bytes, two-byte operations).
uint64_t profileHash(const DeviceProfile& d);

// The plan key: FNV-1a 64, as 16 hex digits, over each kernel's
// printRequest line (kernels in order, each ending in "\n") and then
// "device <profileHash in hex>\n". Equal graphs on equal profiles give equal
// keys; any change to a request (a shape, an attribute, a split count) or to
// the profile changes it.
std::string planKey(const Plan& plan);

// ScratchBytes: every declared scratch fits one buffer binding of the device
// (max_buffer_bytes, itself within memory_bytes). planGraph runs it last; the
// split rule already keeps the streaming schedule where a scratch would not
// fit, so it refuses only a plan checked against another device.
Status checkScratch(const Plan& plan, const DeviceProfile& d);

// MemoryBudget: the arena (plan.arenaBytes: temporaries and scratch) plus
// every buffer outside it (weights, state, inputs, slots, outputs, validation
// witnesses; views take no memory) within memory_bytes. Call it after
// planBuffers has filled plan.buffers and plan.arenaBytes.
Status checkMemoryBudget(const Plan& plan, const DeviceProfile& d);

}  // namespace poot

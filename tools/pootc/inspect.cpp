// pootc inspect: print a plan file. The file is read with the runtime's own
// reader (lib/runtime/plan_reader.h: verified, every index checked), exactly
// as the runtime will see it, then turned back into the compiler's in-memory
// Plan and printed with the same printer `pootc compile --emit=plan-text`
// uses, so the two outputs are the same text for the same plan.
#include <cstdio>
#include <map>

#include "driver.h"
#include "plan/plan.h"
#include "plan/plan_text.h"
#include "plan/planner.h"
#include "runtime/plan_reader.h"

namespace poot {

namespace {

Target fromFile(rt::Target t) {
  switch (t) {
    case rt::Target::Spirv: return Target::Spirv;
    case rt::Target::Ptx: return Target::Ptx;
    case rt::Target::Hsaco: return Target::Hsaco;
  }
  return Target::Spirv;
}

BufferRole fromFile(rt::Role r) {
  switch (r) {
    case rt::Role::Input: return BufferRole::Input;
    case rt::Role::Weight: return BufferRole::Weight;
    case rt::Role::State: return BufferRole::State;
    case rt::Role::Slot: return BufferRole::Slot;
    case rt::Role::Output: return BufferRole::Output;
    case rt::Role::Validation: return BufferRole::Validation;
    case rt::Role::Temp: return BufferRole::Temp;
    case rt::Role::Scratch: return BufferRole::Scratch;
    case rt::Role::View: return BufferRole::View;
  }
  return BufferRole::Temp;
}

// The file's records in the compiler's shape. Nothing is lost: a dispatch's
// reads and writes come back from its bindings (a scratch buffer is the
// scratch its eqn declared, anything else the value it holds).
Plan toPlan(rt::PlanFile f) {
  Plan p;
  p.deviceName = f.device.name;
  p.deviceHash = f.device.hash;
  p.target = fromFile(f.device.target);
  p.deviceArch = f.device.arch;
  p.memoryBandwidth = f.device.memoryBandwidth;
  p.key = f.key;
  p.arenaBytes = f.arenaBytes;
  std::vector<int32_t> scratchOf(f.buffers.size(), -1);
  for (size_t i = 0; i < f.buffers.size(); ++i) {
    const rt::Buffer& b = f.buffers[i];
    Buffer x{b.name, fromFile(b.role), b.type, b.value};
    x.offset = b.offset;
    x.bytes = b.bytes;
    x.aliasOf = b.alias;
    x.lo = b.lo;
    x.hi = b.hi;
    x.first = b.first;
    x.last = b.last;
    p.buffers.push_back(std::move(x));
    if (b.role == rt::Role::Scratch) {
      scratchOf[i] = int32_t(p.scratch.size());
      p.scratch.push_back(Scratch{b.first, b.bytes / 4});
    }
  }
  for (rt::Kernel& k : f.kernels) {
    const rt::Schedule& s = k.request.schedule;
    KernelRequest r{k.request.op, k.request.operands, k.request.results, k.request.attrs,
                    Schedule{s.kind, s.lanes, s.splits, s.workgroupSize, s.workgroupMemory, s.kLanes, s.unroll,
                             s.vector, s.tileM, s.tileN, s.tileK, s.threadM, s.threadN, s.matrix}};
    p.kernels.push_back(Kernel{k.entry, std::move(r), std::move(k.blob)});
  }
  // A fused kernel's steps are not in the file: they are its group's
  // members, in the plan's graph.
  auto groups = fusionGroups(f.source);
  std::map<int32_t, const FusionGroup*> rootOf;  // root eqn -> its group
  if (groups)
    for (const FusionGroup& grp : *groups) rootOf[grp.root()] = &grp;
  for (const rt::Dispatch& d : f.dispatches) {
    auto grp = rootOf.find(d.eqn);
    if (grp == rootOf.end() || d.kernel < 0 || size_t(d.kernel) >= p.kernels.size()) continue;
    KernelRequest& r = p.kernels[size_t(d.kernel)].request;
    if ((r.schedule.kind == "fused" || r.schedule.kind == "fused-rows") && r.steps.empty())
      r = fusedRequest(f.source, *grp->second, r.schedule);
  }
  for (const rt::Dispatch& d : f.dispatches) {
    Dispatch x{d.kernel, d.eqn};
    for (int i = 0; i < 3; ++i) x.grid[i] = d.grid[i];
    x.bindings = d.bindings;
    x.params = d.params;
    for (size_t j = 0; j < d.bindings.size(); ++j) {
      int32_t b = d.bindings[j];
      Access a = scratchOf[size_t(b)] >= 0 ? Access{-1, scratchOf[size_t(b)]} : Access{f.buffers[size_t(b)].value, -1};
      (int32_t(j) < d.reads ? x.reads : x.writes).push_back(a);
    }
    p.dispatches.push_back(std::move(x));
  }
  p.source = std::move(f.source);
  return p;
}

}  // namespace

int runInspect(const InspectOptions& opts) {
  auto file = rt::loadPlanFile(opts.plan);
  if (!file) return report(file.error());
  Plan p = toPlan(file.take());
  std::string text = opts.dot ? printArenaDot(p) : opts.json ? printPlanJson(p) : printPlan(p);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace poot

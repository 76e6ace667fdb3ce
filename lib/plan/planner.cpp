// How planGraph works: one pass over the eqns in order. Each eqn is first
// checked against the device's two-byte float support, then planned by its
// op: an attention or a MatMul by the first rule of its registry (family.h)
// that takes it, everything else a plain schedule with one thread per result
// element (or row). Requests are deduplicated by their exact text, so kernels are
// numbered by first use and the plan is the same on every run.
#include "plan/planner.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "plan/family.h"
#include "plan/request.h"
#include "plan/schedule.h"

namespace poot {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

Error refuse(const char* check, const Loc& loc, std::string message, std::vector<Figure> figures) {
  Error e = makeError(ErrorKind::Capability, loc, std::move(message));
  e.capability = check;
  e.figures = std::move(figures);
  return e;
}

std::string lower(std::string s) {
  for (char& c : s) c = c == '-' ? '_' : char(std::tolower((unsigned char)c));
  return s;
}

const std::string& symAttr(const Eqn& e, const char* name) {
  static const std::string none;
  const AttrValue* v = e.attr(name);
  return v && attrKindOf(*v) == AttrKind::Sym ? std::get<std::string>(*v) : none;
}

int64_t intAttr(const Eqn& e, const char* name) { return std::get<int64_t>(*e.attr(name)); }

class Planner {
 public:
  Planner(const Graph& g, const DeviceProfile& d, std::vector<ScheduleNote>* notes) : g_(g), d_(d), notes_(notes) {}

  Expected<Plan> run() {
    auto groups = fusionGroups(g_);
    if (!groups) return groups.error();
    groupAt_.assign(g_.eqns.size(), nullptr);
    groups_ = groups.take();
    for (const FusionGroup& grp : groups_)
      for (int32_t m : grp.members) groupAt_[size_t(m)] = &grp;
    plan_.deviceName = d_.name;
    plan_.deviceHash = profileHash(d_);
    plan_.target = d_.target;
    plan_.deviceArch = d_.arch;
    plan_.memoryBandwidth = d_.memory_bandwidth_bytes_per_s;
    for (size_t i = 0; i < g_.eqns.size(); ++i)
      if (auto s = planEqn(int32_t(i)); !s) return s.error();
    if (auto s = checkBindings(); !s) return s.error();
    plan_.source = g_;
    if (auto s = checkScratch(plan_, d_); !s) return s.error();
    plan_.key = planKey(plan_);
    return std::move(plan_);
  }

 private:
  const Graph& g_;
  const DeviceProfile& d_;
  std::vector<ScheduleNote>* notes_;
  Plan plan_;
  std::map<std::string, int32_t> kernels_;  // requestIdentity -> kernel index
  std::vector<FusionGroup> groups_;
  std::vector<const FusionGroup*> groupAt_;  // eqn -> its fusion group, if any

  KernelRequest request(const Eqn& e, Schedule s) const {
    KernelRequest r{e.op, {}, {}, e.attrs, std::move(s)};
    for (ValueId v : e.operands) r.operands.push_back(g_.type(v));
    for (ValueId v : e.results) r.results.push_back(g_.type(v));
    return r;
  }

  // The kernel of request r (a new one unless an equal request has one);
  // `reason`, when given, is noted for a new kernel first used by eqn i.
  int32_t kernel(KernelRequest r, int32_t i = -1, const std::string& reason = "") {
    auto [it, fresh] = kernels_.emplace(requestIdentity(r), int32_t(plan_.kernels.size()));
    if (fresh) {
      std::string entry = lower(opName(r.op)) + "_" + lower(r.schedule.kind) + "_" + str(it->second);
      plan_.kernels.push_back(Kernel{std::move(entry), std::move(r), {}});
      if (notes_ && !reason.empty()) notes_->push_back(ScheduleNote{i, it->second, reason});
    }
    return it->second;
  }

  std::vector<Access> operands(const Eqn& e) const {
    std::vector<Access> out;
    for (ValueId v : e.operands) out.push_back(Access{v, -1});
    return out;
  }
  std::vector<Access> results(const Eqn& e) const {
    std::vector<Access> out;
    for (ValueId v : e.results) out.push_back(Access{v, -1});
    return out;
  }

  void dispatch(int32_t kernel, int32_t eqn, const std::array<int64_t, 3>& grid, std::vector<Access> reads,
                std::vector<Access> writes) {
    Dispatch d{kernel, eqn};
    for (int i = 0; i < 3; ++i) d.grid[i] = grid[size_t(i)];
    d.reads = std::move(reads);
    d.writes = std::move(writes);
    plan_.dispatches.push_back(std::move(d));
  }

  // BindingLimit: a dispatch binds one storage buffer per value or scratch
  // it reads or writes, and a kernel of the device binds at most
  // max_bindings. Refused, not split (docs/planner.md says why).
  Status checkBindings() const {
    for (const Dispatch& d : plan_.dispatches) {
      int64_t n = int64_t(d.reads.size() + d.writes.size());
      if (n <= d_.max_bindings) continue;
      const Eqn& e = g_.eqns[size_t(d.eqn)];
      std::string what = groupAt_[size_t(d.eqn)] ? "the fused kernel at op " : "op ";
      return refuse("BindingLimit", e.loc,
                    what + opName(e.op) + " %" + g_.value(e.results[0]).name + " binds " + str(n) +
                        " storage buffers (" + str(int64_t(d.reads.size())) + " read, " +
                        str(int64_t(d.writes.size())) + " written) but " + d_.name + " allows " +
                        str(d_.max_bindings) + " per kernel",
                    {{"bindings", n},
                     {"reads", int64_t(d.reads.size())},
                     {"writes", int64_t(d.writes.size())},
                     {"max_bindings", d_.max_bindings}});
    }
    return ok();
  }

  Status planEqn(int32_t i) {
    const Eqn& e = g_.eqns[size_t(i)];
    if (auto s = checkDtypes(e); !s) return s;
    if (const FusionGroup* grp = groupAt_[size_t(i)]) {
      if (grp->root() != i) return ok();
      return grp->products ? planMatMul(i, grp->members) : planFused(i, *grp);
    }
    switch (e.op) {
      case Op::Attention: return planAttention(i, e);
      case Op::SelectedAttention: return planSelected(i, e);
      case Op::MatMul: return planMatMul(i, {i});
      case Op::RoutedExperts: return planRouted(i, e);
      default: return planPlain(i, e);
    }
  }

  // Two-byte floats: every op that touches one needs the device to load and
  // store it; kernels widen what they load to f32, compute in f32 (attention
  // and products accumulate there) and round what they store, and round an
  // intermediate where the graph rounds it (kir::Builder::roundTo).
  Status checkDtypes(const Eqn& e) const {
    for (DType t : {DType::F16, DType::BF16}) {
      bool uses = false;
      for (ValueId v : e.operands) uses |= g_.type(v).dtype == t;
      for (ValueId v : e.results) uses |= g_.type(v).dtype == t;
      const TwoByteOps& ops = t == DType::F16 ? d_.f16 : d_.bf16;
      if (uses && !ops.storage)
        return refuse("DtypeLowering", e.loc,
                      "op " + std::string(opName(e.op)) + " on " + dtypeName(t) + " does not lower on " + d_.name +
                          ": the device does not list " + dtypeName(t) + " storage",
                      {{"op", opName(e.op)}, {"dtype", dtypeName(t)}});
    }
    return ok();
  }

  Expected<int64_t> lanesFor(const Eqn& e, const char* what, int64_t dv) const {
    int64_t lanes = attentionLanes(dv, d_);
    if (lanes == 0)
      return refuse("AttentionLds", e.loc,
                    std::string(what) + " needs " + str(laneStateBytes(dv)) +
                        " bytes of workgroup memory for one lane (value width " + str(dv) + ") but the device has " +
                        str(d_.workgroup_memory_bytes),
                    {{"lane_bytes", laneStateBytes(dv)},
                     {"value_width", dv},
                     {"workgroup_memory_bytes", d_.workgroup_memory_bytes}});
    return lanes;
  }

  Expected<std::array<int64_t, 3>> gridFor(const Eqn& e, const char* what, int64_t workgroups,
                                           const std::string& counted) const {
    auto grid = foldGrid(workgroups, d_);
    if (!grid)
      return refuse("GridLimit", e.loc,
                    std::string(what) + " launches " + str(workgroups) + " workgroups (" + counted +
                        ") but the device's grid holds " + str(d_.grid_limits[0]) + " x " + str(d_.grid_limits[1]),
                    {{"workgroups", workgroups}, {"grid_x", d_.grid_limits[0]}, {"grid_y", d_.grid_limits[1]}});
    return *grid;
  }

  Status planAttention(int32_t i, const Eqn& e) {
    const Shape& q = g_.type(e.operands[0]).shape;
    int64_t B = q[0], Hq = q[1], Lq = q[2], Dk = q[3], nrep = intAttr(e, "n_rep");
    int64_t Dv = g_.type(e.results[0]).shape[3];
    std::string key = symAttr(e, "key");
    int64_t Lk = key == "paged" ? g_.type(e.operands[3]).shape[1] : g_.type(e.operands[1]).shape[2];
    int64_t Ds = key == "split" ? g_.type(e.operands[2]).shape[3] : 0;
    auto lanes = lanesFor(e, "attention", Dv);
    if (!lanes) return lanes.error();
    // The dtype q, keys and values share (loads of 16 bytes of it; the
    // matrix op takes them as they are), F32 where they differ.
    DType shared = g_.type(e.operands[0]).dtype;
    for (size_t o = 1; o <= (key == "split" ? 3u : 2u); ++o)
      if (g_.type(e.operands[o]).dtype != shared) shared = DType::F32;
    std::string mask = symAttr(e, "mask");
    bool rowsShareMask = mask == "none" || (mask == "causal" && Lq == 1);
    AttentionShape a{B, Hq, Hq / nrep, Lq, Lk, nrep, Dk - Ds, Ds, Dv, shared, rowsShareMask, *lanes};
    // The registry's rules in order of preference; streaming, the last,
    // always accepts.
    const AttentionRule* rule = nullptr;
    Choice c = walkRules(attentionRules(), a, d_, &rule);
    const Schedule& s = *c.schedule;
    auto grid = gridFor(e, "attention", rule->workgroups(s, a),
                        std::string(rule->counted) + (s.splits > 1 ? " * splits" : ""));
    if (!grid) return grid.error();
    if (s.splits == 1) {
      dispatch(kernel(request(e, s), i, c.reason), i, *grid, operands(e), results(e));
      return ok();
    }
    // A split schedule writes each (query row, split)'s partial state to the
    // scratch; the combine folds them. The split rules have checked that the
    // partials' fold fits; the combine's rows fit whenever the partials do.
    int32_t scratch = int32_t(plan_.scratch.size());
    plan_.scratch.push_back(Scratch{i, B * Hq * s.splits * (Dv + 2)});
    dispatch(kernel(request(e, s), i, c.reason), i, *grid, operands(e), {Access{-1, scratch}});
    auto combine = gridFor(e, "attention", B * Hq, "B * Hq");
    if (!combine) return combine.error();
    dispatch(kernel(request(e, combineSchedule(*lanes, s.splits))), i, *combine, {Access{-1, scratch}}, results(e));
    return ok();
  }

  // The block-selected form streams over its selected blocks with the same
  // lane state; it is never split.
  Status planSelected(int32_t i, const Eqn& e) {
    const Shape& q = g_.type(e.operands[0]).shape;
    int64_t Dv = g_.type(e.results[0]).shape[3];
    auto lanes = lanesFor(e, "selected attention", Dv);
    if (!lanes) return lanes.error();
    auto grid = gridFor(e, "selected attention", q[0] * q[1] * q[2], "B * Hq * Lq");
    if (!grid) return grid.error();
    dispatch(kernel(request(e, streamingSchedule(*lanes, Dv))), i, *grid, operands(e), results(e));
    return ok();
  }

  // RoutedExperts: the first rule of routedRules() that takes it, one
  // workgroup a token row; where every rule declines, a NoGenerator refusal
  // with their reasons (the op's dense primitive form, routed-experts-dense
  // in docs/passes.md, compiles everywhere).
  Status planRouted(int32_t i, const Eqn& e) {
    const Type& h = g_.type(e.operands[0]);
    int64_t H = h.shape.back(), E = std::get<int64_t>(*e.attr("experts"));
    RoutedShape shape{numel(h.shape) / H, H, E, g_.type(e.operands[kRoutedFirstExpert]).shape[0],
                      std::get<int64_t>(*e.attr("k")), int64_t(e.operands.size() + e.results.size())};
    Choice c = walkRules(routedRules(), shape, d_);
    if (!c.schedule)
      return refuse("NoGenerator", e.loc,
                    "op RoutedExperts %" + g_.value(e.results[0]).name + " has no kernel here (" + c.reason +
                        "): write it as its dense primitive form (the routed-experts-dense pass, docs/passes.md)",
                    {{"rows", shape.rows}, {"bindings", shape.bindings}, {"max_bindings", d_.max_bindings}});
    auto grid = gridFor(e, "routed experts", shape.rows, "one a token row");
    if (!grid) return grid.error();
    dispatch(kernel(request(e, std::move(*c.schedule)), i, c.reason), i, *grid, operands(e), results(e));
    return ok();
  }

  // One MatMul, or a product group (fusion.h): when its schedule, chosen for
  // all their columns together, is a gemv, its members run as one kernel,
  // their column blocks one after another in one launch. The request holds
  // a, then each member's b, and each member's result; its attributes are
  // the first member's without the fusion id, so every layer's group of the
  // same shapes shares one kernel.
  Status planMatMul(int32_t i, const std::vector<int32_t>& members) {
    const Eqn& e = g_.eqns[size_t(members[0])];
    const Shape& as = g_.type(e.operands[0]).shape;
    const Shape& os = g_.type(e.results[0]).shape;
    int64_t m = as[as.size() - 2], k = as.back();
    int64_t batch = numel(os) / (m * os.back()), count = 0;
    std::vector<int64_t> ns;
    KernelRequest r{Op::MatMul, {g_.type(e.operands[0])}, {}, {}, {}};
    std::vector<Access> reads = {Access{e.operands[0], -1}}, writes;
    for (int32_t at : members) {
      const Eqn& x = g_.eqns[size_t(at)];
      ns.push_back(g_.type(x.results[0]).shape.back());
      count += numel(g_.type(x.results[0]).shape);
      r.operands.push_back(g_.type(x.operands[1]));
      r.results.push_back(g_.type(x.results[0]));
      reads.push_back(Access{x.operands[1], -1});
      writes.push_back(Access{x.results[0], -1});
    }
    for (const Attr& a : e.attrs)
      if (a.name != "fusion") r.attrs.push_back(a);
    int64_t n = 0;
    for (int64_t x : ns) n += x;
    MatMulDecision c = chooseMatMul(batch, m, k, n, flagAttr(e.attrs, "transpose_b"), g_.type(e.operands[0]).dtype,
                                    g_.type(e.operands[1]).dtype, d_);
    if (members.size() > 1) {
      // Only a gemv (or gemv-mma: MatMulRule::groups) runs a group as one kernel: there one
      // launch of all the columns reads a once and fills the device
      // (Llama-3-8B's q, k and v on the H200: 0.027 ms against 0.033 apart). A gemm's rows already
      // fill it, and one launch of the group's tiles ran 9% slower than the
      // products apart in a 2048-token prefill (bench/model/NOTES.md), so
      // each member is planned alone, in the group's order.
      if (!c.groups) {
        for (int32_t at : members)
          if (auto s = planMatMul(at, {at}); !s) return s;
        return ok();
      }
      c.reason = str(int64_t(members.size())) + " products of one a, " + str(n) + " columns: " + c.reason;
    }
    int64_t groups = matmulWorkgroups(c.schedule, batch, m, ns), splits = c.schedule.splits;
    auto grid = gridFor(e, "op MatMul", groups, c.schedule.kind + " workgroups");
    if (!grid) return grid.error();
    r.schedule = c.schedule;
    if (splits == 1) {
      dispatch(kernel(r, i, c.reason), i, *grid, std::move(reads), std::move(writes));
      return ok();
    }
    // Split K: the chunks' partial sums go to the scratch (each product's
    // chunk-major, one product after another), then one thread an element
    // adds them in chunk order.
    int32_t scratch = int32_t(plan_.scratch.size());
    plan_.scratch.push_back(Scratch{i, splits * count});
    dispatch(kernel(r, i, c.reason), i, *grid, std::move(reads), {Access{-1, scratch}});
    r.schedule = matmulCombineSchedule(splits, d_);
    auto sumGrid = gridFor(e, "op MatMul", ceilDiv(count, r.schedule.workgroupSize), "split-K combine workgroups");
    if (!sumGrid) return sumGrid.error();
    dispatch(kernel(r), i, *sumGrid, {Access{-1, scratch}}, std::move(writes));
    return ok();
  }

  // A fusion group runs as one dispatch where its root stands, reading the
  // group's inputs and writing its outputs.
  Status planFused(int32_t i, const FusionGroup& grp) {
    const Eqn& e = g_.eqns[size_t(i)];
    int64_t partialBytes = 0;  // one f32 or i32 a reduction
    for (int32_t m : grp.members)
      if (isReduction(g_.eqns[size_t(m)].op)) partialBytes += 4;
    int64_t n = grp.space.empty() ? 1 : grp.space.back();
    Schedule s = fusedSchedule(grp.rows, n, numel(grp.space) / n, partialBytes, d_);
    int64_t count = numel(grp.space), groups = grp.rows ? count / n : ceilDiv(count, s.workgroupSize);
    std::string counted = grp.rows ? str(count / n) + " rows" : str(count) + " elements, " + str(s.workgroupSize) + " per workgroup";
    auto grid = gridFor(e, "a fused kernel", groups, counted);
    if (!grid) return grid.error();
    std::vector<Access> reads, writes;
    for (ValueId v : grp.inputs) reads.push_back(Access{v, -1});
    for (ValueId v : grp.outputs) writes.push_back(Access{v, -1});
    dispatch(kernel(fusedRequest(g_, grp, std::move(s))), i, *grid, std::move(reads), std::move(writes));
    return ok();
  }

  Status planPlain(int32_t i, const Eqn& e) {
    const Type& r = g_.type(e.results[0]);
    std::string kind = "elementwise", unit = "elements";
    int64_t count = numel(r.shape);
    if (writesInPlace(g_, e)) {  // only the updated elements need a thread
      kind = "in-place";
      unit = "updated elements";
      count = numel(g_.type(e.operands[e.op == Op::ScatterUpdate ? 2 : 1]).shape);
    }
    if (opInfo(e.op).cls == OpClass::Reduce) kind = "reduce";
    // A row selection takes a workgroup a row; the rest a thread an element.
    const bool rows = e.op == Op::TopK || e.op == Op::BlockTopK || e.op == Op::Sample;
    const Type* x = rows ? &g_.type(e.operands[0]) : nullptr;
    Schedule s = e.op == Op::Sample ? sampleSchedule(x->shape.back(), d_)
                 : rows             ? rowsSchedule(x->shape.back(), x->dtype, d_)
                                    : plainSchedule(e.op == Op::IndexGuard ? "guard" : kind, d_);
    std::array<int64_t, 3> grid = {1, 1, 1};
    if (e.op != Op::IndexGuard) {
      int64_t groups = rows ? numel(x->shape) / x->shape.back() : ceilDiv(count, s.workgroupSize);
      std::string counted = rows ? str(groups) + " rows, one a workgroup"
                                 : str(count) + " " + unit + ", " + str(s.workgroupSize) + " per workgroup";
      auto g = gridFor(e, ("op " + std::string(opName(e.op))).c_str(), groups, counted);
      if (!g) return g.error();
      grid = *g;
    }
    dispatch(kernel(request(e, std::move(s))), i, grid, operands(e), results(e));
    return ok();
  }
};

std::string opsStr(const TwoByteOps& o) {
  return std::string(o.storage ? "storage," : "") + (o.arith ? "arith," : "") + (o.select ? "select," : "");
}

}  // namespace

Expected<Plan> planGraph(const Graph& g, const DeviceProfile& d, std::vector<ScheduleNote>* notes) {
  return Planner(g, d, notes).run();
}

KernelRequest fusedRequest(const Graph& g, const FusionGroup& grp, Schedule s) {
  const Eqn& root = g.eqns[size_t(grp.root())];
  KernelRequest r{root.op, {}, {}, {}, std::move(s)};
  for (ValueId v : grp.inputs) r.operands.push_back(g.type(v));
  for (ValueId v : grp.outputs) r.results.push_back(g.type(v));
  std::vector<int32_t> stepOf(g.values.size(), -1);
  for (int32_t m : grp.members) {
    const Eqn& e = g.eqns[size_t(m)];
    FusedStep step{e.op, {}, g.type(e.results[0]), {}};
    for (const Attr& a : e.attrs)
      if (a.name != "fusion") step.attrs.push_back(a);
    for (ValueId v : e.operands) {
      if (stepOf[size_t(v)] >= 0) {
        step.args.push_back(stepOf[size_t(v)]);
        continue;
      }
      auto at = std::find(grp.inputs.begin(), grp.inputs.end(), v);
      step.args.push_back(-1 - int32_t(at - grp.inputs.begin()));
    }
    stepOf[size_t(e.results[0])] = int32_t(r.steps.size());
    r.steps.push_back(std::move(step));
  }
  for (ValueId v : grp.outputs) r.stores.push_back(stepOf[size_t(v)]);
  return r;
}

uint64_t profileHash(const DeviceProfile& d) {
  std::string s;
  s += "name=" + str(int64_t(d.name.size())) + ":" + d.name + "\n";
  s += "target=" + std::string(targetName(d.target)) + "\n";
  s += "arch=" + str(int64_t(d.arch.size())) + ":" + d.arch + "\n";
  s += "compute_units=" + str(d.compute_units) + "\n";
  s += "workgroup_memory_bytes=" + str(d.workgroup_memory_bytes) + "\n";
  s += "max_workgroup_size=" + str(d.max_workgroup_size) + "\n";
  s += "subgroup_size=" + str(d.subgroup_size) + "\n";
  s += "grid_limits=" + str(d.grid_limits[0]) + "," + str(d.grid_limits[1]) + "," + str(d.grid_limits[2]) + "\n";
  s += "max_buffer_bytes=" + str(d.max_buffer_bytes) + "\n";
  s += "max_bindings=" + str(d.max_bindings) + "\n";
  s += "memory_bytes=" + str(d.memory_bytes) + "\n";
  if (d.memory_bandwidth_bytes_per_s > 0)  // absent from the text when not given, as in the profile
    s += "memory_bandwidth_bytes_per_s=" + str(d.memory_bandwidth_bytes_per_s) + "\n";
  s += "f16=" + opsStr(d.f16) + "\n";
  s += "bf16=" + opsStr(d.bf16) + "\n";
  if (!d.matrix_ops.empty()) {  // absent from the text when unlisted, as in the profile
    s += "matrix_multiply=";
    for (MatrixOp op : d.matrix_ops) s += std::string(matrixShape(op).name) + ",";
    s += "\n";
  }
  return fnv1a(s);
}

std::string planKey(const Plan& plan) {
  uint64_t h = kFnvOffset;
  for (const Kernel& k : plan.kernels) h = fnv1a(printRequest(k.request) + "\n", h);
  h = fnv1a("device " + hex64(plan.deviceHash) + "\n", h);
  return hex64(h);
}

Status checkScratch(const Plan& plan, const DeviceProfile& d) {
  for (const Scratch& s : plan.scratch) {
    if (s.bytes() <= d.max_buffer_bytes) continue;
    Loc loc;
    std::string what = "scratch";
    if (s.eqn >= 0 && size_t(s.eqn) < plan.source.eqns.size()) {
      const Eqn& e = plan.source.eqns[size_t(s.eqn)];
      loc = e.loc;
      const Shape& r = plan.source.type(e.results[0]).shape;
      if (e.op == Op::MatMul) {
        what = "split-K scratch of " + str(s.bytes()) + " bytes (" + str(s.floats / numel(r)) + " splits * " +
               str(numel(r)) + " result elements)";
      } else {
        const Shape& q = plan.source.type(e.operands[0]).shape;
        int64_t rows = q[0] * q[1], dv = r.back();
        what = "split-kv scratch of " + str(s.bytes()) + " bytes (" + str(rows) + " rows * " +
               str(s.floats / (rows * (dv + 2))) + " splits * (value width " + str(dv) + " + 2) floats)";
      }
    }
    return refuse("ScratchBytes", loc,
                  what + " exceeds the device's single-buffer limit of " + str(d.max_buffer_bytes) + " bytes",
                  {{"scratch_bytes", s.bytes()}, {"max_buffer_bytes", d.max_buffer_bytes}});
  }
  return ok();
}

Status checkMemoryBudget(const Plan& plan, const DeviceProfile& d) {
  int64_t weights = 0, state = 0, io = 0;
  for (const Buffer& b : plan.buffers) {
    switch (b.role) {
      case BufferRole::Weight: weights += b.bytes; break;
      case BufferRole::State: state += b.bytes; break;
      case BufferRole::Input:
      case BufferRole::Slot:
      case BufferRole::Output:
      case BufferRole::Validation: io += b.bytes; break;
      case BufferRole::Temp:
      case BufferRole::Scratch:
      case BufferRole::View: break;  // in the arena, or no memory of their own
    }
  }
  int64_t total = plan.arenaBytes + weights + state + io;
  if (total <= d.memory_bytes) return ok();
  return refuse("MemoryBudget", Loc{plan.source.loc.file},
                "the plan needs " + str(total) + " bytes of device memory (arena " + str(plan.arenaBytes) +
                    ", weights " + str(weights) + ", state " + str(state) + ", inputs, slots and outputs " + str(io) +
                    ") but the device has " + str(d.memory_bytes),
                {{"bytes", total},
                 {"arena_bytes", plan.arenaBytes},
                 {"weight_bytes", weights},
                 {"state_bytes", state},
                 {"io_bytes", io},
                 {"memory_bytes", d.memory_bytes}});
}

}  // namespace poot

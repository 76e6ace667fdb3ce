// How the buffer plan is built: one pass over the graph gives every value its
// buffer (parameters, then each eqn's results and its scratch, in eqn order),
// a second pass over the eqns computes each arena buffer's lifetime (through
// views), then the arena is colored greedy-by-size: buffers sorted by size
// (largest first; ties by first use, then index) each take the smallest gap
// that fits among the already placed buffers whose lifetimes overlap theirs,
// or the end. Everything is ordered by indices, never by pointers or hashes,
// so the same plan always gets the same offsets.
#include "plan/buffers.h"

#include "ir/fusion.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <string>

#include "plan/planner.h"

namespace poot {

namespace {

int64_t alignUp(int64_t v) { return (v + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }
int64_t bytesOf(const Type& t) { return numel(t.shape) * dtypeBytes(t.dtype); }
bool inArena(BufferRole r) { return r == BufferRole::Temp || r == BufferRole::Scratch; }

Error planError(const Loc& loc, std::string msg) { return makeError(ErrorKind::Verify, loc, std::move(msg)); }

class BufferPlanner {
 public:
  explicit BufferPlanner(Plan& p) : p_(p), g_(p.source) {}

  Status run() {
    p_.buffers.clear();
    p_.arenaBytes = 0;
    buf_.assign(g_.values.size(), -1);
    origin_.assign(g_.values.size(), -1);
    if (auto s = fusion(); !s) return s;
    if (auto s = assign(); !s) return s;
    if (auto s = checkDonation(); !s) return s;
    lifetimes();
    color();
    dropViews();
    return bind();
  }

 private:
  Plan& p_;
  const Graph& g_;
  std::vector<int32_t> buf_;      // value -> buffer
  std::vector<ValueId> origin_;   // value -> the value it is a view of (itself when not a view)
  std::vector<int32_t> scratch_;  // Plan::scratch index -> buffer
  std::vector<int32_t> runsAt_;   // eqn -> where its dispatch runs: a fusion group's members at its root
  std::vector<uint8_t> inside_;   // values only a fusion group's kernel sees: no buffer

  Status fusion() {
    runsAt_.resize(g_.eqns.size());
    for (size_t i = 0; i < g_.eqns.size(); ++i) runsAt_[i] = int32_t(i);
    inside_.assign(g_.values.size(), 0);
    auto groups = fusionGroups(g_);
    if (!groups) return groups.error();
    for (const FusionGroup& grp : *groups)
      for (int32_t m : grp.members) {
        // A product group runs at its root or, planned apart, at each
        // member (planner.cpp): its members are adjacent and read only a,
        // which the root reads too, so a lifetime from the member's own
        // index holds either way.
        if (!grp.products) runsAt_[size_t(m)] = grp.root();
        ValueId r = g_.eqns[size_t(m)].results[0];
        inside_[size_t(r)] = std::find(grp.outputs.begin(), grp.outputs.end(), r) == grp.outputs.end();
      }
    return ok();
  }
  bool fused(size_t eqn) const { return fusionId(g_.eqns[eqn]) >= 0; }

  int32_t add(Buffer b) {
    p_.buffers.push_back(std::move(b));
    return int32_t(p_.buffers.size() - 1);
  }

  Status assign() {
    const size_t nv = g_.values.size();
    std::vector<uint8_t> output(nv), validation(nv);
    std::vector<ValueId> stateOf(nv, -1);
    for (const Export& x : g_.outputs) output[size_t(x.value)] = 1;
    for (const Export& x : g_.validations) validation[size_t(x.value)] = 1;
    for (const StateOut& s : g_.stateOuts) stateOf[size_t(s.value)] = s.state;

    for (ValueId id : g_.params) {
      const Value& v = g_.value(id);
      Buffer b{v.name, BufferRole::Input, v.type, id};
      b.bytes = bytesOf(v.type);
      switch (v.storage) {
        case Storage::Input: b.role = BufferRole::Input; break;
        case Storage::Weight: b.role = BufferRole::Weight; break;
        case Storage::State: b.role = BufferRole::State; break;
        case Storage::Slot:
          b.role = BufferRole::Slot;
          b.lo = v.lo;
          b.hi = v.hi;
          break;
        case Storage::Result: return planError(v.loc, "parameter %" + v.name + " has no storage class");
      }
      buf_[size_t(id)] = add(std::move(b));
      origin_[size_t(id)] = id;
    }

    std::vector<std::vector<int32_t>> scratchOf(g_.eqns.size());
    for (size_t i = 0; i < p_.scratch.size(); ++i) {
      int32_t e = p_.scratch[i].eqn;
      if (e < 0 || size_t(e) >= g_.eqns.size())
        return planError(g_.loc, "scratch " + std::to_string(i) + " names eqn " + std::to_string(e) +
                                     ", which the graph does not have");
      scratchOf[size_t(e)].push_back(int32_t(i));
    }
    scratch_.assign(p_.scratch.size(), -1);

    for (size_t i = 0; i < g_.eqns.size(); ++i) {
      const Eqn& e = g_.eqns[i];
      for (ValueId o : e.operands)
        if (buf_[size_t(o)] < 0 && !inside_[size_t(o)])
          return planError(e.loc, "operand %" + g_.value(o).name + " has no buffer (used before it is defined)");
      bool view = keepsLayout(g_, e) && !fused(i);
      for (ValueId r : e.results) {
        const Value& v = g_.value(r);
        origin_[size_t(r)] = r;
        if (inside_[size_t(r)]) continue;
        if (stateOf[size_t(r)] >= 0) {  // donated: written into the state's buffer
          buf_[size_t(r)] = buf_[size_t(stateOf[size_t(r)])];
          continue;
        }
        Buffer b{v.name, BufferRole::Temp, v.type, r};
        b.bytes = bytesOf(v.type);
        if (output[size_t(r)]) {
          b.role = BufferRole::Output;
        } else if (validation[size_t(r)]) {
          b.role = BufferRole::Validation;
        } else if (view) {
          int32_t base = buf_[size_t(e.operands[0])];
          if (p_.buffers[size_t(base)].role == BufferRole::View) base = p_.buffers[size_t(base)].aliasOf;
          b.role = BufferRole::View;
          b.aliasOf = base;
          origin_[size_t(r)] = origin_[size_t(e.operands[0])];
        }
        buf_[size_t(r)] = add(std::move(b));
      }
      for (size_t k = 0; k < scratchOf[i].size(); ++k) {
        int32_t s = scratchOf[i][k];
        std::string name = (e.results.empty() ? "eqn" + std::to_string(i) : g_.value(e.results[0]).name) + ".scratch";
        if (k > 0) name += "." + std::to_string(k);
        Buffer b{std::move(name), BufferRole::Scratch, Type{DType::F32, {p_.scratch[size_t(s)].floats}}, -1};
        b.bytes = p_.scratch[size_t(s)].bytes();
        scratch_[size_t(s)] = add(std::move(b));
      }
    }
    return ok();
  }

  // A state's buffer is donated to its new value: once the eqn producing the
  // state_out has run, the old value is gone, so nothing after it may read it
  // (directly or through a view), and it cannot leave the graph.
  Status checkDonation() const {
    for (const StateOut& s : g_.stateOuts) {
      int32_t writer = g_.value(s.value).def;
      if (writer < 0) continue;  // not computed by an eqn: the verifier refuses it
      const std::string& name = g_.value(s.state).name;
      for (size_t q = 0; q < g_.eqns.size(); ++q) {
        if (runsAt_[q] <= writer) continue;  // a fusion group's member reads where its root runs
        for (ValueId o : g_.eqns[q].operands)
          if (origin_[size_t(o)] == s.state)
            return planError(g_.eqns[q].loc, "reads state %" + name + " after its new value %" +
                                                 g_.value(s.value).name + " was written in place over it (eqn " +
                                                 std::to_string(writer) + ")");
      }
      for (const auto* exports : {&g_.outputs, &g_.validations})
        for (const Export& x : *exports)
          if (x.value == s.state)
            return planError(x.loc, "state %" + name + " leaves the graph, but its buffer is overwritten in place by %" +
                                        g_.value(s.value).name);
    }
    return ok();
  }

  int32_t root(int32_t b) const {
    return p_.buffers[size_t(b)].role == BufferRole::View ? p_.buffers[size_t(b)].aliasOf : b;
  }

  void touch(int32_t b, int32_t eqn) {
    Buffer& x = p_.buffers[size_t(b)];
    if (x.first < 0 || eqn < x.first) x.first = eqn;
    x.last = std::max(x.last, eqn);
  }

  // Each arena buffer lives from its defining eqn to the last eqn reading it
  // or any view of it; a view records its own span too (for printing), and a
  // scratch lives during its eqn only.
  void lifetimes() {
    for (size_t i = 0; i < g_.eqns.size(); ++i) {
      const Eqn& e = g_.eqns[i];
      int32_t q = runsAt_[i];
      for (ValueId r : e.results) {
        if (inside_[size_t(r)]) continue;
        int32_t b = buf_[size_t(r)];
        if (inArena(p_.buffers[size_t(root(b))].role)) {
          touch(root(b), q);
          if (root(b) != b) touch(b, q);
        }
      }
      for (ValueId o : e.operands) {
        if (inside_[size_t(o)]) continue;
        int32_t b = buf_[size_t(o)];
        if (inArena(p_.buffers[size_t(root(b))].role)) {
          touch(root(b), q);
          if (root(b) != b) touch(b, q);
        }
      }
    }
    for (size_t s = 0; s < scratch_.size(); ++s) touch(scratch_[s], p_.scratch[s].eqn);
  }

  void color() {
    std::vector<int32_t> order;
    for (size_t b = 0; b < p_.buffers.size(); ++b)
      if (inArena(p_.buffers[b].role)) order.push_back(int32_t(b));
    auto size = [&](int32_t b) { return alignUp(p_.buffers[size_t(b)].bytes); };
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      if (size(a) != size(b)) return size(a) > size(b);
      return p_.buffers[size_t(a)].first < p_.buffers[size_t(b)].first;
    });
    std::vector<int32_t> placed;
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (int32_t b : order) {
      Buffer& x = p_.buffers[size_t(b)];
      int64_t need = size(b);
      busy.clear();
      for (int32_t o : placed) {
        const Buffer& y = p_.buffers[size_t(o)];
        if (y.first <= x.last && x.first <= y.last) busy.emplace_back(y.offset, y.offset + size(o));
      }
      std::sort(busy.begin(), busy.end());
      int64_t cursor = 0, best = -1, bestGap = std::numeric_limits<int64_t>::max();
      for (auto [lo, hi] : busy) {
        if (lo - cursor >= need && lo - cursor < bestGap) {
          best = cursor;
          bestGap = lo - cursor;
        }
        cursor = std::max(cursor, hi);
      }
      x.offset = best >= 0 ? best : cursor;
      p_.arenaBytes = std::max(p_.arenaBytes, x.offset + need);
      placed.push_back(b);
    }
    for (Buffer& v : p_.buffers)
      if (v.role == BufferRole::View) v.offset = p_.buffers[size_t(v.aliasOf)].offset;
  }

  // A view eqn moves no data: its dispatches go, and so do kernels that no
  // dispatch uses any more (the rest keep their order; the key follows them).
  void dropViews() {
    auto isView = [&](int32_t eqn) {
      if (eqn < 0 || size_t(eqn) >= g_.eqns.size()) return false;
      const Eqn& e = g_.eqns[size_t(eqn)];
      for (ValueId r : e.results)
        if (p_.buffers[size_t(buf_[size_t(r)])].role != BufferRole::View) return false;
      return !e.results.empty();
    };
    std::vector<Dispatch> kept;
    for (Dispatch& d : p_.dispatches)
      if (!isView(d.eqn)) kept.push_back(std::move(d));
    bool dropped = kept.size() != p_.dispatches.size();
    p_.dispatches = std::move(kept);
    if (!dropped) return;
    std::vector<int32_t> renumber(p_.kernels.size(), -1);
    for (const Dispatch& d : p_.dispatches)
      if (d.kernel >= 0 && size_t(d.kernel) < renumber.size()) renumber[size_t(d.kernel)] = 0;
    std::vector<Kernel> kernels;
    for (size_t k = 0; k < p_.kernels.size(); ++k)
      if (renumber[k] == 0) {
        renumber[k] = int32_t(kernels.size());
        kernels.push_back(std::move(p_.kernels[k]));
      }
    if (kernels.size() == p_.kernels.size()) {
      p_.kernels = std::move(kernels);
      return;
    }
    p_.kernels = std::move(kernels);
    for (Dispatch& d : p_.dispatches)
      if (d.kernel >= 0 && size_t(d.kernel) < renumber.size()) d.kernel = renumber[size_t(d.kernel)];
    // Entry names end in the kernel's index (<op>_<kind>_<index>): keep them so.
    for (size_t k = 0; k < renumber.size(); ++k) {
      if (renumber[k] < 0) continue;
      std::string& entry = p_.kernels[size_t(renumber[k])].entry;
      std::string old = "_" + std::to_string(k);
      if (entry.size() > old.size() && entry.compare(entry.size() - old.size(), old.size(), old) == 0)
        entry = entry.substr(0, entry.size() - old.size()) + "_" + std::to_string(renumber[k]);
    }
    p_.key = planKey(p_);
  }

  Status bind() {
    for (size_t i = 0; i < p_.dispatches.size(); ++i) {
      Dispatch& d = p_.dispatches[i];
      d.bindings.clear();
      for (const auto* list : {&d.reads, &d.writes})
        for (const Access& a : *list) {
          int32_t b = -1;
          if (a.value >= 0 && size_t(a.value) < buf_.size()) b = buf_[size_t(a.value)];
          if (a.value < 0 && a.scratch >= 0 && size_t(a.scratch) < scratch_.size()) b = scratch_[size_t(a.scratch)];
          if (b < 0)
            return planError(g_.loc, "dispatch " + std::to_string(i) + " accesses " +
                                         (a.value >= 0 ? "value " + std::to_string(a.value)
                                                       : "scratch " + std::to_string(a.scratch)) +
                                         ", which has no buffer");
          d.bindings.push_back(b);
        }
    }
    return ok();
  }
};

}  // namespace

Status planBuffers(Plan& p) { return BufferPlanner(p).run(); }

std::vector<int32_t> valueBuffers(const Plan& p) {
  std::vector<int32_t> out(p.source.values.size(), -1);
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    ValueId v = p.buffers[b].value;
    if (v >= 0 && size_t(v) < out.size()) out[size_t(v)] = int32_t(b);
  }
  for (const StateOut& s : p.source.stateOuts)
    if (size_t(s.state) < out.size() && size_t(s.value) < out.size()) out[size_t(s.value)] = out[size_t(s.state)];
  return out;
}

StepReads stepReads(const Plan& p) {
  const Graph& g = p.source;
  std::vector<int64_t> gathered(g.values.size(), 0);  // bytes the Gathers of each value select
  std::vector<double> selected(g.values.size(), 0);   // the share of an expert's weight its tokens may select
  std::vector<bool> whole(g.values.size(), false);    // read by anything else
  for (const Eqn& e : g.eqns)
    for (size_t i = 0; i < e.operands.size(); ++i) {
      size_t v = size_t(e.operands[i]);
      const Type& t = g.type(e.operands[i]);
      if (e.op == Op::RoutedExperts && i >= 2) {  // h, the router, then each expert's weights
        const Shape& h = g.type(e.operands[0]).shape;
        double experts = double(std::get<int64_t>(*e.attr("experts")));
        double picks = double(std::get<int64_t>(*e.attr("k"))) * double(numel(h) / std::max<int64_t>(1, h.back()));
        selected[v] += std::min(1.0, picks / experts);
        continue;
      }
      const AttrValue* axis = e.attr("axis");
      std::optional<int64_t> a;
      if (e.op == Op::Gather && i == 0 && axis && std::holds_alternative<int64_t>(*axis))
        a = normalizeAxis(std::get<int64_t>(*axis), int64_t(t.shape.size()));
      if (!a) {
        whole[v] = true;
        continue;
      }
      int64_t slice = t.shape[size_t(*a)] > 0 ? numel(t.shape) / t.shape[size_t(*a)] : 0;
      gathered[v] += numel(g.type(e.operands[1]).shape) * slice * dtypeBytes(t.dtype);
    }
  StepReads r;
  for (const Buffer& b : p.buffers) {
    if (b.role == BufferRole::State) r.stateBytes += b.bytes;
    if (b.role != BufferRole::Weight || b.value < 0) continue;
    size_t v = size_t(b.value);
    r.weightBytes += whole[v] ? b.bytes : std::min(b.bytes, gathered[v] + int64_t(selected[v] * double(b.bytes)));
  }
  return r;
}

Status checkWeightBytes(const Plan& p, const DeviceProfile& d) {
  for (const Buffer& b : p.buffers) {
    if (b.role != BufferRole::Weight || b.bytes <= d.max_buffer_bytes) continue;
    // At the weight's declaration when the graph came from a file.
    Loc loc = b.value >= 0 && !p.source.value(b.value).loc.file.empty() ? p.source.value(b.value).loc
                                                                       : Loc{p.source.loc.file};
    Error e = makeError(ErrorKind::Capability, loc,
                        "weight %" + b.name + " " + b.type.str() + " has " + std::to_string(b.bytes) +
                            " bytes, over the single-buffer limit of device '" + d.name + "' (max_buffer_bytes " +
                            std::to_string(d.max_buffer_bytes) + "): no kernel can bind it whole");
    e.capability = "BufferBytes";
    e.figures = {{"bytes", b.bytes}, {"max_buffer_bytes", d.max_buffer_bytes}};
    return e;
  }
  return ok();
}

}  // namespace poot

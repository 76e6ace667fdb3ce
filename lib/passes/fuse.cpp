// fuse: tags chains of elementwise ops, with the row reductions that feed
// them, as fusion groups (ir/fusion.h) that the planner gives one kernel
// each. Two steps:
//   1. Small tables computed only from constants and slots (the rotary
//      tables, iotas, scalar constants; at most kMaxTable elements) that
//      several fusible eqns read are copied once for each of them, so every
//      kernel that needs a table computes it itself from the slot and none
//      is a dispatch of its own; the originals then go if nothing else reads
//      them.
//   2. Groups form from the last eqn to the first: a fusible eqn not yet in
//      a group, and not a view (ir/fusion.h, keepsLayout), roots a new one,
//      and the producer of each of a member's operands joins when the group still keeps the rules with it (every
//      reader of its result is a member or runs after the root; shapes;
//      dtypes) and its kernel still binds no more storage buffers (inputs
//      and outputs) than the device allows. A producer that is refused is
//      remarked with the rule.
//   3. (Run before step 2, since it moves eqns.) MatMuls that read the same
//      a [..., M, K] with weights of one layout and dtype (a layer's q, k and
//      v projections; its gate and up) become one product group: the later ones move up to stand right after the
//      first (they read only a and weights, so nothing between needs to
//      run before them), as many as the device's bindings allow (a, each
//      weight, each result).
// A group of one eqn stays plain unless it is a reduction (the row kernel
// sums in parallel), and so does a group of index maps only (a view or a
// copy either way). A graph that already has groups (read back from
// --emit=graph) is left as it is.
#include <algorithm>
#include <functional>
#include <map>

#include "ir/fusion.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace poot {

namespace {

constexpr int64_t kMaxTable = 4096;

bool isIndexMap(Op op) { return op == Op::Reshape || op == Op::Broadcast || op == Op::Transpose; }

// Whether eqn e may be a member at all (an in-place write: only as the root
// of its update's group, which completeGroup holds it to).
bool candidate(const FusionContext& c, const Eqn& e) {
  if (e.op == Op::DynamicUpdateSlice && writesInPlace(c.g, e)) return true;
  if (!fusibleOp(e.op) || e.results.size() != 1) return false;
  return !c.forbidden[size_t(e.results[0])];
}

// Step 1: each fusible reader of a shared table gets its own copy of the
// eqns computing it, placed right before the reader.
bool copyTables(Graph& g) {
  FusionContext c(g);
  std::vector<uint8_t> table(g.values.size(), 0);
  for (const Eqn& e : g.eqns) {
    if (!candidate(c, e) || isReduction(e.op) || e.op == Op::Rope || c.exported[size_t(e.results[0])]) continue;
    if (numel(g.type(e.results[0]).shape) > kMaxTable) continue;
    bool fromTables = std::all_of(e.operands.begin(), e.operands.end(), [&](ValueId v) {
      return table[size_t(v)] || g.value(v).storage == Storage::Slot;
    });
    if (fromTables) table[size_t(e.results[0])] = 1;
  }
  std::vector<Eqn> out;
  bool changed = false;
  const std::vector<Eqn> eqns = g.eqns;
  for (const Eqn& original : eqns) {
    Eqn e = original;
    if (candidate(c, e)) {
      std::map<ValueId, ValueId> copies;
      std::function<ValueId(ValueId)> copy = [&](ValueId v) -> ValueId {
        if (auto it = copies.find(v); it != copies.end()) return it->second;
        const Eqn& p = eqns[size_t(g.value(v).def)];
        std::vector<ValueId> operands;
        for (ValueId u : p.operands) operands.push_back(table[size_t(u)] ? copy(u) : u);  // tables are eqn results
        Eqn& made = g.addEqn(p.op, std::move(operands), p.attrs, {{freshName(g, g.value(v).name), g.type(v)}}, p.loc);
        made.typeLoc = p.typeLoc;
        ValueId r = made.results[0];
        out.push_back(std::move(g.eqns.back()));
        g.eqns.pop_back();
        copies[v] = r;
        return r;
      };
      for (ValueId& v : e.operands)
        if (table[size_t(v)] && c.users[size_t(v)].size() > 1) {
          v = copy(v);
          changed = true;
        }
    }
    out.push_back(std::move(e));
  }
  if (!changed) return false;
  g.eqns = std::move(out);
  g.reindex();
  eraseDeadEqns(g);
  return true;
}

// Why MatMul j may not join the products of MatMul i (both read one a), or
// "" when it may.
std::string productMismatch(const Graph& g, const Eqn& i, const Eqn& j, int32_t first) {
  const Type &b = g.type(j.operands[1]), &r = g.type(j.results[0]);
  if (b.rank() != 2) return "its b is not a matrix";
  if (flagAttr(i.attrs, "transpose_b") != flagAttr(j.attrs, "transpose_b")) return "its b is laid out the other way";
  if (b.dtype != g.type(i.operands[1]).dtype || r.dtype != g.type(i.results[0]).dtype)
    return "its b or result has another dtype";
  if (g.value(j.operands[1]).def >= first) return "its b is computed after the first product";
  return "";
}

// Step 3: returns the product groups' members, after moving them together.
std::vector<std::vector<int32_t>> groupProducts(Graph& g, PassContext& ctx) {
  std::vector<std::vector<int32_t>> groups;
  std::vector<uint8_t> taken(g.eqns.size(), 0);
  std::vector<size_t> order;  // the eqns in their new order
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    if (taken[i]) continue;
    order.push_back(i);
    const Eqn& e = g.eqns[i];
    if (e.op != Op::MatMul || g.type(e.operands[1]).rank() != 2) continue;  // a product of a weight
    std::vector<size_t> siblings = {i};
    for (size_t j = i + 1; j < g.eqns.size(); ++j) {
      const Eqn& s = g.eqns[j];
      if (s.op != Op::MatMul || s.operands[0] != e.operands[0] || taken[j]) continue;
      std::string why = productMismatch(g, e, s, int32_t(i));
      if (why.empty() && 1 + 2 * int64_t(siblings.size() + 1) > ctx.maxBindings)
        why = "the kernel would bind more storage buffers than the device's " + std::to_string(ctx.maxBindings);
      if (!why.empty()) {
        ctx.remark("fuse", g, s,
                   "not computed with %" + g.value(e.results[0]).name + ", which reads the same a: " + why);
        continue;
      }
      siblings.push_back(j);
      taken[j] = 1;
    }
    if (siblings.size() < 2) continue;
    std::vector<int32_t> members;
    for (size_t j : siblings) {
      if (j != i) order.push_back(j);
      members.push_back(int32_t(order.size() - 1));
    }
    groups.push_back(std::move(members));
  }
  if (groups.empty()) return groups;
  std::vector<Eqn> eqns;
  for (size_t i : order) eqns.push_back(std::move(g.eqns[i]));
  g.eqns = std::move(eqns);
  g.reindex();
  return groups;
}

}  // namespace

Expected<bool> runFuse(Graph& g, PassContext& ctx) {
  for (const Eqn& e : g.eqns)
    if (e.attr("fusion")) return false;
  bool changed = copyTables(g);
  std::vector<std::vector<int32_t>> products = groupProducts(g, ctx);
  FusionContext c(g);
  std::vector<int64_t> groupOf(g.eqns.size(), -1);
  std::vector<FusionGroup> groups;
  for (std::vector<int32_t>& members : products) {
    FusionGroup grp;
    grp.id = int64_t(groups.size());
    grp.members = std::move(members);
    for (int32_t m : grp.members) groupOf[size_t(m)] = grp.id;
    groups.push_back(std::move(grp));
  }
  for (size_t i = g.eqns.size(); i-- > 0;) {
    const Eqn& e = g.eqns[i];
    if (!candidate(c, e)) continue;
    if (groupOf[i] < 0) {
      // A view roots no group: alone it costs nothing, and as a root it
      // would draw its producers into a flat kernel of its own shape, away
      // from the row group their reductions make.
      if (keepsLayout(g, e)) continue;
      FusionGroup grp;
      grp.id = int64_t(groups.size());
      grp.members = {int32_t(i)};
      if (!completeGroup(c, grp)) continue;
      groupOf[i] = grp.id;
      groups.push_back(std::move(grp));
    }
    FusionGroup& grp = groups[size_t(groupOf[i])];
    for (ValueId v : e.operands) {
      int32_t p = g.value(v).def;
      if (p < 0 || groupOf[size_t(p)] >= 0 || !candidate(c, g.eqns[size_t(p)])) continue;
      FusionGroup tried = grp;
      tried.members.insert(std::lower_bound(tried.members.begin(), tried.members.end(), p), p);
      std::string why;
      if (auto s = completeGroup(c, tried); !s) why = s.error().message;
      else if (int64_t n = int64_t(tried.inputs.size() + tried.outputs.size()); n > ctx.maxBindings)
        why = "its kernel would bind " + std::to_string(n) + " storage buffers, more than the device's " +
              std::to_string(ctx.maxBindings);
      if (!why.empty()) {
        ctx.remark("fuse", g, g.eqns[size_t(p)],
                   "not fused into the kernel of %" + g.value(g.eqns[size_t(grp.root())].results[0]).name + ": " + why);
        continue;
      }
      grp = std::move(tried);
      groupOf[size_t(p)] = grp.id;
    }
  }
  int64_t next = 0;
  std::sort(groups.begin(), groups.end(), [](const FusionGroup& a, const FusionGroup& b) { return a.root() < b.root(); });
  for (const FusionGroup& grp : groups) {
    bool single = grp.members.size() == 1 && !isReduction(g.eqns[size_t(grp.root())].op);  // never a product group
    bool moves = std::all_of(grp.members.begin(), grp.members.end(),
                             [&](int32_t m) { return isIndexMap(g.eqns[size_t(m)].op); });
    if (single || moves) continue;
    for (int32_t m : grp.members) g.eqns[size_t(m)].attrs.push_back(Attr{"fusion", next});
    ++next;
    changed = true;
  }
  // Two members of one group may have had copies of the same table: one is
  // enough (and a graph read back from --emit=graph then compiles to itself).
  if (eliminateCommon(g)) eraseDeadEqns(g);
  return changed;
}

}  // namespace poot

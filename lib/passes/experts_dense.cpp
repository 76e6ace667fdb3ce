// routed-experts-dense: writes every RoutedExperts back as its dense
// primitive form, the chain the DeepSeek-V2 tracer emits (routed-experts
// reads it; docs/passes.md): the router in f32, softmax or sigmoid scores,
// TopK, the optional renormalization and the scale, the weights spread over
// the experts with Select(Eq(idx, Iota), w, 0), every expert's gated MLP run
// on every row and added in expert order times its weight (zero where
// unselected): what the oracle computes for the op is this form's result,
// and it compiles on every device, where the op's kernel (routed-gemv)
// serves only a decode's rows within the device's bindings. The chain is
// inserted before the op, takes its uses and its name, and the op is
// removed.
#include <cassert>
#include <string>

#include "passes/pass.h"
#include "passes/rewrite.h"

namespace poot {

namespace {

// Inserts eqns before position `at` (advancing it), each typed by its op's
// type rule.
struct Emitter {
  Graph& g;
  size_t at;
  Loc loc;
  std::string base;  // the op's result name; every new value is named base.SUFFIX

  std::vector<ValueId> eqn(Op op, std::vector<ValueId> operands, Attrs attrs, const std::string& suffix,
                           std::vector<Type> declared = {}) {
    TypeQuery q;
    for (ValueId v : operands) q.operands.push_back(g.type(v));
    q.attrs = &attrs;
    q.declared = declared;
    TypeResult r = checkEqn(op, q);
    assert(r.error.empty() && "the dense form of a typed RoutedExperts types");
    std::vector<std::pair<std::string, Type>> results;
    for (size_t i = 0; i < r.types.size(); ++i)
      results.push_back({base + "." + suffix + (i ? ".idx" : ""), r.types[i]});
    insertEqn(g, at, op, std::move(operands), std::move(attrs), results, loc);
    return g.eqns[at++].results;
  }
  ValueId one(Op op, std::vector<ValueId> operands, Attrs attrs, const std::string& suffix, std::vector<Type> declared = {}) {
    return eqn(op, std::move(operands), std::move(attrs), suffix, std::move(declared))[0];
  }
  ValueId convert(ValueId v, DType to, const std::string& suffix) {
    if (g.type(v).dtype == to) return v;
    return one(Op::Convert, {v}, {}, suffix, {Type{to, g.type(v).shape}});
  }
  ValueId reshape(ValueId v, Shape s, const std::string& suffix) {
    return one(Op::Reshape, {v}, {}, suffix, {Type{g.type(v).dtype, std::move(s)}});
  }
  ValueId constant(double v, DType dt, const std::string& suffix) {
    return one(Op::Constant, {}, {{"value", std::vector<double>{v}}}, suffix, {Type{dt, {}}});
  }
  // MatMul(x, Transpose(w)): the tracer's linear without bias.
  ValueId linear(ValueId x, ValueId w, const std::string& suffix) {
    ValueId t = one(Op::Transpose, {w}, {{"perm", std::vector<int64_t>{1, 0}}}, suffix + ".transpose");
    return one(Op::MatMul, {x, t}, {}, suffix);
  }
};

// Inserts eqn i's dense form before it and moves its uses there; returns
// the op's new position.
size_t lower(Graph& g, size_t i) {
  const Eqn op = g.eqns[i];
  ValueId out = op.results[0];
  Emitter em{g, i, op.loc, g.value(out).name};
  const Type ht = g.type(op.operands[0]);  // a copy: inserting eqns grows g.values
  const int64_t E = std::get<int64_t>(*op.attr("experts")), k = std::get<int64_t>(*op.attr("k")), rank = ht.rank();
  const double scale = std::get<double>(*op.attr("scale"));
  Shape lead(ht.shape.begin(), ht.shape.end() - 1), col = lead;
  col.insert(col.end(), {k, 1});
  const Attrs lastKept{{"axis", int64_t(-1)}, {"keepdim", true}};

  ValueId h = op.operands[0];
  ValueId logits = em.linear(em.convert(h, DType::F32, "router_input"),
                             em.convert(op.operands[1], DType::F32, "router_weight"), "router_logits");
  ValueId scores;
  if (std::get<std::string>(*op.attr("scoring")) == "softmax") {
    ValueId shifted = em.one(Op::Sub, {logits, em.one(Op::ReduceMax, {logits}, lastKept, "max")}, {}, "shifted");
    ValueId ex = em.one(Op::Exp, {shifted}, {}, "exp");
    scores = em.one(Op::Div, {ex, em.one(Op::ReduceSum, {ex}, lastKept, "sum")}, {}, "scores");
  } else {
    scores = em.one(Op::Sigmoid, {logits}, {}, "scores");
  }
  std::vector<ValueId> top = em.eqn(Op::TopK, {scores}, {{"k", k}}, "topk");
  ValueId w = top[0];
  if (flagAttr(op.attrs, "renormalize"))
    w = em.one(Op::Div, {w, em.one(Op::ReduceSum, {w}, lastKept, "topk_sum")}, {}, "renormalized");
  if (scale != 1.0) w = em.one(Op::Mul, {w, em.constant(scale, DType::F32, "scale")}, {}, "scaled");
  ValueId hit = em.one(Op::Eq, {em.reshape(top[1], col, "idx_col"), em.one(Op::Iota, {}, {{"axis", int64_t(0)}}, "experts", {Type{DType::I32, {E}}})},
                       {}, "hit");
  ValueId spread =
      em.one(Op::Select, {hit, em.reshape(w, col, "weight_col"), em.constant(0.0, DType::F32, "zero")}, {}, "spread");
  ValueId routing = em.convert(em.one(Op::ReduceSum, {spread}, {{"axis", rank - 1}, {"keepdim", false}}, "routing_weights"),
                               ht.dtype, "routing_weights.cast");
  ValueId acc = -1;
  for (int64_t e = 0; e < E; ++e) {
    std::string p = "experts." + std::to_string(e) + ".";
    size_t at = kRoutedFirstExpert + kRoutedPerExpert * size_t(e);
    auto weight = [&](size_t j, const char* name) {
      return em.convert(op.operands[at + j], ht.dtype, p + name + ".widened");
    };
    ValueId gate = em.linear(h, weight(0, "gate_proj"), p + "gate_proj");
    ValueId act = em.one(Op::Mul, {gate, em.one(Op::Sigmoid, {gate}, {}, p + "sigmoid")}, {}, p + "silu");
    ValueId mid = em.one(Op::Mul, {act, em.linear(h, weight(1, "up_proj"), p + "up_proj")}, {}, p + "mid");
    ValueId y = em.linear(mid, weight(2, "down_proj"), p + "down_proj");
    ValueId we = em.one(Op::Slice, {routing}, {{"axis", int64_t(-1)}, {"start", e}, {"limit", e + 1}}, p + "weight");
    ValueId scaled = em.one(Op::Mul, {y, we}, {}, p + "weighted");
    acc = acc < 0 ? scaled : em.one(Op::Add, {acc, scaled}, {}, p + "sum");
  }
  bool exported = isExported(g, out);
  replaceAllUses(g, out, acc);  // a fresh result can always take the uses
  if (!exported) std::swap(g.value(out).name, g.value(acc).name);
  return em.at;
}

}  // namespace

Expected<bool> runRoutedExpertsDense(Graph& g, PassContext&) {
  bool changed = false;
  for (size_t i = 0; i < g.eqns.size(); ++i)
    if (g.eqns[i].op == Op::RoutedExperts) {
      i = lower(g, i);  // past the op, which eraseDeadEqns removes
      changed = true;
    }
  if (changed) eraseDeadEqns(g);
  return changed;
}

}  // namespace poot

// matmul-operands: every MatMul reads its right operand as it is stored.
// The tracer writes a linear layer as MatMul(x, Transpose(W)) with W [N, K]
// (the checkpoint's layout) and a two-byte weight as Convert(W) to f32
// first; run as written, each step would transpose (and widen) every weight
// into the arena before using it. This pass peels, from operand b of each
// MatMul, a Transpose that swaps only the last two axes (the MatMul gets
// {transpose_b=true}) and a Convert that widens bf16 or f16 to f32 (the
// MatMul reads the two-byte values, exactly widened, when a is f32), in
// either order, each at most once. The peeled eqns stay for their other
// users; cleanup removes them when none is left. It runs after the
// attention rewrite, whose matcher reads the MatMul(q, Transpose(k)) chains
// as the tracer wrote them. A Transpose it cannot fold (a permutation of
// other axes, or one on operand a) is a remark. Then a MatMul whose b has
// no batch axes (a weight) while a has batch axes of more than one element
// (a decode step of B rows: x [B, 1, K]) reads a as one [rows, K] matrix
// through a Reshape, and a Reshape gives its result back its shape: both
// are views, and the kernel reads the weight once for all the rows instead
// of once a batch element.
#include <map>

#include "passes/attention_match.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace poot {

namespace {

constexpr const char* kPass = "matmul-operands";

const std::vector<int64_t>& permOf(const Eqn& t) { return std::get<std::vector<int64_t>>(*t.attr("perm")); }

// Whether the permutation keeps every axis but the last two, which it swaps.
bool swapsLastTwo(const std::vector<int64_t>& perm) {
  size_t r = perm.size();
  if (r < 2 || perm[r - 2] != int64_t(r - 1) || perm[r - 1] != int64_t(r - 2)) return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (perm[i] != int64_t(i)) return false;
  return true;
}

bool widensToF32(const Graph& g, const Eqn& c) {
  DType from = g.type(c.operands[0]).dtype;
  return g.type(c.results[0]).dtype == DType::F32 && (from == DType::BF16 || from == DType::F16);
}

std::string permStr(const std::vector<int64_t>& perm) {
  std::string s = "[";
  for (size_t i = 0; i < perm.size(); ++i) s += (i ? ", " : "") + std::to_string(perm[i]);
  return s + "]";
}

bool foldBatchIntoRows(Graph& g) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < g.eqns.size(); ++i) {
    const Eqn& e = g.eqns[i];
    if (e.op != Op::MatMul || g.type(e.operands[1]).rank() != 2) continue;
    const Shape& a = g.type(e.operands[0]).shape;
    if (a.size() > 2 && numel(a) / (a[a.size() - 2] * a.back()) > 1) todo.push_back(i);
  }
  size_t shift = 0;  // eqns inserted before the next one
  std::map<ValueId, ValueId> rowsOf;  // a -> the Reshape reading it as rows, made for an earlier product
  for (size_t index : todo) {
    size_t i = index + shift;
    ValueId a = g.eqns[i].operands[0], r = g.eqns[i].results[0];
    const Type at = g.type(a), rt = g.type(r);
    int64_t rows = numel(at.shape) / at.shape.back();
    Loc loc = g.eqns[i].loc;
    Type flat{at.dtype, {rows, at.shape.back()}};
    // a may already be a folded product given back its shape: read that;
    // a reshape of a reshape reads the first one's operand (no chains, as
    // canonicalize would leave them).
    const Eqn* shaped = match::defOp(g, a, Op::Reshape);
    if (shaped && g.type(shaped->operands[0]) == flat) {
      g.eqns[i].operands[0] = shaped->operands[0];
    } else if (auto seen = rowsOf.find(a); seen != rowsOf.end()) {
      g.eqns[i].operands[0] = seen->second;  // one view for every product of a (a layer's q, k and v)
    } else {
      ValueId from = shaped ? shaped->operands[0] : a;
      insertEqn(g, i, Op::Reshape, {from}, {}, {{g.value(a).name + ".rows", flat}}, loc);
      g.eqns[i + 1].operands[0] = g.eqns[i].results[0];
      rowsOf[a] = g.eqns[i].results[0];
      ++i;
      ++shift;
    }
    g.value(r).type = Type{rt.dtype, {rows, rt.shape.back()}};
    insertEqn(g, i + 1, Op::Reshape, {r}, {}, {{g.value(r).name + ".batch", rt}}, loc);
    ValueId back = g.eqns[i + 1].results[0];
    replaceAllUses(g, r, back);
    g.eqns[i + 1].operands[0] = r;  // replaceAllUses moved this use too
    for (Eqn& user : g.eqns)
      if (user.op == Op::Reshape)
        for (ValueId& v : user.operands)
          if (v == back) v = r;
    ++shift;
  }
  return !todo.empty();
}

}  // namespace

Expected<bool> runMatMulOperands(Graph& g, PassContext& ctx) {
  bool changed = false;
  for (Eqn& e : g.eqns) {
    if (e.op != Op::MatMul) continue;
    bool transposed = flagAttr(e.attrs, "transpose_b");
    bool widened = false;
    bool aIsF32 = g.type(e.operands[0]).dtype == DType::F32;
    ValueId b = e.operands[1];
    for (;;) {
      if (const Eqn* t = match::defOp(g, b, Op::Transpose); t && !transposed) {
        if (!swapsLastTwo(permOf(*t))) {
          ctx.remark(kPass, g, e,
                     "the Transpose of operand b permutes " + permStr(permOf(*t)) +
                         ": only a swap of the last two axes folds into the matmul");
          break;
        }
        transposed = true;
        b = t->operands[0];
        continue;
      }
      if (const Eqn* c = match::defOp(g, b, Op::Convert); c && !widened && aIsF32 && widensToF32(g, *c)) {
        widened = true;
        b = c->operands[0];
        continue;
      }
      break;
    }
    if (const Eqn* t = match::defOp(g, e.operands[0], Op::Transpose); t && swapsLastTwo(permOf(*t)))
      ctx.remark(kPass, g, e, "the Transpose of operand a stays: the kernels read a with its contracted axis innermost");
    if (b == e.operands[1]) continue;
    e.operands[1] = b;
    if (transposed && !flagAttr(e.attrs, "transpose_b")) {
      e.attrs.push_back({"transpose_b", true});
      sortAttrs(opInfo(Op::MatMul), e.attrs);
    }
    changed = true;
  }
  return foldBatchIntoRows(g) || changed;
}

}  // namespace poot

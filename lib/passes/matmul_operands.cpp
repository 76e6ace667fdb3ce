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
// other axes, or one on operand a) is a remark.
#include "passes/attention_match.h"
#include "passes/pass.h"

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
  return changed;
}

}  // namespace poot

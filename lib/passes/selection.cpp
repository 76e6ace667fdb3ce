// selection: forms the block-selected attention of a sparse indexer
// (lib/trace/sparse_indexer.cpp; the seed's "sparse-attention indexer").
// The tracer states the selection as primitives and attention-rewrite has
// already turned the layer's attention into an Attention eqn whose additive
// mask is built from it:
//   qblock = positions / block; candidate = j < qblock; own = j == qblock
//   ids = Select(TopK(Select(candidate, scores, -inf), K) > -inf, index, -1)
//   visible_blocks = any_k(ids == j) or own, spread to keys ([B,L,NB,block]
//   -> [B,L,cap]), and (t <= positions), then Select(visible, 0, -inf)
// This pass matches that mask backwards from the Attention (reading only),
// then inserts BlockTopK(scores, qpos){k, block} and SelectedAttention(q, k,
// v, ids, qpos){scale, softcap, n_rep, block} and replaces the Attention's
// uses, so each row visits the (K + 1) * block positions of its selected
// blocks and its own block instead of all Lk. The step's positions are one
// vector [Lq] for every batch row or one a row [B, Lq] (a paged step); qpos
// is them as [B, Lq], broadcast once per pass run when they are one vector.
// A paged Attention attends over the gathered view instead (the indexer
// reads its cache through that view anyway); a live one only when every
// query position is proved below the live length (len = pos + c with c >=
// Lq, the positions pos + j, pos one a row or not), which makes the live
// bound redundant. An Attention whose mask reaches a TopK but does
// not match declines with a remark; any other Attention is not a candidate.
#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "passes/attention_match.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace poot {

namespace {

constexpr const char* kPass = "selection";
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string str(int64_t v) { return std::to_string(v); }

// ---------------------------------------------------------------- matching

// What match found: the two formed eqns' operands and attributes.
struct Selection {
  ValueId attention = -1;  // the Attention result, replaced
  ValueId scores = -1;     // block scores [B, L, NB]
  ValueId positions = -1;  // the query positions [L] or [B, L]
  ValueId q = -1, k = -1, v = -1;
  // paged: the pools and map of a view to gather (when the graph has none)
  ValueId kPool = -1, vPool = -1, read = -1;
  int64_t topK = 0, block = 0;
  int64_t B = 0, L = 0, Lk = 0;
  Attrs attrs;  // scale, softcap, n_rep
};

struct Match {
  std::optional<Selection> sel;
  std::string why;
};

bool isSplat(const Graph& g, ValueId v, double x) { return match::splat(g, v) == x; }

// The operands of a commutative binary eqn as (a, b) with pred(a) true,
// trying both orders; false when neither fits.
template <class P>
bool orderBy(const Eqn& e, P pred, ValueId& a, ValueId& b) {
  for (int i = 0; i < 2; ++i) {
    if (pred(e.operands[size_t(i)])) {
      a = e.operands[size_t(i)];
      b = e.operands[size_t(1 - i)];
      return true;
    }
  }
  return false;
}

// The shared block structure of one step, as match fills it in.
struct Blocks {
  int64_t n = 0, block = 0, B = 0, L = 0;
  ValueId positions = -1;  // P [L], or [B, L] when each batch row has its own
};

// The shape of P for a column of positions qcol: [L] for [L, 1], [B, L] for
// [B, L, 1]; empty for any other shape.
Shape positionsShape(const Graph& g, ValueId qcol, const Blocks& s) {
  const Shape& c = g.type(qcol).shape;
  if (c == Shape{s.L, 1}) return {s.L};
  if (c == Shape{s.B, s.L, 1}) return {s.B, s.L};
  return {};
}

// j [1, NB] (an Iota 0..NB-1) against qcol [L, 1] or [B, L, 1] = P / block:
// the block comparisons `candidate` (Lt) and `own` (Eq). Fills in P and the
// block.
bool blockCompare(const Graph& g, ValueId v, Op op, Blocks& s) {
  const Eqn* e = match::def(g, v);
  if (!e || e->op != op) return false;
  ValueId j = e->operands[0], qcol = e->operands[1];
  if (op == Op::Eq && g.type(j).shape != Shape{1, s.n}) std::swap(j, qcol);
  if (g.type(j).shape != Shape{1, s.n} || match::iotaLength(g, j) != s.n) return false;
  Shape ps = positionsShape(g, qcol, s);
  if (ps.empty()) return false;
  const Eqn* div = match::defOp(g, match::peelTo(g, qcol, ps), Op::Div);
  if (!div || g.type(div->results[0]).shape != ps || !isSplat(g, div->operands[1], double(s.block)))
    return false;
  if (s.positions >= 0 && div->operands[0] != s.positions) return false;
  s.positions = div->operands[0];
  return true;
}

// causal [L, cap] or [B, L, cap] = Le(kpos [1, cap] Iota, P as a column).
bool causalOf(const Graph& g, ValueId v, int64_t cap, Blocks& s) {
  const Eqn* e = match::defOp(g, v, Op::Le);
  if (!e) return false;
  ValueId kpos = e->operands[0], qpos = e->operands[1];
  if (g.type(kpos).shape != Shape{1, cap} || match::iotaLength(g, kpos) != cap) return false;
  Shape ps = positionsShape(g, qpos, s);
  if (ps.empty()) return false;
  Shape want = ps;
  want.push_back(cap);
  if (g.type(v).shape != want) return false;
  ValueId p = match::peelTo(g, qpos, ps);
  if (s.positions >= 0 && p != s.positions) return false;
  s.positions = p;
  return true;
}

// visible_blocks [B, L, NB] spread to keys: Reshape(Broadcast(Reshape(vb)
// [B,L,NB,1]) [B,L,NB,block]) [B,L,cap]. Sets the block count and size.
std::optional<ValueId> spreadOf(const Graph& g, ValueId keys, int64_t B, int64_t L, int64_t cap, Blocks& s) {
  const Eqn* outer = match::defOp(g, keys, Op::Reshape);
  const Eqn* bc = outer ? match::defOp(g, outer->operands[0], Op::Broadcast) : nullptr;
  const Eqn* inner = bc ? match::defOp(g, bc->operands[0], Op::Reshape) : nullptr;
  if (!inner) return std::nullopt;
  const Shape& spread = g.type(bc->results[0]).shape;
  if (spread.size() != 4 || spread[0] != B || spread[1] != L || spread[2] * spread[3] != cap) return std::nullopt;
  s.n = spread[2];
  s.block = spread[3];
  ValueId vb = inner->operands[0];
  if (g.type(vb).shape != Shape{B, L, s.n} || g.type(inner->results[0]).shape != Shape{B, L, s.n, 1})
    return std::nullopt;
  return vb;
}

// selected = Gt(ReduceMax(Convert(Eq(Reshape(ids) [B,L,K,1], j [NB])), axis 2), 0):
// some id names block j. Returns ids [B, L, K].
std::optional<ValueId> selectedIds(const Graph& g, ValueId selected, const Blocks& s) {
  const Eqn* gt = match::defOp(g, selected, Op::Gt);
  if (!gt || !isSplat(g, gt->operands[1], 0)) return std::nullopt;
  const Eqn* mx = match::defOp(g, gt->operands[0], Op::ReduceMax);
  if (!mx || match::axisOf(*mx, 4) != 2 || std::get<bool>(*mx->attr("keepdim"))) return std::nullopt;
  const Eqn* cv = match::defOp(g, mx->operands[0], Op::Convert);
  const Eqn* eq = cv ? match::defOp(g, cv->operands[0], Op::Eq) : nullptr;
  if (!eq) return std::nullopt;
  ValueId idsCol, j;
  if (!orderBy(*eq, [&](ValueId x) { return g.type(x).rank() == 4 && g.type(x).shape[3] == 1; }, idsCol, j))
    return std::nullopt;
  const Shape& js = g.type(j).shape;
  if (match::iotaLength(g, j) != s.n || js.empty() || js.back() != s.n) return std::nullopt;
  const Eqn* r = match::defOp(g, idsCol, Op::Reshape);
  if (!r || g.type(r->operands[0]).rank() != 3) return std::nullopt;
  return r->operands[0];
}

// ids = Select(Gt(values, -inf), index, -1) over TopK(Select(candidate,
// scores, -inf), K). Sets the block scores and K.
std::string topOf(const Graph& g, ValueId ids, Blocks& s, Selection& sel) {
  const std::string no = "the block ids are not Select(TopK(...) > -inf, index, -1)";
  const Eqn* pick = match::defOp(g, ids, Op::Select);
  if (!pick || !isSplat(g, pick->operands[2], -1)) return no;
  const Eqn* top = match::defOp(g, pick->operands[1], Op::TopK);
  const Eqn* found = match::defOp(g, pick->operands[0], Op::Gt);
  if (!top || pick->operands[1] != top->results[1] || !found || found->operands[0] != top->results[0] ||
      !isSplat(g, found->operands[1], -kInf))
    return no;
  sel.topK = std::get<int64_t>(*top->attr("k"));
  const Eqn* masked = match::defOp(g, top->operands[0], Op::Select);
  if (!masked || !isSplat(g, masked->operands[2], -kInf))
    return "the TopK does not rank the candidate blocks' scores with -inf elsewhere";
  if (!blockCompare(g, masked->operands[0], Op::Lt, s))
    return "the candidate blocks are not the completed ones (j < positions / block)";
  sel.scores = masked->operands[1];
  if (g.type(sel.scores).shape != Shape{sel.B, sel.L, s.n} || !isFloat(g.type(sel.scores).dtype))
    return "the block scores " + g.type(sel.scores).str() + " are not float [B, Lq, NB]";
  return "";
}

// visible [B, L, cap] = And(spread(Or(selected, own)), causal).
std::string visibleOf(const Graph& g, ValueId visible, Blocks& s, Selection& sel) {
  const std::string no =
      "the mask is not the selected blocks plus the row's own block, spread to keys, and t <= qpos";
  const Eqn* both = match::defOp(g, visible, Op::And);
  if (!both) return no;
  ValueId keys, causal;
  if (!orderBy(*both, [&](ValueId x) { return g.type(x).shape == Shape{sel.B, sel.L, sel.Lk}; }, keys, causal))
    return no;
  auto vb = spreadOf(g, keys, sel.B, sel.L, sel.Lk, s);
  const Eqn* any = vb ? match::defOp(g, *vb, Op::Or) : nullptr;
  if (!any) return no;
  ValueId selected, own;
  if (!orderBy(*any, [&](ValueId x) { return match::defOp(g, x, Op::Gt) != nullptr; }, selected, own)) return no;
  if (!blockCompare(g, own, Op::Eq, s)) return no;
  if (!causalOf(g, causal, sel.Lk, s)) return no;
  auto ids = selectedIds(g, selected, s);
  if (!ids) return no;
  return topOf(g, *ids, s, sel);
}

// Whether v's definition reaches a TopK within `depth` eqns (breadth first,
// each eqn once): the mask of a block-selected attention does, others do not
// (and get no remark).
bool reachesTopK(const Graph& g, ValueId v, int depth) {
  std::vector<ValueId> frontier = {v};
  std::vector<bool> seen(g.values.size());
  for (int d = 0; d < depth && !frontier.empty(); ++d) {
    std::vector<ValueId> next;
    for (ValueId x : frontier) {
      const Eqn* e = match::def(g, x);
      if (!e) continue;
      if (e->op == Op::TopK) return true;
      for (ValueId o : e->operands)
        if (!seen[size_t(o)]) {
          seen[size_t(o)] = true;
          next.push_back(o);
        }
    }
    frontier = std::move(next);
  }
  return false;
}

// A live Attention's bound is redundant when every query position is below
// len: positions = Add(Iota[L], S), len = IndexGuard(Broadcast(Add(S, c)))
// with c >= L, the guard's hi above the largest position; S is one start
// for every row or one a row (then the Add takes both through unit
// reshapes, and len has no Broadcast).
bool positionsBelowLength(const Graph& g, const ValueRanges& r, ValueId positions, ValueId len, int64_t L) {
  auto pr = r.get(positions);
  const Eqn* add = match::defOp(g, positions, Op::Add);
  if (!pr || !add) return false;
  ValueId start, rows;
  if (!orderBy(*add, [&](ValueId x) { return match::iotaLength(g, x) == L; }, rows, start)) return false;
  start = match::peelUnitReshapes(g, start);
  if (const Eqn* guard = match::defOp(g, len, Op::IndexGuard)) {
    if (std::get<int64_t>(*guard->attr("hi")) <= pr->hi) return false;  // clamp(x) >= min(x, hi)
    len = guard->operands[0];
  }
  while (const Eqn* e = match::def(g, len)) {
    if (e->op != Op::Broadcast && e->op != Op::Reshape) break;
    len = e->operands[0];
  }
  const Eqn* sum = match::defOp(g, len, Op::Add);
  ValueId s2, c;
  if (!sum || !orderBy(*sum, [&](ValueId x) { return x == start; }, s2, c)) return false;
  auto cv = match::splat(g, c);
  auto sr = r.get(start);
  return cv && *cv >= double(L) && sr && double(sr->hi) + *cv <= double(std::numeric_limits<int32_t>::max());
}

Match declined(std::string why) { return Match{std::nullopt, std::move(why)}; }

Match matchSelection(const Graph& g, const ValueRanges& ranges, const Eqn& attn) {
  Selection sel;
  sel.attention = attn.results[0];
  const std::string& key = std::get<std::string>(*attn.attr("key"));
  bool paged = key == "paged", live = std::get<std::string>(*attn.attr("bound")) == "live";
  if (key == "split") return declined("SelectedAttention takes one key: a split key stays Attention");
  size_t i = 0;
  sel.q = attn.operands[i++];
  sel.k = attn.operands[i++];
  sel.v = attn.operands[i++];
  if (paged) sel.read = attn.operands[i++];
  ValueId mask = attn.operands[i++];
  ValueId len = live ? attn.operands[i] : -1;
  const Shape& qs = g.type(sel.q).shape;
  sel.B = qs[0];
  sel.L = qs[2];
  sel.Lk = paged ? g.type(sel.read).shape[1] : g.type(sel.k).shape[2];
  for (const char* a : {"scale", "softcap", "n_rep"})
    if (const AttrValue* v = attn.attr(a)) sel.attrs.push_back({a, *v});

  const Eqn* additive = match::defOp(g, match::peelTo(g, mask, Shape{sel.B, sel.L, sel.Lk}), Op::Select);
  if (!additive || !isSplat(g, additive->operands[1], 0) || !isSplat(g, additive->operands[2], -kInf) ||
      g.type(additive->operands[0]).shape != Shape{sel.B, sel.L, sel.Lk})
    return declined("the mask is not Select(visible, 0, -inf) over [B, Lq, Lk]");
  Blocks s;
  s.B = sel.B;
  s.L = sel.L;
  if (auto why = visibleOf(g, additive->operands[0], s, sel); !why.empty()) return declined(why);
  sel.block = s.block;
  sel.positions = s.positions;
  if (!isInt(g.type(sel.positions).dtype)) return declined("the query positions are not integers");
  if (!ranges.proves(sel.positions, 0, sel.Lk - 1)) {
    auto pr = ranges.get(sel.positions);
    return declined("cannot prove the query positions %" + g.value(sel.positions).name + " are in [0, " +
                    str(sel.Lk) + "): their range is " + (pr ? pr->str() : "unknown"));
  }
  if (live && !positionsBelowLength(g, ranges, sel.positions, len, sel.L))
    return declined("cannot prove every query position is below the live length %" + g.value(len).name +
                    ": SelectedAttention has no live bound");
  if (paged) {
    sel.kPool = sel.k;
    sel.vPool = sel.v;
  }
  return Match{sel, ""};
}

// ---------------------------------------------------------------- rewriting

std::string scopeOf(const std::string& name) {
  size_t dot = name.rfind('.');
  return dot == std::string::npos ? "" : name.substr(0, dot + 1);
}

// Inserts a one-result eqn at `at` (advancing it) and returns its result.
ValueId emit(Graph& g, size_t& at, Op op, std::vector<ValueId> operands, Attrs attrs, const std::string& name,
             Type type, const Loc& loc) {
  sortAttrs(opInfo(op), attrs);
  insertEqn(g, at, op, std::move(operands), std::move(attrs), {{name, std::move(type)}}, loc);
  return g.eqns[at++].results[0];
}

// The [B, H, Lk, D] view of a pool through the read map: an existing
// Transpose(Gather(pool, read)) when the graph has one, else a new one.
ValueId viewOf(Graph& g, size_t& at, ValueId pool, ValueId read, const std::string& scope, const Loc& loc) {
  for (size_t i = 0; i < at; ++i) {
    const Eqn& e = g.eqns[i];
    if (e.op != Op::Transpose) continue;
    if (auto pv = match::pagedView(g, e.results[0]); pv && pv->pool == pool && pv->read == read) return e.results[0];
  }
  const Shape &ps = g.type(pool).shape, &rs = g.type(read).shape;
  DType dt = g.type(pool).dtype;
  ValueId gathered = emit(g, at, Op::Gather, {pool, read}, {{"axis", int64_t(0)}}, scope + "view",
                          Type{dt, {rs[0], rs[1], ps[1], ps[2]}}, loc);
  return emit(g, at, Op::Transpose, {gathered}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}, scope + "view",
              Type{dt, {rs[0], ps[1], rs[1], ps[2]}}, loc);
}

// qpos [B, L]: the positions as they are when they have a row each, else
// broadcast over the batch rows, one per pass run.
ValueId qposOf(Graph& g, size_t& at, const Selection& s, std::map<ValueId, ValueId>& memo, const Loc& loc) {
  auto key = s.positions;
  if (g.type(key).shape == Shape{s.B, s.L}) return key;
  if (auto it = memo.find(key); it != memo.end() && g.type(it->second).shape == Shape{s.B, s.L}) return it->second;
  DType dt = g.type(s.positions).dtype;
  std::string base = g.value(s.positions).name + ".qpos";
  ValueId row = emit(g, at, Op::Reshape, {s.positions}, {}, base, Type{dt, {1, s.L}}, loc);
  ValueId qpos = s.B == 1 ? row : emit(g, at, Op::Broadcast, {row}, {}, base, Type{dt, {s.B, s.L}}, loc);
  memo[key] = qpos;
  return qpos;
}

void rewrite(Graph& g, const Selection& s, std::map<ValueId, ValueId>& memo) {
  size_t at = size_t(g.value(s.attention).def);
  Loc loc = g.eqns[at].loc;
  std::string scope = scopeOf(g.value(s.attention).name);
  ValueId k = s.k, v = s.v;
  if (s.read >= 0) {
    k = viewOf(g, at, s.kPool, s.read, scope + "k_", loc);
    v = viewOf(g, at, s.vPool, s.read, scope + "v_", loc);
  }
  ValueId qpos = qposOf(g, at, s, memo, loc);
  ValueId ids = emit(g, at, Op::BlockTopK, {s.scores, qpos}, {{"k", s.topK}, {"block", s.block}},
                     scope + "block_ids", Type{DType::I32, {s.B, s.L, s.topK}}, loc);
  Attrs attrs = s.attrs;
  attrs.push_back({"block", s.block});
  ValueId out = emit(g, at, Op::SelectedAttention, {s.q, k, v, ids, qpos}, attrs, scope + "selected_attention",
                     g.type(s.attention), loc);
  replaceAllUses(g, s.attention, out);
}

}  // namespace

Expected<bool> runSelection(Graph& g, PassContext& ctx) {
  const ValueRanges& ranges = rangesFor(g, ctx);
  std::vector<ValueId> anchors;
  for (const Eqn& e : g.eqns) {
    if (e.op != Op::Attention || std::get<std::string>(*e.attr("mask")) != "additive") continue;
    size_t imask = 3 + (std::get<std::string>(*e.attr("key")) != "dense");
    if (reachesTopK(g, e.operands[imask], 24)) anchors.push_back(e.results[0]);
  }
  bool changed = false;
  std::map<ValueId, ValueId> qposMemo;
  for (ValueId a : anchors) {
    const Eqn& attn = g.eqns[size_t(g.value(a).def)];
    Match m = matchSelection(g, ranges, attn);
    if (!m.sel) {
      ctx.remark(kPass, g, attn, m.why);
      continue;
    }
    rewrite(g, *m.sel, qposMemo);
    changed = true;
  }
  return changed;
}

}  // namespace poot

// The op table's rows and the type rule of every op. Rules are pure functions
// of operand types, attributes and (for ops with a chosen result type) the
// declared result; they never see the graph, so the tracer can call them to
// derive result types as it builds.
#include "ir/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/text.h"

namespace poot {

namespace {

TypeResult fail(std::string msg) { return {{}, std::move(msg)}; }
TypeResult one(Type t) { return {{std::move(t)}, {}}; }

std::string operandStr(const TypeQuery& q, size_t i) {
  return "operand " + std::to_string(i + 1) + " (" + q.operands[i].str() + ")";
}

// Returns an error message when operand i is not of the wanted class.
std::string needFloat(const TypeQuery& q, size_t i) {
  return isFloat(q.operands[i].dtype) ? "" : operandStr(q, i) + " must be a float type";
}
std::string needInt(const TypeQuery& q, size_t i) {
  return isInt(q.operands[i].dtype) ? "" : operandStr(q, i) + " must be an integer type";
}
std::string needI32(const TypeQuery& q, size_t i) {
  return q.operands[i].dtype == DType::I32 ? "" : operandStr(q, i) + " must be i32";
}
std::string needRank(const TypeQuery& q, size_t i, int64_t rank) {
  return q.operands[i].rank() == rank
             ? ""
             : operandStr(q, i) + " must have rank " + std::to_string(rank);
}
std::string needScalar(const TypeQuery& q, size_t i) {
  const Type& t = q.operands[i];
  if (!isInt(t.dtype) || numel(t.shape) != 1)
    return operandStr(q, i) + " must be a single integer (one element of i32 or i64)";
  return "";
}
std::string needSameDType(const TypeQuery& q, size_t a, size_t b) {
  return q.operands[a].dtype == q.operands[b].dtype
             ? ""
             : operandStr(q, a) + " and " + operandStr(q, b) + " must have the same dtype";
}

// Runs checks in order and returns the first failure.
template <class... S>
std::string first(S... msgs) {
  for (const std::string& m : {std::string(msgs)...})
    if (!m.empty()) return m;
  return "";
}

std::optional<int64_t> axisOf(const TypeQuery& q, int64_t rank, std::string* err) {
  int64_t a = q.attrInt("axis");
  auto n = normalizeAxis(a, rank);
  if (!n) *err = "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank);
  return n;
}

// ----- type rules -----

TypeResult ruleIota(const TypeQuery& q) {
  if (q.declared.size() != 1) return fail("the result type must be declared");
  const Type& t = q.declared[0];
  if (t.dtype == DType::Bool) return fail("iota result must be a numeric type");
  std::string err;
  if (!axisOf(q, t.rank(), &err)) return fail(err);
  return one(t);
}

TypeResult ruleConstant(const TypeQuery& q) {
  if (q.declared.size() != 1) return fail("the result type must be declared");
  const Type& t = q.declared[0];
  const auto& vals = std::get<std::vector<double>>(*q.attr("value"));
  if (vals.size() != 1 && int64_t(vals.size()) != numel(t.shape))
    return fail("constant has " + std::to_string(vals.size()) + " values; expected 1 or " +
                std::to_string(numel(t.shape)));
  for (double v : vals) {
    if (!isFloat(t.dtype) && (!std::isfinite(v) || v != std::floor(v)))
      return fail("constant value " + formatNumber(v) + " is not an integer");
    if (t.dtype == DType::Bool && v != 0 && v != 1) return fail("a bool constant must be 0 or 1");
    if (isInt(t.dtype) && !fitsDType(v, t.dtype))
      return fail("constant value " + formatNumber(v) + " does not fit " + dtypeName(t.dtype));
  }
  return one(t);
}

TypeResult ruleReshape(const TypeQuery& q) {
  if (q.declared.size() != 1) return fail("the result type must be declared");
  const Type& t = q.declared[0];
  if (t.dtype != q.operands[0].dtype) return fail("reshape cannot change the dtype");
  if (numel(t.shape) != numel(q.operands[0].shape))
    return fail("reshape from " + q.operands[0].str() + " to " + t.str() +
                " changes the element count");
  return one(t);
}

TypeResult ruleBroadcast(const TypeQuery& q) {
  if (q.declared.size() != 1) return fail("the result type must be declared");
  const Type& t = q.declared[0];
  const Type& x = q.operands[0];
  if (t.dtype != x.dtype) return fail("broadcast cannot change the dtype");
  auto b = broadcastShapes(x.shape, t.shape);
  if (x.rank() > t.rank() || !b || *b != t.shape)
    return fail("cannot broadcast " + x.str() + " to " + t.str());
  return one(t);
}

TypeResult ruleConvert(const TypeQuery& q) {
  if (q.declared.size() != 1) return fail("the result type must be declared");
  if (q.declared[0].shape != q.operands[0].shape) return fail("convert cannot change the shape");
  return one(q.declared[0]);
}

TypeResult ruleTranspose(const TypeQuery& q) {
  const Type& x = q.operands[0];
  const auto& perm = q.attrInts("perm");
  if (int64_t(perm.size()) != x.rank()) return fail("perm must list all " + std::to_string(x.rank()) + " axes");
  std::vector<bool> seen(perm.size());
  Type out{x.dtype, {}};
  for (int64_t p : perm) {
    if (p < 0 || p >= x.rank() || seen[p]) return fail("perm " + shapeStr(perm) + " is not a permutation");
    seen[p] = true;
    out.shape.push_back(x.shape[p]);
  }
  return one(out);
}

TypeResult ruleSlice(const TypeQuery& q) {
  const Type& x = q.operands[0];
  std::string err;
  auto axis = axisOf(q, x.rank(), &err);
  if (!axis) return fail(err);
  int64_t start = q.attrInt("start"), limit = q.attrInt("limit");
  if (start < 0 || limit <= start || limit > x.shape[*axis])
    return fail("slice [" + std::to_string(start) + ", " + std::to_string(limit) +
                ") is not within axis of size " + std::to_string(x.shape[*axis]));
  Type out = x;
  out.shape[*axis] = limit - start;
  return one(out);
}

TypeResult ruleConcat(const TypeQuery& q) {
  const Type& x = q.operands[0];
  std::string err;
  auto axis = axisOf(q, x.rank(), &err);
  if (!axis) return fail(err);
  Type out = x;
  for (size_t i = 1; i < q.operands.size(); ++i) {
    const Type& y = q.operands[i];
    if (y.dtype != x.dtype || y.rank() != x.rank())
      return fail(operandStr(q, i) + " does not match " + operandStr(q, 0));
    for (int64_t d = 0; d < x.rank(); ++d)
      if (d != *axis && y.shape[d] != x.shape[d])
        return fail(operandStr(q, i) + " differs from " + operandStr(q, 0) + " outside the concat axis");
    out.shape[*axis] += y.shape[*axis];
  }
  return one(out);
}

TypeResult ruleGather(const TypeQuery& q) {
  const Type& table = q.operands[0];
  if (auto e = needInt(q, 1); !e.empty()) return fail(e);
  std::string err;
  auto axis = axisOf(q, table.rank(), &err);
  if (!axis) return fail(err);
  Type out{table.dtype, {}};
  out.shape.insert(out.shape.end(), table.shape.begin(), table.shape.begin() + *axis);
  out.shape.insert(out.shape.end(), q.operands[1].shape.begin(), q.operands[1].shape.end());
  out.shape.insert(out.shape.end(), table.shape.begin() + *axis + 1, table.shape.end());
  return one(out);
}

TypeResult ruleDynamicSlice(const TypeQuery& q) {
  const Type& x = q.operands[0];
  if (auto e = needScalar(q, 1); !e.empty()) return fail(e);
  std::string err;
  auto axis = axisOf(q, x.rank(), &err);
  if (!axis) return fail(err);
  int64_t size = q.attrInt("size");
  if (size < 1 || size > x.shape[*axis])
    return fail("size " + std::to_string(size) + " does not fit axis of size " + std::to_string(x.shape[*axis]));
  Type out = x;
  out.shape[*axis] = size;
  return one(out);
}

TypeResult ruleDynamicUpdateSlice(const TypeQuery& q) {
  const Type& x = q.operands[0];
  const Type& u = q.operands[1];
  if (auto e = first(needSameDType(q, 0, 1), needScalar(q, 2)); !e.empty()) return fail(e);
  std::string err;
  auto axis = axisOf(q, x.rank(), &err);
  if (!axis) return fail(err);
  if (u.rank() != x.rank()) return fail("the update must have the rank of the target");
  for (int64_t d = 0; d < x.rank(); ++d) {
    if (d == *axis ? u.shape[d] > x.shape[d] : u.shape[d] != x.shape[d])
      return fail("update " + u.str() + " does not fit target " + x.str() + " along axis " + std::to_string(*axis));
  }
  return one(x);
}

TypeResult ruleScatterUpdate(const TypeQuery& q) {
  const Type& x = q.operands[0];
  const Type& idx = q.operands[1];
  const Type& u = q.operands[2];
  if (auto e = first(needInt(q, 1), needRank(q, 1, 1), needSameDType(q, 0, 2)); !e.empty()) return fail(e);
  if (x.rank() < 1) return fail(operandStr(q, 0) + " must have rank 1 or more");
  Shape want{idx.shape[0]};
  want.insert(want.end(), x.shape.begin() + 1, x.shape.end());
  if (u.shape != want)
    return fail("updates " + u.str() + " must have shape " + shapeStr(want) + " (one row per index)");
  return one(x);
}

TypeResult ruleUnary(const TypeQuery& q, bool floatOnly, bool boolOnly) {
  DType t = q.operands[0].dtype;
  if (boolOnly && t != DType::Bool) return fail(operandStr(q, 0) + " must be bool");
  if (floatOnly && !isFloat(t)) return fail(operandStr(q, 0) + " must be a float type");
  if (!boolOnly && t == DType::Bool) return fail(operandStr(q, 0) + " must be numeric");
  return one(q.operands[0]);
}
TypeResult ruleUnaryFloat(const TypeQuery& q) { return ruleUnary(q, true, false); }
TypeResult ruleUnaryNumeric(const TypeQuery& q) { return ruleUnary(q, false, false); }
TypeResult ruleUnaryBool(const TypeQuery& q) { return ruleUnary(q, false, true); }

TypeResult broadcastAll(const TypeQuery& q, size_t from, DType dtype) {
  Shape s = q.operands[from].shape;
  for (size_t i = from + 1; i < q.operands.size(); ++i) {
    auto b = broadcastShapes(s, q.operands[i].shape);
    if (!b) return fail("shapes " + shapeStr(s) + " and " + shapeStr(q.operands[i].shape) + " do not broadcast");
    s = *b;
  }
  return one(Type{dtype, s});
}

TypeResult ruleBinary(const TypeQuery& q, bool floatOnly, bool boolOnly) {
  if (auto e = needSameDType(q, 0, 1); !e.empty()) return fail(e);
  TypeResult r = ruleUnary(q, floatOnly, boolOnly);
  if (!r.error.empty()) return r;
  return broadcastAll(q, 0, q.operands[0].dtype);
}
TypeResult ruleBinaryNumeric(const TypeQuery& q) { return ruleBinary(q, false, false); }
TypeResult ruleBinaryFloat(const TypeQuery& q) { return ruleBinary(q, true, false); }
TypeResult ruleBinaryBool(const TypeQuery& q) { return ruleBinary(q, false, true); }

TypeResult ruleCompare(const TypeQuery& q) {
  if (auto e = needSameDType(q, 0, 1); !e.empty()) return fail(e);
  return broadcastAll(q, 0, DType::Bool);
}
TypeResult ruleOrdered(const TypeQuery& q) {
  if (q.operands[0].dtype == DType::Bool) return fail(operandStr(q, 0) + " must be numeric to be ordered");
  return ruleCompare(q);
}

TypeResult ruleSelect(const TypeQuery& q) {
  if (q.operands[0].dtype != DType::Bool) return fail(operandStr(q, 0) + " must be bool");
  if (auto e = needSameDType(q, 1, 2); !e.empty()) return fail(e);
  return broadcastAll(q, 0, q.operands[1].dtype);
}

TypeResult ruleReduce(const TypeQuery& q) {
  const Type& x = q.operands[0];
  if (x.dtype == DType::Bool) return fail(operandStr(q, 0) + " must be numeric");
  std::string err;
  auto axis = axisOf(q, x.rank(), &err);
  if (!axis) return fail(err);
  Type out = x;
  if (std::get<bool>(*q.attr("keepdim")))
    out.shape[*axis] = 1;
  else
    out.shape.erase(out.shape.begin() + *axis);
  return one(out);
}

// a [..., m, k] x b [..., k, n], or b [..., n, k] read transposed with
// {transpose_b=true} (the layout checkpoints store a linear layer's weight
// in). The operands share a dtype, except that an f32 a may take a two-byte
// float b: each element is widened exactly, the result is f32.
TypeResult ruleMatMul(const TypeQuery& q) {
  const Type& a = q.operands[0];
  const Type& b = q.operands[1];
  bool widened = a.dtype == DType::F32 && (b.dtype == DType::BF16 || b.dtype == DType::F16);
  if (!widened)
    if (auto e = needSameDType(q, 0, 1); !e.empty()) return fail(e);
  if (a.dtype == DType::Bool) return fail(operandStr(q, 0) + " must be numeric");
  if (a.rank() < 2 || b.rank() < 2) return fail("matmul operands must have rank 2 or more");
  bool transposed = flagAttr(*q.attrs, "transpose_b");
  int64_t k = a.shape[a.rank() - 1];
  if (b.shape[b.rank() - (transposed ? 1 : 2)] != k)
    return fail("contracted dimensions differ: " + a.str() + " x " + b.str() + (transposed ? " transposed" : ""));
  auto batch = broadcastShapes(Shape(a.shape.begin(), a.shape.end() - 2), Shape(b.shape.begin(), b.shape.end() - 2));
  if (!batch) return fail("batch dimensions of " + a.str() + " and " + b.str() + " do not broadcast");
  batch->push_back(a.shape[a.rank() - 2]);
  batch->push_back(b.shape[b.rank() - (transposed ? 2 : 1)]);
  return one(Type{a.dtype, *batch});
}

TypeResult ruleTopK(const TypeQuery& q) {
  const Type& x = q.operands[0];
  if (x.rank() < 1 || x.dtype == DType::Bool) return fail(operandStr(q, 0) + " must be a numeric tensor of rank 1 or more");
  int64_t k = q.attrInt("k");
  if (k < 1 || k > x.shape.back())
    return fail("k " + std::to_string(k) + " is not within the last axis of size " + std::to_string(x.shape.back()));
  Type vals = x;
  vals.shape.back() = k;
  Type idx{DType::I32, vals.shape};
  return {{vals, idx}, {}};
}

// Sample(logits [R..., V], temperature f32[R...], top_k i32[R...], top_p
// f32[R...], min_p f32[R...], uniform f32[R...], repetition_penalty f32[P],
// seen i32[P, S], seen_penalty f32[P, S]) -> i32[R...]: one token a row of
// logits, under that row's parameters and its run's penalties
// (oracle/sample.h); P divides the rows' count, S is at least 1.
TypeResult ruleSample(const TypeQuery& q) {
  const Type& x = q.operands[0];
  if (x.rank() < 1 || !isFloat(x.dtype) || x.shape.back() < 1)
    return fail(operandStr(q, 0) + " must be a float tensor of rank 1 or more with a last axis of at least 1");
  Shape rows(x.shape.begin(), x.shape.end() - 1);
  for (size_t i = 1; i < 6; ++i) {
    const SampleParam& p = kSampleParams[i - 1];
    if (q.operands[i] != Type{p.dtype, rows})
      return fail(operandStr(q, i) + ", the " + p.name + ", must be " + Type{p.dtype, rows}.str() +
                  ": one a row of the logits");
  }
  const Type& rep = q.operands[6];
  const int64_t count = numel(rows);
  if (rep.dtype != DType::F32 || rep.rank() != 1 || rep.shape[0] < 1 || count % rep.shape[0] != 0)
    return fail(operandStr(q, 6) + ", the repetition_penalty, must be f32[P] with P dividing the " +
                std::to_string(count) + " rows of the logits: one a run of rows");
  const Type& seen = q.operands[7];
  if (seen.dtype != DType::I32 || seen.rank() != 2 || seen.shape[0] != rep.shape[0] || seen.shape[1] < 1)
    return fail(operandStr(q, 7) + ", the seen tokens, must be i32[" + std::to_string(rep.shape[0]) +
                ", S] with S at least 1: a list a run of rows");
  if (q.operands[8] != Type{DType::F32, seen.shape})
    return fail(operandStr(q, 8) + ", the seen_penalty, must be " + Type{DType::F32, seen.shape}.str() +
                ": one a seen token");
  return one(Type{DType::I32, rows});
}

TypeResult ruleIndexGuard(const TypeQuery& q) {
  if (auto e = needInt(q, 0); !e.empty()) return fail(e);
  if (q.attrInt("lo") > q.attrInt("hi")) return fail("guard range is empty: lo > hi");
  if (!fitsDType(double(q.attrInt("lo")), q.operands[0].dtype) || !fitsDType(double(q.attrInt("hi")), q.operands[0].dtype))
    return fail("guard range does not fit " + std::string(dtypeName(q.operands[0].dtype)));
  return {{q.operands[0], Type{DType::Bool, {}}}, {}};
}

// The score transform shared by both attention ops: a finite scale and an
// optional positive softcap.
std::string checkScoreTransform(const TypeQuery& q) {
  if (!std::isfinite(q.attrFloat("scale"))) return "scale must be finite";
  if (const AttrValue* c = q.attr("softcap"); c && !(std::get<double>(*c) > 0 && std::isfinite(std::get<double>(*c))))
    return "softcap must be positive and finite";
  return "";
}

// q [B,Hq,Lq,Dk], k [B,Hkv,Lk,Dk] (split: Dk - s, plus k_shared [B,1,Lk,s];
// paged: pool [S,Hkv,Dk] with read [B,Lk]), v likewise with Dv, then
// mask [B,Hm,Lq,Lk] with Hm in {1, Hq} when mask=additive, or the query
// positions qpos i32 [B,Lq] in its place when mask=causal (key t visible to
// row i of batch row b iff t <= qpos[b,i], and qpos[b,i] - t < window when
// the optional window >= 1 is given: causal only), and len [B] when
// bound=live. Result [B,Hq,Lq,Dv].
TypeResult ruleAttention(const TypeQuery& q) {
  const std::string& key = q.attrSym("key");
  bool split = key == "split", paged = key == "paged";
  bool additive = q.attrSym("mask") == "additive", causal = q.attrSym("mask") == "causal";
  bool masked = additive || causal;
  bool live = q.attrSym("bound") == "live";
  size_t want = 3 + split + paged + masked + live;
  if (q.operands.size() != want)
    return fail("attention with key=" + key + ", mask=" + q.attrSym("mask") + ", bound=" +
                q.attrSym("bound") + " takes " + std::to_string(want) + " operands, got " +
                std::to_string(q.operands.size()));
  size_t i = 0;
  size_t iq = i++, ik = i++, iks = split ? i++ : 0, iv = i++, iread = paged ? i++ : 0;
  size_t imask = masked ? i++ : 0, ilen = live ? i++ : 0;
  const Type &tq = q.operands[iq], &tk = q.operands[ik], &tv = q.operands[iv];
  if (auto e = first(needFloat(q, iq), needRank(q, iq, 4), needSameDType(q, iq, ik), needSameDType(q, iq, iv));
      !e.empty())
    return fail(e);
  int64_t B = tq.shape[0], Hq = tq.shape[1], Lq = tq.shape[2], Dk = tq.shape[3];
  int64_t nrep = q.attrInt("n_rep");
  if (nrep < 1 || Hq % nrep != 0)
    return fail("n_rep " + std::to_string(nrep) + " does not divide the " + std::to_string(Hq) + " query heads");
  int64_t Hkv = Hq / nrep, Lk, Dv;
  if (paged) {
    if (auto e = first(needRank(q, ik, 3), needRank(q, iv, 3), needI32(q, iread), needRank(q, iread, 2)); !e.empty())
      return fail(e);
    const Type& r = q.operands[iread];
    if (r.shape[0] != B) return fail("read map " + r.str() + " must have one row per batch row");
    Lk = r.shape[1];
    Dv = tv.shape[2];
    if (tk.shape != Shape{tk.shape[0], Hkv, Dk} || tv.shape != Shape{tk.shape[0], Hkv, Dv})
      return fail("paged pools " + tk.str() + " and " + tv.str() + " must be [slots, " + std::to_string(Hkv) +
                  ", d] with key width " + std::to_string(Dk));
  } else {
    if (auto e = first(needRank(q, ik, 4), needRank(q, iv, 4)); !e.empty()) return fail(e);
    Lk = tk.shape[2];
    Dv = tv.shape[3];
    int64_t s = 0;
    if (split) {
      const Type& ks = q.operands[iks];
      if (auto e = first(needSameDType(q, iq, iks), needRank(q, iks, 4)); !e.empty()) return fail(e);
      s = ks.shape[3];
      if (ks.shape != Shape{B, 1, Lk, s} || s >= Dk)
        return fail("shared key " + ks.str() + " must be [" + std::to_string(B) + ",1," + std::to_string(Lk) +
                    ",s] with s below the key width " + std::to_string(Dk));
    }
    if (tk.shape != Shape{B, Hkv, Lk, Dk - s})
      return fail("key " + tk.str() + " must be " + shapeStr({B, Hkv, Lk, Dk - s}));
    if (tv.shape != Shape{B, Hkv, Lk, Dv})
      return fail("value " + tv.str() + " must be " + shapeStr({B, Hkv, Lk, Dv}));
  }
  if (const AttrValue* w = q.attr("window")) {
    if (!causal) return fail("window is an attribute of mask=causal only, not mask=" + q.attrSym("mask"));
    if (std::get<int64_t>(*w) < 1 || std::get<int64_t>(*w) > std::numeric_limits<int32_t>::max())
      return fail("window " + std::to_string(std::get<int64_t>(*w)) + " must be in [1, 2^31 - 1]");
  }
  if (causal) {
    const Type& p = q.operands[imask];
    if (p.dtype != DType::I32 || p.shape != Shape{B, Lq})
      return fail("query positions " + p.str() + " must be i32" + shapeStr({B, Lq}));
  }
  if (additive) {
    const Type& m = q.operands[imask];
    if (auto e = needSameDType(q, iq, imask); !e.empty()) return fail(e);
    if (m.rank() != 4 || m.shape[0] != B || (m.shape[1] != 1 && m.shape[1] != Hq) || m.shape[2] != Lq ||
        m.shape[3] != Lk)
      return fail("mask " + m.str() + " must be [" + std::to_string(B) + ", 1 or " + std::to_string(Hq) + ", " +
                  std::to_string(Lq) + ", " + std::to_string(Lk) + "]");
  }
  if (live) {
    const Type& l = q.operands[ilen];
    if (l.dtype != DType::I32 || l.shape != Shape{B}) return fail("len " + l.str() + " must be i32[" + std::to_string(B) + "]");
  }
  if (auto e = checkScoreTransform(q); !e.empty()) return fail(e);
  return one(Type{tq.dtype, {B, Hq, Lq, Dv}});
}

// x [..., D] with D even; cos and sin broadcast to x's shape with D/2 last.
TypeResult ruleRope(const TypeQuery& q) {
  const Type& x = q.operands[0];
  if (auto e = first(needFloat(q, 0), needSameDType(q, 0, 1), needSameDType(q, 0, 2)); !e.empty()) return fail(e);
  if (x.rank() < 1 || x.shape.back() % 2 != 0) return fail("rope needs an even last axis, got " + x.str());
  Shape half = x.shape;
  half.back() /= 2;
  for (size_t i = 1; i <= 2; ++i) {
    auto b = broadcastShapes(q.operands[i].shape, half);
    if (!b || *b != half) return fail(operandStr(q, i) + " does not broadcast to " + shapeStr(half));
  }
  return one(x);
}

// scores [B,Lq,NB], qpos [B,Lq] -> ids i32 [B,Lq,k]
TypeResult ruleBlockTopK(const TypeQuery& q) {
  const Type& s = q.operands[0];
  const Type& p = q.operands[1];
  if (auto e = first(needFloat(q, 0), needRank(q, 0, 3), needInt(q, 1)); !e.empty()) return fail(e);
  if (p.shape != Shape{s.shape[0], s.shape[1]}) return fail("query positions " + p.str() + " must be " + shapeStr({s.shape[0], s.shape[1]}));
  int64_t k = q.attrInt("k");
  if (k < 1 || k > s.shape[2]) return fail("k " + std::to_string(k) + " is not within the " + std::to_string(s.shape[2]) + " blocks");
  if (q.attrInt("block") < 1) return fail("block must be positive");
  return one(Type{DType::I32, {s.shape[0], s.shape[1], k}});
}

// q [B,Hq,Lq,Dk], k [B,Hkv,Lk,Dk], v [B,Hkv,Lk,Dv], ids [B,Lq,K], qpos [B,Lq]
TypeResult ruleSelectedAttention(const TypeQuery& q) {
  if (auto e = first(needFloat(q, 0), needRank(q, 0, 4), needRank(q, 1, 4), needRank(q, 2, 4), needSameDType(q, 0, 1),
                     needSameDType(q, 0, 2), needInt(q, 3), needRank(q, 3, 3), needInt(q, 4));
      !e.empty())
    return fail(e);
  const Type &tq = q.operands[0], &tk = q.operands[1], &tv = q.operands[2];
  int64_t B = tq.shape[0], Hq = tq.shape[1], Lq = tq.shape[2], nrep = q.attrInt("n_rep");
  if (nrep < 1 || Hq % nrep != 0)
    return fail("n_rep " + std::to_string(nrep) + " does not divide the " + std::to_string(Hq) + " query heads");
  int64_t Lk = tk.shape[2];
  if (tk.shape != Shape{B, Hq / nrep, Lk, tq.shape[3]}) return fail("key " + tk.str() + " does not match the query");
  if (tv.shape[0] != B || tv.shape[1] != Hq / nrep || tv.shape[2] != Lk) return fail("value " + tv.str() + " does not match the key");
  const Type& ids = q.operands[3];
  if (ids.shape[0] != B || ids.shape[1] != Lq) return fail("block ids " + ids.str() + " must be [" + std::to_string(B) + "," + std::to_string(Lq) + ",k]");
  if (q.operands[4].shape != Shape{B, Lq}) return fail("query positions " + q.operands[4].str() + " must be " + shapeStr({B, Lq}));
  int64_t block = q.attrInt("block");
  if (block < 1 || Lk % block != 0) return fail("block " + std::to_string(block) + " must divide the key length " + std::to_string(Lk));
  if (auto e = checkScoreTransform(q); !e.empty()) return fail(e);
  return one(Type{tq.dtype, {B, Hq, Lq, tv.shape[3]}});
}

// h [..., H], router [E, H], then per expert e gate [I, H], up [I, H],
// down [H, I] -> h's type. The router may have any float dtype (it is read
// widened to f32); an expert weight has h's dtype, or for an f32 h a
// two-byte float read widened exactly (a checkpoint's bf16 weights).
TypeResult ruleRoutedExperts(const TypeQuery& q) {
  int64_t E = q.attrInt("experts"), k = q.attrInt("k");
  if (E < 1) return fail("experts must be positive");
  if (q.operands.size() != kRoutedFirstExpert + kRoutedPerExpert * size_t(E))
    return fail(std::to_string(q.operands.size()) + " operands, but experts " + std::to_string(E) + " needs " +
                std::to_string(kRoutedFirstExpert + kRoutedPerExpert * size_t(E)) +
                ": h, the router, then gate, up and down of every expert");
  if (k < 1 || k > E) return fail("k " + std::to_string(k) + " is not within the " + std::to_string(E) + " experts");
  if (!std::isfinite(q.attrFloat("scale"))) return fail("scale must be finite");
  if (auto e = first(needFloat(q, 0), needFloat(q, 1), needRank(q, 1, 2)); !e.empty()) return fail(e);
  const Type& h = q.operands[0];
  if (h.rank() < 1) return fail(operandStr(q, 0) + " must have rank 1 or more");
  int64_t H = h.shape.back();
  if (q.operands[1].shape != Shape{E, H}) return fail(operandStr(q, 1) + ", the router, must be " + shapeStr({E, H}));
  int64_t I = q.operands[kRoutedFirstExpert].rank() == 2 ? q.operands[kRoutedFirstExpert].shape[0] : 0;
  for (size_t i = kRoutedFirstExpert; i < q.operands.size(); ++i) {
    bool down = (i - kRoutedFirstExpert) % kRoutedPerExpert == 2;
    Type want{h.dtype, down ? Shape{H, I} : Shape{I, H}};
    const Type& w = q.operands[i];
    bool widened = h.dtype == DType::F32 && (w.dtype == DType::F16 || w.dtype == DType::BF16);
    if (w.shape != want.shape || (w.dtype != h.dtype && !widened) || I < 1)
      return fail(operandStr(q, i) + ", the " + (down ? "down" : (i - kRoutedFirstExpert) % kRoutedPerExpert ? "up" : "gate") +
                  " weight of expert " + std::to_string((i - kRoutedFirstExpert) / kRoutedPerExpert) + ", must be " +
                  (I < 1 ? "[I, " + std::to_string(H) + "] with I >= 1"
                         : want.str() + (h.dtype == DType::F32 ? " (or f16 or bf16, widened exactly)" : "")));
  }
  return one(h);
}

using K = AttrKind;
const AttrSpec kAxis{"axis", K::Int};

std::vector<OpInfo> buildTable() {
  std::vector<OpInfo> t = {
      {Op::Iota, "Iota", OpClass::Data, 0, 0, 1, {kAxis}, ruleIota},
      {Op::Constant, "Constant", OpClass::Data, 0, 0, 1, {{"value", K::Floats}}, ruleConstant},
      {Op::Reshape, "Reshape", OpClass::Data, 1, 1, 1, {}, ruleReshape},
      {Op::Broadcast, "Broadcast", OpClass::Data, 1, 1, 1, {}, ruleBroadcast},
      {Op::Transpose, "Transpose", OpClass::Data, 1, 1, 1, {{"perm", K::Ints}}, ruleTranspose},
      {Op::Slice, "Slice", OpClass::Data, 1, 1, 1, {kAxis, {"start", K::Int}, {"limit", K::Int}}, ruleSlice},
      {Op::Concat, "Concat", OpClass::Data, 1, -1, 1, {kAxis}, ruleConcat},
      {Op::Gather, "Gather", OpClass::Data, 2, 2, 1, {kAxis}, ruleGather},
      {Op::DynamicSlice, "DynamicSlice", OpClass::Data, 2, 2, 1, {kAxis, {"size", K::Int}}, ruleDynamicSlice},
      {Op::DynamicUpdateSlice, "DynamicUpdateSlice", OpClass::Data, 3, 3, 1, {kAxis}, ruleDynamicUpdateSlice},
      {Op::ScatterUpdate, "ScatterUpdate", OpClass::Data, 3, 3, 1, {}, ruleScatterUpdate},
      {Op::Convert, "Convert", OpClass::Data, 1, 1, 1, {}, ruleConvert},
  };
  struct Row { Op op; const char* name; TypeRule rule; };
  for (auto [op, name, rule] : std::initializer_list<Row>{
           {Op::Exp, "Exp", ruleUnaryFloat}, {Op::Log, "Log", ruleUnaryFloat}, {Op::Neg, "Neg", ruleUnaryNumeric},
           {Op::Sqrt, "Sqrt", ruleUnaryFloat}, {Op::Rsqrt, "Rsqrt", ruleUnaryFloat}, {Op::Recip, "Recip", ruleUnaryFloat},
           {Op::Tanh, "Tanh", ruleUnaryFloat}, {Op::Sin, "Sin", ruleUnaryFloat}, {Op::Cos, "Cos", ruleUnaryFloat},
           {Op::Abs, "Abs", ruleUnaryNumeric}, {Op::Erf, "Erf", ruleUnaryFloat}, {Op::Sigmoid, "Sigmoid", ruleUnaryFloat},
           {Op::Not, "Not", ruleUnaryBool}})
    t.push_back(OpInfo{op, name, OpClass::Unary, 1, 1, 1, {}, rule});
  for (auto [op, name, rule] : std::initializer_list<Row>{
           {Op::Add, "Add", ruleBinaryNumeric}, {Op::Sub, "Sub", ruleBinaryNumeric}, {Op::Mul, "Mul", ruleBinaryNumeric},
           {Op::Div, "Div", ruleBinaryNumeric}, {Op::Max, "Max", ruleBinaryNumeric}, {Op::Min, "Min", ruleBinaryNumeric},
           {Op::Pow, "Pow", ruleBinaryFloat}, {Op::And, "And", ruleBinaryBool}, {Op::Or, "Or", ruleBinaryBool}})
    t.push_back(OpInfo{op, name, OpClass::Binary, 2, 2, 1, {}, rule});
  for (auto [op, name, rule] : std::initializer_list<Row>{{Op::Lt, "Lt", ruleOrdered}, {Op::Le, "Le", ruleOrdered},
                                                         {Op::Gt, "Gt", ruleOrdered}, {Op::Ge, "Ge", ruleOrdered},
                                                         {Op::Eq, "Eq", ruleCompare}, {Op::Ne, "Ne", ruleCompare}})
    t.push_back(OpInfo{op, name, OpClass::Compare, 2, 2, 1, {}, rule});
  t.push_back({Op::Select, "Select", OpClass::Select, 3, 3, 1, {}, ruleSelect});
  for (auto [op, name] : std::initializer_list<std::pair<Op, const char*>>{
           {Op::ReduceSum, "ReduceSum"}, {Op::ReduceMax, "ReduceMax"}, {Op::ReduceMin, "ReduceMin"}})
    t.push_back({op, name, OpClass::Reduce, 1, 1, 1, {kAxis, {"keepdim", K::Bool}}, ruleReduce});
  t.push_back({Op::MatMul, "MatMul", OpClass::Contract, 2, 2, 1, {{"transpose_b", K::Bool, true}}, ruleMatMul});
  t.push_back({Op::TopK, "TopK", OpClass::Contract, 1, 1, 2, {{"k", K::Int}}, ruleTopK});
  t.push_back({Op::IndexGuard, "IndexGuard", OpClass::Data, 1, 1, 2, {{"lo", K::Int}, {"hi", K::Int}}, ruleIndexGuard});
  t.push_back({Op::Attention, "Attention", OpClass::Formed, 3, 7, 1,
               {{"scale", K::Float},
                {"softcap", K::Float, true},
                {"n_rep", K::Int},
                {"key", K::Sym, false, {"dense", "split", "paged"}},
                {"mask", K::Sym, false, {"none", "additive", "causal"}},
                {"window", K::Int, true},
                {"bound", K::Sym, false, {"capacity", "live"}}},
               ruleAttention});
  t.push_back({Op::Rope, "Rope", OpClass::Formed, 3, 3, 1, {{"style", K::Sym, false, {"half", "interleaved"}}}, ruleRope});
  t.push_back({Op::BlockTopK, "BlockTopK", OpClass::Formed, 2, 2, 1, {{"k", K::Int}, {"block", K::Int}}, ruleBlockTopK});
  t.push_back({Op::SelectedAttention, "SelectedAttention", OpClass::Formed, 5, 5, 1,
               {{"scale", K::Float}, {"softcap", K::Float, true}, {"n_rep", K::Int}, {"block", K::Int}},
               ruleSelectedAttention});
  t.push_back({Op::Sample, "Sample", OpClass::Contract, 9, 9, 1, {}, ruleSample});
  t.push_back({Op::RoutedExperts, "RoutedExperts", OpClass::Formed, 5, -1, 1,
               {{"experts", K::Int},
                {"k", K::Int},
                {"scoring", K::Sym, false, {"softmax", "sigmoid"}},
                {"renormalize", K::Bool},
                {"scale", K::Float},
                {"activation", K::Sym, false, {"silu"}}},
               ruleRoutedExperts});
  for (OpInfo& info : t)
    if (fusibleOp(info.op) || info.op == Op::MatMul || info.op == Op::DynamicUpdateSlice)
      info.attrs.push_back({"fusion", K::Int, true});  // a product group's member; an in-place root (ir/fusion.h)
  std::sort(t.begin(), t.end(), [](const OpInfo& a, const OpInfo& b) { return a.op < b.op; });
  return t;
}

}  // namespace

const std::vector<OpInfo>& opTable() {
  static const std::vector<OpInfo> table = buildTable();
  return table;
}

const OpInfo& opInfo(Op op) {
  const OpInfo& info = opTable()[size_t(op)];
  assert(info.op == op && "op table must list every op once, in enum order");
  return info;
}

const char* opName(Op op) { return opInfo(op).name; }

bool fusibleOp(Op op) {
  switch (op) {
    case Op::Iota:
    case Op::Constant:
    case Op::Reshape:
    case Op::Broadcast:
    case Op::Transpose:
    case Op::Convert:
    case Op::Select:
    case Op::ReduceSum:
    case Op::ReduceMax:
    case Op::ReduceMin:
    case Op::Rope: return true;
    default: break;
  }
  if (op >= Op::Exp && op <= Op::Ne) return true;  // unary, binary, compare
  return false;
}

std::optional<Op> parseOp(std::string_view name) {
  for (const OpInfo& info : opTable())
    if (name == info.name) return info.op;
  return std::nullopt;
}

const AttrSpec* findAttrSpec(const OpInfo& info, std::string_view name) {
  for (const AttrSpec& s : info.attrs)
    if (name == s.name) return &s;
  return nullptr;
}

void sortAttrs(const OpInfo& info, Attrs& attrs) {
  auto rank = [&](const Attr& a) {
    const AttrSpec* s = findAttrSpec(info, a.name);
    return s ? s - info.attrs.data() : std::ptrdiff_t(info.attrs.size());
  };
  std::stable_sort(attrs.begin(), attrs.end(), [&](const Attr& a, const Attr& b) { return rank(a) < rank(b); });
}

const char* attrKindName(AttrKind k) {
  static const char* names[] = {"an integer", "a number", "a bool", "a symbol", "a list of integers",
                                "a list of numbers"};
  return names[int(k)];
}

const AttrValue* TypeQuery::attr(std::string_view name) const {
  for (const Attr& a : *attrs)
    if (a.name == name) return &a.value;
  return nullptr;
}
bool flagAttr(const Attrs& attrs, std::string_view name) {
  for (const Attr& a : attrs)
    if (a.name == name) return std::get<bool>(a.value);
  return false;
}

int64_t TypeQuery::attrInt(std::string_view name) const { return std::get<int64_t>(*attr(name)); }
double TypeQuery::attrFloat(std::string_view name) const { return std::get<double>(*attr(name)); }
const std::string& TypeQuery::attrSym(std::string_view name) const { return std::get<std::string>(*attr(name)); }
const std::vector<int64_t>& TypeQuery::attrInts(std::string_view name) const {
  return std::get<std::vector<int64_t>>(*attr(name));
}

TypeResult checkEqn(Op op, const TypeQuery& q) {
  const OpInfo& info = opInfo(op);
  int n = int(q.operands.size());
  if (n < info.minOperands || (info.maxOperands >= 0 && n > info.maxOperands)) {
    std::string want = info.minOperands == info.maxOperands ? std::to_string(info.minOperands)
                       : info.maxOperands < 0 ? std::to_string(info.minOperands) + " or more"
                                              : std::to_string(info.minOperands) + " to " + std::to_string(info.maxOperands);
    return fail(std::string(info.name) + " takes " + want + " operands, got " + std::to_string(n));
  }
  const AttrSpec* prev = nullptr;
  for (const Attr& a : *q.attrs) {
    const AttrSpec* spec = findAttrSpec(info, a.name);
    if (!spec) return fail(std::string(info.name) + " has no attribute '" + a.name + "'");
    if (prev && spec <= prev)
      return fail(spec == prev ? "attribute '" + a.name + "' is given twice"
                               : "attribute '" + a.name + "' is out of the op table's order");
    prev = spec;
    if (attrKindOf(a.value) != spec->kind)
      return fail("attribute '" + a.name + "' must be " + attrKindName(spec->kind));
    if (spec->kind == AttrKind::Sym) {
      const std::string& s = std::get<std::string>(a.value);
      bool known = std::any_of(spec->symbols.begin(), spec->symbols.end(), [&](const char* x) { return s == x; });
      if (!known) {
        std::string allowed;
        for (const char* x : spec->symbols) allowed += std::string(allowed.empty() ? "" : ", ") + x;
        return fail("attribute '" + a.name + "' must be one of " + allowed + ", got '" + s + "'");
      }
    }
  }
  for (const AttrSpec& spec : info.attrs)
    if (!spec.optional && !q.attr(spec.name))
      return fail(std::string(info.name) + " needs attribute '" + spec.name + "'");
  TypeResult r = info.rule(q);
  if (r.error.empty() && int(r.types.size()) != info.results) return fail("internal: type rule result count");
  return r;
}

std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

}  // namespace poot

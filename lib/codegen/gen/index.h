// What the primitive generators (elementwise, reduce, matmul, rows, guard)
// share: reading a request's attributes, the refusal of shapes whose indices
// do not fit i32, opening a kernel with one buffer per binding (operands,
// then results), the one-thread-per-item skeleton, row-major and broadcast
// index arithmetic with compile-time shapes, typed integer constants and the
// NaN-propagating max and min the oracle uses. Private to lib/codegen/gen.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/gen/generators.h"
#include "codegen/kir/builder.h"
#include "ir/ops.h"

namespace poot::gen {

using kir::Builder;
using kir::Opc;
using kir::Scalar;
using kir::V;
using Strides = std::vector<int64_t>;

// ---------------------------------------------------------------- attributes

inline const AttrValue& attrOf(const KernelRequest& r, std::string_view name) {
  TypeQuery q;
  q.attrs = &r.attrs;
  return *q.attr(name);
}
inline int64_t attrInt(const KernelRequest& r, std::string_view n) { return std::get<int64_t>(attrOf(r, n)); }
inline bool attrBool(const KernelRequest& r, std::string_view n) { return std::get<bool>(attrOf(r, n)); }
inline const std::string& attrSym(const KernelRequest& r, std::string_view n) {
  return std::get<std::string>(attrOf(r, n));
}
inline const std::vector<int64_t>& attrInts(const KernelRequest& r, std::string_view n) {
  return std::get<std::vector<int64_t>>(attrOf(r, n));
}
inline const std::vector<double>& attrFloats(const KernelRequest& r, std::string_view n) {
  return std::get<std::vector<double>>(attrOf(r, n));
}
// The `axis` attribute made non-negative against a rank (the verifier has
// checked it lies in [-rank, rank)).
inline int64_t axisAttr(const KernelRequest& r, int64_t rank) { return *normalizeAxis(attrInt(r, "axis"), rank); }

// ---------------------------------------------------------------- refusals

inline Error refuse(const char* check, const KernelRequest& r, const std::string& why) {
  Error e = makeError(ErrorKind::Capability, {}, std::string("op ") + opName(r.op) + ": " + why);
  e.capability = check;
  return e;
}

// ---------------------------------------------------------------- kernels

// A kernel being built: its Builder and the buffer index of each operand and
// result, in binding order.
struct Frame {
  Builder b;
  std::vector<int32_t> in, out;
};

// Indices are i32: every buffer (its operands, results, or `extra` elements
// of scratch) and every thread id of the folded grid (x * y workgroups,
// which may pass the count by up to x - 1 workgroups) must fit, or the
// request is refused (IndexWidth).
inline Status checkIndexWidth(const GenInput& gi, int64_t extra = 0) {
  const KernelRequest& r = gi.request;
  int64_t most = extra;
  for (const std::vector<Type>* types : {&r.operands, &r.results})
    for (const Type& t : *types) most = std::max(most, numel(t.shape));
  int64_t threads = gi.grid[0] * gi.grid[1] * r.schedule.workgroupSize;
  if (most <= INT32_MAX && threads <= int64_t(INT32_MAX) + 1) return ok();
  return refuse("IndexWidth", r,
                "a buffer of " + std::to_string(most) + " elements or a grid of " + std::to_string(threads) +
                    " threads is more than 32-bit kernel indices address");
}

// Opens the kernel of `gi`: every binding gets a buffer of its type's element
// count. With scratchFloats > 0 the results' bindings are instead one f32
// buffer of that many elements (a split kernel's partials, plan.h Scratch).
inline Expected<Frame> openKernel(const GenInput& gi, int64_t scratchFloats = 0) {
  const KernelRequest& r = gi.request;
  int64_t wg = r.schedule.workgroupSize;
  if (auto s = checkIndexWidth(gi, scratchFloats); !s) return s.error();
  Frame f{Builder(gi.entry, wg, gi.grid[0]), {}, {}};
  for (size_t i = 0; i < r.operands.size(); ++i)
    f.in.push_back(f.b.buffer("operand" + std::to_string(i), r.operands[i].dtype, numel(r.operands[i].shape), false));
  if (scratchFloats > 0) {
    f.out.push_back(f.b.buffer("scratch", DType::F32, scratchFloats, true));
    return f;
  }
  for (size_t i = 0; i < r.results.size(); ++i)
    f.out.push_back(f.b.buffer("result" + std::to_string(i), r.results[i].dtype, numel(r.results[i].shape), true));
  return f;
}

// One thread per item: id = workgroupId * workgroupSize + local, and the body
// runs for id < count (the grid may hold a few threads more).
inline void perThread(Builder& b, int64_t workgroupSize, int64_t count, const std::function<void(V)>& body) {
  V id = b.add(b.mul(b.workgroupId(), b.i32(workgroupSize)), b.local());
  b.ifThen(b.lt(id, b.i32(count)), [&] { body(id); });
}

// ---------------------------------------------------------------- index math

inline Strides rowMajor(const Shape& s) {
  Strides st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// The strides of shape `s` read as if broadcast to `out` (numpy: aligned at
// the right, 0 along the axes where s has size 1 or no axis).
inline Strides bcastStrides(const Shape& s, const Shape& out) {
  Strides st(out.size(), 0), own = rowMajor(s);
  size_t lead = out.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] != 1) st[lead + d] = own[d];
  return st;
}

// The coordinates of row-major element `flat` of `shape` (flat < numel).
inline std::vector<V> unravel(Builder& b, V flat, const Shape& shape) {
  std::vector<V> c(shape.size());
  V rest = flat;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) {
      c[d] = b.i32(0);
    } else if (d == 0) {
      c[d] = rest;
    } else {
      c[d] = b.rem(rest, b.i32(shape[d]));
      rest = b.div(rest, b.i32(shape[d]));
    }
  }
  return c;
}

// sum over d of coords[d] * strides[d], skipping zero strides.
inline V offsetOf(Builder& b, const std::vector<V>& coords, const Strides& strides) {
  V at = b.i32(0);
  for (size_t d = 0; d < coords.size(); ++d) {
    if (strides[d] == 0) continue;
    at = b.add(at, strides[d] == 1 ? coords[d] : b.mul(coords[d], b.i32(strides[d])));
  }
  return at;
}

// a / d and a % d for a non-negative a and constant d, free when d is 1.
inline V divBy(Builder& b, V a, int64_t d) { return d == 1 ? a : b.div(a, b.i32(d)); }
inline V remBy(Builder& b, V a, int64_t d) { return d == 1 ? b.i32(0) : b.rem(a, b.i32(d)); }

// Rope's pairing on the last axis (size D, H = D / 2): coordinate c is one
// half of the rotated pair (c1, c2), (j, H + j) for style half and (2j,
// 2j + 1) for interleaved; `first` when c is c1; j indexes the tables.
struct RopePair {
  V first, c1, c2, j;
};
inline RopePair ropePair(Builder& b, V c, int64_t D, bool half) {
  int64_t H = D / 2;
  V first = half ? b.lt(c, b.i32(H)) : b.eq(remBy(b, c, 2), b.i32(0));
  V j = half ? b.select(first, c, b.sub(c, b.i32(H))) : divBy(b, c, 2);
  V c1 = half ? j : b.mul(j, b.i32(2));
  V c2 = half ? b.add(c1, b.i32(H)) : b.add(c1, b.i32(1));
  return {first, c1, c2, j};
}
// The rotated element: x1 cos - x2 sin for the pair's first, x2 cos + x1 sin
// for its second.
inline V ropeRotate(Builder& b, const RopePair& p, V x1, V x2, V co, V si) {
  V rotated1 = b.sub(b.mul(x1, co), b.mul(x2, si)), rotated2 = b.add(b.mul(x2, co), b.mul(x1, si));
  return b.select(p.first, rotated1, rotated2);
}

// ---------------------------------------------------------------- fragments

// An accumulator fragment of a warp's matrix op (an Mma's C and D, kir.h)
// as four f32 variables, which the tensor-core kernels carry across steps.
using FragmentVars = std::array<int32_t, 4>;
inline FragmentVars zeroFragment(Builder& b) {
  FragmentVars vars{};
  for (int32_t& x : vars) x = b.var(Scalar::F32, b.f32(0));
  return vars;
}
inline std::array<V, 4> getFragment(Builder& b, const FragmentVars& vars) {
  return {b.get(vars[0]), b.get(vars[1]), b.get(vars[2]), b.get(vars[3])};
}
inline void setFragment(Builder& b, const FragmentVars& vars, const std::array<V, 4>& x) {
  for (size_t e = 0; e < 4; ++e) b.set(vars[e], x[e]);
}

// ---------------------------------------------------------------- values

// The value type the Builder loads a graph dtype as.
inline Scalar valueScalar(DType t) {
  if (isFloat(t)) return Scalar::F32;
  if (t == DType::I64) return Scalar::I64;
  if (t == DType::Bool) return Scalar::Bool;
  return Scalar::I32;
}

// An integer constant of type t (i32 or i64) without passing through a double.
inline V intConst(Builder& b, Scalar t, int64_t v) { return t == Scalar::I64 ? b.i64(v) : b.i32(v); }

// The oracle's Max and Min: NaN if either side is NaN, else the larger
// (smaller) with ties keeping `a`. Integers need no NaN test.
inline V maxOf(Builder& b, V a, V c) {
  V m = b.select(b.lt(a, c), c, a);
  return b.typeOf(a) == Scalar::F32 ? b.select(b.isNan(c), c, m) : m;
}
inline V minOf(Builder& b, V a, V c) {
  V m = b.select(b.lt(c, a), c, a);
  return b.typeOf(a) == Scalar::F32 ? b.select(b.isNan(c), c, m) : m;
}

// ---------------------------------------------------------------- selection

// Whether (a, ia) ranks before (c, ic) in the oracle's TopK order: larger
// first, NaN above everything, ties (and NaNs among themselves) by lower
// index.
inline V ranksBefore(Builder& b, V a, V ia, V c, V ic) {
  V byIndex = b.lt(ia, ic);
  V byValue = b.select(b.ne(a, c), b.gt(a, c), byIndex);
  if (b.typeOf(a) != Scalar::F32) return byValue;
  V na = b.isNan(a), nc = b.isNan(c);
  return b.select(na, b.select(nc, byIndex, b.boolean(true)), b.select(nc, b.boolean(false), byValue));
}

// (v, i) ranks before the best so far (bv, bi): i < 0 is no candidate, bi <
// 0 no best yet.
inline V betterCandidate(Builder& b, V v, V i, V bv, V bi) {
  return b.binary(Opc::And, b.ge(i, b.i32(0)), b.binary(Opc::Or, b.lt(bi, b.i32(0)), ranksBefore(b, v, i, bv, bi)));
}

// Folds every thread's candidate (v, i) into the workgroup's best: the T
// threads store theirs in workgroup arrays sv and si, then pairs fold
// (T / 2, T / 4, ... 1 threads, a barrier between levels); the best is left
// in element 0, read after the closing barrier.
inline void foldBest(Builder& b, int32_t sv, int32_t si, int64_t T, V v, V i) {
  V tid = b.local();
  b.sharedStore(sv, tid, v);
  b.sharedStore(si, tid, i);
  for (int64_t half = T / 2; half >= 1; half /= 2) {
    b.barrier();
    b.ifThen(b.lt(tid, b.i32(half)), [&] {
      V other = b.add(tid, b.i32(half));
      V ov = b.sharedLoad(sv, other), oi = b.sharedLoad(si, other);
      V mv = b.sharedLoad(sv, tid), mi = b.sharedLoad(si, tid);
      b.ifThen(betterCandidate(b, ov, oi, mv, mi), [&] {
        b.sharedStore(sv, tid, ov);
        b.sharedStore(si, tid, oi);
      });
    });
  }
  b.barrier();
}

}  // namespace poot::gen

// The reference interpreter: binds and checks the parameters, then evaluates
// the eqns in execution order, one evaluator per op class. Float math is IEEE
// f32 (two-byte floats are widened to f32, computed, and each op's result is
// rounded to its dtype, round-to-nearest-even); integer math is int64,
// wrapped to the result dtype. Reductions, dot products and softmax sums run
// sequentially in increasing index with an f32 (or int64) accumulator, and
// products are rounded before they are added (no fused multiply-add). Data
// movement copies element bytes, so it is exact for every dtype. Index errors
// (Gather, ScatterUpdate, paged read words, integer division by zero) are
// ErrorKind::Range errors at the eqn. docs/oracle.md states every op's rule.
#include "oracle/interp.h"

#include "ir/budget.h"
#include "oracle/sample.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

namespace poot {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---------------------------------------------------------------- elements

float loadF(const Tensor& t, int64_t i) {
  const uint8_t* p = t.bytes.data() + size_t(i) * size_t(dtypeBytes(t.dtype()));
  switch (t.dtype()) {
    case DType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::F16: { uint16_t v; std::memcpy(&v, p, 2); return halfToFloat(v); }
    case DType::BF16: { uint16_t v; std::memcpy(&v, p, 2); return bf16ToFloat(v); }
    default: return float(t.get(i));
  }
}

int64_t loadI(const Tensor& t, int64_t i) {
  const uint8_t* p = t.bytes.data() + size_t(i) * size_t(dtypeBytes(t.dtype()));
  switch (t.dtype()) {
    case DType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::I64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case DType::Bool: return *p ? 1 : 0;
    default: return int64_t(t.get(i));
  }
}

// Rounds an f32 result to a float dtype (RNE).
void storeF(Tensor& t, int64_t i, float v) {
  uint8_t* p = t.bytes.data() + size_t(i) * size_t(dtypeBytes(t.dtype()));
  uint16_t h;
  switch (t.dtype()) {
    case DType::F32: std::memcpy(p, &v, 4); return;
    case DType::F16: h = floatToHalf(v); std::memcpy(p, &h, 2); return;
    case DType::BF16: h = floatToBf16(v); std::memcpy(p, &h, 2); return;
    default: t.set(i, v); return;  // float to integer: truncate, saturate, NaN -> 0
  }
}

// Wraps an int64 result to an integer dtype (bool: v != 0; a float dtype
// rounds the value through f32).
void storeI(Tensor& t, int64_t i, int64_t v) {
  uint8_t* p = t.bytes.data() + size_t(i) * size_t(dtypeBytes(t.dtype()));
  switch (t.dtype()) {
    case DType::I32: { int32_t w = int32_t(uint32_t(uint64_t(v))); std::memcpy(p, &w, 4); return; }
    case DType::I64: std::memcpy(p, &v, 8); return;
    case DType::Bool: *p = v != 0; return;
    default: storeF(t, i, float(v)); return;
  }
}

std::vector<float> asF32(const Tensor& t) {
  std::vector<float> out(size_t(t.size()));
  if (t.dtype() == DType::F32) {
    if (!out.empty()) std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  } else {
    for (int64_t i = 0; i < t.size(); ++i) out[size_t(i)] = loadF(t, i);
  }
  return out;
}

std::vector<int64_t> asI64(const Tensor& t) {
  std::vector<int64_t> out(size_t(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) out[size_t(i)] = loadI(t, i);
  return out;
}

Tensor fromF32(const Type& type, const std::vector<float>& v) {
  Tensor t(type);
  for (int64_t i = 0; i < t.size(); ++i) storeF(t, i, v[size_t(i)]);
  return t;
}

Tensor fromI64(const Type& type, const std::vector<int64_t>& v) {
  Tensor t(type);
  for (int64_t i = 0; i < t.size(); ++i) storeI(t, i, v[size_t(i)]);
  return t;
}

// ---------------------------------------------------------------- indexing

using Strides = std::vector<int64_t>;

Strides rowMajor(const Shape& s) {
  Strides st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

// The strides of a tensor of shape `s` read as if broadcast to `out`
// (right-aligned, 0 along broadcast axes).
Strides bcastStrides(const Shape& s, const Shape& out) {
  Strides st(out.size(), 0), own = rowMajor(s);
  size_t lead = out.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] != 1) st[lead + d] = own[d];
  return st;
}

// Visits every element of shape `out` in row-major order as f(i, off), where
// off[j] is the sum over axes of index * strides[j] for operand j. The
// offsets are kept up to date by an odometer, so the cost is O(1) a step.
template <size_t N, class F>
void walk(const Shape& out, const std::array<Strides, N>& strides, F f) {
  size_t rank = out.size();
  int64_t n = numel(out);
  std::vector<int64_t> idx(rank, 0);
  std::array<int64_t, N> off{};
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (size_t d = rank; d-- > 0;) {
      for (size_t j = 0; j < N; ++j) off[j] += strides[j][d];
      if (++idx[d] < out[d]) break;
      for (size_t j = 0; j < N; ++j) off[j] -= strides[j][d] * out[d];
      idx[d] = 0;
    }
  }
}

// Sizes before, at and after an axis: a tensor seen as [outer, n, inner].
struct Split3 {
  int64_t outer = 1, n = 1, inner = 1;
};
Split3 splitAt(const Shape& s, int64_t axis) {
  Split3 r;
  for (int64_t d = 0; d < int64_t(s.size()); ++d) (d < axis ? r.outer : d == axis ? r.n : r.inner) *= s[size_t(d)];
  return r;
}

// Copies `count` consecutive elements (src and dst share the dtype).
void copyElems(Tensor& dst, int64_t di, const Tensor& src, int64_t si, int64_t count) {
  size_t es = size_t(dtypeBytes(src.dtype()));
  std::memcpy(dst.bytes.data() + size_t(di) * es, src.bytes.data() + size_t(si) * es, size_t(count) * es);
}

// ---------------------------------------------------------------- context

// What an evaluator sees: the eqn, its operand tensors and its result types;
// it fills `out` (one tensor per result) or returns an error.
struct Ctx {
  const Eqn& e;
  std::string name;  // the first result's, to name the eqn in errors
  std::vector<const Tensor*> in;
  std::vector<Type> types;
  std::vector<Tensor> out;

  const Tensor& x(size_t i) const { return *in[i]; }
  int64_t attrInt(std::string_view n) const { return std::get<int64_t>(*e.attr(n)); }
  double attrFloat(std::string_view n) const { return std::get<double>(*e.attr(n)); }
  const std::string& attrSym(std::string_view n) const { return std::get<std::string>(*e.attr(n)); }
  bool has(std::string_view n) const { return e.attr(n) != nullptr; }
  int64_t axis(int64_t rank) const { return *normalizeAxis(attrInt("axis"), rank); }
  // "Gather %y: index 9 is outside [0, 8)", located at the eqn's op name.
  Error range(const std::string& msg) const {
    return makeError(ErrorKind::Range, e.loc, std::string(opName(e.op)) + " %" + name + ": " + msg);
  }
};

std::string interval(int64_t n) { return "[0, " + std::to_string(n) + ")"; }

// ---------------------------------------------------------------- data movement

Status evalData(Ctx& c) {
  const Type& rt = c.types[0];
  Tensor r(rt);
  switch (c.e.op) {
    case Op::Iota: {
      Split3 s = splitAt(rt.shape, c.axis(rt.rank()));
      for (int64_t i = 0; i < r.size(); ++i) storeI(r, i, (i / s.inner) % s.n);
      break;
    }
    case Op::Constant: {
      const auto& vals = std::get<std::vector<double>>(*c.e.attr("value"));
      for (int64_t i = 0; i < r.size(); ++i) r.set(i, vals.size() == 1 ? vals[0] : vals[size_t(i)]);
      break;
    }
    case Op::Reshape:
      r.bytes = c.x(0).bytes;
      break;
    case Op::Broadcast:
    case Op::Transpose:
    case Op::Slice:
    case Op::DynamicSlice: {
      // One strided read of x per result element, from a base offset.
      const Tensor& x = c.x(0);
      Strides st = rowMajor(x.shape());
      int64_t base = 0;
      if (c.e.op == Op::Broadcast) {
        st = bcastStrides(x.shape(), rt.shape);
      } else if (c.e.op == Op::Transpose) {
        const auto& perm = std::get<std::vector<int64_t>>(*c.e.attr("perm"));
        Strides own = st;
        for (size_t d = 0; d < perm.size(); ++d) st[d] = own[size_t(perm[d])];
      } else {
        int64_t a = c.axis(x.type.rank()), start;
        if (c.e.op == Op::Slice) {
          start = c.attrInt("start");
        } else {  // XLA rule: the start is clamped so the window fits
          start = std::clamp<int64_t>(loadI(c.x(1), 0), 0, x.shape()[size_t(a)] - c.attrInt("size"));
        }
        base = start * st[size_t(a)];
      }
      walk<1>(rt.shape, {st}, [&](int64_t i, auto& off) { copyElems(r, i, x, base + off[0], 1); });
      break;
    }
    case Op::Concat: {
      int64_t a = c.axis(rt.rank());
      Split3 o = splitAt(rt.shape, a);
      int64_t at = 0;  // running offset along the axis
      for (const Tensor* x : c.in) {
        Split3 s = splitAt(x->shape(), a);
        for (int64_t i = 0; i < s.outer; ++i) copyElems(r, (i * o.n + at) * o.inner, *x, i * s.n * s.inner, s.n * s.inner);
        at += s.n;
      }
      break;
    }
    case Op::Gather: {
      const Tensor& table = c.x(0);
      Split3 s = splitAt(table.shape(), c.axis(table.type.rank()));
      std::vector<int64_t> idx = asI64(c.x(1));
      int64_t n = int64_t(idx.size());
      for (int64_t j = 0; j < n; ++j)
        if (idx[size_t(j)] < 0 || idx[size_t(j)] >= s.n)
          return c.range("index " + std::to_string(idx[size_t(j)]) + " is outside " + interval(s.n));
      for (int64_t o = 0; o < s.outer; ++o)
        for (int64_t j = 0; j < n; ++j) copyElems(r, (o * n + j) * s.inner, table, (o * s.n + idx[size_t(j)]) * s.inner, s.inner);
      break;
    }
    case Op::DynamicUpdateSlice: {
      const Tensor &x = c.x(0), &u = c.x(1);
      int64_t a = c.axis(x.type.rank());
      Strides st = rowMajor(x.shape());
      int64_t start = std::clamp<int64_t>(loadI(c.x(2), 0), 0, x.shape()[size_t(a)] - u.shape()[size_t(a)]);
      r.bytes = x.bytes;
      walk<1>(u.shape(), {st}, [&](int64_t i, auto& off) { copyElems(r, start * st[size_t(a)] + off[0], u, i, 1); });
      break;
    }
    case Op::ScatterUpdate: {
      const Tensor &x = c.x(0), &u = c.x(2);
      std::vector<int64_t> idx = asI64(c.x(1));
      int64_t rows = x.shape()[0], row = x.size() / rows;
      r.bytes = x.bytes;
      for (size_t j = 0; j < idx.size(); ++j) {  // in order, so a later row wins
        if (idx[j] == -1) continue;
        if (idx[j] < 0 || idx[j] >= rows)
          return c.range("index " + std::to_string(idx[j]) + " is outside " + interval(rows) + " and is not -1");
        copyElems(r, idx[j] * row, u, int64_t(j) * row, row);
      }
      break;
    }
    case Op::Convert: {
      const Tensor& x = c.x(0);
      for (int64_t i = 0; i < r.size(); ++i) {
        if (isFloat(x.dtype()))
          storeF(r, i, loadF(x, i));
        else
          storeI(r, i, loadI(x, i));
      }
      break;
    }
    case Op::IndexGuard: {
      int64_t lo = c.attrInt("lo"), hi = c.attrInt("hi");
      bool inRange = true;
      for (int64_t i = 0; i < r.size(); ++i) {
        int64_t v = loadI(c.x(0), i);
        inRange = inRange && v >= lo && v <= hi;
        storeI(r, i, std::clamp(v, lo, hi));
      }
      Tensor w(c.types[1]);
      w.bytes[0] = inRange;
      c.out = {std::move(r), std::move(w)};
      return ok();
    }
    default:
      return makeError(ErrorKind::Verify, c.e.loc, std::string("oracle: no data evaluator for ") + opName(c.e.op));
  }
  c.out = {std::move(r)};
  return ok();
}

// ---------------------------------------------------------------- elementwise

float unaryF(Op op, float x) {
  switch (op) {
    case Op::Exp: return std::exp(x);
    case Op::Log: return std::log(x);
    case Op::Neg: return -x;
    case Op::Sqrt: return std::sqrt(x);
    case Op::Rsqrt: return 1.0f / std::sqrt(x);
    case Op::Recip: return 1.0f / x;
    case Op::Tanh: return std::tanh(x);
    case Op::Sin: return std::sin(x);
    case Op::Cos: return std::cos(x);
    case Op::Abs: return std::fabs(x);
    case Op::Erf: return std::erf(x);
    case Op::Sigmoid: return 1.0f / (1.0f + std::exp(-x));
    default: return kNaN;
  }
}

int64_t unaryI(Op op, int64_t x) {
  uint64_t u = uint64_t(x);
  switch (op) {
    case Op::Neg: return int64_t(0 - u);
    case Op::Abs: return x < 0 ? int64_t(0 - u) : x;
    case Op::Not: return x == 0;
    default: return 0;
  }
}

Status evalUnary(Ctx& c) {
  const Tensor& x = c.x(0);
  Tensor r(c.types[0]);
  for (int64_t i = 0; i < r.size(); ++i) {
    if (isFloat(x.dtype()))
      storeF(r, i, unaryF(c.e.op, loadF(x, i)));
    else
      storeI(r, i, unaryI(c.e.op, loadI(x, i)));
  }
  c.out = {std::move(r)};
  return ok();
}

float binaryF(Op op, float a, float b) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return a * b;
    case Op::Div: return a / b;
    case Op::Max: return std::isnan(a) || std::isnan(b) ? kNaN : (a < b ? b : a);
    case Op::Min: return std::isnan(a) || std::isnan(b) ? kNaN : (b < a ? b : a);
    case Op::Pow: return std::pow(a, b);
    case Op::Lt: return a < b;
    case Op::Le: return a <= b;
    case Op::Gt: return a > b;
    case Op::Ge: return a >= b;
    case Op::Eq: return a == b;
    case Op::Ne: return a != b;
    default: return kNaN;
  }
}

// Wrapping int64 arithmetic; false on division by zero.
bool binaryI(Op op, int64_t a, int64_t b, int64_t& r) {
  uint64_t ua = uint64_t(a), ub = uint64_t(b);
  switch (op) {
    case Op::Add: r = int64_t(ua + ub); return true;
    case Op::Sub: r = int64_t(ua - ub); return true;
    case Op::Mul: r = int64_t(ua * ub); return true;
    case Op::Div:
      if (b == 0) return false;
      r = (b == -1) ? int64_t(0 - ua) : a / b;  // truncates toward zero; MIN / -1 wraps
      return true;
    case Op::Max: r = std::max(a, b); return true;
    case Op::Min: r = std::min(a, b); return true;
    case Op::And: r = a && b; return true;
    case Op::Or: r = a || b; return true;
    case Op::Lt: r = a < b; return true;
    case Op::Le: r = a <= b; return true;
    case Op::Gt: r = a > b; return true;
    case Op::Ge: r = a >= b; return true;
    case Op::Eq: r = a == b; return true;
    case Op::Ne: r = a != b; return true;
    default: r = 0; return true;
  }
}

// Binary ops and comparisons, broadcasting numpy-style. Compare results are
// 0/1 and land in a bool tensor through the same stores.
Status evalBinary(Ctx& c) {
  const Tensor &a = c.x(0), &b = c.x(1);
  const Shape& os = c.types[0].shape;
  Tensor r(c.types[0]);
  std::array<Strides, 2> st{bcastStrides(a.shape(), os), bcastStrides(b.shape(), os)};
  if (isFloat(a.dtype())) {
    std::vector<float> va = asF32(a), vb = asF32(b);
    walk<2>(os, st, [&](int64_t i, auto& off) { storeF(r, i, binaryF(c.e.op, va[size_t(off[0])], vb[size_t(off[1])])); });
  } else {
    std::vector<int64_t> va = asI64(a), vb = asI64(b);
    bool divZero = false;
    walk<2>(os, st, [&](int64_t i, auto& off) {
      int64_t v;
      if (!binaryI(c.e.op, va[size_t(off[0])], vb[size_t(off[1])], v)) divZero = true, v = 0;
      storeI(r, i, v);
    });
    if (divZero) return c.range("integer division by zero");
  }
  c.out = {std::move(r)};
  return ok();
}

Status evalSelect(Ctx& c) {
  const Shape& os = c.types[0].shape;
  Tensor r(c.types[0]);
  std::array<Strides, 3> st{bcastStrides(c.x(0).shape(), os), bcastStrides(c.x(1).shape(), os),
                            bcastStrides(c.x(2).shape(), os)};
  walk<3>(os, st, [&](int64_t i, auto& off) {
    bool cond = c.x(0).bytes[size_t(off[0])] != 0;
    copyElems(r, i, cond ? c.x(1) : c.x(2), cond ? off[1] : off[2], 1);
  });
  c.out = {std::move(r)};
  return ok();
}

// ---------------------------------------------------------------- reductions

Status evalReduce(Ctx& c) {
  const Tensor& x = c.x(0);
  Split3 s = splitAt(x.shape(), c.axis(x.type.rank()));
  Tensor r(c.types[0]);
  bool isF = isFloat(x.dtype());
  std::vector<float> xf = isF ? asF32(x) : std::vector<float>();
  std::vector<int64_t> xi = isF ? std::vector<int64_t>() : asI64(x);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t in = 0; in < s.inner; ++in) {
      int64_t at = o * s.n * s.inner + in, dst = o * s.inner + in;
      if (isF) {
        float acc = xf[size_t(at)];
        for (int64_t j = 1; j < s.n; ++j) {
          float v = xf[size_t(at + j * s.inner)];
          if (c.e.op == Op::ReduceSum) acc += v;
          else if (std::isnan(acc) || std::isnan(v)) acc = kNaN;
          else acc = c.e.op == Op::ReduceMax ? (v > acc ? v : acc) : (v < acc ? v : acc);
        }
        storeF(r, dst, acc);
      } else {
        int64_t acc = xi[size_t(at)];
        for (int64_t j = 1; j < s.n; ++j) {
          int64_t v = xi[size_t(at + j * s.inner)];
          acc = c.e.op == Op::ReduceSum ? int64_t(uint64_t(acc) + uint64_t(v))
                : c.e.op == Op::ReduceMax ? std::max(acc, v) : std::min(acc, v);
        }
        storeI(r, dst, acc);
      }
    }
  c.out = {std::move(r)};
  return ok();
}

// ---------------------------------------------------------------- contractions

// [..., m, k] x [..., k, n] (or b [..., n, k] when `transposed`) with
// broadcast batch axes; for each result element the k products are summed in
// increasing k in an f32 (int64) accumulator.
template <class T>
void matmul(const std::vector<T>& a, const std::vector<T>& b, std::vector<T>& out, const Shape& as, const Shape& bs,
            const Shape& os, bool transposed) {
  int64_t m = as[as.size() - 2], k = as.back(), n = os.back();
  Shape batch(os.begin(), os.end() - 2);
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  std::vector<T> bt(size_t(k * n));  // one batch of b as [n, k]
  walk<2>(batch, {bcastStrides(ab, batch), bcastStrides(bb, batch)}, [&](int64_t i, auto& off) {
    const T* pa = a.data() + off[0] * m * k;
    const T* pb = b.data() + off[1] * k * n;
    if (transposed)
      std::copy(pb, pb + k * n, bt.begin());
    else
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t j = 0; j < n; ++j) bt[size_t(j * k + kk)] = pb[kk * n + j];
    T* po = out.data() + i * m * n;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        const T *x = pa + r * k, *y = bt.data() + j * k;
        for (int64_t kk = 0; kk < k; ++kk) {
          if constexpr (std::is_same_v<T, float>) {
            float p = x[kk] * y[kk];
            acc += p;
          } else {
            acc = T(uint64_t(acc) + uint64_t(x[kk]) * uint64_t(y[kk]));
          }
        }
        po[r * n + j] = acc;
      }
  });
}

Status evalMatMul(Ctx& c) {
  const Tensor &a = c.x(0), &b = c.x(1);
  const Type& rt = c.types[0];
  if (isFloat(a.dtype())) {
    std::vector<float> out(size_t(numel(rt.shape)));
    matmul(asF32(a), asF32(b), out, a.shape(), b.shape(), rt.shape, flagAttr(c.e.attrs, "transpose_b"));
    c.out = {fromF32(rt, out)};
  } else {
    std::vector<int64_t> out(size_t(numel(rt.shape)));
    matmul(asI64(a), asI64(b), out, a.shape(), b.shape(), rt.shape, flagAttr(c.e.attrs, "transpose_b"));
    c.out = {fromI64(rt, out)};
  }
  return ok();
}

// The selection order of TopK and BlockTopK: larger first, NaN above
// everything, ties (and NaNs among themselves) by lower index.
template <class T>
bool ranksBefore(T a, int64_t ia, T b, int64_t ib) {
  if constexpr (std::is_floating_point_v<T>) {
    bool na = std::isnan(a), nb = std::isnan(b);
    if (na != nb) return na;
    if (na) return ia < ib;
  }
  if (a != b) return a > b;
  return ia < ib;
}

// Sorts the first `take` of `ids` by rank in `val`.
template <class T>
void topOf(std::vector<int64_t>& ids, size_t take, const T* val) {
  std::partial_sort(ids.begin(), ids.begin() + ptrdiff_t(take), ids.end(),
                    [&](int64_t x, int64_t y) { return ranksBefore(val[x], x, val[y], y); });
}

Status evalTopK(Ctx& c) {
  const Tensor& x = c.x(0);
  int64_t n = x.shape().back(), k = c.attrInt("k"), rows = x.size() / n;
  Tensor vals(c.types[0]), idx(c.types[1]);
  std::vector<float> xf = isFloat(x.dtype()) ? asF32(x) : std::vector<float>();
  std::vector<int64_t> xi = isFloat(x.dtype()) ? std::vector<int64_t>() : asI64(x);
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(ids.begin(), ids.end(), 0);
    if (isFloat(x.dtype())) topOf(ids, size_t(k), xf.data() + r * n);
    else topOf(ids, size_t(k), xi.data() + r * n);
    for (int64_t j = 0; j < k; ++j) {
      copyElems(vals, r * k + j, x, r * n + ids[size_t(j)], 1);
      storeI(idx, r * k + j, ids[size_t(j)]);
    }
  }
  c.out = {std::move(vals), std::move(idx)};
  return ok();
}

// Each row of logits' token under its row's parameters, after its run's
// penalties (oracle/sample.h).
Status evalSample(Ctx& c) {
  const Tensor& x = c.x(0);
  const int64_t n = x.shape().back(), rows = x.size() / n;
  std::vector<float> logits = asF32(x), temperature = asF32(c.x(1)), topP = asF32(c.x(3)), minP = asF32(c.x(4)),
                     uniform = asF32(c.x(5)), repetition = asF32(c.x(6)), amounts = asF32(c.x(8));
  std::vector<int64_t> topK = asI64(c.x(2)), seenWide = asI64(c.x(7));
  std::vector<int32_t> seen(seenWide.begin(), seenWide.end());
  const int64_t runs = c.x(6).size(), width = c.x(7).shape().back(), perRun = rows / runs;
  Tensor out(c.types[0]);
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const size_t list = size_t(r / perRun), at = list * size_t(width);
    std::copy(logits.begin() + r * n, logits.begin() + (r + 1) * n, row.begin());
    applyPenalties(row, repetition[list], std::span<const int32_t>(seen).subspan(at, size_t(width)),
                   std::span<const float>(amounts).subspan(at, size_t(width)));
    SampleParams p{temperature[size_t(r)], int32_t(topK[size_t(r)]), topP[size_t(r)], minP[size_t(r)], uniform[size_t(r)]};
    storeI(out, r, sampleToken(row, p));
  }
  c.out = {std::move(out)};
  return ok();
}

// ---------------------------------------------------------------- formed ops

// The score transform both attention ops share: scale, then the optional
// softcap tanh(s / c) * c, in f32.
struct ScoreXform {
  float scale, cap;
  bool capped;
  explicit ScoreXform(const Ctx& c)
      : scale(float(c.attrFloat("scale"))), cap(c.has("softcap") ? float(c.attrFloat("softcap")) : 0.0f),
        capped(c.has("softcap")) {}
  float operator()(float dot) const {
    float s = dot * scale;
    return capped ? std::tanh(s / cap) * cap : s;
  }
};

// One query row of softmax attention over the keys listed in `keys` (in
// increasing t). score(t) is the final score; value(t) the value row. M is the
// maximum score (NaN if any score is NaN); a key scoring -inf adds exactly
// zero weight and its value row is not read; the weighted sum and the weight
// sum run in the order of `keys` and are divided at the end, so a row with no
// key, or no finite score, is 0/0 = NaN.
template <class Score, class Value>
void attendRow(const std::vector<int64_t>& keys, Score score, Value value, int64_t dv, float* out,
               std::vector<float>& s, std::vector<float>& acc) {
  s.resize(keys.size());
  float m = -kInf;
  bool nan = false;
  for (size_t j = 0; j < keys.size(); ++j) {
    s[j] = score(keys[j]);
    if (std::isnan(s[j])) nan = true;
    else if (s[j] > m) m = s[j];
  }
  if (nan) m = kNaN;
  acc.assign(size_t(dv), 0.0f);
  float l = 0;
  for (size_t j = 0; j < keys.size(); ++j) {
    if (s[j] == -kInf) continue;
    float w = std::exp(s[j] - m);
    l += w;
    const float* v = value(keys[j]);
    for (int64_t d = 0; d < dv; ++d) {
      float p = w * v[d];
      acc[size_t(d)] += p;
    }
  }
  for (int64_t d = 0; d < dv; ++d) out[d] = acc[size_t(d)] / l;
}

float dot(const float* a, const float* b, int64_t n, float acc = 0) {
  for (int64_t d = 0; d < n; ++d) {
    float p = a[d] * b[d];
    acc += p;
  }
  return acc;
}

Status evalAttention(Ctx& c) {
  const std::string& key = c.attrSym("key");
  bool split = key == "split", paged = key == "paged";
  bool masked = c.attrSym("mask") == "additive", causal = c.attrSym("mask") == "causal";
  bool live = c.attrSym("bound") == "live";
  size_t i = 0;
  size_t iq = i++, ik = i++, iks = split ? i++ : 0, iv = i++, iread = paged ? i++ : 0;
  size_t imask = masked || causal ? i++ : 0, ilen = live ? i++ : 0;
  const Shape& qs = c.x(iq).shape();
  int64_t B = qs[0], Hq = qs[1], Lq = qs[2], Dk = qs[3], nrep = c.attrInt("n_rep"), Hkv = Hq / nrep;
  const Shape &ks = c.x(ik).shape(), &vs = c.x(iv).shape();
  int64_t Lk = paged ? c.x(iread).shape()[1] : ks[2], Dv = vs.back(), S = paged ? ks[0] : 0;
  int64_t Ds = split ? c.x(iks).shape()[3] : 0, Dh = Dk - Ds;  // shared and per-head key widths
  int64_t Hm = masked ? c.x(imask).shape()[1] : 0;
  std::vector<float> q = asF32(c.x(iq)), k = asF32(c.x(ik)), v = asF32(c.x(iv));
  std::vector<float> kshared = split ? asF32(c.x(iks)) : std::vector<float>();
  std::vector<float> mask = masked ? asF32(c.x(imask)) : std::vector<float>();
  std::vector<int64_t> read = paged ? asI64(c.x(iread)) : std::vector<int64_t>();
  std::vector<int64_t> len = live ? asI64(c.x(ilen)) : std::vector<int64_t>();
  // mask=causal: key t is visible to row r of batch row b iff t <= p and,
  // with a window, p - t < window (p = qpos[b, r]); a hidden key scores -inf
  // whatever its dot, as the additive 0 / -inf mask gives for every finite
  // score.
  std::vector<int64_t> qpos = causal ? asI64(c.x(imask)) : std::vector<int64_t>();
  int64_t window = causal && c.has("window") ? c.attrInt("window") : 0;
  ScoreXform xf(c);
  std::vector<float> out(size_t(B * Hq * Lq * Dv)), s, acc;
  std::vector<int64_t> keys;
  for (int64_t b = 0; b < B; ++b) {
    int64_t bound = live ? std::clamp<int64_t>(len[size_t(b)], 0, Lk) : Lk;
    keys.resize(size_t(bound));
    std::iota(keys.begin(), keys.end(), 0);
    for (int64_t t = 0; paged && t < bound; ++t)
      if (int64_t w = read[size_t(b * Lk + t)]; w < 0 || w >= S)
        return c.range("read word " + std::to_string(w) + " of row " + std::to_string(b) + ", key " +
                       std::to_string(t) + " is outside the pool " + interval(S));
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t g = h / nrep;
      // Row offsets of key t of (b, g): into k (width Dh), k_shared (Ds), v (Dv).
      auto kRow = [&](int64_t t) { return paged ? (read[size_t(b * Lk + t)] * Hkv + g) : ((b * Hkv + g) * Lk + t); };
      for (int64_t r = 0; r < Lq; ++r) {
        const float* qr = q.data() + ((b * Hq + h) * Lq + r) * Dk;
        const float* mr = masked ? mask.data() + ((b * Hm + (Hm == 1 ? 0 : h)) * Lq + r) * Lk : nullptr;
        int64_t p = causal ? qpos[size_t(b * Lq + r)] : 0;
        auto score = [&](int64_t t) {
          if (causal && (t > p || (window > 0 && p - t >= window))) return -kInf;
          float d = dot(qr, k.data() + kRow(t) * Dh, Dh);
          if (split) d = dot(qr + Dh, kshared.data() + (b * Lk + t) * Ds, Ds, d);
          float sc = xf(d);
          return masked ? sc + mr[t] : sc;
        };
        auto value = [&](int64_t t) { return v.data() + kRow(t) * Dv; };
        attendRow(keys, score, value, Dv, out.data() + ((b * Hq + h) * Lq + r) * Dv, s, acc);
      }
    }
  }
  c.out = {fromF32(c.types[0], out)};
  return ok();
}

Status evalSelectedAttention(Ctx& c) {
  const Shape &qs = c.x(0).shape(), &ks = c.x(1).shape(), &is = c.x(3).shape();
  int64_t B = qs[0], Hq = qs[1], Lq = qs[2], Dk = qs[3], nrep = c.attrInt("n_rep"), Hkv = Hq / nrep;
  int64_t Lk = ks[2], Dv = c.x(2).shape()[3], K = is[2], block = c.attrInt("block"), NB = Lk / block;
  std::vector<float> q = asF32(c.x(0)), k = asF32(c.x(1)), v = asF32(c.x(2));
  std::vector<int64_t> ids = asI64(c.x(3)), qpos = asI64(c.x(4));
  ScoreXform xf(c);
  std::vector<float> out(size_t(B * Hq * Lq * Dv)), s, acc;
  std::vector<int64_t> keys;
  std::vector<char> chosen(static_cast<size_t>(NB));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < Lq; ++r) {
      int64_t p = qpos[size_t(b * Lq + r)];
      std::fill(chosen.begin(), chosen.end(), 0);
      for (int64_t j = 0; j < K; ++j)
        if (int64_t id = ids[size_t((b * Lq + r) * K + j)]; id >= 0 && id < NB) chosen[size_t(id)] = 1;
      keys.clear();
      for (int64_t t = 0; t < Lk && t <= p; ++t)
        if (chosen[size_t(t / block)] || t / block == p / block) keys.push_back(t);
      for (int64_t h = 0; h < Hq; ++h) {
        int64_t g = h / nrep;
        const float* qr = q.data() + ((b * Hq + h) * Lq + r) * Dk;
        auto score = [&](int64_t t) { return xf(dot(qr, k.data() + ((b * Hkv + g) * Lk + t) * Dk, Dk)); };
        auto value = [&](int64_t t) { return v.data() + ((b * Hkv + g) * Lk + t) * Dv; };
        attendRow(keys, score, value, Dv, out.data() + ((b * Hq + h) * Lq + r) * Dv, s, acc);
      }
    }
  c.out = {fromF32(c.types[0], out)};
  return ok();
}

// Rotary embedding: x's last axis holds D/2 pairs, (j, D/2 + j) for style
// half, (2j, 2j + 1) for interleaved; cos and sin broadcast over the pairs.
Status evalRope(Ctx& c) {
  const Tensor& x = c.x(0);
  int64_t D = x.shape().back(), H = D / 2;
  bool half = c.attrSym("style") == "half";
  Shape hs = x.shape();
  hs.back() = H;
  std::vector<float> xv = asF32(x), cv = asF32(c.x(1)), sv = asF32(c.x(2));
  std::vector<float> out(xv.size());
  walk<2>(hs, {bcastStrides(c.x(1).shape(), hs), bcastStrides(c.x(2).shape(), hs)}, [&](int64_t i, auto& off) {
    int64_t row = i / H, j = i % H;
    int64_t i1 = row * D + (half ? j : 2 * j), i2 = row * D + (half ? H + j : 2 * j + 1);
    float x1 = xv[size_t(i1)], x2 = xv[size_t(i2)], co = cv[size_t(off[0])], si = sv[size_t(off[1])];
    float a = x1 * co, b = x2 * si, d = x2 * co, e = x1 * si;
    out[size_t(i1)] = a - b;
    out[size_t(i2)] = d + e;
  });
  c.out = {fromF32(c.types[0], out)};
  return ok();
}

// Per row (b, i): the k best completed blocks j < qpos / block by score
// (TopK order), -1 past the number of candidates.
Status evalBlockTopK(Ctx& c) {
  const Shape& ss = c.x(0).shape();
  int64_t rows = ss[0] * ss[1], NB = ss[2], k = c.attrInt("k"), block = c.attrInt("block");
  std::vector<float> sc = asF32(c.x(0));
  std::vector<int64_t> qpos = asI64(c.x(1));
  Tensor r(c.types[0]);
  std::vector<int64_t> ids;
  for (int64_t row = 0; row < rows; ++row) {
    int64_t own = qpos[size_t(row)] / block, n = std::clamp<int64_t>(own, 0, NB);
    ids.resize(size_t(n));
    std::iota(ids.begin(), ids.end(), 0);
    size_t take = size_t(std::min(k, n));
    topOf(ids, take, sc.data() + row * NB);
    for (int64_t j = 0; j < k; ++j) storeI(r, row * k + j, size_t(j) < take ? ids[size_t(j)] : -1);
  }
  c.out = {std::move(r)};
  return ok();
}

// RoutedExperts, per row x of h: the router's logits in f32 (x and the
// router widened; each a sequential dot), scored (softmax: exp(l - max) over
// their sequential sum; sigmoid), the k best by TopK's order (ranksBefore:
// larger first, equal scores to the lower expert), optionally divided by
// their sum, times scale. Then the selected experts in increasing expert
// index, each silu(x gate^T) * (x up^T) down^T in h's dtype (every dot and
// elementwise result rounded to it) times its weight rounded to h's dtype,
// added in that order. This is the dense primitive form's arithmetic: there
// an unselected expert adds its output times exactly zero, so skipping it
// gives the same bits whenever every expert's output is finite.
Status evalRoutedExperts(Ctx& c) {
  const Tensor& h = c.x(0);
  const DType dt = h.dtype();
  const int64_t H = h.shape().back(), rows = h.size() / H, E = c.attrInt("experts"), k = c.attrInt("k");
  const int64_t I = c.x(kRoutedFirstExpert).shape()[0];
  const bool softmax = c.attrSym("scoring") == "softmax", renormalize = flagAttr(c.e.attrs, "renormalize");
  const float scale = float(c.attrFloat("scale"));
  auto round = [dt](float v) {
    return dt == DType::F16 ? halfToFloat(floatToHalf(v)) : dt == DType::BF16 ? bf16ToFloat(floatToBf16(v)) : v;
  };
  std::vector<float> x = asF32(h), router = asF32(c.x(1));
  std::vector<std::vector<float>> weights(kRoutedPerExpert * size_t(E));  // widened when first selected
  auto weight = [&](int64_t e, size_t j) -> const float* {
    std::vector<float>& w = weights[size_t(e) * kRoutedPerExpert + j];
    if (w.empty()) w = asF32(c.x(kRoutedFirstExpert + size_t(e) * kRoutedPerExpert + j));
    return w.data();
  };
  std::vector<float> out(static_cast<size_t>(h.size())), score(static_cast<size_t>(E)), routing(static_cast<size_t>(E)),
      mid(static_cast<size_t>(I));
  std::vector<int64_t> ids(static_cast<size_t>(E));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * H;
    for (int64_t e = 0; e < E; ++e) score[size_t(e)] = dot(xr, router.data() + e * H, H);
    if (softmax) {
      float m = score[0], sum = 0;
      for (float s : score) m = std::isnan(m) || std::isnan(s) ? kNaN : (s > m ? s : m);
      for (float& s : score) {
        s = std::exp(s - m);
        sum += s;
      }
      for (float& s : score) s /= sum;
    } else {
      for (float& s : score) s = unaryF(Op::Sigmoid, s);
    }
    std::iota(ids.begin(), ids.end(), 0);
    topOf(ids, size_t(k), score.data());
    float total = 0;
    for (int64_t j = 0; j < k; ++j) total += score[size_t(ids[size_t(j)])];
    std::fill(routing.begin(), routing.end(), 0.0f);
    for (int64_t j = 0; j < k; ++j) {
      float w = score[size_t(ids[size_t(j)])];
      if (renormalize) w /= total;
      routing[size_t(ids[size_t(j)])] = round(w * scale);
    }
    std::sort(ids.begin(), ids.begin() + k);
    float* acc = out.data() + r * H;
    for (int64_t j = 0; j < k; ++j) {
      int64_t e = ids[size_t(j)];
      const float *gate = weight(e, 0), *up = weight(e, 1), *down = weight(e, 2);
      for (int64_t i = 0; i < I; ++i) {
        float g = round(dot(xr, gate + i * H, H)), u = round(dot(xr, up + i * H, H));
        float act = round(g * round(unaryF(Op::Sigmoid, g)));
        mid[size_t(i)] = round(act * u);
      }
      for (int64_t o = 0; o < H; ++o) {
        float y = round(round(dot(mid.data(), down + o * I, I)) * routing[size_t(e)]);
        acc[o] = j == 0 ? y : round(acc[o] + y);
      }
    }
  }
  c.out = {fromF32(c.types[0], out)};
  return ok();
}

Status evalEqn(Ctx& c) {
  switch (opInfo(c.e.op).cls) {
    case OpClass::Data: return evalData(c);
    case OpClass::Unary: return evalUnary(c);
    case OpClass::Binary:
    case OpClass::Compare: return evalBinary(c);
    case OpClass::Select: return evalSelect(c);
    case OpClass::Reduce: return evalReduce(c);
    case OpClass::Contract:
      switch (c.e.op) {
        case Op::MatMul: return evalMatMul(c);
        case Op::Sample: return evalSample(c);
        default: return evalTopK(c);
      }
    case OpClass::Formed:
      switch (c.e.op) {
        case Op::Attention: return evalAttention(c);
        case Op::SelectedAttention: return evalSelectedAttention(c);
        case Op::Rope: return evalRope(c);
        case Op::RoutedExperts: return evalRoutedExperts(c);
        default: return evalBlockTopK(c);
      }
  }
  return ok();
}

// ---------------------------------------------------------------- binding

Status bindParams(const Graph& g, const std::map<std::string, Tensor>& params, std::vector<Tensor>& values) {
  for (ValueId id : g.params) {
    const Value& p = g.value(id);
    std::string what = std::string(storageName(p.storage)) + " %" + p.name;
    auto it = params.find(p.name);
    if (it == params.end()) return makeError(ErrorKind::Bind, {}, what + " is not bound");
    const Tensor& t = it->second;
    if (t.type != p.type || t.bytes.size() != size_t(numel(p.type.shape)) * size_t(dtypeBytes(p.type.dtype)))
      return makeError(ErrorKind::Bind, {}, what + " is bound to " + t.type.str() + " but the graph declares " + p.type.str());
    if (p.storage == Storage::Slot)
      for (int64_t i = 0; i < t.size(); ++i)
        if (int64_t v = loadI(t, i); v < p.lo || v > p.hi)
          return makeError(ErrorKind::Range, {},
                           what + " has value " + std::to_string(v) + (t.type.rank() ? " at element " + std::to_string(i) : "") +
                               " outside its range [" + std::to_string(p.lo) + ", " + std::to_string(p.hi) + "]");
    values[size_t(id)] = t;
  }
  return ok();
}

// The bytes an evaluation holds at once: every value (parameters copied in),
// and the outputs and new states copied out.
int64_t evaluationBytes(const Graph& g) {
  auto bytesOf = [&](ValueId v) { return numel(g.type(v).shape) * dtypeBytes(g.type(v).dtype); };
  int64_t total = 0;
  for (ValueId p : g.params) total = addBytes(total, bytesOf(p));
  for (const Eqn& e : g.eqns)
    for (ValueId r : e.results) total = addBytes(total, bytesOf(r));
  for (const Export& o : g.outputs) total = addBytes(total, bytesOf(o.value));
  for (const StateOut& s : g.stateOuts) total = addBytes(total, bytesOf(s.value));
  return total;
}

}  // namespace

bool Evaluation::valid() const {
  return std::all_of(validations.begin(), validations.end(), [](const auto& kv) { return kv.second; });
}

Expected<Evaluation> evaluate(const Graph& g, const std::map<std::string, Tensor>& params) {
  if (auto s = checkHostBytes(evaluationBytes(g), "evaluating graph '" + g.name + "' (every value held at once)", Loc{g.loc.file});
      !s)
    return s.error();
  Evaluation ev;
  ev.values.resize(g.values.size());
  if (auto s = bindParams(g, params, ev.values); !s) return s.error();
  for (const Eqn& e : g.eqns) {
    Ctx c{e, g.value(e.results[0]).name, {}, {}, {}};
    for (ValueId o : e.operands) c.in.push_back(&ev.values[size_t(o)]);
    for (ValueId r : e.results) c.types.push_back(g.type(r));
    if (auto s = evalEqn(c); !s) return s.error();
    for (size_t j = 0; j < e.results.size(); ++j) ev.values[size_t(e.results[j])] = std::move(c.out[j]);
  }
  for (const Export& o : g.outputs) ev.outputs[g.value(o.value).name] = ev.values[size_t(o.value)];
  for (const StateOut& s : g.stateOuts) ev.states[g.value(s.state).name] = ev.values[size_t(s.value)];
  for (const Export& v : g.validations) ev.validations[g.value(v.value).name] = ev.values[size_t(v.value)].bytes.at(0) != 0;
  return ev;
}

}  // namespace poot

// The interval analysis of ranges.h: one forward sweep in eqn order with a
// transfer rule per op. Arithmetic is done in 128 bits and a result that
// leaves its dtype (the oracle wraps integers) becomes the dtype's whole
// range, so no rule can claim a bound that wrapping would break. Ops without
// a rule give their integer results the whole range of their dtype.
#include "analysis/ranges.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace poot {

namespace {

using I128 = __int128;

bool isIntegral(DType t) { return isInt(t) || t == DType::Bool; }

// [lo, hi] as an interval of dtype t, or the whole dtype when it does not fit.
Interval fit(I128 lo, I128 hi, DType t) {
  Interval whole = *dtypeRange(t);
  if (lo > hi || lo < whole.lo || hi > whole.hi) return whole;
  return Interval{int64_t(lo), int64_t(hi)};
}

Interval hull(Interval a, Interval b) { return Interval{std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }

// A comparison's 0/1 result: [1, 1] when always true, [0, 0] when never.
Interval decided(bool always, bool never) {
  if (always) return Interval{1, 1};
  if (never) return Interval{0, 0};
  return Interval{0, 1};
}

// Truncating integer division (the oracle's) over intervals; the divisor must
// not contain 0, and then the extremes are at the corners.
std::optional<Interval> divide(Interval a, Interval b, DType t) {
  if (b.lo <= 0 && b.hi >= 0) return std::nullopt;
  I128 c[4] = {I128(a.lo) / b.lo, I128(a.lo) / b.hi, I128(a.hi) / b.lo, I128(a.hi) / b.hi};
  return fit(*std::min_element(c, c + 4), *std::max_element(c, c + 4), t);
}

class Analysis {
 public:
  explicit Analysis(const Graph& g) : g_(g), r_(g.values.size()) {}

  std::vector<std::optional<Interval>> run() {
    for (ValueId p : g_.params) r_[size_t(p)] = param(g_.value(p));
    for (const Eqn& e : g_.eqns) eqn(e);
    return std::move(r_);
  }

 private:
  const Graph& g_;
  std::vector<std::optional<Interval>> r_;

  DType dtype(ValueId v) const { return g_.type(v).dtype; }
  // The interval of an operand; its dtype's whole range when unknown.
  Interval at(ValueId v) const {
    if (r_[size_t(v)]) return *r_[size_t(v)];
    auto whole = dtypeRange(dtype(v));
    return whole ? *whole : Interval{0, 0};
  }
  bool isValidation(ValueId v) const {
    return std::any_of(g_.validations.begin(), g_.validations.end(), [&](const Export& w) { return w.value == v; });
  }

  std::optional<Interval> param(const Value& v) const {
    if (!isIntegral(v.type.dtype)) return std::nullopt;
    if (v.storage == Storage::Slot) return fit(v.lo, v.hi, v.type.dtype);
    return dtypeRange(v.type.dtype);
  }

  void set(ValueId v, std::optional<Interval> i) {
    if (!isIntegral(dtype(v))) return;
    r_[size_t(v)] = i ? fit(i->lo, i->hi, dtype(v)) : *dtypeRange(dtype(v));
  }

  void eqn(const Eqn& e) {
    for (ValueId r : e.results) set(r, std::nullopt);  // the default: nothing known
    if (e.results.empty() || !isIntegral(dtype(e.results[0]))) {
      if (e.op == Op::TopK) set(e.results[1], Interval{0, g_.type(e.operands[0]).shape.back() - 1});
      return;
    }
    ValueId out = e.results[0];
    DType t = dtype(out);
    auto x = [&](size_t i) { return at(e.operands[i]); };
    auto integralOperand = [&](size_t i) { return isIntegral(dtype(e.operands[i])); };
    switch (e.op) {
      case Op::Iota: {
        const auto& shape = g_.type(out).shape;
        int64_t axis = *normalizeAxis(std::get<int64_t>(*e.attr("axis")), int64_t(shape.size()));
        set(out, Interval{0, shape[size_t(axis)] - 1});
        return;
      }
      case Op::Constant: {
        const auto& vals = std::get<std::vector<double>>(*e.attr("value"));
        if (vals.empty()) return;
        auto [lo, hi] = std::minmax_element(vals.begin(), vals.end());
        set(out, Interval{int64_t(*lo), int64_t(*hi)});
        return;
      }
      case Op::Reshape: case Op::Broadcast: case Op::Transpose: case Op::Slice: case Op::DynamicSlice:
      case Op::Gather: case Op::ReduceMax: case Op::ReduceMin:
        if (integralOperand(0)) set(out, x(0));
        return;
      case Op::Concat: {
        Interval h = x(0);
        for (size_t i = 1; i < e.operands.size(); ++i) h = hull(h, x(i));
        set(out, h);
        return;
      }
      case Op::DynamicUpdateSlice: set(out, hull(x(0), x(1))); return;
      case Op::ScatterUpdate: set(out, hull(x(0), x(2))); return;
      case Op::Convert: convert(out, e.operands[0]); return;
      case Op::Neg: set(out, fit(-I128(x(0).hi), -I128(x(0).lo), t)); return;
      case Op::Abs: {
        Interval a = x(0);
        I128 lo = a.lo >= 0 ? a.lo : a.hi <= 0 ? -I128(a.hi) : 0;
        set(out, fit(lo, std::max(-I128(a.lo), I128(a.hi)), t));
        return;
      }
      case Op::Not: set(out, Interval{1 - x(0).hi, 1 - x(0).lo}); return;
      case Op::Add: set(out, fit(I128(x(0).lo) + x(1).lo, I128(x(0).hi) + x(1).hi, t)); return;
      case Op::Sub: set(out, fit(I128(x(0).lo) - x(1).hi, I128(x(0).hi) - x(1).lo, t)); return;
      case Op::Mul: {
        Interval a = x(0), b = x(1);
        I128 c[4] = {I128(a.lo) * b.lo, I128(a.lo) * b.hi, I128(a.hi) * b.lo, I128(a.hi) * b.hi};
        set(out, fit(*std::min_element(c, c + 4), *std::max_element(c, c + 4), t));
        return;
      }
      case Op::Div: set(out, divide(x(0), x(1), t)); return;
      case Op::Max: set(out, Interval{std::max(x(0).lo, x(1).lo), std::max(x(0).hi, x(1).hi)}); return;
      case Op::Min: set(out, Interval{std::min(x(0).lo, x(1).lo), std::min(x(0).hi, x(1).hi)}); return;
      case Op::And: set(out, Interval{std::min(x(0).lo, x(1).lo), std::min(x(0).hi, x(1).hi)}); return;
      case Op::Or: set(out, Interval{std::max(x(0).lo, x(1).lo), std::max(x(0).hi, x(1).hi)}); return;
      case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: case Op::Eq: case Op::Ne:
        if (integralOperand(0)) set(out, compare(e.op, x(0), x(1)));
        return;
      case Op::Select: {
        Interval c = x(0);
        if (c.lo == 1) set(out, x(1));
        else if (c.hi == 0) set(out, x(2));
        else set(out, hull(x(1), x(2)));
        return;
      }
      case Op::ReduceSum: {
        const auto& shape = g_.type(e.operands[0]).shape;
        int64_t axis = *normalizeAxis(std::get<int64_t>(*e.attr("axis")), int64_t(shape.size()));
        I128 n = shape[size_t(axis)];
        set(out, fit(n * x(0).lo, n * x(0).hi, t));
        return;
      }
      case Op::TopK:
        set(out, x(0));
        set(e.results[1], Interval{0, g_.type(e.operands[0]).shape.back() - 1});
        return;
      case Op::IndexGuard: guard(e); return;
      case Op::BlockTopK: set(out, Interval{-1, g_.type(e.operands[0]).shape.back() - 1}); return;
      case Op::Sample: set(out, Interval{0, g_.type(e.operands[0]).shape.back() - 1}); return;
      default: return;
    }
  }

  Interval compare(Op op, Interval a, Interval b) const {
    switch (op) {
      case Op::Lt: return decided(a.hi < b.lo, a.lo >= b.hi);
      case Op::Le: return decided(a.hi <= b.lo, a.lo > b.hi);
      case Op::Gt: return decided(a.lo > b.hi, a.hi <= b.lo);
      case Op::Ge: return decided(a.lo >= b.hi, a.hi < b.lo);
      case Op::Eq: return decided(a.lo == a.hi && a == b, a.hi < b.lo || b.hi < a.lo);
      default: return decided(a.hi < b.lo || b.hi < a.lo, a.lo == a.hi && a == b);  // Ne
    }
  }

  void convert(ValueId out, ValueId src) {
    DType to = dtype(out);
    if (!isIntegral(dtype(src))) return;  // from a float: not tracked
    Interval a = at(src);
    if (to == DType::Bool) {
      set(out, decided(a.lo > 0 || a.hi < 0, a.lo == 0 && a.hi == 0));
      return;
    }
    set(out, a);  // fit() widens to the whole dtype if it does not fit
  }

  // The witness rule: the clamp [lo, hi] counts only when the witness is a
  // declared validation output. Without one the guard proves only what its
  // input proves, and only when the clamp cannot change a value.
  void guard(const Eqn& e) {
    int64_t lo = std::get<int64_t>(*e.attr("lo")), hi = std::get<int64_t>(*e.attr("hi"));
    Interval in = at(e.operands[0]);
    bool passes = in.within(lo, hi);
    if (isValidation(e.results[1]))
      set(e.results[0], Interval{std::clamp(in.lo, lo, hi), std::clamp(in.hi, lo, hi)});
    else if (passes)
      set(e.results[0], in);
    set(e.results[1], decided(passes, false));
  }
};

}  // namespace

std::string Interval::str() const { return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]"; }

std::optional<Interval> dtypeRange(DType t) {
  switch (t) {
    case DType::I32: return Interval{std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::I64: return Interval{std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    case DType::Bool: return Interval{0, 1};
    default: return std::nullopt;
  }
}

std::optional<Interval> ValueRanges::get(ValueId v) const {
  if (v < 0 || size_t(v) >= ranges_.size()) return std::nullopt;
  return ranges_[size_t(v)];
}

bool ValueRanges::proves(ValueId v, int64_t lo, int64_t hi) const {
  auto i = get(v);
  return i && i->within(lo, hi);
}

std::string ValueRanges::print(const Graph& g) const {
  std::string out;
  for (size_t v = 0; v < ranges_.size() && v < g.values.size(); ++v) {
    const Value& val = g.values[v];
    if (!ranges_[v] || (val.storage == Storage::Result && val.def < 0)) continue;
    if (*ranges_[v] == *dtypeRange(val.type.dtype)) continue;
    out += "# range %" + val.name + " : " + val.type.str() + " in " + ranges_[v]->str() + "\n";
  }
  return out;
}

ValueRanges computeRanges(const Graph& g) {
  ValueRanges r;
  r.ranges_ = Analysis(g).run();
  r.values_ = g.values.size();
  r.eqns_ = g.eqns.size();
  r.computed_ = true;
  return r;
}

}  // namespace poot

// boundGraph (bound.h): the graph is rebuilt eqn by eqn in a trace::Builder
// (the values), and after each eqn the rule of its op appends the eqns of
// its result's bound E. An exact value (a parameter, a constant, integers,
// data moved from exact values) has no bound value at all (kNone).
#include "bound.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "trace/builder.h"

namespace poot::diff {
namespace {

using trace::kNone;

// A float rounding step: half an f32 ulp, relative.
constexpr double kU = 0x1p-24;
// The device's own error in a transcendental function (exp, tanh, rsqrt,
// ...) of a value the oracle computes the same: |d| <= 1e-5 (1 + |r|), the
// bound gen_prim_test holds lavapipe's functions to (Vulkan allows an
// absolute error near zero).
constexpr double kTranscendental = 1e-5;

double gamma(int64_t n) { return double(n) * kU / (1 - double(n) * kU); }

int64_t intAttr(const Eqn& e, std::string_view name) {
  for (const Attr& a : e.attrs)
    if (a.name == name) return std::get<int64_t>(a.value);
  return 0;
}

bool chosenType(Op op) {
  return op == Op::Reshape || op == Op::Broadcast || op == Op::Convert || op == Op::Iota || op == Op::Constant;
}

class Rebuild {
 public:
  explicit Rebuild(const Graph& g) : g_(g), b_(g.name + "_bound", "bound"), x_(g.values.size(), kNone),
                                     e_(g.values.size(), kNone) {}

  Expected<Graph> run() {
    for (ValueId p : g_.params) {
      const Value& v = g_.value(p);
      switch (v.storage) {
        case Storage::Input: x_[size_t(p)] = b_.input(v.name, v.type); break;
        case Storage::Weight: x_[size_t(p)] = b_.weight(v.name, v.type); break;
        case Storage::Slot: x_[size_t(p)] = b_.slot(v.name, v.type, v.lo, v.hi); break;
        default: return refuse("the state %" + v.name);
      }
    }
    for (const Eqn& e : g_.eqns) {
      std::vector<ValueId> operands;
      for (ValueId v : e.operands) operands.push_back(x_[size_t(v)]);
      if (e.results.size() != 1) return refuse(std::string("the op ") + opName(e.op));
      ValueId r = e.results[0];
      std::optional<Type> declared;
      if (chosenType(e.op)) declared = g_.type(r);
      x_[size_t(r)] = b_.op(e.op, operands, e.attrs, declared);
      auto bound = rule(e);
      if (!bound) return bound.error();
      e_[size_t(r)] = *bound;
    }
    std::set<std::string> bounded;  // an output exported twice is bounded once
    for (const Export& o : g_.outputs) {
      std::string name = "bound." + g_.value(o.value).name;
      if (!bounded.insert(name).second) continue;
      ValueId e = e_[size_t(o.value)];
      if (e == kNone) e = b_.constant(f32Like(o.value), {0});
      b_.output(b_.nameExact(b_.op(Op::Reshape, {e}, {}, f32Like(o.value)), name));
    }
    if (!g_.stateOuts.empty() || !g_.validations.empty()) return refuse("states and validations");
    return b_.finish();
  }

 private:
  Error refuse(const std::string& what) const {
    return makeError(ErrorKind::Verify, {}, "no error bound for " + what + " in graph " + g_.name);
  }
  Type f32Like(ValueId v) const { return Type{DType::F32, g_.type(v).shape}; }

  ValueId c(double v) { return b_.scalar(v); }
  ValueId add(ValueId a, ValueId b) { return a == kNone ? b : b == kNone ? a : b_.add(a, b); }
  // |x| where finite, else 0: an infinity (a masked score) is exact on both sides.
  ValueId finiteAbs(ValueId x) {
    ValueId a = b_.abs(x);
    return b_.select(b_.lt(a, c(std::numeric_limits<double>::infinity())), a, c(0));
  }
  // k roundings of a result r: k u |r|.
  ValueId rounding(ValueId r, double k) { return b_.mul(finiteAbs(r), c(k * kU)); }
  // The device's error in a transcendental function's result r.
  ValueId transcendental(ValueId r) {
    return b_.mul(b_.add(finiteAbs(r), c(1)), c(kTranscendental));
  }
  ValueId zerosOr(ValueId e, ValueId like) {
    return e != kNone ? e : b_.constant(Type{DType::F32, b_.shape(like)}, {0});
  }
  bool exact(const Eqn& e) const {
    for (ValueId v : e.operands)
      if (e_[size_t(v)] != kNone) return false;
    return true;
  }
  // The same data movement applied to the operand's bound.
  ValueId moved(const Eqn& e, std::vector<ValueId> operands) {
    std::optional<Type> declared;
    if (chosenType(e.op)) declared = f32Like(e.results[0]);
    return b_.op(e.op, std::move(operands), e.attrs, declared);
  }

  Expected<ValueId> rule(const Eqn& e) {
    ValueId r = x_[size_t(e.results[0])];
    DType dt = g_.type(e.results[0]).dtype;
    auto x = [&](size_t i) { return x_[size_t(e.operands[i])]; };
    auto E = [&](size_t i) { return e_[size_t(e.operands[i])]; };
    if (!isFloat(dt)) {
      if (exact(e)) return kNone;
      return refuse(std::string("an integer or bool ") + opName(e.op) + " of inexact operands");
    }
    if (dt != DType::F32 && e.op != Op::Convert && opInfo(e.op).cls != OpClass::Data)
      return refuse(std::string("arithmetic in ") + dtypeName(dt));
    switch (e.op) {
      case Op::Iota:
      case Op::Constant: return kNone;
      case Op::Reshape:
      case Op::Broadcast:
      case Op::Transpose:
      case Op::Slice: return E(0) == kNone ? kNone : moved(e, {E(0)});
      case Op::Concat: {
        if (exact(e)) return kNone;
        std::vector<ValueId> parts;
        for (size_t i = 0; i < e.operands.size(); ++i) parts.push_back(zerosOr(E(i), x(i)));
        return moved(e, parts);
      }
      case Op::Gather:
      case Op::DynamicSlice:
        if (E(1) != kNone) return refuse(std::string("inexact indices of ") + opName(e.op));
        return E(0) == kNone ? kNone : moved(e, {E(0), x(1)});
      case Op::Convert:
        if (dt != DType::F32 && E(0) != kNone) return refuse("a narrowing Convert of an inexact value");
        return E(0);  // widening, or an integer below 2^24 (the generator's indices): exact
      case Op::Neg:
      case Op::Abs: return E(0);
      case Op::Tanh:  // slope 1 - tanh^2, largest at the point of [x - E, x + E] nearest 0
      case Op::Sigmoid: {  // slope s (1 - s), likewise
        if (E(0) == kNone) return transcendental(r);
        ValueId y = b_.op(e.op, {b_.max(b_.sub(b_.abs(x(0)), E(0)), c(0))});
        ValueId slope = e.op == Op::Tanh ? b_.sub(c(1), b_.mul(y, y)) : b_.mul(y, b_.sub(c(1), y));
        return add(b_.mul(E(0), slope), transcendental(r));
      }
      case Op::Sin:
      case Op::Cos: return add(E(0), transcendental(r));  // slope at most 1
      case Op::Erf: return add(E(0) == kNone ? kNone : b_.mul(E(0), c(1.1284)), transcendental(r));
      case Op::Exp:  // e^(x + d) - e^x <= e^x |d| e^|d|
        return add(E(0) == kNone ? kNone : b_.mul(b_.mul(finiteAbs(r), E(0)), b_.exp(E(0))), transcendental(r));
      case Op::Log:  // slope 1 / (x - E) over [x - E, x + E]
        return add(E(0) == kNone ? kNone : b_.div(E(0), b_.sub(x(0), E(0))), transcendental(r));
      case Op::Sqrt:  // slope 1 / (2 sqrt(x - E))
        return add(E(0) == kNone ? kNone : b_.mul(b_.mul(E(0), c(0.5)), b_.rsqrt(b_.sub(x(0), E(0)))),
                   transcendental(r));
      case Op::Rsqrt: {  // slope (x - E)^-1.5 / 2
        if (E(0) == kNone) return transcendental(r);
        ValueId s = b_.rsqrt(b_.sub(x(0), E(0)));
        return add(b_.mul(b_.mul(E(0), c(0.5)), b_.mul(s, b_.mul(s, s))), transcendental(r));
      }
      case Op::Recip: {  // slope 1 / (|x| - E)^2
        if (E(0) == kNone) return transcendental(r);
        ValueId d = b_.sub(b_.abs(x(0)), E(0));
        return add(b_.div(E(0), b_.mul(d, d)), transcendental(r));
      }
      case Op::Add:
      case Op::Sub: return add(add(E(0), E(1)), rounding(r, 2));
      case Op::Mul: {
        ValueId sum = rounding(r, 2);
        if (E(1) != kNone) sum = add(sum, b_.mul(finiteAbs(x(0)), E(1)));
        if (E(0) != kNone) sum = add(sum, b_.mul(finiteAbs(x(1)), E(0)));
        if (E(0) != kNone && E(1) != kNone) sum = add(sum, b_.mul(E(0), E(1)));
        return sum;
      }
      case Op::Div: {  // (Ea + |r| Eb) / (|b| - Eb), and a device's division within 2.5 ulp
        ValueId num = E(0);
        if (E(1) != kNone) num = add(num, b_.mul(finiteAbs(r), E(1)));
        ValueId sum = rounding(r, 6);
        if (num == kNone) return sum;
        ValueId den = E(1) == kNone ? b_.abs(x(1)) : b_.sub(b_.abs(x(1)), E(1));
        return add(b_.div(num, den), sum);
      }
      case Op::Max:
      case Op::Min: {  // the operand that wins over both intervals brings its bound, else the larger
        if (exact(e)) return kNone;
        ValueId ea = zerosOr(E(0), x(0)), eb = zerosOr(E(1), x(1));
        ValueId sign = c(e.op == Op::Max ? 1 : -1);
        // Max: a wins when a - Ea > b + Eb; Min, the same of -a and -b.
        ValueId sa = b_.mul(x(0), sign), sb = b_.mul(x(1), sign);
        ValueId aWins = b_.gt(b_.sub(sa, ea), b_.add(sb, eb)), bWins = b_.gt(b_.sub(sb, eb), b_.add(sa, ea));
        return b_.select(aWins, ea, b_.select(bWins, eb, b_.max(ea, eb)));
      }
      case Op::Select:
        if (E(0) != kNone) return refuse("an inexact Select condition");
        if (E(1) == kNone && E(2) == kNone) return kNone;
        return b_.select(x(0), zerosOr(E(1), x(1)), zerosOr(E(2), x(2)));
      case Op::ReduceSum: {
        const Shape& in = g_.type(e.operands[0]).shape;
        int64_t axis = *normalizeAxis(intAttr(e, "axis"), int64_t(in.size()));
        ValueId sum = b_.mul(moved(e, {finiteAbs(x(0))}), c(2 * gamma(in[size_t(axis)])));
        return E(0) == kNone ? sum : b_.add(moved(e, {E(0)}), sum);
      }
      case Op::ReduceMax:
      case Op::ReduceMin: return E(0) == kNone ? kNone : b_.op(Op::ReduceMax, {E(0)}, e.attrs);
      case Op::MatMul: {
        int64_t k = g_.type(e.operands[0]).shape.back();
        auto mm = [&](ValueId a, ValueId bb) { return b_.op(Op::MatMul, {a, bb}, e.attrs); };
        ValueId absA = finiteAbs(x(0)), absB = b_.abs(x(1));
        ValueId sum = b_.mul(mm(absA, absB), c(2 * gamma(k)));
        if (E(1) != kNone) sum = b_.add(sum, mm(absA, E(1)));
        if (E(0) != kNone) sum = b_.add(sum, mm(E(0), absB));
        if (E(0) != kNone && E(1) != kNone) sum = b_.add(sum, mm(E(0), E(1)));
        return sum;
      }
      default: return refuse(std::string("the op ") + opName(e.op));
    }
  }

  const Graph& g_;
  trace::Builder b_;
  std::vector<ValueId> x_, e_;  // by the graph's value id: the value here, its bound (kNone: exact)
};

}  // namespace

Expected<Graph> boundGraph(const Graph& g) { return Rebuild(g).run(); }

}  // namespace poot::diff

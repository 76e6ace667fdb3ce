// generate (generator.h): a seeded Gen draws 1 to 4 stages, each taking the
// running value `cur_` (f32, rank 1 to 4) to the next; `mag_` is a bound on
// |cur_| the stages keep up to date, and squash() passes cur_ through Tanh
// where a stage needs it small (before an Exp, a product, the scores).
// Draws use mt19937_64 and integer remainders only, so a seed means the same
// graph everywhere.
#include "generator.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "trace/builder.h"
#include "trace/ops.h"

namespace poot::diff {
namespace {

using trace::kNone;

constexpr int64_t kMaxElements = 1 << 14;  // of any value: lavapipe runs on the CPU

// The near misses of the attention rewrite (docs/passes.md, attention-rewrite),
// each a hand-written chain that differs from the tracer's in one step.
enum class Miss {
  None,            // the tracer's chain, written by hand: must fuse
  NoMax,           // exp(s) / sum exp(s): no max-subtracted softmax
  QueryAxis,       // the softmax runs over the queries
  TensorScale,     // the scale is a per-head constant, not a splat
  KeyPretransposed,  // k is stored [B, H, D, T]: no Transpose to anchor on
  KeyHeadBroadcast,  // one key head broadcast by the matmul, not repeated
  RepeatMismatch,  // the key repeated, the value given with every head
  ProbsExported,   // the probabilities are also an output: fuses, p stays
};
const char* missName(Miss m) {
  static const char* names[] = {"hand", "no-max", "query-axis", "tensor-scale", "key-pretransposed",
                                "key-head-broadcast", "repeat-mismatch", "probs-exported"};
  return names[int(m)];
}

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed), b_("diff_" + std::to_string(seed), "seed " + std::to_string(seed)) {}

  Expected<Generated> run() {
    int64_t c = pick({1, 3, 7, 16, 37, 64, 100, 129, 257});
    Shape shape{pick({1, 2, 3, 5, 7, 8, 9, 17, 33}), c};
    if (coin(50)) shape.insert(shape.begin(), pick({1, 2, 3}));
    if (coin(15)) shape.insert(shape.begin(), 2);
    cur_ = input(shape);
    int64_t stages = 1 + below(4);
    for (int64_t i = 0; i < stages; ++i) {
      switch (below(attentionDone_ ? 4 : 5)) {
        case 0: elementwise(); break;
        case 1: rows(); break;
        case 2: matmul(); break;
        case 3: move(); break;
        default: attention(); break;
      }
    }
    if (!exported_.count(cur_)) b_.output(cur_);
    auto g = b_.finish();
    if (!g) return g.error();
    return Generated{g.take(), recipe_, attentions_};
  }

 private:
  // ----- draws
  int64_t below(int64_t n) { return int64_t(rng_() % uint64_t(n)); }
  bool coin(int percent) { return below(100) < percent; }
  int64_t pick(std::initializer_list<int64_t> xs) { return *(xs.begin() + below(int64_t(xs.size()))); }

  // ----- values
  ValueId input(Shape shape, DType dt = DType::F32) {
    return b_.input("x" + std::to_string(params_++), Type{dt, std::move(shape)});
  }
  ValueId weight(Shape shape, DType dt = DType::F32) {
    return b_.weight("w" + std::to_string(params_++), Type{dt, std::move(shape)});
  }
  const Shape& shape() const { return b_.shape(cur_); }
  void note(const std::string& s) { recipe_ += (recipe_.empty() ? "" : " ") + s; }
  void squash(double limit) {
    if (mag_ <= limit) return;
    cur_ = b_.tanh(cur_);
    mag_ = 1;
  }
  // Exports v as well, now and then: a value used outside its chain.
  void maybeExport(ValueId v, const char* what) {
    if (!coin(20) || !exported_.insert(v).second) return;
    b_.output(v);
    note(std::string("+out(") + what + ")");
  }
  // A fresh input that broadcasts against cur_: some trailing axes of it,
  // each kept or 1; now and then one more leading axis, which grows cur_.
  ValueId broadcastOperand() {
    const Shape& s = shape();
    Shape o(s.begin() + below(int64_t(s.size())), s.end());
    for (int64_t& d : o)
      if (coin(30)) d = 1;
    if (o.size() == s.size() && s.size() < 4 && coin(10) && 2 * numel(s) <= kMaxElements) o.insert(o.begin(), 2);
    return input(o);
  }

  // ----- stages
  void elementwise() {
    std::string ops;
    ValueId start = cur_;
    for (int64_t n = 1 + below(5); n > 0; --n) {
      auto step = [&](const char* name) { ops += (ops.empty() ? "" : ",") + std::string(name); };
      switch (below(10)) {
        case 0: cur_ = coin(50) ? b_.neg(cur_) : b_.abs(cur_), step("neg/abs"); break;
        case 1: {
          Op op = std::vector<Op>{Op::Tanh, Op::Sigmoid, Op::Sin, Op::Cos, Op::Erf}[size_t(below(5))];
          cur_ = b_.op(op, {cur_}), mag_ = std::min(mag_, 1.0), step(opName(op));
          break;
        }
        case 2: squash(2), cur_ = b_.exp(cur_), mag_ = std::exp(mag_), step("Exp"); break;
        case 3: {
          Op op = std::vector<Op>{Op::Add, Op::Sub, Op::Mul, Op::Max, Op::Min}[size_t(below(5))];
          ValueId y = broadcastOperand();
          cur_ = coin(50) ? b_.op(op, {cur_, y}) : b_.op(op, {y, cur_});
          mag_ = op == Op::Add || op == Op::Sub ? mag_ + 1 : std::max(mag_, 1.0);
          step(opName(op));
          break;
        }
        case 4: cur_ = b_.div(cur_, b_.add(b_.abs(broadcastOperand()), b_.scalar(1))), step("Div"); break;
        case 5: {
          squash(4);
          ValueId t = b_.add(b_.mul(cur_, cur_), b_.scalar(0.5));
          Op op = std::vector<Op>{Op::Sqrt, Op::Rsqrt, Op::Log}[size_t(below(3))];
          cur_ = b_.op(op, {t}), mag_ = op == Op::Sqrt ? mag_ + 1 : 3, step(opName(op));
          break;
        }
        case 6: {
          ValueId y = broadcastOperand();
          Shape cs = b_.shape(y);  // the condition broadcasts like y
          cur_ = b_.select(input(cs, DType::Bool), cur_, y), mag_ = std::max(mag_, 1.0), step("Select");
          break;
        }
        case 7: cur_ = b_.add(b_.mul(cur_, b_.scalar(0.75)), b_.scalar(0.25)), mag_ += 0.25, step("scale"); break;
        case 8:
          if (b_.shape(start) == shape()) cur_ = b_.mul(cur_, start), mag_ *= 4, step("Mul(start)");
          break;
        default: cur_ = b_.mul(cur_, b_.sigmoid(cur_)), step("SiLU"); break;
      }
      squash(16);
    }
    note("elementwise(" + ops + ")");
    maybeExport(cur_, "elementwise");
  }

  // RMSNorm, LayerNorm or softmax over one axis, the last mostly.
  void rows() {
    squash(4);
    int64_t rank = int64_t(shape().size());
    int64_t axis = coin(75) || rank == 1 ? rank - 1 : below(rank - 1);
    int64_t n = shape()[size_t(axis)];
    bool keep = coin(80);
    Shape kept = shape();
    kept[size_t(axis)] = 1;
    auto reduce = [&](Op op, ValueId v) {
      ValueId r = b_.op(op, {v}, {{"axis", axis}, {"keepdim", keep}});
      return keep ? r : b_.reshape(r, kept);
    };
    std::string what = "rows(axis " + std::to_string(axis) + " of " + std::to_string(n) + (keep ? "" : ", reshaped");
    if (coin(40)) {
      cur_ = b_.add(cur_, input(shape())), mag_ += 1, what += ", residual";
      maybeExport(cur_, "residual");
    }
    bool last = axis == rank - 1;
    // A short row may hold nearly equal values: a larger epsilon keeps its
    // norm from amplifying their rounding a thousandfold.
    double eps = n >= 16 ? 1e-5 : 0.05;
    switch (below(3)) {
      case 0: {
        ValueId ms = b_.mul(reduce(Op::ReduceSum, b_.mul(cur_, cur_)), b_.scalar(1.0 / double(n)));
        maybeExport(ms, "mean square");
        cur_ = b_.mul(cur_, b_.rsqrt(b_.add(ms, b_.scalar(eps))));
        if (last) cur_ = b_.mul(cur_, weight({n}));
        mag_ = std::sqrt(double(n)), what += ", rmsnorm";
        break;
      }
      case 1: {
        ValueId mean = b_.mul(reduce(Op::ReduceSum, cur_), b_.scalar(1.0 / double(n)));
        ValueId d = b_.sub(cur_, mean);
        maybeExport(d, "centered");
        ValueId var = b_.mul(reduce(Op::ReduceSum, b_.mul(d, d)), b_.scalar(1.0 / double(n)));
        cur_ = b_.mul(d, b_.rsqrt(b_.add(var, b_.scalar(eps))));
        if (last) cur_ = b_.add(b_.mul(cur_, weight({n})), weight({n}));
        mag_ = std::sqrt(double(n)) + 1, what += ", layernorm";
        break;
      }
      default: {
        ValueId m = reduce(Op::ReduceMax, cur_);
        maybeExport(m, "row max");
        ValueId e = b_.exp(b_.sub(cur_, m));
        cur_ = b_.div(e, reduce(Op::ReduceSum, e));
        mag_ = 1, what += ", softmax";
        break;
      }
    }
    note(what + ")");
  }

  // cur_ [.., K] x w: [K, N], or [N, K] through a Transpose; f32, or bf16
  // or f16 widened by a Convert or by the product; a bias; SiLU(x w1) * (x w2).
  void matmul() {
    if (shape().size() == 1) cur_ = b_.reshape(cur_, {1, shape()[0]});
    squash(4);
    int64_t k = shape().back(), n = pick({1, 5, 19, 32, 65, 130});
    if (numel(shape()) / k * n > kMaxElements) n = 5;
    DType wt = coin(70) ? DType::F32 : coin(70) ? DType::BF16 : DType::F16;
    bool nk = coin(50), convert = wt != DType::F32 && coin(50), gated = coin(30);
    auto product = [&]() {
      ValueId w = weight(nk ? Shape{n, k} : Shape{k, n}, wt);
      bool convertFirst = coin(50);
      if (convert && convertFirst) w = b_.convert(w, DType::F32);
      if (nk) w = b_.transpose(w, {1, 0});
      if (convert && !convertFirst) w = b_.convert(w, DType::F32);
      return b_.matmul(cur_, w);
    };
    ValueId y = product();
    mag_ *= double(k) / std::sqrt(double(nk ? k : n));  // the generator scales a weight by its last axis
    if (gated) y = b_.mul(b_.mul(y, b_.sigmoid(y)), product()), mag_ *= mag_;
    if (coin(30)) y = b_.add(y, weight({n})), mag_ += 1;
    cur_ = y;
    std::string weights = wt == DType::F32 ? "" : std::string(", ") + dtypeName(wt) + (convert ? " convert" : "");
    note("matmul(" + std::to_string(numel(shape()) / n) + "x" + std::to_string(k) + "x" + std::to_string(n) +
         (nk ? ", [n,k]" : ", [k,n]") + weights + (gated ? ", gated" : "") + ")");
    maybeExport(cur_, "product");
  }

  // A Transpose of two axes or a Reshape that merges, splits or adds one.
  void move() {
    Shape s = shape();
    int64_t rank = int64_t(s.size());
    if (rank >= 2 && coin(50)) {
      std::vector<int64_t> perm(static_cast<size_t>(rank));
      for (int64_t i = 0; i < rank; ++i) perm[size_t(i)] = i;
      std::swap(perm[size_t(below(rank - 1))], perm[size_t(rank - 1)]);
      cur_ = b_.transpose(cur_, perm);
      note("transpose");
      return;
    }
    int64_t i = below(rank);
    if (rank >= 2 && i + 1 < rank && coin(50)) {
      s[size_t(i)] *= s[size_t(i + 1)];
      s.erase(s.begin() + i + 1);
    } else if (rank < 4) {
      int64_t d = s[size_t(i)], f = 1;
      for (int64_t c : {3, 2, 5, 7})
        if (d % c == 0 && d > c) f = c;
      s[size_t(i)] = d / f;
      s.insert(s.begin() + i + 1, f);
    }
    cur_ = b_.reshape(cur_, s);
    note("reshape");
  }

  // q from cur_ (a product, then [B, L, Hq, D] -> [B, Hq, L, D]), keys and
  // values fresh inputs; the output back to [B, L, Hq * Dv].
  void attention() {
    attentionDone_ = true;
    int64_t c = shape().back(), rowsIn = numel(shape()) / c;
    if (rowsIn > 64 || c > 129) cur_ = input({1, 3, 16}), c = 16, rowsIn = 3;
    int64_t batch = shape().size() == 3 ? shape()[0] : 1, l = rowsIn / batch;
    cur_ = b_.reshape(cur_, {batch, l, c});
    int64_t hkv = pick({1, 2}), rep = pick({1, 2, 3}), d = pick({4, 5, 8, 12, 16});
    int64_t dv = coin(20) ? pick({4, 6, 8}) : d, t = l + below(20);
    Miss miss = coin(50) ? Miss::None : Miss(below(8));
    // These misses need several query heads per key head; one key head
    // broadcast needs exactly one.
    if (miss == Miss::KeyHeadBroadcast || miss == Miss::TensorScale || miss == Miss::RepeatMismatch)
      rep = std::max<int64_t>(rep, 2);
    if (miss == Miss::KeyHeadBroadcast) hkv = 1;
    int64_t hq = hkv * rep;
    ValueId wq = weight({c, hq * d});
    ValueId q = b_.tanh(b_.matmul(cur_, wq));
    q = b_.transpose(b_.reshape(q, {batch, l, hq, d}), {0, 2, 1, 3});
    ValueId k = input(miss == Miss::KeyPretransposed ? Shape{batch, hkv, d, t} : Shape{batch, hkv, t, d});
    ValueId v = input({batch, miss == Miss::RepeatMismatch ? hq : hkv, t, dv});
    std::string what = "attention(B " + std::to_string(batch) + ", L " + std::to_string(l) + ", T " +
                       std::to_string(t) + ", heads " + std::to_string(hq) + "/" + std::to_string(hkv) + ", D " +
                       std::to_string(d) + "/" + std::to_string(dv);
    ValueId o;
    if (miss == Miss::None && coin(70)) {
      trace::ops::Step step = trace::ops::begin_step(b_, {.batch = batch, .tokens = l, .capacity = t});
      trace::ops::AttentionSpec spec;
      spec.scale = coin(80) ? 1 / std::sqrt(double(d)) : 0.5;
      if (coin(25)) spec.softcap = double(pick({2, 5, 30}));
      spec.causal = coin(70);
      if (coin(30)) spec.window = 1 + below(t);
      if (coin(20)) spec.bias = trace::ops::alibi_bias(b_, step, hq);
      o = trace::ops::attention_core(b_, step, q, k, v, spec);
      what += std::string(", traced") + (spec.causal ? ", causal" : "") +
              (spec.window ? ", window " + std::to_string(spec.window) : "") + (spec.softcap ? ", softcap" : "") +
              (spec.bias != kNone ? ", alibi" : "");
      attentions_ += 1;
    } else {
      o = handAttention(q, k, v, rep, 1 / std::sqrt(double(d)), miss);
      what += std::string(", ") + missName(miss);
      attentions_ += miss == Miss::None || miss == Miss::ProbsExported ? 1 : 0;
    }
    cur_ = b_.reshape(b_.transpose(o, {0, 2, 1, 3}), {batch, l, hq * dv});
    mag_ = 1;
    note(what + ")");
  }

  ValueId handAttention(ValueId q, ValueId k, ValueId v, int64_t rep, double scale, Miss miss) {
    if (miss != Miss::KeyHeadBroadcast) {
      k = trace::ops::repeat_kv(b_, k, rep);
      if (miss != Miss::RepeatMismatch) v = trace::ops::repeat_kv(b_, v, rep);
    }
    ValueId kt = miss == Miss::KeyPretransposed ? k : b_.transpose(k, {0, 1, 3, 2});
    ValueId s = b_.matmul(q, kt);
    int64_t hq = b_.shape(q)[1];
    if (miss == Miss::TensorScale) {
      std::vector<double> per;
      for (int64_t h = 0; h < hq; ++h) per.push_back(scale * (1 + 0.25 * double(h)));
      s = b_.mul(s, b_.constant(Type{DType::F32, {1, hq, 1, 1}}, per));
    } else {
      s = b_.mul(s, b_.scalar(scale));
    }
    int64_t axis = miss == Miss::QueryAxis ? 2 : 3;
    ValueId e = miss == Miss::NoMax ? b_.exp(s) : b_.exp(b_.sub(s, b_.reduceMax(s, axis, true)));
    ValueId p = b_.div(e, b_.reduceSum(e, axis, true));
    if (miss == Miss::ProbsExported) b_.output(p), exported_.insert(p);
    return b_.matmul(p, v);
  }

  std::mt19937_64 rng_;
  trace::Builder b_;
  ValueId cur_ = kNone;
  double mag_ = 1;
  int params_ = 0;
  bool attentionDone_ = false;
  std::set<ValueId> exported_;
  int64_t attentions_ = 0;
  std::string recipe_;
};

}  // namespace

Expected<Generated> generate(uint64_t seed) { return Gen(seed).run(); }

}  // namespace poot::diff

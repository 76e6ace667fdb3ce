// The fused generator ("fused", "fused-rows"; plan.h, FusedStep): a fusion
// group's steps computed in registers, only its outputs stored. An Emitter
// gives any step (or operand) at coordinates of its own shape, computing
// what it needs on the way: an elementwise step reads its operands at the
// broadcast coordinates, an index map (Reshape, Broadcast, Transpose) moves
// the coordinates, Iota and Constant are values of them, Rope reads its
// pair and tables, an operand is a load. Values are remembered per
// coordinates within the scope (loop body) that computed them, so a value
// two steps read is computed once.
//   "fused": one thread per element of the root's shape, storing each output
//   at its own index (every output has that shape); when the root writes a
//   state in place, one per element of its update, stored where it goes.
//   "fused-rows": one workgroup per row of S = [R..., N]. Each reduction, in
//   step order, strides its row over the threads (thread t takes t, t + W,
//   ..., four of them loaded at once; with four or fewer a thread, the
//   whole row's loads at once, kept for the stores), each thread folding
//   into an accumulator that starts from the operation's identity (-0.0 for
//   a float sum, so a row of -0.0 sums to -0.0 as the oracle's does), then
//   the W partials fold as a tree in workgroup memory; every thread reads
//   the row's value. Steps that do not vary along the row are then computed
//   once, and one pass over the row stores the outputs of shape S (thread 0
//   stores those of one value a row).
// The reductions add in another order than the oracle's sequential one: a
// float sum of n terms, each thread adding n / W of them and the tree log2 W
// levels, is within (n / W + log2 W) * 2^-24 * sum |x_i| of the exact sum,
// where the sequential one is within n * 2^-24 * sum |x_i|
// ("gen: fused kernels" holds the kernels to the oracle with that bound).
// Integer sums wrap and max and min are exact, so they agree exactly (a
// maximum of +0.0 and -0.0 may come out with either sign).
#include <limits>
#include <map>

#include "codegen/gen/index.h"
#include "codegen/gen/values.h"
#include "ir/fusion.h"
#include "plan/schedule.h"

namespace poot {

namespace {

using namespace gen;
using Coords = std::vector<V>;

constexpr int64_t kRowUnroll = 4;  // "fused-rows": a thread's elements loaded at once (genRows)

class Emitter {
 public:
  Emitter(Frame& f, const KernelRequest& r) : f_(f), b_(f.b), r_(r), zero_(f.b.i32(0)) { scopes_.emplace_back(); }

  V zero() const { return zero_; }
  const Shape& shapeOf(int32_t ref) const { return ref >= 0 ? r_.steps[size_t(ref)].type.shape : r_.operands[size_t(-1 - ref)].shape; }
  DType dtypeOf(int32_t ref) const { return ref >= 0 ? r_.steps[size_t(ref)].type.dtype : r_.operands[size_t(-1 - ref)].dtype; }

  // The coordinates in `to` of the element of `to` that broadcasts to
  // element c of `from` (aligned at the right; 0 along axes of size 1).
  Coords bcast(const Coords& c, const Shape& from, const Shape& to) const {
    Coords out(to.size(), zero_);
    size_t lead = from.size() - to.size();
    for (size_t d = 0; d < to.size(); ++d)
      if (to[d] != 1) out[d] = c[lead + d];
    return out;
  }
  Coords unravelOf(V flat, const Shape& s) {
    Coords c = unravel(b_, flat, s);
    for (size_t d = 0; d < s.size(); ++d)
      if (s[d] == 1) c[d] = zero_;
    return c;
  }

  // Step or operand `ref` at coordinates c of its own shape.
  V at(int32_t ref, const Coords& c) {
    if (ref >= 0 && isReduction(r_.steps[size_t(ref)].op)) return reduced.at(ref);
    auto key = std::make_pair(ref, c);
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
      if (auto it = s->find(key); it != s->end()) return it->second;
    V v = ref >= 0 ? rounded(ref, compute(ref, c)) : b_.load(f_.in[size_t(-1 - ref)], offsetOf(b_, c, rowMajor(shapeOf(ref))));
    scopes_.back()[key] = v;
    return v;
  }
  // A scope for a loop body: what it computes is not seen after it.
  void inScope(const std::function<void()>& body) {
    scopes_.emplace_back();
    body();
    scopes_.pop_back();
  }

  std::map<int32_t, V> reduced;  // reduction step -> its row's value

 private:
  Frame& f_;
  Builder& b_;
  const KernelRequest& r_;
  V zero_;
  std::vector<std::map<std::pair<int32_t, Coords>, V>> scopes_;

  // A step's value as the graph has it: a two-byte float result is rounded
  // to its dtype where the step computes it, as the oracle rounds every op's
  // result, so a fused chain keeps the unfused chain's numbers. Steps that
  // only move or pick values already rounded need nothing.
  V rounded(int32_t ref, V v) {
    const FusedStep& s = r_.steps[size_t(ref)];
    switch (s.op) {
      case Op::Reshape: case Op::Broadcast: case Op::Transpose: case Op::Select: case Op::Constant: return v;
      default: return isFloat(s.type.dtype) ? b_.roundTo(v, s.type.dtype) : v;
    }
  }

  V arg(const FusedStep& s, size_t i, const Coords& c) {
    return at(s.args[i], bcast(c, s.type.shape, shapeOf(s.args[i])));
  }

  V compute(int32_t ref, const Coords& c) {
    const FusedStep& s = r_.steps[size_t(ref)];
    const Shape& out = s.type.shape;
    TypeQuery q;
    q.attrs = &s.attrs;
    switch (s.op) {
      case Op::Iota: {
        int64_t axis = *normalizeAxis(q.attrInt("axis"), int64_t(out.size()));
        return convertValue(b_, c[size_t(axis)], DType::I32, s.type.dtype);
      }
      case Op::Constant: {
        const std::vector<double>& vals = std::get<std::vector<double>>(*q.attr("value"));
        if (vals.size() == 1) return constValue(b_, s.type.dtype, vals[0]);
        return constTree(b_, s.type.dtype, offsetOf(b_, c, rowMajor(out)), vals, 0, vals.size());
      }
      case Op::Reshape: return at(s.args[0], unravelOf(offsetOf(b_, c, rowMajor(out)), shapeOf(s.args[0])));
      case Op::Broadcast: return arg(s, 0, c);
      case Op::Transpose: {
        const std::vector<int64_t>& perm = q.attrInts("perm");
        Coords from(perm.size());
        for (size_t d = 0; d < perm.size(); ++d) from[size_t(perm[d])] = c[d];
        return at(s.args[0], from);
      }
      case Op::Convert: return convertValue(b_, at(s.args[0], c), dtypeOf(s.args[0]), s.type.dtype);
      case Op::Select: return b_.select(arg(s, 0, c), arg(s, 1, c), arg(s, 2, c));
      case Op::Rope: {
        int64_t D = out.back();
        RopePair p = ropePair(b_, c.back(), D, q.attrSym("style") == "half");
        Coords c1 = c, c2 = c, hc = c;
        c1.back() = p.c1;
        c2.back() = p.c2;
        hc.back() = p.j;
        Shape hs = out;
        hs.back() = D / 2;
        V co = at(s.args[1], bcast(hc, hs, shapeOf(s.args[1])));
        V si = at(s.args[2], bcast(hc, hs, shapeOf(s.args[2])));
        return ropeRotate(b_, p, at(s.args[0], c1), at(s.args[0], c2), co, si);
      }
      default: break;
    }
    if (opInfo(s.op).cls == OpClass::Unary) return unaryValue(b_, s.op, arg(s, 0, c));
    return binaryValue(b_, s.op, arg(s, 0, c), arg(s, 1, c));  // binary and compare
  }
};

V identityOf(Builder& b, Op op, Scalar t) {
  if (t == Scalar::F32) {
    if (op == Op::ReduceSum) return b.f32(-0.0);
    return b.f32(op == Op::ReduceMax ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
  }
  return b.i32(op == Op::ReduceSum ? 0 : op == Op::ReduceMax ? INT32_MIN : INT32_MAX);  // fused reductions are float (f32 partials) or i32
}

V combine(Builder& b, Op op, V a, V x) {
  return op == Op::ReduceSum ? b.add(a, x) : op == Op::ReduceMax ? maxOf(b, a, x) : minOf(b, a, x);
}

// A root that writes a state in place (a DynamicUpdateSlice, fusion.h)
// stores its update's element where it goes in the state; its space is the
// update's shape.
void genFlat(Frame& f, Emitter& em, const KernelRequest& r) {
  const FusedStep& root = r.steps.back();
  const bool inPlace = root.op == Op::DynamicUpdateSlice;
  const Shape& space = inPlace ? em.shapeOf(root.args[1]) : r.results[0].shape;
  perThread(f.b, r.schedule.workgroupSize, numel(space), [&](V id) {
    Coords c = em.unravelOf(id, space);
    for (size_t k = 0; k < r.results.size(); ++k) {
      if (!inPlace || r.stores[k] != int32_t(r.steps.size() - 1)) {
        f.b.store(f.out[k], id, em.at(r.stores[k], c));
        continue;
      }
      const Shape& x = root.type.shape;
      TypeQuery q;
      q.attrs = &root.attrs;
      int64_t axis = *normalizeAxis(q.attrInt("axis"), int64_t(x.size()));
      V start = em.at(root.args[2], {});
      f.b.store(f.out[k], sliceTarget(f.b, id, x, space, axis, start), em.at(root.args[1], c));
    }
  });
}

void genRows(Frame& f, Emitter& em, const KernelRequest& r) {
  Builder& b = f.b;
  const int64_t W = r.schedule.workgroupSize;
  Shape space;
  for (const FusedStep& s : r.steps)
    if (isReduction(s.op)) space = em.shapeOf(s.args[0]);
  const int64_t N = space.back(), R = numel(space) / N;
  std::map<int32_t, int32_t> partials;  // reduction step -> its workgroup array
  for (size_t i = 0; i < r.steps.size(); ++i)
    if (isReduction(r.steps[i].op))
      partials[int32_t(i)] = b.shared("partials" + std::to_string(i), valueScalar(r.steps[i].type.dtype), W);
  V row = b.workgroupId();
  b.ifThen(b.lt(row, b.i32(R)), [&] {
    V tid = b.local();
    Shape lead(space.begin(), space.end() - 1);
    Coords rc = em.unravelOf(row, lead);
    auto along = [&](V j) {
      Coords c = rc;
      c.push_back(j);
      return c;
    };
    // Elements tid, tid + W, ... < N of the row. A thread with at most
    // kRowUnroll of them has them written out in this scope, so what the
    // reductions load the stores reuse, and everything the row's outputs
    // need that no reduction decides (the norm's weight) is loaded first,
    // with the rest: the row costs one wait for memory. Otherwise they are
    // written kRowUnroll a step, their loads in flight together. body(j, ok)
    // takes element j, and ok (-1: always) says whether it is in the row
    // (a thread past the row's end takes a copy of the last element).
    const int64_t per = ceilDiv(N, W);
    std::vector<std::pair<V, V>> own;
    if (per <= kRowUnroll) {
      for (int64_t i = 0; i < per; ++i) {
        V j = b.add(tid, b.i32(i * W));
        own.emplace_back(N % W == 0 ? j : b.min(j, b.i32(N - 1)), N % W == 0 ? V(-1) : b.lt(j, b.i32(N)));
      }
      std::vector<bool> decided(r.steps.size());
      for (size_t i = 0; i < r.steps.size(); ++i) {
        decided[i] = isReduction(r.steps[i].op);
        for (int32_t a : r.steps[i].args) decided[i] = decided[i] || (a >= 0 && decided[size_t(a)]);
      }
      for (auto [j, ok] : own)
        for (size_t i = 0; i < r.steps.size(); ++i) {
          const Shape& sh = r.steps[i].type.shape;
          if (!decided[i] && !sh.empty() && sh.back() == N) em.at(int32_t(i), em.bcast(along(j), space, sh));
        }
    }
    auto strided = [&](const std::function<void(V, V)>& body) {
      if (!own.empty()) {
        for (auto [j, ok] : own) body(j, ok);
        return;
      }
      b.forUnrolled(per, kRowUnroll, [&](V i) {
        V j = b.add(tid, b.mul(i, b.i32(W)));
        if (N % W == 0) em.inScope([&] { body(j, -1); });
        else b.ifThen(b.lt(j, b.i32(N)), [&] { em.inScope([&] { body(j, -1); }); });
      });
    };
    for (auto [step, array] : partials) {
      const FusedStep& s = r.steps[size_t(step)];
      Scalar t = valueScalar(s.type.dtype);
      int32_t acc = b.var(t, identityOf(b, s.op, t));
      strided([&](V j, V ok) {
        V folded = combine(b, s.op, b.get(acc), em.at(s.args[0], along(j)));
        b.set(acc, ok < 0 ? folded : b.select(ok, folded, b.get(acc)));
      });
      b.sharedStore(array, tid, b.get(acc));
      b.barrier();
      for (int64_t half = W / 2; half >= 1; half /= 2) {
        b.ifThen(b.lt(tid, b.i32(half)), [&] {
          V x = b.sharedLoad(array, tid), y = b.sharedLoad(array, b.add(tid, b.i32(half)));
          b.sharedStore(array, tid, combine(b, s.op, x, y));
        });
        b.barrier();
      }
      V total = b.sharedLoad(array, b.i32(0));
      em.reduced[step] = isFloat(s.type.dtype) ? b.roundTo(total, s.type.dtype) : total;
    }
    // What does not vary along the row, once a row.
    Coords once = along(em.zero());
    for (size_t i = 0; i < r.steps.size(); ++i) {
      const Shape& s = r.steps[i].type.shape;
      if (!isReduction(r.steps[i].op) && (s.empty() || s.back() == 1)) em.at(int32_t(i), em.bcast(once, space, s));
    }
    strided([&](V j, V ok) {
      auto store = [&] {
        for (size_t k = 0; k < r.results.size(); ++k)
          if (r.results[k].shape == space) b.store(f.out[k], b.add(b.mul(row, b.i32(N)), j), em.at(r.stores[k], along(j)));
      };
      if (ok < 0) store();
      else b.ifThen(ok, store);
    });
    b.ifThen(b.eq(tid, b.i32(0)), [&] {
      em.inScope([&] {
        for (size_t k = 0; k < r.results.size(); ++k)
          if (r.results[k].shape != space) b.store(f.out[k], row, em.at(r.stores[k], once));
      });
    });
  });
}

}  // namespace

Expected<kir::Kernel> genFused(const GenInput& in) {
  const KernelRequest& r = in.request;
  auto f = openKernel(in);
  if (!f) return f.error();
  Emitter em(*f, r);
  if (r.schedule.kind == "fused-rows") genRows(*f, em, r);
  else genFlat(*f, em, r);
  return f->b.finish();
}

}  // namespace poot

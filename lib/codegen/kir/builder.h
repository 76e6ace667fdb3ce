// The Builder: how generators write KIR (kir.h). It keeps the block being
// filled, checks operand types as it goes (a mismatch is a generator bug and
// asserts), maps graph dtypes onto KIR storage (bool as u8; f16 and bf16
// loaded and stored as themselves and converted to and from f32, so
// generators compute in f32) and expands the few functions no emitter has
// (erf). Generators then read like the kernel:
//
//   Builder b("add_elementwise_0", 256, gridX);
//   int32_t x = b.buffer("x", DType::F32, n, false), out = b.buffer("out", DType::F32, n, true);
//   V i = b.add(b.mul(b.workgroupId(), b.i32(256)), b.local());
//   b.ifThen(b.lt(i, b.i32(n)), [&] { b.store(out, i, b.exp(b.load(x, i))); });
//   kir::Kernel k = b.finish();
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codegen/kir/kir.h"
#include "ir/types.h"

namespace poot::kir {

class Builder {
 public:
  Builder(std::string entry, int64_t workgroupSize, int64_t gridX);

  // A storage buffer holding `elems` elements of a graph dtype; the next
  // binding. load() gives f32 for every float dtype, i32, i64 or bool.
  int32_t buffer(std::string name, DType dtype, int64_t elems, bool written);
  int32_t shared(std::string name, Scalar type, int64_t elems);

  V i32(int64_t v);
  V i64(int64_t v);
  V f32(double v);
  V boolean(bool v);
  V constant(Scalar t, double v);  // v converted to t

  V groupX();
  V groupY();
  V local();
  V workgroupId();  // groupY * gridX + groupX, i32

  V binary(Opc op, V a, V b);
  V unary(Opc op, V a);
  V add(V a, V b) { return binary(Opc::Add, a, b); }
  V sub(V a, V b) { return binary(Opc::Sub, a, b); }
  V mul(V a, V b) { return binary(Opc::Mul, a, b); }
  V div(V a, V b) { return binary(Opc::Div, a, b); }
  V rem(V a, V b) { return binary(Opc::Rem, a, b); }
  V min(V a, V b) { return binary(Opc::Min, a, b); }
  V max(V a, V b) { return binary(Opc::Max, a, b); }
  V exp(V a) { return unary(Opc::Exp, a); }
  V exp2(V a) { return unary(Opc::Exp2, a); }
  V log(V a) { return unary(Opc::Log, a); }
  V sqrt(V a) { return unary(Opc::Sqrt, a); }
  V tanh(V a) { return unary(Opc::Tanh, a); }
  V neg(V a) { return unary(Opc::Neg, a); }
  V erf(V a);  // f32, absolute error under 2e-7
  // C's pow on f32, with std::pow's special cases (a negative base with an
  // integral exponent, zero bases, y == 0 and x == 1 giving 1); Opc::Pow
  // itself is only ever given a base >= 0, where every emitter agrees.
  V pow(V x, V y);

  V compare(Opc op, V a, V b);
  V lt(V a, V b) { return compare(Opc::Lt, a, b); }
  V le(V a, V b) { return compare(Opc::Le, a, b); }
  V gt(V a, V b) { return compare(Opc::Gt, a, b); }
  V ge(V a, V b) { return compare(Opc::Ge, a, b); }
  V eq(V a, V b) { return compare(Opc::Eq, a, b); }
  V ne(V a, V b) { return compare(Opc::Ne, a, b); }
  V isNan(V a) { return ne(a, a); }
  V select(V cond, V a, V b);
  V fma(V a, V b, V c);  // f32 a * b + c (kir.h: rounded once, or as two roundings)
  V convert(V a, Scalar to);  // no-op when already `to`
  // The f32 value x rounded to the nearest value of float dtype t (round to
  // nearest even, as a store to t rounds; f16 overflows to an infinity and
  // keeps its subnormals; NaN stays NaN), still as an f32 value: what a
  // kernel computes where the graph rounds an intermediate to a two-byte
  // dtype. No-op for f32.
  V roundTo(V x, DType t);
  V bitcast(V a, Scalar to);

  V load(int32_t buffer, V index);
  // Elements index .. index + width - 1 of a read-only buffer as one wide
  // access (kir.h, LoadVec): index must be a multiple of width and width
  // elements at most 16 bytes; width 1 is a plain load.
  std::vector<V> loadVec(int32_t buffer, V index, int64_t width);
  // The same elements as the buffer stores them (kir.h's value of the
  // element: f16 and bf16 as themselves), for kernels that keep two-byte
  // values, as a matrix op's operands.
  std::vector<V> loadVecStored(int32_t buffer, V index, int64_t width);
  void store(int32_t buffer, V index, V value);  // value converted to the buffer's value type first
  V sharedLoad(int32_t array, V index);
  // Words index .. index + width - 1 of a workgroup array read at once
  // (kir.h, SharedLoadVec): index and the array's offset multiples of width
  // (2, 4 or 8, at most 16 bytes); width 1 is a plain sharedLoad.
  std::vector<V> sharedLoadVec(int32_t array, V index, int64_t width);
  void sharedStore(int32_t array, V index, V value);
  // values.size() (1, 2, 4 or 8) consecutive words from index at once (kir.h,
  // SharedStoreVec), under sharedLoadVec's alignment rules.
  void sharedStoreVec(int32_t array, V index, const std::vector<V>& values);

  // Warp operations (kir.h): x of lane (lane ^ mask) of the warp; the
  // warp's D = A * B + C of matrix op `op` from each lane's a (aRegs), b
  // (bRegs) and c (4) elements, giving its 4 elements of D. Both stand only
  // in workgroup-uniform control flow, in a workgroup of whole warps.
  V shuffleXor(V x, int64_t mask);
  std::array<V, 4> mma(MatrixOp op, const std::vector<V>& a, const std::vector<V>& b, const std::array<V, 4>& c);
  // A warpgroup's D = A * B + C from workgroup array `array` (kir.h,
  // MmaShared), A and B's transpose each at (start, stride of its 8-row
  // blocks) in the 128-byte swizzle, C the n/2 values of `c`; or, chained,
  // accumulating onto `onto` (an earlier mmaShared). Both give the
  // MmaShared, whose D mmaResult reads (after the chain's last link) for
  // accumulators; mmaWait waits until at most n chains are pending and
  // gives xs back as ordinary values (kir.h, MmaWait).
  struct SharedTile {
    V start, rowStride;
  };
  V mmaShared(MatrixOp op, int32_t array, SharedTile a, SharedTile b, const std::vector<V>& c);
  V mmaShared(V onto, SharedTile a, SharedTile b);
  // The same product with A from the threads (the eight values `a` of each,
  // kir.h's MmaSharedB) and B held N-major at (start, stride of its 8-row
  // blocks, stride of its 64-column blocks); likewise chained.
  struct NMajorTile {
    V start, rowStride, blockStride;
  };
  V mmaSharedB(MatrixOp op, int32_t array, const std::vector<V>& a, NMajorTile b, const std::vector<V>& c);
  V mmaSharedB(V onto, const std::vector<V>& a, NMajorTile b);
  std::vector<V> mmaResult(V m);
  std::vector<V> mmaWait(int64_t n, const std::vector<V>& xs);
  // x with its low 13 mantissa bits cleared: the TF32 value Mma takes
  // (truncated toward zero; NaN stays NaN, an infinity stays infinite).
  V toTf32(V x);

  // Asynchronous copies (kir.h): 16 bytes of `buffer` from element gindex
  // into workgroup array `array` from element sindex, or zeros where ok is
  // false; the commit closes the thread's group, the wait leaves at most
  // `pending` closed groups unfinished.
  void copyAsync(int32_t buffer, V gindex, int32_t array, V sindex, V ok);
  void asyncCommit();
  void asyncWait(int64_t pending);

  int32_t var(Scalar type, V init);
  V get(int32_t var);
  void set(int32_t var, V value);

  void forRange(V lo, V hi, int64_t step, const std::function<void(V)>& body);
  // body(i) for i = 0 .. count - 1 (count known here): a loop over whole
  // groups of `unroll` with the body written unroll times, then the rest
  // written out with constant i.
  void forUnrolled(int64_t count, int64_t unroll, const std::function<void(V)>& body);
  // The widest wide workgroup-memory access, 4, 2 or 1 words, dividing count.
  static int64_t wideRun(int64_t count) { return count % 4 == 0 ? 4 : count % 2 == 0 ? 2 : 1; }
  void ifThen(V cond, const std::function<void()>& then);
  void ifElse(V cond, const std::function<void()>& then, const std::function<void()>& orelse);
  void barrier();

  Scalar typeOf(V v) const { return k_.insts[size_t(v)].type; }
  const Kernel& kernel() const { return k_; }
  Kernel finish();

 private:
  V emit(Inst inst);
  V fromStorage(int32_t buffer, V raw);  // a loaded value as its graph dtype's value
  Block& current();
  void fill(Block Inst::*which, V owner, const std::function<void()>& body);

  Kernel k_;
  std::vector<DType> dtypes_;  // each buffer's graph dtype
  std::vector<std::pair<V, Block Inst::*>> open_;  // enclosing For/If blocks being filled
};

}  // namespace poot::kir

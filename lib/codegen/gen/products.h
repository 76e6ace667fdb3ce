// What the MatMul generators (matmul.cpp, gemv_mma.cpp) share: a
// request's products (one, or a product group's, fusion.h) with their sizes
// and batch offsets, the walk of a launch's workgroups over their blocks,
// and the steps of K through asynchronous-copy stages. Private to lib/codegen/gen.
#pragma once

#include <array>
#include <functional>
#include <vector>

#include "codegen/gen/index.h"
#include "plan/schedule.h"

namespace poot::gen {

// One product's sizes and each operand's batch offset for a batch index:
// product p of the request reads a (operand 0) and b (operand 1 + p) into
// result p. A request has one product, or a product group's (fusion.h).
struct Product {
  int64_t m = 0, k = 0, n = 0, batches = 1;
  bool transposed = false;
  Shape batch, ab, bb;

  Product(const KernelRequest& r, size_t p) {
    const Shape &as = r.operands[0].shape, &bs = r.operands[1 + p].shape, &os = r.results[p].shape;
    m = as[as.size() - 2], k = as.back(), n = os.back();
    transposed = flagAttr(r.attrs, "transpose_b");
    batch = Shape(os.begin(), os.end() - 2);
    ab = Shape(as.begin(), as.end() - 2);
    bb = Shape(bs.begin(), bs.end() - 2);
    batches = numel(batch);
  }
  // Element offsets of batch `bi`'s a, b and result matrices.
  std::array<V, 3> bases(Builder& b, V bi) const {
    std::vector<V> bc = unravel(b, bi, batch);
    return {b.mul(offsetOf(b, bc, bcastStrides(ab, batch)), b.i32(m * k)),
            b.mul(offsetOf(b, bc, bcastStrides(bb, batch)), b.i32(k * n)), b.mul(bi, b.i32(m * n))};
  }
  // Index of b's element (kk, col) from its batch base.
  V bAt(Builder& b, V base, V kk, V col) const {
    return transposed ? b.add(base, b.add(b.mul(col, b.i32(k)), kk)) : b.add(base, b.add(b.mul(kk, b.i32(n)), col));
  }
  int64_t count() const { return batches * m * n; }
};

inline std::vector<Product> productsOf(const KernelRequest& r) {
  std::vector<Product> ps;
  for (size_t p = 0; p < r.results.size(); ++p) ps.emplace_back(r, p);
  return ps;
}

// Workgroup `wid` as (split, product, batch, row block, column block): the
// products' blocks one after another, column blocks fastest. The body runs
// once for the product the workgroup serves (workgroup-uniform, so it may
// hold barriers; a group's body is written out once for each product, each
// with its own buffers), none past the last block.
inline void perWorkgroup(Builder& b, const std::vector<Product>& ps, int64_t rowBlock, int64_t colBlock, int64_t splits,
                  const std::function<void(size_t p, V bi, V r0, V c0, V split)>& body) {
  std::vector<int64_t> start = {0};
  for (const Product& p : ps)
    start.push_back(start.back() + p.batches * ceilDiv(p.m, rowBlock) * ceilDiv(p.n, colBlock));
  int64_t blocks = start.back();
  V wid = b.workgroupId();
  b.ifThen(b.lt(wid, b.i32(blocks * splits)), [&] {
    V block = splits > 1 ? remBy(b, wid, blocks) : wid;
    V split = splits > 1 ? divBy(b, wid, blocks) : b.i32(0);
    for (size_t i = 0; i < ps.size(); ++i) {
      auto serve = [&] {
        int64_t nb = ceilDiv(ps[i].n, colBlock), mb = ceilDiv(ps[i].m, rowBlock);
        V local = start[i] ? b.sub(block, b.i32(start[i])) : block;
        V c0 = b.mul(remBy(b, local, nb), b.i32(colBlock));
        V r0 = b.mul(remBy(b, divBy(b, local, nb), mb), b.i32(rowBlock));
        body(i, divBy(b, local, nb * mb), r0, c0, split);
      };
      if (ps.size() == 1) serve();
      else b.ifThen(b.binary(Opc::And, b.ge(block, b.i32(start[i])), b.lt(block, b.i32(start[i + 1]))), serve);
    }
  });
}

// A pipelined product's steps of K (gemm-mma, gemv-mma) over ST stage
// buffers: `issue(stage, k0)` copies step k0 into a stage as one group. The first ST - 1 steps are issued
// ahead; at each step the threads wait until only the groups after its own
// may still be in flight, pass a barrier (every thread's copies of this step
// have landed, and every warp is done with the stage the next copies
// overwrite), issue the copies ST - 1 steps ahead and `compute` on the
// step's stage; the copies past the last step (zeros) are waited for at the
// end.
inline void pipelineSteps(Builder& b, V kLo, V kHi, int64_t BK, int64_t ST,
                          const std::function<void(V, V)>& issue, const std::function<void(V)>& compute) {
  for (int64_t st = 0; st + 1 < ST; ++st) issue(b.i32(st), b.add(kLo, b.i32(st * BK)));
  b.forRange(kLo, kHi, BK, [&](V k0) {
    V step = divBy(b, b.sub(k0, kLo), BK);
    b.asyncWait(ST - 2);
    b.barrier();
    issue(remBy(b, b.add(step, b.i32(ST - 1)), ST), b.add(k0, b.i32((ST - 1) * BK)));
    compute(remBy(b, step, ST));
  });
  b.asyncWait(0);
}

}  // namespace poot::gen

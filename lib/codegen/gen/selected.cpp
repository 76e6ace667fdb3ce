// How genSelectedAttention writes the block-selected streaming form over the
// shared streaming body (streaming.h). Query row (b, h, i) with position
// p = qpos[b, i] visits K + 1 block slots in a workgroup-uniform loop: the K
// selected ids, then its own block p / block. A slot counts when its block is
// in [0, Lk / block) and no earlier slot named it (the own block last, so a
// repeat or an id equal to the own block visits its keys once, as the
// oracle's set does); it streams keys [blk * block, min((blk + 1) * block,
// p + 1)), which keeps the causal rule t <= p. Positions and ids are clamped
// into -1..=Lk and -1..=Lk / block first, which keeps their meaning (a
// negative position sees nothing, a position past Lk sees every selected
// key) and lets an i64 operand run in i32.
#include "codegen/gen/generators.h"
#include "codegen/gen/index.h"
#include "codegen/gen/streaming.h"

namespace poot {

Expected<kir::Kernel> genSelectedAttention(const GenInput& in) {
  using attn::V;
  const KernelRequest& r = in.request;
  if (r.schedule.lanes < 1)
    return makeError(ErrorKind::Capability, {}, "selected attention schedule " + r.schedule.kind + " has no lanes");
  if (auto indexable = gen::checkIndexWidth(in); !indexable) return indexable.error();
  TypeQuery attrs = attn::attrsOf(r);
  const Shape &qs = r.operands[0].shape, &ks = r.operands[1].shape;
  int64_t B = qs[0], Hq = qs[1], Lq = qs[2], Dk = qs[3], Lk = ks[2], Hkv = ks[1], Dv = r.results[0].shape[3];
  int64_t K = r.operands[3].shape[2], nrep = attrs.attrInt("n_rep");
  int64_t block = attrs.attrInt("block"), NB = Lk / block, lanes = r.schedule.lanes, rows = B * Hq * Lq;

  attn::Builder b(in.entry, lanes, in.grid[0]);
  const char* names[] = {"q", "k", "v", "ids", "qpos"};
  for (size_t i = 0; i < 5; ++i) b.buffer(names[i], r.operands[i].dtype, numel(r.operands[i].shape), false);
  const int32_t q = 0, k = 1, v = 2, ids = 3, qpos = 4;
  int32_t out = b.buffer("out", r.results[0].dtype, rows * Dv, true);
  attn::LaneStates states(b, lanes, Dv);
  V row = b.workgroupId(), lane = b.local();
  b.ifThen(b.lt(row, b.i32(rows)), [&] {
    V ri = b.rem(row, b.i32(Lq)), bh = b.div(row, b.i32(Lq));
    V bi = b.div(bh, b.i32(Hq)), g = b.div(b.rem(bh, b.i32(Hq)), b.i32(nrep));
    V bl = b.add(b.mul(bi, b.i32(Lq)), ri);  // (b, i) in ids and qpos
    V p = attn::loadIndex(b, qpos, bl, -1, Lk);
    V own = b.div(p, b.i32(block));
    V idAt = b.mul(bl, b.i32(K));
    V qAt = b.mul(row, b.i32(Dk)), kvRow = b.mul(b.add(b.mul(bi, b.i32(Hkv)), g), b.i32(Lk));
    attn::KeyReader keys{[&](V t) { return b.add(kvRow, t); },
                         [&](V, V at) {
                           V dot = attn::dotProduct(b, q, qAt, k, b.mul(at, b.i32(Dk)), Dk, b.f32(0));
                           return attn::transformScore(b, r, dot);
                         },
                         [&](V at, V d) { return b.load(v, b.add(b.mul(at, b.i32(Dv)), d)); }};
    states.begin(lane);
    b.forRange(b.i32(0), b.i32(K + 1), 1, [&](V j) {
      // Slot j's block: ids[j], or the own block for j == K (the load's index
      // clamped so that it stays in bounds there; with K == 0 there is no id).
      V blk = own;
      if (K > 0) {
        V word = attn::loadIndex(b, ids, b.add(idAt, b.min(j, b.i32(K - 1))), -1, NB);
        blk = b.select(b.lt(j, b.i32(K)), word, own);
      }
      int32_t fresh = b.var(kir::Scalar::Bool, b.binary(kir::Opc::And, b.ge(blk, b.i32(0)), b.lt(blk, b.i32(NB))));
      b.forRange(b.i32(0), j, 1, [&](V e) {
        V earlier = attn::loadIndex(b, ids, b.add(idAt, e), -1, NB);
        b.set(fresh, b.binary(kir::Opc::And, b.get(fresh), b.ne(earlier, blk)));
      });
      b.ifThen(b.get(fresh), [&] {
        V lo = b.mul(blk, b.i32(block));
        states.stream(lo, b.min(b.add(lo, b.i32(block)), b.add(p, b.i32(1))), keys);
      });
    });
    states.publish();
    attn::foldInto(b, states.states(), lane, lanes, Dv, out, b.mul(row, b.i32(Dv)));
  });
  return b.finish();
}

}  // namespace poot

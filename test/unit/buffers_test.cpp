// Unit tests of the buffer plan (lib/plan/buffers.h): which values get which
// role, liveness and arena coloring (disjoint lifetimes share an offset,
// overlapping ones never do, offsets are 256-byte aligned), views aliasing
// their operand (and their dispatches dropped), donated state buffers and the
// refusal to read a state after its in-place write, split-KV scratch sharing
// one slot across layers so the arena does not grow with them, bindings in
// reads-then-writes order, and determinism. Plans come from planGraph on the
// lavapipe profile, and for the examples from the full pass pipeline.
#include <doctest/doctest.h>

#include <string>

#include "ir/fusion.h"
#include "ir/io.h"
#include "ir/text.h"
#include "passes/pass.h"
#include "plan/buffers.h"
#include "plan/planner.h"
#include "plan/plan_text.h"

#include "testing.h"

using namespace poot;

namespace {

const std::string kSource = POOT_SOURCE_DIR;

DeviceProfile lavapipe() { return testing::loadTarget("lavapipe"); }

using testing::parse;

Plan planned(const Graph& g) {
  auto p = planGraph(g, lavapipe());
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  auto s = planBuffers(*p);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  return p.take();
}

const Buffer& bufferOf(const Plan& p, const std::string& name) {
  for (const Buffer& b : p.buffers)
    if (b.name == name) return b;
  FAIL("no buffer named " << name);
  return p.buffers.front();
}

int32_t indexOf(const Plan& p, const std::string& name) { return int32_t(&bufferOf(p, name) - p.buffers.data()); }

bool arena(const Buffer& b) { return b.role == BufferRole::Temp || b.role == BufferRole::Scratch; }

// The invariants every plan keeps: aligned arena offsets within the arena, no
// two arena buffers sharing bytes while both live, views at their base's
// offset, every dispatch bound to as many buffers as it accesses.
void checkInvariants(const Plan& p) {
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& a = p.buffers[i];
    if (a.role == BufferRole::View) {
      REQUIRE(a.aliasOf >= 0);
      CHECK(p.buffers[size_t(a.aliasOf)].role != BufferRole::View);
      CHECK(a.offset == p.buffers[size_t(a.aliasOf)].offset);
    }
    if (!arena(a)) continue;
    CAPTURE(a.name);
    CHECK(a.offset % kArenaAlign == 0);
    CHECK(a.offset + a.bytes <= p.arenaBytes);
    CHECK(a.first >= 0);
    CHECK(a.first <= a.last);
    for (size_t j = i + 1; j < p.buffers.size(); ++j) {
      const Buffer& b = p.buffers[j];
      if (!arena(b)) continue;
      bool live = a.first <= b.last && b.first <= a.last;
      bool shared = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      CAPTURE(b.name);
      CHECK(!(live && shared));
    }
  }
  // Every arena buffer a dispatch binds is live where the dispatch runs (a
  // fused kernel runs at its group's root, after the members that read it).
  for (const Dispatch& d : p.dispatches) {
    CHECK(d.bindings.size() == d.reads.size() + d.writes.size());
    for (int32_t b : d.bindings) {
      const Buffer& x = p.buffers[size_t(b)];
      if (!arena(x)) continue;
      CAPTURE(x.name);
      CHECK(x.first <= d.eqn);
      CHECK(d.eqn <= x.last);
    }
  }
}

Graph compiledExample(const std::string& example) {
  auto text = readFile(kSource + "/examples/graphs/" + example);
  REQUIRE(bool(text));
  Graph g = parse(*text);
  testing::runPasses(g, lavapipe());
  return g;
}

// `layers` split-KV decodes in a chain: on lavapipe (2 compute units) one row
// over 512 keys splits in two, so every layer declares a scratch.
Graph attentionLayers(int layers) {
  std::string text = "graph layers\ninput %q : f32[1,1,1,64]\ninput %k : f32[1,1,512,64]\ninput %v : f32[1,1,512,64]\n";
  std::string x = "q";
  for (int l = 0; l < layers; ++l) {
    std::string a = "a" + std::to_string(l), h = "h" + std::to_string(l);
    text += "%" + a + " = Attention(%" + x + ", %k, %v) {scale=0.125, n_rep=1, key=dense, mask=none, bound=capacity}"
            " : f32[1,1,1,64]\n";
    text += "%" + h + " = Add(%" + a + ", %" + x + ") : f32[1,1,1,64]\n";
    x = h;
  }
  return parse(text + "output %" + x + "\n");
}

}  // namespace

TEST_CASE("buffers: parameters and exports get their own buffers, results go to the arena") {
  Plan p = planned(parse("graph g\ninput %x : f32[64]\nweight %w : f32[64]\nslot %pos : i32[] range [0, 7]\n"
                         "%a = Mul(%x, %w) : f32[64]\n"
                         "%b = Exp(%a) : f32[64]\n"
                         "%y = Add(%b, %x) : f32[64]\n"
                         "output %y\n"));
  CHECK(bufferOf(p, "x").role == BufferRole::Input);
  CHECK(bufferOf(p, "w").role == BufferRole::Weight);
  CHECK(bufferOf(p, "pos").role == BufferRole::Slot);
  CHECK(bufferOf(p, "pos").lo == 0);
  CHECK(bufferOf(p, "pos").hi == 7);
  CHECK(bufferOf(p, "a").role == BufferRole::Temp);
  CHECK(bufferOf(p, "y").role == BufferRole::Output);
  CHECK(bufferOf(p, "x").first == -1);  // lives the whole run
  CHECK(bufferOf(p, "a").bytes == 256);
  CHECK(bufferOf(p, "a").first == 0);
  CHECK(bufferOf(p, "a").last == 1);
  CHECK(bufferOf(p, "b").first == 1);
  CHECK(bufferOf(p, "b").last == 2);
  checkInvariants(p);
}

TEST_CASE("buffers: disjoint lifetimes share an offset, overlapping ones do not") {
  Plan p = planned(parse("graph g\ninput %x : f32[64]\n"
                         "%a = Exp(%x) : f32[64]\n"
                         "%b = Neg(%a) : f32[64]\n"
                         "%c = Exp(%b) : f32[64]\n"
                         "%d = Neg(%c) : f32[64]\n"
                         "%y = Exp(%d) : f32[64]\n"
                         "output %y\n"));
  // a [0,1], b [1,2], c [2,3], d [3,4]: a and c, b and d never live together.
  CHECK(bufferOf(p, "a").offset == bufferOf(p, "c").offset);
  CHECK(bufferOf(p, "b").offset == bufferOf(p, "d").offset);
  CHECK(bufferOf(p, "a").offset != bufferOf(p, "b").offset);
  CHECK(bufferOf(p, "b").offset != bufferOf(p, "c").offset);
  CHECK(p.arenaBytes == 2 * kArenaAlign);
  checkInvariants(p);
}

TEST_CASE("buffers: larger buffers are placed first and small ones fill the gaps") {
  Plan p = planned(parse("graph g\ninput %x : f32[1024]\ninput %s : f32[16]\n"
                         "%big = Exp(%x) : f32[1024]\n"                             // [0,1]
                         "%t = ReduceSum(%big) {axis=0, keepdim=true} : f32[1]\n"   // [1,2]
                         "%big2 = Mul(%x, %t) : f32[1024]\n"                        // [2,4]
                         "%small = Exp(%s) : f32[16]\n"                             // [3,6]
                         "%u = ReduceSum(%big2) {axis=0, keepdim=true} : f32[1]\n"  // [4,5]
                         "%w = Exp(%u) : f32[1]\n"                                  // [5,6]
                         "%y = Mul(%small, %w) : f32[16]\n"
                         "output %y\n"));
  // big and big2 never live together: one 4 KiB slot for both. t, small and u
  // each overlap one of them and go above it; w, live after big2, takes the
  // gap big2 left rather than growing the arena.
  CHECK(bufferOf(p, "big").offset == 0);
  CHECK(bufferOf(p, "big2").offset == 0);
  CHECK(bufferOf(p, "t").offset == 4096);
  CHECK(bufferOf(p, "small").offset == 4096);
  CHECK(bufferOf(p, "u").offset == 4096 + kArenaAlign);
  CHECK(bufferOf(p, "w").offset == 0);
  CHECK(p.arenaBytes == 4096 + 2 * kArenaAlign);
  checkInvariants(p);
}

TEST_CASE("buffers: a reshape and a layout-keeping transpose alias their operand") {
  Plan p = planned(parse("graph g\ninput %x : f32[1,4,16]\n"
                         "%a = Exp(%x) : f32[1,4,16]\n"
                         "%r = Reshape(%a) : f32[4,1,16]\n"
                         "%t = Transpose(%r) {perm=[1, 0, 2]} : f32[1,4,16]\n"   // moves a size-1 axis: a view
                         "%u = Transpose(%a) {perm=[0, 2, 1]} : f32[1,16,4]\n"   // a real transpose: a copy
                         "%b = Neg(%t) : f32[1,4,16]\n"
                         "%c = Neg(%u) : f32[1,16,4]\n"
                         "%y = Add(%b, %b) : f32[1,4,16]\n"
                         "%z = Reshape(%c) : f32[64]\n"                          // an output is never a view
                         "output %y\noutput %z\n"));
  const Buffer& a = bufferOf(p, "a");
  const Buffer& r = bufferOf(p, "r");
  const Buffer& t = bufferOf(p, "t");
  CHECK(r.role == BufferRole::View);
  CHECK(r.aliasOf == indexOf(p, "a"));
  CHECK(t.role == BufferRole::View);
  CHECK(t.aliasOf == indexOf(p, "a"));  // the base, not the view it was taken of
  CHECK(t.offset == a.offset);
  CHECK(bufferOf(p, "u").role == BufferRole::Temp);
  CHECK(bufferOf(p, "z").role == BufferRole::Output);
  // a lives until the last reader of any view of it (b, eqn 4).
  CHECK(a.first == 0);
  CHECK(a.last == 4);
  // View eqns have no dispatch, and nothing binds the operand twice.
  for (const Dispatch& d : p.dispatches) {
    CHECK(d.eqn != 1);
    CHECK(d.eqn != 2);
  }
  CHECK(p.dispatches.size() == p.source.eqns.size() - 2);
  for (const Kernel& k : p.kernels) {
    bool viewKernel = k.request.op == Op::Transpose && k.request.operands[0].shape == Shape{4, 1, 16};
    CHECK(!viewKernel);
  }
  CHECK(p.key == planKey(p));
  // b reads the view t: its binding names the view, which the runtime resolves to a.
  for (const Dispatch& d : p.dispatches)
    if (d.eqn == 4) CHECK(d.bindings == std::vector<int32_t>{indexOf(p, "t"), indexOf(p, "b")});
  checkInvariants(p);
}

TEST_CASE("buffers: a state's new value is written into the state's buffer") {
  Plan p = planned(parse("graph g\nslot %pos : i32[] range [0, 7]\ninput %x : f32[1,4]\nstate %k : f32[8,4]\n"
                         "%k2 = DynamicUpdateSlice(%k, %x, %pos) {axis=0} : f32[8,4]\n"
                         "%s = ReduceSum(%k2) {axis=0, keepdim=true} : f32[1,4]\n"
                         "%y = Mul(%s, %x) : f32[1,4]\n"
                         "output %y\nstate_out %k = %k2\n"));
  int32_t k = indexOf(p, "k");
  CHECK(p.buffers[size_t(k)].role == BufferRole::State);
  for (const Buffer& b : p.buffers) CHECK(b.name != "k2");  // donated: no buffer of its own
  std::vector<int32_t> held = valueBuffers(p);
  for (const StateOut& s : p.source.stateOuts) CHECK(held[size_t(s.value)] == k);
  // The update reads the state and writes it in place.
  const Dispatch& dus = p.dispatches[0];
  CHECK(dus.eqn == 0);
  CHECK(dus.bindings == std::vector<int32_t>{k, indexOf(p, "x"), indexOf(p, "pos"), k});
  CHECK(p.dispatches[1].bindings == std::vector<int32_t>{k, indexOf(p, "s")});
  checkInvariants(p);
}

TEST_CASE("buffers: reading a state after its in-place write is refused") {
  Graph g = parse("graph g\nslot %pos : i32[] range [0, 7]\ninput %x : f32[1,4]\nstate %k : f32[8,4]\n"
                  "%old = Reshape(%k) : f32[32]\n"
                  "%k2 = DynamicUpdateSlice(%k, %x, %pos) {axis=0} : f32[8,4]\n"
                  "%y = Exp(%old) : f32[32]\n"
                  "output %y\nstate_out %k = %k2\n");
  auto p = planGraph(g, lavapipe());
  REQUIRE(bool(p));
  auto s = planBuffers(*p);
  REQUIRE(!s);
  CHECK(s.error().kind == ErrorKind::Verify);
  CHECK(s.error().str() == "t.pg:7:6: error: reads state %k after its new value %k2 was written in place over it (eqn 1)");
}

TEST_CASE("buffers: split-KV scratch is live during its eqn and shares one slot across layers") {
  Plan p = planned(attentionLayers(3));
  std::vector<const Buffer*> scratch;
  for (const Buffer& b : p.buffers)
    if (b.role == BufferRole::Scratch) scratch.push_back(&b);
  REQUIRE(scratch.size() == 3);
  CHECK(scratch[0]->name == "a0.scratch");
  CHECK(scratch[0]->bytes == 2 * (64 + 2) * 4);  // 1 row * 2 splits * (dv + 2) floats
  CHECK(scratch[0]->type == Type{DType::F32, {2 * 66}});
  for (const Buffer* s : scratch) {
    CHECK(s->first == s->last);
    CHECK(s->offset == scratch[0]->offset);
  }
  // Partials read the operands and write the scratch; the combine reads the
  // scratch and writes the result.
  int32_t s0 = indexOf(p, "a0.scratch");
  REQUIRE(p.dispatches.size() >= 2);
  CHECK(p.dispatches[0].bindings ==
        std::vector<int32_t>{indexOf(p, "q"), indexOf(p, "k"), indexOf(p, "v"), s0});
  CHECK(p.dispatches[1].bindings == std::vector<int32_t>{s0, indexOf(p, "a0")});
  checkInvariants(p);
}

TEST_CASE("buffers: the arena does not grow with the layer count") {
  // Each layer's residual lives across the next layer's attention, so from
  // three layers on the pattern repeats: one scratch slot, a slot for the
  // attention result, two for the residuals. One or two layers need less (the
  // last residual is the output, outside the arena).
  Plan three = planned(attentionLayers(3));
  CHECK(three.arenaBytes == 3 * kArenaAlign + 3 * kArenaAlign);  // 528 scratch bytes take 3 units
  CHECK(planned(attentionLayers(1)).arenaBytes <= three.arenaBytes);
  CHECK(planned(attentionLayers(2)).arenaBytes <= three.arenaBytes);
  for (int layers : {4, 5, 16, 32}) {
    CAPTURE(layers);
    Plan p = planned(attentionLayers(layers));
    CHECK(p.arenaBytes == three.arenaBytes);
    checkInvariants(p);
  }
}

TEST_CASE("buffers: the tiny Llama examples plan and keep every invariant") {
  for (const char* example : {"tiny-llama-decode.pg", "tiny-llama-decode-live.pg", "tiny-llama-decode-paged.pg",
                              "tiny-llama-prefill.pg", "tiny-gemma2-decode.pg", "tiny-deepseek-v2-decode.pg"}) {
    CAPTURE(example);
    Plan p = planned(compiledExample(example));
    CHECK(p.arenaBytes > 0);
    checkInvariants(p);
    // Every state is donated: state_out values bind to the state's buffer.
    std::vector<int32_t> held = valueBuffers(p);
    for (const StateOut& s : p.source.stateOuts) {
      CHECK(held[size_t(s.value)] == held[size_t(s.state)]);
      CHECK(p.buffers[size_t(held[size_t(s.state)])].role == BufferRole::State);
    }
    // Every value of a current eqn has a buffer, except those a fused
    // kernel computes and reads only itself; the fuse pass made some.
    auto groups = fusionGroups(p.source);
    REQUIRE(bool(groups));
    CHECK(!groups->empty());
    std::vector<uint8_t> inside(p.source.values.size(), 0);
    for (const FusionGroup& grp : *groups)
      for (int32_t m : grp.members) {
        ValueId r = p.source.eqns[size_t(m)].results[0];
        inside[size_t(r)] = std::find(grp.outputs.begin(), grp.outputs.end(), r) == grp.outputs.end();
      }
    for (const Eqn& e : p.source.eqns)
      for (ValueId r : e.results) CHECK((held[size_t(r)] >= 0) == !inside[size_t(r)]);
  }
}

TEST_CASE("buffers: planning is deterministic") {
  Graph g = compiledExample("tiny-llama-decode.pg");
  Plan a = planned(g), b = planned(g);
  CHECK(printPlan(a) == printPlan(b));
  // Planning the buffers again changes nothing.
  std::string once = printPlan(a);
  REQUIRE(bool(planBuffers(a)));
  CHECK(printPlan(a) == once);
}

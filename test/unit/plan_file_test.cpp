// Unit tests of the plan file: writePlan (lib/plan/plan_file.h) and the
// runtime's reader (lib/runtime/plan_reader.h). A compiled tiny Llama plan
// round-trips with every field equal; the same plan always gives the same
// bytes; files that are truncated, corrupted, of another kind or of another
// schema version are refused with ErrorKind::Format and a message that says
// which, and a plan whose indices or arena do not hold together is refused
// too. Random corruption never crashes the reader (run it under the
// sanitizer build too).
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <unistd.h>

#include "ir/binary.h"
#include "ir/io.h"
#include "ir/text.h"
#include "passes/pass.h"
#include "plan/buffers.h"
#include "plan/plan_file.h"
#include "plan/planner.h"
#include "plan/request.h"
#include "runtime/plan_reader.h"
#include "schemas/plan_generated.h"

#include "testing.h"

using namespace poot;

namespace {

const std::string kSource = POOT_SOURCE_DIR;

DeviceProfile lavapipe() { return testing::loadTarget("lavapipe"); }

Plan compiledPlan(const std::string& example) {
  auto text = readFile(kSource + "/examples/graphs/" + example);
  REQUIRE(bool(text));
  auto g = parseGraph(*text, example);
  REQUIRE(bool(g));
  DeviceProfile d = lavapipe();
  PassContext ctx;
  for (int i = 0; i < 3; ++i) ctx.gridLimits[i] = d.grid_limits[i];
  auto s = runPipeline(*g, ctx, {});
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  auto p = planGraph(*g, d);
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  p->target = d.target;
  p->deviceArch = d.arch;
  auto b = planBuffers(*p);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  return p.take();
}

// A plan with something in every field codegen fills later.
Plan fullPlan() {
  Plan p = compiledPlan("tiny-llama-decode.pg");
  REQUIRE(!p.kernels.empty());
  for (int i = 0; i < 300; ++i) p.kernels[0].blob.push_back(uint8_t(i * 7));
  REQUIRE(!p.dispatches.empty());
  p.dispatches[0].params = {3, -1, int64_t(1) << 40};
  return p;
}

rt::PlanFile read(const std::string& bytes) {
  auto f = rt::readPlanFile(bytes, "t.plan");
  REQUIRE_MESSAGE(bool(f), (f ? "" : f.error().str()));
  return f.take();
}

std::string refusal(const std::string& bytes) {
  auto f = rt::readPlanFile(bytes, "t.plan");
  REQUIRE(!f);
  CHECK(f.error().kind == ErrorKind::Format);
  return f.error().str();
}

bool startsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

}  // namespace

TEST_CASE("plan file: a compiled plan round-trips with every field equal") {
  Plan p = fullPlan();
  rt::PlanFile f = read(writePlan(p));
  CHECK(f.version == kPlanFileVersion);
  CHECK(f.device.name == p.deviceName);
  CHECK(f.device.name == "lavapipe");
  CHECK(f.device.hash == p.deviceHash);
  CHECK(f.device.target == rt::Target::Spirv);
  CHECK(f.device.arch == p.deviceArch);
  CHECK(f.key == p.key);
  CHECK(f.arenaBytes == p.arenaBytes);
  CHECK(printGraph(f.source) == printGraph(p.source));

  REQUIRE(f.buffers.size() == p.buffers.size());
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& a = p.buffers[i];
    const rt::Buffer& b = f.buffers[i];
    CAPTURE(a.name);
    CHECK(b.name == a.name);
    CHECK(int(b.role) == int(a.role));
    CHECK(b.type == a.type);
    CHECK(b.offset == a.offset);
    CHECK(b.bytes == a.bytes);
    CHECK(b.alias == a.aliasOf);
    CHECK(b.lo == a.lo);
    CHECK(b.hi == a.hi);
    CHECK(b.first == a.first);
    CHECK(b.last == a.last);
    // Value indices are the embedded graph's: the same value by name.
    CHECK((b.value < 0) == (a.value < 0));
    if (a.value >= 0) CHECK(f.source.value(b.value).name == p.source.value(a.value).name);
  }

  REQUIRE(f.kernels.size() == p.kernels.size());
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const Kernel& a = p.kernels[k];
    const rt::Kernel& b = f.kernels[k];
    CAPTURE(a.entry);
    CHECK(b.entry == a.entry);
    CHECK(b.target == rt::Target::Spirv);
    CHECK(b.blob == a.blob);
    CHECK(b.workgroupSize == a.request.schedule.workgroupSize);
    CHECK(b.workgroupMemory == a.request.schedule.workgroupMemory);
    CHECK(b.request.op == a.request.op);
    CHECK(b.request.operands == a.request.operands);
    CHECK(b.request.results == a.request.results);
    CHECK(b.request.attrs == a.request.attrs);
    CHECK(b.request.schedule.kind == a.request.schedule.kind);
    CHECK(b.request.schedule.lanes == a.request.schedule.lanes);
    CHECK(b.request.schedule.splits == a.request.schedule.splits);
    CHECK(b.request.text == printRequest(a.request));
  }
  CHECK(f.kernels[0].blob.size() == 300);

  REQUIRE(f.dispatches.size() == p.dispatches.size());
  for (size_t i = 0; i < p.dispatches.size(); ++i) {
    const Dispatch& a = p.dispatches[i];
    const rt::Dispatch& b = f.dispatches[i];
    CHECK(b.kernel == a.kernel);
    CHECK(b.eqn == a.eqn);
    for (int k = 0; k < 3; ++k) CHECK(b.grid[k] == a.grid[k]);
    CHECK(b.bindings == a.bindings);
    CHECK(size_t(b.reads) == a.reads.size());
    CHECK(b.params == a.params);
  }
  CHECK(f.dispatches[0].params == std::vector<int64_t>{3, -1, int64_t(1) << 40});

  std::vector<int32_t> held = valueBuffers(p);
  REQUIRE(f.slots.size() == 1);
  CHECK(f.slots[0].name == "pos");
  CHECK(f.slots[0].lo == 0);
  CHECK(f.slots[0].hi == 63);
  CHECK(f.buffers[size_t(f.slots[0].buffer)].name == "pos");
  REQUIRE(f.outputs.size() == p.source.outputs.size());
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    CHECK(f.outputs[i].name == p.source.value(p.source.outputs[i].value).name);
    CHECK(f.outputs[i].buffer == held[size_t(p.source.outputs[i].value)]);
  }
  CHECK(f.validations.empty());
}

TEST_CASE("plan file: witnesses, scratch and paged state survive the round trip") {
  for (const char* example : {"tiny-llama-decode-live.pg", "tiny-llama-decode-paged-live.pg", "tiny-sparse-decode.pg"}) {
    CAPTURE(example);
    Plan p = compiledPlan(example);
    rt::PlanFile f = read(writePlan(p));
    CHECK(f.validations.size() == p.source.validations.size());
    std::vector<int32_t> held = valueBuffers(p);
    for (size_t i = 0; i < f.validations.size(); ++i)
      CHECK(f.validations[i].buffer == held[size_t(p.source.validations[i].value)]);
    CHECK(f.slots.size() >= 1);
    CHECK(f.buffers.size() == p.buffers.size());
  }
}

TEST_CASE("plan file: the same plan gives the same bytes") {
  std::string a = writePlan(fullPlan());
  std::string b = writePlan(fullPlan());
  CHECK(a == b);
  CHECK(writePlan(compiledPlan("tiny-llama-prefill.pg")) == writePlan(compiledPlan("tiny-llama-prefill.pg")));
  // Reading a plan file back and writing what was read is not possible on the
  // runtime side (it has no writer), but the embedded graph is the .pgb bytes.
  rt::PlanFile f = read(a);
  CHECK(writeBinaryGraph(f.source) == writeBinaryGraph(fullPlan().source));
}

TEST_CASE("plan file: files of another kind or version are refused by name") {
  std::string bytes = writePlan(fullPlan());
  CHECK(refusal("") == "t.plan: error: not a plan file: 0 bytes is too short (truncated?)");
  CHECK(refusal("PPLN") == "t.plan: error: not a plan file: 4 bytes is too short (truncated?)");
  CHECK(refusal(writeBinaryGraph(fullPlan().source)) ==
        "t.plan: error: not a plan file: the file identifier is 'PGRF', expected 'PPLN'");
  CHECK(refusal("graph g\ninput %x : f32[1]\n") ==
        "t.plan: error: not a plan file: the file identifier is 'h g?', expected 'PPLN'");

  std::string v2 = bytes;
  auto* table = flatbuffers::GetMutableRoot<flatbuffers::Table>(v2.data());
  uint8_t* version = table->GetAddressOf(poot::pfb::Plan::VT_VERSION);
  REQUIRE(version != nullptr);
  uint32_t two = 2;
  std::memcpy(version, &two, 4);
  CHECK(refusal(v2) == "t.plan: error: plan file version 2 is not supported (this runtime reads version 1)");
}

TEST_CASE("plan file: truncated files are refused") {
  std::string bytes = writePlan(fullPlan());
  size_t step = bytes.size() / 300 + 1;
  for (size_t n = 0; n < bytes.size(); n += (n < 64 ? 1 : step)) {
    CAPTURE(n);
    std::string msg = refusal(bytes.substr(0, n));
    if (n >= 8) CHECK(startsWith(msg, "t.plan: error: truncated or corrupted plan file"));
  }
  CHECK(startsWith(refusal(bytes.substr(0, bytes.size() - 1)), "t.plan: error: truncated or corrupted plan file"));
}

TEST_CASE("plan file: random corruption is refused or harmless, never a crash") {
  std::string bytes = writePlan(fullPlan());
  std::mt19937_64 rng(5);
  int refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string bad = bytes;
    int flips = 1 + int(rng() % 4);
    for (int i = 0; i < flips; ++i) bad[rng() % bad.size()] ^= char(1 + rng() % 255);
    auto f = rt::readPlanFile(bad, "t.plan");
    if (!f) {
      CHECK(f.error().kind == ErrorKind::Format);
      ++refused;
    }
  }
  CHECK(refused > 0);
}

TEST_CASE("plan file: indices and the arena are checked after the verifier") {
  SUBCASE("a binding past the buffers") {
    Plan p = fullPlan();
    p.dispatches[2].bindings[0] = 99999;
    CHECK(refusal(writePlan(p)) == "t.plan:dispatch 2: error: binding 99999 names no buffer");
  }
  SUBCASE("a kernel index past the kernels") {
    Plan p = fullPlan();
    p.dispatches[1].kernel = int32_t(p.kernels.size());
    CHECK(startsWith(refusal(writePlan(p)), "t.plan:dispatch 1: error: kernel index "));
  }
  SUBCASE("two live buffers on the same bytes") {
    Plan p = fullPlan();
    // Two temps live at once, neither the base of a view (moving one would
    // also move its views).
    std::vector<bool> based(p.buffers.size());
    for (const Buffer& x : p.buffers)
      if (x.aliasOf >= 0) based[size_t(x.aliasOf)] = true;
    auto movable = [&](size_t i) { return p.buffers[i].role == BufferRole::Temp && !based[i]; };
    int32_t a = -1, b = -1;
    for (size_t i = 0; i < p.buffers.size() && b < 0; ++i)
      for (size_t j = i + 1; j < p.buffers.size() && b < 0 && movable(i); ++j) {
        const Buffer &x = p.buffers[i], &y = p.buffers[j];
        if (movable(j) && x.first <= y.last && y.first <= x.last && x.offset != y.offset) {
          a = int32_t(i);
          b = int32_t(j);
        }
      }
    REQUIRE(b >= 0);
    p.buffers[size_t(b)].offset = p.buffers[size_t(a)].offset;
    std::string msg = refusal(writePlan(p));
    CAPTURE(msg);
    CHECK(msg.find("share arena bytes while both are live") != std::string::npos);
  }
  SUBCASE("an offset past the arena") {
    Plan p = fullPlan();
    p.arenaBytes = 256;
    CHECK(refusal(writePlan(p)).find("past the arena's 256 bytes") != std::string::npos);
  }
  SUBCASE("a buffer whose bytes do not match its type") {
    Plan p = fullPlan();
    p.buffers[0].bytes += 1;
    CHECK(startsWith(refusal(writePlan(p)), "t.plan:buffer 0: error: buffer '"));
  }
  SUBCASE("a kernel for another target") {
    Plan p = fullPlan();
    p.target = Target::Ptx;
    rt::PlanFile f = read(writePlan(p));  // consistent: device and kernels agree
    CHECK(f.device.target == rt::Target::Ptx);
  }
}

TEST_CASE("plan file: files are written atomically and loaded by path") {
  std::string path = "/tmp/poot-plan-file-test-" + std::to_string(::getpid()) + ".plan";
  Plan p = fullPlan();
  REQUIRE(bool(writePlanFile(p, path)));
  auto f = rt::loadPlanFile(path);
  REQUIRE(bool(f));
  CHECK(f->key == p.key);
  auto missing = rt::loadPlanFile("/nonexistent/x.plan");
  REQUIRE(!missing);
  CHECK(missing.error().kind == ErrorKind::Io);
  std::remove(path.c_str());
}

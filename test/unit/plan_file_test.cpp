// Unit tests of the plan file: writePlan (lib/plan/plan_file.h) and the
// runtime's reader (lib/runtime/plan_reader.h). A compiled tiny Llama plan
// round-trips with every field equal; the same plan always gives the same
// bytes; files that are truncated, corrupted, of another kind or of another
// schema version are refused with ErrorKind::Format and a message that says
// which; one changed byte anywhere after the root table is a checksum
// mismatch; and a plan whose indices, arena, grids, bindings or kernel code
// do not hold together is refused too, naming the record. Random corruption
// never crashes the reader, with the checksum sealed again so that the
// structural checks behind it are reached (run it under the sanitizer build
// too).
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <unistd.h>

#include "codegen/codegen.h"
#include "ir/binary.h"
#include "ir/hash.h"
#include "ir/io.h"
#include "ir/text.h"
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
  testing::runPasses(*g, d);
  auto p = planGraph(*g, d);
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  p->target = d.target;
  p->deviceArch = d.arch;
  auto b = planBuffers(*p);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  return p.take();
}

// A plan with something in every field: its kernels generated (SPIR-V) and
// scalar parameters on one dispatch (the reader reads them; the Session
// refuses them).
Plan fullPlan() {
  Plan p = compiledPlan("tiny-llama-decode.pg");
  auto s = generateKernels(p, lavapipe());
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  REQUIRE(!p.dispatches.empty());
  p.dispatches[0].params = {3, -1, int64_t(1) << 40};
  return p;
}

// Where the plan's checksum field lies in its bytes.
size_t checksumAt(const std::string& bytes) {
  const auto* table = flatbuffers::GetRoot<flatbuffers::Table>(bytes.data());
  flatbuffers::voffset_t field = table->GetOptionalFieldOffset(poot::pfb::Plan::VT_CHECKSUM);
  REQUIRE(field != 0);
  return size_t(reinterpret_cast<const char*>(table) - bytes.data()) + field;
}

// Where the root table and its vtable end (they are the first records): every
// byte after them is some other record's.
size_t rootTableEnd(const std::string& bytes) {
  size_t root = flatbuffers::ReadScalar<uint32_t>(bytes.data());
  size_t vtable = root - size_t(flatbuffers::ReadScalar<int32_t>(bytes.data() + root));
  size_t vtableSize = flatbuffers::ReadScalar<uint16_t>(bytes.data() + vtable);
  size_t tableSize = flatbuffers::ReadScalar<uint16_t>(bytes.data() + vtable + 2);
  return std::max(root + tableSize, vtable + vtableSize);
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
  CHECK(f.device.memoryBandwidth == p.memoryBandwidth);
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
  for (const rt::Kernel& k : f.kernels) CHECK(!k.blob.empty());

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

  // A version 1 file (before the checksum) and a newer one say which version
  // they are.
  for (uint32_t v : {1u, 3u}) {
    std::string other = bytes;
    auto* table = flatbuffers::GetMutableRoot<flatbuffers::Table>(other.data());
    uint8_t* version = table->GetAddressOf(poot::pfb::Plan::VT_VERSION);
    REQUIRE(version != nullptr);
    std::memcpy(version, &v, 4);
    CHECK(refusal(other) == "t.plan: error: plan file version " + std::to_string(v) +
                                " is not supported (this runtime reads version 2)");
  }
}

TEST_CASE("plan file: the checksum is FNV-1a 64 over every byte, its own 8 counted as zeros") {
  std::string bytes = writePlan(fullPlan());
  size_t at = checksumAt(bytes);
  std::string zeroed = bytes;
  std::memset(zeroed.data() + at, 0, 8);
  uint64_t recorded = 0;
  std::memcpy(&recorded, bytes.data() + at, 8);
  CHECK(recorded == fnv1a(zeroed));
  CHECK(recorded == fnv1aMasked(bytes, at, 8));
  CHECK(fnv1aMasked(zeroed, at, 8) == fnv1a(zeroed));
  CHECK(fnv1aMasked("abc", 1, 0) == fnv1a("abc"));
  CHECK(fnv1aMasked("abc", 1, 5) == fnv1a(std::string("a\0\0", 3)));

  // Resealing changed bytes makes them pass the checksum again.
  std::string changed = bytes;
  changed[changed.size() - 3] ^= 0x10;
  CHECK(refusal(changed).find("checksum mismatch") != std::string::npos);
  REQUIRE(sealPlanChecksum(changed));
  CHECK(fnv1aMasked(changed, at, 8) != recorded);
  std::string zeros(9, '\0');
  CHECK(!sealPlanChecksum(zeros));

  // A file whose root table lost the field (its vtable entry zeroed).
  std::string none = bytes;
  uint32_t root = flatbuffers::ReadScalar<uint32_t>(none.data());
  int32_t back = flatbuffers::ReadScalar<int32_t>(none.data() + root);
  std::memset(none.data() + root - back + poot::pfb::Plan::VT_CHECKSUM, 0, 2);
  CHECK(refusal(none) == "t.plan: error: truncated or corrupted plan file (it records no checksum)");
}

TEST_CASE("plan file: one changed byte in any record, blob or the source graph is a checksum mismatch") {
  Plan p = fullPlan();
  std::string bytes = writePlan(p);
  size_t from = rootTableEnd(bytes);
  REQUIRE(from < 256);
  // Every byte of one kernel blob, of the source graph's first bytes, and a
  // sample of all the rest.
  std::vector<size_t> where;
  std::string blob(p.kernels[1].blob.begin(), p.kernels[1].blob.end());
  size_t inBlob = bytes.find(blob);
  REQUIRE(inBlob != std::string::npos);
  for (size_t i = 0; i < blob.size(); ++i) where.push_back(inBlob + i);
  std::string graph = writeBinaryGraph(p.source);
  size_t inGraph = bytes.find(graph.substr(0, 64));
  REQUIRE(inGraph != std::string::npos);
  for (size_t i = 0; i < 256; ++i) where.push_back(inGraph + i);
  for (size_t i = from; i < bytes.size(); i += 61) where.push_back(i);
  for (size_t i : where) {
    CAPTURE(i);
    std::string bad = bytes;
    bad[i] ^= 0x01;
    std::string msg = refusal(bad);
    CHECK(startsWith(msg, "t.plan: error: truncated or corrupted plan file (checksum mismatch: the file records "));
  }
  // In the root table, where the checksum itself is found, any change is
  // refused too, if not always as a mismatch.
  for (size_t i = 0; i < from; ++i) {
    CAPTURE(i);
    std::string bad = bytes;
    bad[i] ^= 0x01;
    refusal(bad);
  }
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

// Under the sanitizers a fifth of the rounds (3000 took 86 s there): the
// plan and forged_plan fuzz targets mutate plans behind a resealed checksum
// under the same sanitizers in every CI run.
#ifdef POOT_TEST_SANITIZED
constexpr int kCorruptionRounds = 600;
#else
constexpr int kCorruptionRounds = 3000;
#endif

TEST_CASE("plan file: random corruption behind a resealed checksum is refused or harmless, never a crash") {
  std::string bytes = writePlan(fullPlan());
  std::mt19937_64 rng(5);
  int refused = 0, sealed = 0;
  for (int round = 0; round < kCorruptionRounds; ++round) {
    std::string bad = bytes;
    int flips = 1 + int(rng() % 4);
    for (int i = 0; i < flips; ++i) bad[rng() % bad.size()] ^= char(1 + rng() % 255);
    sealed += sealPlanChecksum(bad);
    auto f = rt::readPlanFile(bad, "t.plan");
    if (!f) {
      CHECK(f.error().kind == ErrorKind::Format);
      CHECK(f.error().message.find("checksum mismatch") == std::string::npos);
      ++refused;
    }
  }
  CHECK(refused > 0);
  CHECK(sealed > kCorruptionRounds * 29 / 30);
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
    Plan p = compiledPlan("tiny-llama-decode.pg");
    p.target = Target::Ptx;
    rt::PlanFile f = read(writePlan(p));  // consistent: device and kernels agree, no code
    CHECK(f.device.target == rt::Target::Ptx);
    // SPIR-V code in kernels that say they are PTX.
    Plan q = fullPlan();
    q.target = Target::Ptx;
    CHECK(refusal(writePlan(q)) == "t.plan:kernel 0: error: kernel '" + q.kernels[0].entry +
                                       "': the ptx text holds a NUL byte at offset 4");
  }
}

TEST_CASE("plan file: grids, workgroups, writes and kernel code are checked against the records") {
  // The index of the first dispatch that writes something, and of a weight.
  auto writer = [](const Plan& p) {
    for (size_t i = 0; i < p.dispatches.size(); ++i)
      if (p.dispatches[i].bindings.size() > p.dispatches[i].reads.size()) return i;
    FAIL("no dispatch writes");
    return size_t(0);
  };
  SUBCASE("a grid that vkCmdDispatch cannot express") {
    Plan p = fullPlan();
    p.dispatches[3].grid[0] = (int64_t(1) << 33) + 1;
    CHECK(refusal(writePlan(p)) ==
          "t.plan:dispatch 3: error: grid x of 8589934593 workgroups is more than spirv can launch (4294967295)");
  }
  SUBCASE("a grid that CUDA cannot launch") {
    Plan p = compiledPlan("tiny-llama-decode.pg");
    p.target = Target::Ptx;
    p.dispatches[1].grid[1] = 65536;
    CHECK(refusal(writePlan(p)) ==
          "t.plan:dispatch 1: error: grid y of 65536 workgroups is more than ptx can launch (65535)");
  }
  SUBCASE("an HSA grid counts work-items") {
    Plan p = compiledPlan("tiny-llama-decode.pg");
    p.target = Target::Hsaco;
    int64_t threads = p.kernels[size_t(p.dispatches[0].kernel)].request.schedule.workgroupSize;
    REQUIRE(threads > 1);
    p.dispatches[0].grid[0] = 0xffffffffll / threads;
    read(writePlan(p));
    p.dispatches[0].grid[0] += 1;
    CHECK(refusal(writePlan(p)) == "t.plan:dispatch 0: error: grid x of " + std::to_string(p.dispatches[0].grid[0]) +
                                       " workgroups of " + std::to_string(threads) +
                                       " is more than hsaco can launch (4294967295 work-items)");
  }
  SUBCASE("workgroups no target can run") {
    Plan p = compiledPlan("tiny-llama-decode.pg");
    p.kernels[2].request.schedule.workgroupSize = 0;
    CHECK(startsWith(refusal(writePlan(p)), "t.plan:kernel 2: error: workgroup size 0 or workgroup memory "));
    p.kernels[2].request.schedule.workgroupSize = 2048;
    read(writePlan(p));  // Vulkan's limit is the device's
    p.target = Target::Ptx;
    CHECK(refusal(writePlan(p)) == "t.plan:kernel 2: error: workgroup size 2048 is more than ptx can launch (1024)");
  }
  SUBCASE("a dispatch that writes a weight") {
    Plan p = fullPlan();
    size_t d = writer(p);
    int32_t weight = -1;
    for (size_t b = 0; b < p.buffers.size() && weight < 0; ++b)
      if (p.buffers[b].role == BufferRole::Weight) weight = int32_t(b);
    REQUIRE(weight >= 0);
    p.dispatches[d].bindings.back() = weight;
    CHECK(refusal(writePlan(p)) == "t.plan:dispatch " + std::to_string(d) + ": error: writes weight '" +
                                       p.buffers[size_t(weight)].name + "', which the caller binds");
  }
  SUBCASE("a dispatch that binds more buffers than its kernel's code takes") {
    Plan p = fullPlan();
    size_t d = writer(p);
    const Kernel& k = p.kernels[size_t(p.dispatches[d].kernel)];
    size_t n = p.dispatches[d].bindings.size();
    p.dispatches[d].bindings.push_back(p.dispatches[d].bindings.back());
    CHECK(refusal(writePlan(p)) == "t.plan:dispatch " + std::to_string(d) + ": error: binds " +
                                       std::to_string(n + 1) + " buffers, kernel '" + k.entry + "' takes " +
                                       std::to_string(n) + " in its code");
  }
  SUBCASE("two dispatches of one kernel that bind different counts (no code)") {
    Plan p = compiledPlan("tiny-llama-decode.pg");
    std::vector<int> seen(p.kernels.size(), -1);
    size_t first = 0, second = 0;
    for (size_t i = 0; i < p.dispatches.size() && second == 0; ++i) {
      int& s = seen[size_t(p.dispatches[i].kernel)];
      if (s >= 0 && p.dispatches[i].bindings.size() > p.dispatches[i].reads.size()) first = size_t(s), second = i;
      if (s < 0) s = int(i);
    }
    REQUIRE(second > 0);
    size_t n = p.dispatches[second].bindings.size();
    p.dispatches[second].bindings.push_back(p.dispatches[second].bindings.back());
    CHECK(refusal(writePlan(p)) == "t.plan:dispatch " + std::to_string(second) + ": error: binds " +
                                       std::to_string(n + 1) + " buffers, kernel '" +
                                       p.kernels[size_t(p.dispatches[second].kernel)].entry + "' takes " +
                                       std::to_string(n) + " (as dispatch " + std::to_string(first) + " binds it)");
  }
  SUBCASE("a workgroup size that is not the code's") {
    Plan p = fullPlan();
    Schedule& s = p.kernels[1].request.schedule;
    int64_t threads = s.workgroupSize;
    s.workgroupSize *= 2;
    CHECK(refusal(writePlan(p)) == "t.plan:kernel 1: error: kernel '" + p.kernels[1].entry + "' runs " +
                                       std::to_string(threads) + " threads a workgroup in its code, " +
                                       std::to_string(threads * 2) + " in the plan");
  }
  SUBCASE("a blob that is not SPIR-V") {
    Plan p = fullPlan();
    p.kernels[2].blob[0] ^= 0xff;
    CHECK(refusal(writePlan(p)) == "t.plan:kernel 2: error: kernel '" + p.kernels[2].entry +
                                       "': the spir-v magic number is 0x072302fc, expected 0x07230203");
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

// Unit tests of the Vulkan backend (lib/runtime/backends/vulkan.h) on
// lavapipe, through the Backend interface, with compute shaders compiled
// from GLSL at test time: a dispatch computes what it should on fresh random
// data, with bindings that are ranges of one buffer; a recorded program
// replays on new data (the backend says it replays, and lavapipe's
// timestamps give each run a device time); consecutive dispatches see each
// other's writes; a
// device copy copies; 0-byte buffers and bindings work; a blob that is not
// SPIR-V and an unknown device are refused with typed errors. The same
// dispatches and moves run again with the staging path forced (buffers in
// device-local memory the host never maps, bytes moved by staging copies in
// chunks): random bytes of odd sizes, above the chunk size and at odd offsets
// come back byte for byte, including after the staging buffer has held other
// data. lavapipe offers neither vendor extension that counts compute units,
// so it reports none, and the count from a (fake) NVIDIA or AMD properties
// struct is what the driver says. poot probe's profile of this device says
// its compute units are unknown, which the compiler's loadProfile refuses;
// with the figure written in, it agrees with targets/lavapipe.yaml. lavapipe
// offers no VK_KHR_pipeline_executable_properties either, so asking what the
// driver made of a kernel is a Capability error that says so.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <unistd.h>
#include <vulkan/vulkan.h>

#include "ir/io.h"
#include "plan/profile.h"
#include "runtime/backends/vulkan.h"
#include "lavapipe.h"
#include "testing.h"

using namespace poot;
using testing::glsl;
using testing::lavapipe;

namespace {

std::filesystem::path scratchDir() {
  auto dir = std::filesystem::temp_directory_path() / ("poot-vulkan-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// c[i] = a[i] + b[i] for i < c.length().
const char* kAdd = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer A { float a[]; };
layout(set = 0, binding = 1) buffer B { float b[]; };
layout(set = 0, binding = 2) buffer C { float c[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < c.length()) c[i] = a[i] + b[i];
}
)";

std::vector<float> randomFloats(size_t n) {
  static std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<float> u(-4, 4);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::vector<float> download(rt::Backend& b, rt::BufferId buf, int64_t offset, size_t n) {
  std::vector<float> out(n);
  auto s = b.download(buf, offset, out.data(), int64_t(n * 4));
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  return out;
}

void upload(rt::Backend& b, rt::BufferId buf, int64_t offset, const std::vector<float>& v) {
  auto s = b.upload(buf, offset, v.data(), int64_t(v.size() * 4));
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
}

template <class T>
T take(Expected<T> e) {
  REQUIRE_MESSAGE(bool(e), (e ? "" : e.error().str()));
  return e.take();
}

std::vector<uint8_t> randomBytes(size_t n) {
  static std::mt19937_64 rng{std::random_device{}()};
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t r = rng();
    std::memcpy(v.data() + i, &r, std::min<size_t>(8, n - i));
  }
  return v;
}

std::vector<uint8_t> downloadBytes(rt::Backend& b, rt::BufferId buf, int64_t offset, size_t n) {
  std::vector<uint8_t> out(n);
  auto s = b.download(buf, offset, out.data(), int64_t(n));
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  return out;
}

void uploadBytes(rt::Backend& b, rt::BufferId buf, int64_t offset, const std::vector<uint8_t>& v) {
  auto s = b.upload(buf, offset, v.data(), int64_t(v.size()));
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
}

// The first index where two byte vectors differ, or -1 (doctest would print
// megabytes for a failed ==).
int64_t firstDifference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  auto m = std::mismatch(a.begin(), a.end(), b.begin());
  return m.first == a.end() ? -1 : int64_t(m.first - a.begin());
}

// lavapipe with the staging path forced, optionally with smaller chunks.
std::unique_ptr<rt::Backend> stagedLavapipe(int64_t chunkBytes = 0) {
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  rt::VulkanOptions o;
  o.device = "lavapipe";
  o.staging = true;
  o.stagingChunkBytes = chunkBytes;
  auto b = rt::createVulkanBackend(o);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  rt::VulkanMemoryChoice m = rt::vulkanMemoryChoice(**b);
  REQUIRE_MESSAGE(m.staging, m.summary);
  CHECK(m.stagedReads);
  CHECK(m.summary.rfind("staging: buffers in type 0 (device-local", 0) == 0);
  return b.take();
}

// Two dispatches of kAdd over ranges of one buffer, replayed on new data,
// then a device copy and a refused out-of-range upload.
void checkDispatches(rt::Backend& be) {
  rt::Backend* b = &be;
  const size_t n = 1000;  // not a multiple of the workgroup
  // a and b share one buffer (as arena ranges do), at 256-aligned offsets.
  rt::BufferId ab = take(b->allocate(8192));
  rt::BufferId c = take(b->allocate(n * 4));
  rt::BufferId d = take(b->allocate(n * 4));
  rt::KernelId add = take(b->createKernel(glsl(kAdd), "main", 64, 0, 3, false));
  int64_t groups = (n + 63) / 64;
  rt::BufferRange ra{ab, 0, int64_t(n * 4)}, rb{ab, 4096, int64_t(n * 4)};
  rt::BufferRange rc{c, 0, int64_t(n * 4)}, rd{d, 0, int64_t(n * 4)};
  // c = a + b, then d = c + a.
  rt::ProgramId prog = take(b->record({{add, {groups, 1, 1}, {ra, rb, rc}}, {add, {groups, 1, 1}, {rc, ra, rd}}}));
  CHECK(b->submission() == rt::Submission::Replay);
  CHECK(!b->replayFallback());

  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    auto x = randomFloats(n), y = randomFloats(n);
    upload(*b, ab, 0, x);
    upload(*b, ab, 4096, y);
    REQUIRE(bool(b->run(prog)));
    // lavapipe takes timestamps on its compute queue.
    auto device = b->lastRunDeviceSeconds();
    REQUIRE(device);
    CHECK(*device > 0);
    CHECK(*device < 10);
    auto sum = download(*b, c, 0, n), twice = download(*b, d, 0, n);
    int bad = 0;
    for (size_t i = 0; i < n; ++i) {
      float s = x[i] + y[i];
      bad += sum[i] != s || twice[i] != s + x[i];
    }
    CHECK(bad == 0);
  }

  // The same program profiled: each dispatch's time, the two within the whole.
  rt::ProgramId timed = take(b->recordProfiled({{add, {groups, 1, 1}, {ra, rb, rc}}, {add, {groups, 1, 1}, {rc, ra, rd}}}));
  auto x = randomFloats(n), y = randomFloats(n);
  upload(*b, ab, 0, x);
  upload(*b, ab, 4096, y);
  REQUIRE(bool(b->run(timed)));
  std::vector<double> each = b->lastRunDispatchSeconds();
  REQUIRE(each.size() == 2);
  CHECK(each[0] > 0);
  CHECK(each[1] > 0);
  REQUIRE(b->lastRunDeviceSeconds());
  CHECK(each[0] + each[1] <= *b->lastRunDeviceSeconds() * (1 + 1e-9));
  auto twice = download(*b, d, 0, n);
  int wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += twice[i] != x[i] + y[i] + x[i];
  CHECK(wrong == 0);
  REQUIRE(bool(b->run(prog)));
  CHECK(b->lastRunDispatchSeconds().empty());

  // A device copy.
  rt::BufferId e = take(b->allocate(n * 4));
  REQUIRE(bool(b->copy(d, e, int64_t(n * 4))));
  CHECK(download(*b, e, 0, n) == download(*b, d, 0, n));
  // Out of range moves are refused.
  std::vector<float> big(3000);
  CHECK(!b->upload(c, 0, big.data(), int64_t(big.size() * 4)));
  CHECK(!b->download(c, 0, big.data(), int64_t(big.size() * 4)));
}

}  // namespace

TEST_CASE("runtime vulkan: lavapipe is found and described") {
  auto b = lavapipe();
  const rt::DeviceInfo& d = b->info();
  CHECK(d.slug == "lavapipe");
  CHECK(d.name.find("llvmpipe") != std::string::npos);
  CHECK(d.target == rt::Target::Spirv);
  CHECK(d.maxWorkgroupSize == 1024);
  CHECK(d.workgroupMemoryBytes == 32768);
  CHECK(d.f16.storage);
  CHECK(d.computeUnits == 0);

  auto none = rt::createVulkanBackend({"no-such-gpu"});
  REQUIRE(!none);
  CHECK(none.error().kind == ErrorKind::Capability);
  CHECK(none.error().message.find("no vulkan device matches 'no-such-gpu'") != std::string::npos);
  CHECK(bool(rt::createVulkanBackend({"0"})));
}

TEST_CASE("runtime vulkan: compute units from the vendor extensions, none without one") {
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV nv{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  nv.shaderSMCount = 132;
  nv.shaderWarpsPerSM = 64;
  VkPhysicalDeviceShaderCorePropertiesAMD amd{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CORE_PROPERTIES_AMD};
  amd.shaderEngineCount = 6;  // a Radeon RX 7900 XTX: 6 engines x 2 arrays x 8 CUs
  amd.shaderArraysPerEngineCount = 2;
  amd.computeUnitsPerShaderArray = 8;
  amd.simdPerComputeUnit = 2;
  amd.wavefrontsPerSimd = 16;
  CHECK(rt::vulkanComputeUnits(&nv, nullptr) == 132);
  CHECK(rt::vulkanComputeUnits(nullptr, &amd) == 96);
  CHECK(rt::vulkanComputeUnits(nullptr, nullptr) == 0);
  nv.shaderSMCount = 0;
  CHECK(rt::vulkanComputeUnits(&nv, nullptr) == 0);
  amd.shaderEngineCount = 0;
  CHECK(rt::vulkanComputeUnits(nullptr, &amd) == 0);
}

TEST_CASE("runtime vulkan: dispatches compute on buffer ranges, replay, and see earlier writes") {
  auto b = lavapipe();
  if (!std::getenv("POOT_VULKAN_STAGING")) {
    // lavapipe's one memory type is device-local and host-visible: mapped.
    rt::VulkanMemoryChoice m = rt::vulkanMemoryChoice(*b);
    CHECK_MESSAGE(!m.staging, m.summary);
    CHECK(!m.stagedReads);
    CHECK(m.summary.rfind("mapped: buffers in type 0 (device-local, host-visible", 0) == 0);
  }
  checkDispatches(*b);
}

TEST_CASE("runtime vulkan: 0-byte buffers and bindings, and refused blobs") {
  auto b = lavapipe();
  rt::BufferId empty = take(b->allocate(0));
  rt::BufferId one = take(b->allocate(4));
  CHECK(bool(b->upload(empty, 0, nullptr, 0)));
  rt::KernelId add = take(b->createKernel(glsl(kAdd), "main", 64, 0, 3, false));
  // c has no elements, so nothing is written (the binding is rounded up, not c.length()).
  rt::ProgramId prog = take(b->record({{add, {1, 1, 1}, {{one, 0, 4}, {one, 0, 4}, {empty, 0, 0}}}}));
  CHECK(bool(b->run(prog)));

  auto notSpirv = b->createKernel({1, 2, 3, 4, 5, 6, 7, 8}, "main", 64, 0, 3, false);
  REQUIRE(!notSpirv);
  CHECK(notSpirv.error().kind == ErrorKind::Format);
  auto wide = b->createKernel(glsl(kAdd), "main", 4096, 0, 3, false);
  REQUIRE(!wide);
  CHECK(wide.error().kind == ErrorKind::Capability);
  CHECK(!b->record({{add, {1, 1, 1}, {{one, 0, 4}}}}));  // too few bindings
}

TEST_CASE("runtime vulkan: lavapipe reports no kernel statistics, and says what it lacks") {
  auto b = lavapipe();
  rt::KernelId add = take(b->createKernel(glsl(kAdd), "main", 64, 0, 3, false));
  auto stats = b->kernelStats(add);
  REQUIRE(!stats);
  CHECK(stats.error().kind == ErrorKind::Capability);
  CHECK(stats.error().capability == "KernelStats");
  CHECK(stats.error().message == "vulkan device '" + b->info().name +
                                     "' does not report kernel statistics: its driver (" + b->info().driver +
                                     ") does not offer VK_KHR_pipeline_executable_properties");
  auto none = b->kernelStats(add + 1);
  REQUIRE(!none);
  CHECK(none.error().kind == ErrorKind::Io);
  CHECK(none.error().message == "vulkan: no kernel 1");
}

TEST_CASE("runtime vulkan: staging: dispatches compute on buffer ranges, replay, and see earlier writes") {
  // 1 KiB chunks: each 4000-byte move takes four staging copies.
  auto b = stagedLavapipe(1024);
  CHECK(rt::vulkanMemoryChoice(*b).chunkBytes == 1024);
  checkDispatches(*b);
  // 0-byte buffers and moves.
  rt::BufferId empty = take(b->allocate(0));
  CHECK(bool(b->upload(empty, 0, nullptr, 0)));
  CHECK(bool(b->download(empty, 0, nullptr, 0)));
  // Too large for the device: a MemoryBudget capability error.
  auto huge = b->allocate(int64_t(1) << 44);
  REQUIRE(!huge);
  CHECK(huge.error().kind == ErrorKind::Capability);
  CHECK_MESSAGE(huge.error().capability == "MemoryBudget", huge.error().str());
}

TEST_CASE("runtime vulkan: staging: odd sizes, offsets and sizes past the chunk come back byte for byte") {
  for (int64_t chunk : {int64_t(0), int64_t(4096)}) {  // 64 MiB, and 4 KiB (hundreds of chunks a move)
    CAPTURE(chunk);
    auto b = stagedLavapipe(chunk);
    int64_t chunkBytes = rt::vulkanMemoryChoice(*b).chunkBytes;
    CHECK(chunkBytes == (chunk ? chunk : int64_t(64) << 20));

    // A whole odd-sized buffer.
    const size_t n = 1000003;
    rt::BufferId x = take(b->allocate(int64_t(n)));
    auto xs = randomBytes(n);
    uploadBytes(*b, x, 0, xs);
    CHECK(firstDifference(downloadBytes(*b, x, 0, n), xs) == -1);

    // Another buffer through the same staging buffer, then x again: what
    // comes back is x's, not what staging last held.
    rt::BufferId y = take(b->allocate(int64_t(n)));
    auto ys = randomBytes(n);
    uploadBytes(*b, y, 0, ys);
    CHECK(firstDifference(downloadBytes(*b, x, 0, n), xs) == -1);
    CHECK(firstDifference(downloadBytes(*b, y, 0, n), ys) == -1);

    // A sub-range at an odd offset overwrites just those bytes; sub-range
    // downloads at odd offsets, one of them crossing the patch's edge.
    const int64_t at = 12345;
    auto patch = randomBytes(77777);
    uploadBytes(*b, x, at, patch);
    std::copy(patch.begin(), patch.end(), xs.begin() + at);
    CHECK(firstDifference(downloadBytes(*b, x, 0, n), xs) == -1);
    CHECK(firstDifference(downloadBytes(*b, x, at, patch.size()), patch) == -1);
    auto across = downloadBytes(*b, x, 3, 20001);
    CHECK(firstDifference(across, std::vector<uint8_t>(xs.begin() + 3, xs.begin() + 3 + 20001)) == -1);
    // The tail the size rounds up to (256 bytes) is in range; past it is not.
    const int64_t rounded = (int64_t(n) + 255) / 256 * 256;
    uint8_t tail[5];
    CHECK(bool(b->download(x, rounded - 5, tail, 5)));
    CHECK(!b->download(x, rounded - 4, tail, 5));
    CHECK(!b->upload(x, -1, tail, 1));
    CHECK(bool(b->upload(x, 7, tail, 0)));

    // A device copy between staged buffers.
    rt::BufferId z = take(b->allocate(int64_t(n)));
    REQUIRE(bool(b->copy(x, z, int64_t(n))));
    CHECK(firstDifference(downloadBytes(*b, z, 0, n), xs) == -1);

    // Past the chunk size (and an odd size and offset, so the last chunk is
    // partial): with 64 MiB chunks the staging buffer grows for this.
    const size_t big = size_t(chunkBytes) + 54321;
    rt::BufferId w = take(b->allocate(int64_t(big) + 1001));
    auto ws = randomBytes(big);
    uploadBytes(*b, w, 1001, ws);
    CHECK(firstDifference(downloadBytes(*b, w, 1001, big), ws) == -1);
    CHECK(firstDifference(downloadBytes(*b, x, 0, n), xs) == -1);
  }
}

TEST_CASE("runtime vulkan: POOT_VULKAN_STAGING forces the staging path") {
  const char* before = std::getenv("POOT_VULKAN_STAGING");
  std::string saved = before ? before : "";
  setenv("POOT_VULKAN_STAGING", "1", 1);
  auto staged = lavapipe();
  setenv("POOT_VULKAN_STAGING", "0", 1);
  auto mapped = lavapipe();
  if (before) setenv("POOT_VULKAN_STAGING", saved.c_str(), 1);
  else unsetenv("POOT_VULKAN_STAGING");
  CHECK(rt::vulkanMemoryChoice(*staged).staging);
  CHECK(!rt::vulkanMemoryChoice(*mapped).staging);
  // Both hold and move the same bytes.
  for (rt::Backend* b : {staged.get(), mapped.get()}) {
    rt::BufferId x = take(b->allocate(4099));
    auto xs = randomBytes(4099);
    uploadBytes(*b, x, 0, xs);
    CHECK(firstDifference(downloadBytes(*b, x, 0, xs.size()), xs) == -1);
  }
}

TEST_CASE("runtime vulkan: the probed profile asks for its compute units and agrees with targets/lavapipe.yaml") {
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  auto out = scratchDir() / "probed.yaml";
  // The tool beside this test binary in the build tree (test/unit/unit_tests).
  auto build = std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path().parent_path();
  std::string poot = (build / "tools" / "poot" / "poot").string();
  REQUIRE_MESSAGE(std::filesystem::exists(poot), poot);
  std::string cmd = poot + " probe --device lavapipe -o " + out.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto unknown = loadProfile(out.string());
  REQUIRE(!unknown);
  CHECK(unknown.error().kind == ErrorKind::Profile);
  CHECK(unknown.error().message.find("field 'compute_units': the device's count is unknown") == 0);
  std::string text = take(readFile(out.string()));
  size_t at = text.find("compute_units: unknown\n");
  REQUIRE(at != std::string::npos);
  DeviceProfile want = testing::loadTarget("lavapipe");
  auto probed = parseProfile(text.replace(at, 22, "compute_units: " + std::to_string(want.compute_units)), "p.yaml");
  REQUIRE_MESSAGE(bool(probed), (probed ? "" : probed.error().str()));
  CHECK(probed->compute_units == want.compute_units);
  CHECK(probed->name == want.name);
  CHECK(probed->target == want.target);
  CHECK(probed->arch == want.arch);
  CHECK(probed->workgroup_memory_bytes == want.workgroup_memory_bytes);
  CHECK(probed->max_workgroup_size == want.max_workgroup_size);
  CHECK(probed->subgroup_size == want.subgroup_size);
  for (int k = 0; k < 3; ++k) CHECK(probed->grid_limits[k] == want.grid_limits[k]);
  CHECK(probed->max_buffer_bytes == want.max_buffer_bytes);
  CHECK(probed->max_bindings == want.max_bindings);
  CHECK(probed->f16.storage == want.f16.storage);
  CHECK(probed->f16.arith == want.f16.arith);
  CHECK(probed->bf16.storage == want.bf16.storage);
  std::filesystem::remove_all(scratchDir());
}

// A kernel that indexes past the ranges bound to it (as a forged plan's
// kernel can): it reads a[i + 64] and writes b[i + 64] for the 64 floats
// of each range. With robust buffer access (on by default where the device
// has it, lavapipe included: the backend says robustBufferAccess and
// robustBufferAccess2 are enabled) the writes past b's 256 bytes are
// dropped, so the neighbouring range of the same buffer keeps its bytes,
// and the reads past a's range give zeros. POOT_VULKAN_ROBUST=0 leaves the
// features off; lavapipe (llvmpipe) bounds every storage buffer access
// anyway, so there the results are the same, and only a GPU driver shows
// the difference.
TEST_CASE("runtime vulkan: robust buffer access keeps a kernel inside its bound ranges") {
  const char* kPast = R"(#version 450
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer A { float a[]; };
layout(set = 0, binding = 1) buffer B { float b[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  b[i + 64] = a[i + 64] + 1.0;
  b[i] = a[i + 64] + 2.0;
}
)";
  for (bool robust : {true, false}) {
    CAPTURE(robust);
    if (robust) unsetenv("POOT_VULKAN_ROBUST");
    else setenv("POOT_VULKAN_ROBUST", "0", 1);
    auto b = lavapipe();
    unsetenv("POOT_VULKAN_ROBUST");
    std::string r = rt::vulkanRobustness(*b);
    CHECK(r == (robust ? "robustBufferAccess, robustBufferAccess2, local indices bounded"
                       : "none: POOT_VULKAN_ROBUST=0"));
    // One buffer: a at [0, 256), b at [256, 512), a neighbour at [512, 768).
    rt::BufferId buf = take(b->allocate(1024));
    upload(*b, buf, 0, std::vector<float>(256, 5.0f));
    rt::KernelId k = take(b->createKernel(glsl(kPast), "main", 64, 0, 2, false));
    rt::ProgramId p = take(b->record({{k, {1, 1, 1}, {{buf, 0, 256}, {buf, 256, 256}}}}));
    REQUIRE(bool(b->run(p)));
    CHECK(download(*b, buf, 512, 64) == std::vector<float>(64, 5.0f));  // the neighbour untouched
    CHECK(download(*b, buf, 256, 64) == std::vector<float>(64, 2.0f));  // a[i + 64] past a's range read as 0
  }
}

// Unit tests of the Vulkan backend (lib/runtime/backends/vulkan.h) on
// lavapipe, through the Backend interface, with compute shaders compiled
// from GLSL at test time: a dispatch computes what it should on fresh random
// data, with bindings that are ranges of one buffer; a recorded program
// replays on new data; consecutive dispatches see each other's writes; a
// device copy copies; 0-byte buffers and bindings work; a blob that is not
// SPIR-V and an unknown device are refused with typed errors. And poot
// probe's profile of this device loads with the compiler's loadProfile and
// agrees with targets/lavapipe.yaml.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <unistd.h>

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

}  // namespace

TEST_CASE("runtime vulkan: lavapipe is found and described") {
  auto b = lavapipe();
  const rt::DeviceInfo& d = b->info();
  CHECK(d.slug == "lavapipe");
  CHECK(d.name.find("llvmpipe") != std::string::npos);
  CHECK(d.target == rt::Target::Spirv);
  CHECK(d.maxWorkgroupSize == 1024);
  CHECK(d.workgroupMemoryBytes == 32768);
  CHECK(d.f16Storage);

  auto none = rt::createVulkanBackend({"no-such-gpu"});
  REQUIRE(!none);
  CHECK(none.error().kind == ErrorKind::Capability);
  CHECK(none.error().message.find("no vulkan device matches 'no-such-gpu'") != std::string::npos);
  CHECK(bool(rt::createVulkanBackend({"0"})));
}

TEST_CASE("runtime vulkan: dispatches compute on buffer ranges, replay, and see earlier writes") {
  auto b = lavapipe();
  const size_t n = 1000;  // not a multiple of the workgroup
  // a and b share one buffer (as arena ranges do), at 256-aligned offsets.
  rt::BufferId ab = take(b->allocate(8192));
  rt::BufferId c = take(b->allocate(n * 4));
  rt::BufferId d = take(b->allocate(n * 4));
  rt::KernelId add = take(b->createKernel(glsl(kAdd), "main", 64, 0, 3));
  int64_t groups = (n + 63) / 64;
  rt::BufferRange ra{ab, 0, int64_t(n * 4)}, rb{ab, 4096, int64_t(n * 4)};
  rt::BufferRange rc{c, 0, int64_t(n * 4)}, rd{d, 0, int64_t(n * 4)};
  // c = a + b, then d = c + a.
  rt::ProgramId prog = take(b->record({{add, {groups, 1, 1}, {ra, rb, rc}}, {add, {groups, 1, 1}, {rc, ra, rd}}}));

  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    auto x = randomFloats(n), y = randomFloats(n);
    upload(*b, ab, 0, x);
    upload(*b, ab, 4096, y);
    REQUIRE(bool(b->run(prog)));
    auto sum = download(*b, c, 0, n), twice = download(*b, d, 0, n);
    int bad = 0;
    for (size_t i = 0; i < n; ++i) {
      float s = x[i] + y[i];
      bad += sum[i] != s || twice[i] != s + x[i];
    }
    CHECK(bad == 0);
  }

  // A device copy.
  rt::BufferId e = take(b->allocate(n * 4));
  REQUIRE(bool(b->copy(d, e, int64_t(n * 4))));
  CHECK(download(*b, e, 0, n) == download(*b, d, 0, n));
  // Out of range moves are refused.
  std::vector<float> big(3000);
  CHECK(!b->upload(c, 0, big.data(), int64_t(big.size() * 4)));
}

TEST_CASE("runtime vulkan: 0-byte buffers and bindings, and refused blobs") {
  auto b = lavapipe();
  rt::BufferId empty = take(b->allocate(0));
  rt::BufferId one = take(b->allocate(4));
  CHECK(bool(b->upload(empty, 0, nullptr, 0)));
  rt::KernelId add = take(b->createKernel(glsl(kAdd), "main", 64, 0, 3));
  // c has no elements, so nothing is written (the binding is rounded up, not c.length()).
  rt::ProgramId prog = take(b->record({{add, {1, 1, 1}, {{one, 0, 4}, {one, 0, 4}, {empty, 0, 0}}}}));
  CHECK(bool(b->run(prog)));

  auto notSpirv = b->createKernel({1, 2, 3, 4, 5, 6, 7, 8}, "main", 64, 0, 3);
  REQUIRE(!notSpirv);
  CHECK(notSpirv.error().kind == ErrorKind::Format);
  auto wide = b->createKernel(glsl(kAdd), "main", 4096, 0, 3);
  REQUIRE(!wide);
  CHECK(wide.error().kind == ErrorKind::Capability);
  CHECK(!b->record({{add, {1, 1, 1}, {{one, 0, 4}}}}));  // too few bindings
}

TEST_CASE("runtime vulkan: the probed profile loads and agrees with targets/lavapipe.yaml") {
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  auto out = scratchDir() / "probed.yaml";
  // The tool beside this test binary in the build tree (test/unit/unit_tests).
  auto build = std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path().parent_path();
  std::string poot = (build / "tools" / "poot" / "poot").string();
  REQUIRE_MESSAGE(std::filesystem::exists(poot), poot);
  std::string cmd = poot + " probe --device lavapipe -o " + out.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto probed = loadProfile(out.string());
  REQUIRE_MESSAGE(bool(probed), (probed ? "" : probed.error().str()));
  DeviceProfile want = testing::loadTarget("lavapipe");
  CHECK(probed->name == want.name);
  CHECK(probed->target == want.target);
  CHECK(probed->arch == want.arch);
  CHECK(probed->workgroup_memory_bytes == want.workgroup_memory_bytes);
  CHECK(probed->max_workgroup_size == want.max_workgroup_size);
  CHECK(probed->subgroup_size == want.subgroup_size);
  for (int k = 0; k < 3; ++k) CHECK(probed->grid_limits[k] == want.grid_limits[k]);
  CHECK(probed->max_buffer_bytes == want.max_buffer_bytes);
  CHECK(probed->f16.storage == want.f16.storage);
  CHECK(probed->f16.arith == want.f16.arith);
  CHECK(probed->bf16.storage == want.bf16.storage);
  std::filesystem::remove_all(scratchDir());
}

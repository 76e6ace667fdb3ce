// Unit tests of the runtime's kernel blob checks (lib/runtime/kernel_blob.h):
// the code generated for one Add on each target (SPIR-V for lavapipe, PTX for
// the H200, HSACO for the MI300X) passes and tells its binding count and
// workgroup size where the format says them, and for PTX whether the kernel
// waits for the kernels before it before it touches memory; each way a
// blob can be broken is refused with its own Format message.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "codegen/codegen.h"
#include "plan/buffers.h"
#include "plan/planner.h"
#include "runtime/kernel_blob.h"
#include "testing.h"

using namespace poot;

namespace {

struct Compiled {
  std::vector<uint8_t> blob;
  std::string entry;
  std::string arch;
  int64_t workgroupSize;
};

// The one kernel of z = x + y, generated for the profile.
Compiled addKernel(const std::string& target) {
  Graph g = testing::parse("graph g\ninput %x : f32[64]\ninput %y : f32[64]\n%z = Add(%x, %y) : f32[64]\noutput %z\n");
  DeviceProfile d = testing::loadTarget(target);
  testing::runPasses(g, d);
  auto p = planGraph(g, d);
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  auto b = planBuffers(*p);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  auto s = generateKernels(*p, d);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  REQUIRE(p->kernels.size() == 1);
  const Kernel& k = p->kernels[0];
  return {k.blob, k.entry, d.arch, k.request.schedule.workgroupSize};
}

rt::Target targetOf(const std::string& profile) {
  return profile == "lavapipe" ? rt::Target::Spirv : profile == "nvidia-h200" ? rt::Target::Ptx : rt::Target::Hsaco;
}

std::string refusal(const std::string& profile, const std::vector<uint8_t>& blob, const std::string& entry,
                    const std::string& arch) {
  auto f = rt::checkKernelBlob(targetOf(profile), blob, entry, arch);
  REQUIRE(!f);
  CHECK(f.error().kind == ErrorKind::Format);
  return f.error().message;
}

uint32_t word(const std::vector<uint8_t>& b, size_t i) {
  uint32_t w;
  std::memcpy(&w, b.data() + 4 * i, 4);
  return w;
}

void setWord(std::vector<uint8_t>& b, size_t i, uint32_t w) { std::memcpy(b.data() + 4 * i, &w, 4); }

std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::string text(const std::vector<uint8_t>& b) { return std::string(b.begin(), b.end()); }

// The text with its first `from` replaced by `to`.
std::vector<uint8_t> replaced(const std::vector<uint8_t>& b, const std::string& from, const std::string& to) {
  std::string t = text(b);
  size_t at = t.find(from);
  REQUIRE(at != std::string::npos);
  return bytes(t.replace(at, from.size(), to));
}

}  // namespace

TEST_CASE("kernel blob: generated SPIR-V passes and gives its bindings and workgroup, broken modules are refused") {
  Compiled k = addKernel("lavapipe");
  auto facts = rt::checkKernelBlob(rt::Target::Spirv, k.blob, k.entry, k.arch);
  REQUIRE_MESSAGE(bool(facts), (facts ? "" : facts.error().str()));
  CHECK(facts->bindings == 3);
  CHECK(facts->workgroupSize == k.workgroupSize);
  auto no = [&](const std::vector<uint8_t>& b, const std::string& entry = "") {
    return refusal("lavapipe", b, entry.empty() ? k.entry : entry, k.arch);
  };

  std::vector<uint8_t> b = k.blob;
  b.push_back(0);
  CHECK(no(b) == "the spir-v module has " + std::to_string(k.blob.size() + 1) +
                     " bytes, not a whole number of 4-byte words");
  CHECK(no(std::vector<uint8_t>(k.blob.begin(), k.blob.begin() + 16)) ==
        "the spir-v module has 4 words, fewer than its 5-word header");
  b = k.blob;
  std::reverse(b.begin(), b.begin() + 4);  // a big-endian module
  CHECK(no(b) == "the spir-v magic number is 0x03022307, expected 0x07230203");
  b = k.blob;
  setWord(b, 1, 0x00020000);
  CHECK(no(b) == "the spir-v version word is 0x00020000, not a version from 1.0 to 1.6");
  b = k.blob;
  setWord(b, 3, 0);
  CHECK(no(b) == "the spir-v id bound is 0");
  b = k.blob;
  setWord(b, 4, 1);
  CHECK(no(b) == "the spir-v schema word is 1, not 0");
  b = k.blob;
  setWord(b, 5, word(b, 5) & 0xffff);
  CHECK(no(b) == "the spir-v instruction at word 5 has a word count of 0");
  b = k.blob;
  setWord(b, 5, word(b, 5) | 0xffff0000u);
  CHECK(no(b) == "the spir-v instruction at word 5 (opcode " + std::to_string(word(b, 5) & 0xffff) +
                     ") runs past the end of the module");
  CHECK(no(k.blob, "nope") == "the spir-v module has no compute entry point 'nope'");

  // Binding 0 renumbered 9: the bindings are no longer 0, 1, 2.
  b = k.blob;
  bool renumbered = false;
  for (size_t i = 5; i < b.size() / 4 && !renumbered; i += word(b, i) >> 16)
    if ((word(b, i) & 0xffff) == 71 && word(b, i + 2) == 33 && word(b, i + 3) == 0) {  // OpDecorate Binding 0
      setWord(b, i + 3, 9);
      renumbered = true;
    }
  REQUIRE(renumbered);
  CHECK(no(b) == "the spir-v module's 3 storage buffer bindings are not numbered 0 to 2");
}

// Found by fuzz_forged_plan: a binding's DescriptorSet 0 changed to
// 671088640 is valid SPIR-V (SPIRV-Tools' validator passes it), but the
// pipeline layout has set 0 only, and lavapipe crashed building it. A set
// other than 0, or push constants, are refused before any driver sees them.
TEST_CASE("kernel blob: a SPIR-V descriptor set other than 0 or a push constant is refused") {
  Compiled k = addKernel("lavapipe");
  std::vector<uint8_t> b = k.blob;
  size_t at = 0;
  for (size_t i = 5; i < b.size() / 4 && !at; i += word(b, i) >> 16)
    if ((word(b, i) & 0xffff) == 71 && word(b, i + 2) == 34) at = i + 3;  // OpDecorate DescriptorSet
  REQUIRE(at > 0);
  setWord(b, at, 671088640);
  CHECK(refusal("lavapipe", b, k.entry, k.arch) == "the spir-v module uses descriptor set 671088640 (word " +
                                                        std::to_string(at) + "); kernels bind set 0 only");
  b = k.blob;
  at = 0;
  for (size_t i = 5; i < b.size() / 4 && !at; i += word(b, i) >> 16)
    if ((word(b, i) & 0xffff) == 59 && word(b, i + 3) == 12) at = i;  // OpVariable StorageBuffer
  REQUIRE(at > 0);
  setWord(b, at + 3, 9);  // PushConstant
  CHECK(refusal("lavapipe", b, k.entry, k.arch) ==
        "the spir-v module declares a variable in storage class 9 (word " + std::to_string(at) +
            "); kernels hold storage buffers, workgroup, function, private and built-in input variables");
}

// What would let a kernel make a pointer that the local index bounds
// (runtime/spirv_bounds.h) do not follow, or use a feature the Vulkan
// backend did not enable: each refused by the structural check, before the
// validator or any driver sees the module.
TEST_CASE("kernel blob: SPIR-V capabilities, addressing, pointer offsets and bindings kernels do not use are refused") {
  Compiled k = addKernel("lavapipe");
  auto first = [&](const std::vector<uint8_t>& b, auto&& match) {
    for (size_t i = 5; i < b.size() / 4; i += word(b, i) >> 16)
      if (match(i)) return i;
    FAIL("no such instruction");
    return size_t(0);
  };
  auto no = [&](const std::vector<uint8_t>& b) { return refusal("lavapipe", b, k.entry, k.arch); };
  std::vector<uint8_t> b = k.blob;
  size_t at = first(b, [&](size_t i) { return word(b, i) == (2u << 16 | 17u); });  // OpCapability
  setWord(b, at + 1, 4);                                                            // Addresses
  CHECK(no(b) == "the spir-v module declares capability 4 (word " + std::to_string(at) +
                     "), which no kernel poot writes needs");
  b = k.blob;
  at = first(b, [&](size_t i) { return word(b, i) == (3u << 16 | 14u); });  // OpMemoryModel
  setWord(b, at + 1, 2);                                                    // Physical64
  CHECK(no(b) == "the spir-v module's addressing model is 2 (word " + std::to_string(at) + "), not Logical");
  b = k.blob;
  at = first(b, [&](size_t i) { return (word(b, i) & 0xffff) == 65; });  // OpAccessChain
  setWord(b, at, (word(b, at) & 0xffff0000u) | 67u);                    // OpPtrAccessChain
  CHECK(no(b) == "the spir-v module offsets a pointer with opcode 67 (word " + std::to_string(at) + ")");
  b = k.blob;
  at = first(b, [&](size_t i) { return (word(b, i) & 0xffff) == 71 && word(b, i + 2) == 33; });  // Binding
  uint32_t fn = word(b, first(b, [&](size_t i) { return (word(b, i) & 0xffff) == 54; }) + 2);  // OpFunction id
  setWord(b, at + 1, fn);
  CHECK(no(b) == "the spir-v module binds %" + std::to_string(fn) + ", which is not a storage buffer variable");
}

// Found by fuzz_plan: three LocalSize words of 2^32 - 1 overflowed int64_t
// in their product (undefined behaviour); it saturates, and so disagrees with
// any record instead of wrapping to a small workgroup.
TEST_CASE("kernel blob: a SPIR-V LocalSize past 64 bits saturates") {
  Compiled k = addKernel("lavapipe");
  std::vector<uint8_t> b = k.blob;
  bool set = false;
  for (size_t i = 5; i < b.size() / 4 && !set; i += word(b, i) >> 16)
    if (word(b, i) == ((6u << 16) | 16u) && word(b, i + 2) == 17) {  // OpExecutionMode LocalSize x y z
      for (size_t a = 3; a < 6; ++a) setWord(b, i + a, 0xffffffffu);
      set = true;
    }
  REQUIRE(set);
  auto facts = rt::checkKernelBlob(rt::Target::Spirv, b, k.entry, k.arch);
  REQUIRE_MESSAGE(bool(facts), (facts ? "" : facts.error().str()));
  CHECK(facts->workgroupSize == INT64_MAX);
}

TEST_CASE("kernel blob: generated PTX passes and gives its parameters, broken text is refused") {
  Compiled k = addKernel("nvidia-h200");
  auto facts = rt::checkKernelBlob(rt::Target::Ptx, k.blob, k.entry, k.arch);
  REQUIRE_MESSAGE(bool(facts), (facts ? "" : facts.error().str()));
  CHECK(facts->bindings == 3);
  CHECK(facts->workgroupSize == -1);
  CHECK(facts->waitsForPrevious);
  auto no = [&](const std::vector<uint8_t>& b, const std::string& entry = "", const std::string& arch = "") {
    return refusal("nvidia-h200", b, entry.empty() ? k.entry : entry, arch.empty() ? k.arch : arch);
  };

  std::vector<uint8_t> b = k.blob;
  b.insert(b.begin() + 10, 0);
  CHECK(no(b) == "the ptx text holds a NUL byte at offset 10");
  CHECK(no(replaced(k.blob, ".version", "// .version")) == "the ptx text has no .version directive");
  CHECK(no(replaced(k.blob, ".version ", ".version 8.x ")) == "the ptx text's .version is '8.x', not MAJOR.MINOR");
  CHECK(no(replaced(k.blob, ".target", "/* .target */")) == "the ptx text has no .target directive");
  CHECK(no(k.blob, "", "sm_80") == "the ptx text targets sm_90a, the plan's device is sm_80");
  CHECK(no(k.blob, "nope") == "the ptx text has no .entry 'nope'");
  // An entry named only in a comment is not there.
  CHECK(no(bytes("// .entry nope(\n" + text(k.blob)), "nope") == "the ptx text has no .entry 'nope'");
}

TEST_CASE("kernel blob: a PTX kernel waits for the previous ones only if griddepcontrol.wait comes first") {
  Compiled k = addKernel("nvidia-h200");
  std::string ptx = text(k.blob);
  REQUIRE(ptx.find("griddepcontrol.wait;") != std::string::npos);
  auto waits = [&](const std::string& body) {
    std::string t = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry e(\n.param .u64 p0\n)\n"
                    ".maxntid 64, 1, 1\n{\n.reg .b32 %r<4>;\n" + body + "\n}\n";
    auto facts = rt::checkKernelBlob(rt::Target::Ptx, bytes(t), "e", "sm_90");
    REQUIRE_MESSAGE(bool(facts), (facts ? "" : facts.error().str()));
    return facts->waitsForPrevious;
  };
  CHECK(waits("mov.u32 %r1, %ctaid.x;\n// a comment\ngriddepcontrol.wait;\nld.global.u32 %r2, [%rd1];\nret;"));
  CHECK(waits("$L__BB0_1:\n@%p1 setp.lt.s32 %p2, %r1, 4;\ngriddepcontrol.wait;\nret;"));
  CHECK(waits("ld.param.u64 %rd1, [e_param_0];\ngriddepcontrol.wait;\nld.global.u32 %r2, [%rd1];\nret;"));
  CHECK(!waits("ld.global.u32 %r2, [%rd1];\ngriddepcontrol.wait;\nret;"));
  CHECK(!waits("st.shared.u32 [%r1], %r2;\ngriddepcontrol.wait;\nret;"));
  CHECK(!waits("@%p1 bra $L__BB0_2;\ngriddepcontrol.wait;\nret;"));
  CHECK(!waits("bar.sync 0;\ngriddepcontrol.wait;\nret;"));
  CHECK(!waits("griddepcontrol.launch_dependents;\nret;"));
  CHECK(!waits("ret;"));
  // A wait named only in a comment is none.
  CHECK(!waits("// griddepcontrol.wait;\nret;"));
}

TEST_CASE("kernel blob: generated HSACO passes, objects of another kind are refused") {
  Compiled k = addKernel("amd-mi300x");
  auto facts = rt::checkKernelBlob(rt::Target::Hsaco, k.blob, k.entry, k.arch);
  REQUIRE_MESSAGE(bool(facts), (facts ? "" : facts.error().str()));
  CHECK(facts->bindings == -1);
  CHECK(facts->workgroupSize == -1);
  auto no = [&](const std::vector<uint8_t>& b, const std::string& entry = "") {
    return refusal("amd-mi300x", b, entry.empty() ? k.entry : entry, k.arch);
  };
  std::string size = std::to_string(k.blob.size());

  std::vector<uint8_t> b = k.blob;
  b[1] = 'e';
  CHECK(no(b) == "the hsaco object is not an elf file (" + size + " bytes)");
  CHECK(no(std::vector<uint8_t>(k.blob.begin(), k.blob.begin() + 63)) == "the hsaco object is not an elf file (63 bytes)");
  b = k.blob;
  b[4] = 1;  // ELFCLASS32
  CHECK(no(b) == "the hsaco object is not a 64-bit little-endian elf file");
  b = k.blob;
  b[7] = 0;
  CHECK(no(b) == "the hsaco object's os abi is 0, not amdhsa (64)");
  b = k.blob;
  b[16] = 1;  // ET_REL
  CHECK(no(b) == "the hsaco object is not a shared object");
  b = k.blob;
  b[18] = 62;  // EM_X86_64
  CHECK(no(b) == "the hsaco object is for machine 62, not amdgpu (224)");
  b = k.blob;
  b[39] = 0x10;  // e_phoff far past the end
  CHECK(no(b) == "the hsaco object's program headers lie outside its " + size + " bytes");
  b = k.blob;
  b[60] = 0xff;  // e_shnum: more section headers than the object holds
  b[61] = 0x00;
  CHECK(no(b) == "the hsaco object's section headers lie outside its " + size + " bytes");
  CHECK(no(k.blob, "nope") == "the hsaco object has no kernel descriptor 'nope.kd'");
}

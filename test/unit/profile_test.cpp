// Unit tests of device profiles: every profile shipped in targets/ loads and
// its figures agree with each other, and a table of malformed profiles (each
// one line changed from a valid base) is refused with the exact diagnostic,
// file:line:col included.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "plan/profile.h"

using namespace poot;

namespace {

// A valid profile; the malformed cases below change one line of it.
const char* const kBase =
    "name: test\n"                    // 1
    "target: spirv\n"                 // 2
    "arch: vulkan1.3\n"               // 3
    "compute_units: 2\n"              // 4
    "workgroup_memory_bytes: 32768\n" // 5
    "max_workgroup_size: 1024\n"      // 6
    "subgroup_size: 8\n"              // 7
    "grid_limits:\n"                  // 8
    "  x: 65535\n"                    // 9
    "  y: 65535\n"                    // 10
    "  z: 65535\n"                    // 11
    "max_buffer_bytes: 134217728\n"   // 12
    "memory_bytes: 2147483648\n"      // 13
    "two_byte_floats:\n"              // 14
    "  f16: [storage, arith]\n"       // 15
    "  bf16: []\n"                    // 16
    "max_bindings: 32\n";             // 17

// kBase with line `line` (1-based) replaced by `text`, or removed when `text`
// is null.
std::string edit(int line, const char* text) {
  std::istringstream in(kBase);
  std::string out, l;
  for (int n = 1; std::getline(in, l); ++n) {
    if (n != line) out += l + "\n";
    else if (text) out += std::string(text) + "\n";
  }
  return out;
}

std::string errorOf(const std::string& text) {
  auto p = parseProfile(text, "t.yaml");
  return p ? "(accepted)" : p.error().str();
}

}  // namespace

TEST_CASE("profile: the base profile of the malformed cases is valid") {
  auto p = parseProfile(kBase, "t.yaml");
  REQUIRE(p);
  CHECK(p->name == "test");
  CHECK(p->target == Target::Spirv);
  CHECK(p->arch == "vulkan1.3");
  CHECK(p->compute_units == 2);
  CHECK(p->workgroup_memory_bytes == 32768);
  CHECK(p->max_workgroup_size == 1024);
  CHECK(p->subgroup_size == 8);
  CHECK(p->grid_limits[0] == 65535);
  CHECK(p->grid_limits[2] == 65535);
  CHECK(p->max_buffer_bytes == 134217728);
  CHECK(p->max_bindings == 32);
  CHECK(p->memory_bytes == 2147483648);
  CHECK((p->f16.storage && p->f16.arith && !p->f16.select));
  CHECK((!p->bf16.storage && !p->bf16.arith && !p->bf16.select));
}

TEST_CASE("profile: malformed profiles are refused with file:line:col and the field") {
  struct Case {
    int line;
    const char* text;  // replaces the line; null removes it
    const char* error;
  };
  const Case cases[] = {
      {7, nullptr, "t.yaml:1:1: error: missing field 'subgroup_size'"},
      {1, nullptr, "t.yaml:1:1: error: missing field 'name'"},
      {7, "subgroup_sise: 8", "t.yaml:7:1: error: unknown field 'subgroup_sise'"},
      {5, "workgroup_memory_bytes: lots",
       "t.yaml:5:25: error: field 'workgroup_memory_bytes': expected a positive integer, got 'lots'"},
      {4, "compute_units: -4", "t.yaml:4:16: error: field 'compute_units': expected a positive integer, got '-4'"},
      {6, "max_workgroup_size: 0",
       "t.yaml:6:21: error: field 'max_workgroup_size': expected a positive integer, got '0'"},
      {4, "compute_units: 1.5", "t.yaml:4:16: error: field 'compute_units': expected a positive integer, got '1.5'"},
      {7, "subgroup_size: 0x10", "t.yaml:7:16: error: field 'subgroup_size': expected a positive integer, got '0x10'"},
      {7, "subgroup_size:", "t.yaml:7:1: error: field 'subgroup_size': expected a positive integer, got nothing"},
      {13, "memory_bytes: 9223372036854775808",
       "t.yaml:13:15: error: field 'memory_bytes': integer '9223372036854775808' is too large"},
      {13, "memory_bytes: 99999999999999999999",
       "t.yaml:13:15: error: field 'memory_bytes': integer '99999999999999999999' is too large"},
      {7, "subgroup_size: 48",
       "t.yaml:7:16: error: field 'subgroup_size': expected a power of two no larger than 128, got '48'"},
      {7, "subgroup_size: 256",
       "t.yaml:7:16: error: field 'subgroup_size': expected a power of two no larger than 128, got '256'"},
      {5, "workgroup_memory_bytes: 512",
       "t.yaml:5:25: error: field 'workgroup_memory_bytes': expected at least 1024, got '512'"},
      {6, "max_workgroup_size: 4", "t.yaml:6:21: error: field 'max_workgroup_size': 4 is less than subgroup_size 8"},
      {12, "max_buffer_bytes: 4294967296",
       "t.yaml:12:19: error: field 'max_buffer_bytes': 4294967296 is more than memory_bytes 2147483648"},
      {2, "target: cuda", "t.yaml:2:9: error: field 'target': expected spirv, ptx or hsaco, got 'cuda'"},
      {3, "arch: sm_90",
       "t.yaml:3:7: error: field 'arch': target spirv needs an arch of the form vulkan1.N (N from 0 to 4), got 'sm_90'"},
      {3, "arch: vulkan1.9",
       "t.yaml:3:7: error: field 'arch': target spirv needs an arch of the form vulkan1.N (N from 0 to 4), got "
       "'vulkan1.9'"},
      {3, "arch: vulkan1.99999999999999999999",
       "t.yaml:3:7: error: field 'arch': target spirv needs an arch of the form vulkan1.N (N from 0 to 4), got "
       "'vulkan1.99999999999999999999'"},
      {4, "compute_units: \"2\"",
       "t.yaml:4:16: error: field 'compute_units': expected a positive integer, got the quoted string '2'"},
      {9, "  x: '65535'", "t.yaml:9:6: error: field 'grid_limits.x': expected a positive integer, got the quoted string '65535'"},
      {4, "compute_units: !!int 2",
       "t.yaml:4:16: error: field 'compute_units': expected a positive integer, got the tagged scalar '2'"},
      {4, "compute_units: unknown",
       "t.yaml:4:16: error: field 'compute_units': the device's count is unknown (its driver reports none); the "
       "planner needs its SMs, CUs or cores: write the number here"},
      {4, "compute_units: 'unknown'",
       "t.yaml:4:16: error: field 'compute_units': expected a positive integer, got the quoted string 'unknown'"},
      {6, "max_workgroup_size: unknown",
       "t.yaml:6:21: error: field 'max_workgroup_size': expected a positive integer, got 'unknown'"},
      {1, "name: \"lava\\x07pipe\"",
       "t.yaml:1:7: error: field 'name': byte 4 (7) is not a printable ascii character"},
      {1, "name: \"lava\\npipe\"",
       "t.yaml:1:7: error: field 'name': byte 4 (10) is not a printable ascii character"},
      {17, "max_bindings: 0", "t.yaml:17:15: error: field 'max_bindings': expected a positive integer, got '0'"},
      {17, "max_bindings: 4294967296",
       "t.yaml:17:15: error: field 'max_bindings': expected at most 4294967295, got '4294967296'"},
      {17, nullptr, "t.yaml:1:1: error: missing field 'max_bindings'"},
      {3, "arch: [vulkan1.3]", "t.yaml:3:7: error: field 'arch': expected a non-empty string, got a list"},
      {1, "name: \"\"", "t.yaml:1:7: error: field 'name': expected a non-empty string, got ''"},
      {9, "  x: 4294967296",
       "t.yaml:9:6: error: field 'grid_limits.x': expected at most 4294967295, got '4294967296'"},
      {11, nullptr, "t.yaml:9:3: error: missing field 'grid_limits.z'"},
      {11, "  w: 65535", "t.yaml:11:3: error: unknown field 'grid_limits.w'"},
      {15, "  f16: [storage, add]",
       "t.yaml:15:18: error: field 'two_byte_floats.f16': expected storage, arith or select, got 'add'"},
      {15, "  f16: [storage, storage]", "t.yaml:15:18: error: field 'two_byte_floats.f16': 'storage' is listed twice"},
      {15, "  f16: [arith]", "t.yaml:15:8: error: field 'two_byte_floats.f16': 'arith' needs 'storage'"},
      {15, "  f16: storage",
       "t.yaml:15:8: error: field 'two_byte_floats.f16': expected a list drawn from [storage, arith, select], got "
       "'storage'"},
      {15, "  f16: [storage, select]",
       "t.yaml:15:18: error: field 'two_byte_floats.f16': target spirv cannot lower 'select'"},
      {16, nullptr, "t.yaml:15:3: error: missing field 'two_byte_floats.bf16'"},
      {16, "  f16: []", "t.yaml:16:3: error: duplicate field 'two_byte_floats.f16'"},
      {16, "  bf16: []\nname: again", "t.yaml:17:1: error: duplicate field 'name'"},
      {9, "  x: [1, 2", "t.yaml:10:4: error: invalid yaml: end of sequence flow not found"},
      {7, "  subgroup_size: 8", "t.yaml:7:16: error: invalid yaml: illegal map value"},
      {16, "  bf16: []\n---\nname: second", "t.yaml:17:1: error: expected one yaml document, found another"},
      // yaml-cpp 0.7 alone would loop forever on these (its issue 1040).
      {1, ", name: test", "t.yaml:1:1: error: invalid yaml: unexpected ','"},
  };
  for (const Case& c : cases) {
    std::string text = edit(c.line, c.text);
    INFO("line ", c.line, " -> ", std::string(c.text ? c.text : "(removed)"));
    CHECK(errorOf(text) == c.error);
  }
}

TEST_CASE("profile: documents that are not a mapping") {
  CHECK(errorOf("") == "t.yaml:1:1: error: expected a mapping of profile fields, got an empty file");
  CHECK(errorOf("# nothing but a comment\n") ==
        "t.yaml:1:1: error: expected a mapping of profile fields, got an empty file");
  CHECK(errorOf("- a\n- b\n") == "t.yaml:1:1: error: expected a mapping of profile fields, got a list");
  CHECK(errorOf("hello\n") == "t.yaml:1:1: error: expected a mapping of profile fields, got 'hello'");
  CHECK(errorOf("[a, b], c\n") == "t.yaml:1:7: error: invalid yaml: unexpected ','");
  std::string deep = "name: " + std::string(5000, '[') + std::string(5000, ']') + "\n";
  CHECK(errorOf(deep).find("error: invalid yaml: nested too deeply") != std::string::npos);
}

TEST_CASE("profile: error kinds") {
  auto bad = parseProfile(edit(7, "subgroup_size: 48"), "t.yaml");
  REQUIRE(!bad);
  CHECK(bad.error().kind == ErrorKind::Profile);
  auto syntax = parseProfile(edit(9, "  x: [1, 2"), "t.yaml");
  REQUIRE(!syntax);
  CHECK(syntax.error().kind == ErrorKind::Syntax);
  auto missing = loadProfile("/nonexistent/dir/profile.yaml");
  REQUIRE(!missing);
  CHECK(missing.error().kind == ErrorKind::Io);
  CHECK(missing.error().loc.file == "/nonexistent/dir/profile.yaml");
}

TEST_CASE("profile: arch forms per target") {
  auto with = [](const char* target, const char* arch) {
    std::string text = edit(2, (std::string("target: ") + target).c_str());
    std::istringstream in(text);
    std::string out, l;
    for (int n = 1; std::getline(in, l); ++n) out += (n == 3 ? std::string("arch: ") + arch : l) + "\n";
    return errorOf(out);
  };
  CHECK(with("ptx", "sm_90") == "(accepted)");
  CHECK(with("ptx", "sm_90a") == "(accepted)");
  CHECK(with("ptx", "sm_100") == "(accepted)");
  CHECK(with("hsaco", "gfx942") == "(accepted)");
  CHECK(with("hsaco", "gfx90a") == "(accepted)");
  CHECK(with("hsaco", "gfx1100") == "(accepted)");
  CHECK(with("spirv", "vulkan1.2") == "(accepted)");
  CHECK(with("ptx", "sm90") ==
        "t.yaml:3:7: error: field 'arch': target ptx needs an arch of the form sm_NN, got 'sm90'");
  CHECK(with("ptx", "gfx942") ==
        "t.yaml:3:7: error: field 'arch': target ptx needs an arch of the form sm_NN, got 'gfx942'");
  CHECK(with("hsaco", "gfx9") ==
        "t.yaml:3:7: error: field 'arch': target hsaco needs an arch of the form gfxNNN, got 'gfx9'");
  CHECK(with("hsaco", "sm_90") ==
        "t.yaml:3:7: error: field 'arch': target hsaco needs an arch of the form gfxNNN, got 'sm_90'");
  CHECK(with("spirv", "vulkan2.0") ==
        "t.yaml:3:7: error: field 'arch': target spirv needs an arch of the form vulkan1.N (N from 0 to 4), got "
        "'vulkan2.0'");
  CHECK(with("spirv", "vulkan1.0") == "(accepted)");
  CHECK(with("spirv", "vulkan1.4") == "(accepted)");
  CHECK(with("spirv", "vulkan1.03") != "(accepted)");
}

TEST_CASE("profile: memory_bandwidth_bytes_per_s is optional and a positive integer") {
  CHECK(parseProfile(edit(17, "max_bindings: 32"), "t.yaml")->memory_bandwidth_bytes_per_s == 0);
  auto p = parseProfile(edit(17, "max_bindings: 32\nmemory_bandwidth_bytes_per_s: 4270000000000"), "t.yaml");
  REQUIRE(p);
  CHECK(p->memory_bandwidth_bytes_per_s == 4270000000000);
  CHECK(errorOf(edit(17, "max_bindings: 32\nmemory_bandwidth_bytes_per_s: 0")) ==
        "t.yaml:18:31: error: field 'memory_bandwidth_bytes_per_s': expected a positive integer, got '0'");
  CHECK(errorOf(edit(17, "max_bindings: 32\nmemory_bandwidth_bytes_per_s: 4.27e12")) ==
        "t.yaml:18:31: error: field 'memory_bandwidth_bytes_per_s': expected a positive integer, got '4.27e12'");
}

TEST_CASE("profile: select is allowed on ptx and hsaco") {
  std::string text = edit(15, "  f16: [storage, arith, select]");
  text.replace(text.find("target: spirv"), 13, "target: hsaco");
  text.replace(text.find("arch: vulkan1.3"), 15, "arch: gfx942");
  auto p = parseProfile(text, "t.yaml");
  REQUIRE(p);
  CHECK(p->f16.select);
}

TEST_CASE("profile: matrix_multiply is optional, names known shapes in order, and needs ptx on sm_80 or newer (sm_90a for a warpgroup's, hsaco on CDNA 2 or 3 for a wave's)") {
  auto profile = [](const char* target, const char* arch, const char* line) {
    std::string text = edit(17, (std::string("max_bindings: 32\n") + line).c_str());
    text.replace(text.find("target: spirv"), 13, std::string("target: ") + target);
    text.replace(text.find("arch: vulkan1.3"), 15, std::string("arch: ") + arch);
    return text;
  };
  auto ptx = [&](const char* arch, const char* line) { return profile("ptx", arch, line); };
  auto hsaco = [&](const char* arch, const char* line) { return profile("hsaco", arch, line); };
  auto p = parseProfile(ptx("sm_90", "matrix_multiply: [m16n8k8.tf32, m16n8k16.bf16]"), "t.yaml");
  REQUIRE(p);
  CHECK(p->matrix_ops == std::vector<MatrixOp>{MatrixOp::M16N8K8Tf32, MatrixOp::M16N8K16Bf16});
  CHECK(p->hasMatrix(MatrixOp::M16N8K16Bf16));
  CHECK(!p->hasMatrix(MatrixOp::M16N8K16F16));
  auto none = parseProfile(ptx("sm_90", "# none"), "t.yaml");
  REQUIRE(none);
  CHECK(none->matrix_ops.empty());
  CHECK(errorOf(ptx("sm_80a", "matrix_multiply: [m16n8k16.f16]")) == "(accepted)");
  CHECK(errorOf(ptx("sm_75", "matrix_multiply: [m16n8k16.f16]")) ==
        "t.yaml:18:19: error: field 'matrix_multiply': m16n8k16.f16 needs target ptx and sm_80 or newer, got target ptx "
        "arch sm_75");
  CHECK(errorOf(edit(17, "max_bindings: 32\nmatrix_multiply: [m16n8k8.tf32]")) ==
        "t.yaml:18:19: error: field 'matrix_multiply': m16n8k8.tf32 needs target ptx and sm_80 or newer, got target "
        "spirv arch vulkan1.3");
  // A warpgroup's op is wgmma, which only sm_90a has.
  auto group = parseProfile(ptx("sm_90a", "matrix_multiply: [m64nNk16.bf16, m16n8k16.bf16]"), "t.yaml");
  REQUIRE(group);
  CHECK(group->matrix_ops == std::vector<MatrixOp>{MatrixOp::M64NK16Bf16, MatrixOp::M16N8K16Bf16});
  CHECK(errorOf(ptx("sm_90", "matrix_multiply: [m16n8k16.bf16, m64nNk16.bf16]")) ==
        "t.yaml:18:19: error: field 'matrix_multiply': m64nNk16.bf16 needs target ptx and sm_90a, got target ptx arch "
        "sm_90");
  CHECK(errorOf(ptx("sm_100a", "matrix_multiply: [m64nNk16.f16]")) ==
        "t.yaml:18:19: error: field 'matrix_multiply': m64nNk16.f16 needs target ptx and sm_90a, got target ptx arch "
        "sm_100a");
  CHECK(errorOf(ptx("sm_90", "matrix_multiply: [tf32]")) ==
        "t.yaml:18:19: error: field 'matrix_multiply': expected one of m16n8k8.tf32, m16n8k16.bf16, m16n8k16.f16, "
        "m64nNk16.bf16, m64nNk16.f16, m16n16k16.bf16, m16n16k16.f16, got "
        "'tf32'");
  CHECK(errorOf(ptx("sm_90", "matrix_multiply: [m16n8k8.tf32, m16n8k8.tf32]")) ==
        "t.yaml:18:33: error: field 'matrix_multiply': 'm16n8k8.tf32' is listed twice");
  CHECK(errorOf(ptx("sm_90", "matrix_multiply: m16n8k8.tf32")) ==
        "t.yaml:18:18: error: field 'matrix_multiply': expected a list drawn from [m16n8k8.tf32, m16n8k16.bf16, "
        "m16n8k16.f16, m64nNk16.bf16, m64nNk16.f16, m16n16k16.bf16, m16n16k16.f16], got 'm16n8k8.tf32'");
  // A wave's op is AMD's MFMA: hsaco on gfx90a or gfx940 to gfx942, and
  // only there.
  auto wave = parseProfile(hsaco("gfx942", "matrix_multiply: [m16n16k16.bf16, m16n16k16.f16]"), "t.yaml");
  REQUIRE(wave);
  CHECK(wave->matrix_ops == std::vector<MatrixOp>{MatrixOp::M16N16K16Bf16, MatrixOp::M16N16K16F16});
  CHECK(errorOf(hsaco("gfx90a", "matrix_multiply: [m16n16k16.f16]")) == "(accepted)");
  CHECK(errorOf(hsaco("gfx908", "matrix_multiply: [m16n16k16.bf16]")) ==
        "t.yaml:18:19: error: field 'matrix_multiply': m16n16k16.bf16 needs target hsaco and gfx90a, gfx940, gfx941 or "
        "gfx942, got target hsaco arch gfx908");
  CHECK(errorOf(hsaco("gfx942", "matrix_multiply: [m16n8k16.bf16]")) ==
        "t.yaml:18:19: error: field 'matrix_multiply': m16n8k16.bf16 needs target ptx and sm_80 or newer, got target "
        "hsaco arch gfx942");
  CHECK(errorOf(ptx("sm_90a", "matrix_multiply: [m16n16k16.bf16]")) ==
        "t.yaml:18:19: error: field 'matrix_multiply': m16n16k16.bf16 needs target hsaco and gfx90a, gfx940, gfx941 or "
        "gfx942, got target ptx arch sm_90a");
}

TEST_CASE("profile: every profile in targets/ loads and is self-consistent") {
  namespace fs = std::filesystem;
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(fs::path(POOT_SOURCE_DIR) / "targets")) {
    if (entry.path().extension() != ".yaml") continue;
    std::string path = entry.path().string();
    INFO(path);
    auto p = loadProfile(path);
    REQUIRE_MESSAGE(p, (p ? std::string() : p.error().str()));
    names.insert(p->name);
    // The file is named after the device it describes.
    CHECK(p->name == entry.path().stem().string());
    CHECK(p->compute_units > 0);
    CHECK(p->max_workgroup_size % p->subgroup_size == 0);
    CHECK(p->workgroup_memory_bytes <= p->memory_bytes);
    CHECK(p->max_buffer_bytes <= p->memory_bytes);
    for (int64_t g : p->grid_limits) CHECK((g >= 65535 && g <= 4294967295));
    if (p->target == Target::Spirv) {
      // Vulkan's required minimums (Vulkan spec, "Required Limits").
      CHECK(p->workgroup_memory_bytes >= 16384);
      CHECK(p->max_workgroup_size >= 128);
      CHECK((!p->f16.select && !p->bf16.select));
      CHECK(p->max_buffer_bytes <= 4294967295);
      CHECK(p->max_bindings >= 4);
    } else {
      // The LLVM back ends lower every two-byte operation.
      for (const TwoByteOps& ops : {p->f16, p->bf16}) CHECK((ops.storage && ops.arith && ops.select));
    }
    if (p->target == Target::Ptx) CHECK(p->subgroup_size == 32);
    if (p->target == Target::Hsaco) CHECK((p->subgroup_size == 32 || p->subgroup_size == 64));
  }
  for (const char* want : {"nvidia-h200", "nvidia-h200-vulkan", "amd-mi300x", "amd-rx7900xtx", "amd-rx7900xtx-radv",
                           "intel-arc-a770", "raspberrypi5-v3d", "lavapipe"})
    CHECK(names.count(want) == 1);
}

TEST_CASE("profile: target names") {
  CHECK(std::string(targetName(Target::Spirv)) == "spirv");
  CHECK(std::string(targetName(Target::Ptx)) == "ptx");
  CHECK(std::string(targetName(Target::Hsaco)) == "hsaco");
}

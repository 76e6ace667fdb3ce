// How each kind of blob is read. SPIR-V is walked instruction by instruction
// (each first word holds the word count in its high half and the opcode in
// its low half); only OpCapability, OpMemoryModel, OpEntryPoint,
// OpExecutionMode, OpDecorate and OpVariable are looked into, and pointer
// access chains refused. PTX is read as text, token by token, comments dropped. HSACO
// is read as an ELF header; the descriptor's name is looked for among the
// bytes (the string table holds it), which is enough to tell one kernel's
// object from another's.
#include "runtime/kernel_blob.h"

#include <spirv/unified1/spirv.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string_view>

#include "ir/budget.h"

namespace poot::rt {

namespace {

Error bad(std::string msg) { return makeError(ErrorKind::Format, {}, std::move(msg)); }

std::string hex(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int i = 28; i >= 0; i -= 4) s += digits[(v >> i) & 15];
  return s;
}

// A SPIR-V literal string: UTF-8 bytes up to a NUL, packed into words.
std::string literal(const std::vector<uint32_t>& w, size_t from, size_t end) {
  std::string s;
  for (size_t i = from; i < end; ++i)
    for (int b = 0; b < 4; ++b) {
      char c = char((w[i] >> (8 * b)) & 0xff);
      if (c == 0) return s;
      s += c;
    }
  return s;
}

// The capabilities the SPIR-V writer declares (codegen/spirv/emit.cpp) and
// the Vulkan backend enables the features of.
bool allowedCapability(uint32_t c) {
  switch (c) {
    case SpvCapabilityShader:
    case SpvCapabilityInt8:
    case SpvCapabilityInt16:
    case SpvCapabilityInt64:
    case SpvCapabilityFloat16:
    case SpvCapabilityStorageBuffer8BitAccess:
    case SpvCapabilityStorageBuffer16BitAccess:
    case SpvCapabilitySignedZeroInfNanPreserve: return true;
    default: return false;
  }
}

bool allowedStorage(uint32_t c) {
  return c == SpvStorageClassStorageBuffer || c == SpvStorageClassWorkgroup || c == SpvStorageClassFunction ||
         c == SpvStorageClassPrivate || c == SpvStorageClassInput;
}

Expected<BlobFacts> checkSpirv(const std::vector<uint8_t>& blob, const std::string& entry) {
  if (blob.size() % 4 != 0)
    return bad("the spir-v module has " + std::to_string(blob.size()) + " bytes, not a whole number of 4-byte words");
  size_t n = blob.size() / 4;
  if (n < 5) return bad("the spir-v module has " + std::to_string(n) + " words, fewer than its 5-word header");
  std::vector<uint32_t> w(n);
  for (size_t i = 0; i < n; ++i)
    w[i] = uint32_t(blob[4 * i]) | uint32_t(blob[4 * i + 1]) << 8 | uint32_t(blob[4 * i + 2]) << 16 |
           uint32_t(blob[4 * i + 3]) << 24;
  if (w[0] != SpvMagicNumber)
    return bad("the spir-v magic number is " + hex(w[0]) + ", expected " + hex(SpvMagicNumber));
  uint32_t major = (w[1] >> 16) & 0xff, minor = (w[1] >> 8) & 0xff;
  if ((w[1] & 0xff0000ffu) != 0 || major != 1 || minor > 6)
    return bad("the spir-v version word is " + hex(w[1]) + ", not a version from 1.0 to 1.6");
  if (w[3] == 0) return bad("the spir-v id bound is 0");
  if (w[4] != 0) return bad("the spir-v schema word is " + std::to_string(w[4]) + ", not 0");

  uint32_t fn = 0;  // the entry's function id, once found
  bool found = false;
  std::vector<std::pair<uint32_t, int64_t>> localSizes;  // function id, threads
  std::set<uint32_t> bindings;
  std::set<uint32_t> buffers, bound;  // storage buffer variables, ids decorated with a binding
  for (size_t i = 5; i < n;) {
    uint32_t count = w[i] >> 16, op = w[i] & 0xffff;
    if (count == 0) return bad("the spir-v instruction at word " + std::to_string(i) + " has a word count of 0");
    if (count > n - i)
      return bad("the spir-v instruction at word " + std::to_string(i) + " (opcode " + std::to_string(op) +
                 ") runs past the end of the module");
    size_t end = i + count;
    if (op == SpvOpEntryPoint && count >= 4 && w[i + 1] == SpvExecutionModelGLCompute &&
        literal(w, i + 3, end) == entry) {
      fn = w[i + 2];
      found = true;
    }
    if (op == SpvOpExecutionMode && count >= 6 && w[i + 2] == SpvExecutionModeLocalSize)
      localSizes.emplace_back(w[i + 1], mulBytes(mulBytes(w[i + 3], w[i + 4]), w[i + 5]));  // saturating
    if (op == SpvOpDecorate && count >= 4 && w[i + 2] == SpvDecorationBinding) bindings.insert(w[i + 3]);
    // What the pipeline layout does not have, a driver may crash on rather
    // than refuse (lavapipe did, on a DescriptorSet word a forged plan
    // changed): every backend binds one descriptor set, 0, of storage
    // buffers, and no push constants (a storage class refused below).
    if (op == SpvOpDecorate && count >= 4 && w[i + 2] == SpvDecorationDescriptorSet && w[i + 3] != 0)
      return bad("the spir-v module uses descriptor set " + std::to_string(w[i + 3]) + " (word " +
                 std::to_string(i + 3) + "); kernels bind set 0 only");
    // What would let a kernel make a pointer the index bounds (spirv_bounds.h)
    // do not follow, or use a feature the device was not asked for.
    auto at = [i] { return " (word " + std::to_string(i) + ")"; };  // built only for a refusal
    if (op == SpvOpCapability && count >= 2 && !allowedCapability(w[i + 1]))
      return bad("the spir-v module declares capability " + std::to_string(w[i + 1]) + at() +
                 ", which no kernel poot writes needs");
    if (op == SpvOpMemoryModel && count >= 3 && w[i + 1] != SpvAddressingModelLogical)
      return bad("the spir-v module's addressing model is " + std::to_string(w[i + 1]) + at() + ", not Logical");
    if (op == SpvOpPtrAccessChain || op == SpvOpInBoundsPtrAccessChain)
      return bad("the spir-v module offsets a pointer with opcode " + std::to_string(op) + at());
    if (op == SpvOpVariable && count >= 4 && !allowedStorage(w[i + 3]))
      return bad("the spir-v module declares a variable in storage class " + std::to_string(w[i + 3]) + at() +
                 "; kernels hold storage buffers, workgroup, function, private and built-in input variables");
    if (op == SpvOpVariable && count >= 4 && w[i + 3] == SpvStorageClassStorageBuffer) buffers.insert(w[i + 2]);
    if (op == SpvOpDecorate && count >= 4 && w[i + 2] == SpvDecorationBinding) bound.insert(w[i + 1]);
    i = end;
  }
  if (!found) return bad("the spir-v module has no compute entry point '" + entry + "'");
  for (uint32_t id : bound)
    if (!buffers.count(id))
      return bad("the spir-v module binds %" + std::to_string(id) + ", which is not a storage buffer variable");
  if (!bindings.empty() && *bindings.rbegin() != bindings.size() - 1)
    return bad("the spir-v module's " + std::to_string(bindings.size()) +
               " storage buffer bindings are not numbered 0 to " + std::to_string(bindings.size() - 1));
  BlobFacts facts;
  facts.bindings = int(bindings.size());
  for (auto [id, threads] : localSizes)
    if (id == fn) facts.workgroupSize = threads;
  return facts;
}

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// PTX text as tokens, comments dropped: words, and each of ( ) , ; alone.
std::vector<std::string_view> ptxTokens(std::string_view text) {
  std::vector<std::string_view> out;
  auto punct = [](char c) { return c == '(' || c == ')' || c == ',' || c == ';'; };
  for (size_t i = 0; i < text.size();) {
    if (isSpace(text[i])) {
      ++i;
    } else if (text.compare(i, 2, "//") == 0) {
      i = std::min(text.find('\n', i), text.size());
    } else if (text.compare(i, 2, "/*") == 0) {
      size_t close = text.find("*/", i + 2);
      i = close == std::string_view::npos ? text.size() : close + 2;
    } else if (punct(text[i])) {
      out.push_back(text.substr(i++, 1));
    } else {
      size_t from = i;
      while (i < text.size() && !isSpace(text[i]) && !punct(text[i]) && text.compare(i, 2, "//") != 0) ++i;
      out.push_back(text.substr(from, i - from));
    }
  }
  return out;
}

// Whether the entry whose body follows token `from` runs griddepcontrol.wait
// before any instruction that touches memory (but the kernel's parameters,
// which no kernel writes), synchronizes or branches: statements are read in
// order (a label or a predicate before the opcode is skipped, directives are
// not instructions) up to the first of those.
bool waitsFirst(const std::vector<std::string_view>& t, size_t from) {
  size_t i = from;
  while (i < t.size() && t[i] != "{") ++i;
  for (++i; i < t.size() && t[i] != "}";) {
    size_t op = i;
    while (op < t.size() && (t[op].back() == ':' || t[op].front() == '@')) ++op;  // labels, predicates
    if (op >= t.size()) break;
    std::string_view name = t[op];
    if (name == "griddepcontrol.wait") return true;
    if (name.front() != '.' && name.substr(0, 9) != "ld.param.") {
      for (std::string_view stop : {"ld", "st", "atom", "red", "cp", "bar", "membar", "fence", "bra", "ret", "exit",
                                    "call", "griddepcontrol"})
        if (name == stop || name.substr(0, stop.size() + 1) == std::string(stop) + ".") return false;
    }
    while (i < t.size() && t[i] != ";" && t[i] != "}") ++i;
    if (i < t.size() && t[i] == ";") ++i;
  }
  return false;
}

bool isVersion(std::string_view v) {
  size_t dot = v.find('.');
  return dot != 0 && dot != std::string_view::npos && dot + 1 < v.size() &&
         v.find_first_not_of("0123456789.") == std::string_view::npos && v.find('.', dot + 1) == std::string_view::npos;
}

Expected<BlobFacts> checkPtx(const std::vector<uint8_t>& blob, const std::string& entry, const std::string& arch) {
  if (auto nul = std::find(blob.begin(), blob.end(), uint8_t(0)); nul != blob.end())
    return bad("the ptx text holds a NUL byte at offset " + std::to_string(nul - blob.begin()));
  std::vector<std::string_view> t =
      ptxTokens(std::string_view(reinterpret_cast<const char*>(blob.data()), blob.size()));
  std::string_view version, target;
  int params = -1;     // the entry's, once found
  size_t body = 0;     // the token after the entry's parameter list
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    if (t[i] == ".version" && version.empty()) version = t[i + 1];
    if (t[i] == ".target" && target.empty()) target = t[i + 1];
    if (t[i] != ".entry" || t[i + 1] != entry || params >= 0) continue;
    params = 0;
    body = i + 2;
    if (i + 2 < t.size() && t[i + 2] == "(")
      for (body = i + 3; body < t.size() && t[body] != ")"; ++body) params += t[body] == ".param";
  }
  if (version.empty()) return bad("the ptx text has no .version directive");
  if (!isVersion(version)) return bad("the ptx text's .version is '" + std::string(version) + "', not MAJOR.MINOR");
  if (target.empty()) return bad("the ptx text has no .target directive");
  if (target != arch) return bad("the ptx text targets " + std::string(target) + ", the plan's device is " + arch);
  if (params < 0) return bad("the ptx text has no .entry '" + entry + "'");
  BlobFacts facts;
  facts.bindings = params;
  facts.waitsForPrevious = waitsFirst(t, body);
  return facts;
}

template <class T>
T readLe(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t(b[at + i]) << (8 * i);
  return T(v);
}

Expected<BlobFacts> checkHsaco(const std::vector<uint8_t>& blob, const std::string& entry) {
  constexpr uint16_t kEtDyn = 3, kEmAmdgpu = 224;
  constexpr uint8_t kOsAbiAmdHsa = 64;
  if (blob.size() < 64 || std::memcmp(blob.data(), "\x7f" "ELF", 4) != 0)
    return bad("the hsaco object is not an elf file (" + std::to_string(blob.size()) + " bytes)");
  if (blob[4] != 2 || blob[5] != 1) return bad("the hsaco object is not a 64-bit little-endian elf file");
  if (blob[7] != kOsAbiAmdHsa) return bad("the hsaco object's os abi is " + std::to_string(blob[7]) + ", not amdhsa (64)");
  if (readLe<uint16_t>(blob, 16) != kEtDyn) return bad("the hsaco object is not a shared object");
  if (uint16_t m = readLe<uint16_t>(blob, 18); m != kEmAmdgpu)
    return bad("the hsaco object is for machine " + std::to_string(m) + ", not amdgpu (224)");
  auto within = [&](uint64_t offset, uint64_t entrySize, uint64_t count) {
    return offset <= blob.size() && entrySize <= 4096 && count <= 65535 && entrySize * count <= blob.size() - offset;
  };
  if (!within(readLe<uint64_t>(blob, 32), readLe<uint16_t>(blob, 54), readLe<uint16_t>(blob, 56)))
    return bad("the hsaco object's program headers lie outside its " + std::to_string(blob.size()) + " bytes");
  if (!within(readLe<uint64_t>(blob, 40), readLe<uint16_t>(blob, 58), readLe<uint16_t>(blob, 60)))
    return bad("the hsaco object's section headers lie outside its " + std::to_string(blob.size()) + " bytes");
  std::string kd = entry + ".kd";
  kd += '\0';
  if (std::search(blob.begin(), blob.end(), kd.begin(), kd.end()) == blob.end())
    return bad("the hsaco object has no kernel descriptor '" + entry + ".kd'");
  return BlobFacts{};
}

}  // namespace

Expected<BlobFacts> checkKernelBlob(Target target, const std::vector<uint8_t>& blob, const std::string& entry,
                                    const std::string& arch) {
  switch (target) {
    case Target::Spirv: return checkSpirv(blob, entry);
    case Target::Ptx: return checkPtx(blob, entry, arch);
    case Target::Hsaco: return checkHsaco(blob, entry);
  }
  return bad("unknown target");
}

}  // namespace poot::rt

// How boundLocalIndices works (spirv_bounds.h). A first walk records what an
// access chain is read against: integer, array, vector, matrix, struct and
// pointer types, integer constants, the result type of every instruction
// that has one (the grammar's table, SpvHasResultAndType), and where the
// GLSL.std.450 import, the memory model and the first function are. A
// second walk follows each chain's indices through its base's pointee type
// and numbers, past the module's bound, one UMin for each index that needs
// a clamp, one constant for each distinct (type, last element) and the
// import where the module has none. The third writes the module: the import
// before OpMemoryModel, the constants before the first OpFunction, each UMin
// just before its chain, which then takes the clamped index.
#include "runtime/spirv_bounds.h"

#include <spirv/unified1/GLSL.std.450.h>
#define SPV_ENABLE_UTILITY_CODE
#include <spirv/unified1/spirv.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

namespace poot::rt {

namespace {

constexpr const char* kGlsl = "GLSL.std.450";
constexpr uint32_t kMaxBound = 4194303;  // SPIR-V's universal limit on the id bound

Error bad(std::string msg) { return makeError(ErrorKind::Format, {}, "the spir-v module " + std::move(msg)); }

enum class Kind { Int, Array, Vector, Matrix, Struct, Pointer };

struct Type {
  Kind kind;
  uint32_t a = 0;  // Int: width; Array, Vector, Matrix: element type; Pointer: storage class
  uint32_t b = 0;  // Array: length id; Vector, Matrix: count; Pointer: pointee type
  std::vector<uint32_t> members;  // Struct
};

// Robust buffer access bounds these; every other storage class is the
// kernel's own memory.
bool bufferClass(uint32_t storageClass) {
  return storageClass == SpvStorageClassStorageBuffer || storageClass == SpvStorageClassUniform;
}

struct Clamp {
  size_t operand;   // the index operand's word in the module
  uint32_t type;    // the index's integer type
  uint32_t limit;   // the constant holding the last element's index
  uint32_t result;  // the clamped index
};

void put(std::vector<uint32_t>& out, SpvOp op, std::initializer_list<uint32_t> operands) {
  out.push_back(uint32_t(operands.size() + 1) << SpvWordCountShift | uint32_t(op));
  out.insert(out.end(), operands.begin(), operands.end());
}

}  // namespace

Expected<std::vector<uint32_t>> boundLocalIndices(const std::vector<uint32_t>& w) {
  const size_t n = w.size();
  std::unordered_map<uint32_t, Type> types;
  std::unordered_map<uint32_t, uint64_t> constants;  // integer OpConstant values
  std::unordered_map<uint32_t, uint32_t> typeOf;     // result id -> result type
  uint32_t glsl = 0;
  size_t memoryModel = 0, firstFunction = 0;
  for (size_t i = 5; i < n; i += w[i] >> 16) {
    uint32_t count = w[i] >> 16;
    auto op = SpvOp(w[i] & 0xffff);
    auto at = [&](uint32_t k) { return k < count ? w[i + k] : 0u; };
    bool hasResult = false, hasType = false;
    SpvHasResultAndType(op, &hasResult, &hasType);
    if (hasResult && hasType && count >= 3) typeOf[w[i + 2]] = w[i + 1];
    switch (op) {
      case SpvOpExtInstImport:
        if (count >= 3) {
          std::string name(reinterpret_cast<const char*>(&w[i + 2]), 4 * (count - 2));
          if (name.substr(0, name.find('\0')) == kGlsl) glsl = at(1);
        }
        break;
      case SpvOpMemoryModel: memoryModel = i; break;
      case SpvOpFunction:
        if (!firstFunction) firstFunction = i;
        break;
      case SpvOpTypeInt: types[at(1)] = {Kind::Int, at(2), at(3), {}}; break;
      case SpvOpTypeArray: types[at(1)] = {Kind::Array, at(2), at(3), {}}; break;
      case SpvOpTypeVector: types[at(1)] = {Kind::Vector, at(2), at(3), {}}; break;
      case SpvOpTypeMatrix: types[at(1)] = {Kind::Matrix, at(2), at(3), {}}; break;
      case SpvOpTypeStruct:
        types[at(1)] = {Kind::Struct, 0, 0, std::vector<uint32_t>(w.begin() + long(i) + 2, w.begin() + long(i + count))};
        break;
      case SpvOpTypePointer: types[at(1)] = {Kind::Pointer, at(2), at(3), {}}; break;
      case SpvOpConstant:
        if (auto t = types.find(at(1)); t != types.end() && t->second.kind == Kind::Int)
          constants[at(2)] = uint64_t(at(3)) | (t->second.a == 64 ? uint64_t(at(4)) << 32 : 0);
        break;
      case SpvOpUndef:
      case SpvOpConstantNull:
        if (auto t = types.find(at(1)); t != types.end() && t->second.kind == Kind::Pointer)
          return bad("makes a pointer from nothing (word " + std::to_string(i) + ")");
        break;
      default: break;
    }
  }
  if (!memoryModel || !firstFunction) return bad("has no memory model or no function");

  uint32_t next = w[3];
  std::vector<Clamp> clamps;
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> limits;  // (type, last element) -> constant id
  for (size_t i = 5; i < n; i += w[i] >> 16) {
    uint32_t count = w[i] >> 16, op = w[i] & 0xffff;
    if ((op != SpvOpAccessChain && op != SpvOpInBoundsAccessChain) || count < 4) continue;
    std::string where = " (word " + std::to_string(i) + ")";
    auto base = typeOf.find(w[i + 3]);
    auto ptr = base == typeOf.end() ? types.end() : types.find(base->second);
    if (ptr == types.end() || ptr->second.kind != Kind::Pointer)
      return bad("indexes through %" + std::to_string(w[i + 3]) + ", which is not a pointer" + where);
    if (bufferClass(ptr->second.a)) continue;
    uint32_t cur = ptr->second.b;
    for (uint32_t k = 4; k < count; ++k) {
      auto t = types.find(cur);
      uint32_t index = w[i + k];
      auto value = constants.find(index);
      if (t != types.end() && t->second.kind == Kind::Struct) {
        if (value == constants.end() || value->second >= t->second.members.size())
          return bad("selects a struct member by %" + std::to_string(index) + ", not a constant within it" + where);
        cur = t->second.members[value->second];
        continue;
      }
      if (t == types.end() || t->second.kind == Kind::Int || t->second.kind == Kind::Pointer)
        return bad("indexes into %" + std::to_string(cur) + ", not an array, vector, matrix or struct" + where);
      uint64_t length = t->second.b;
      if (t->second.kind == Kind::Array) {
        auto c = constants.find(t->second.b);
        if (c == constants.end() || c->second == 0)
          return bad("indexes into an array whose length is not a positive integer constant" + where);
        length = c->second;
      }
      cur = t->second.a;
      if (value != constants.end() && value->second < length) continue;
      auto it = typeOf.find(index);
      auto indexType = it == typeOf.end() ? types.end() : types.find(it->second);
      if (indexType == types.end() || indexType->second.kind != Kind::Int ||
          (indexType->second.a != 32 && indexType->second.a != 64))
        return bad("indexes by %" + std::to_string(index) + ", not a 32- or 64-bit integer" + where);
      uint64_t last = indexType->second.a == 32 ? std::min<uint64_t>(length - 1, UINT32_MAX) : length - 1;
      auto [limit, fresh] = limits.emplace(std::make_pair(it->second, last), 0);
      if (fresh) limit->second = next++;
      clamps.push_back({i + k, it->second, limit->second, next++});
    }
  }
  if (clamps.empty()) return w;
  bool addImport = glsl == 0;
  if (addImport) glsl = next++;
  if (next < w[3] || next > kMaxBound)
    return bad("has an id bound of " + std::to_string(w[3]) + ", which leaves no room for its " +
               std::to_string(clamps.size()) + " index bounds");

  std::vector<uint32_t> out(w.begin(), w.begin() + 5);
  out.reserve(n + 7 * clamps.size() + 5 * limits.size() + 6);
  out[3] = next;
  size_t c = 0;
  for (size_t i = 5; i < n; i += w[i] >> 16) {
    uint32_t count = w[i] >> 16;
    if (i == memoryModel && addImport) {
      char name[16] = {};  // the literal: 12 bytes and a NUL, padded to 4 words
      std::memcpy(name, kGlsl, 12);
      out.push_back(6u << SpvWordCountShift | SpvOpExtInstImport);
      out.push_back(glsl);
      for (int k = 0; k < 4; ++k) {
        uint32_t v;
        std::memcpy(&v, name + 4 * k, 4);
        out.push_back(v);
      }
    }
    if (i == firstFunction)
      for (const auto& [key, id] : limits) {
        const Type& t = types.at(key.first);
        if (t.a == 64) put(out, SpvOpConstant, {key.first, id, uint32_t(key.second), uint32_t(key.second >> 32)});
        else put(out, SpvOpConstant, {key.first, id, uint32_t(key.second)});
      }
    size_t first = c;
    for (; c < clamps.size() && clamps[c].operand < i + count; ++c)
      put(out, SpvOpExtInst, {clamps[c].type, clamps[c].result, glsl, GLSLstd450UMin, w[clamps[c].operand],
                              clamps[c].limit});
    size_t start = out.size();
    out.insert(out.end(), w.begin() + long(i), w.begin() + long(i + count));
    for (size_t k = first; k < c; ++k) out[start + (clamps[k].operand - i)] = clamps[k].result;
  }
  return out;
}

}  // namespace poot::rt

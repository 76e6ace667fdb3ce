// The module builder's getters: a type is keyed by its opcode and operands
// (plus a tag for the decorated layout types), a constant by its type and bit
// pattern, both in ordered maps, so ids follow the order of first requests
// and nothing depends on addresses or hashing.
#include "codegen/spirv/module.h"

#include <algorithm>
#include <cassert>

namespace poot::spirv {

void put(Words& section, SpvOp op, const Words& operands) {
  section.push_back(uint32_t(operands.size() + 1) << SpvWordCountShift | uint32_t(op));
  section.insert(section.end(), operands.begin(), operands.end());
}

Words literal(std::string_view s) {
  Words w(s.size() / 4 + 1, 0);
  for (size_t i = 0; i < s.size(); ++i) w[i / 4] |= uint32_t(uint8_t(s[i])) << (8 * (i % 4));
  return w;
}

Words cat(Words a, const Words& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void Module::capability(SpvCapability c) {
  if (std::find(caps_.begin(), caps_.end(), c) != caps_.end()) return;
  caps_.push_back(c);
  put(s.capabilities, SpvOpCapability, {uint32_t(c)});
}

Id Module::glsl() {
  if (glsl_ == 0) {
    glsl_ = id();
    put(s.imports, SpvOpExtInstImport, cat({glsl_}, literal("GLSL.std.450")));
  }
  return glsl_;
}

Id Module::type(SpvOp op, const Words& operands, const Words& key) {
  Words k = cat(cat({uint32_t(op)}, operands), key);
  auto it = types_.find(k);
  if (it != types_.end()) return it->second;
  Id t = id();
  put(s.globals, op, cat({t}, operands));
  if (op == SpvOpTypeInt || op == SpvOpTypeFloat) scalarBits_[t] = operands[0];
  types_.emplace(std::move(k), t);
  return t;
}

Id Module::arrayType(Id elem, uint32_t n) { return type(SpvOpTypeArray, {elem, constant(intType(32, false), n)}); }

Id Module::blockType(Id elem, uint32_t stride) {
  const uint32_t tag = 0xb10c;  // keeps these apart from undecorated types of the same operands
  size_t before = types_.size();
  Id array = type(SpvOpTypeRuntimeArray, {elem}, {tag, stride});
  if (types_.size() != before) decorate(array, SpvDecorationArrayStride, {stride});
  before = types_.size();
  Id block = type(SpvOpTypeStruct, {array}, {tag});
  if (types_.size() != before) {
    decorate(block, SpvDecorationBlock);
    memberDecorate(block, 0, SpvDecorationOffset, {0});
  }
  return block;
}

Id Module::constant(Id type, uint64_t bits) {
  auto key = std::make_pair(type, bits);
  auto it = constants_.find(key);
  if (it != constants_.end()) return it->second;
  assert(scalarBits_.count(type));
  Id c = id();
  uint32_t width = scalarBits_.at(type);
  if (width == 64)
    put(s.globals, SpvOpConstant, {type, c, uint32_t(bits), uint32_t(bits >> 32)});
  else
    put(s.globals, SpvOpConstant, {type, c, uint32_t(bits)});
  constants_.emplace(key, c);
  return c;
}

Id Module::boolConstant(bool v) {
  Id t = boolType();
  auto key = std::make_pair(t, uint64_t(v));
  auto it = constants_.find(key);
  if (it != constants_.end()) return it->second;
  Id c = id();
  put(s.globals, v ? SpvOpConstantTrue : SpvOpConstantFalse, {t, c});
  constants_.emplace(key, c);
  return c;
}

Id Module::variable(Id ptr, SpvStorageClass sc) {
  Id v = id();
  put(s.globals, SpvOpVariable, {ptr, v, uint32_t(sc)});
  return v;
}

void Module::name(Id target, std::string_view n) { put(s.debug, SpvOpName, cat({target}, literal(n))); }

void Module::decorate(Id target, SpvDecoration d, const Words& literals) {
  put(s.annotations, SpvOpDecorate, cat({target, uint32_t(d)}, literals));
}

void Module::memberDecorate(Id type, uint32_t member, SpvDecoration d, const Words& literals) {
  put(s.annotations, SpvOpMemberDecorate, cat({type, member, uint32_t(d)}, literals));
}

}  // namespace poot::spirv

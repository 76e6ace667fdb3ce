// The SPIR-V module builder: the logical layout's sections as word vectors,
// id allocation, and caching getters for types and constants (each distinct
// type or constant is declared once, at its first request, so a module's
// words depend only on the order of requests). The binary writer (write())
// puts the header and the sections together.
#pragma once

#include <spirv/unified1/spirv.h>

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

namespace poot::spirv {

using Id = uint32_t;
using Words = std::vector<uint32_t>;

// Appends one instruction: its word count and opcode, then the operands.
void put(Words& section, SpvOp op, const Words& operands);
// A literal string's words (UTF-8, nul-terminated, zero-padded to a word).
Words literal(std::string_view s);
// a followed by b.
Words cat(Words a, const Words& b);

// The sections of the logical layout, in order.
struct Sections {
  Words capabilities, extensions, imports, memoryModel, entryPoints, executionModes, debug, annotations,
      globals, functions;
};

class Module {
 public:
  Sections s;

  Id id() { return next_++; }
  Id bound() const { return next_; }

  void capability(SpvCapability c);  // declared once, in the order of first request
  Id glsl();                          // the GLSL.std.450 import, on first use

  Id voidType() { return type(SpvOpTypeVoid, {}); }
  Id boolType() { return type(SpvOpTypeBool, {}); }
  Id intType(uint32_t bits, bool isSigned) { return type(SpvOpTypeInt, {bits, isSigned ? 1u : 0u}); }
  Id floatType(uint32_t bits) { return type(SpvOpTypeFloat, {bits}); }
  Id vectorType(Id elem, uint32_t n) { return type(SpvOpTypeVector, {elem, n}); }
  Id pointerType(SpvStorageClass sc, Id pointee) { return type(SpvOpTypePointer, {uint32_t(sc), pointee}); }
  Id functionType(Id result) { return type(SpvOpTypeFunction, {result}); }
  // A fixed-size array without layout (for workgroup memory).
  Id arrayType(Id elem, uint32_t n);
  // struct { elem data[]; } decorated Block, member Offset 0, ArrayStride stride:
  // a storage buffer's layout.
  Id blockType(Id elem, uint32_t stride);

  // A scalar constant of an int or float type: its low bits (one word, or two
  // for 64-bit types).
  Id constant(Id type, uint64_t bits);
  Id boolConstant(bool v);

  // A global variable of pointer type ptr (in the globals section).
  Id variable(Id ptr, SpvStorageClass sc);
  void name(Id target, std::string_view name);
  void decorate(Id target, SpvDecoration d, const Words& literals = {});
  void memberDecorate(Id type, uint32_t member, SpvDecoration d, const Words& literals = {});

  // The binary writer: header (magic, version 1.5, generator 0, bound,
  // schema 0) and the sections as words.
  Words write() const;

 private:
  // Declares (once) the type `op operands`; key may add words that tell apart
  // types of the same operands but different decorations.
  Id type(SpvOp op, const Words& operands, const Words& key = {});

  Id next_ = 1;
  Id glsl_ = 0;
  std::vector<SpvCapability> caps_;
  std::map<Words, Id> types_;
  std::map<Id, uint32_t> scalarBits_;  // width of each int and float type
  std::map<std::pair<Id, uint64_t>, Id> constants_;
};

}  // namespace poot::spirv

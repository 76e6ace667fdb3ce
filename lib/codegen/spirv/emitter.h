// The emitter's state, shared by its two source files: emit.cpp writes the
// module's interface (buffers, workgroup arrays, builtins, the entry point),
// memory access and structured control flow; arith.cpp lowers the scalar
// opcodes (binary, unary, compare, select, convert, bitcast). One Emitter
// writes one kernel into one Module; every KIR value maps to one result id
// (a wide load to its vectors or elements). An f16 value is held as an f32
// id (exact: f32 holds every f16), so only storage and conversions ever see
// a 16-bit type and no f16 arithmetic, select or extract needs Float16: a
// load converts at once, a Convert to f16 narrows and widens back (exact:
// kir::legalize has rounded its operand), a store narrows exactly.
#pragma once

#include <map>
#include <unordered_map>
#include <vector>

#include "codegen/kir/kir.h"
#include "codegen/spirv/legalize.h"
#include "codegen/spirv/module.h"

namespace poot::spirv {

class Emitter {
 public:
  Emitter(const kir::Kernel& k, const Needs& needs) : k_(k), needs_(needs) {}
  Words run();

 private:
  // emit.cpp
  void declareGlobals();
  Id builtin(Id& cache, SpvBuiltIn b, Id pointee, const char* name);
  void block(const kir::Block& b);
  void inst(kir::V v);
  void loop(kir::V v);
  void branch(kir::V v);
  void label(Id l);
  Id groupId(uint32_t component);
  // Element `index` (an i32 id) of buffer `ref`, widened to its value type.
  Id load(int32_t ref, Id index);
  // A loaded storage element as its value's id (f16 held as f32, u8 and u16
  // zero-extended and i8 sign-extended to i32).
  Id widen(kir::Elem e, Id raw);
  // The elements of a buffer's vector view a wide load of `width` reads
  // through: vectors of 4 (two of them for 8) or 2.
  static int64_t viewLanes(int64_t width) { return width >= 4 ? 4 : width; }
  void store(const kir::Inst& in);

  // arith.cpp
  Id binary(const kir::Inst& in);
  Id unary(const kir::Inst& in);
  Id compare(const kir::Inst& in);
  Id convert(const kir::Inst& in);
  Id constant(const kir::Inst& in);

  // Helpers: one instruction with a result in the function, a GLSL.std.450
  // call, types and constants.
  Id op(SpvOp o, Id type, const Words& args);
  Id ext(uint32_t glslOp, Id type, const Words& args);
  Id scalar(kir::Scalar s);  // the type of a value's id (f16: f32)
  Id elemType(kir::Elem e);
  Id sharedType(kir::Scalar s);  // a workgroup array's element type
  // Element `index` of the workgroup array `in` accesses, loaded as its
  // value's id, or stored from one (f16 converted either way).
  Id sharedLoad(const kir::Inst& in, Id index);
  void sharedStore(const kir::Inst& in, Id index, Id value);
  Id i32() { return m_.intType(32, true); }
  Id u32() { return m_.intType(32, false); }
  Id f32() { return m_.floatType(32); }
  Id zeroOf(kir::Scalar s);
  Id oneOf(kir::Scalar s);
  Id val(kir::V v) const { return vals_[size_t(v)]; }
  kir::Scalar typeOf(kir::V v) const { return k_.insts[size_t(v)].type; }

  const kir::Kernel& k_;
  Needs needs_;
  Module m_;
  std::vector<Id> vals_;     // KIR value -> result id
  std::vector<Id> buffers_;  // binding -> StorageBuffer variable
  std::vector<Id> shared_;   // array -> Workgroup variable
  std::vector<Id> vars_;     // variable -> Function variable
  std::map<std::pair<int32_t, uint32_t>, Id> views_;   // (binding, lanes) -> its vector view's variable
  std::unordered_map<kir::V, std::vector<Id>> wide_;  // LoadVec -> its vectors; SharedLoadVec -> its elements

  Words interface_;          // every global variable, for OpEntryPoint
  Id workgroupId_ = 0, localIndex_ = 0;  // builtin variables, on first use
  Id current_ = 0;                       // the block being filled
};

}  // namespace poot::spirv

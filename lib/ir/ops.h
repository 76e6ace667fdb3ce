// The op table: every op a graph may contain, primitive or compiler-formed,
// with its operand count, its attributes and its type rule. The verifier, the
// text parser and printer, the binary graph reader and writer (and later the
// oracle) all read this one table; adding an op means adding one row here and
// its type rule in ops.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/diag.h"
#include "ir/types.h"

namespace poot {

enum class Op : uint16_t {
  // data movement and creation
  Iota, Constant, Reshape, Broadcast, Transpose, Slice, Concat, Gather,
  DynamicSlice, DynamicUpdateSlice, ScatterUpdate, Convert,
  // elementwise unary
  Exp, Log, Neg, Sqrt, Rsqrt, Recip, Tanh, Sin, Cos, Abs, Erf, Sigmoid, Not,
  // elementwise binary (implicit numpy-style broadcasting)
  Add, Sub, Mul, Div, Max, Min, Pow, And, Or,
  // comparisons (bool result) and select
  Lt, Le, Gt, Ge, Eq, Ne, Select,
  // reductions, contractions, selection, guards
  ReduceSum, ReduceMax, ReduceMin, MatMul, TopK, IndexGuard,
  // compiler-formed ops
  Attention, Rope, BlockTopK, SelectedAttention,
  // the next token of each row of logits (greedy or drawn; oracle/sample.h)
  Sample,
  // a mixture of experts' routed part: router, top-k, the selected experts'
  // gated MLPs combined with their routing weights (docs/graph-format.md)
  RoutedExperts,
};

enum class OpClass : uint8_t { Data, Unary, Binary, Compare, Select, Reduce, Contract, Formed };

enum class AttrKind : uint8_t { Int, Float, Bool, Sym, Ints, Floats };

// Attribute values; the variant's index follows AttrKind.
using AttrValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>>;

inline AttrKind attrKindOf(const AttrValue& v) { return AttrKind(v.index()); }
const char* attrKindName(AttrKind k);

struct AttrSpec {
  const char* name;
  AttrKind kind;
  bool optional = false;
  std::vector<const char*> symbols = {};  // the allowed values of a Sym
};

struct Attr {
  std::string name;
  AttrValue value;
  bool operator==(const Attr&) const = default;
};
using Attrs = std::vector<Attr>;  // in the order of the op's AttrSpecs
inline const Attrs kNoAttrs;

// What a type rule sees: operand types, attributes and the result types the
// graph declares (used by ops whose result type is chosen, not derived:
// Reshape, Broadcast, Convert, Iota, Constant). A rule returns the result
// types or an error message; the verifier adds the location.
struct TypeQuery {
  std::vector<Type> operands;
  const Attrs* attrs = &kNoAttrs;
  std::vector<Type> declared;

  const AttrValue* attr(std::string_view name) const;
  int64_t attrInt(std::string_view name) const;
  double attrFloat(std::string_view name) const;
  const std::string& attrSym(std::string_view name) const;
  const std::vector<int64_t>& attrInts(std::string_view name) const;
};

struct TypeResult {
  std::vector<Type> types;
  std::string error;  // empty when the rule accepts
};
using TypeRule = TypeResult (*)(const TypeQuery&);

struct OpInfo {
  Op op;
  const char* name;
  OpClass cls;
  int minOperands;
  int maxOperands;  // -1: any number
  int results;
  std::vector<AttrSpec> attrs;
  TypeRule rule;
};

const OpInfo& opInfo(Op op);

// Sample's operands after the logits, in order, each one value a row of
// logits (oracle/sample.h): their names (the inputs pootc trace
// --next-token declares and the engine binds) and dtypes.
struct SampleParam {
  const char* name;
  DType dtype;
};
inline constexpr SampleParam kSampleParams[] = {
    {"temperature", DType::F32}, {"top_k", DType::I32}, {"top_p", DType::F32}, {"min_p", DType::F32}, {"uniform", DType::F32}};
// Then its penalties (oracle/sample.h, applyPenalties), one list for each
// of P equal runs of the rows in row-major order: the repetition penalty
// f32[P], and seen i32[P, S] and seen_penalty f32[P, S], the tokens whose
// logits change, ascending, and what each loses.
inline constexpr SampleParam kSamplePenalties[] = {
    {"repetition_penalty", DType::F32}, {"seen", DType::I32}, {"seen_penalty", DType::F32}};
// RoutedExperts' operands: h, the router weight, then each expert's gate,
// up and down weights in expert order (kRoutedFirstExpert + 3 e + j).
inline constexpr size_t kRoutedFirstExpert = 2;
inline constexpr size_t kRoutedPerExpert = 3;

// Ops that may run inside a fused kernel (ir/fusion.h): creation (Iota,
// Constant), index maps (Reshape, Broadcast, Transpose), Convert, every
// unary, binary, compare and Select, the reductions and Rope. Each of them
// takes the optional Int attribute `fusion`, the id of its group.
bool fusibleOp(Op op);
const char* opName(Op op);
std::optional<Op> parseOp(std::string_view name);
const std::vector<OpInfo>& opTable();
const AttrSpec* findAttrSpec(const OpInfo& info, std::string_view name);

// An optional Bool attribute (MatMul's transpose_b): its value, false when
// absent.
bool flagAttr(const Attrs& attrs, std::string_view name);

// Sorts attributes into the op table's order (the canonical one the printer
// and the verifier expect); names the op does not know go last, in their order.
void sortAttrs(const OpInfo& info, Attrs& attrs);

// Checks an eqn's operand count and attributes against the table (presence,
// kind, symbol set, canonical order, no repeats) and runs its type rule. Returns the result types.
TypeResult checkEqn(Op op, const TypeQuery& q);

// Numpy broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b);
// Normalizes a possibly negative axis against a rank; nullopt when out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

}  // namespace poot

// The graph builder the tracer writes models with. A Builder owns one Graph
// under construction: it declares parameters (input, weight, state, slot),
// appends eqns whose result types it derives from the op table's type rules
// (poot::checkEqn), gives every result a deterministic, unique, scoped name
// ("layers.0.attn.matmul.2") unless the caller names it, and records the
// graph's interface (outputs, state_outs, validations). A type-rule refusal
// while building is recorded, the first one winning, and returned by finish();
// nothing is thrown or printed, and building may go on after an error (later
// results get a placeholder type and later errors are ignored). The graph is
// held within the host memory budget (ir/budget.h): the builder counts the
// bytes of what it appends, and past the budget it records a Memory error and
// appends nothing more (its ops then return kNone).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "ir/ops.h"
#include "ir/types.h"

namespace poot::trace {

// "No value": an optional operand left out (an absent bias, mask, ...).
inline constexpr ValueId kNone = -1;

class Builder {
 public:
  // `graphName` must be an identifier (letters, digits, _ . -, starting with a
  // letter or _). `source` names the input the graph is traced from (a config
  // path); it is the file of every error the builder records.
  explicit Builder(std::string graphName, std::string source = "trace");

  // ----- parameters. Names are taken verbatim (checkpoint names such as
  // `model.layers.0.self_attn.q_proj.weight` are valid value names); a name
  // already in use is a recorded error.
  ValueId input(const std::string& name, Type type);
  ValueId weight(const std::string& name, Type type);
  ValueId state(const std::string& name, Type type);
  ValueId slot(const std::string& name, Type type, int64_t lo, int64_t hi);

  // ----- eqns. `op` appends one eqn of a one-result op and returns its result;
  // `ops` appends a multi-result op (TopK, IndexGuard) and returns every
  // result. `declared` is the result type for ops whose type is chosen
  // (Reshape, Broadcast, Convert, Iota, Constant); others derive it. Attributes
  // may be given in any order (they are sorted into the op table's).
  ValueId op(Op op, std::vector<ValueId> operands, Attrs attrs = {}, std::optional<Type> declared = {});
  std::vector<ValueId> ops(Op op, std::vector<ValueId> operands, Attrs attrs = {},
                           std::vector<Type> declared = {});

  // ----- typed shorthands, one per primitive.
  // elementwise unary
  ValueId exp(ValueId x) { return op(Op::Exp, {x}); }
  ValueId log(ValueId x) { return op(Op::Log, {x}); }
  ValueId neg(ValueId x) { return op(Op::Neg, {x}); }
  ValueId sqrt(ValueId x) { return op(Op::Sqrt, {x}); }
  ValueId rsqrt(ValueId x) { return op(Op::Rsqrt, {x}); }
  ValueId recip(ValueId x) { return op(Op::Recip, {x}); }
  ValueId tanh(ValueId x) { return op(Op::Tanh, {x}); }
  ValueId sin(ValueId x) { return op(Op::Sin, {x}); }
  ValueId cos(ValueId x) { return op(Op::Cos, {x}); }
  ValueId abs(ValueId x) { return op(Op::Abs, {x}); }
  ValueId erf(ValueId x) { return op(Op::Erf, {x}); }
  ValueId sigmoid(ValueId x) { return op(Op::Sigmoid, {x}); }
  ValueId logicalNot(ValueId x) { return op(Op::Not, {x}); }
  // elementwise binary (numpy broadcasting)
  ValueId add(ValueId a, ValueId b) { return op(Op::Add, {a, b}); }
  ValueId sub(ValueId a, ValueId b) { return op(Op::Sub, {a, b}); }
  ValueId mul(ValueId a, ValueId b) { return op(Op::Mul, {a, b}); }
  ValueId div(ValueId a, ValueId b) { return op(Op::Div, {a, b}); }
  ValueId max(ValueId a, ValueId b) { return op(Op::Max, {a, b}); }
  ValueId min(ValueId a, ValueId b) { return op(Op::Min, {a, b}); }
  ValueId pow(ValueId a, ValueId b) { return op(Op::Pow, {a, b}); }
  ValueId logicalAnd(ValueId a, ValueId b) { return op(Op::And, {a, b}); }
  ValueId logicalOr(ValueId a, ValueId b) { return op(Op::Or, {a, b}); }
  // comparisons (bool result) and select
  ValueId lt(ValueId a, ValueId b) { return op(Op::Lt, {a, b}); }
  ValueId le(ValueId a, ValueId b) { return op(Op::Le, {a, b}); }
  ValueId gt(ValueId a, ValueId b) { return op(Op::Gt, {a, b}); }
  ValueId ge(ValueId a, ValueId b) { return op(Op::Ge, {a, b}); }
  ValueId eq(ValueId a, ValueId b) { return op(Op::Eq, {a, b}); }
  ValueId ne(ValueId a, ValueId b) { return op(Op::Ne, {a, b}); }
  ValueId select(ValueId cond, ValueId a, ValueId b) { return op(Op::Select, {cond, a, b}); }
  // reductions
  ValueId reduceSum(ValueId x, int64_t axis, bool keepdim);
  ValueId reduceMax(ValueId x, int64_t axis, bool keepdim);
  ValueId reduceMin(ValueId x, int64_t axis, bool keepdim);
  // contraction and selection
  ValueId matmul(ValueId a, ValueId b) { return op(Op::MatMul, {a, b}); }
  std::vector<ValueId> topk(ValueId x, int64_t k);  // {values, indices}
  // Sample(logits, temperature, top_k, top_p, min_p, uniform, repetition_penalty, seen,
  // seen_penalty): a token a row (oracle/sample.h).
  ValueId sample(ValueId logits, const std::vector<ValueId>& params);
  // {clamped x, witness}; the witness still has to be declared a validation
  std::vector<ValueId> indexGuard(ValueId x, int64_t lo, int64_t hi);
  // data movement
  ValueId reshape(ValueId x, Shape shape);
  ValueId broadcast(ValueId x, Shape shape);
  ValueId transpose(ValueId x, std::vector<int64_t> perm);
  ValueId slice(ValueId x, int64_t axis, int64_t start, int64_t limit);
  ValueId concat(std::vector<ValueId> xs, int64_t axis);
  ValueId gather(ValueId table, ValueId idx, int64_t axis);
  ValueId dynamicSlice(ValueId x, ValueId start, int64_t axis, int64_t size);
  ValueId dynamicUpdateSlice(ValueId x, ValueId update, ValueId start, int64_t axis);
  ValueId scatterUpdate(ValueId x, ValueId idx, ValueId updates) { return op(Op::ScatterUpdate, {x, idx, updates}); }
  ValueId convert(ValueId x, DType dtype);
  // creation
  ValueId iota(Type type, int64_t axis);
  ValueId constant(Type type, std::vector<double> values);  // 1 value (splat) or numel(type)
  ValueId scalar(double value, DType dtype = DType::F32);   // a rank-0 constant

  // ----- the graph's interface.
  void output(ValueId v);
  void stateOut(ValueId state, ValueId value);
  void validation(ValueId witness);

  // ----- names. Results are named "<scope>.<local>" where <scope> is the
  // current scope stack joined with '.', and <local> is the op's name in
  // lower case unless the caller renames it; a name already taken gets the
  // first free suffix ".1", ".2", ... Top-level results (empty scope) are just
  // "<local>". Everything is a function of the calls made, so tracing twice
  // gives the same names.
  void pushScope(std::string part);
  void popScope();
  std::string scope() const;  // the current scope, "" at top level
  // The scope stack itself, to leave it for a while (see TopLevel).
  std::vector<std::string> takeScopes() { return std::exchange(scopes_, {}); }
  void restoreScopes(std::vector<std::string> scopes) { scopes_ = std::move(scopes); }
  // Renames result `v` to "<scope>.<local>" (made unique as above); returns v.
  ValueId name(ValueId v, std::string_view local);
  // Renames result `v` to exactly `full`, ignoring the scope (`tokens`,
  // `logits`); a name already taken is a recorded error. Returns v.
  ValueId nameExact(ValueId v, const std::string& full);

  // ----- queries.
  const Graph& graph() const { return g_; }
  const Type& type(ValueId v) const;  // a placeholder f32[] for kNone
  const Shape& shape(ValueId v) const { return type(v).shape; }
  DType dtype(ValueId v) const { return type(v).dtype; }
  int64_t rank(ValueId v) const { return type(v).rank(); }
  // Size of axis `axis` of v (negative counts from the end); 1 when the axis
  // does not exist (only after a recorded error).
  int64_t dim(ValueId v, int64_t axis) const;
  bool ok() const { return !error_.has_value(); }
  const std::optional<Error>& error() const { return error_; }
  // Records an error (ErrorKind::Verify unless given) at the builder's source
  // if none is recorded yet. For ops:: helpers that refuse their arguments.
  void fail(std::string message, ErrorKind kind = ErrorKind::Verify);
  // Counts `bytes` more against the host memory budget; past it, records a
  // Memory error naming `what` and returns false (and so does every later
  // call). Callers about to build host data of their own (a table of
  // constants) reserve it first.
  bool reserve(int64_t bytes, const std::string& what);
  // Runs layer(l) for l = 0 .. n-1 while nothing is recorded. Once the first
  // layer is built, the graph with n - 1 more of its size must fit the
  // budget, so that a config of a billion layers is refused after one, not
  // once memory is spent.
  void layers(int64_t n, const std::function<void(int64_t)>& layer);

  // Verifies the graph and hands it over: the first recorded error, else the
  // verifier's verdict. The builder is empty afterwards.
  Expected<Graph> finish();

 private:
  std::string uniqueName(std::string base);
  // Whether `total` bytes fit the budget; records the Memory error if not.
  bool within(int64_t total, const std::string& what);
  ValueId param(const std::string& name, Type type, Storage storage);

  Graph g_;
  std::string source_;
  std::vector<std::string> scopes_;
  std::set<std::string> used_;
  std::map<std::string, int64_t> nextSuffix_;
  std::optional<Error> error_;
  int64_t bytes_ = 0;     // what the graph holds, as counted by reserve
  bool overBudget_ = false;
};

// Enters a name scope for its lifetime: `Scope s(b, "layers.0");`.
class Scope {
 public:
  Scope(Builder& b, std::string part) : b_(b) { b_.pushScope(std::move(part)); }
  ~Scope() { b_.popScope(); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Builder& b_;
};

// Leaves every scope for its lifetime, for values shared across layers
// (masks, tables) that are first built inside one: `TopLevel t(b);`.
class TopLevel {
 public:
  explicit TopLevel(Builder& b) : b_(b), saved_(b.takeScopes()) {}
  ~TopLevel() { b_.restoreScopes(std::move(saved_)); }
  TopLevel(const TopLevel&) = delete;
  TopLevel& operator=(const TopLevel&) = delete;

 private:
  Builder& b_;
  std::vector<std::string> saved_;
};

}  // namespace poot::trace

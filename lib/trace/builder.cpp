// The Builder: result types come from the op table's type rules (checkEqn),
// names from the scope stack, and the first refusal is kept for finish().
// After an error the builder keeps appending eqns with a placeholder result
// type (the declared type, or the first operand's) so callers need no checks
// of their own; finish() returns that first error instead of the graph.
#include "trace/builder.h"

#include <cctype>

#include "ir/budget.h"

namespace poot::trace {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const Type& placeholderType() {
  static const Type t{DType::F32, {}};
  return t;
}

// Roughly what one value takes in the graph and the builder's name set.
int64_t valueBytes(const std::string& name, const Type& t) {
  return int64_t(sizeof(Value) + 2 * name.size() + 64 + 8 * t.shape.size());
}

int64_t attrBytes(const Attrs& attrs) {
  int64_t n = 0;
  for (const Attr& a : attrs) {
    n += int64_t(sizeof(Attr) + a.name.size());
    if (const auto* d = std::get_if<std::vector<double>>(&a.value)) n += int64_t(8 * d->size());
    if (const auto* i = std::get_if<std::vector<int64_t>>(&a.value)) n += int64_t(8 * i->size());
    if (const auto* s = std::get_if<std::string>(&a.value)) n += int64_t(s->size());
  }
  return n;
}

}  // namespace

Builder::Builder(std::string graphName, std::string source) : source_(std::move(source)) {
  g_.name = std::move(graphName);
}

void Builder::fail(std::string message, ErrorKind kind) {
  if (!error_) error_ = makeError(kind, Loc{source_}, std::move(message));
}

std::string Builder::uniqueName(std::string base) {
  if (used_.insert(base).second) return base;
  int64_t& n = nextSuffix_[base];
  std::string name;
  do name = base + "." + std::to_string(++n);
  while (!used_.insert(name).second);
  return name;
}

bool Builder::within(int64_t total, const std::string& what) {
  if (overBudget_) return false;
  auto s = checkHostBytes(total, "tracing (" + what + ")", Loc{source_});
  if (s) return true;
  overBudget_ = true;
  error_ = s.error();  // a budget error wins: nothing after it is built
  return false;
}

bool Builder::reserve(int64_t bytes, const std::string& what) {
  bytes_ = addBytes(bytes_, bytes);
  return within(bytes_, what);
}

void Builder::layers(int64_t n, const std::function<void(int64_t)>& layer) {
  for (int64_t l = 0; l < n && ok(); ++l) {
    int64_t before = bytes_;
    layer(l);
    if (l == 0 && n > 1) {
      int64_t one = bytes_ - before;
      within(addBytes(bytes_, mulBytes(one, n - 1)),
             std::to_string(n) + " layers of " + std::to_string(one) + " bytes each");
    }
  }
}

ValueId Builder::param(const std::string& name, Type type, Storage storage) {
  if (!reserve(valueBytes(name, type), "parameter " + name)) return kNone;
  if (!used_.insert(name).second) fail("tracing: the name '" + name + "' is declared twice");
  return g_.addParam(name, std::move(type), storage);
}

ValueId Builder::input(const std::string& name, Type type) { return param(name, std::move(type), Storage::Input); }
ValueId Builder::weight(const std::string& name, Type type) { return param(name, std::move(type), Storage::Weight); }
ValueId Builder::state(const std::string& name, Type type) { return param(name, std::move(type), Storage::State); }

ValueId Builder::slot(const std::string& name, Type type, int64_t lo, int64_t hi) {
  ValueId id = param(name, std::move(type), Storage::Slot);
  if (id == kNone) return id;
  g_.value(id).lo = lo;
  g_.value(id).hi = hi;
  return id;
}

const Type& Builder::type(ValueId v) const {
  if (v < 0 || size_t(v) >= g_.values.size()) return placeholderType();
  return g_.type(v);
}

int64_t Builder::dim(ValueId v, int64_t axis) const {
  const Shape& s = shape(v);
  auto a = normalizeAxis(axis, int64_t(s.size()));
  return a ? s[size_t(*a)] : 1;
}

std::vector<ValueId> Builder::ops(Op op, std::vector<ValueId> operands, Attrs attrs, std::vector<Type> declared) {
  const OpInfo& info = opInfo(op);
  int64_t bytes = int64_t(sizeof(Eqn) + 4 * operands.size()) + attrBytes(attrs) + info.results * valueBytes(scope(), {});
  if (!reserve(bytes, std::string("op ") + info.name)) return std::vector<ValueId>(size_t(info.results), kNone);
  sortAttrs(info, attrs);
  TypeQuery q;
  bool missing = false;
  for (ValueId v : operands) {
    missing |= v < 0 || size_t(v) >= g_.values.size();
    q.operands.push_back(type(v));
  }
  q.attrs = &attrs;
  q.declared = declared;
  TypeResult r = checkEqn(op, q);
  std::string base = scope().empty() ? lower(info.name) : scope() + "." + lower(info.name);
  if (missing) fail("tracing " + base + ": an operand of " + info.name + " is missing");
  if (!r.error.empty()) fail("tracing " + base + ": " + info.name + ": " + r.error);
  std::vector<std::pair<std::string, Type>> results;
  for (int i = 0; i < info.results; ++i) {
    Type t = i < int(r.types.size()) ? r.types[size_t(i)]
             : i < int(declared.size()) ? declared[size_t(i)]
             : !q.operands.empty()     ? q.operands[0]
                                       : placeholderType();
    results.emplace_back(uniqueName(base), std::move(t));
  }
  if (missing) {  // keep the graph well formed: a missing operand is never referenced
    for (ValueId& v : operands)
      if (v < 0 || size_t(v) >= g_.values.size()) v = 0;
  }
  Eqn& e = g_.addEqn(op, std::move(operands), std::move(attrs), results);
  return e.results;
}

ValueId Builder::op(Op op, std::vector<ValueId> operands, Attrs attrs, std::optional<Type> declared) {
  std::vector<Type> d;
  if (declared) d.push_back(std::move(*declared));
  std::vector<ValueId> r = ops(op, std::move(operands), std::move(attrs), std::move(d));
  return r.empty() ? kNone : r[0];
}

ValueId Builder::reduceSum(ValueId x, int64_t axis, bool keepdim) {
  return op(Op::ReduceSum, {x}, {{"axis", axis}, {"keepdim", keepdim}});
}
ValueId Builder::reduceMax(ValueId x, int64_t axis, bool keepdim) {
  return op(Op::ReduceMax, {x}, {{"axis", axis}, {"keepdim", keepdim}});
}
ValueId Builder::reduceMin(ValueId x, int64_t axis, bool keepdim) {
  return op(Op::ReduceMin, {x}, {{"axis", axis}, {"keepdim", keepdim}});
}

std::vector<ValueId> Builder::topk(ValueId x, int64_t k) { return ops(Op::TopK, {x}, {{"k", k}}); }

ValueId Builder::sample(ValueId logits, const std::vector<ValueId>& params) {
  std::vector<ValueId> operands = {logits};
  operands.insert(operands.end(), params.begin(), params.end());
  return ops(Op::Sample, operands, {})[0];
}

std::vector<ValueId> Builder::indexGuard(ValueId x, int64_t lo, int64_t hi) {
  return ops(Op::IndexGuard, {x}, {{"lo", lo}, {"hi", hi}});
}

ValueId Builder::reshape(ValueId x, Shape shape) { return op(Op::Reshape, {x}, {}, Type{dtype(x), std::move(shape)}); }

ValueId Builder::broadcast(ValueId x, Shape shape) {
  return op(Op::Broadcast, {x}, {}, Type{dtype(x), std::move(shape)});
}

ValueId Builder::transpose(ValueId x, std::vector<int64_t> perm) { return op(Op::Transpose, {x}, {{"perm", perm}}); }

ValueId Builder::slice(ValueId x, int64_t axis, int64_t start, int64_t limit) {
  return op(Op::Slice, {x}, {{"axis", axis}, {"start", start}, {"limit", limit}});
}

ValueId Builder::concat(std::vector<ValueId> xs, int64_t axis) { return op(Op::Concat, std::move(xs), {{"axis", axis}}); }

ValueId Builder::gather(ValueId table, ValueId idx, int64_t axis) { return op(Op::Gather, {table, idx}, {{"axis", axis}}); }

ValueId Builder::dynamicSlice(ValueId x, ValueId start, int64_t axis, int64_t size) {
  return op(Op::DynamicSlice, {x, start}, {{"axis", axis}, {"size", size}});
}

ValueId Builder::dynamicUpdateSlice(ValueId x, ValueId update, ValueId start, int64_t axis) {
  return op(Op::DynamicUpdateSlice, {x, update, start}, {{"axis", axis}});
}

ValueId Builder::convert(ValueId x, DType dtype) { return op(Op::Convert, {x}, {}, Type{dtype, shape(x)}); }

ValueId Builder::iota(Type type, int64_t axis) { return op(Op::Iota, {}, {{"axis", axis}}, std::move(type)); }

ValueId Builder::constant(Type type, std::vector<double> values) {
  return op(Op::Constant, {}, {{"value", std::move(values)}}, std::move(type));
}

ValueId Builder::scalar(double value, DType dtype) { return constant(Type{dtype, {}}, {value}); }

void Builder::output(ValueId v) {
  if (v < 0) return fail("tracing: an output is missing");
  g_.outputs.push_back(Export{v, {}});
}

void Builder::stateOut(ValueId state, ValueId value) {
  if (state < 0 || value < 0) return fail("tracing: a state_out is missing its state or value");
  g_.stateOuts.push_back(StateOut{state, value, {}});
}

void Builder::validation(ValueId witness) {
  if (witness < 0) return fail("tracing: a validation witness is missing");
  g_.validations.push_back(Export{witness, {}});
}

void Builder::pushScope(std::string part) { scopes_.push_back(std::move(part)); }
void Builder::popScope() {
  if (!scopes_.empty()) scopes_.pop_back();
}

std::string Builder::scope() const {
  std::string s;
  for (const std::string& p : scopes_) s += (s.empty() ? "" : ".") + p;
  return s;
}

ValueId Builder::name(ValueId v, std::string_view local) {
  if (v < 0 || g_.value(v).storage != Storage::Result) return v;
  std::string base = scope().empty() ? std::string(local) : scope() + "." + std::string(local);
  used_.erase(g_.value(v).name);
  g_.value(v).name = uniqueName(base);
  return v;
}

ValueId Builder::nameExact(ValueId v, const std::string& full) {
  if (v < 0 || g_.value(v).storage != Storage::Result) return v;
  if (g_.value(v).name == full) return v;
  if (used_.count(full)) {
    fail("tracing: the name '" + full + "' is already taken");
    return v;
  }
  used_.erase(g_.value(v).name);
  used_.insert(full);
  g_.value(v).name = full;
  return v;
}

Expected<Graph> Builder::finish() {
  Graph g = std::move(g_);
  g_ = Graph{};
  used_.clear();
  nextSuffix_.clear();
  scopes_.clear();
  if (error_) {
    Error e = *error_;
    error_.reset();
    return e;
  }
  if (auto s = verify(g); !s) {
    Error e = s.error();
    e.loc = Loc{source_};
    e.message = "traced graph does not verify: " + e.message;
    return e;
  }
  return g;
}

}  // namespace poot::trace

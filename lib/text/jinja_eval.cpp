// The renderer: statements write to an output string, expressions give
// values, as Jinja does under transformers' sandbox (no changes to lists or
// dicts; only a namespace's attributes may be set). Scopes as Jinja's: a
// for loop's body gets a fresh scope each pass (a `set` there does not
// outlive the pass), an if's does not; a macro sees the variables given and
// the template's own, and its arguments.
#include "text/jinja_eval.h"

#include <algorithm>
#include <cmath>

namespace poot::text::jinja {

namespace {

constexpr int kMaxMacroDepth = 16;

bool isIntLike(const Value& v) { return v.kind == Value::Int || v.kind == Value::Bool; }
int64_t intOf(const Value& v) { return v.kind == Value::Bool ? int64_t(v.b) : v.i; }

[[noreturn]] void typeError(const Expr& e, const std::string& op, const Value& a, const Value& b) {
  fail(TextErrorKind::Template, e.line, e.column,
       "'" + op + "' between " + typeName(a) + " and " + typeName(b) + " is not defined");
}

[[noreturn]] void undefinedError(const Expr& e, const Value& v) {
  fail(TextErrorKind::Template, e.line, e.column, v.s.empty() ? "an undefined value is used" : "'" + v.s + "' is undefined");
}

Value arithmetic(const Expr& e, const Value& a, const Value& b, const Args& where) {
  const std::string& op = e.name;
  if (a.kind == Value::Undefined) undefinedError(e, a);
  if (b.kind == Value::Undefined) undefinedError(e, b);
  if (op == "+" && a.kind == Value::String && b.kind == Value::String) {
    where.checkSize(a.s.size() + b.s.size());
    return Value::string(a.s + b.s);
  }
  if (op == "+" && a.kind == Value::ListKind && b.kind == Value::ListKind && a.isTuple == b.isTuple) {
    where.checkSize(a.list->size() + b.list->size());
    List l = *a.list;
    l.insert(l.end(), b.list->begin(), b.list->end());
    Value sum = Value::ofList(std::move(l));
    sum.isTuple = a.isTuple;
    return sum;
  }
  bool sequence = a.kind == Value::String || a.kind == Value::ListKind || b.kind == Value::String || b.kind == Value::ListKind;
  if (op == "*" && sequence && (isIntLike(a) || isIntLike(b))) {  // repetition
    const Value& s = isIntLike(a) ? b : a;
    int64_t n = std::max<int64_t>(0, intOf(isIntLike(a) ? a : b));
    size_t size = s.kind == Value::String ? s.s.size() : s.list->size();
    if (size == 0) return s;
    if (size > where.limits->maxOutput / uint64_t(std::max<int64_t>(n, 1))) where.checkSize(where.limits->maxOutput + 1);
    if (s.kind == Value::String) {
      std::string out;
      for (int64_t k = 0; k < n; ++k) out += s.s;
      return Value::string(std::move(out));
    }
    List out;
    for (int64_t k = 0; k < n; ++k) out.insert(out.end(), s.list->begin(), s.list->end());
    Value repeated = Value::ofList(std::move(out));
    repeated.isTuple = s.isTuple;
    return repeated;
  }
  if (op == "%" && a.kind == Value::String)
    fail(TextErrorKind::Unsupported, e.line, e.column, "string formatting with '%' is not implemented");
  bool numbers = (a.isNumber() || a.kind == Value::Bool) && (b.isNumber() || b.kind == Value::Bool);
  if (!numbers) typeError(e, op, a, b);
  if (isIntLike(a) && isIntLike(b) && op != "/") {
    int64_t x = intOf(a), y = intOf(b), r = 0;
    bool overflow = false;
    if (op == "+") overflow = __builtin_add_overflow(x, y, &r);
    else if (op == "-") overflow = __builtin_sub_overflow(x, y, &r);
    else if (op == "*") overflow = __builtin_mul_overflow(x, y, &r);
    else if (op == "//" || op == "%") {
      if (y == 0) fail(TextErrorKind::Template, e.line, e.column, "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) overflow = true;
      else {
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
        r = op == "//" ? q : m;
      }
    } else {  // **
      if (y < 0) return Value::number(std::pow(double(x), double(y)));
      r = 1;  // by squaring: y's bits, low to high
      for (int64_t base = x; y > 0 && !overflow; y >>= 1) {
        if (y & 1) overflow = __builtin_mul_overflow(r, base, &r);
        if (y > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
      }
    }
    if (overflow) fail(TextErrorKind::Unsupported, e.line, e.column, "integers past 64 bits are not implemented");
    return Value::integer(r);
  }
  double x = isIntLike(a) ? double(intOf(a)) : a.f, y = isIntLike(b) ? double(intOf(b)) : b.f;
  if (op == "+") return Value::number(x + y);
  if (op == "-") return Value::number(x - y);
  if (op == "*") return Value::number(x * y);
  if (op == "**") return Value::number(std::pow(x, y));
  if (y == 0) fail(TextErrorKind::Template, e.line, e.column, "division by zero");
  if (op == "/") return Value::number(x / y);
  double q = std::floor(x / y);
  return Value::number(op == "//" ? q : x - q * y);
}

// x[k] of a list or string (k < 0 from the end); Undefined where there is none.
Value element(const Value& x, int64_t k) {
  if (x.kind == Value::ListKind) {
    int64_t n = int64_t(x.list->size());
    if (k < 0) k += n;
    return k >= 0 && k < n ? (*x.list)[size_t(k)] : Value::undefined();
  }
  if (x.kind != Value::String) return Value::undefined();
  std::vector<std::string> chars = codePoints(x.s);
  int64_t n = int64_t(chars.size());
  if (k < 0) k += n;
  return k >= 0 && k < n ? Value::string(chars[size_t(k)]) : Value::undefined();
}

bool less(const Expr& e, const Value& a, const Value& b) {
  bool na = a.isNumber() || a.kind == Value::Bool, nb = b.isNumber() || b.kind == Value::Bool;
  if (na && nb) {
    if (isIntLike(a) && isIntLike(b)) return intOf(a) < intOf(b);
    return (isIntLike(a) ? double(intOf(a)) : a.f) < (isIntLike(b) ? double(intOf(b)) : b.f);
  }
  if (a.kind == Value::String && b.kind == Value::String) return a.s < b.s;
  if (a.kind == Value::ListKind && b.kind == Value::ListKind && a.isTuple == b.isTuple) {  // the first unequal element decides
    const List &x = *a.list, &y = *b.list;
    for (size_t k = 0; k < x.size() && k < y.size(); ++k)
      if (!equal(x[k], y[k])) return less(e, x[k], y[k]);
    return x.size() < y.size();
  }
  typeError(e, e.name, a, b);
}

bool contains(const Expr& e, const Value& container, const Value& item) {
  switch (container.kind) {
    case Value::Undefined: return false;
    case Value::String:
      if (item.kind != Value::String) typeError(e, "in", item, container);
      return container.s.find(item.s) != std::string::npos;
    case Value::ListKind:
      return std::any_of(container.list->begin(), container.list->end(), [&](const Value& v) { return equal(v, item); });
    case Value::DictKind:
      if (item.kind == Value::ListKind || item.kind == Value::DictKind) typeError(e, "in", item, container);  // unhashable
      return item.kind == Value::String && container.find(item.s);
    default: typeError(e, "in", item, container);
  }
}

}  // namespace

Renderer::Renderer(const Limits& limits, Dict variables) : limits_(limits) {
  scopes_.emplace_back();
  for (auto& [k, v] : variables) scopes_[0][k] = std::move(v);
}

std::string Renderer::render(const Body& body) {
  std::string out;
  exec(body, out);
  return out;
}

void Renderer::step(int line, int column) {
  if (++steps_ > limits_.maxSteps)
    fail(TextErrorKind::Template, line, column, "the template ran past " + std::to_string(limits_.maxSteps) + " steps");
}

void Renderer::append(std::string& out, const std::string& s, int line, int column) const {
  if (out.size() + s.size() > limits_.maxOutput)
    fail(TextErrorKind::Template, line, column, "the output passed " + std::to_string(limits_.maxOutput) + " bytes");
  out += s;
}

const Value* Renderer::bound(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
    if (auto f = it->find(name); f != it->end()) return &f->second;
  return nullptr;
}

Value Renderer::lookup(const std::string& name) const {
  const Value* v = bound(name);
  return v ? *v : Value::undefined(name);
}

Renderer::Flow Renderer::exec(const Body& body, std::string& out) {
  for (const Node& n : body) {
    step(n.line, n.column);
    switch (n.kind) {
      case Node::Text: append(out, n.text, n.line, n.column); break;
      case Node::Output: append(out, str(eval(*n.expr)), n.line, n.column); break;
      case Node::If:
        for (const auto& [cond, branch] : n.branches)
          if (!cond || truthy(eval(*cond))) {
            if (Flow f = exec(branch, out); f != Flow::Normal) return f;
            break;
          }
        break;
      case Node::For:
        if (Flow f = execFor(n, out); f != Flow::Normal) return f;
        break;
      case Node::Set: execSet(n, eval(*n.expr)); break;
      case Node::SetBlock: {
        std::string captured;
        exec(n.body, captured);
        execSet(n, Value::string(std::move(captured)));
        break;
      }
      case Node::Macro: {
        Value m{Value::Macro};
        m.macro = n.macro;
        scopes_.back()[n.names[0]] = std::move(m);
        break;
      }
      case Node::Break: return Flow::Break;
      case Node::Continue: return Flow::Continue;
    }
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::execFor(const Node& n, std::string& out) {
  Value seq = eval(*n.expr);
  List items;
  switch (seq.kind) {
    case Value::Undefined: break;
    case Value::ListKind: items = *seq.list; break;
    case Value::DictKind:
      for (const auto& kv : *seq.dict) items.push_back(Value::string(kv.first));
      break;
    case Value::String:
      for (std::string& c : codePoints(seq.s)) items.push_back(Value::string(std::move(c)));
      break;
    default: fail(TextErrorKind::Template, n.expr->line, n.expr->column, std::string(typeName(seq)) + " is not iterable");
  }
  // Binds the loop variables of one item into scope s.
  auto bind = [&](Scope& s, const Value& item) {
    if (n.names.size() == 1) {
      s[n.names[0]] = item;
      return;
    }
    if (item.kind != Value::ListKind || item.list->size() != n.names.size())
      fail(TextErrorKind::Template, n.line, n.column,
           "cannot unpack " + std::string(typeName(item)) + " into " + std::to_string(n.names.size()) + " loop variables");
    for (size_t k = 0; k < n.names.size(); ++k) s[n.names[k]] = (*item.list)[k];
  };
  if (n.filter) {
    List kept;
    for (const Value& item : items) {
      step(n.line, n.column);
      scopes_.emplace_back();
      bind(scopes_.back(), item);
      bool keep = truthy(eval(*n.filter));
      scopes_.pop_back();
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(n.orElse, out);
  int64_t count = int64_t(items.size());
  for (int64_t k = 0; k < count; ++k) {
    step(n.line, n.column);
    Dict loop = {{"index", Value::integer(k + 1)},
                 {"index0", Value::integer(k)},
                 {"revindex", Value::integer(count - k)},
                 {"revindex0", Value::integer(count - k - 1)},
                 {"first", Value::boolean(k == 0)},
                 {"last", Value::boolean(k == count - 1)},
                 {"length", Value::integer(count)},
                 {"previtem", k > 0 ? items[size_t(k - 1)] : Value::undefined("loop.previtem")},
                 {"nextitem", k + 1 < count ? items[size_t(k + 1)] : Value::undefined("loop.nextitem")},
                 {"depth", Value::integer(1)},
                 {"depth0", Value::integer(0)}};
    scopes_.emplace_back();
    scopes_.back()["loop"] = Value::ofDict(std::move(loop));
    bind(scopes_.back(), items[size_t(k)]);
    Flow f = exec(n.body, out);
    scopes_.pop_back();
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

void Renderer::checkAssignable(const Value& v, const Dict* target, int depth, int line, int column) {
  step(line, column);
  if (depth > kMaxDepth)
    fail(TextErrorKind::Template, line, column, "a value nested deeper than " + std::to_string(kMaxDepth) + " levels");
  if (v.kind == Value::DictKind) {
    if (v.dict.get() == target) fail(TextErrorKind::Template, line, column, "a namespace cannot hold itself");
    for (const auto& kv : *v.dict) checkAssignable(kv.second, target, depth + 1, line, column);
  } else if (v.kind == Value::ListKind) {
    for (const Value& e : *v.list) checkAssignable(e, target, depth + 1, line, column);
  }
}

void Renderer::execSet(const Node& n, Value v) {
  if (n.attribute) {
    const Value* ns = bound(n.names[0]);
    if (!ns || ns->kind != Value::DictKind || !ns->isNamespace)
      fail(TextErrorKind::Template, n.line, n.column, "'" + n.names[0] + "' is not a namespace (set X.Y needs X = namespace())");
    checkAssignable(v, ns->dict.get(), 1, n.line, n.column);
    for (auto& kv : *ns->dict)
      if (kv.first == n.names[1]) {
        kv.second = std::move(v);
        return;
      }
    ns->dict->emplace_back(n.names[1], std::move(v));
    return;
  }
  if (n.names.size() == 1) {
    scopes_.back()[n.names[0]] = std::move(v);
    return;
  }
  if (v.kind != Value::ListKind || v.list->size() != n.names.size())
    fail(TextErrorKind::Template, n.line, n.column,
         "cannot unpack " + std::string(typeName(v)) + " into " + std::to_string(n.names.size()) + " names");
  for (size_t k = 0; k < n.names.size(); ++k) scopes_.back()[n.names[k]] = (*v.list)[k];
}

Args Renderer::evalArgs(const Expr& e, size_t from) {
  Args a;
  a.line = e.line;
  a.column = e.column;
  a.limits = &limits_;
  for (size_t k = from; k < e.args.size(); ++k) a.positional.push_back(eval(*e.args[k]));
  for (const auto& [name, x] : e.kwargs) a.named.emplace_back(name, eval(*x));
  return a;
}

Value Renderer::eval(const Expr& e) {
  Value v = evalOne(e);
  // Work with a value grows with its size (a search, a copy, a comparison):
  // each value an expression gives counts one step more a 64 bytes or 8
  // elements, so no expression repeated within the step limit runs long.
  size_t size = v.kind == Value::String ? v.s.size() / 64 : v.kind == Value::ListKind ? v.list->size() / 8
                : v.kind == Value::DictKind ? v.dict->size() / 8 : 0;
  steps_ += int64_t(size);
  step(e.line, e.column);
  if (v.depth > kMaxDepth)
    fail(TextErrorKind::Template, e.line, e.column, "a value nested deeper than " + std::to_string(kMaxDepth) + " levels");
  return v;
}

Value Renderer::evalOne(const Expr& e) {
  Value v;
  switch (e.kind) {
    case Expr::Literal: return e.value;
    case Expr::Name: return lookup(e.name);
    case Expr::ListLit:
    case Expr::TupleLit:
      v = Value::ofList(evalArgs(e, 0).positional);
      v.isTuple = e.kind == Expr::TupleLit;
      break;
    case Expr::DictLit: {
      Dict d;
      for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
        Value key = eval(*e.args[k]);
        if (key.kind != Value::String)
          fail(TextErrorKind::Unsupported, e.args[k]->line, e.args[k]->column, "dict keys other than strings are not implemented");
        Value val = eval(*e.args[k + 1]);
        auto it = std::find_if(d.begin(), d.end(), [&](const auto& kv) { return kv.first == key.s; });
        if (it != d.end()) it->second = std::move(val);
        else d.emplace_back(key.s, std::move(val));
      }
      v = Value::ofDict(std::move(d));
      break;
    }
    case Expr::Attr:
    case Expr::Item: {
      Value object = eval(*e.args[0]);
      if (object.kind == Value::Undefined) undefinedError(e, object);
      Value key = e.kind == Expr::Attr ? Value::string(e.name) : eval(*e.args[1]);
      std::string label = (object.kind == Value::DictKind && key.kind == Value::String) ? key.s : std::string();
      if (key.kind == Value::String && object.kind == Value::DictKind) {
        const Value* found = object.find(key.s);
        return found ? *found : Value::undefined(label);
      }
      if (isIntLike(key)) return element(object, intOf(key));
      return Value::undefined(label);
    }
    case Expr::Slice: {
      Value object = eval(*e.args[0]);
      if (object.kind == Value::Undefined) undefinedError(e, object);
      auto part = [&](size_t k) { return e.args[k] ? eval(*e.args[k]) : Value::none(); };
      Value start = part(1), stop = part(2), stride = part(3);
      v = slice(object, start, stop, stride, Args{{}, {}, e.line, e.column, &limits_});
      break;
    }
    case Expr::Call: v = evalCall(e); break;
    case Expr::Filter: {
      Value subject = eval(*e.args[0]);
      v = applyFilter(e.name, subject, evalArgs(e, 1));
      break;
    }
    case Expr::Test: {
      Value subject = eval(*e.args[0]);
      return Value::boolean(applyTest(e.name, subject, evalArgs(e, 1)) != e.negated);
    }
    case Expr::Not: return Value::boolean(!truthy(eval(*e.args[0])));
    case Expr::Neg: {
      Value x = eval(*e.args[0]);
      if (isIntLike(x) && intOf(x) != INT64_MIN) return Value::integer(-intOf(x));
      if (x.kind == Value::Float) return Value::number(-x.f);
      fail(TextErrorKind::Template, e.line, e.column, std::string("cannot negate ") + typeName(x));
    }
    case Expr::Binary: v = evalBinary(e); break;
    case Expr::Cond:
      if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
      return e.args[2] ? eval(*e.args[2]) : Value::undefined();
  }
  return v;
}

Value Renderer::evalBinary(const Expr& e) {
  const std::string& op = e.name;
  Value a = eval(*e.args[0]);
  if (op == "and") return truthy(a) ? eval(*e.args[1]) : a;
  if (op == "or") return truthy(a) ? a : eval(*e.args[1]);
  Value b = eval(*e.args[1]);
  if (op == "==") return Value::boolean(equal(a, b));
  if (op == "!=") return Value::boolean(!equal(a, b));
  if (op == "<") return Value::boolean(less(e, a, b));
  if (op == ">") return Value::boolean(less(e, b, a));
  if (op == "<=") return Value::boolean(!less(e, b, a));
  if (op == ">=") return Value::boolean(!less(e, a, b));
  if (op == "in") return Value::boolean(contains(e, b, a));
  if (op == "not in") return Value::boolean(!contains(e, b, a));
  Args where{{}, {}, e.line, e.column, &limits_};
  if (op == "~") {
    std::string s = str(a), t = str(b);
    where.checkSize(s.size() + t.size());
    return Value::string(s + t);
  }
  return arithmetic(e, a, b, where);
}

Value Renderer::evalCall(const Expr& e) {
  const Expr& callee = *e.args[0];
  if (callee.kind == Expr::Attr) {
    Value object = eval(*callee.args[0]);
    if (object.kind == Value::Undefined) undefinedError(callee, object);
    const Value* member = object.find(callee.name);
    Args args = evalArgs(e, 1);
    if (member && member->kind == Value::Macro) return callMacro(*member->macro, args);
    return callMethod(object, callee.name, args);
  }
  if (callee.kind == Expr::Name && !bound(callee.name)) {
    Args args = evalArgs(e, 1);
    if (callee.name == "raise_exception") {
      args.allow("raise_exception", 1, {});
      fail(TextErrorKind::Raised, e.line, e.column, "the template refuses the conversation: " + str(args.get(0, "", Value())));
    }
    if (callee.name == "namespace") {
      if (!args.positional.empty()) args.failHere(TextErrorKind::Unsupported, "namespace() takes keyword arguments only here");
      if (++namespaces_ > kMaxNamespaces)
        fail(TextErrorKind::Template, e.line, e.column, "more than " + std::to_string(kMaxNamespaces) + " namespaces");
      Value ns = Value::ofDict(Dict(args.named.begin(), args.named.end()));
      ns.isNamespace = true;
      return ns;
    }
    bool known = false;
    Value v = callGlobal(callee.name, args, known);
    if (!known) fail(TextErrorKind::Template, e.line, e.column, "'" + callee.name + "' is undefined (called as a function)");
    return v;
  }
  Value f = eval(callee);
  if (f.kind != Value::Macro) fail(TextErrorKind::Template, e.line, e.column, std::string(typeName(f)) + " is not callable");
  return callMacro(*f.macro, evalArgs(e, 1));
}

Value Renderer::callMacro(const MacroDef& m, const Args& args) {
  if (args.positional.size() > m.params.size())
    args.failHere(TextErrorKind::Template, "macro '" + m.name + "' takes at most " + std::to_string(m.params.size()) + " arguments");
  if (macroDepth_ >= kMaxMacroDepth)
    args.failHere(TextErrorKind::Template, "macros call each other deeper than " + std::to_string(kMaxMacroDepth) + " levels");
  Scope params;
  for (const auto& [name, v] : args.named) {
    if (std::find(m.params.begin(), m.params.end(), name) == m.params.end())
      args.failHere(TextErrorKind::Template, "macro '" + m.name + "' has no parameter '" + name + "'");
    params[name] = v;
  }
  std::vector<Scope> saved(std::make_move_iterator(scopes_.begin() + 1), std::make_move_iterator(scopes_.end()));
  scopes_.resize(1);
  for (size_t k = 0; k < m.params.size(); ++k) {
    if (k < args.positional.size()) params[m.params[k]] = args.positional[k];
    else if (!params.count(m.params[k])) params[m.params[k]] = m.defaults[k] ? eval(*m.defaults[k]) : Value::undefined(m.params[k]);
  }
  scopes_.push_back(std::move(params));
  ++macroDepth_;
  std::string out;
  exec(m.body, out);  // a Failure ends the render: nothing to restore then
  --macroDepth_;
  scopes_.resize(1);
  for (Scope& s : saved) scopes_.push_back(std::move(s));
  return Value::string(std::move(out));
}

}  // namespace poot::text::jinja

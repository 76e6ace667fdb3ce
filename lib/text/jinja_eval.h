// Rendering a parsed chat template (jinja_eval.cpp) and the filters, tests,
// methods and global functions it calls (jinja_builtins.cpp). Every error is
// a Failure naming the template's line and column.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/chat_template.h"
#include "text/jinja_ast.h"

namespace poot::text::jinja {

// The bounds of one render (chat_template.h).
using Limits = RenderLimits;

// A call's evaluated arguments, where it is, and the render's limits.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
  int line = 0, column = 0;
  const Limits* limits = nullptr;

  static constexpr size_t kNamedOnly = SIZE_MAX;  // a get's position for an argument only given by name
  // The argument at position k or named `name`, or `otherwise` (a copy:
  // `otherwise` may be a temporary).
  Value get(size_t k, const char* name, const Value& otherwise) const;
  // Fails unless at most `count` positional arguments and only `names` are given.
  void allow(const std::string& what, size_t count, std::initializer_list<const char*> names) const;
  [[noreturn]] void failHere(TextErrorKind k, const std::string& message) const { fail(k, line, column, message); }
  // Fails when a string or list of n bytes or elements is more than the limits allow.
  void checkSize(size_t n) const;
};

Value applyFilter(const std::string& name, const Value& subject, const Args& args);
bool applyTest(const std::string& name, const Value& subject, const Args& args);
// A method of a string or dict (x.startswith(...), d.items(), ...).
Value callMethod(const Value& object, const std::string& name, const Args& args);
// range, dict, strftime_now (namespace and raise_exception are the
// renderer's); `known` false where name is no global function.
Value callGlobal(const std::string& name, const Args& args, bool& known);

// Python's slice of a list or string (by code points).
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step, const Args& where);

class Renderer {
 public:
  Renderer(const Limits& limits, Dict variables);
  std::string render(const Body& body);

 private:
  enum class Flow { Normal, Break, Continue };
  using Scope = std::unordered_map<std::string, Value>;

  Flow exec(const Body& body, std::string& out);
  Flow execFor(const Node& n, std::string& out);
  void execSet(const Node& n, Value v);
  Value eval(const Expr& e);  // evalOne, its steps counted and its depth checked
  Value evalOne(const Expr& e);
  Value evalBinary(const Expr& e);
  Value evalCall(const Expr& e);
  Value callMacro(const MacroDef& m, const Args& args);
  Args evalArgs(const Expr& e, size_t from);
  Value lookup(const std::string& name) const;
  const Value* bound(const std::string& name) const;
  void step(int line, int column);
  void append(std::string& out, const std::string& s, int line, int column) const;
  void checkAssignable(const Value& v, const Dict* target, int depth, int line, int column);

  Limits limits_;
  std::vector<Scope> scopes_;  // [0] the variables given, then the template's, loops' and macros'
  int64_t steps_ = 0;
  int macroDepth_ = 0;
  int namespaces_ = 0;
};

}  // namespace poot::text::jinja

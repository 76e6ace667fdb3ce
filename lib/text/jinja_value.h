// The values a chat template computes with (docs/text.md, "Chat
// templates"): Python's as Jinja sees them. Undefined (Jinja's default
// Undefined: falsy, renders empty), None, booleans, 64-bit integers, floats,
// UTF-8 strings, lists, dicts (string keys, in insertion order, as a Python
// dict keeps them; a namespace() is a dict that `set ns.x = ...` may
// change) and macros. Lists and dicts are shared, as Python's objects are.
// Internally the template code reports errors by throwing a Failure, caught
// where chat_template.cpp turns it into a TextError value.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/result.h"

namespace poot::text::jinja {

struct Failure {
  TextError error;
};

// Throws a Failure of kind k at the template's line and column.
[[noreturn]] void fail(TextErrorKind k, int line, int column, const std::string& message);

struct MacroDef;  // jinja_ast.h
struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;

// The deepest nesting of lists and dicts a render makes or reads (deeper
// values would make every recursive walk, destruction included, a stack
// risk); a render makes at most kMaxNamespaces namespaces (a namespace's
// contents can change after it is put in a list, so its depth is checked
// when it is assigned to: jinja_eval.cpp).
constexpr int kMaxDepth = 64;
constexpr int kMaxNamespaces = 64;

struct Value {
  enum Kind { Undefined, None, Bool, Int, Float, String, ListKind, DictKind, Macro } kind = Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                        // a String; an Undefined's name (for its error)
  std::shared_ptr<List> list;           // ListKind
  std::shared_ptr<Dict> dict;           // DictKind
  bool isNamespace = false;             // DictKind made by namespace()
  bool isTuple = false;                 // ListKind that Python would hold as a tuple (repr in parentheses)
  int depth = 0;                        // containers: 1 + the deepest element's (as made; see kMaxDepth)
  std::shared_ptr<const MacroDef> macro;

  static Value undefined(std::string name = {});
  static Value none() { return Value{None}; }
  static Value boolean(bool v);
  static Value integer(int64_t v);
  static Value number(double v);
  static Value string(std::string v);
  static Value ofList(List v);
  static Value ofDict(Dict v);

  bool isNumber() const { return kind == Int || kind == Float; }
  double asDouble() const { return kind == Int ? double(i) : f; }
  // A dict's value at key, or null.
  const Value* find(const std::string& key) const;
};

// Python's truth: empty strings, lists and dicts, zero, None and Undefined are false.
bool truthy(const Value& v);
// str(v) as Jinja renders it: strings as they are, None, True, 1.5, lists
// and dicts as Python's repr; Undefined empty.
std::string str(const Value& v);
// Python's repr.
std::string repr(const Value& v);
// Python's ==.
bool equal(const Value& a, const Value& b);
// "a string", "an integer", ...: for messages.
const char* typeName(const Value& v);
// json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: none), as
// transformers' tojson filter; sortKeys as sort_keys.
std::string toJson(const Value& v, int indent, bool sortKeys, int line, int column);

// A JSON value as the template sees it; nesting past kMaxDepth is a BadInput Failure.
Value fromJson(const nlohmann::ordered_json& j, int depth = 0);

// UTF-8 code points of s (for Python's per-character indexing and slicing).
std::vector<std::string> codePoints(const std::string& s);

}  // namespace poot::text::jinja

// A parsed chat template: expressions and statements (docs/text.md, "Chat
// templates", lists the subset), each naming its line and column.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja_value.h"

namespace poot::text::jinja {

struct Expr;
using ExprP = std::unique_ptr<Expr>;

struct Expr {
  enum Kind { Literal, Name, ListLit, TupleLit, DictLit, Attr, Item, Slice, Call, Filter, Test, Not, Neg, Binary, Cond };
  Kind kind;
  int line = 0, column = 0;
  Value value;       // Literal
  std::string name;  // Name; Attr's attribute; Filter's and Test's name; Binary's operator
  // Operands: Attr, Item, Slice, Call, Filter and Test the object (or
  // callee) first, then the positional arguments; Slice start, stop, step
  // (null where left out); DictLit keys and values in turn; Cond then,
  // condition, else (null where left out); Binary left, right; Not, Neg one.
  std::vector<ExprP> args;
  std::vector<std::pair<std::string, ExprP>> kwargs;  // Call, Filter, Test
  bool negated = false;                               // Test: `is not`
  int height = 1;                                     // 1 + the tallest operand's (at most kMaxHeight)
};

struct Node;
using Body = std::vector<Node>;

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprP> defaults;  // one a parameter, null where none
  Body body;
};

struct Node {
  enum Kind { Text, Output, If, For, Set, SetBlock, Macro, Break, Continue };
  Kind kind;
  int line = 0, column = 0;
  std::string text;                // Text
  ExprP expr;                      // Output; Set's value; For's iterable
  std::vector<std::string> names;  // For's loop variables; Set's targets (NS, ATTR with attribute)
  bool attribute = false;          // Set NS.ATTR = ...
  std::vector<std::pair<ExprP, Body>> branches;  // If: each condition (null for else) and its body
  ExprP filter;                    // For ... if COND
  Body body, orElse;               // For's body and else; SetBlock's body
  std::shared_ptr<const MacroDef> macro;
};

// The template's statements; a syntax error, a tag or construct not read
// (named) or nesting deeper than kMaxNesting is a Failure at its place
// (Unsupported for a known Jinja tag poot does not implement), and so is an
// expression taller than kMaxHeight (a chain of operators, postfixes or
// filters that long).
constexpr int kMaxNesting = 64;
constexpr int kMaxHeight = 128;
Body parse(const std::string& source);

}  // namespace poot::text::jinja

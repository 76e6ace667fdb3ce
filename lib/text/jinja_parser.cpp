// Recursive descent over the lexer's tokens, with Jinja's precedence (low
// to high): `x if c else y`, or, and, not, comparisons and `in`, + -, ~,
// * / // %, **, unary - +, then a primary with its postfixes (.attr,
// [index], [a:b:c], (call)) and its filters and tests (`|f`, `is t`).
#include <algorithm>
#include <utility>

#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"

namespace poot::text::jinja {

namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body run() {
    Body body;
    std::string end = parseBody(body, {});
    if (!end.empty()) failHere(TextErrorKind::Template, "'{% " + end + " %}' with no block open");
    return body;
  }

 private:
  // Nesting guard: blocks, parentheses and unary chains past kMaxNesting fail.
  struct Deeper {
    Parser& p;
    explicit Deeper(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting)
        p.failHere(TextErrorKind::Template, "the template nests deeper than " + std::to_string(kMaxNesting) + " levels");
    }
    ~Deeper() { --p.depth_; }
  };

  const Token& cur() const { return t_[at_]; }
  const Token& take() { return t_[std::min(at_++, t_.size() - 1)]; }
  bool isOp(const char* op) const { return cur().kind == Token::Op && cur().text == op; }
  bool isName(const char* n) const { return cur().kind == Token::Name && cur().text == n; }
  bool skipOp(const char* op) { return isOp(op) ? (++at_, true) : false; }
  bool skipName(const char* n) { return isName(n) ? (++at_, true) : false; }
  void expectOp(const char* op) {
    if (!skipOp(op)) failHere(TextErrorKind::Template, std::string("expected '") + op + "', found " + describe(cur()));
  }
  std::string expectName() {
    if (cur().kind != Token::Name) failHere(TextErrorKind::Template, "expected a name, found " + describe(cur()));
    return take().text;
  }
  void expectBlockEnd() {
    if (cur().kind != Token::BlockEnd) failHere(TextErrorKind::Template, "expected '%}', found " + describe(cur()));
    ++at_;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Token::End: return "the end of the template";
      case Token::VarEnd: return "'}}'";
      case Token::BlockEnd: return "'%}'";
      case Token::String: return "a string";
      case Token::Text: return "text";
      default: return "'" + t.text + "'";
    }
  }
  [[noreturn]] void failHere(TextErrorKind k, const std::string& message) const { fail(k, cur().line, cur().column, message); }
  template <class T>
  T at(T n, const Token& t) const {
    n.line = t.line;
    n.column = t.column;
    return n;
  }

  // Statements into body until a block tag among `ends` (its name is
  // returned, the tag's name consumed) or the template's end ("").
  std::string parseBody(Body& body, const std::vector<std::string>& ends) {
    for (;;) {
      const Token& t = cur();
      if (t.kind == Token::End) {
        if (!ends.empty()) failHere(TextErrorKind::Template, "a block with no '{% " + ends.back() + " %}'");
        return "";
      }
      ++at_;
      if (t.kind == Token::Text) {
        Node n = at(Node{Node::Text}, t);
        n.text = t.text;
        body.push_back(std::move(n));
      } else if (t.kind == Token::VarBegin) {
        Node n = at(Node{Node::Output}, t);
        n.expr = parseExpression();
        if (cur().kind != Token::VarEnd) failHere(TextErrorKind::Template, "expected '}}', found " + describe(cur()));
        ++at_;
        body.push_back(std::move(n));
      } else {
        const Token& name = cur();
        std::string tag = expectName();
        if (std::find(ends.begin(), ends.end(), tag) != ends.end()) return tag;
        parseStatement(tag, name, body);
      }
    }
  }

  void parseStatement(const std::string& tag, const Token& where, Body& body) {
    Deeper guard(*this);
    if (tag == "if") return body.push_back(parseIf(where));
    if (tag == "for") return body.push_back(parseFor(where));
    if (tag == "set") return body.push_back(parseSet(where));
    if (tag == "macro") return body.push_back(parseMacro(where));
    if (tag == "break" || tag == "continue") {
      if (loops_ == 0) fail(TextErrorKind::Template, where.line, where.column, "'" + tag + "' outside a loop");
      expectBlockEnd();
      return body.push_back(at(Node{tag == "break" ? Node::Break : Node::Continue}, where));
    }
    if (tag == "generation") {  // transformers' AssistantTracker: renders its body as it is
      expectBlockEnd();
      parseBody(body, {"endgeneration"});
      return expectBlockEnd();
    }
    static const char* known[] = {"raw", "call", "filter", "include", "import", "from", "extends", "block", "with", "do", "autoescape", "trans"};
    for (const char* k : known)
      if (tag == k) fail(TextErrorKind::Unsupported, where.line, where.column, "the '{% " + tag + " %}' tag is not implemented");
    fail(TextErrorKind::Template, where.line, where.column, "unknown tag '" + tag + "'");
  }

  Node parseIf(const Token& where) {
    Node n = at(Node{Node::If}, where);
    ExprP cond = parseExpression();
    for (;;) {
      expectBlockEnd();
      Body b;
      std::string end = parseBody(b, {"elif", "else", "endif"});
      n.branches.emplace_back(std::move(cond), std::move(b));
      if (end == "endif") break;
      if (end == "elif") {
        cond = parseExpression();
        continue;
      }
      expectBlockEnd();
      Body e;
      parseBody(e, {"endif"});
      n.branches.emplace_back(nullptr, std::move(e));
      break;
    }
    expectBlockEnd();
    return n;
  }

  Node parseFor(const Token& where) {
    Node n = at(Node{Node::For}, where);
    do n.names.push_back(expectName());
    while (skipOp(","));
    if (!skipName("in")) failHere(TextErrorKind::Template, "expected 'in', found " + describe(cur()));
    n.expr = parseOr();
    if (skipName("if")) n.filter = parseOr();
    if (isName("recursive")) failHere(TextErrorKind::Unsupported, "recursive loops are not implemented");
    expectBlockEnd();
    ++loops_;
    std::string end = parseBody(n.body, {"else", "endfor"});
    --loops_;
    if (end == "else") {
      expectBlockEnd();
      parseBody(n.orElse, {"endfor"});
    }
    expectBlockEnd();
    return n;
  }

  Node parseSet(const Token& where) {
    Node n = at(Node{Node::Set}, where);
    n.names.push_back(expectName());
    if (skipOp(".")) {
      n.attribute = true;
      n.names.push_back(expectName());
    } else {
      while (skipOp(",")) n.names.push_back(expectName());
    }
    if (cur().kind == Token::BlockEnd && n.names.size() == 1) {
      ++at_;
      n.kind = Node::SetBlock;
      parseBody(n.body, {"endset"});
      expectBlockEnd();
      return n;
    }
    expectOp("=");
    n.expr = parseTuple();
    expectBlockEnd();
    return n;
  }

  Node parseMacro(const Token& where) {
    Node n = at(Node{Node::Macro}, where);
    auto def = std::make_shared<MacroDef>();
    def->name = expectName();
    expectOp("(");
    while (!skipOp(")")) {
      if (!def->params.empty()) expectOp(",");
      def->params.push_back(expectName());
      def->defaults.push_back(skipOp("=") ? parseExpression() : nullptr);
    }
    expectBlockEnd();
    int loops = std::exchange(loops_, 0);  // a macro's body is outside the loops around it
    parseBody(def->body, {"endmacro"});
    loops_ = loops;
    expectBlockEnd();
    n.names.push_back(def->name);
    n.macro = std::move(def);
    return n;
  }

  // expr (, expr)*: a tuple (as a list) where there is a comma.
  ExprP parseTuple() {
    const Token& start = cur();
    ExprP first = parseExpression();
    if (!isOp(",")) return first;
    auto tuple = std::make_unique<Expr>(at(Expr{Expr::TupleLit}, start));
    tuple->args.push_back(std::move(first));
    while (skipOp(",") && !isOp(")") && cur().kind != Token::BlockEnd && cur().kind != Token::VarEnd)
      tuple->args.push_back(parseExpression());  // (x,): a trailing comma
    return sealed(std::move(tuple));
  }

  ExprP make(Expr::Kind k, const Token& t, std::string name = {}) {
    auto e = std::make_unique<Expr>(at(Expr{k}, t));
    e->name = std::move(name);
    return e;
  }
  ExprP binary(const Token& t, std::string op, ExprP a, ExprP b) {
    ExprP e = make(Expr::Binary, t, std::move(op));
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return sealed(std::move(e));
  }

  // e, its children complete: its height checked (a chain of operators,
  // postfixes or filters nests as deep as it is long, and rendering and
  // freeing it recurse as deep).
  ExprP sealed(ExprP e) {
    for (const ExprP& c : e->args)
      if (c) e->height = std::max(e->height, c->height + 1);
    for (const auto& kv : e->kwargs) e->height = std::max(e->height, kv.second->height + 1);
    if (e->height > kMaxHeight)
      fail(TextErrorKind::Template, e->line, e->column,
           "an expression nests deeper than " + std::to_string(kMaxHeight) + " operators, postfixes or filters");
    return e;
  }

  ExprP parseExpression() {
    Deeper guard(*this);
    ExprP e = parseOr();
    while (isName("if")) {
      const Token& t = take();
      ExprP cond = parseOr();
      ExprP otherwise = skipName("else") ? parseExpression() : nullptr;
      ExprP c = make(Expr::Cond, t);
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(otherwise));
      e = sealed(std::move(c));
    }
    return e;
  }

  ExprP parseOr() { return leftAssoc({"or"}, &Parser::parseAnd, true); }
  ExprP parseAnd() { return leftAssoc({"and"}, &Parser::parseNot, true); }
  ExprP parseNot() {
    if (!isName("not")) return parseCompare();
    Deeper guard(*this);
    ExprP e = make(Expr::Not, take());
    e->args.push_back(parseNot());
    return sealed(std::move(e));
  }

  ExprP parseCompare() {
    ExprP e = parseMath1();
    bool compared = false;
    for (;;) {
      const Token& t = cur();
      std::string op;
      if (t.kind == Token::Op && (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == ">" || t.text == "<=" ||
                                  t.text == ">=")) {
        op = t.text;
        ++at_;
      } else if (isName("in")) {
        op = "in";
        ++at_;
      } else if (isName("not") && at_ + 1 < t_.size() && t_[at_ + 1].kind == Token::Name && t_[at_ + 1].text == "in") {
        op = "not in";
        at_ += 2;
      } else {
        return e;
      }
      if (compared) fail(TextErrorKind::Unsupported, t.line, t.column, "chained comparisons are not implemented");
      compared = true;
      e = binary(t, op, std::move(e), parseMath1());
    }
  }

  // One level of left-associative binary operators (words: `and`, `or`).
  template <class Next>
  ExprP leftAssoc(std::initializer_list<const char*> ops, Next next, bool words = false) {
    ExprP e = (this->*next)();
    for (;;) {
      const char* found = nullptr;
      for (const char* op : ops)
        if (words ? isName(op) : isOp(op)) found = op;
      if (!found) return e;
      const Token& t = take();
      e = binary(t, found, std::move(e), (this->*next)());
    }
  }
  ExprP parseMath1() { return leftAssoc({"+", "-"}, &Parser::parseConcat); }
  ExprP parseConcat() { return leftAssoc({"~"}, &Parser::parseMath2); }
  ExprP parseMath2() { return leftAssoc({"*", "/", "//", "%"}, &Parser::parsePow); }
  ExprP parsePow() { return leftAssoc({"**"}, &Parser::parseUnaryFiltered); }
  ExprP parseUnaryFiltered() { return parseUnary(true); }

  ExprP parseUnary(bool withFilter) {
    Deeper guard(*this);
    ExprP e;
    if (isOp("-") || isOp("+")) {
      const Token& t = take();
      ExprP operand = parseUnary(false);
      if (t.text == "+") {
        e = std::move(operand);
      } else {
        e = make(Expr::Neg, t);
        e->args.push_back(std::move(operand));
        e = sealed(std::move(e));
      }
    } else {
      e = parsePrimary();
    }
    e = parsePostfix(std::move(e));
    if (withFilter) e = parseFilters(std::move(e));
    return e;
  }

  ExprP parsePrimary() {
    const Token& t = cur();
    switch (t.kind) {
      case Token::Name: {
        ++at_;
        ExprP e = make(Expr::Literal, t);
        if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
        else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
        else if (t.text == "none" || t.text == "None") e->value = Value::none();
        else e = make(Expr::Name, t, t.text);
        return e;
      }
      case Token::String: {
        std::string s;
        while (cur().kind == Token::String) s += take().text;  // adjacent strings join
        ExprP e = make(Expr::Literal, t);
        e->value = Value::string(std::move(s));
        return e;
      }
      case Token::Int:
      case Token::Float: {
        ++at_;
        ExprP e = make(Expr::Literal, t);
        e->value = t.kind == Token::Int ? Value::integer(t.i) : Value::number(t.f);
        return e;
      }
      default: break;
    }
    if (skipOp("(")) {
      if (skipOp(")")) return make(Expr::TupleLit, t);
      ExprP e = parseTuple();
      expectOp(")");
      return e;
    }
    if (skipOp("[")) {
      ExprP e = make(Expr::ListLit, t);
      while (!skipOp("]")) {
        if (!e->args.empty()) expectOp(",");
        if (skipOp("]")) break;  // a trailing comma
        e->args.push_back(parseExpression());
      }
      return sealed(std::move(e));
    }
    if (skipOp("{")) {
      ExprP e = make(Expr::DictLit, t);
      while (!skipOp("}")) {
        if (!e->args.empty()) expectOp(",");
        if (skipOp("}")) break;
        e->args.push_back(parseExpression());
        expectOp(":");
        e->args.push_back(parseExpression());
      }
      return sealed(std::move(e));
    }
    failHere(TextErrorKind::Template, "expected an expression, found " + describe(t));
  }

  ExprP parsePostfix(ExprP e) {
    for (;;) {
      const Token& t = cur();
      if (skipOp(".")) {
        if (cur().kind == Token::Int) {  // x.0: x[0]
          ExprP item = make(Expr::Item, t);
          item->args.push_back(std::move(e));
          item->args.push_back(parsePrimary());
          e = sealed(std::move(item));
          continue;
        }
        ExprP a = make(Expr::Attr, t, expectName());
        a->args.push_back(std::move(e));
        e = sealed(std::move(a));
      } else if (skipOp("[")) {
        e = parseSubscript(std::move(e), t);
      } else if (isOp("(")) {
        e = parseCall(std::move(e), make(Expr::Call, t));
      } else {
        return e;
      }
    }
  }

  ExprP parseSubscript(ExprP object, const Token& t) {
    ExprP parts[3];
    int colons = 0;
    for (;;) {
      if (isOp("]")) break;
      if (skipOp(":")) {
        if (++colons > 2) failHere(TextErrorKind::Template, "a slice has at most two ':'");
        continue;
      }
      if (parts[colons]) failHere(TextErrorKind::Template, "expected ']' or ':', found " + describe(cur()));
      parts[colons] = parseExpression();
    }
    ++at_;
    if (colons == 0) {
      if (!parts[0]) fail(TextErrorKind::Template, t.line, t.column, "an empty subscript '[]'");
      ExprP item = make(Expr::Item, t);
      item->args.push_back(std::move(object));
      item->args.push_back(std::move(parts[0]));
      return sealed(std::move(item));
    }
    ExprP slice = make(Expr::Slice, t);
    slice->args.push_back(std::move(object));
    for (ExprP& p : parts) slice->args.push_back(std::move(p));
    return sealed(std::move(slice));
  }

  // ( args ) after the callee, into call (whose first operand is set here).
  ExprP parseCall(ExprP callee, ExprP call) {
    if (call->kind == Expr::Call) call->line = callee->line, call->column = callee->column;  // errors name the callee
    call->args.push_back(std::move(callee));
    expectOp("(");
    bool first = true;
    while (!skipOp(")")) {
      if (!first) expectOp(",");
      first = false;
      if (skipOp(")")) break;
      if (cur().kind == Token::Name && at_ + 1 < t_.size() && t_[at_ + 1].kind == Token::Op && t_[at_ + 1].text == "=") {
        std::string key = take().text;
        ++at_;
        call->kwargs.emplace_back(std::move(key), parseExpression());
      } else {
        if (!call->kwargs.empty()) failHere(TextErrorKind::Template, "a positional argument after a keyword argument");
        call->args.push_back(parseExpression());
      }
    }
    return sealed(std::move(call));
  }

  ExprP parseFilters(ExprP e) {
    for (bool tested = false;;) {  // tested: a test ended the last step (x is a is b is refused)
      const Token& t = cur();
      if (skipOp("|")) {
        tested = false;
        ExprP f = make(Expr::Filter, t, expectName());
        if (isOp("(")) {
          f = parseCall(std::move(e), std::move(f));
        } else {
          f->args.push_back(std::move(e));
        }
        e = sealed(std::move(f));
      } else if (skipName("is")) {
        if (tested) fail(TextErrorKind::Template, t.line, t.column, "tests cannot be chained ('x is a is b')");
        tested = true;
        bool negated = skipName("not");
        ExprP test = make(Expr::Test, t, expectName());
        test->negated = negated;
        const Token& n = cur();
        bool bareArg = n.kind == Token::String || n.kind == Token::Int || n.kind == Token::Float ||
                       (n.kind == Token::Name && n.text != "else" && n.text != "or" && n.text != "and" &&
                        n.text != "if" && n.text != "in" && n.text != "not" && n.text != "is");
        if (isOp("(")) {
          test = parseCall(std::move(e), std::move(test));
        } else {
          test->args.push_back(std::move(e));
          if (bareArg) test->args.push_back(parsePostfix(parsePrimary()));
        }
        e = sealed(std::move(test));
      } else if (isOp("(")) {
        e = parseCall(std::move(e), make(Expr::Call, t));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t at_ = 0;
  int depth_ = 0;
  int loops_ = 0;  // for loops open around the statement being parsed
};

}  // namespace

Body parse(const std::string& source) { return Parser(lex(source)).run(); }

}  // namespace poot::text::jinja

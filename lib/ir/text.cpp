// Parser and printer of the .pg text form. The parser works a line at a time:
// every statement is one line, so a diagnostic's line is the statement's and
// its column is the token's. Names are resolved as they are read, which makes
// "defined before used" a syntax rule of the text form.
#include "ir/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "ir/io.h"

namespace poot {

namespace {

enum class Tok { Name, Ident, Int, Float, Punct, End };

struct Token {
  Tok kind;
  std::string text;
  int col;  // 1-based
};

bool identStart(char c) { return std::isalpha((unsigned char)c) || c == '_'; }
bool identChar(char c) { return std::isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-'; }

class Parser {
 public:
  Parser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  Expected<Graph> run() {
    size_t pos = 0;
    while (pos <= text_.size()) {
      size_t nl = text_.find('\n', pos);
      if (nl == std::string_view::npos) nl = text_.size();
      ++line_;
      if (auto s = parseLine(text_.substr(pos, nl - pos)); !s) return s.error();
      pos = nl + 1;
    }
    if (!sawHeader_) return makeError(ErrorKind::Syntax, {file_, 1, 1}, "expected 'graph NAME' before anything else");
    return std::move(g_);
  }

 private:
  std::string_view text_;
  std::string file_;
  int line_ = 0;
  std::vector<Token> toks_;
  size_t at_ = 0;
  Graph g_;
  bool sawHeader_ = false;
  std::map<std::string, ValueId, std::less<>> names_;

  Error err(int col, std::string msg) { return makeError(ErrorKind::Syntax, {file_, line_, col}, std::move(msg)); }
  Loc loc(int col) const { return {file_, line_, col}; }

  Status lex(std::string_view line) {
    toks_.clear();
    at_ = 0;
    size_t i = 0;
    while (i < line.size()) {
      char c = line[i];
      int col = int(i) + 1;
      if (c == ' ' || c == '\t' || c == '\r') { ++i; continue; }
      if (c == '#') break;
      size_t j = i + 1;
      if (c == '%') {
        while (j < line.size() && identChar(line[j])) ++j;
        if (j == i + 1) return err(col, "expected a value name after '%'");
        toks_.push_back({Tok::Name, std::string(line.substr(i + 1, j - i - 1)), col});
      } else if (identStart(c)) {
        while (j < line.size() && identChar(line[j])) ++j;
        std::string word(line.substr(i, j - i));
        Tok kind = (word == "inf" || word == "nan") ? Tok::Float : Tok::Ident;
        toks_.push_back({kind, word, col});
      } else if (std::isdigit((unsigned char)c) || ((c == '-' || c == '+') && i + 1 < line.size())) {
        bool isFloat = false;
        if (line.substr(i + 1, 3) == "inf" && (c == '-' || c == '+')) {
          j = i + 4;
          isFloat = true;
        } else {
          while (j < line.size() && (std::isalnum((unsigned char)line[j]) || line[j] == '.' ||
                                     ((line[j] == '-' || line[j] == '+') && (line[j - 1] == 'e' || line[j - 1] == 'E'))))
            ++j;
          std::string_view lit = line.substr(i, j - i);
          isFloat = lit.find_first_of(".eE") != std::string_view::npos;
        }
        toks_.push_back({isFloat ? Tok::Float : Tok::Int, std::string(line.substr(i, j - i)), col});
      } else if (std::string_view("()[]{},=:").find(c) != std::string_view::npos) {
        toks_.push_back({Tok::Punct, std::string(1, c), col});
      } else {
        return err(col, "unexpected character '" + printable(std::string(1, c)) + "'");
      }
      i = j;
    }
    toks_.push_back({Tok::End, "", int(line.size()) + 1});
    return ok();
  }

  const Token& peek() const { return toks_[at_]; }
  Token next() { return toks_[at_ < toks_.size() - 1 ? at_++ : at_]; }
  bool isPunct(const char* p) const { return peek().kind == Tok::Punct && peek().text == p; }

  static std::string describe(const Token& t) {
    if (t.kind == Tok::End) return "end of line";
    if (t.kind == Tok::Name) return "'%" + t.text + "'";
    return "'" + t.text + "'";
  }
  Error expected(const std::string& what) { return err(peek().col, "expected " + what + ", got " + describe(peek())); }

  Status expect(const char* punct) {
    if (!isPunct(punct)) return expected(std::string("'") + punct + "'");
    next();
    return ok();
  }
  Status expectEnd() {
    if (peek().kind != Tok::End) return expected("end of line");
    return ok();
  }

  Expected<int64_t> parseInt() {
    if (peek().kind != Tok::Int) return expected("an integer");
    Token t = next();
    int64_t v = 0;
    const char* b = t.text.data() + (t.text[0] == '+');
    auto [p, ec] = std::from_chars(b, t.text.data() + t.text.size(), v);
    if (ec == std::errc::result_out_of_range) return err(t.col, "integer " + t.text + " is out of range");
    if (ec != std::errc() || p != t.text.data() + t.text.size()) return err(t.col, "malformed integer '" + t.text + "'");
    return v;
  }

  // Any numeric token as a double; "-0" stays negative zero and integers past
  // int64 read as the nearest double, so every printed number reads back.
  Expected<double> parseNumber() {
    if (peek().kind != Tok::Int && peek().kind != Tok::Float) return expected("a number");
    Token t = next();
    std::string_view s = t.text;
    bool neg = s[0] == '-';
    if (s[0] == '-' || s[0] == '+') s.remove_prefix(1);
    if (s == "inf") return neg ? -INFINITY : INFINITY;
    if (s == "nan" && !neg) return double(NAN);
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return err(t.col, "malformed number '" + t.text + "'");
    return neg ? -v : v;
  }

  Expected<Type> parseType() {
    if (peek().kind != Tok::Ident) return expected("a type such as f32[1,8]");
    Token t = next();
    auto dt = parseDType(t.text);
    if (!dt) return err(t.col, "unknown dtype '" + t.text + "' (expected f32, f16, bf16, i32, i64 or bool)");
    Type type{*dt, {}};
    if (auto s = expect("["); !s) return s.error();
    while (!isPunct("]")) {
      if (!type.shape.empty())
        if (auto s = expect(","); !s) return s.error();
      int col = peek().col;
      auto d = parseInt();
      if (!d) return d.error();
      if (*d < 1) return err(col, "dimension " + std::to_string(*d) + " must be 1 or more");
      type.shape.push_back(*d);
    }
    next();
    return type;
  }

  Expected<ValueId> use() {
    if (peek().kind != Tok::Name) return expected("a value such as %x");
    Token t = next();
    auto it = names_.find(t.text);
    if (it == names_.end()) return err(t.col, "use of undefined value '%" + t.text + "'");
    return it->second;
  }

  Status define(const Token& t) {
    if (names_.count(t.text)) {
      const Loc& prev = g_.value(names_[t.text]).loc;
      return err(t.col, "value '%" + t.text + "' is already defined at line " + std::to_string(prev.line));
    }
    return ok();
  }

  Status parseLine(std::string_view line) {
    if (auto s = lex(line); !s) return s;
    if (peek().kind == Tok::End) return ok();
    if (!sawHeader_) {
      if (peek().kind != Tok::Ident || peek().text != "graph") return expected("'graph NAME' first");
      next();
      if (peek().kind != Tok::Ident) return expected("a graph name");
      g_.name = next().text;
      g_.loc = loc(1);
      sawHeader_ = true;
      return expectEnd();
    }
    if (peek().kind == Tok::Name) return parseEqn();
    if (peek().kind != Tok::Ident) return expected("a statement");
    const std::string kw = peek().text;
    if (kw == "input" || kw == "weight" || kw == "state" || kw == "slot") return parseParam();
    if (kw == "output" || kw == "validation") return parseExport();
    if (kw == "state_out") return parseStateOut();
    if (kw == "graph") return err(peek().col, "a file holds one graph; 'graph' appears again");
    return err(peek().col, "unknown statement '" + kw +
                               "' (expected input, weight, state, slot, output, state_out, validation or %name = Op(...))");
  }

  Status parseParam() {
    Token kw = next();
    Storage st = kw.text == "input" ? Storage::Input
                 : kw.text == "weight" ? Storage::Weight
                 : kw.text == "state" ? Storage::State : Storage::Slot;
    if (peek().kind != Tok::Name) return expected("a value name such as %x");
    Token name = next();
    if (auto s = define(name); !s) return s;
    if (auto s = expect(":"); !s) return s;
    auto type = parseType();
    if (!type) return type.error();
    ValueId id = g_.addParam(name.text, *type, st, loc(name.col));
    if (st == Storage::Slot) {
      if (peek().kind != Tok::Ident || peek().text != "range") return expected("'range [lo, hi]' after a slot's type");
      next();
      if (auto s = expect("["); !s) return s;
      auto lo = parseInt();
      if (!lo) return lo.error();
      if (auto s = expect(","); !s) return s;
      auto hi = parseInt();
      if (!hi) return hi.error();
      if (auto s = expect("]"); !s) return s;
      g_.value(id).lo = *lo;
      g_.value(id).hi = *hi;
    }
    names_[name.text] = id;
    return expectEnd();
  }

  Status parseExport() {
    Token kw = next();
    int col = peek().col;
    auto v = use();
    if (!v) return v.error();
    (kw.text == "output" ? g_.outputs : g_.validations).push_back(Export{*v, loc(col)});
    return expectEnd();
  }

  Status parseStateOut() {
    next();
    int col = peek().col;
    auto st = use();
    if (!st) return st.error();
    if (auto s = expect("="); !s) return s;
    auto v = use();
    if (!v) return v.error();
    g_.stateOuts.push_back(StateOut{*st, *v, loc(col)});
    return expectEnd();
  }

  Expected<AttrValue> parseAttrValue(const AttrSpec& spec) {
    int col = peek().col;
    auto mismatch = [&] { return err(col, "attribute '" + std::string(spec.name) + "' must be " + attrKindName(spec.kind)); };
    switch (spec.kind) {
      case AttrKind::Int: {
        if (peek().kind != Tok::Int) return mismatch();
        auto v = parseInt();
        if (!v) return v.error();
        return AttrValue(*v);
      }
      case AttrKind::Float: {
        if (peek().kind != Tok::Int && peek().kind != Tok::Float) return mismatch();
        auto v = parseNumber();
        if (!v) return v.error();
        return AttrValue(*v);
      }
      case AttrKind::Bool:
        if (peek().kind != Tok::Ident || (peek().text != "true" && peek().text != "false")) return mismatch();
        return AttrValue(next().text == "true");
      case AttrKind::Sym:
        if (peek().kind != Tok::Ident) return mismatch();
        return AttrValue(next().text);
      case AttrKind::Ints:
      case AttrKind::Floats: {
        if (!isPunct("[")) return mismatch();
        next();
        std::vector<int64_t> ints;
        std::vector<double> floats;
        while (!isPunct("]")) {
          if (!ints.empty() || !floats.empty())
            if (auto s = expect(","); !s) return s.error();
          if (spec.kind == AttrKind::Ints) {
            auto v = parseInt();
            if (!v) return v.error();
            ints.push_back(*v);
          } else {
            auto v = parseNumber();
            if (!v) return v.error();
            floats.push_back(*v);
          }
        }
        next();
        if (spec.kind == AttrKind::Ints) return AttrValue(std::move(ints));
        return AttrValue(std::move(floats));
      }
    }
    return mismatch();
  }

  Status parseAttrs(const OpInfo& info, Attrs& attrs) {
    next();  // {
    while (!isPunct("}")) {
      if (!attrs.empty())
        if (auto s = expect(","); !s) return s;
      if (peek().kind != Tok::Ident) return expected("an attribute name");
      Token name = next();
      const AttrSpec* spec = findAttrSpec(info, name.text);
      if (!spec) {
        std::string known;
        for (const AttrSpec& a : info.attrs) known += std::string(known.empty() ? "" : ", ") + a.name;
        return err(name.col, std::string(info.name) + " has no attribute '" + name.text + "'" +
                                 (known.empty() ? " (it takes none)" : " (it takes " + known + ")"));
      }
      for (const Attr& a : attrs)
        if (a.name == name.text) return err(name.col, "attribute '" + name.text + "' is given twice");
      if (auto s = expect("="); !s) return s;
      auto v = parseAttrValue(*spec);
      if (!v) return v.error();
      attrs.push_back(Attr{name.text, v.take()});
    }
    next();
    sortAttrs(info, attrs);
    return ok();
  }

  Status parseEqn() {
    std::vector<Token> results;
    while (true) {
      if (peek().kind != Tok::Name) return expected("a result name such as %x");
      results.push_back(next());
      if (!isPunct(",")) break;
      next();
    }
    if (auto s = expect("="); !s) return s;
    if (peek().kind != Tok::Ident) return expected("an op name");
    Token opTok = next();
    auto op = parseOp(opTok.text);
    if (!op) return err(opTok.col, "unknown op '" + opTok.text + "'");
    const OpInfo& info = opInfo(*op);
    if (auto s = expect("("); !s) return s;
    std::vector<ValueId> operands;
    while (!isPunct(")")) {
      if (!operands.empty())
        if (auto s = expect(","); !s) return s;
      auto v = use();
      if (!v) return v.error();
      operands.push_back(*v);
    }
    next();
    Attrs attrs;
    if (isPunct("{"))
      if (auto s = parseAttrs(info, attrs); !s) return s;
    if (auto s = expect(":"); !s) return s;
    int typeCol = peek().col;
    std::vector<std::pair<std::string, Type>> typed;
    for (size_t i = 0; i < results.size(); ++i) {
      if (i)
        if (auto s = expect(","); !s) return s;
      auto t = parseType();
      if (!t) return t.error();
      typed.push_back({results[i].text, *t});
    }
    if (peek().kind == Tok::Punct && peek().text == ",")
      return err(peek().col, "more result types than results");
    if (auto s = expectEnd(); !s) return s;
    for (const Token& r : results) {
      if (auto s = define(r); !s) return s;
      for (const Token& other : results)
        if (&other != &r && other.text == r.text) return err(r.col, "result '%" + r.text + "' is named twice");
    }
    Eqn& e = g_.addEqn(*op, std::move(operands), std::move(attrs), typed, loc(opTok.col));
    e.typeLoc = loc(typeCol);
    for (size_t i = 0; i < results.size(); ++i) {
      g_.value(e.results[i]).loc = loc(results[i].col);
      names_[results[i].text] = e.results[i];
    }
    return ok();
  }
};


}  // namespace

std::string formatAttr(const AttrValue& v) {
  switch (attrKindOf(v)) {
    case AttrKind::Int: return std::to_string(std::get<int64_t>(v));
    case AttrKind::Float: return formatNumber(std::get<double>(v));
    case AttrKind::Bool: return std::get<bool>(v) ? "true" : "false";
    case AttrKind::Sym: return std::get<std::string>(v);
    case AttrKind::Ints: {
      std::string out = "[";
      for (int64_t i : std::get<std::vector<int64_t>>(v)) out += (out.size() > 1 ? ", " : "") + std::to_string(i);
      return out + "]";
    }
    case AttrKind::Floats: {
      std::string out = "[";
      for (double d : std::get<std::vector<double>>(v)) out += (out.size() > 1 ? ", " : "") + formatNumber(d);
      return out + "]";
    }
  }
  return "";
}

std::string formatNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}

Expected<Graph> parseGraph(std::string_view text, const std::string& file) { return Parser(text, file).run(); }

std::string printGraph(const Graph& g) {
  std::string out = "graph " + g.name + "\n";
  auto ref = [&](ValueId v) { return "%" + g.value(v).name; };
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    const char* kw = v.storage == Storage::Input ? "input"
                     : v.storage == Storage::Weight ? "weight"
                     : v.storage == Storage::State ? "state" : "slot";
    out += std::string(kw) + " " + ref(id) + " : " + v.type.str();
    if (v.storage == Storage::Slot) out += " range [" + std::to_string(v.lo) + ", " + std::to_string(v.hi) + "]";
    out += "\n";
  }
  for (const Eqn& e : g.eqns) {
    for (size_t i = 0; i < e.results.size(); ++i) out += (i ? ", " : "") + ref(e.results[i]);
    out += std::string(" = ") + opName(e.op) + "(";
    for (size_t i = 0; i < e.operands.size(); ++i) out += (i ? ", " : "") + ref(e.operands[i]);
    out += ")";
    if (!e.attrs.empty()) {
      out += " {";
      for (size_t i = 0; i < e.attrs.size(); ++i) out += (i ? ", " : "") + e.attrs[i].name + "=" + formatAttr(e.attrs[i].value);
      out += "}";
    }
    out += " : ";
    for (size_t i = 0; i < e.results.size(); ++i) out += (i ? ", " : "") + g.type(e.results[i]).str();
    out += "\n";
  }
  for (const Export& o : g.outputs) out += "output " + ref(o.value) + "\n";
  for (const StateOut& s : g.stateOuts) out += "state_out " + ref(s.state) + " = " + ref(s.value) + "\n";
  for (const Export& w : g.validations) out += "validation " + ref(w.value) + "\n";
  return out;
}

}  // namespace poot

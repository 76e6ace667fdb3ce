#include "text/jinja_lexer.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "text/jinja_value.h"

namespace poot::text::jinja {

namespace {

bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }

// Appends code point cp as UTF-8 (an invalid one as U+FFFD).
void appendUtf8(std::string& out, uint32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    for (size_t k = 0; k < src_.size(); ++k)
      if (src_[k] == '\n') lineStarts_.push_back(k + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t tag = findTag(pos);
      std::string text = src_.substr(pos, tag - pos);
      if (tag == src_.size()) {
        push(Token::Text, tag, text);
        break;
      }
      char kind = src_[tag + 1];
      size_t inner = tag + 2;
      char sign = inner < src_.size() && (src_[inner] == '-' || (src_[inner] == '+' && kind != '{')) ? src_[inner] : 0;
      if (sign) ++inner;
      if (sign == '-') {
        while (!text.empty() && isSpace(text.back())) text.pop_back();
      } else if (sign != '+' && kind != '{') {
        lstrip(text, pos);
      }
      if (!text.empty()) push(Token::Text, pos, text);
      pos = kind == '#' ? comment(tag, inner) : tagWords(tag, inner, kind);
    }
    push(Token::End, src_.size(), "");
    return std::move(tokens_);
  }

 private:
  // The next "{{", "{%" or "{#" at or after pos, or the source's size.
  size_t findTag(size_t pos) const {
    for (size_t k = src_.find('{', pos); k != std::string::npos; k = src_.find('{', k + 1))
      if (k + 1 < src_.size() && (src_[k + 1] == '{' || src_[k + 1] == '%' || src_[k + 1] == '#')) return k;
    return src_.size();
  }

  // lstrip_blocks: spaces and tabs from the line's start to the tag go,
  // where the text (which began at `from`) holds the line's start.
  void lstrip(std::string& text, size_t from) const {
    size_t nl = text.rfind('\n');
    size_t start = nl == std::string::npos ? 0 : nl + 1;
    if (nl == std::string::npos && from != 0 && src_[from - 1] != '\n') return;
    if (text.find_first_not_of(" \t", start) == std::string::npos) text.resize(start);
  }

  // After a tag's closer at `end` (one past it): `-` takes all whitespace,
  // else (block tags and comments, not with `+`) one newline.
  size_t afterClose(size_t end, char sign, bool block) const {
    if (sign == '-') {
      while (end < src_.size() && isSpace(src_[end])) ++end;
    } else if (block && sign != '+' && end < src_.size() && src_[end] == '\n') {
      ++end;
    }
    return end;
  }

  size_t comment(size_t tag, size_t inner) {
    size_t close = src_.find("#}", inner);
    if (close == std::string::npos) failAt(tag, "a comment '{#' with no '#}'");
    char sign = close > inner && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    return afterClose(close + 2, sign, true);
  }

  // The words of a {{ }} or {% %} tag; returns where the text after it starts.
  size_t tagWords(size_t tag, size_t pos, char kind) {
    bool block = kind == '%';
    push(block ? Token::BlockBegin : Token::VarBegin, tag, "");
    const char* closer = block ? "%}" : "}}";
    std::string brackets;  // the open ( [ { to match
    for (;;) {
      while (pos < src_.size() && isSpace(src_[pos])) ++pos;
      if (pos >= src_.size()) failAt(tag, std::string("a tag '") + (block ? "{%" : "{{") + "' with no '" + closer + "'");
      if (brackets.empty()) {
        char sign = (src_[pos] == '-' || (block && src_[pos] == '+')) ? src_[pos] : 0;
        if (src_.compare(pos + (sign ? 1 : 0), 2, closer) == 0) {
          push(block ? Token::BlockEnd : Token::VarEnd, pos, "");
          return afterClose(pos + (sign ? 3 : 2), sign, block);
        }
      }
      pos = word(pos, brackets);
    }
  }

  // One word at pos; returns the position after it.
  size_t word(size_t pos, std::string& brackets) {
    char c = src_[pos];
    if (isNameStart(c)) {
      size_t end = pos;
      while (end < src_.size() && (isNameStart(src_[end]) || isDigit(src_[end]))) ++end;
      push(Token::Name, pos, src_.substr(pos, end - pos));
      return end;
    }
    if (isDigit(c)) return number(pos);
    if (c == '\'' || c == '"') return string(pos);
    static const char* twoChar[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* op : twoChar)
      if (src_.compare(pos, 2, op) == 0) {
        push(Token::Op, pos, op);
        return pos + 2;
      }
    if (c == '\0' || !std::strchr("+-*/%~<>=.,:|()[]{}", c))
      failAt(pos, std::string("unexpected character '") + c + "' in a tag");
    if (c == '(' || c == '[' || c == '{') brackets += c;
    if (c == ')' || c == ']' || c == '}') {
      char open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (brackets.empty() || brackets.back() != open) failAt(pos, std::string("unexpected '") + c + "'");
      brackets.pop_back();
    }
    push(Token::Op, pos, std::string(1, c));
    return pos + 1;
  }

  size_t number(size_t pos) {
    size_t end = pos;
    while (end < src_.size() && isDigit(src_[end])) ++end;
    bool isFloat = false;
    if (end + 1 < src_.size() && src_[end] == '.' && isDigit(src_[end + 1])) {
      isFloat = true;
      for (++end; end < src_.size() && isDigit(src_[end]);) ++end;
    }
    if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && isDigit(src_[e])) {
        isFloat = true;
        for (end = e; end < src_.size() && isDigit(src_[end]);) ++end;
      }
    }
    Token t{isFloat ? Token::Float : Token::Int, src_.substr(pos, end - pos)};
    const char* first = src_.data() + pos;
    auto r = isFloat ? std::from_chars(first, src_.data() + end, t.f) : std::from_chars(first, src_.data() + end, t.i);
    if (r.ec != std::errc()) failAt(pos, "the number " + t.text + " is out of range");
    place(t, pos);
    tokens_.push_back(std::move(t));
    return end;
  }

  size_t string(size_t pos) {
    char quote = src_[pos];
    std::string value;
    size_t k = pos + 1;
    for (;; ++k) {
      if (k >= src_.size()) failAt(pos, "a string with no closing quote");
      char c = src_[k];
      if (c == quote) break;
      if (c != '\\' || k + 1 >= src_.size()) {
        value += c;
        continue;
      }
      char e = src_[++k];
      static const char* from = "ntr0\\'\"abfv\n";
      static const char* to = "\n\t\r\0\\'\"\a\b\f\v";
      const char* at = std::strchr(from, e);
      if (e == '\n') continue;  // a backslash at a line's end joins the lines
      if (at && e) {
        value += to[at - from];
      } else if (e == 'x' || e == 'u' || e == 'U') {
        size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t cp = 0;
        auto r = std::from_chars(src_.data() + k + 1, src_.data() + std::min(src_.size(), k + 1 + n), cp, 16);
        if (r.ec != std::errc() || size_t(r.ptr - (src_.data() + k + 1)) != n)
          failAt(k - 1, std::string("a \\") + e + " escape needs " + std::to_string(n) + " hex digits");
        appendUtf8(value, cp);
        k += n;
      } else {
        value += '\\';
        value += e;
      }
    }
    push(Token::String, pos, value);
    return k + 1;
  }

  void place(Token& t, size_t pos) const {
    auto it = std::upper_bound(lineStarts_.begin(), lineStarts_.end(), pos);
    t.line = int(it - lineStarts_.begin());
    t.column = int(pos - *(it - 1)) + 1;
  }
  void push(Token::Kind k, size_t pos, std::string text) {
    Token t{k, std::move(text)};
    place(t, pos);
    tokens_.push_back(std::move(t));
  }
  [[noreturn]] void failAt(size_t pos, const std::string& message) const {
    Token t{Token::End};
    place(t, pos);
    fail(TextErrorKind::Template, t.line, t.column, message);
  }

  std::string src_;
  std::vector<size_t> lineStarts_{0};
  std::vector<Token> tokens_;
};

// "\r\n" and "\r" as "\n", less one newline at the end (Jinja's
// keep_trailing_newline=False).
std::string normalize(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] != '\r') out += source[k];
    else if (k + 1 >= source.size() || source[k + 1] != '\n') out += '\n';
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

std::vector<Token> lex(const std::string& source) { return Lexer(normalize(source)).run(); }

}  // namespace poot::text::jinja

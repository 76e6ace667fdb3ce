// The filters, tests, string and dict methods and global functions of the
// subset (docs/text.md lists them), each as Jinja (or Python, for methods)
// defines it; any other name is an Unsupported Failure naming it.
#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "text/jinja_eval.h"

namespace poot::text::jinja {

Value Args::get(size_t k, const char* name, const Value& otherwise) const {
  if (k < positional.size()) return positional[k];
  for (const auto& [n, v] : named)
    if (n == name) return v;
  return otherwise;
}

void Args::allow(const std::string& what, size_t count, std::initializer_list<const char*> names) const {
  if (positional.size() > count)
    failHere(TextErrorKind::Template, what + " takes at most " + std::to_string(count) + " positional arguments");
  for (const auto& kv : named)
    if (std::none_of(names.begin(), names.end(), [&](const char* allowed) { return kv.first == allowed; }))
      failHere(TextErrorKind::Unsupported, what + ": the argument '" + kv.first + "' is not implemented");
}

void Args::checkSize(size_t n) const {
  if (n > limits->maxOutput)
    failHere(TextErrorKind::Template, "a value past the limit of " + std::to_string(limits->maxOutput) + " bytes or items");
}

namespace {

const Value kNone = Value::none();
const Value kUndefined = Value::undefined();

// Python's str.isspace for one code point.
bool isSpaceCp(int32_t c) {
  return (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

int32_t decode(const std::string& cp) {
  utf8proc_int32_t c = -1;
  utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(cp.data()), utf8proc_ssize_t(cp.size()), &c);
  return c;
}

std::string encode(int32_t c) {
  utf8proc_uint8_t buf[4];
  auto n = utf8proc_encode_char(c, buf);
  return std::string(reinterpret_cast<char*>(buf), size_t(n));
}

// str.strip / lstrip / rstrip: whitespace, or the characters of `chars` (a String).
std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<std::string> cps = codePoints(s);
  std::vector<std::string> set = chars.kind == Value::String ? codePoints(chars.s) : std::vector<std::string>();
  auto drop = [&](const std::string& c) {
    return chars.kind == Value::String ? std::find(set.begin(), set.end(), c) != set.end() : isSpaceCp(decode(c));
  };
  size_t b = 0, e = cps.size();
  while (left && b < e && drop(cps[b])) ++b;
  while (right && e > b && drop(cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

// Title: Python's str.title (a letter after a non-letter upper, others
// lower); JinjaTitle: Jinja's title filter (a word's first character upper,
// the rest lower, words starting after whitespace, '-', '(', '{', '[', '<').
enum class Case { Upper, Lower, Capitalize, Title, JinjaTitle };

std::string recase(const std::string& s, Case how) {
  std::string out;
  bool afterLetter = false, afterBreak = true, first = true;
  for (const std::string& cp : codePoints(s)) {
    int32_t c = decode(cp);
    if (c < 0) {
      out += cp;
      continue;
    }
    bool upper = how == Case::Upper || (how == Case::Capitalize && first) || (how == Case::Title && !afterLetter) ||
                 (how == Case::JinjaTitle && afterBreak);
    int32_t m = upper ? utf8proc_toupper(c) : utf8proc_tolower(c);
    out += encode(m);
    auto cat = utf8proc_category(c);
    afterLetter = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT ||
                  cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_LO;
    afterBreak = isSpaceCp(c) || (c < 0x80 && std::strchr("-({[<", char(c)) && c != 0);
    first = false;
  }
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count, const Args& where) {
  std::string out;
  size_t at = 0;
  int64_t done = 0;
  if (from.empty()) {  // Python inserts `to` around every character
    std::vector<std::string> cps = codePoints(s);
    for (size_t k = 0; k <= cps.size(); ++k) {
      if (count < 0 || done < count) out += to, ++done;
      if (k < cps.size()) out += cps[k];
      where.checkSize(out.size());
    }
    return out;
  }
  for (size_t hit; (count < 0 || done < count) && (hit = s.find(from, at)) != std::string::npos; ++done) {
    out.append(s, at, hit - at);
    out += to;
    at = hit + from.size();
    where.checkSize(out.size());
  }
  return out + s.substr(at);
}

// str.split(sep, maxsplit): whitespace runs when sep is None.
List split(const std::string& s, const Value& sep, int64_t maxsplit, const Args& where) {
  List out;
  if (sep.kind == Value::String) {
    if (sep.s.empty()) where.failHere(TextErrorKind::Template, "split: an empty separator");
    size_t at = 0;
    for (size_t hit; (maxsplit < 0 || int64_t(out.size()) < maxsplit) && (hit = s.find(sep.s, at)) != std::string::npos;) {
      out.push_back(Value::string(s.substr(at, hit - at)));
      at = hit + sep.s.size();
    }
    out.push_back(Value::string(s.substr(at)));
    return out;
  }
  std::vector<std::string> cps = codePoints(s);
  size_t k = 0;
  while (k < cps.size()) {
    while (k < cps.size() && isSpaceCp(decode(cps[k]))) ++k;
    if (k == cps.size()) break;
    std::string word;
    bool last = maxsplit >= 0 && int64_t(out.size()) == maxsplit;  // the rest, as it is, is the last word
    while (k < cps.size() && (last || !isSpaceCp(decode(cps[k])))) word += cps[k++];
    out.push_back(Value::string(std::move(word)));
  }
  return out;
}

std::string needString(const Value& v, const Args& a, const char* what) {
  if (v.kind != Value::String) a.failHere(TextErrorKind::Template, std::string(what) + " needs a string, not " + typeName(v));
  return v.s;
}

int64_t needInt(const Value& v, const Args& a, const char* what) {
  if (v.kind == Value::Bool) return v.b;
  if (v.kind != Value::Int) a.failHere(TextErrorKind::Template, std::string(what) + " needs an integer, not " + typeName(v));
  return v.i;
}

// The items of an iterable value: a list's elements, a dict's keys, a string's characters.
List itemsOf(const Value& v, const Args& a, const char* what) {
  switch (v.kind) {
    case Value::Undefined: return {};
    case Value::ListKind: return *v.list;
    case Value::DictKind: {
      List keys;
      for (const auto& kv : *v.dict) keys.push_back(Value::string(kv.first));
      return keys;
    }
    case Value::String: {
      List chars;
      for (std::string& c : codePoints(v.s)) chars.push_back(Value::string(std::move(c)));
      return chars;
    }
    default: a.failHere(TextErrorKind::Template, std::string(what) + ": " + typeName(v) + " is not iterable");
  }
}

Value pairsOf(const Value& dict) {
  List pairs;
  for (const auto& [k, v] : *dict.dict) {
    pairs.push_back(Value::ofList({Value::string(k), v}));
    pairs.back().isTuple = true;
  }
  return Value::ofList(std::move(pairs));
}

int64_t lengthOf(const Value& v, const Args& a) {
  switch (v.kind) {
    case Value::Undefined: return 0;
    case Value::String: return int64_t(codePoints(v.s).size());
    case Value::ListKind: return int64_t(v.list->size());
    case Value::DictKind: return int64_t(v.dict->size());
    default: a.failHere(TextErrorKind::Template, std::string("length: ") + typeName(v) + " has no length");
  }
}

// selectattr / rejectattr: the items whose attribute passes the test (truth without one).
Value selectAttr(const Value& seq, const Args& a, bool keep) {
  if (!truthy(seq)) return Value::ofList({});  // as Jinja, which iterates only a true value
  const std::string attr = needString(a.get(0, "", kUndefined), a, "selectattr");
  Args testArgs = a;
  testArgs.positional.erase(testArgs.positional.begin(), testArgs.positional.begin() + std::min<size_t>(2, a.positional.size()));
  List out;
  for (const Value& item : itemsOf(seq, a, "selectattr")) {
    const Value* found = item.find(attr);
    Value v = found ? *found : Value::undefined(attr);
    bool pass = a.positional.size() > 1 ? applyTest(needString(a.positional[1], a, "selectattr"), v, testArgs) : truthy(v);
    if (pass == keep) out.push_back(item);
  }
  return Value::ofList(std::move(out));
}

// map(attribute=NAME[, default=D]) or map(FILTER, args...); not map('map', ...),
// which would recurse as deep as its arguments are many.
Value mapFilter(const Value& seq, const Args& a) {
  if (!truthy(seq)) return Value::ofList({});
  List out;
  const Value& attr = a.get(Args::kNamedOnly, "attribute", kUndefined);
  if (attr.kind != Value::String && a.get(0, "", kUndefined).s == "map")
    a.failHere(TextErrorKind::Unsupported, "map('map', ...) is not implemented");
  Args rest = a;
  if (!a.positional.empty()) rest.positional.erase(rest.positional.begin());
  rest.named.clear();
  for (const Value& item : itemsOf(seq, a, "map")) {
    if (attr.kind == Value::String) {
      const Value* found = item.find(attr.s);
      out.push_back(found ? *found : a.get(Args::kNamedOnly, "default", kUndefined));
    } else {
      out.push_back(applyFilter(needString(a.get(0, "", kUndefined), a, "map"), item, rest));
    }
  }
  return Value::ofList(std::move(out));
}

std::string joinValues(const List& items, const std::string& sep, const Args& a) {
  std::string out;
  for (size_t k = 0; k < items.size(); ++k) {
    out += (k ? sep : "") + str(items[k]);
    a.checkSize(out.size());
  }
  return out;
}

}  // namespace

Value applyFilter(const std::string& name, const Value& v, const Args& a) {
  if (name == "safe" || name == "string") {  // safe: Markup(v), a string (autoescape is off)
    a.allow(name, 0, {});
    return Value::string(str(v));
  }
  if (name == "default" || name == "d") {
    a.allow(name, 2, {"default_value", "boolean"});
    bool boolean = truthy(a.get(1, "boolean", kUndefined));
    bool use = v.kind == Value::Undefined || (boolean && !truthy(v));
    return use ? a.get(0, "default_value", Value::string("")) : v;
  }
  if (name == "length" || name == "count") return Value::integer(lengthOf(v, a));
  if (name == "tojson") {
    a.allow(name, 4, {"indent", "sort_keys", "ensure_ascii"});
    const Value& indent = a.get(1, "indent", kNone);
    if (truthy(a.get(0, "ensure_ascii", Value::boolean(false))))
      a.failHere(TextErrorKind::Unsupported, "tojson: ensure_ascii=True is not implemented");
    if (a.positional.size() > 2) a.failHere(TextErrorKind::Unsupported, "tojson: separators are not implemented");
    std::string out = toJson(v, indent.kind == Value::None ? -1 : int(std::clamp<int64_t>(needInt(indent, a, "tojson"), 0, 64)),
                             truthy(a.get(3, "sort_keys", kNone)), a.line, a.column);
    a.checkSize(out.size());
    return Value::string(std::move(out));
  }
  if (name == "list") return Value::ofList(itemsOf(v, a, "list"));
  if (name == "items") {
    if (v.kind == Value::Undefined) return Value::ofList({});
    if (v.kind != Value::DictKind) a.failHere(TextErrorKind::Template, std::string("items: ") + typeName(v) + " is not a dict");
    return pairsOf(v);
  }
  if (name == "first" || name == "last") {
    List items = itemsOf(v, a, name.c_str());
    if (items.empty()) return Value::undefined();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.kind == Value::String) {
      std::vector<std::string> cps = codePoints(v.s);
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value::string(std::move(out));
    }
    List items = itemsOf(v, a, "reverse");
    std::reverse(items.begin(), items.end());
    return Value::ofList(std::move(items));
  }
  if (name == "join") {
    a.allow(name, 2, {"d", "attribute"});
    List items = itemsOf(v, a, "join");
    if (const Value& attr = a.get(1, "attribute", kNone); attr.kind == Value::String)
      for (Value& item : items) {
        const Value* f = item.find(attr.s);
        item = f ? *f : Value::undefined();
      }
    return Value::string(joinValues(items, str(a.get(0, "d", Value::string(""))), a));
  }
  if (name == "selectattr" || name == "rejectattr") return selectAttr(v, a, name == "selectattr");
  if (name == "map") return mapFilter(v, a);
  if (name == "abs") {
    if (v.kind == Value::Float) return Value::number(std::fabs(v.f));
    int64_t x = needInt(v, a, "abs");
    return x == INT64_MIN ? Value::number(-double(x)) : Value::integer(x < 0 ? -x : x);
  }
  if ((name == "int" || name == "float") && v.kind == Value::Undefined)  // int(Undefined) fails in Jinja
    a.failHere(TextErrorKind::Template, v.s.empty() ? "an undefined value is used" : "'" + v.s + "' is undefined");
  if (name == "int") {
    if (v.kind == Value::Float && std::isfinite(v.f) && std::fabs(v.f) < 9e18) return Value::integer(int64_t(v.f));
    if (v.kind == Value::Int || v.kind == Value::Bool) return Value::integer(needInt(v, a, "int"));
    if (v.kind == Value::String) {  // an integer, else a float's integer part, as Jinja's int filter
      std::string t = strip(v.s, kNone, true, true);
      char* end = nullptr;
      long long x = std::strtoll(t.c_str(), &end, 10);
      if (!t.empty() && end && *end == '\0') return Value::integer(x);
      double f = std::strtod(t.c_str(), &end);
      if (!t.empty() && end && *end == '\0' && std::isfinite(f) && std::fabs(f) < 9e18) return Value::integer(int64_t(f));
    }
    return a.get(0, "default", Value::integer(0));
  }
  if (name == "float") {
    if (v.isNumber() || v.kind == Value::Bool) return Value::number(v.kind == Value::Bool ? double(v.b) : v.asDouble());
    if (v.kind == Value::String) {
      std::string t = strip(v.s, kNone, true, true);
      char* end = nullptr;
      double x = std::strtod(t.c_str(), &end);
      if (!t.empty() && end && *end == '\0') return Value::number(x);
    }
    return a.get(0, "default", Value::number(0));
  }
  // The string filters: a value other than a string is first made one (Undefined as "").
  std::string s = str(v);
  if (name == "trim") return Value::string(strip(s, a.get(0, "chars", kNone), true, true));
  if (name == "upper") return Value::string(recase(s, Case::Upper));
  if (name == "lower") return Value::string(recase(s, Case::Lower));
  if (name == "capitalize") return Value::string(recase(s, Case::Capitalize));
  if (name == "title") return Value::string(recase(s, Case::JinjaTitle));
  if (name == "replace") {
    a.allow(name, 3, {"old", "new", "count"});
    const Value& count = a.get(2, "count", kNone);
    return Value::string(replace(s, str(a.get(0, "old", kUndefined)), str(a.get(1, "new", kUndefined)),
                                 count.kind == Value::None ? -1 : needInt(count, a, "replace"), a));
  }
  a.failHere(TextErrorKind::Unsupported, "the filter '" + name + "' is not implemented");
}

bool applyTest(const std::string& name, const Value& v, const Args& a) {
  const Value& arg = a.get(0, "", kUndefined);
  if (name == "defined") return v.kind != Value::Undefined;
  if (name == "undefined") return v.kind == Value::Undefined;
  if (name == "none") return v.kind == Value::None;
  if (name == "string") return v.kind == Value::String;
  if (name == "mapping") return v.kind == Value::DictKind;
  if (name == "iterable" || name == "sequence")
    return v.kind == Value::String || v.kind == Value::ListKind || v.kind == Value::DictKind || v.kind == Value::Undefined;
  if (name == "number") return v.isNumber() || v.kind == Value::Bool;
  if (name == "integer") return v.kind == Value::Int;
  if (name == "float") return v.kind == Value::Float;
  if (name == "boolean") return v.kind == Value::Bool;
  if (name == "true" || name == "false") return v.kind == Value::Bool && v.b == (name == "true");
  if (name == "callable") return v.kind == Value::Macro;
  if (name == "odd" || name == "even") {  // value % 2 == 1, == 0 (Python's modulo)
    double r = v.kind == Value::Float ? v.f - 2 * std::floor(v.f / 2) : double(((needInt(v, a, name.c_str()) % 2) + 2) % 2);
    return r == (name == "odd" ? 1 : 0);
  }
  if (name == "divisibleby") {
    if (v.kind == Value::Float || arg.kind == Value::Float) {
      double d = arg.kind == Value::Float ? arg.f : double(needInt(arg, a, "divisibleby"));
      double x = v.kind == Value::Float ? v.f : double(needInt(v, a, "divisibleby"));
      return d != 0 && std::fmod(x, d) == 0;
    }
    int64_t d = needInt(arg, a, "divisibleby");
    return d != 0 && needInt(v, a, "divisibleby") % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, arg);
  if (name == "ne" || name == "!=") return !equal(v, arg);
  if (name == "in") {
    if (arg.kind == Value::String && v.kind == Value::String) return arg.s.find(v.s) != std::string::npos;
    List items = itemsOf(arg, a, "in");
    return std::any_of(items.begin(), items.end(), [&](const Value& x) { return equal(x, v); });
  }
  if (name == "lower" || name == "upper") {
    std::string s = str(v);
    return s == recase(s, name == "lower" ? Case::Lower : Case::Upper);
  }
  a.failHere(TextErrorKind::Unsupported, "the test '" + name + "' is not implemented");
}

Value callMethod(const Value& o, const std::string& name, const Args& a) {
  if (o.kind == Value::DictKind) {
    if (name == "get") {
      a.allow(name, 2, {});
      const Value& key = a.get(0, "", kUndefined);
      const Value* found = key.kind == Value::String ? o.find(key.s) : nullptr;
      return found ? *found : a.get(1, "", kNone);
    }
    if (name == "items") return pairsOf(o);
    if (name == "keys") return Value::ofList(itemsOf(o, a, "keys"));
    if (name == "values") {
      List values;
      for (const auto& kv : *o.dict) values.push_back(kv.second);
      return Value::ofList(std::move(values));
    }
    if (o.find(name)) a.failHere(TextErrorKind::Template, "'" + name + "' is not callable");
    a.failHere(TextErrorKind::Unsupported, "the dict method '" + name + "' is not implemented");
  }
  if (o.kind != Value::String)
    a.failHere(o.kind == Value::ListKind ? TextErrorKind::Unsupported : TextErrorKind::Template,
               std::string(typeName(o)) + " has no method '" + name + "' here");
  const std::string& s = o.s;
  if (name == "startswith" || name == "endswith") {
    const Value& what = a.get(0, "", kUndefined);
    List options = what.kind == Value::ListKind ? *what.list : List{what};
    return Value::boolean(std::any_of(options.begin(), options.end(), [&](const Value& p) {
      const std::string x = needString(p, a, name.c_str());
      return x.size() <= s.size() && (name == "startswith" ? s.compare(0, x.size(), x) == 0
                                                           : s.compare(s.size() - x.size(), x.size(), x) == 0);
    }));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return Value::string(strip(s, a.get(0, "chars", kNone), name != "rstrip", name != "lstrip"));
  if (name == "split") {
    const Value& maxsplit = a.get(1, "maxsplit", Value::integer(-1));
    return Value::ofList(split(s, a.get(0, "sep", kNone), needInt(maxsplit, a, "split"), a));
  }
  if (name == "title") return Value::string(recase(s, Case::Title));
  if (name == "upper" || name == "lower" || name == "capitalize") return applyFilter(name, o, a);
  if (name == "replace") {
    const Value& count = a.get(2, "count", Value::integer(-1));
    return Value::string(replace(s, needString(a.get(0, "", kUndefined), a, "replace"),
                                 needString(a.get(1, "", kUndefined), a, "replace"), needInt(count, a, "replace"), a));
  }
  if (name == "join") return Value::string(joinValues(itemsOf(a.get(0, "", kUndefined), a, "join"), s, a));
  if (name == "find") {
    size_t at = s.find(needString(a.get(0, "", kUndefined), a, "find"));
    return Value::integer(at == std::string::npos ? -1 : int64_t(codePoints(s.substr(0, at)).size()));
  }
  a.failHere(TextErrorKind::Unsupported, "the string method '" + name + "' is not implemented");
}

Value slice(const Value& o, const Value& start, const Value& stop, const Value& step, const Args& a) {
  if (o.kind != Value::ListKind && o.kind != Value::String)
    a.failHere(TextErrorKind::Template, std::string(typeName(o)) + " cannot be sliced");
  auto given = [](const Value& v) { return v.kind != Value::None && v.kind != Value::Undefined; };
  int64_t by = given(step) ? needInt(step, a, "a slice") : 1;
  if (by == 0) a.failHere(TextErrorKind::Template, "a slice step of zero");
  std::vector<std::string> chars = o.kind == Value::String ? codePoints(o.s) : std::vector<std::string>();
  int64_t n = o.kind == Value::String ? int64_t(chars.size()) : int64_t(o.list->size());
  // Python's PySlice_AdjustIndices: a bound past either end is clamped to it.
  auto bound = [&](const Value& v, int64_t otherwise) {
    if (!given(v)) return otherwise;
    int64_t x = needInt(v, a, "a slice");
    if (x < 0) x = x < -n ? (by < 0 ? -1 : 0) : x + n;
    else if (x >= n) x = by < 0 ? n - 1 : n;
    return x;
  };
  int64_t from = bound(start, by < 0 ? n - 1 : 0), to = bound(stop, by < 0 ? -1 : n);
  by = std::clamp(by, -(n + 1), n + 1);  // the same slice, with no overflow below
  List items;
  std::string text;
  for (int64_t k = from; by > 0 ? k < to : k > to; k += by) {
    if (o.kind == Value::String) text += chars[size_t(k)];
    else items.push_back((*o.list)[size_t(k)]);
  }
  return o.kind == Value::String ? Value::string(std::move(text)) : Value::ofList(std::move(items));
}

Value callGlobal(const std::string& name, const Args& a, bool& known) {
  known = true;
  if (name == "range") {
    a.allow(name, 3, {});
    if (a.positional.empty()) a.failHere(TextErrorKind::Template, "range needs an argument");
    bool one = a.positional.size() == 1;
    int64_t start = one ? 0 : needInt(a.positional[0], a, "range");
    int64_t stop = needInt(a.positional[one ? 0 : 1], a, "range");
    int64_t stride = a.positional.size() > 2 ? needInt(a.positional[2], a, "range") : 1;
    if (stride == 0) a.failHere(TextErrorKind::Template, "range: the step is zero");
    __int128 span = stride > 0 ? __int128(stop) - start : __int128(start) - stop;
    __int128 by = stride > 0 ? __int128(stride) : -__int128(stride);
    __int128 count = span <= 0 ? 0 : (span + by - 1) / by;
    a.checkSize(size_t(std::min<__int128>(count, INT64_MAX)));
    List out;
    for (int64_t k = 0; k < int64_t(count); ++k) out.push_back(Value::integer(int64_t(start + __int128(k) * stride)));
    return Value::ofList(std::move(out));
  }
  if (name == "dict") {
    if (!a.positional.empty()) a.failHere(TextErrorKind::Unsupported, "dict() takes keyword arguments only here");
    return Value::ofDict(Dict(a.named.begin(), a.named.end()));
  }
  if (name == "strftime_now") {
    a.allow(name, 1, {});
    std::time_t now = a.limits->now >= 0 ? a.limits->now : std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[512];
    size_t n = std::strftime(buf, sizeof buf, needString(a.get(0, "", kUndefined), a, "strftime_now").c_str(), &local);
    return Value::string(std::string(buf, n));
  }
  known = false;
  return Value::undefined();
}

}  // namespace poot::text::jinja

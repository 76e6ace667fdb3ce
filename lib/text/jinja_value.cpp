#include "text/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace poot::text::jinja {

void fail(TextErrorKind k, int line, int column, const std::string& message) {
  throw Failure{TextError{k, "template line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message,
                          line, column}};
}

Value Value::undefined(std::string name) {
  Value v;
  v.s = std::move(name);
  return v;
}
Value Value::boolean(bool x) {
  Value v{Bool};
  v.b = x;
  return v;
}
Value Value::integer(int64_t x) {
  Value v{Int};
  v.i = x;
  return v;
}
Value Value::number(double x) {
  Value v{Float};
  v.f = x;
  return v;
}
Value Value::string(std::string x) {
  Value v{String};
  v.s = std::move(x);
  return v;
}
Value Value::ofList(List x) {
  Value v{ListKind};
  for (const Value& e : x) v.depth = std::max(v.depth, e.depth);
  ++v.depth;
  v.list = std::make_shared<List>(std::move(x));
  return v;
}
Value Value::ofDict(Dict x) {
  Value v{DictKind};
  for (const auto& e : x) v.depth = std::max(v.depth, e.second.depth);
  ++v.depth;
  v.dict = std::make_shared<Dict>(std::move(x));
  return v;
}

const Value* Value::find(const std::string& key) const {
  if (kind != DictKind) return nullptr;
  for (const auto& [k, v] : *dict)
    if (k == key) return &v;
  return nullptr;
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Undefined:
    case Value::None: return false;
    case Value::Bool: return v.b;
    case Value::Int: return v.i != 0;
    case Value::Float: return v.f != 0;
    case Value::String: return !v.s.empty();
    case Value::ListKind: return !v.list->empty();
    case Value::DictKind: return !v.dict->empty();
    case Value::Macro: return true;
  }
  return false;
}

namespace {

// Python's repr of a float: the shortest digits that read back, fixed
// between 1e-4 and 1e16, else d.ddde+XX.
std::string formatFloat(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  size_t e = sci.find('e');
  std::string mant = sci.substr(0, e);
  int exp = std::stoi(sci.substr(e + 1));
  bool negative = mant[0] == '-';
  if (negative) mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  int decpt = exp + 1;  // x = 0.digits * 10^decpt
  std::string out = negative ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(size_t(-decpt), '0') + digits;
    } else if (size_t(decpt) >= digits.size()) {
      out += digits + std::string(size_t(decpt) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(decpt)) + "." + digits.substr(size_t(decpt));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char ex[16];
  std::snprintf(ex, sizeof ex, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + ex;
}

// Python's repr of a string: single quotes unless it holds one and no double quote.
std::string reprString(const std::string& s) {
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\' || c == unsigned(q)) out += '\\', out += char(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + q;
}

// A JSON string as Python's json.dumps writes it with ensure_ascii=False.
std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + '"';
}

void dumpJson(const Value& v, int indent, bool sortKeys, int depth, std::string& out, int line, int column) {
  std::string nl = indent < 0 ? "" : "\n" + std::string(size_t(indent) * size_t(depth + 1), ' ');
  std::string close = indent < 0 ? "" : "\n" + std::string(size_t(indent) * size_t(depth), ' ');
  const char* comma = indent < 0 ? ", " : ",";
  switch (v.kind) {
    case Value::None: out += "null"; return;
    case Value::Bool: out += v.b ? "true" : "false"; return;
    case Value::Int: out += std::to_string(v.i); return;
    case Value::Float:
      out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f < 0 ? "-Infinity" : "Infinity") : formatFloat(v.f);
      return;
    case Value::String: out += jsonString(v.s); return;
    case Value::ListKind:
      if (v.list->empty()) { out += "[]"; return; }
      out += "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        out += (k ? comma : "") + nl;
        dumpJson((*v.list)[k], indent, sortKeys, depth + 1, out, line, column);
      }
      out += close + "]";
      return;
    case Value::DictKind: {
      if (v.dict->empty()) { out += "{}"; return; }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : *v.dict) items.push_back(&kv);
      if (sortKeys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += "{";
      for (size_t k = 0; k < items.size(); ++k) {
        out += (k ? comma : "") + nl + jsonString(items[k]->first) + ": ";
        dumpJson(items[k]->second, indent, sortKeys, depth + 1, out, line, column);
      }
      out += close + "}";
      return;
    }
    case Value::Undefined:
    case Value::Macro: fail(TextErrorKind::Template, line, column, std::string("tojson: ") + typeName(v) + " is not JSON");
  }
}

}  // namespace

std::string str(const Value& v) {
  switch (v.kind) {
    case Value::Undefined: return "";
    case Value::String: return v.s;
    default: return repr(v);
  }
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Undefined: return "Undefined";  // inside a list or dict; alone it renders empty (str)
    case Value::None: return "None";
    case Value::Bool: return v.b ? "True" : "False";
    case Value::Int: return std::to_string(v.i);
    case Value::Float: return formatFloat(v.f);
    case Value::String: return reprString(v.s);
    case Value::ListKind: {
      std::string out = v.isTuple ? "(" : "[";
      for (size_t k = 0; k < v.list->size(); ++k) out += (k ? ", " : "") + repr((*v.list)[k]);
      return out + (v.isTuple ? (v.list->size() == 1 ? ",)" : ")") : "]");
    }
    case Value::DictKind: {
      std::string out = v.isNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [key, val] : *v.dict) {
        out += (first ? "" : ", ") + reprString(key) + ": " + repr(val);
        first = false;
      }
      return out + (v.isNamespace ? "}>" : "}");
    }
    case Value::Macro: return "<Macro>";
  }
  return "";
}

bool equal(const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) return a.kind == Value::Int && b.kind == Value::Int ? a.i == b.i : a.asDouble() == b.asDouble();
  if (a.kind == Value::Bool && b.isNumber()) return equal(Value::integer(a.b), b);
  if (b.kind == Value::Bool && a.isNumber()) return equal(a, Value::integer(b.b));
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Undefined:
    case Value::None: return true;
    case Value::Bool: return a.b == b.b;
    case Value::String: return a.s == b.s;
    case Value::ListKind:
      return a.list->size() == b.list->size() && std::equal(a.list->begin(), a.list->end(), b.list->begin(), equal);
    case Value::DictKind:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [k, v] : *a.dict) {
        const Value* w = b.find(k);
        if (!w || !equal(v, *w)) return false;
      }
      return true;
    case Value::Macro: return a.macro == b.macro;
    default: return false;
  }
}

const char* typeName(const Value& v) {
  static const char* names[] = {"an undefined value", "none", "a boolean", "an integer", "a float", "a string",
                                 "a list", "a dict", "a macro"};
  return names[v.kind];
}

std::string toJson(const Value& v, int indent, bool sortKeys, int line, int column) {
  std::string out;
  dumpJson(v, indent, sortKeys, 0, out, line, column);
  return out;
}

Value fromJson(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxDepth)
    throw Failure{TextError{TextErrorKind::BadInput, "the JSON nests deeper than " + std::to_string(kMaxDepth) + " levels"}};
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return j.get<uint64_t>() > uint64_t(INT64_MAX) ? Value::number(j.get<double>()) : Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      for (const auto& e : j) l.push_back(fromJson(e, depth + 1));
      return Value::ofList(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items()) d.emplace_back(k, fromJson(e, depth + 1));
      return Value::ofDict(std::move(d));
    }
    default: return Value::none();  // binary values: none in parsed JSON
  }
}

std::vector<std::string> codePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t k = 0; k < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    n = std::min(n, s.size() - k);
    out.push_back(s.substr(k, n));
    k += n;
  }
  return out;
}

}  // namespace poot::text::jinja

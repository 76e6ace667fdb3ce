// Printing of kernel requests and their attributes. The attribute syntax
// follows the graph text (docs/graph-format.md) so a request reads like the
// eqn it came from; only over-long lists are abbreviated.
#include "plan/request.h"

#include <cstring>

#include "ir/text.h"
#include "plan/schedule.h"

namespace poot {

namespace {

// The items' 8-byte little-endian patterns, hashed in order.
template <class T>
std::string abbreviated(const std::vector<T>& items) {
  uint64_t h = kFnvOffset;
  for (T x : items) {
    uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof bits);
    char b[8];
    for (int i = 0; i < 8; ++i) b[i] = char((bits >> (8 * i)) & 0xff);
    h = fnv1a(std::string_view(b, 8), h);
  }
  return "[" + std::to_string(items.size()) + " values #" + hex64(h) + "]";
}

std::string printValue(const AttrValue& v, int64_t maxList) {
  if (maxList >= 0) {
    if (const auto* xs = std::get_if<std::vector<int64_t>>(&v); xs && int64_t(xs->size()) > maxList)
      return abbreviated(*xs);
    if (const auto* xs = std::get_if<std::vector<double>>(&v); xs && int64_t(xs->size()) > maxList)
      return abbreviated(*xs);
  }
  return formatAttr(v);
}

std::string printTypes(const std::vector<Type>& ts) {
  std::string out;
  for (size_t i = 0; i < ts.size(); ++i) out += (i ? ", " : "") + ts[i].str();
  return out;
}

std::string arg(int32_t a) { return a >= 0 ? "s" + std::to_string(a) : "a" + std::to_string(-1 - a); }

// Fused(f32[4,8], f32[8]) -> f32[4,8] [s0 = Mul(a0, a1) : f32[4,8]; ...] stores (s0)
std::string printFused(const KernelRequest& r, int64_t maxList) {
  std::string out = "Fused(" + printTypes(r.operands) + ") -> " + printTypes(r.results) + " [";
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const FusedStep& s = r.steps[i];
    out += (i ? "; s" : "s") + std::to_string(i) + " = " + opName(s.op) + "(";
    for (size_t j = 0; j < s.args.size(); ++j) out += (j ? ", " : "") + arg(s.args[j]);
    out += ")";
    std::string attrs = printAttrs(s.attrs, maxList);
    if (!attrs.empty()) out += " " + attrs;
    out += " : " + s.type.str();
  }
  out += "] stores (";
  for (size_t i = 0; i < r.stores.size(); ++i) out += (i ? ", " : "") + arg(r.stores[i]);
  return out + ")";
}

std::string print(const KernelRequest& r, int64_t maxList) {
  std::string out;
  if (!r.steps.empty()) {
    out = printFused(r, maxList);
  } else {
    out = std::string(opName(r.op)) + "(" + printTypes(r.operands) + ") -> " + printTypes(r.results);
    std::string attrs = printAttrs(r.attrs, maxList);
    if (!attrs.empty()) out += " " + attrs;
  }
  return out + " schedule=" + printSchedule(r.schedule);
}

}  // namespace

std::string printAttrs(const Attrs& attrs, int64_t maxList) {
  if (attrs.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < attrs.size(); ++i)
    out += (i ? ", " : "") + attrs[i].name + "=" + printValue(attrs[i].value, maxList);
  return out + "}";
}

std::string printRequest(const KernelRequest& r) { return print(r, 16); }

std::string requestIdentity(const KernelRequest& r) { return print(r, -1); }

}  // namespace poot

// Names, sizes and printing of dtypes and shapes.
#include "ir/types.h"

namespace poot {

namespace {
struct DTypeRow { DType t; const char* name; int bytes; };
constexpr DTypeRow kDTypes[] = {
    {DType::F32, "f32", 4}, {DType::F16, "f16", 2}, {DType::BF16, "bf16", 2},
    {DType::I32, "i32", 4}, {DType::I64, "i64", 8}, {DType::Bool, "bool", 1},
};
}  // namespace

const char* dtypeName(DType t) { return kDTypes[int(t)].name; }
int dtypeBytes(DType t) { return kDTypes[int(t)].bytes; }

std::optional<DType> parseDType(std::string_view s) {
  for (const DTypeRow& r : kDTypes)
    if (s == r.name) return r.t;
  return std::nullopt;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

bool fitsDType(double v, DType t) {
  if (t == DType::I32) return v >= -2147483648.0 && v <= 2147483647.0;
  if (t == DType::I64) return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
  return true;
}

std::string shapeStr(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::string Type::str() const { return dtypeName(dtype) + shapeStr(shape); }

}  // namespace poot

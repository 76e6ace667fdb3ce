// Element types, static shapes and tensor types of the graph IR. Every value
// in a graph has one dtype and one static shape; what varies per call is data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace poot {

enum class DType : uint8_t { F32, F16, BF16, I32, I64, Bool };

const char* dtypeName(DType t);
std::optional<DType> parseDType(std::string_view s);
int dtypeBytes(DType t);
inline bool isFloat(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }
inline bool isInt(DType t) { return t == DType::I32 || t == DType::I64; }

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);

// Whether an integral value is representable in an integer dtype (always true
// for float dtypes).
bool fitsDType(double v, DType t);

struct Type {
  DType dtype = DType::F32;
  Shape shape;

  int64_t rank() const { return int64_t(shape.size()); }
  bool operator==(const Type&) const = default;
  std::string str() const;  // "f32[1,32,1,128]"
};

std::string shapeStr(const Shape& s);  // "[1,32,1,128]"

}  // namespace poot

// A host tensor: a dtype, a static shape and the elements in row-major order,
// stored as the dtype's own little-endian bytes (f16 and bf16 as their 16-bit
// patterns, bool as one byte 0 or 1). The oracle computes on these, .npy and
// .safetensors files read into them, and the runtime compares against them.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "ir/types.h"

namespace poot {

struct Tensor {
  Type type;
  std::vector<uint8_t> bytes;

  Tensor() = default;
  explicit Tensor(Type t) : type(std::move(t)), bytes(size_t(numel(type.shape)) * dtypeBytes(type.dtype)) {}

  int64_t size() const { return numel(type.shape); }
  DType dtype() const { return type.dtype; }
  const Shape& shape() const { return type.shape; }

  // Element i as a double (floats widened exactly, integers and bools converted).
  double get(int64_t i) const;
  // Stores v into element i, rounding to the dtype (round-to-nearest-even for
  // f16/bf16, truncation toward zero for integers, v != 0 for bool).
  void set(int64_t i, double v);
};

// v narrowed to f32 rounding to odd; exact values (and infinities, NaN) pass
// unchanged. A later round-to-nearest-even to fewer than 22 mantissa bits
// (f16, bf16) then equals the correctly rounded narrowing of v itself.
float roundToOddF32(double v);

// IEEE binary16 and bfloat16 conversions, round-to-nearest-even, NaN kept NaN.
uint16_t floatToHalf(float f);
float halfToFloat(uint16_t h);
uint16_t floatToBf16(float f);
float bf16ToFloat(uint16_t b);

}  // namespace poot

// Element access of host tensors and the two-byte float conversions. Every
// narrowing is round-to-nearest-even and exact to the last bit: a double is
// first narrowed to f32 by rounding to odd (truncate, then set the lowest bit
// when anything was dropped), which keeps enough information for a second
// rounding to f16 or bf16 to be the correctly rounded one. Integers stored
// from a double truncate toward zero and saturate; NaN stores as 0.
#include "oracle/tensor.h"

#include <bit>
#include <cmath>
#include <limits>

namespace poot {

namespace {

template <class T>
T load(const std::vector<uint8_t>& b, int64_t i) {
  T v;
  std::memcpy(&v, b.data() + size_t(i) * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store(std::vector<uint8_t>& b, int64_t i, T v) {
  std::memcpy(b.data() + size_t(i) * sizeof(T), &v, sizeof(T));
}

template <class I>
I saturate(double v) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  if (t <= double(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (t >= double(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return I(t);
}

}  // namespace

float roundToOddF32(double v) {
  float f = float(v);
  if (!std::isfinite(v) || double(f) == v) return f;
  if (std::fabs(double(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);  // truncate
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
}


uint16_t floatToHalf(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or NaN (NaN kept NaN, quiet, top payload bits kept)
    return sign | (absx > 0x7f800000u ? uint16_t(0x7e00u | ((absx >> 13) & 0x3ffu)) : uint16_t(0x7c00u));
  int32_t exp = int32_t(absx >> 23) - 127 + 15;  // biased half exponent
  uint32_t mant = (absx & 0x7fffffu) | (absx >= 0x00800000u ? 0x800000u : 0u);  // with the hidden bit
  if (exp >= 31) return sign | 0x7c00u;  // overflow
  // Number of low bits of the 24-bit significand to drop: 13 for a normal
  // half, more for a subnormal one.
  int shift = exp >= 1 ? 13 : 13 + (1 - exp);
  if (shift > 24) return sign;  // below half the smallest subnormal (f32 subnormals too)
  uint32_t kept = mant >> shift;
  uint32_t rest = mant & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1))) ++kept;
  // For a normal result `kept` holds the hidden bit; adding the exponent field
  // lets a mantissa carry roll into the exponent (and to inf) by itself.
  uint32_t bits = exp >= 1 ? (uint32_t(exp - 1) << 10) + kept : kept;
  return uint16_t(sign | bits);
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in f32
    float v = float(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t floatToBf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // NaN stays a quiet NaN
  uint32_t lsb = (x >> 16) & 1u;
  return uint16_t((x + 0x7fffu + lsb) >> 16);
}

float bf16ToFloat(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

double Tensor::get(int64_t i) const {
  switch (type.dtype) {
    case DType::F32: return load<float>(bytes, i);
    case DType::F16: return halfToFloat(load<uint16_t>(bytes, i));
    case DType::BF16: return bf16ToFloat(load<uint16_t>(bytes, i));
    case DType::I32: return load<int32_t>(bytes, i);
    case DType::I64: return double(load<int64_t>(bytes, i));
    case DType::Bool: return bytes[size_t(i)] ? 1.0 : 0.0;
  }
  return 0;
}

void Tensor::set(int64_t i, double v) {
  switch (type.dtype) {
    case DType::F32: store(bytes, i, float(v)); break;
    case DType::F16: store(bytes, i, floatToHalf(roundToOddF32(v))); break;
    case DType::BF16: store(bytes, i, floatToBf16(roundToOddF32(v))); break;
    case DType::I32: store(bytes, i, saturate<int32_t>(v)); break;
    case DType::I64: store(bytes, i, saturate<int64_t>(v)); break;
    case DType::Bool: bytes[size_t(i)] = v != 0 ? 1 : 0; break;
  }
}

}  // namespace poot

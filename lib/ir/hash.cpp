// FNV-1a 64 and its hex form.
#include "ir/hash.h"

#include <algorithm>

namespace poot {

uint64_t fnv1a(std::string_view bytes, uint64_t h) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

uint64_t fnv1aMasked(std::string_view bytes, size_t at, size_t n) {
  at = std::min(at, bytes.size());
  n = std::min(n, bytes.size() - at);
  uint64_t h = fnv1a(bytes.substr(0, at));
  for (size_t i = 0; i < n; ++i) h *= kFnvPrime;  // h ^= 0 leaves h as it is
  return fnv1a(bytes.substr(at + n), h);
}

std::string hex64(uint64_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[size_t(i)] = digits[v & 15];
  return s;
}

}  // namespace poot

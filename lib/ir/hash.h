// FNV-1a 64, the one hash the project writes into its files and keys: the
// plan key and the profile hash (lib/plan), the generator's per-parameter
// streams (lib/oracle) and the plan file's checksum (written by lib/plan,
// checked by lib/runtime). Not cryptographic: it finds accidents (a flipped
// byte, a truncated copy), not an adversary. FNV-1a changes its state with a
// bijection per byte, so any change of one byte changes the hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace poot {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

// FNV-1a 64 over the bytes, continuing from `h`.
uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnvOffset);

// FNV-1a 64 over the bytes with the `n` bytes at `at` read as zeros: the
// checksum of a file that stores that checksum at `at`.
uint64_t fnv1aMasked(std::string_view bytes, size_t at, size_t n);

// 16 lower-case hex digits.
std::string hex64(uint64_t v);

}  // namespace poot

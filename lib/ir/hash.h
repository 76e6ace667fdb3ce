// FNV-1a 64, the one hash the project writes into its files and keys: the
// plan key and the profile hash (lib/plan) and the generator's per-parameter
// streams (lib/oracle). Not cryptographic.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace poot {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;

// FNV-1a 64 over the bytes, continuing from `h`.
uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnvOffset);

// 16 lower-case hex digits.
std::string hex64(uint64_t v);

}  // namespace poot

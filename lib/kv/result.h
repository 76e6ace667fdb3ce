// Errors of the KV driver as values. lib/kv stands on nothing but the standard
// library, so it has its own small error type instead of lib/ir's: a KvError
// carries a kind (what went wrong, for a caller to act on) and a lower-case
// message with no final period (the figures, for a person), and KvResult<T> is
// either a value or a KvError. A call that fails changes nothing.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace poot::kv {

enum class KvErrorKind {
  OutOfBlocks,      // the pool has too few free or evictable blocks for the request
  UnknownSequence,  // no live sequence has this id
  Capacity,         // the sequence would pass the capacity (the read map's width)
  EmptyPrompt,      // a sequence starts with at least one token
  BadStep,          // a step with no rows, no tokens per row, or one sequence on two rows
  StaleStep,        // step maps committed after their sequences moved on (or twice)
  BadRequest,       // a request for no token (maxNew below 1)
  UnknownRequest,   // no request has this index
};

struct KvError {
  KvErrorKind kind;
  std::string message;
};

template <class T>
class [[nodiscard]] KvResult {
 public:
  KvResult(T value) : v_(std::move(value)) {}
  KvResult(KvError error) : v_(std::move(error)) {}

  explicit operator bool() const { return v_.index() == 0; }
  T& operator*() { assert(*this); return std::get<0>(v_); }
  const T& operator*() const { assert(*this); return std::get<0>(v_); }
  T* operator->() { return &**this; }
  const T* operator->() const { return &**this; }
  const KvError& error() const { assert(!*this); return std::get<1>(v_); }

 private:
  std::variant<T, KvError> v_;
};

// For calls that produce nothing but can fail.
struct KvOk {};
using KvStatus = KvResult<KvOk>;

}  // namespace poot::kv

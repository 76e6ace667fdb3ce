// Value ranges: an interval analysis over the integer (and bool) values of a
// graph. Every such value gets an inclusive interval [lo, hi] that holds for
// every element on every call the graph accepts: a slot's declared range
// (every binder checks it), Iota and Constant exactly, arithmetic by interval
// rules, comparisons as 0/1 (decided when the intervals do), selects as the
// hull of their branches, data movement as its source. An IndexGuard's clamp
// counts only under the seed's witness rule: when the guard's witness is a
// declared validation output (a bad value then fails the call instead of
// turning into a valid-looking one); otherwise the guard proves nothing that
// its input did not already prove. A value nothing is known about gets the
// whole range of its dtype, so "proved" always means proved. The attention
// rewrite asks it for the live length (1 <= len <= Lk) and the paged read map
// (every word in [0, pool_slots)).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace poot {

struct Interval {
  int64_t lo = 0, hi = 0;  // inclusive, lo <= hi

  bool within(int64_t l, int64_t h) const { return lo >= l && hi <= h; }
  bool operator==(const Interval&) const = default;
  std::string str() const;  // "[lo, hi]"
};

// The whole range of an integer or bool dtype; nullopt for a float dtype.
std::optional<Interval> dtypeRange(DType t);

class ValueRanges {
 public:
  ValueRanges() = default;

  // The interval of an integer or bool value; nullopt for a float value or a
  // value created after the analysis ran.
  std::optional<Interval> get(ValueId v) const;
  // Whether every element of v is proved to lie in [lo, hi].
  bool proves(ValueId v, int64_t lo, int64_t hi) const;
  // Whether these ranges were computed for g as it is now (same values and eqns).
  bool isFor(const Graph& g) const { return values_ == g.values.size() && eqns_ == g.eqns.size() && computed_; }

  // One line per integer or bool value that is narrower than its dtype, in
  // value order, as .pg comments: "# range %len.guarded : i32[2] in [1, 64]".
  std::string print(const Graph& g) const;

 private:
  friend ValueRanges computeRanges(const Graph& g);
  std::vector<std::optional<Interval>> ranges_;
  size_t values_ = 0, eqns_ = 0;
  bool computed_ = false;
};

// Runs the analysis over g in eqn order (one forward sweep: eqns only use
// values defined before them).
ValueRanges computeRanges(const Graph& g);

}  // namespace poot

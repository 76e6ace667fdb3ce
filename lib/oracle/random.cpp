// The seeded parameter generator. Each parameter gets its own stream, keyed by
// the seed and the FNV-1a hash of its name, so adding or renaming one
// parameter leaves every other one unchanged; the stream is splitmix64, and
// every draw is made with integer arithmetic written here (no standard
// distribution, whose output differs between standard libraries), so the
// values are the same on every platform. docs/oracle.md states the
// distributions.
#include "oracle/random.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "ir/hash.h"

namespace poot {

namespace {

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct SplitMix64 {
  uint64_t state;
  uint64_t next() { return mix(state += 0x9e3779b97f4a7c15ull); }
  double unit() { return double(next() >> 11) * 0x1p-53; }  // [0, 1)
  // Uniform in [0, n) without modulo bias; n == 0 means 2^64.
  uint64_t below(uint64_t n) {
    if (n == 0) return next();
    uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % n;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }
  int64_t inRange(int64_t lo, int64_t hi) {  // uniform in [lo, hi]
    return int64_t(uint64_t(lo) + below(uint64_t(hi) - uint64_t(lo) + 1));
  }
};

}  // namespace

Tensor randomParam(const Graph& g, ValueId id, uint64_t seed) {
  const Value& p = g.value(id);
  Tensor t(p.type);
  SplitMix64 rng{mix(seed) ^ fnv1a(p.name)};
  int64_t n = t.size();
  DType dt = p.type.dtype;
  if (isFloat(dt)) {
    // Weights of rank >= 2 are [..., out, in] (Hugging Face Linear): fan-in is
    // the last axis. Rank-0/1 weights (norm gains, biases) and inputs and
    // states are scale 1.
    double scale = p.storage == Storage::Weight && p.type.rank() >= 2 ? 1.0 / std::sqrt(double(p.type.shape.back())) : 1.0;
    for (int64_t i = 0; i < n; ++i) {
      double mag = 0.5 + 0.5 * rng.unit();
      t.set(i, (rng.next() & 1 ? -mag : mag) * scale);
    }
  } else if (dt == DType::Bool) {
    for (int64_t i = 0; i < n; ++i) t.set(i, double(rng.next() & 1));
  } else if (p.storage == Storage::Slot) {
    uint64_t span = uint64_t(p.hi) - uint64_t(p.lo) + 1;  // 0 means 2^64
    std::vector<int64_t> vals(static_cast<size_t>(n));
    if (span != 0 && span < uint64_t(n)) {  // too few values to be distinct
      for (auto& v : vals) v = rng.inRange(p.lo, p.hi);
    } else if (span != 0 && span < 2 * uint64_t(n)) {  // dense: a partial Fisher-Yates shuffle
      std::vector<int64_t> pool(static_cast<size_t>(span));
      for (size_t i = 0; i < pool.size(); ++i) pool[i] = p.lo + int64_t(i);
      for (size_t i = 0; i < vals.size(); ++i) {
        std::swap(pool[i], pool[i + size_t(rng.below(span - i))]);
        vals[i] = pool[i];
      }
    } else {  // sparse: redraw a value already taken
      std::set<int64_t> taken;
      for (auto& v : vals) {
        do v = rng.inRange(p.lo, p.hi);
        while (!taken.insert(v).second);
      }
    }
    for (int64_t i = 0; i < n; ++i) {  // exact: the range fits the dtype
      int64_t v = vals[size_t(i)];
      int32_t v32 = int32_t(v);
      std::memcpy(t.bytes.data() + size_t(i) * size_t(dtypeBytes(dt)), dt == DType::I32 ? (const void*)&v32 : &v,
                  size_t(dtypeBytes(dt)));
    }
  } else {
    int64_t bound = gatherBound(g, id);
    int64_t hi = bound ? bound : 16;
    for (int64_t i = 0; i < n; ++i) t.set(i, double(rng.inRange(0, hi - 1)));
  }
  return t;
}

std::map<std::string, Tensor> completeParams(const Graph& g, std::map<std::string, Tensor> given, uint64_t seed) {
  for (ValueId id : g.params)
    if (!given.count(g.value(id).name)) given.emplace(g.value(id).name, randomParam(g, id, seed));
  return given;
}

}  // namespace poot

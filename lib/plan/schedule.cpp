// The schedule rules of schedule.h. Everything here is integer arithmetic on
// the profile's figures; sizes stay far inside int64 because every type has
// at most 2^48 elements.
#include "plan/schedule.h"

#include <algorithm>

namespace poot {

namespace {
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

int64_t attentionLanes(int64_t dv, const DeviceProfile& d) {
  int64_t lanes = kMaxLanes;
  while (lanes >= 1 && (lanes > d.max_workgroup_size || lanes * laneStateBytes(dv) > d.workgroup_memory_bytes))
    lanes /= 2;
  return lanes;
}

std::optional<std::array<int64_t, 3>> foldGrid(int64_t workgroups, const DeviceProfile& d) {
  int64_t x = std::min(workgroups, d.grid_limits[0]);
  int64_t y = (workgroups + x - 1) / x;
  if (y > d.grid_limits[1]) return std::nullopt;
  return std::array<int64_t, 3>{x, y, 1};
}

SplitDecision chooseSplits(int64_t rows, int64_t lq, int64_t lk, int64_t dv, const DeviceProfile& d) {
  if (lq != 1) return {1, "not a decode: " + str(lq) + " query rows"};
  if (rows >= d.compute_units)
    return {1, "the " + str(rows) + " rows (B * Hq) fill the " + str(d.compute_units) + " compute units"};
  int64_t cap = std::min(kMaxSplits, lk / kMinChunkKeys);
  if (cap < 2) return {1, str(lk) + " keys make fewer than two chunks of " + str(kMinChunkKeys)};
  // The smallest power of two that fills the compute units, capped.
  int64_t s = 2;
  while (rows * s < d.compute_units && s < kMaxSplits) s *= 2;
  s = std::min(s, cap);
  int64_t bytes = partialStateBytes(rows, s, dv);
  if (bytes > d.max_buffer_bytes)
    return {1, "the partial state of " + str(bytes) + " bytes for " + str(s) +
                   " splits would pass the device's single-buffer limit of " + str(d.max_buffer_bytes)};
  if (!foldGrid(rows * s, d))
    return {1, "the " + str(rows * s) + " partial workgroups for " + str(s) + " splits would pass the device's grid of " +
                   str(d.grid_limits[0]) + " x " + str(d.grid_limits[1])};
  return {s, str(rows) + " rows on " + str(d.compute_units) + " compute units, " + str(lk) + " keys: " + str(s) +
                 " splits"};
}

Schedule streamingSchedule(int64_t lanes, int64_t dv) {
  return Schedule{"streaming", lanes, 1, lanes, lanes * laneStateBytes(dv)};
}

Schedule partialsSchedule(int64_t lanes, int64_t splits, int64_t dv) {
  return Schedule{"split-kv-partials", lanes, splits, lanes, lanes * laneStateBytes(dv)};
}

// The combine reads each row's partials straight from the scratch (at most 16
// per channel), so it reserves no workgroup memory.
Schedule combineSchedule(int64_t lanes, int64_t splits) { return Schedule{"split-kv-combine", lanes, splits, lanes, 0}; }

Schedule plainSchedule(const std::string& kind, const DeviceProfile& d) {
  int64_t w = std::min(kPlainWorkgroup, d.max_workgroup_size);
  // A guard folds one in-range flag (an i32) per thread in workgroup memory.
  return Schedule{kind, 0, 1, w, kind == "guard" ? w * 4 : 0};
}

std::string printSchedule(const Schedule& s) {
  return s.kind + " lanes=" + str(s.lanes) + " splits=" + str(s.splits) + " workgroup=" + str(s.workgroupSize) +
         " memory=" + str(s.workgroupMemory);
}

}  // namespace poot

// A device profile: what one device can hold, as data. The planner reads only
// these figures; no target logic lives anywhere else. Profiles are YAML files
// (targets/*.yaml); loading validates every field and names the file, the
// field and its line on any problem. The format is specified in
// docs/device-profile.md.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "ir/matrix.h"

namespace poot {

enum class Target { Spirv, Ptx, Hsaco };

const char* targetName(Target t);

// Which operations on a two-byte float type the target's code generator can
// lower. A SPIR-V device without shaderFloat16 may still load and store f16.
struct TwoByteOps {
  bool storage = false;  // load, store and convert to/from f32
  bool arith = false;    // arithmetic in the two-byte type itself
  bool select = false;   // select between two-byte values
};

struct DeviceProfile {
  std::string name;
  Target target = Target::Spirv;
  std::string arch;  // sm_90, gfx942, vulkan1.2, ...
  int64_t compute_units = 0;
  int64_t workgroup_memory_bytes = 0;
  int64_t max_workgroup_size = 0;
  int64_t subgroup_size = 0;
  int64_t grid_limits[3] = {0, 0, 0};  // x, y, z
  int64_t max_buffer_bytes = 0;
  int64_t max_bindings = 0;  // storage buffers one kernel may bind
  int64_t memory_bytes = 0;
  // Optional: the rate a device-to-device copy reaches on it, bytes read
  // plus written a second, as measured (0: not given). The floor of a step
  // is the bytes it must read at this rate (buffers.h, stepReads).
  int64_t memory_bandwidth_bytes_per_s = 0;
  TwoByteOps f16;
  TwoByteOps bf16;
  // Optional: the warp-wide matrix multiplies (ir/matrix.h) the target's
  // code generator emits (KIR's Mma, with ShuffleXor), in order of
  // preference. Today PTX's mma.sync shapes, sm_80 and newer.
  std::vector<MatrixOp> matrix_ops;
  bool hasMatrix(MatrixOp op) const { return std::find(matrix_ops.begin(), matrix_ops.end(), op) != matrix_ops.end(); }
};

// Parses and validates a profile; `file` is used in diagnostics only.
Expected<DeviceProfile> parseProfile(const std::string& text, const std::string& file);
Expected<DeviceProfile> loadProfile(const std::string& path);

}  // namespace poot

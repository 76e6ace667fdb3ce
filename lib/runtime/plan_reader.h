// Loading a plan file (.plan, schemas/plan.fbs) on the runtime side. The
// runtime stands on the file format, never on the compiler's lib/plan, so it
// has its own small records here: what the file says, checked. Reading checks
// the file identifier, the schema version and the checksum over every byte,
// runs the FlatBuffers verifier (nothing is read out of bounds), reads the
// embedded source graph, and then checks every index and figure the runtime
// will trust: buffer, kernel, eqn and binding indices, arena offsets within
// the arena, no two arena buffers that share memory while both live, grids
// and workgroups within what the target's launch interface can express,
// nothing written into a parameter the caller binds, and each kernel's blob
// well formed for its target and agreeing with the records (kernel_blob.h:
// entry point, workgroup size, binding count). Every failure is an
// ErrorKind::Format error naming the file (and the record: "buffer 3",
// "dispatch 12"). Checking the plan against the live device is the Session's
// job (session.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "runtime/signature.h"

namespace poot::rt {

// The schema version this reader understands.
constexpr uint32_t kPlanVersion = 2;

enum class Role : uint8_t { Input, Weight, State, Slot, Output, Validation, Temp, Scratch, View };
const char* roleName(Role r);  // "input", "weight", ...

enum class Target : uint8_t { Spirv, Ptx, Hsaco };
const char* targetName(Target t);  // "spirv", "ptx", "hsaco"

struct Device {
  std::string name;
  uint64_t hash = 0;  // the compiler's profile hash
  Target target = Target::Spirv;
  std::string arch;
  int64_t memoryBandwidth = 0;  // bytes a second, as the profile measured it; 0: not given
};

struct Buffer {
  std::string name;
  Role role = Role::Temp;
  Type type;
  int32_t value = -1;   // index into source.values; -1 for scratch
  int64_t offset = 0;   // arena byte offset (temp, scratch; a view: its base's)
  int64_t bytes = 0;
  int32_t alias = -1;   // a view's base buffer, never itself a view
  int64_t lo = 0, hi = 0;          // a slot's declared range, inclusive
  int32_t first = -1, last = -1;   // lifetime in eqn indices (arena buffers, views)
  bool inArena() const { return role == Role::Temp || role == Role::Scratch; }
};

struct Schedule {
  std::string kind;
  int64_t lanes = 0, splits = 0, workgroupSize = 0, workgroupMemory = 0;
  int64_t kLanes = 0, unroll = 0, vector = 0, tileM = 0, tileN = 0, tileK = 0, threadM = 0, threadN = 0;
  std::string matrix;
};

// The request a kernel was generated from, as recorded.
struct Request {
  Op op = Op::Add;
  std::vector<Type> operands, results;
  Attrs attrs;
  Schedule schedule;
  std::string text;  // the compiler's one-line form
};

struct Kernel {
  Target target = Target::Spirv;
  std::string entry;
  std::vector<uint8_t> blob;
  int64_t workgroupSize = 0, workgroupMemory = 0;
  Request request;
  // The code waits for the kernels launched before it before it touches
  // memory (kernel_blob.h), so it may be launched while they finish.
  bool waitsForPrevious = false;
};

struct Dispatch {
  int32_t kernel = 0;
  int32_t eqn = 0;
  int64_t grid[3] = {1, 1, 1};
  std::vector<int32_t> bindings;  // buffers: the first `reads` are read, the rest written
  int32_t reads = 0;
  std::vector<int64_t> params;
};

struct Slot {
  std::string name;
  int32_t buffer = -1;
  int64_t lo = 0, hi = 0;
};

struct Export {
  std::string name;
  int32_t buffer = -1;
};

struct PlanFile {
  uint32_t version = 0;
  Device device;
  std::string key;
  int64_t arenaBytes = 0;
  std::vector<Buffer> buffers;
  std::vector<Kernel> kernels;
  std::vector<Dispatch> dispatches;  // in execution order
  std::vector<Slot> slots;
  std::vector<Export> outputs;
  std::vector<Export> validations;
  Graph source;  // the compiled graph, verified
};

// For a Gather kernel's request, the extent of the table axis its indices
// index; 0 for any other request.
int64_t gatherExtent(const Request& r);

// Whether the bytes start like a plan file: the "PPLN" identifier and a root
// offset inside the bytes.
bool isPlanFile(const std::string& bytes);

// `file` is used in diagnostics only.
Expected<PlanFile> readPlanFile(const std::string& bytes, const std::string& file);
// With trusted keys, the plan must carry a signature (PATH.sig) by one of
// them over exactly these bytes (signature.h), checked before anything in
// the plan is read.
Expected<PlanFile> loadPlanFile(const std::string& path, const TrustedKeys& trusted = {});

}  // namespace poot::rt

// The interface a Session runs a plan through: one device, its buffers, its
// compiled kernels and recorded programs. A backend allocates buffers (every
// byte of which stays addressable until the backend goes), moves bytes to
// and from them, builds a kernel once from its blob and records a program (an
// ordered list of dispatches, each with its grid and its bindings as buffer
// ranges) once, to be run as many times as the caller likes: the grid never
// depends on the data. Running a program submits it and waits; consecutive
// dispatches in a program see each other's writes. A backend replays a
// program where it can (the recording goes to the device whole: a Vulkan
// command buffer, a CUDA graph), else launches its dispatches in order at
// every run, and says which (submission()). It also says what the driver
// made of each kernel it built (kernelStats()). Every failure is a typed
// error (Capability when the device lacks something, Io when the driver
// fails), never an exit.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/diag.h"
#include "ir/matrix.h"
#include "runtime/plan_reader.h"

namespace poot::rt {

// The operations on one two-byte float type a target lowers, as a device
// profile's two_byte_floats lists them (docs/device-profile.md): the
// runtime's own copy of plan/profile.h's, as Target is, since the runtime
// stands on no part of lib/plan.
struct TwoByteOps {
  bool storage = false, arith = false, select = false;
};

// What the live device is and can hold, in the device profile's terms
// (docs/device-profile.md), as the driver reports it.
struct DeviceInfo {
  std::string name;     // the driver's own name, "llvmpipe (LLVM 15.0.6, 256 bits)"
  std::string slug;     // a profile-style name, "lavapipe", "nvidia-h200"
  Target target = Target::Spirv;
  std::string arch;     // the newest environment the device runs: "vulkan1.3"
  std::string driver;   // driver name and version, for messages and probe comments
  int64_t computeUnits = 1;  // 0: the driver does not say (Vulkan without a vendor extension)
  int64_t workgroupMemoryBytes = 0;
  int64_t maxWorkgroupSize = 0;
  int64_t subgroupSize = 0;
  int64_t gridLimits[3] = {0, 0, 0};
  int64_t maxBindingBytes = 0;   // the most bytes one binding may span
  int64_t memoryBytes = 0;       // the largest device heap
  int64_t bindingAlignment = 1;  // a binding's offset must be a multiple of this
  int64_t maxBindings = 0;       // storage buffers one kernel may bind
  TwoByteOps f16, bf16;          // what the target lowers on each (two_byte_floats)
  std::vector<MatrixOp> matrixOps;  // the matrix multiplies the code generator emits for it (matrix_multiply)
};

using BufferId = int32_t;
using KernelId = int32_t;
using ProgramId = int32_t;

// A byte range of a buffer, as one binding of a dispatch sees it.
struct BufferRange {
  BufferId buffer = -1;
  int64_t offset = 0;
  int64_t bytes = 0;
};

// How run() submits a recorded program.
enum class Submission {
  Replay,   // the recording goes to the device whole: a Vulkan command buffer, a CUDA graph
  InOrder,  // every run launches the dispatches one by one
};

// What the driver made of one built kernel (poot kernels): the figures
// every driver that reports any has, each where this one gives it, and
// whatever else it reports, by its own names.
struct KernelStats {
  std::optional<int64_t> registers;   // a thread's
  std::optional<int64_t> localBytes;  // a thread's local (scratch) memory: spilled registers, arrays
  std::optional<int64_t> workgroupMemoryBytes;  // the workgroup memory one workgroup takes
  std::optional<int64_t> residentWorkgroups;    // how many workgroups of its size a compute unit holds at once
  std::vector<std::pair<std::string, std::string>> driver;  // (name, value), as the driver names and formats them
};

struct DispatchCommand {
  KernelId kernel = -1;
  int64_t grid[3] = {1, 1, 1};
  std::vector<BufferRange> bindings;  // binding i of the kernel's set 0
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const DeviceInfo& info() const = 0;

  // A buffer of at least `bytes` bytes (0 is allowed), contents undefined.
  virtual Expected<BufferId> allocate(int64_t bytes) = 0;
  virtual Status upload(BufferId buffer, int64_t offset, const void* data, int64_t bytes) = 0;
  virtual Status download(BufferId buffer, int64_t offset, void* data, int64_t bytes) = 0;
  // Copies `bytes` from the start of src to the start of dst on the device,
  // and waits.
  virtual Status copy(BufferId src, BufferId dst, int64_t bytes) = 0;

  // A kernel from its blob (SPIR-V words for Vulkan, PTX text for CUDA)
  // whose entry runs `workgroupSize` threads, uses `workgroupMemory` bytes of
  // workgroup memory (the plan kernel's figure; CUDA launches a kernel past
  // 48 KiB with that much dynamic shared memory) and reads `bindings`
  // storage buffers. `waitsForPrevious`: the code itself waits for the
  // kernels launched before it to end before it touches memory
  // (kernel_blob.h), so the backend may start launching it while they
  // finish (CUDA: a programmatic dependent launch); otherwise it starts
  // only after them.
  virtual Expected<KernelId> createKernel(const std::vector<uint8_t>& blob, const std::string& entry,
                                          int64_t workgroupSize, int64_t workgroupMemory, int bindings,
                                          bool waitsForPrevious) = 0;
  // Records the dispatches in order, each seeing every earlier one's writes.
  virtual Expected<ProgramId> record(const std::vector<DispatchCommand>& dispatches) = 0;
  // The same, and every run of the program also times each dispatch on the
  // device (lastRunDispatchSeconds): Vulkan takes a timestamp after each
  // dispatch, CUDA and HIP record an event between launches, which they
  // then make in order (no replay; a kernel that waits for the previous one
  // in its own code is launched the ordinary way, so the times do not
  // overlap). A Capability error "Profile" where the device cannot.
  virtual Expected<ProgramId> recordProfiled(const std::vector<DispatchCommand>& dispatches) {
    Error e = makeError(ErrorKind::Capability, {}, "device '" + info().name + "' cannot time its dispatches");
    e.capability = "Profile";
    return e;
  }
  // Submits a recorded program and waits until it has finished.
  virtual Status run(ProgramId program) = 0;
  // The device's own time for the last successful run(), where the backend
  // measures it: from a timestamp the device takes on reaching the program
  // (just before its first dispatch) to one after its last dispatch has
  // ended (CUDA: events recorded on the stream before and after what run()
  // submits; Vulkan: timestamps at the top and the bottom of the command
  // buffer, where the queue has them); nullopt otherwise. Time the device
  // spends waiting for a dispatch the host has not launched yet (launches in
  // order) is inside it.
  virtual std::optional<double> lastRunDeviceSeconds() const { return std::nullopt; }
  // Each dispatch's device time in the last successful run() of a program
  // recordProfiled made, in order (the first from the device reaching the
  // program, each next from the end of the one before); empty otherwise.
  virtual std::vector<double> lastRunDispatchSeconds() const { return {}; }

  // What the driver made of a kernel createKernel built; a Capability
  // error "KernelStats" where the driver cannot say.
  virtual Expected<KernelStats> kernelStats(KernelId) {
    Error e = makeError(ErrorKind::Capability, {}, "device '" + info().name + "' reports no kernel statistics");
    e.capability = "KernelStats";
    return e;
  }

  virtual Submission submission() const = 0;
  // Why run() launches in order where this backend would replay (the
  // driver lacks what replay needs: a Capability error, "GraphReplay"), for
  // the caller to say once; nullopt when it replays or was asked not to.
  virtual std::optional<Error> replayFallback() const { return std::nullopt; }
};

}  // namespace poot::rt

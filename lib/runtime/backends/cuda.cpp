// The CUDA backend. No CUDA header is needed to build it: the few driver
// types, enum values and entry points it uses are declared below as the
// driver API reference gives them, and libcuda.so.1 is dlopen'ed once per
// process (the versioned symbols, cuMemAlloc_v2 and so on, are the ones
// cuda.h maps the plain names to) and cuInit'ed. Creation picks a device (an
// ordinal or a name piece from the options or POOT_CUDA_DEVICE, else device
// 0), makes its primary context current and creates one stream. Buffers are
// cuMemAlloc'ed, rounded up to 256 bytes (so a 0-byte buffer exists too);
// upload and download are synchronous copies at an offset; copy is a device
// copy followed by a context synchronize. A kernel is a module JIT-compiled
// from its PTX text (the JIT's error log goes into the error) and its entry
// function; a kernel past 48 KiB of workgroup memory declares it as one
// dynamic shared array, so the function is allowed that much dynamic shared
// memory and every launch passes it. kernelStats() is what the driver made
// of the function: its registers and local bytes a thread and static shared
// bytes a block (cuFuncGetAttribute), and the blocks an SM holds at its
// block size (cuOccupancyMaxActiveBlocksPerMultiprocessor, counting the
// dynamic shared bytes its launches pass). A program is the list of
// launches (block = workgroup size threads in x, grid = the dispatch's
// grid, one pointer parameter per binding: the buffer's base plus the
// range's offset). Each entry point makes the backend's context current
// first, so a backend works from any thread.
//
// Replay. Where the driver has CUDA graphs (the six entry points of
// POOT_CU_GRAPH_FNS, all there since CUDA 11.4) and CudaOptions::replay asks
// for it, record() captures the program once: it begins a capture on the
// stream, makes the very cuLaunchKernel calls an in-order run makes (the
// driver turns them into kernel nodes, one after the other, and copies
// their parameters), ends the capture and instantiates the graph; run()
// then submits the whole program with one cuGraphLaunch. The recording is
// valid for every step because nothing in a launch depends on the data
// (grids and buffer addresses are fixed by the plan). Capture rather than
// building the graph node by node: one launch path serves both ways of
// running, and nothing beyond handles and one enum has to be declared by
// hand for it (the kernel node's parameter struct changed layout between
// CUDA 11 and 12; a mistake in it could not be caught without a GPU). The capture
// is thread-local: it would be broken only by an unsafe call of this thread,
// and record() makes none. An empty program has no graph and runs nothing.
// Without the graph entry points (an older driver) every program launches in
// order, and replayFallback() says why, once, as a Capability "GraphReplay"
// error; with replay off (poot run --no-replay) too, without a reason. Either
// way run() records the start and stop events around what it submits and
// waits for the stream (a faulting kernel is reported by the wait), so
// lastRunDeviceSeconds() is the same span, start event to stop event, with
// or without replay.
//
// Dependent launches. A kernel whose code waits for the kernels launched
// before it (griddepcontrol.wait before any memory access: the plan reader
// reads that from its PTX, kernel_blob.h) is launched with cuLaunchKernelEx
// and the programmatic stream serialization attribute, so the driver may
// launch it and schedule its blocks while the kernel before it drains; its
// wait keeps the order. A captured graph keeps such launches as
// programmatic edges. Without cuLaunchKernelEx (a driver older than CUDA
// 11.8) it is launched the ordinary way, which is only later, not wrong.
#include "runtime/backends/cuda.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <type_traits>

#include "runtime/backends/common.h"

namespace poot::rt {

namespace {

// Driver API types.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphExec = struct CUgraphExec_st*;

// CUresult values.
constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;

// CUdevice_attribute values.
constexpr int CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7;
constexpr int CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10;
constexpr int CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;

// CUfunction_attribute values.
constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;

// CUjit_option values.
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;

// CUstreamCaptureMode values.
constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;

// cuLaunchKernelEx's configuration, with one attribute: the layout of
// CUlaunchConfig and CUlaunchAttribute (an enum, padding to 8 bytes, a
// 64-byte value union) in the driver API reference.
constexpr int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmaticStreamSerializationAllowed;
  } value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute* attrs;
  unsigned numAttrs;
};
static_assert(sizeof(CUlaunchAttribute) == 72 && sizeof(CUlaunchConfig) == 56);

// Static shared memory stops here; past it the PTX declares it dynamic.
constexpr int64_t kStaticSharedBytes = 48 * 1024;

// Kernel parameters every architecture takes (Volta and newer take 32764
// bytes from CUDA 12.1 on); each binding is one pointer among them.
constexpr int64_t kMaxParamBytes = 4096;

// Entry point, exported symbol, signature.
#define POOT_CU_FNS(X)                                                                                         \
  X(cuGetErrorName, "cuGetErrorName", CUresult(CUresult, const char**))                                       \
  X(cuGetErrorString, "cuGetErrorString", CUresult(CUresult, const char**))                                   \
  X(cuInit, "cuInit", CUresult(unsigned))                                                                     \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult(int*))                                                 \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult(int*))                                                     \
  X(cuDeviceGet, "cuDeviceGet", CUresult(CUdevice*, int))                                                     \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult(char*, int, CUdevice))                                       \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult(int*, int, CUdevice))                             \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult(size_t*, CUdevice))                                     \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult(CUcontext*, CUdevice))                     \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult(CUdevice))                            \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult(CUcontext))                                                  \
  X(cuCtxSynchronize, "cuCtxSynchronize", CUresult())                                                         \
  X(cuStreamCreate, "cuStreamCreate", CUresult(CUstream*, unsigned))                                          \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult(CUstream))                                                \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult(CUstream))                                           \
  X(cuEventCreate, "cuEventCreate", CUresult(CUevent*, unsigned))                                              \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult(CUevent))                                                   \
  X(cuEventRecord, "cuEventRecord", CUresult(CUevent, CUstream))                                               \
  X(cuEventElapsedTime, "cuEventElapsedTime", CUresult(float*, CUevent, CUevent))                              \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult(CUdeviceptr*, size_t))                                              \
  X(cuMemFree, "cuMemFree_v2", CUresult(CUdeviceptr))                                                         \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", CUresult(CUdeviceptr, const void*, size_t))                              \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", CUresult(void*, CUdeviceptr, size_t))                                    \
  X(cuMemcpyDtoD, "cuMemcpyDtoD_v2", CUresult(CUdeviceptr, CUdeviceptr, size_t))                              \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx", CUresult(CUmodule*, const void*, unsigned, int*, void**))       \
  X(cuModuleUnload, "cuModuleUnload", CUresult(CUmodule))                                                     \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult(CUfunction*, CUmodule, const char*))                 \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", CUresult(int*, int, CUfunction))                                \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult(CUfunction, int, int))                                 \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor",                \
    CUresult(int*, CUfunction, int, size_t))                                                                  \
  X(cuLaunchKernel, "cuLaunchKernel",                                                                         \
    CUresult(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, \
             void**))

// CUDA graphs: replay needs all of them; a driver without them launches in
// order.
#define POOT_CU_GRAPH_FNS(X)                                                                                   \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", CUresult(CUstream, int))                                 \
  X(cuStreamEndCapture, "cuStreamEndCapture", CUresult(CUstream, CUgraph*))                                   \
  X(cuGraphInstantiate, "cuGraphInstantiateWithFlags", CUresult(CUgraphExec*, CUgraph, unsigned long long))   \
  X(cuGraphLaunch, "cuGraphLaunch", CUresult(CUgraphExec, CUstream))                                          \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", CUresult(CUgraphExec))                                          \
  X(cuGraphDestroy, "cuGraphDestroy", CUresult(CUgraph))

// Entry points a driver may lack (null then): the graph ones, and
// cuLaunchKernelEx (CUDA 11.8), without which every kernel is launched the
// ordinary way.
#define POOT_CU_OPTIONAL_FNS(X) \
  POOT_CU_GRAPH_FNS(X)          \
  X(cuLaunchKernelEx, "cuLaunchKernelEx", CUresult(const CUlaunchConfig*, CUfunction, void**, void**))

#define POOT_CU_DECLARE(name, symbol, signature) std::add_pointer_t<signature> name = nullptr;

struct Fns {
  POOT_CU_FNS(POOT_CU_DECLARE)
  POOT_CU_OPTIONAL_FNS(POOT_CU_DECLARE)  // null where the driver lacks them
};

Error unavailable(const std::string& why) {
  Error e = makeError(ErrorKind::Capability, {}, "cuda is not available: " + why);
  e.capability = "Cuda";
  return e;
}

Error capability(const char* kind, std::string msg) {
  Error e = makeError(ErrorKind::Capability, {}, std::move(msg));
  e.capability = kind;
  return e;
}

// "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected".
std::string describe(const Fns& f, CUresult r) {
  const char* name = nullptr;
  if (f.cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) return "CUresult " + std::to_string(r);
  const char* text = nullptr;
  if (f.cuGetErrorString(r, &text) != CUDA_SUCCESS || !text) return name;
  return std::string(name) + ": " + text;
}

Error failed(const Fns& f, const std::string& call, CUresult r) {
  return makeError(ErrorKind::Io, {}, "cuda: " + call + " failed (" + describe(f, r) + ")");
}

// The entry points `symbol` resolves, and cuInit: a missing required one is
// a Capability error, a missing optional one stays null.
Expected<Fns> openDriver(const CudaSymbols& symbol) {
  Fns f;
#define POOT_CU_LOAD(name, symbolName, signature)                                  \
  f.name = reinterpret_cast<std::add_pointer_t<signature>>(symbol(symbolName)); \
  if (!f.name) return unavailable("libcuda.so.1 has no " symbolName " (the driver is too old)");
  POOT_CU_FNS(POOT_CU_LOAD)
#undef POOT_CU_LOAD
#define POOT_CU_LOAD_OPTIONAL(name, symbolName, signature) \
  f.name = reinterpret_cast<std::add_pointer_t<signature>>(symbol(symbolName));
  POOT_CU_OPTIONAL_FNS(POOT_CU_LOAD_OPTIONAL)
#undef POOT_CU_LOAD_OPTIONAL
  if (CUresult r = f.cuInit(0); r != CUDA_SUCCESS) return unavailable("cuInit failed (" + describe(f, r) + ")");
  return f;
}

// libcuda.so.1's entry points, loaded and initialized by the first backend
// and kept until exit, like the library.
Expected<Fns> loadDriver() {
  static std::mutex mutex;
  static std::optional<Fns> shared;
  std::lock_guard<std::mutex> lock(mutex);
  if (shared) return *shared;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib) return unavailable(std::string("cannot load libcuda.so.1 (") + dlerror() + ")");
  auto f = openDriver([lib](const char* name) { return dlsym(lib, name); });
  if (!f) return f.error();
  shared = *f;
  return *shared;
}

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct Buf {
  CUdeviceptr ptr = 0;
  int64_t bytes = 0;  // as allocated, rounded
};

struct Kern {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  std::string entry;
  int64_t workgroupSize = 0;
  int64_t dynamicShared = 0;  // bytes each launch passes
  int bindings = 0;
  bool dependent = false;     // launched as a programmatic dependent launch
};

struct Launch {
  KernelId kernel = -1;
  unsigned grid[3] = {1, 1, 1};
  std::vector<CUdeviceptr> args;  // binding i's device address
  std::vector<void*> params;      // &args[i], as cuLaunchKernel takes them (moving keeps args' storage)
};

// A recorded program: its graph, or (without replay) its launches; a
// profiled one its launches and an event to record after each.
struct Prog {
  CUgraphExec graph = nullptr;
  std::vector<Launch> launches;
  std::vector<CUevent> after;
};

class CudaBackend final : public Backend {
 public:
  ~CudaBackend() override;

  Status init(const CudaOptions& opts, Expected<Fns> driver);

  const DeviceInfo& info() const override { return info_; }
  Expected<BufferId> allocate(int64_t bytes) override;
  Status upload(BufferId buffer, int64_t offset, const void* data, int64_t bytes) override;
  Status download(BufferId buffer, int64_t offset, void* data, int64_t bytes) override;
  Status copy(BufferId src, BufferId dst, int64_t bytes) override;
  Expected<KernelId> createKernel(const std::vector<uint8_t>& blob, const std::string& entry, int64_t workgroupSize,
                                  int64_t workgroupMemory, int bindings, bool waitsForPrevious) override;
  Expected<ProgramId> record(const std::vector<DispatchCommand>& dispatches) override;
  Status run(ProgramId program) override;
  std::optional<double> lastRunDeviceSeconds() const override { return lastRun_; }
  Expected<ProgramId> recordProfiled(const std::vector<DispatchCommand>& dispatches) override;
  std::vector<double> lastRunDispatchSeconds() const override { return lastDispatches_; }
  Expected<KernelStats> kernelStats(KernelId kernel) override;
  Submission submission() const override { return replay_ ? Submission::Replay : Submission::InOrder; }
  std::optional<Error> replayFallback() const override { return replayFallback_; }

 private:
  Status pickDevice(const CudaOptions& opts);
  Status readInfo();
  Expected<int64_t> attribute(int attr, const char* what);
  Status current();
  Status checkRange(BufferId buffer, int64_t offset, int64_t bytes) const;
  Expected<std::vector<Launch>> launches(const std::vector<DispatchCommand>& dispatches);
  Status launch(const Launch& l, bool dependent);
  Expected<CUgraphExec> capture(const std::vector<Launch>& launches);

  Fns f_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;  // the device's primary context, retained
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, stop_ = nullptr;  // around each run's launches
  std::optional<double> lastRun_;
  std::vector<double> lastDispatches_;
  bool replay_ = false;                 // programs are captured as graphs
  std::optional<Error> replayFallback_;  // why not, when replay was asked for
  DeviceInfo info_;
  std::vector<Buf> buffers_;
  std::vector<Kern> kernels_;
  std::vector<Prog> programs_;
};

CudaBackend::~CudaBackend() {
  if (!context_) return;
  // Failures are ignored: a context with a sticky error (a faulting kernel)
  // refuses these calls, and releasing the primary context frees all anyway.
  f_.cuCtxSetCurrent(context_);
  if (stream_) {
    f_.cuStreamSynchronize(stream_);
    f_.cuStreamDestroy(stream_);
  }
  for (CUevent e : {start_, stop_})
    if (e) f_.cuEventDestroy(e);
  for (Prog& p : programs_) {
    if (p.graph) f_.cuGraphExecDestroy(p.graph);
    for (CUevent e : p.after) f_.cuEventDestroy(e);
  }
  for (Kern& k : kernels_) f_.cuModuleUnload(k.module);
  for (Buf& b : buffers_) f_.cuMemFree(b.ptr);
  f_.cuDevicePrimaryCtxRelease(device_);
}

Status CudaBackend::init(const CudaOptions& opts, Expected<Fns> driver) {
  if (!driver) return driver.error();
  f_ = *driver;
  if (opts.replay) {
    const char* missing = nullptr;
#define POOT_CU_MISSING(name, symbol, signature) \
  if (!f_.name && !missing) missing = symbol;
    POOT_CU_GRAPH_FNS(POOT_CU_MISSING)
#undef POOT_CU_MISSING
    replay_ = !missing;
    if (missing)
      replayFallback_ =
          capability("GraphReplay", std::string("cuda graph replay is not available: libcuda.so.1 has no ") + missing +
                                        " (a driver older than cuda 11.4); dispatches are launched in order");
  }
  if (auto s = pickDevice(opts); !s) return s;
  if (CUresult r = f_.cuDevicePrimaryCtxRetain(&context_, device_); r != CUDA_SUCCESS) {
    context_ = nullptr;
    return failed(f_, "cuDevicePrimaryCtxRetain", r);
  }
  if (auto s = current(); !s) return s;
  if (auto s = readInfo(); !s) return s;
  if (CUresult r = f_.cuStreamCreate(&stream_, 0); r != CUDA_SUCCESS) {
    stream_ = nullptr;
    return failed(f_, "cuStreamCreate", r);
  }
  for (CUevent* e : {&start_, &stop_})
    if (CUresult r = f_.cuEventCreate(e, 0); r != CUDA_SUCCESS) {
      *e = nullptr;
      return failed(f_, "cuEventCreate", r);
    }
  return ok();
}

Status CudaBackend::pickDevice(const CudaOptions& opts) {
  int n = 0;
  if (CUresult r = f_.cuDeviceGetCount(&n); r != CUDA_SUCCESS) return failed(f_, "cuDeviceGetCount", r);
  if (n == 0) return unavailable("the driver lists no cuda device");
  std::vector<std::string> names(size_t(n), "");
  for (int i = 0; i < n; ++i) {
    CUdevice d = 0;
    char name[256] = {};
    if (CUresult r = f_.cuDeviceGet(&d, i); r != CUDA_SUCCESS) return failed(f_, "cuDeviceGet", r);
    if (CUresult r = f_.cuDeviceGetName(name, int(sizeof name), d); r != CUDA_SUCCESS)
      return failed(f_, "cuDeviceGetName", r);
    names[size_t(i)] = name;
  }

  std::string want = opts.device;
  if (want.empty())
    if (const char* env = std::getenv("POOT_CUDA_DEVICE")) want = env;
  auto chosen = pickDeviceByName(names, want, "nvidia", "cuda");
  if (!chosen) return chosen.error();
  if (CUresult r = f_.cuDeviceGet(&device_, *chosen); r != CUDA_SUCCESS) return failed(f_, "cuDeviceGet", r);
  info_.name = names[size_t(*chosen)];
  return ok();
}

Expected<int64_t> CudaBackend::attribute(int attr, const char* what) {
  int v = 0;
  if (CUresult r = f_.cuDeviceGetAttribute(&v, attr, device_); r != CUDA_SUCCESS)
    return failed(f_, std::string("cuDeviceGetAttribute(") + what + ")", r);
  return int64_t(v);
}

Status CudaBackend::readInfo() {
  struct Want {
    int attr;
    const char* what;
    int64_t value = 0;
  };
  Want want[] = {{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major"},
                 {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor"},
                 {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count"},
                 {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "max shared memory per block opt-in"},
                 {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block"},
                 {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, "max block dim x"},
                 {CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size"},
                 {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "max grid dim x"},
                 {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, "max grid dim y"},
                 {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, "max grid dim z"}};
  for (Want& w : want) {
    auto v = attribute(w.attr, w.what);
    if (!v) return v.error();
    w.value = *v;
  }
  auto [major, minor, units, shared, threads, blockX, warp, gridX, gridY, gridZ] = want;
  size_t memory = 0;
  if (CUresult r = f_.cuDeviceTotalMem(&memory, device_); r != CUDA_SUCCESS)
    return failed(f_, "cuDeviceTotalMem", r);
  int version = 0;
  if (CUresult r = f_.cuDriverGetVersion(&version); r != CUDA_SUCCESS) return failed(f_, "cuDriverGetVersion", r);

  info_.slug = cudaSlug(info_.name);
  info_.target = Target::Ptx;
  info_.arch = "sm_" + std::to_string(major.value) + std::to_string(minor.value);
  info_.driver = "cuda " + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
  info_.computeUnits = units.value;
  info_.workgroupMemoryBytes = shared.value;
  info_.maxWorkgroupSize = std::min(threads.value, blockX.value);
  info_.subgroupSize = warp.value;
  info_.gridLimits[0] = gridX.value;
  info_.gridLimits[1] = gridY.value;
  info_.gridLimits[2] = gridZ.value;
  info_.memoryBytes = int64_t(memory);
  info_.maxBindingBytes = int64_t(memory);
  info_.bindingAlignment = 256;
  info_.maxBindings = kMaxParamBytes / int64_t(sizeof(CUdeviceptr));
  // NVPTX loads, stores, converts and selects both types on every
  // architecture; the arithmetic is listed where the hardware has it
  // (f16 from sm_53, bf16 from sm_80).
  int cc = int(major.value * 10 + minor.value);
  info_.f16 = {true, cc >= 53, true};
  info_.bf16 = {true, cc >= 80, true};
  // mma.sync on bf16, f16 and tf32 operands: sm_80 and newer; wgmma on
  // bf16 and f16 only in sm_90a, the arch-specific PTX of compute
  // capability 9.0, which the arch then names.
  if (cc >= 80) info_.matrixOps = {MatrixOp::M16N8K16Bf16, MatrixOp::M16N8K16F16, MatrixOp::M16N8K8Tf32};
  if (cc == 90) {
    info_.arch = "sm_90a";
    info_.matrixOps.insert(info_.matrixOps.begin(), {MatrixOp::M64NK16Bf16, MatrixOp::M64NK16F16});
  }
  return ok();
}

Status CudaBackend::current() {
  if (CUresult r = f_.cuCtxSetCurrent(context_); r != CUDA_SUCCESS) return failed(f_, "cuCtxSetCurrent", r);
  return ok();
}

Expected<BufferId> CudaBackend::allocate(int64_t bytes) {
  if (auto s = current(); !s) return s.error();
  Buf b;
  b.bytes = roundUp(std::max<int64_t>(bytes, 1), 256);
  if (CUresult r = f_.cuMemAlloc(&b.ptr, size_t(b.bytes)); r != CUDA_SUCCESS) {
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
      return capability("MemoryBudget",
                        "cannot allocate a buffer of " + std::to_string(bytes) + " bytes on " + info_.name);
    return failed(f_, "cuMemAlloc", r);
  }
  buffers_.push_back(b);
  return BufferId(buffers_.size() - 1);
}

Status CudaBackend::checkRange(BufferId buffer, int64_t offset, int64_t bytes) const {
  return checkBufferRange("cuda", buffers_, buffer, offset, bytes);
}

Status CudaBackend::upload(BufferId buffer, int64_t offset, const void* data, int64_t bytes) {
  if (auto s = checkRange(buffer, offset, bytes); !s) return s;
  if (bytes == 0) return ok();
  if (auto s = current(); !s) return s;
  CUdeviceptr dst = buffers_[size_t(buffer)].ptr + CUdeviceptr(offset);
  if (CUresult r = f_.cuMemcpyHtoD(dst, data, size_t(bytes)); r != CUDA_SUCCESS) return failed(f_, "cuMemcpyHtoD", r);
  return ok();
}

Status CudaBackend::download(BufferId buffer, int64_t offset, void* data, int64_t bytes) {
  if (auto s = checkRange(buffer, offset, bytes); !s) return s;
  if (bytes == 0) return ok();
  if (auto s = current(); !s) return s;
  CUdeviceptr src = buffers_[size_t(buffer)].ptr + CUdeviceptr(offset);
  if (CUresult r = f_.cuMemcpyDtoH(data, src, size_t(bytes)); r != CUDA_SUCCESS) return failed(f_, "cuMemcpyDtoH", r);
  return ok();
}

Status CudaBackend::copy(BufferId src, BufferId dst, int64_t bytes) {
  if (auto s = checkRange(src, 0, bytes); !s) return s;
  if (auto s = checkRange(dst, 0, bytes); !s) return s;
  if (bytes == 0) return ok();
  if (auto s = current(); !s) return s;
  // A device-to-device copy does not wait for itself.
  if (CUresult r = f_.cuMemcpyDtoD(buffers_[size_t(dst)].ptr, buffers_[size_t(src)].ptr, size_t(bytes));
      r != CUDA_SUCCESS)
    return failed(f_, "cuMemcpyDtoD", r);
  if (CUresult r = f_.cuCtxSynchronize(); r != CUDA_SUCCESS) return failed(f_, "cuCtxSynchronize", r);
  return ok();
}

Expected<KernelId> CudaBackend::createKernel(const std::vector<uint8_t>& blob, const std::string& entry,
                                             int64_t workgroupSize, int64_t workgroupMemory, int bindings,
                                             bool waitsForPrevious) {
  if (blob.empty() || std::find(blob.begin(), blob.end(), uint8_t(0)) != blob.end())
    return makeError(ErrorKind::Format, {}, "kernel '" + entry + "' is not ptx text (" +
                                                std::to_string(blob.size()) + " bytes)");
  if (auto s = checkKernelLimits(info_, entry, workgroupSize, workgroupMemory); !s) return s.error();
  if (auto s = current(); !s) return s.error();

  Kern k;
  k.entry = entry;
  k.workgroupSize = workgroupSize;
  k.bindings = bindings;
  k.dependent = waitsForPrevious && f_.cuLaunchKernelEx;
  const std::string ptx(blob.begin(), blob.end());  // c_str() is the NUL-terminated image
  char log[16384] = {};
  int options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log, reinterpret_cast<void*>(uintptr_t(sizeof log))};
  if (CUresult r = f_.cuModuleLoadDataEx(&k.module, ptx.c_str(), 2, options, values); r != CUDA_SUCCESS) {
    Error e = failed(f_, "cuModuleLoadDataEx for kernel '" + entry + "'", r);
    std::string text(log, strnlen(log, sizeof log));
    while (!text.empty() && std::isspace(uint8_t(text.back()))) text.pop_back();
    if (!text.empty()) e.message += ": " + text;
    return e;
  }
  auto release = [&](Error e) {
    f_.cuModuleUnload(k.module);
    return e;
  };
  if (CUresult r = f_.cuModuleGetFunction(&k.function, k.module, entry.c_str()); r != CUDA_SUCCESS)
    return release(failed(f_, "cuModuleGetFunction for '" + entry + "'", r));
  // Registers can hold a function below the device's block size.
  int maxThreads = 0;
  if (CUresult r = f_.cuFuncGetAttribute(&maxThreads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k.function);
      r != CUDA_SUCCESS)
    return release(failed(f_, "cuFuncGetAttribute for '" + entry + "'", r));
  if (workgroupSize > maxThreads)
    return release(capability("WorkgroupSize", "kernel '" + entry + "' runs " + std::to_string(workgroupSize) +
                                                   " threads a workgroup, its registers allow " +
                                                   std::to_string(maxThreads) + " on " + info_.name));
  if (workgroupMemory > kStaticSharedBytes) {
    k.dynamicShared = workgroupMemory;
    if (CUresult r = f_.cuFuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            int(workgroupMemory));
        r != CUDA_SUCCESS)
      return release(failed(f_, "cuFuncSetAttribute(max dynamic shared size) for '" + entry + "'", r));
  }
  kernels_.push_back(std::move(k));
  return KernelId(kernels_.size() - 1);
}

// What the function's attributes say, and its occupancy at its block size
// with the dynamic shared memory its launches pass.
Expected<KernelStats> CudaBackend::kernelStats(KernelId kernel) {
  if (kernel < 0 || size_t(kernel) >= kernels_.size())
    return makeError(ErrorKind::Io, {}, "cuda: no kernel " + std::to_string(kernel));
  if (auto s = current(); !s) return s.error();
  const Kern& k = kernels_[size_t(kernel)];
  auto check = [&](CUresult r, const std::string& call) -> Status {
    if (r != CUDA_SUCCESS) return failed(f_, call + " for '" + k.entry + "'", r);
    return ok();
  };
  return functionStats(
      "CU_FUNC_ATTRIBUTE_", k.dynamicShared,
      [&](int* value, int attr, const std::string& name) {
        return check(f_.cuFuncGetAttribute(value, attr, k.function), "cuFuncGetAttribute(" + name + ")");
      },
      [&](int* blocks) {
        return check(f_.cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, k.function, int(k.workgroupSize),
                                                                    size_t(k.dynamicShared)),
                     "cuOccupancyMaxActiveBlocksPerMultiprocessor");
      });
}

Expected<std::vector<Launch>> CudaBackend::launches(const std::vector<DispatchCommand>& dispatches) {
  std::vector<Launch> launches;
  for (const DispatchCommand& d : dispatches) {
    if (auto s = checkDispatch("cuda", d, kernels_, buffers_, info_.bindingAlignment); !s) return s.error();
    Launch l;
    l.kernel = d.kernel;
    for (int i = 0; i < 3; ++i) l.grid[i] = unsigned(d.grid[i]);
    for (const BufferRange& b : d.bindings) l.args.push_back(buffers_[size_t(b.buffer)].ptr + CUdeviceptr(b.offset));
    for (CUdeviceptr& a : l.args) l.params.push_back(&a);
    launches.push_back(std::move(l));
  }
  return launches;
}

Expected<ProgramId> CudaBackend::record(const std::vector<DispatchCommand>& dispatches) {
  auto launched = launches(dispatches);
  if (!launched) return launched.error();
  Prog p;
  if (replay_ && !launched->empty()) {
    auto graph = capture(*launched);
    if (!graph) return graph.error();
    p.graph = *graph;
  } else {
    p.launches = launched.take();
  }
  programs_.push_back(std::move(p));
  return ProgramId(programs_.size() - 1);
}

Expected<ProgramId> CudaBackend::recordProfiled(const std::vector<DispatchCommand>& dispatches) {
  auto launched = launches(dispatches);
  if (!launched) return launched.error();
  if (auto s = current(); !s) return s.error();
  Prog p;
  p.launches = launched.take();
  for (size_t i = 0; i < p.launches.size(); ++i) {
    CUevent e = nullptr;
    if (CUresult r = f_.cuEventCreate(&e, 0); r != CUDA_SUCCESS) {
      for (CUevent made : p.after) f_.cuEventDestroy(made);
      return failed(f_, "cuEventCreate", r);
    }
    p.after.push_back(e);
  }
  programs_.push_back(std::move(p));
  return ProgramId(programs_.size() - 1);
}

// One launch on the stream, which orders it after the ones before: a
// kernel that waits for them in its own code as a programmatic dependent
// launch where `dependent` (the driver may start it while the previous
// kernel finishes; a captured graph keeps that as a programmatic edge), any
// other the ordinary way.
Status CudaBackend::launch(const Launch& l, bool dependent) {
  const Kern& k = kernels_[size_t(l.kernel)];
  void** params = const_cast<void**>(l.params.data());
  if (!dependent || !k.dependent) {
    CUresult r = f_.cuLaunchKernel(k.function, l.grid[0], l.grid[1], l.grid[2], unsigned(k.workgroupSize), 1, 1,
                                   unsigned(k.dynamicShared), stream_, params, nullptr);
    if (r != CUDA_SUCCESS) return failed(f_, "cuLaunchKernel for '" + k.entry + "'", r);
    return ok();
  }
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{l.grid[0], l.grid[1], l.grid[2], unsigned(k.workgroupSize), 1, 1,
                        unsigned(k.dynamicShared), stream_, &attr, 1};
  if (CUresult r = f_.cuLaunchKernelEx(&config, k.function, params, nullptr); r != CUDA_SUCCESS)
    return failed(f_, "cuLaunchKernelEx for '" + k.entry + "'", r);
  return ok();
}

// The launches captured from the stream into a graph, instantiated. The
// capture is ended whatever fails, so the stream is never left capturing.
Expected<CUgraphExec> CudaBackend::capture(const std::vector<Launch>& launches) {
  if (auto s = current(); !s) return s.error();
  if (CUresult r = f_.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL); r != CUDA_SUCCESS)
    return failed(f_, "cuStreamBeginCapture", r);
  Status launched = ok();
  for (const Launch& l : launches)
    if (launched) launched = launch(l, true);
  CUgraph graph = nullptr;
  CUresult ended = f_.cuStreamEndCapture(stream_, &graph);
  auto release = [&](Error e) {
    if (graph) f_.cuGraphDestroy(graph);
    return e;
  };
  if (!launched) return release(launched.error());
  if (ended != CUDA_SUCCESS) return release(failed(f_, "cuStreamEndCapture", ended));
  CUgraphExec exec = nullptr;
  if (CUresult r = f_.cuGraphInstantiate(&exec, graph, 0); r != CUDA_SUCCESS)
    return release(failed(f_, "cuGraphInstantiateWithFlags", r));
  // The instantiated graph is independent of the graph it came from.
  f_.cuGraphDestroy(graph);
  return exec;
}

Status CudaBackend::run(ProgramId program) {
  if (program < 0 || size_t(program) >= programs_.size())
    return makeError(ErrorKind::Io, {}, "cuda: no program " + std::to_string(program));
  if (auto s = current(); !s) return s;
  lastRun_.reset();
  lastDispatches_.clear();
  const Prog& p = programs_[size_t(program)];
  if (CUresult r = f_.cuEventRecord(start_, stream_); r != CUDA_SUCCESS) return failed(f_, "cuEventRecord", r);
  if (p.graph) {
    if (CUresult r = f_.cuGraphLaunch(p.graph, stream_); r != CUDA_SUCCESS) return failed(f_, "cuGraphLaunch", r);
  } else {
    const bool profiled = !p.after.empty();
    for (size_t i = 0; i < p.launches.size(); ++i) {
      if (auto s = launch(p.launches[i], !profiled); !s) return s;
      if (profiled)
        if (CUresult r = f_.cuEventRecord(p.after[i], stream_); r != CUDA_SUCCESS) return failed(f_, "cuEventRecord", r);
    }
  }
  if (CUresult r = f_.cuEventRecord(stop_, stream_); r != CUDA_SUCCESS) return failed(f_, "cuEventRecord", r);
  // A kernel that faults is reported here, by the wait.
  if (CUresult r = f_.cuStreamSynchronize(stream_); r != CUDA_SUCCESS) return failed(f_, "cuStreamSynchronize", r);
  float ms = 0;
  if (CUresult r = f_.cuEventElapsedTime(&ms, start_, stop_); r != CUDA_SUCCESS)
    return failed(f_, "cuEventElapsedTime", r);
  lastRun_ = double(ms) * 1e-3;
  for (size_t i = 0; i < p.after.size(); ++i) {
    if (CUresult r = f_.cuEventElapsedTime(&ms, i == 0 ? start_ : p.after[i - 1], p.after[i]); r != CUDA_SUCCESS)
      return failed(f_, "cuEventElapsedTime", r);
    lastDispatches_.push_back(double(ms) * 1e-3);
  }
  return ok();
}

}  // namespace

std::string cudaSlug(const std::string& name) { return deviceSlug(name, "nvidia"); }

Expected<std::unique_ptr<Backend>> createCudaBackend(const CudaOptions& opts) {
  auto b = std::make_unique<CudaBackend>();
  if (auto s = b->init(opts, loadDriver()); !s) return s.error();
  return std::unique_ptr<Backend>(std::move(b));
}

Expected<std::unique_ptr<Backend>> createCudaBackend(const CudaOptions& opts, const CudaSymbols& symbols) {
  auto b = std::make_unique<CudaBackend>();
  if (auto s = b->init(opts, openDriver(symbols)); !s) return s.error();
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace poot::rt

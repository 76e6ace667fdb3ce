// The HIP backend, built like the CUDA one (cuda.cpp). No ROCm header is
// needed to build it: the handles, the few enum values and the entry points
// it uses are declared below as the HIP runtime API reference gives them,
// and the runtime (libamdhip64.so, else its .7, .6 or .5 soname) is
// dlopen'ed once per process and hipInit'ed. Creation picks a device (an
// ordinal or a name piece from the options or POOT_HIP_DEVICE, else device
// 0), makes it current and creates one stream and two events. Buffers are
// hipMalloc'ed, rounded up to 256 bytes; upload and download are
// synchronous copies at an offset; copy is a device copy followed by a
// device synchronize. Each entry point makes the backend's device current
// first (hipSetDevice), so a backend works from any thread.
//
// The device's arch. hipDeviceGetAttribute has no attribute for the gfx
// name, so it is read from the device properties, whose struct changed
// layout between ROCm 5 and 6; the backend calls only the entry point that
// names its layout, hipGetDevicePropertiesR0600 (ROCm 6.0 and newer; the
// plain hipGetDeviceProperties follows whichever header a program was built
// with), reads the few fields it needs at their offsets in that layout, and
// trusts them only when the device name, warp size, threads per block and
// multiprocessor count found there agree with what hipDeviceGetName and
// hipDeviceGetAttribute say, and the arch name is a NUL-terminated "gfx..."
// string. Otherwise, or without that entry point (ROCm 5), the backend
// refuses to open (Capability "Hip"): it never guesses an arch.
// gcnArchName carries the target features after the arch
// ("gfx942:sramecc+:xnack-"); DeviceInfo::arch is the part before them.
//
// Kernels. Before the runtime sees a blob, the backend checks that it is an
// AMDGPU HSACO code object naming the kernel's descriptor (kernel_blob.h)
// and that its ELF header's machine (the EF_AMDGPU_MACH field of e_flags)
// is the device's gfx arch, and, for code object v4 and newer, that its
// xnack and sramecc settings do not contradict the device's: a plan for
// another arch is a Capability "Device" error naming both. The Session
// checks the target and the device name; the arch is checked here because
// the code object is what the runtime would load. The module is then
// hipModuleLoadData'ed and its function looked up; HSACO kernels declare
// their LDS statically, so every launch passes 0 bytes of dynamic shared
// memory. kernelStats() reads the function's registers, private (scratch)
// bytes a work-item and static LDS bytes (hipFuncGetAttribute) and the
// workgroups a CU holds at its workgroup size
// (hipModuleOccupancyMaxActiveBlocksPerMultiprocessor). A launch is
// hipModuleLaunchKernel with block = workgroup size threads in x, grid =
// the dispatch's grid in workgroups, and one pointer parameter per binding.
//
// Replay works as the CUDA backend's: where the runtime has the six graph
// entry points of POOT_HIP_GRAPH_FNS and HipOptions::replay asks for it,
// record() captures the launches of an in-order run from the stream
// (thread-local capture mode) and instantiates the graph, and run() submits
// it with one hipGraphLaunch; without them every run launches in order and
// replayFallback() says why, once, as a Capability "GraphReplay" error.
// run() records the start and stop events around what it submits and waits
// for the stream, so lastRunDeviceSeconds() is the events' span either way.
// AMD has no dependent launches: waitsForPrevious is only later, never
// wrong, so it is ignored.
#include "runtime/backends/hip.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <type_traits>

#include "runtime/backends/common.h"
#include "runtime/kernel_blob.h"

namespace poot::rt {

namespace {

// HIP runtime API types.
using hipError_t = int;
using hipDevice_t = int;
using hipDeviceptr_t = void*;
using hipModule_t = struct ihipModule_t*;
using hipFunction_t = struct ihipModuleSymbol_t*;
using hipStream_t = struct ihipStream_t*;
using hipEvent_t = struct ihipEvent_t*;
using hipGraph_t = struct ihipGraph*;
using hipGraphExec_t = struct hipGraphExec*;

// hipError_t values.
constexpr hipError_t hipSuccess = 0;
constexpr hipError_t hipErrorOutOfMemory = 2;

// hipDeviceAttribute_t values.
constexpr int hipDeviceAttributeMaxBlockDimX = 26;
constexpr int hipDeviceAttributeMaxGridDimX = 29;
constexpr int hipDeviceAttributeMaxGridDimY = 30;
constexpr int hipDeviceAttributeMaxGridDimZ = 31;
constexpr int hipDeviceAttributeMaxThreadsPerBlock = 56;
constexpr int hipDeviceAttributeMultiprocessorCount = 63;
constexpr int hipDeviceAttributeMaxSharedMemoryPerBlock = 74;
constexpr int hipDeviceAttributeWarpSize = 87;

// hipFunction_attribute values.
constexpr int HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;

// hipStreamCaptureMode values.
constexpr int hipStreamCaptureModeThreadLocal = 1;

// hipDeviceProp_tR0600: its size and the offsets of the fields read.
constexpr size_t kPropsBytes = 1472;
constexpr size_t kPropName = 0, kPropWarpSize = 308, kPropMaxThreadsPerBlock = 320,
                 kPropMultiProcessorCount = 388, kPropGcnArchName = 1160, kPropStringBytes = 256;
static_assert(kPropGcnArchName + kPropStringBytes <= kPropsBytes);

// The HSA dispatch packet counts the grid in work-items, 32 bits an axis.
constexpr int64_t kMaxGridWorkItems = 4294967295;

// Kernel arguments HIP takes; each binding is one pointer among them.
constexpr int64_t kMaxParamBytes = 4096;

// Entry point, exported symbol, signature.
#define POOT_HIP_FNS(X)                                                                                       \
  X(hipGetErrorName, "hipGetErrorName", const char*(hipError_t))                                             \
  X(hipGetErrorString, "hipGetErrorString", const char*(hipError_t))                                         \
  X(hipInit, "hipInit", hipError_t(unsigned))                                                                \
  X(hipDriverGetVersion, "hipDriverGetVersion", hipError_t(int*))                                            \
  X(hipGetDeviceCount, "hipGetDeviceCount", hipError_t(int*))                                                \
  X(hipDeviceGet, "hipDeviceGet", hipError_t(hipDevice_t*, int))                                             \
  X(hipDeviceGetName, "hipDeviceGetName", hipError_t(char*, int, hipDevice_t))                               \
  X(hipDeviceGetAttribute, "hipDeviceGetAttribute", hipError_t(int*, int, int))                              \
  X(hipDeviceTotalMem, "hipDeviceTotalMem", hipError_t(size_t*, hipDevice_t))                                \
  X(hipGetDeviceProperties, "hipGetDevicePropertiesR0600", hipError_t(void*, int))                           \
  X(hipSetDevice, "hipSetDevice", hipError_t(int))                                                           \
  X(hipDeviceSynchronize, "hipDeviceSynchronize", hipError_t())                                              \
  X(hipStreamCreate, "hipStreamCreate", hipError_t(hipStream_t*))                                            \
  X(hipStreamDestroy, "hipStreamDestroy", hipError_t(hipStream_t))                                           \
  X(hipStreamSynchronize, "hipStreamSynchronize", hipError_t(hipStream_t))                                   \
  X(hipEventCreate, "hipEventCreate", hipError_t(hipEvent_t*))                                               \
  X(hipEventDestroy, "hipEventDestroy", hipError_t(hipEvent_t))                                              \
  X(hipEventRecord, "hipEventRecord", hipError_t(hipEvent_t, hipStream_t))                                   \
  X(hipEventElapsedTime, "hipEventElapsedTime", hipError_t(float*, hipEvent_t, hipEvent_t))                  \
  X(hipMalloc, "hipMalloc", hipError_t(void**, size_t))                                                      \
  X(hipFree, "hipFree", hipError_t(void*))                                                                   \
  X(hipMemcpyHtoD, "hipMemcpyHtoD", hipError_t(hipDeviceptr_t, void*, size_t))                               \
  X(hipMemcpyDtoH, "hipMemcpyDtoH", hipError_t(void*, hipDeviceptr_t, size_t))                               \
  X(hipMemcpyDtoD, "hipMemcpyDtoD", hipError_t(hipDeviceptr_t, hipDeviceptr_t, size_t))                      \
  X(hipModuleLoadData, "hipModuleLoadData", hipError_t(hipModule_t*, const void*))                           \
  X(hipModuleUnload, "hipModuleUnload", hipError_t(hipModule_t))                                             \
  X(hipModuleGetFunction, "hipModuleGetFunction", hipError_t(hipFunction_t*, hipModule_t, const char*))      \
  X(hipFuncGetAttribute, "hipFuncGetAttribute", hipError_t(int*, int, hipFunction_t))                        \
  X(hipModuleOccupancyMaxActiveBlocksPerMultiprocessor, "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor",  \
    hipError_t(int*, hipFunction_t, int, size_t))                                                            \
  X(hipModuleLaunchKernel, "hipModuleLaunchKernel",                                                          \
    hipError_t(hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,          \
               hipStream_t, void**, void**))

// HIP graphs: replay needs all of them; a runtime without them launches in
// order.
#define POOT_HIP_GRAPH_FNS(X)                                                                                 \
  X(hipStreamBeginCapture, "hipStreamBeginCapture", hipError_t(hipStream_t, int))                            \
  X(hipStreamEndCapture, "hipStreamEndCapture", hipError_t(hipStream_t, hipGraph_t*))                        \
  X(hipGraphInstantiate, "hipGraphInstantiateWithFlags",                                                     \
    hipError_t(hipGraphExec_t*, hipGraph_t, unsigned long long))                                             \
  X(hipGraphLaunch, "hipGraphLaunch", hipError_t(hipGraphExec_t, hipStream_t))                               \
  X(hipGraphExecDestroy, "hipGraphExecDestroy", hipError_t(hipGraphExec_t))                                  \
  X(hipGraphDestroy, "hipGraphDestroy", hipError_t(hipGraph_t))

#define POOT_HIP_DECLARE(name, symbol, signature) std::add_pointer_t<signature> name = nullptr;

struct Fns {
  POOT_HIP_FNS(POOT_HIP_DECLARE)
  POOT_HIP_GRAPH_FNS(POOT_HIP_DECLARE)  // null where the runtime lacks them
};

Error capability(const char* kind, std::string msg) {
  Error e = makeError(ErrorKind::Capability, {}, std::move(msg));
  e.capability = kind;
  return e;
}

Error unavailable(const std::string& why) { return capability("Hip", "hip is not available: " + why); }

// "hipErrorNoDevice: no ROCm-capable device is detected".
std::string describe(const Fns& f, hipError_t r) {
  const char* name = f.hipGetErrorName(r);
  if (!name) return "hipError_t " + std::to_string(r);
  const char* text = f.hipGetErrorString(r);
  return text ? std::string(name) + ": " + text : std::string(name);
}

Error failed(const Fns& f, const std::string& call, hipError_t r) {
  return makeError(ErrorKind::Io, {}, "hip: " + call + " failed (" + describe(f, r) + ")");
}

// The entry points `symbol` resolves, and hipInit: a missing required one is
// a Capability error, a missing graph one stays null.
Expected<Fns> openRuntime(const HipSymbols& symbol) {
  Fns f;
#define POOT_HIP_LOAD(name, symbolName, signature)                                 \
  f.name = reinterpret_cast<std::add_pointer_t<signature>>(symbol(symbolName)); \
  if (!f.name) return unavailable("the hip runtime has no " symbolName " (poot needs rocm 6.0 or newer)");
  POOT_HIP_FNS(POOT_HIP_LOAD)
#undef POOT_HIP_LOAD
#define POOT_HIP_LOAD_OPTIONAL(name, symbolName, signature) \
  f.name = reinterpret_cast<std::add_pointer_t<signature>>(symbol(symbolName));
  POOT_HIP_GRAPH_FNS(POOT_HIP_LOAD_OPTIONAL)
#undef POOT_HIP_LOAD_OPTIONAL
  if (hipError_t r = f.hipInit(0); r != hipSuccess) return unavailable("hipInit failed (" + describe(f, r) + ")");
  return f;
}

// The runtime's entry points, loaded and initialized by the first backend
// and kept until exit, like the library.
Expected<Fns> loadRuntime() {
  static std::mutex mutex;
  static std::optional<Fns> shared;
  std::lock_guard<std::mutex> lock(mutex);
  if (shared) return *shared;
  void* lib = nullptr;
  std::string why;
  for (const char* soname : {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"}) {
    lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib) break;
    if (why.empty()) why = dlerror();
  }
  if (!lib) return unavailable("cannot load libamdhip64.so (" + why + ")");
  auto f = openRuntime([lib](const char* name) { return dlsym(lib, name); });
  if (!f) return f.error();
  shared = *f;
  return *shared;
}

int64_t roundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// The gfx arch an HSACO object's EF_AMDGPU_MACH field names (the values of
// the AMDGPU ELF ABI), empty for one not listed here.
std::string machArch(uint32_t mach) {
  static const std::map<uint32_t, const char*> arch = {
      {0x02c, "gfx900"},  {0x02f, "gfx906"},  {0x030, "gfx908"},  {0x03f, "gfx90a"},  {0x040, "gfx940"},
      {0x04b, "gfx941"},  {0x04c, "gfx942"},  {0x036, "gfx1030"}, {0x041, "gfx1100"}, {0x046, "gfx1101"},
      {0x047, "gfx1102"}, {0x048, "gfx1200"}, {0x04e, "gfx1201"}};
  auto it = arch.find(mach);
  return it == arch.end() ? std::string() : it->second;
}

// '+' or '-' for `feature` in a gcnArchName ("gfx942:sramecc+:xnack-"), 0
// where it is not listed.
char deviceFeature(const std::string& archName, const std::string& feature) {
  size_t at = archName.find(":" + feature);
  if (at == std::string::npos || at + feature.size() + 1 >= archName.size()) return 0;
  char c = archName[at + feature.size() + 1];
  return c == '+' || c == '-' ? c : 0;
}

struct Buf {
  void* ptr = nullptr;
  int64_t bytes = 0;  // as allocated, rounded
};

struct Kern {
  hipModule_t module = nullptr;
  hipFunction_t function = nullptr;
  std::string entry;
  int64_t workgroupSize = 0;
  int bindings = 0;
};

struct Launch {
  KernelId kernel = -1;
  unsigned grid[3] = {1, 1, 1};
  std::vector<void*> args;    // binding i's device address
  std::vector<void*> params;  // &args[i], as hipModuleLaunchKernel takes them (moving keeps args' storage)
};

// A recorded program: its graph, or (without replay) its launches; a
// profiled one its launches and an event to record after each.
struct Prog {
  hipGraphExec_t graph = nullptr;
  std::vector<Launch> launches;
  std::vector<hipEvent_t> after;
};

class HipBackend final : public Backend {
 public:
  ~HipBackend() override;

  Status init(const HipOptions& opts, Expected<Fns> runtime);

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
  Status pickDevice(const HipOptions& opts);
  Status readInfo();
  Status readArch(int64_t warp, int64_t threads, int64_t units);
  Status checkCodeObject(const std::vector<uint8_t>& blob, const std::string& entry) const;
  Expected<int64_t> attribute(int attr, const char* what);
  Status current();
  Status checkRange(BufferId buffer, int64_t offset, int64_t bytes) const;
  Expected<std::vector<Launch>> launches(const std::vector<DispatchCommand>& dispatches);
  Status launch(const std::vector<Launch>& launches, const std::vector<hipEvent_t>& after = {});
  Expected<hipGraphExec_t> capture(const std::vector<Launch>& launches);

  Fns f_;
  int ordinal_ = -1;  // set once a device is picked
  hipDevice_t device_ = 0;
  std::string archName_;  // gcnArchName, with its target features
  hipStream_t stream_ = nullptr;
  hipEvent_t start_ = nullptr, stop_ = nullptr;  // around each run's launches
  std::optional<double> lastRun_;
  std::vector<double> lastDispatches_;
  bool replay_ = false;                  // programs are captured as graphs
  std::optional<Error> replayFallback_;  // why not, when replay was asked for
  DeviceInfo info_;
  std::vector<Buf> buffers_;
  std::vector<Kern> kernels_;
  std::vector<Prog> programs_;
};

HipBackend::~HipBackend() {
  if (ordinal_ < 0) return;
  // Failures are ignored: after a faulting kernel the runtime may refuse
  // these calls, and the process's exit frees what they would.
  f_.hipSetDevice(ordinal_);
  if (stream_) {
    f_.hipStreamSynchronize(stream_);
    f_.hipStreamDestroy(stream_);
  }
  for (hipEvent_t e : {start_, stop_})
    if (e) f_.hipEventDestroy(e);
  for (Prog& p : programs_) {
    if (p.graph) f_.hipGraphExecDestroy(p.graph);
    for (hipEvent_t e : p.after) f_.hipEventDestroy(e);
  }
  for (Kern& k : kernels_) f_.hipModuleUnload(k.module);
  for (Buf& b : buffers_) f_.hipFree(b.ptr);
}

Status HipBackend::init(const HipOptions& opts, Expected<Fns> runtime) {
  if (!runtime) return runtime.error();
  f_ = *runtime;
  if (opts.replay) {
    const char* missing = nullptr;
#define POOT_HIP_MISSING(name, symbol, signature) \
  if (!f_.name && !missing) missing = symbol;
    POOT_HIP_GRAPH_FNS(POOT_HIP_MISSING)
#undef POOT_HIP_MISSING
    replay_ = !missing;
    if (missing)
      replayFallback_ = capability("GraphReplay", std::string("hip graph replay is not available: the runtime has ") +
                                                      "no " + missing + "; dispatches are launched in order");
  }
  if (auto s = pickDevice(opts); !s) return s;
  if (auto s = current(); !s) return s;
  if (auto s = readInfo(); !s) return s;
  if (hipError_t r = f_.hipStreamCreate(&stream_); r != hipSuccess) {
    stream_ = nullptr;
    return failed(f_, "hipStreamCreate", r);
  }
  for (hipEvent_t* e : {&start_, &stop_})
    if (hipError_t r = f_.hipEventCreate(e); r != hipSuccess) {
      *e = nullptr;
      return failed(f_, "hipEventCreate", r);
    }
  return ok();
}

Status HipBackend::pickDevice(const HipOptions& opts) {
  int n = 0;
  if (hipError_t r = f_.hipGetDeviceCount(&n); r != hipSuccess) return failed(f_, "hipGetDeviceCount", r);
  if (n == 0) return unavailable("the runtime lists no hip device");
  std::vector<std::string> names(size_t(n), "");
  for (int i = 0; i < n; ++i) {
    hipDevice_t d = 0;
    char name[256] = {};
    if (hipError_t r = f_.hipDeviceGet(&d, i); r != hipSuccess) return failed(f_, "hipDeviceGet", r);
    if (hipError_t r = f_.hipDeviceGetName(name, int(sizeof name) - 1, d); r != hipSuccess)
      return failed(f_, "hipDeviceGetName", r);
    names[size_t(i)] = name;
  }
  std::string want = opts.device;
  if (want.empty())
    if (const char* env = std::getenv("POOT_HIP_DEVICE")) want = env;
  auto chosen = pickDeviceByName(names, want, "amd", "hip");
  if (!chosen) return chosen.error();
  if (hipError_t r = f_.hipDeviceGet(&device_, *chosen); r != hipSuccess) return failed(f_, "hipDeviceGet", r);
  ordinal_ = *chosen;
  info_.name = names[size_t(*chosen)];
  return ok();
}

Expected<int64_t> HipBackend::attribute(int attr, const char* what) {
  int v = 0;
  if (hipError_t r = f_.hipDeviceGetAttribute(&v, attr, ordinal_); r != hipSuccess)
    return failed(f_, std::string("hipDeviceGetAttribute(") + what + ")", r);
  return int64_t(v);
}

Status HipBackend::readInfo() {
  struct Want {
    int attr;
    const char* what;
    int64_t value = 0;
  };
  Want want[] = {{hipDeviceAttributeMultiprocessorCount, "multiprocessor count"},
                 {hipDeviceAttributeMaxSharedMemoryPerBlock, "max shared memory per block"},
                 {hipDeviceAttributeMaxThreadsPerBlock, "max threads per block"},
                 {hipDeviceAttributeMaxBlockDimX, "max block dim x"},
                 {hipDeviceAttributeWarpSize, "warp size"},
                 {hipDeviceAttributeMaxGridDimX, "max grid dim x"},
                 {hipDeviceAttributeMaxGridDimY, "max grid dim y"},
                 {hipDeviceAttributeMaxGridDimZ, "max grid dim z"}};
  for (Want& w : want) {
    auto v = attribute(w.attr, w.what);
    if (!v) return v.error();
    w.value = *v;
  }
  auto [units, shared, threads, blockX, warp, gridX, gridY, gridZ] = want;
  if (auto s = readArch(warp.value, threads.value, units.value); !s) return s;
  size_t memory = 0;
  if (hipError_t r = f_.hipDeviceTotalMem(&memory, device_); r != hipSuccess)
    return failed(f_, "hipDeviceTotalMem", r);
  int version = 0;
  if (hipError_t r = f_.hipDriverGetVersion(&version); r != hipSuccess)
    return failed(f_, "hipDriverGetVersion", r);

  info_.slug = hipSlug(info_.name);
  info_.target = Target::Hsaco;
  info_.arch = archName_.substr(0, archName_.find(':'));
  if (hasWaveMatrixOps(info_.arch)) info_.matrixOps = {MatrixOp::M16N16K16Bf16, MatrixOp::M16N16K16F16};
  // HIP numbers versions major * 10^7 + minor * 10^5 + patch.
  info_.driver = "hip " + std::to_string(version / 10000000) + "." + std::to_string(version / 100000 % 100);
  info_.computeUnits = units.value;
  info_.workgroupMemoryBytes = shared.value;
  info_.maxWorkgroupSize = std::min(threads.value, blockX.value);
  info_.subgroupSize = warp.value;
  // A grid of whole workgroups must stay within 2^32 - 1 work-items an axis.
  info_.gridLimits[0] = std::min(gridX.value, kMaxGridWorkItems / std::max<int64_t>(info_.maxWorkgroupSize, 1));
  info_.gridLimits[1] = gridY.value;
  info_.gridLimits[2] = gridZ.value;
  info_.memoryBytes = int64_t(memory);
  info_.maxBindingBytes = int64_t(memory);
  info_.bindingAlignment = 256;
  info_.maxBindings = kMaxParamBytes / int64_t(sizeof(void*));
  // The AMDGPU backend lowers every operation on both types (as listed for
  // gfx942 in targets/amd-mi300x.yaml).
  info_.f16 = {true, true, true};
  info_.bf16 = {true, true, true};
  return ok();
}

// gcnArchName from hipGetDevicePropertiesR0600, trusted only where the
// fields around it agree with the attributes (see the top of this file).
Status HipBackend::readArch(int64_t warp, int64_t threads, int64_t units) {
  std::vector<char> props(2 * kPropsBytes, 0);  // twice the struct: a larger one would not overrun
  if (hipError_t r = f_.hipGetDeviceProperties(props.data(), ordinal_); r != hipSuccess)
    return failed(f_, "hipGetDevicePropertiesR0600", r);
  auto field = [&](size_t at) {
    int32_t v;
    std::memcpy(&v, props.data() + at, sizeof v);
    return int64_t(v);
  };
  auto text = [&](size_t at) -> std::optional<std::string> {
    const char* s = props.data() + at;
    size_t n = strnlen(s, kPropStringBytes);
    if (n == kPropStringBytes) return std::nullopt;
    return std::string(s, n);
  };
  auto name = text(kPropName);
  auto arch = text(kPropGcnArchName);
  std::string disagrees;
  if (name != info_.name) disagrees = "its name is not hipDeviceGetName's";
  else if (field(kPropWarpSize) != warp) disagrees = "its warp size is not the attribute's";
  else if (field(kPropMaxThreadsPerBlock) != threads) disagrees = "its threads per block are not the attribute's";
  else if (field(kPropMultiProcessorCount) != units) disagrees = "its multiprocessor count is not the attribute's";
  else if (!arch || arch->rfind("gfx", 0) != 0 || arch->size() == 3) disagrees = "its gcnArchName is not a gfx arch";
  if (!disagrees.empty())
    return unavailable("the device properties of '" + info_.name + "' are not laid out as hipDeviceProp_tR0600 (" +
                       disagrees + "), so its gfx arch is unknown");
  archName_ = *arch;
  return ok();
}

Status HipBackend::current() {
  if (hipError_t r = f_.hipSetDevice(ordinal_); r != hipSuccess) return failed(f_, "hipSetDevice", r);
  return ok();
}

Expected<BufferId> HipBackend::allocate(int64_t bytes) {
  if (auto s = current(); !s) return s.error();
  Buf b;
  b.bytes = roundUp(std::max<int64_t>(bytes, 1), 256);
  if (hipError_t r = f_.hipMalloc(&b.ptr, size_t(b.bytes)); r != hipSuccess) {
    if (r == hipErrorOutOfMemory)
      return capability("MemoryBudget",
                        "cannot allocate a buffer of " + std::to_string(bytes) + " bytes on " + info_.name);
    return failed(f_, "hipMalloc", r);
  }
  buffers_.push_back(b);
  return BufferId(buffers_.size() - 1);
}

Status HipBackend::checkRange(BufferId buffer, int64_t offset, int64_t bytes) const {
  return checkBufferRange("hip", buffers_, buffer, offset, bytes);
}

void* at(const Buf& b, int64_t offset) { return static_cast<char*>(b.ptr) + offset; }

Status HipBackend::upload(BufferId buffer, int64_t offset, const void* data, int64_t bytes) {
  if (auto s = checkRange(buffer, offset, bytes); !s) return s;
  if (bytes == 0) return ok();
  if (auto s = current(); !s) return s;
  // hipMemcpyHtoD takes a non-const source; it only reads it.
  if (hipError_t r = f_.hipMemcpyHtoD(at(buffers_[size_t(buffer)], offset), const_cast<void*>(data), size_t(bytes));
      r != hipSuccess)
    return failed(f_, "hipMemcpyHtoD", r);
  return ok();
}

Status HipBackend::download(BufferId buffer, int64_t offset, void* data, int64_t bytes) {
  if (auto s = checkRange(buffer, offset, bytes); !s) return s;
  if (bytes == 0) return ok();
  if (auto s = current(); !s) return s;
  if (hipError_t r = f_.hipMemcpyDtoH(data, at(buffers_[size_t(buffer)], offset), size_t(bytes)); r != hipSuccess)
    return failed(f_, "hipMemcpyDtoH", r);
  return ok();
}

Status HipBackend::copy(BufferId src, BufferId dst, int64_t bytes) {
  if (auto s = checkRange(src, 0, bytes); !s) return s;
  if (auto s = checkRange(dst, 0, bytes); !s) return s;
  if (bytes == 0) return ok();
  if (auto s = current(); !s) return s;
  // A device-to-device copy may return before it is done.
  if (hipError_t r = f_.hipMemcpyDtoD(buffers_[size_t(dst)].ptr, buffers_[size_t(src)].ptr, size_t(bytes));
      r != hipSuccess)
    return failed(f_, "hipMemcpyDtoD", r);
  if (hipError_t r = f_.hipDeviceSynchronize(); r != hipSuccess) return failed(f_, "hipDeviceSynchronize", r);
  return ok();
}

// The code object is an HSACO object for the kernel, for this device's arch
// and target features.
Status HipBackend::checkCodeObject(const std::vector<uint8_t>& blob, const std::string& entry) const {
  if (auto facts = checkKernelBlob(Target::Hsaco, blob, entry, info_.arch); !facts)
    return makeError(ErrorKind::Format, {}, "kernel '" + entry + "' is not an hsaco code object: " +
                                                facts.error().message);
  uint32_t flags = 0;
  std::memcpy(&flags, blob.data() + 48, sizeof flags);  // e_flags, little-endian like the object
  std::string arch = machArch(flags & 0xff);
  auto refuse = [&](const std::string& what) {
    Error e = capability("Device", "kernel '" + entry + "' is a code object for " + what + ", device '" +
                                       info_.name + "' is " + archName_);
    e.figures = {{"code_object_arch", what}, {"device_arch", archName_}};
    return e;
  };
  if (arch != info_.arch) {
    char mach[8];
    std::snprintf(mach, sizeof mach, "0x%03x", unsigned(flags & 0xff));
    return refuse(arch.empty() ? std::string("amdgpu machine ") + mach : arch);
  }
  // Code object v4 and newer (ABI version 2 and up) say xnack and sramecc
  // in two bits each: 0 unsupported, 1 any, 2 off, 3 on.
  if (blob[8] < 2) return ok();
  struct Feature {
    const char* name;
    int shift;
  };
  for (Feature f : {Feature{"xnack", 8}, Feature{"sramecc", 10}}) {
    uint32_t setting = flags >> f.shift & 3;
    char device = deviceFeature(archName_, f.name);
    if ((setting == 3 && device == '-') || (setting == 2 && device == '+'))
      return refuse(arch + ":" + f.name + (setting == 3 ? "+" : "-"));
  }
  return ok();
}

Expected<KernelId> HipBackend::createKernel(const std::vector<uint8_t>& blob, const std::string& entry,
                                            int64_t workgroupSize, int64_t workgroupMemory, int bindings, bool) {
  if (auto s = checkCodeObject(blob, entry); !s) return s.error();
  if (auto s = checkKernelLimits(info_, entry, workgroupSize, workgroupMemory); !s) return s.error();
  if (auto s = current(); !s) return s.error();

  Kern k;
  k.entry = entry;
  k.workgroupSize = workgroupSize;
  k.bindings = bindings;
  if (hipError_t r = f_.hipModuleLoadData(&k.module, blob.data()); r != hipSuccess)
    return failed(f_, "hipModuleLoadData for kernel '" + entry + "'", r);
  auto release = [&](Error e) {
    f_.hipModuleUnload(k.module);
    return e;
  };
  if (hipError_t r = f_.hipModuleGetFunction(&k.function, k.module, entry.c_str()); r != hipSuccess)
    return release(failed(f_, "hipModuleGetFunction for '" + entry + "'", r));
  // Registers can hold a function below the device's workgroup size.
  int maxThreads = 0;
  if (hipError_t r = f_.hipFuncGetAttribute(&maxThreads, HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k.function);
      r != hipSuccess)
    return release(failed(f_, "hipFuncGetAttribute for '" + entry + "'", r));
  if (workgroupSize > maxThreads)
    return release(capability("WorkgroupSize", "kernel '" + entry + "' runs " + std::to_string(workgroupSize) +
                                                   " threads a workgroup, its registers allow " +
                                                   std::to_string(maxThreads) + " on " + info_.name));
  kernels_.push_back(std::move(k));
  return KernelId(kernels_.size() - 1);
}

// What the function's attributes say, and its occupancy at its workgroup
// size (no dynamic LDS: HSACO kernels declare theirs statically).
Expected<KernelStats> HipBackend::kernelStats(KernelId kernel) {
  if (kernel < 0 || size_t(kernel) >= kernels_.size())
    return makeError(ErrorKind::Io, {}, "hip: no kernel " + std::to_string(kernel));
  if (auto s = current(); !s) return s.error();
  const Kern& k = kernels_[size_t(kernel)];
  auto check = [&](hipError_t r, const std::string& call) -> Status {
    if (r != hipSuccess) return failed(f_, call + " for '" + k.entry + "'", r);
    return ok();
  };
  return functionStats(
      "HIP_FUNC_ATTRIBUTE_", 0,
      [&](int* value, int attr, const std::string& name) {
        return check(f_.hipFuncGetAttribute(value, attr, k.function), "hipFuncGetAttribute(" + name + ")");
      },
      [&](int* blocks) {
        return check(f_.hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(blocks, k.function, int(k.workgroupSize), 0),
                     "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor");
      });
}

Expected<std::vector<Launch>> HipBackend::launches(const std::vector<DispatchCommand>& dispatches) {
  std::vector<Launch> launches;
  for (const DispatchCommand& d : dispatches) {
    if (auto s = checkDispatch("hip", d, kernels_, buffers_, info_.bindingAlignment); !s) return s.error();
    Launch l;
    l.kernel = d.kernel;
    for (int i = 0; i < 3; ++i) l.grid[i] = unsigned(d.grid[i]);
    for (const BufferRange& b : d.bindings) l.args.push_back(at(buffers_[size_t(b.buffer)], b.offset));
    for (void*& a : l.args) l.params.push_back(&a);
    launches.push_back(std::move(l));
  }
  return launches;
}

Expected<ProgramId> HipBackend::record(const std::vector<DispatchCommand>& dispatches) {
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

Expected<ProgramId> HipBackend::recordProfiled(const std::vector<DispatchCommand>& dispatches) {
  auto launched = launches(dispatches);
  if (!launched) return launched.error();
  if (auto s = current(); !s) return s.error();
  Prog p;
  p.launches = launched.take();
  for (size_t i = 0; i < p.launches.size(); ++i) {
    hipEvent_t e = nullptr;
    if (hipError_t r = f_.hipEventCreate(&e); r != hipSuccess) {
      for (hipEvent_t made : p.after) f_.hipEventDestroy(made);
      return failed(f_, "hipEventCreate", r);
    }
    p.after.push_back(e);
  }
  programs_.push_back(std::move(p));
  return ProgramId(programs_.size() - 1);
}

// Launches in order on the stream, which orders them; with `after`, records
// after[i] behind launch i.
Status HipBackend::launch(const std::vector<Launch>& launches, const std::vector<hipEvent_t>& after) {
  for (size_t i = 0; i < launches.size(); ++i) {
    const Launch& l = launches[i];
    const Kern& k = kernels_[size_t(l.kernel)];
    void** params = const_cast<void**>(l.params.data());
    hipError_t r = f_.hipModuleLaunchKernel(k.function, l.grid[0], l.grid[1], l.grid[2], unsigned(k.workgroupSize), 1,
                                            1, 0, stream_, params, nullptr);
    if (r != hipSuccess) return failed(f_, "hipModuleLaunchKernel for '" + k.entry + "'", r);
    if (!after.empty())
      if (hipError_t e = f_.hipEventRecord(after[i], stream_); e != hipSuccess) return failed(f_, "hipEventRecord", e);
  }
  return ok();
}

// The launches captured from the stream into a graph, instantiated. The
// capture is ended whatever fails, so the stream is never left capturing.
Expected<hipGraphExec_t> HipBackend::capture(const std::vector<Launch>& launches) {
  if (auto s = current(); !s) return s.error();
  if (hipError_t r = f_.hipStreamBeginCapture(stream_, hipStreamCaptureModeThreadLocal); r != hipSuccess)
    return failed(f_, "hipStreamBeginCapture", r);
  Status launched = launch(launches);
  hipGraph_t graph = nullptr;
  hipError_t ended = f_.hipStreamEndCapture(stream_, &graph);
  auto release = [&](Error e) {
    if (graph) f_.hipGraphDestroy(graph);
    return e;
  };
  if (!launched) return release(launched.error());
  if (ended != hipSuccess) return release(failed(f_, "hipStreamEndCapture", ended));
  hipGraphExec_t exec = nullptr;
  if (hipError_t r = f_.hipGraphInstantiate(&exec, graph, 0); r != hipSuccess)
    return release(failed(f_, "hipGraphInstantiateWithFlags", r));
  // The instantiated graph is independent of the graph it came from.
  f_.hipGraphDestroy(graph);
  return exec;
}

Status HipBackend::run(ProgramId program) {
  if (program < 0 || size_t(program) >= programs_.size())
    return makeError(ErrorKind::Io, {}, "hip: no program " + std::to_string(program));
  if (auto s = current(); !s) return s;
  lastRun_.reset();
  lastDispatches_.clear();
  const Prog& p = programs_[size_t(program)];
  if (hipError_t r = f_.hipEventRecord(start_, stream_); r != hipSuccess) return failed(f_, "hipEventRecord", r);
  if (p.graph) {
    if (hipError_t r = f_.hipGraphLaunch(p.graph, stream_); r != hipSuccess) return failed(f_, "hipGraphLaunch", r);
  } else if (auto s = launch(p.launches, p.after); !s) {
    return s;
  }
  if (hipError_t r = f_.hipEventRecord(stop_, stream_); r != hipSuccess) return failed(f_, "hipEventRecord", r);
  // A kernel that faults is reported here, by the wait.
  if (hipError_t r = f_.hipStreamSynchronize(stream_); r != hipSuccess) return failed(f_, "hipStreamSynchronize", r);
  float ms = 0;
  if (hipError_t r = f_.hipEventElapsedTime(&ms, start_, stop_); r != hipSuccess)
    return failed(f_, "hipEventElapsedTime", r);
  lastRun_ = double(ms) * 1e-3;
  for (size_t i = 0; i < p.after.size(); ++i) {
    if (hipError_t r = f_.hipEventElapsedTime(&ms, i == 0 ? start_ : p.after[i - 1], p.after[i]); r != hipSuccess)
      return failed(f_, "hipEventElapsedTime", r);
    lastDispatches_.push_back(double(ms) * 1e-3);
  }
  return ok();
}

}  // namespace

std::string hipSlug(const std::string& name) { return deviceSlug(name, "amd"); }

Expected<std::unique_ptr<Backend>> createHipBackend(const HipOptions& opts) {
  auto b = std::make_unique<HipBackend>();
  if (auto s = b->init(opts, loadRuntime()); !s) return s.error();
  return std::unique_ptr<Backend>(std::move(b));
}

Expected<std::unique_ptr<Backend>> createHipBackend(const HipOptions& opts, const HipSymbols& symbols) {
  auto b = std::make_unique<HipBackend>();
  if (auto s = b->init(opts, openRuntime(symbols)); !s) return s.error();
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace poot::rt

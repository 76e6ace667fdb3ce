// Unit tests of the HIP backend (lib/runtime/backends/hip.h). No AMD GPU is
// needed: on a host without libamdhip64.so opening the backend is a typed
// Capability error, and every other test runs the backend on a fake runtime
// whose entry points below stand in for libamdhip64.so's, with host memory
// for buffers and a log of what the "device" ran. They cover a runtime that
// lacks an entry point, device properties whose layout cannot be trusted,
// code objects that are not HSACO or are for another gfx arch or target
// feature (refused before the runtime loads them), a Session over a plan
// compiled for targets/amd-mi300x.yaml on a gfx942 and on a gfx1100 device,
// launches in plan order with and without graph replay, device time,
// buffers and copies, and what the runtime says of each kernel of a plan
// (its attributes, and the workgroups a CU holds at its workgroup size).
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/io.h"
#include "plan/buffers.h"
#include "plan/plan_file.h"
#include "plan/planner.h"
#include "runtime/backends/backends.h"
#include "runtime/backends/hip.h"
#include "runtime/session.h"
#include "testing.h"
#include "../../tools/poot/profile_text.h"

using namespace poot;

namespace {

using hipError_t = int;
constexpr hipError_t kOk = 0, kInvalidValue = 1, kOutOfMemory = 2;

// One kernel launch as the fake device runs it.
struct Ran {
  std::string entry;
  unsigned grid[3];
  unsigned block, shared;
  std::vector<void*> args;
  bool operator==(const Ran& o) const {
    return entry == o.entry && std::memcmp(grid, o.grid, sizeof grid) == 0 && block == o.block &&
           shared == o.shared && args == o.args;
  }
};

struct Function {
  std::string entry;
};
struct Module {
  std::vector<std::unique_ptr<Function>> functions;
};
struct Captured {
  std::vector<Ran> launches;
};

// The fake runtime's state; reset by each test.
struct Runtime {
  std::set<std::string> missing;  // symbols the runtime lacks
  std::string name = "AMD Instinct MI300X";
  std::string arch = "gfx942:sramecc+:xnack-";
  int propsWarp = 64;                     // the warp size hipGetDevicePropertiesR0600 writes
  std::map<std::string, size_t> params;   // pointer parameters of each kernel entry
  Captured* capturing = nullptr;             // the graph the stream is capturing into
  std::vector<Ran> ran;                   // what the device ran, in order
  std::vector<std::string> occupancies;   // what was asked, in order: "ENTRY BLOCK DYNAMIC_SHARED"
  int failedAttribute = -1;               // the function attribute the runtime fails to read
  int kernelLaunches = 0, graphLaunches = 0, modulesLoaded = 0, syncs = 0;
  std::map<void*, std::unique_ptr<uint8_t[]>> memory;
  size_t memoryLeft = size_t(1) << 30;
  std::vector<std::unique_ptr<size_t>> events;  // each event: how many kernels had run when it was recorded
} rt_;

int token;  // the address every stream and event handle points at
void* handle() { return &token; }

const char* getErrorName(hipError_t) { return "hipErrorFake"; }
const char* getErrorString(hipError_t) { return "a fake error"; }
hipError_t init(unsigned) { return kOk; }
hipError_t driverGetVersion(int* v) { return *v = 60443483, kOk; }  // 6.4.43483
hipError_t getDeviceCount(int* n) { return *n = 1, kOk; }
hipError_t deviceGet(int* d, int i) { return *d = i, kOk; }
hipError_t deviceGetName(char* name, int len, int) {
  std::strncpy(name, rt_.name.c_str(), size_t(len));
  return kOk;
}
hipError_t deviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
    case 63: *v = 304; break;            // multiprocessors
    case 74: *v = 65536; break;          // LDS a workgroup
    case 56: case 26: *v = 1024; break;  // threads, block x
    case 87: *v = 64; break;             // warp
    case 29: *v = 2147483647; break;     // grid x
    default: *v = 65536;                 // grid y, z
  }
  return kOk;
}
hipError_t deviceTotalMem(size_t* bytes, int) { return *bytes = size_t(192) << 30, kOk; }
// hipDeviceProp_tR0600's fields at their offsets.
hipError_t getDeviceProperties(void* p, int) {
  char* props = static_cast<char*>(p);
  std::memset(props, 0, 1472);
  std::strcpy(props, rt_.name.c_str());
  int32_t warp = rt_.propsWarp, threads = 1024, units = 304;
  std::memcpy(props + 308, &warp, 4);
  std::memcpy(props + 320, &threads, 4);
  std::memcpy(props + 388, &units, 4);
  std::strcpy(props + 1160, rt_.arch.c_str());
  return kOk;
}
hipError_t setDevice(int d) { return d == 0 ? kOk : kInvalidValue; }
hipError_t deviceSynchronize() { return ++rt_.syncs, kOk; }
hipError_t streamCreate(void** s) { return *s = handle(), kOk; }
hipError_t streamDestroy(void*) { return kOk; }
hipError_t streamSynchronize(void*) { return kOk; }
hipError_t eventCreate(void** e) {
  rt_.events.push_back(std::make_unique<size_t>(0));
  return *e = rt_.events.back().get(), kOk;
}
hipError_t eventDestroy(void*) { return kOk; }
hipError_t eventRecord(void* e, void*) {
  if (rt_.capturing) return kInvalidValue;
  *static_cast<size_t*>(e) = rt_.ran.size();
  return kOk;
}
// Each kernel takes the fake device 0.5 ms.
hipError_t eventElapsedTime(float* ms, void* a, void* b) {
  return *ms = 0.5f * float(*static_cast<size_t*>(b) - *static_cast<size_t*>(a)), kOk;
}
hipError_t malloc_(void** ptr, size_t bytes) {
  if (bytes > rt_.memoryLeft) return kOutOfMemory;
  rt_.memoryLeft -= bytes;
  auto m = std::make_unique<uint8_t[]>(bytes);
  *ptr = m.get();
  rt_.memory[*ptr] = std::move(m);
  return kOk;
}
hipError_t free_(void* ptr) { return rt_.memory.erase(ptr) ? kOk : kInvalidValue; }
hipError_t memcpyHtoD(void* dst, void* src, size_t n) { return std::memcpy(dst, src, n), kOk; }
hipError_t memcpyDtoH(void* dst, void* src, size_t n) { return std::memcpy(dst, src, n), kOk; }
hipError_t memcpyDtoD(void* dst, void* src, size_t n) { return std::memcpy(dst, src, n), kOk; }
hipError_t moduleLoadData(void** m, const void*) {
  ++rt_.modulesLoaded;
  *m = new Module;
  return kOk;
}
hipError_t moduleUnload(void* m) {
  delete static_cast<Module*>(m);
  return kOk;
}
hipError_t moduleGetFunction(void** f, void* m, const char* name) {
  auto fn = std::make_unique<Function>(Function{name});
  *f = fn.get();
  static_cast<Module*>(m)->functions.push_back(std::move(fn));
  return kOk;
}
hipError_t funcGetAttribute(int* v, int attr, void*) {
  if (attr == rt_.failedAttribute) return kInvalidValue;
  switch (attr) {
    case 0: *v = 1024; break;  // max threads per block
    case 1: *v = 4096; break;  // static LDS bytes
    case 3: *v = 16; break;    // private bytes a work-item
    case 4: *v = 96; break;    // registers
    default: return kInvalidValue;
  }
  return kOk;
}
// A CU holds 2048 work-items.
hipError_t moduleOccupancy(int* n, void* f, int block, size_t dynamicShared) {
  rt_.occupancies.push_back(static_cast<const Function*>(f)->entry + " " + std::to_string(block) + " " +
                            std::to_string(dynamicShared));
  *n = 2048 / block;
  return kOk;
}
hipError_t moduleLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                              unsigned shared, void*, void** params, void** extra) {
  if (by != 1 || bz != 1 || extra) return kInvalidValue;
  const Function* fn = static_cast<const Function*>(f);
  Ran r{fn->entry, {gx, gy, gz}, bx, shared, {}};
  for (size_t i = 0; i < rt_.params[fn->entry]; ++i) r.args.push_back(*static_cast<void**>(params[i]));
  ++rt_.kernelLaunches;
  (rt_.capturing ? rt_.capturing->launches : rt_.ran).push_back(std::move(r));
  return kOk;
}
hipError_t streamBeginCapture(void*, int mode) {
  CHECK(mode == 1);  // thread-local
  rt_.capturing = new Captured;
  return kOk;
}
hipError_t streamEndCapture(void*, void** graph) {
  *graph = rt_.capturing;
  rt_.capturing = nullptr;
  return kOk;
}
hipError_t graphInstantiate(void** exec, void* graph, unsigned long long flags) {
  CHECK(flags == 0);
  *exec = new Captured(*static_cast<Captured*>(graph));
  return kOk;
}
hipError_t graphLaunch(void* exec, void*) {
  const Captured* g = static_cast<const Captured*>(exec);
  rt_.ran.insert(rt_.ran.end(), g->launches.begin(), g->launches.end());
  ++rt_.graphLaunches;
  return kOk;
}
hipError_t graphExecDestroy(void* exec) {
  delete static_cast<Captured*>(exec);
  return kOk;
}
hipError_t graphDestroy(void* graph) {
  delete static_cast<Captured*>(graph);
  return kOk;
}

void* symbol(const char* name) {
  static const std::map<std::string, void*> fns = {
      {"hipGetErrorName", reinterpret_cast<void*>(getErrorName)},
      {"hipGetErrorString", reinterpret_cast<void*>(getErrorString)},
      {"hipInit", reinterpret_cast<void*>(init)},
      {"hipDriverGetVersion", reinterpret_cast<void*>(driverGetVersion)},
      {"hipGetDeviceCount", reinterpret_cast<void*>(getDeviceCount)},
      {"hipDeviceGet", reinterpret_cast<void*>(deviceGet)},
      {"hipDeviceGetName", reinterpret_cast<void*>(deviceGetName)},
      {"hipDeviceGetAttribute", reinterpret_cast<void*>(deviceGetAttribute)},
      {"hipDeviceTotalMem", reinterpret_cast<void*>(deviceTotalMem)},
      {"hipGetDevicePropertiesR0600", reinterpret_cast<void*>(getDeviceProperties)},
      {"hipSetDevice", reinterpret_cast<void*>(setDevice)},
      {"hipDeviceSynchronize", reinterpret_cast<void*>(deviceSynchronize)},
      {"hipStreamCreate", reinterpret_cast<void*>(streamCreate)},
      {"hipStreamDestroy", reinterpret_cast<void*>(streamDestroy)},
      {"hipStreamSynchronize", reinterpret_cast<void*>(streamSynchronize)},
      {"hipEventCreate", reinterpret_cast<void*>(eventCreate)},
      {"hipEventDestroy", reinterpret_cast<void*>(eventDestroy)},
      {"hipEventRecord", reinterpret_cast<void*>(eventRecord)},
      {"hipEventElapsedTime", reinterpret_cast<void*>(eventElapsedTime)},
      {"hipMalloc", reinterpret_cast<void*>(malloc_)},
      {"hipFree", reinterpret_cast<void*>(free_)},
      {"hipMemcpyHtoD", reinterpret_cast<void*>(memcpyHtoD)},
      {"hipMemcpyDtoH", reinterpret_cast<void*>(memcpyDtoH)},
      {"hipMemcpyDtoD", reinterpret_cast<void*>(memcpyDtoD)},
      {"hipModuleLoadData", reinterpret_cast<void*>(moduleLoadData)},
      {"hipModuleUnload", reinterpret_cast<void*>(moduleUnload)},
      {"hipModuleGetFunction", reinterpret_cast<void*>(moduleGetFunction)},
      {"hipFuncGetAttribute", reinterpret_cast<void*>(funcGetAttribute)},
      {"hipModuleOccupancyMaxActiveBlocksPerMultiprocessor", reinterpret_cast<void*>(moduleOccupancy)},
      {"hipModuleLaunchKernel", reinterpret_cast<void*>(moduleLaunchKernel)},
      {"hipStreamBeginCapture", reinterpret_cast<void*>(streamBeginCapture)},
      {"hipStreamEndCapture", reinterpret_cast<void*>(streamEndCapture)},
      {"hipGraphInstantiateWithFlags", reinterpret_cast<void*>(graphInstantiate)},
      {"hipGraphLaunch", reinterpret_cast<void*>(graphLaunch)},
      {"hipGraphExecDestroy", reinterpret_cast<void*>(graphExecDestroy)},
      {"hipGraphDestroy", reinterpret_cast<void*>(graphDestroy)}};
  if (rt_.missing.count(name)) return nullptr;
  auto it = fns.find(name);
  return it == fns.end() ? nullptr : it->second;
}

Expected<std::unique_ptr<rt::Backend>> openHip(rt::HipOptions opts = {}) {
  return rt::createHipBackend(opts, symbol);
}

std::unique_ptr<rt::Backend> opened(rt::HipOptions opts = {}) {
  auto b = openHip(opts);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  return b.take();
}

// The smallest object the HSACO checks take: an ELF header for AMDGPU
// (code object v5: ABI version 3) with `flags` as e_flags, no program or
// section headers, then the kernel descriptor's name.
std::vector<uint8_t> hsaco(const std::string& entry, uint32_t flags) {
  std::vector<uint8_t> b(64, 0);
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 64, 3};
  std::memcpy(b.data(), ident, sizeof ident);
  auto put16 = [&](size_t at, uint16_t v) { std::memcpy(b.data() + at, &v, 2); };
  put16(16, 3);    // ET_DYN
  put16(18, 224);  // EM_AMDGPU
  std::memcpy(b.data() + 48, &flags, 4);
  put16(52, 64);
  std::string kd = entry + ".kd";
  b.insert(b.end(), kd.begin(), kd.end());
  b.push_back(0);
  return b;
}

constexpr uint32_t kGfx942 = 0x04c, kGfx1100 = 0x041, kXnackOn = 0x300, kXnackOff = 0x200, kSrameccOn = 0xc00;

// A plan for amd-mi300x as the runtime reads it, kernels without code.
rt::PlanFile mi300xPlan(const std::string& example) {
  auto text = readFile(testing::exampleGraph(example).string());
  REQUIRE(bool(text));
  Graph g = testing::parse(*text);
  DeviceProfile d = testing::loadTarget("amd-mi300x");
  testing::runPasses(g, d);
  auto p = planGraph(g, d);
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  auto b = planBuffers(*p);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  auto f = rt::readPlanFile(writePlan(*p), "mi300x.plan");
  REQUIRE_MESSAGE(bool(f), (f ? "" : f.error().str()));
  return f.take();
}

}  // namespace

TEST_CASE("runtime hip: without libamdhip64.so the backend is a capability refusal") {
  void* lib = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  auto b = rt::openBackend("hip", "");
  if (lib) {
    dlclose(lib);
    // A ROCm host: the backend opens (or the runtime says why not).
    if (b) CHECK((*b)->info().target == rt::Target::Hsaco);
    else MESSAGE("libamdhip64.so loads but the backend does not open: " << b.error().str());
    return;
  }
  REQUIRE(!b);
  CHECK(b.error().kind == ErrorKind::Capability);
  CHECK(b.error().capability == "Hip");
  CHECK(b.error().message.find("hip is not available: cannot load libamdhip64.so (") == 0);
}

TEST_CASE("runtime hip: device names become profile slugs") {
  CHECK(rt::hipSlug("AMD Instinct MI300X") == "amd-instinct-mi300x");
  CHECK(rt::hipSlug("AMD Radeon RX 7900 XTX") == "amd-radeon-rx-7900-xtx");
  CHECK(rt::hipSlug("Radeon Pro W7900 (gfx1100)") == "amd-radeon-pro-w7900");
  CHECK(rt::hipSlug("") == "amd-gpu");
}

TEST_CASE("runtime hip: a runtime without a required entry point is refused") {
  rt_ = Runtime{};
  rt_.missing = {"hipModuleLaunchKernel"};
  auto b = openHip();
  REQUIRE(!b);
  CHECK(b.error().kind == ErrorKind::Capability);
  CHECK(b.error().capability == "Hip");
  CHECK(b.error().message ==
        "hip is not available: the hip runtime has no hipModuleLaunchKernel (poot needs rocm 6.0 or newer)");
  // ROCm 5 exports hipGetDeviceProperties but not the entry point that names its layout.
  rt_.missing = {"hipGetDevicePropertiesR0600"};
  b = openHip();
  REQUIRE(!b);
  CHECK(b.error().message.find("has no hipGetDevicePropertiesR0600") != std::string::npos);
}

TEST_CASE("runtime hip: the device's arch is read from hipDeviceProp_tR0600 only when its layout checks out") {
  rt_ = Runtime{};
  auto b = opened();
  const rt::DeviceInfo& d = b->info();
  CHECK(d.name == "AMD Instinct MI300X");
  CHECK(d.slug == "amd-instinct-mi300x");
  CHECK(d.target == rt::Target::Hsaco);
  CHECK(d.arch == "gfx942");
  CHECK(d.driver == "hip 6.4");
  CHECK(d.computeUnits == 304);
  CHECK(d.workgroupMemoryBytes == 65536);
  CHECK(d.maxWorkgroupSize == 1024);
  CHECK(d.subgroupSize == 64);
  CHECK(d.gridLimits[0] == 4194303);  // (2^32 - 1) work-items / 1024
  CHECK(d.gridLimits[1] == 65536);
  CHECK(d.memoryBytes == int64_t(192) << 30);
  CHECK(d.maxBindings == 512);

  // A struct whose warp size is not where R0600 has it: no arch is guessed.
  rt_.propsWarp = 32;
  auto wrong = openHip();
  REQUIRE(!wrong);
  CHECK(wrong.error().capability == "Hip");
  CHECK(wrong.error().message ==
        "hip is not available: the device properties of 'AMD Instinct MI300X' are not laid out as "
        "hipDeviceProp_tR0600 (its warp size is not the attribute's), so its gfx arch is unknown");
  rt_.propsWarp = 64;
  rt_.arch = "";
  wrong = openHip();
  REQUIRE(!wrong);
  CHECK(wrong.error().message.find("(its gcnArchName is not a gfx arch)") != std::string::npos);

  // Devices are picked by ordinal or by name.
  rt_ = Runtime{};
  CHECK(bool(openHip({"mi300x"})));
  auto none = openHip({"gfx1100"});
  REQUIRE(!none);
  CHECK(none.error().capability == "Device");
  CHECK(none.error().message == "no hip device matches 'gfx1100' (devices: 0: AMD Instinct MI300X)");
}

// poot probe --backend hip: the profile text of the device loads as the
// profile pootc reads, with the device's figures and the comments of HIP's
// attributes (not Vulkan's queries).
TEST_CASE("runtime hip: poot probe's profile of the device is one pootc reads, with its figures") {
  rt_ = Runtime{};
  auto b = opened();
  const rt::DeviceInfo& d = b->info();
  std::string text = profileText(d);
  CHECK(text.find("# hipDeviceAttributeMultiprocessorCount.\ncompute_units: 304\n") != std::string::npos);
  CHECK(text.find("maxComputeSharedMemorySize") == std::string::npos);
  auto p = parseProfile(text, "probed.yaml");
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  CHECK(p->name == "amd-instinct-mi300x");
  CHECK(p->target == Target::Hsaco);
  CHECK(p->arch == "gfx942");
  CHECK(p->compute_units == 304);
  CHECK(p->workgroup_memory_bytes == 65536);
  CHECK(p->max_workgroup_size == 1024);
  CHECK(p->subgroup_size == 64);
  CHECK(p->grid_limits[0] == 4194303);
  CHECK(p->memory_bytes == int64_t(192) << 30);
  CHECK(p->max_bindings == 512);
  for (const TwoByteOps& t : {p->f16, p->bf16}) CHECK((t.storage && t.arith && t.select));
  // CDNA 3 has the wave's MFMA; an arch without it lists none.
  CHECK(text.find("# MFMA of 16 x 16 x 16 (CDNA 2 and 3).\nmatrix_multiply: [m16n16k16.bf16, m16n16k16.f16]\n") !=
        std::string::npos);
  CHECK(p->matrix_ops == std::vector<MatrixOp>{MatrixOp::M16N16K16Bf16, MatrixOp::M16N16K16F16});
  rt_.arch = "gfx1100";
  auto rdna = opened();
  CHECK(rdna->info().matrixOps.empty());
  CHECK(profileText(rdna->info()).find("matrix_multiply") == std::string::npos);
}

TEST_CASE("runtime hip: a blob that is not an hsaco code object is refused before the runtime sees it") {
  rt_ = Runtime{};
  auto b = opened();
  std::string ptx = ".version 8.0\n.target sm_90\n.entry k()\n{ ret; }\n";
  auto k = b->createKernel(std::vector<uint8_t>(ptx.begin(), ptx.end()), "k", 64, 0, 0, false);
  REQUIRE(!k);
  CHECK(k.error().kind == ErrorKind::Format);
  CHECK(k.error().message == "kernel 'k' is not an hsaco code object: the hsaco object is not an elf file (" +
                                 std::to_string(ptx.size()) + " bytes)");
  std::vector<uint8_t> x86 = hsaco("k", kGfx942);
  x86[18] = 62;
  k = b->createKernel(x86, "k", 64, 0, 0, false);
  REQUIRE(!k);
  CHECK(k.error().message ==
        "kernel 'k' is not an hsaco code object: the hsaco object is for machine 62, not amdgpu (224)");
  k = b->createKernel(hsaco("other", kGfx942), "k", 64, 0, 0, false);
  REQUIRE(!k);
  CHECK(k.error().message.find("no kernel descriptor 'k.kd'") != std::string::npos);
  CHECK(rt_.modulesLoaded == 0);

  CHECK(bool(b->createKernel(hsaco("k", kGfx942), "k", 64, 0, 0, false)));
  CHECK(rt_.modulesLoaded == 1);
}

TEST_CASE("runtime hip: a code object for another gfx arch or target feature is refused") {
  rt_ = Runtime{};
  auto b = opened();
  auto k = b->createKernel(hsaco("k", kGfx1100), "k", 64, 0, 0, false);
  REQUIRE(!k);
  CHECK(k.error().kind == ErrorKind::Capability);
  CHECK(k.error().capability == "Device");
  CHECK(k.error().message ==
        "kernel 'k' is a code object for gfx1100, device 'AMD Instinct MI300X' is gfx942:sramecc+:xnack-");
  k = b->createKernel(hsaco("k", 0x0fe), "k", 64, 0, 0, false);
  REQUIRE(!k);
  CHECK(k.error().message.find("a code object for amdgpu machine 0x0fe,") != std::string::npos);
  // The device runs xnack off: an object built for xnack on does not load; one for xnack off or any does.
  k = b->createKernel(hsaco("k", kGfx942 | kXnackOn), "k", 64, 0, 0, false);
  REQUIRE(!k);
  CHECK(k.error().message.find("a code object for gfx942:xnack+,") != std::string::npos);
  CHECK(bool(b->createKernel(hsaco("k", kGfx942 | kXnackOff | kSrameccOn), "k", 64, 0, 0, false)));
  CHECK(bool(b->createKernel(hsaco("k", kGfx942 | 0x100), "k", 64, 0, 0, false)));
  CHECK(rt_.modulesLoaded == 2);
}

TEST_CASE("runtime hip: a session takes an amd-mi300x plan on gfx942, launches it in order, refuses it on gfx1100") {
  rt::PlanFile plan = mi300xPlan("decode-attention.pg");
  REQUIRE(plan.device.target == rt::Target::Hsaco);
  REQUIRE(plan.device.arch == "gfx942");
  for (rt::Kernel& k : plan.kernels) k.blob = hsaco(k.entry, kGfx942);
  rt::SessionOptions other;
  other.allowOtherDevice = true;  // the profile's name is amd-mi300x, the device's slug amd-instinct-mi300x

  rt_ = Runtime{};
  for (const rt::Dispatch& d : plan.dispatches) rt_.params[plan.kernels[size_t(d.kernel)].entry] = d.bindings.size();
  auto s = rt::Session::create(plan, opened(), other);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  // Recording captured the plan's dispatches, in order, with their grids and workgroup sizes.
  rt_.ran.clear();
  REQUIRE(bool((*s)->backend().run(0)));
  REQUIRE(rt_.ran.size() >= 1);
  size_t i = 0;
  for (const rt::Dispatch& d : plan.dispatches) {
    if (i >= rt_.ran.size()) break;
    const rt::Kernel& k = plan.kernels[size_t(d.kernel)];
    CHECK(rt_.ran[i].entry == k.entry);
    CHECK(rt_.ran[i].block == unsigned(k.workgroupSize));
    CHECK(rt_.ran[i].grid[0] == unsigned(d.grid[0]));
    ++i;
  }

  auto refused = rt::Session::create(plan, [] {
    rt_.arch = "gfx1100";
    return opened();
  }(), other);
  REQUIRE(!refused);
  CHECK(refused.error().kind == ErrorKind::Capability);
  CHECK(refused.error().capability == "Device");
  CHECK(refused.error().message.find("is a code object for gfx942, device 'AMD Instinct MI300X' is gfx1100") !=
        std::string::npos);
}

TEST_CASE("runtime hip: what the runtime made of each kernel: its attributes and the workgroups a CU holds") {
  rt_ = Runtime{};
  auto b = opened();
  rt::KernelId a = *b->createKernel(hsaco("a", kGfx942), "a", 256, 4096, 1, false);
  rt::KernelId c = *b->createKernel(hsaco("c", kGfx942), "c", 64, 0, 2, false);
  auto s = b->kernelStats(a);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  CHECK(s->registers == 96);
  CHECK(s->localBytes == 16);
  CHECK(s->workgroupMemoryBytes == 4096);
  CHECK(s->residentWorkgroups == 8);
  CHECK(s->driver ==
        std::vector<std::pair<std::string, std::string>>{{"HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK", "1024"}});
  s = b->kernelStats(c);
  REQUIRE(s);
  CHECK(s->residentWorkgroups == 32);
  // At each kernel's workgroup size, with no dynamic LDS.
  CHECK(rt_.occupancies == std::vector<std::string>{"a 256 0", "c 64 0"});

  // A failure names the call, the attribute and the kernel.
  rt_.failedAttribute = 4;
  CHECK(b->kernelStats(c).error().message ==
        "hip: hipFuncGetAttribute(HIP_FUNC_ATTRIBUTE_NUM_REGS) for 'c' failed (hipErrorFake: a fake error)");

  // A plan's kernels, built as a Session builds them: each one's figures,
  // asked for in plan order at its workgroup size.
  rt::PlanFile plan = mi300xPlan("decode-attention.pg");
  for (rt::Kernel& k : plan.kernels) k.blob = hsaco(k.entry, kGfx942);
  rt_ = Runtime{};
  b = opened();
  auto ids = rt::buildKernels(plan, *b);
  REQUIRE_MESSAGE(bool(ids), (ids ? "" : ids.error().str()));
  REQUIRE(ids->size() == plan.kernels.size());
  std::vector<std::string> want;
  for (size_t k = 0; k < ids->size(); ++k) {
    REQUIRE((*ids)[k] >= 0);
    REQUIRE(bool(b->kernelStats((*ids)[k])));
    want.push_back(plan.kernels[k].entry + " " + std::to_string(plan.kernels[k].workgroupSize) + " 0");
  }
  CHECK(rt_.occupancies == want);
}

// Kernels a (256 threads, 2 bindings) and b (64, 1, waits for the ones
// before it) over buffers of 1024 and 512 bytes: a, b, a.
std::vector<rt::DispatchCommand> threeDispatches(rt::Backend& b) {
  auto ka = b.createKernel(hsaco("a", kGfx942), "a", 256, 1024, 2, false);
  auto kb = b.createKernel(hsaco("b", kGfx942), "b", 64, 0, 1, true);
  auto x = b.allocate(1024), y = b.allocate(512);
  REQUIRE((ka && kb && x && y));
  std::vector<rt::DispatchCommand> cmds(3);
  cmds[0] = {*ka, {4, 2, 1}, {{*x, 0, 1024}, {*y, 256, 256}}};
  cmds[1] = {*kb, {1, 1, 1}, {{*y, 0, 512}}};
  cmds[2] = {*ka, {8, 1, 1}, {{*y, 0, 512}, {*x, 512, 512}}};
  return cmds;
}

TEST_CASE("runtime hip: launches run in order, replayed from a graph capture or launched one by one") {
  for (int mode = 0; mode < 3; ++mode) {
    CAPTURE(mode);  // 0: graph replay, 1: a runtime without graphs, 2: replay off
    rt_ = Runtime{};
    if (mode == 1) rt_.missing = {"hipStreamBeginCapture"};
    rt_.params = {{"a", 2}, {"b", 1}};
    auto b = opened(rt::HipOptions{"", mode != 2});
    CHECK(b->submission() == (mode == 0 ? rt::Submission::Replay : rt::Submission::InOrder));
    if (mode == 1) {
      REQUIRE(b->replayFallback());
      CHECK(b->replayFallback()->capability == "GraphReplay");
      CHECK(b->replayFallback()->message ==
            "hip graph replay is not available: the runtime has no hipStreamBeginCapture; "
            "dispatches are launched in order");
    } else {
      CHECK(!b->replayFallback());
    }
    std::vector<rt::DispatchCommand> cmds = threeDispatches(*b);
    auto p = b->record(cmds);
    REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
    CHECK(rt_.kernelLaunches == (mode == 0 ? 3 : 0));  // captured, not run
    CHECK(rt_.ran.empty());

    for (int run = 0; run < 2; ++run) {
      REQUIRE(bool(b->run(*p)));
      REQUIRE(b->lastRunDeviceSeconds());
      CHECK(*b->lastRunDeviceSeconds() == doctest::Approx(1.5e-3));
      CHECK(b->lastRunDispatchSeconds().empty());  // not profiled
    }
    REQUIRE(rt_.ran.size() == 6);
    CHECK(rt_.graphLaunches == (mode == 0 ? 2 : 0));
    CHECK(rt_.kernelLaunches == (mode == 0 ? 3 : 6));
    for (int run = 0; run < 2; ++run) {
      const Ran* r = &rt_.ran[size_t(run) * 3];
      CHECK(r[0].entry == "a");
      CHECK(r[0].grid[0] == 4);
      CHECK(r[0].grid[1] == 2);
      CHECK(r[0].block == 256);
      CHECK(r[0].shared == 0);  // LDS is static in an HSACO kernel
      CHECK(r[1].entry == "b");
      CHECK(r[1].block == 64);
      CHECK(r[2].entry == "a");
      CHECK(r[2].grid[0] == 8);
      // Binding addresses: the buffer's base plus the range's offset.
      CHECK(static_cast<char*>(r[0].args[1]) == static_cast<char*>(r[1].args[0]) + 256);
      CHECK(r[2].args[0] == r[1].args[0]);
      CHECK(static_cast<char*>(r[2].args[1]) == static_cast<char*>(r[0].args[0]) + 512);
    }
    if (mode == 0) CHECK(rt_.ran[0] == rt_.ran[3]);
  }
}

TEST_CASE("runtime hip: a profiled program launches in order and times each dispatch") {
  for (bool replay : {true, false}) {
    CAPTURE(replay);
    rt_ = Runtime{};
    rt_.params = {{"a", 2}, {"b", 1}};
    auto b = opened(rt::HipOptions{"", replay});
    std::vector<rt::DispatchCommand> cmds = threeDispatches(*b);
    auto p = b->recordProfiled(cmds);
    REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
    for (int run = 0; run < 2; ++run) {
      REQUIRE(bool(b->run(*p)));
      CHECK(b->lastRunDispatchSeconds() == std::vector<double>{double(0.5f) * 1e-3, double(0.5f) * 1e-3, double(0.5f) * 1e-3});
      CHECK(*b->lastRunDeviceSeconds() == doctest::Approx(1.5e-3));
    }
    CHECK(rt_.graphLaunches == 0);  // launched one by one, even where it replays
    CHECK(rt_.kernelLaunches == 6);
    REQUIRE(rt_.ran.size() == 6);
    CHECK(rt_.ran[1].entry == "b");
    CHECK(rt_.ran[5].grid[0] == 8);
    // A bad dispatch is refused as record() refuses it.
    cmds[1].bindings.push_back(cmds[0].bindings[0]);  // b takes one binding
    CHECK_FALSE(b->recordProfiled(cmds));
  }
}

TEST_CASE("runtime hip: buffers, copies and their range checks") {
  rt_ = Runtime{};
  auto b = opened();
  auto empty = b->allocate(0);
  auto x = b->allocate(100);
  auto y = b->allocate(300);
  REQUIRE((empty && x && y));
  CHECK(rt_.memory.size() == 3);
  CHECK(rt_.memoryLeft == (size_t(1) << 30) - 256 - 256 - 512);  // rounded up to 256 bytes

  std::vector<uint8_t> in(100);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint8_t(i + 1);
  REQUIRE(bool(b->upload(*x, 0, in.data(), 100)));
  REQUIRE(bool(b->copy(*x, *y, 100)));
  CHECK(rt_.syncs == 1);  // the copy is waited for
  std::vector<uint8_t> out(40);
  REQUIRE(bool(b->download(*y, 60, out.data(), 40)));
  CHECK(std::equal(out.begin(), out.end(), in.begin() + 60));
  REQUIRE(bool(b->upload(*y, 200, in.data(), 50)));
  REQUIRE(bool(b->download(*y, 200, out.data(), 40)));
  CHECK(std::equal(out.begin(), out.end(), in.begin()));

  auto bad = b->upload(*x, 200, in.data(), 100);
  REQUIRE(!bad);
  CHECK(bad.error().kind == ErrorKind::Io);
  CHECK(bad.error().message == "hip: bytes [200, 300) are outside buffer 1 of 256 bytes");
  bad = b->copy(*y, *x, 300);
  REQUIRE(!bad);
  CHECK(bad.error().message == "hip: bytes [0, 300) are outside buffer 1 of 256 bytes");
  bad = b->download(7, 0, out.data(), 1);
  REQUIRE(!bad);
  CHECK(bad.error().message == "hip: no buffer 7");

  auto huge = b->allocate(int64_t(1) << 40);
  REQUIRE(!huge);
  CHECK(huge.error().capability == "MemoryBudget");
  CHECK(huge.error().message == "cannot allocate a buffer of 1099511627776 bytes on AMD Instinct MI300X");
}

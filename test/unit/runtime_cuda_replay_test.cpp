// Unit tests of CUDA graph replay (lib/runtime/backends/cuda.cpp) on a
// fake driver: the entry points below stand in for libcuda.so.1's, with
// host memory for buffers and a log of what the "device" ran. With the graph
// entry points, record() captures each program (its launches issued while
// the stream captures) and run() submits one cuGraphLaunch and no
// cuLaunchKernel; without them (an older driver) the backend still opens,
// replayFallback() names the missing entry point as a Capability
// "GraphReplay" error and run() launches in order; with replay off it
// launches in order and gives no reason. Either way the device runs the
// same launches in the same order, and the device time is the events' span.
// A kernel that waits for the previous ones in its code is launched with
// cuLaunchKernelEx as a programmatic dependent launch, in a capture too;
// without that entry point, the ordinary way. The same fake driver answers
// what the backend asks of a built kernel: its attributes, and the blocks an
// SM holds at its block size with the dynamic shared memory it launches with.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/backends/cuda.h"

using namespace poot;

namespace {

using CUresult = int;
constexpr CUresult kOk = 0, kInvalidValue = 1;

// One kernel launch as the fake device runs it.
struct Ran {
  std::string entry;
  unsigned grid[3];
  unsigned block, shared;
  std::vector<unsigned long long> args;
  bool dependent = false;  // a programmatic dependent launch
  bool operator==(const Ran& o) const {
    return entry == o.entry && std::memcmp(grid, o.grid, sizeof grid) == 0 && block == o.block &&
           shared == o.shared && args == o.args && dependent == o.dependent;
  }
};

struct Function {
  std::string entry;
  size_t params = 0;  // ".param"s in the module's text
};
struct Module {
  std::string text;
  std::vector<std::unique_ptr<Function>> functions;
};
struct Graph {
  std::vector<Ran> launches;
};

// The fake driver's state; reset by each test.
struct Driver {
  std::set<std::string> missing;  // symbols the driver lacks
  CUresult beginCapture = kOk;    // what cuStreamBeginCapture_v2 returns
  Graph* capturing = nullptr;     // the graph the stream is capturing into
  std::vector<Ran> ran;           // what the device ran, in order
  std::vector<std::string> occupancies;  // what was asked, in order: "ENTRY BLOCK DYNAMIC_SHARED"
  CUresult occupancy = kOk;            // what the occupancy call returns
  int kernelLaunches = 0, graphLaunches = 0, captures = 0, graphs = 0, execs = 0;
  std::map<unsigned long long, std::unique_ptr<uint8_t[]>> memory;
  std::vector<unsigned long long> allocations;  // in order
} drv;

int token;  // the address every context, stream and event handle points at
void* handle() { return &token; }

CUresult getErrorName(CUresult, const char** s) { return *s = "CUDA_ERROR_FAKE", kOk; }
CUresult getErrorString(CUresult, const char** s) { return *s = "a fake error", kOk; }
CUresult init(unsigned) { return kOk; }
CUresult driverGetVersion(int* v) { return *v = 13000, kOk; }
CUresult deviceGetCount(int* n) { return *n = 1, kOk; }
CUresult deviceGet(int* d, int i) { return *d = i, kOk; }
CUresult deviceGetName(char* name, int len, int) {
  std::strncpy(name, "Fake GPU", size_t(len));
  return kOk;
}
CUresult deviceGetAttribute(int* v, int attr, int) {
  switch (attr) {
    case 75: *v = 9; break;                          // compute capability major
    case 76: *v = 0; break;                          // minor
    case 97: *v = 232448; break;                     // shared memory opt-in
    case 1: case 2: *v = 1024; break;                // threads, block x
    case 10: *v = 32; break;                         // warp
    case 16: *v = 132; break;                        // SMs
    default: *v = 65535;                             // grid limits
  }
  return kOk;
}
CUresult deviceTotalMem(size_t* bytes, int) { return *bytes = size_t(1) << 30, kOk; }
CUresult primaryCtxRetain(void** ctx, int) { return *ctx = handle(), kOk; }
CUresult primaryCtxRelease(int) { return kOk; }
CUresult ctxSetCurrent(void*) { return kOk; }
CUresult ctxSynchronize() { return kOk; }
CUresult streamCreate(void** s, unsigned) { return *s = handle(), kOk; }
CUresult streamDestroy(void*) { return kOk; }
CUresult streamSynchronize(void*) { return kOk; }
CUresult eventCreate(void** e, unsigned) { return *e = handle(), kOk; }
CUresult eventDestroy(void*) { return kOk; }
CUresult eventRecord(void*, void*) { return drv.capturing ? kInvalidValue : kOk; }
CUresult eventElapsedTime(float* ms, void*, void*) { return *ms = 0.25f, kOk; }
CUresult memAlloc(unsigned long long* ptr, size_t bytes) {
  auto m = std::make_unique<uint8_t[]>(bytes);
  *ptr = reinterpret_cast<unsigned long long>(m.get());
  drv.memory[*ptr] = std::move(m);
  drv.allocations.push_back(*ptr);
  return kOk;
}
CUresult memFree(unsigned long long ptr) { return drv.memory.erase(ptr) ? kOk : kInvalidValue; }
CUresult memcpyHtoD(unsigned long long dst, const void* src, size_t n) {
  std::memcpy(reinterpret_cast<void*>(dst), src, n);
  return kOk;
}
CUresult memcpyDtoH(void* dst, unsigned long long src, size_t n) {
  std::memcpy(dst, reinterpret_cast<const void*>(src), n);
  return kOk;
}
CUresult memcpyDtoD(unsigned long long dst, unsigned long long src, size_t n) {
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return kOk;
}
CUresult moduleLoadDataEx(void** m, const void* image, unsigned, int*, void**) {
  *m = new Module{static_cast<const char*>(image), {}};
  return kOk;
}
CUresult moduleUnload(void* m) {
  delete static_cast<Module*>(m);
  return kOk;
}
CUresult moduleGetFunction(void** f, void* m, const char* name) {
  Module* mod = static_cast<Module*>(m);
  auto fn = std::make_unique<Function>(Function{name, 0});
  for (size_t at = mod->text.find(".param"); at != std::string::npos; at = mod->text.find(".param", at + 1))
    ++fn->params;
  *f = fn.get();
  mod->functions.push_back(std::move(fn));
  return kOk;
}
CUresult funcGetAttribute(int* v, int attr, void*) {
  switch (attr) {
    case 0: *v = 1024; break;  // max threads per block
    case 1: *v = 2048; break;  // static shared bytes
    case 3: *v = 8; break;     // local bytes a thread
    case 4: *v = 72; break;    // registers a thread
    default: return kInvalidValue;
  }
  return kOk;
}
// An SM holds 2048 threads.
CUresult occupancy(int* n, void* f, int block, size_t dynamicShared) {
  drv.occupancies.push_back(static_cast<const Function*>(f)->entry + " " + std::to_string(block) + " " +
                            std::to_string(dynamicShared));
  *n = 2048 / block;
  return drv.occupancy;
}
CUresult funcSetAttribute(void*, int, int) { return kOk; }
void ran(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned shared, void** params,
         bool dependent) {
  const Function* fn = static_cast<const Function*>(f);
  Ran r{fn->entry, {gx, gy, gz}, bx, shared, {}, dependent};
  for (size_t i = 0; i < fn->params; ++i) r.args.push_back(*static_cast<unsigned long long*>(params[i]));
  ++drv.kernelLaunches;
  (drv.capturing ? drv.capturing->launches : drv.ran).push_back(std::move(r));
}
CUresult launchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned, unsigned,
                      unsigned shared, void*, void** params, void**) {
  ran(f, gx, gy, gz, bx, shared, params, false);
  return kOk;
}
// cuLaunchKernelEx's configuration as cuda.h lays it out.
struct LaunchAttribute {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int value;
  } value;
};
struct LaunchConfig {
  unsigned gx, gy, gz, bx, by, bz, shared;
  void* stream;
  LaunchAttribute* attrs;
  unsigned numAttrs;
};
CUresult launchKernelEx(const LaunchConfig* c, void* f, void** params, void**) {
  // Only the programmatic stream serialization attribute (6), set to 1.
  if (c->numAttrs != 1 || c->attrs[0].id != 6 || c->attrs[0].value.value != 1 || c->by != 1 || c->bz != 1)
    return kInvalidValue;
  ran(f, c->gx, c->gy, c->gz, c->bx, c->shared, params, true);
  return kOk;
}
CUresult streamBeginCapture(void*, int mode) {
  CHECK(mode == 1);  // thread-local
  if (drv.beginCapture != kOk) return drv.beginCapture;
  drv.capturing = new Graph;
  ++drv.graphs;
  return kOk;
}
CUresult streamEndCapture(void*, void** graph) {
  *graph = drv.capturing;
  drv.capturing = nullptr;
  ++drv.captures;
  return kOk;
}
CUresult graphInstantiate(void** exec, void* graph, unsigned long long flags) {
  CHECK(flags == 0);
  *exec = new Graph(*static_cast<Graph*>(graph));
  ++drv.execs;
  return kOk;
}
CUresult graphLaunch(void* exec, void*) {
  const Graph* g = static_cast<const Graph*>(exec);
  drv.ran.insert(drv.ran.end(), g->launches.begin(), g->launches.end());
  ++drv.graphLaunches;
  return kOk;
}
CUresult graphExecDestroy(void* exec) {
  delete static_cast<Graph*>(exec);
  --drv.execs;
  return kOk;
}
CUresult graphDestroy(void* graph) {
  delete static_cast<Graph*>(graph);
  --drv.graphs;
  return kOk;
}

void* symbol(const char* name) {
  static const std::map<std::string, void*> table = {
      {"cuGetErrorName", reinterpret_cast<void*>(&getErrorName)},
      {"cuGetErrorString", reinterpret_cast<void*>(&getErrorString)},
      {"cuInit", reinterpret_cast<void*>(&init)},
      {"cuDriverGetVersion", reinterpret_cast<void*>(&driverGetVersion)},
      {"cuDeviceGetCount", reinterpret_cast<void*>(&deviceGetCount)},
      {"cuDeviceGet", reinterpret_cast<void*>(&deviceGet)},
      {"cuDeviceGetName", reinterpret_cast<void*>(&deviceGetName)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&deviceGetAttribute)},
      {"cuDeviceTotalMem_v2", reinterpret_cast<void*>(&deviceTotalMem)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&primaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease_v2", reinterpret_cast<void*>(&primaryCtxRelease)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&ctxSetCurrent)},
      {"cuCtxSynchronize", reinterpret_cast<void*>(&ctxSynchronize)},
      {"cuStreamCreate", reinterpret_cast<void*>(&streamCreate)},
      {"cuStreamDestroy_v2", reinterpret_cast<void*>(&streamDestroy)},
      {"cuStreamSynchronize", reinterpret_cast<void*>(&streamSynchronize)},
      {"cuEventCreate", reinterpret_cast<void*>(&eventCreate)},
      {"cuEventDestroy_v2", reinterpret_cast<void*>(&eventDestroy)},
      {"cuEventRecord", reinterpret_cast<void*>(&eventRecord)},
      {"cuEventElapsedTime", reinterpret_cast<void*>(&eventElapsedTime)},
      {"cuMemAlloc_v2", reinterpret_cast<void*>(&memAlloc)},
      {"cuMemFree_v2", reinterpret_cast<void*>(&memFree)},
      {"cuMemcpyHtoD_v2", reinterpret_cast<void*>(&memcpyHtoD)},
      {"cuMemcpyDtoH_v2", reinterpret_cast<void*>(&memcpyDtoH)},
      {"cuMemcpyDtoD_v2", reinterpret_cast<void*>(&memcpyDtoD)},
      {"cuModuleLoadDataEx", reinterpret_cast<void*>(&moduleLoadDataEx)},
      {"cuModuleUnload", reinterpret_cast<void*>(&moduleUnload)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&moduleGetFunction)},
      {"cuFuncGetAttribute", reinterpret_cast<void*>(&funcGetAttribute)},
      {"cuFuncSetAttribute", reinterpret_cast<void*>(&funcSetAttribute)},
      {"cuOccupancyMaxActiveBlocksPerMultiprocessor", reinterpret_cast<void*>(&occupancy)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&launchKernel)},
      {"cuLaunchKernelEx", reinterpret_cast<void*>(&launchKernelEx)},
      {"cuStreamBeginCapture_v2", reinterpret_cast<void*>(&streamBeginCapture)},
      {"cuStreamEndCapture", reinterpret_cast<void*>(&streamEndCapture)},
      {"cuGraphInstantiateWithFlags", reinterpret_cast<void*>(&graphInstantiate)},
      {"cuGraphLaunch", reinterpret_cast<void*>(&graphLaunch)},
      {"cuGraphExecDestroy", reinterpret_cast<void*>(&graphExecDestroy)},
      {"cuGraphDestroy", reinterpret_cast<void*>(&graphDestroy)},
  };
  if (drv.missing.count(name)) return nullptr;
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

std::unique_ptr<rt::Backend> openFake(bool replay, std::set<std::string> missing = {}) {
  drv = Driver{};
  drv.missing = std::move(missing);
  auto b = rt::createCudaBackend(rt::CudaOptions{"", replay}, symbol);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  return b.take();
}

std::vector<uint8_t> ptx(const std::string& entry, int params) {
  std::string text = ".version 8.0\n.target sm_90\n.visible .entry " + entry + "(";
  for (int i = 0; i < params; ++i) text += std::string(i ? ", " : "") + ".param .u64 p" + std::to_string(i);
  text += ")\n{\n  ret;\n}\n";
  return {text.begin(), text.end()};
}

// Two kernels and three dispatches over two buffers, at offsets, one kernel
// with 64 KiB of workgroup memory (so launched with that much dynamic
// shared memory), as one program; and what one run of it runs.
struct Program {
  rt::ProgramId id = -1;
  std::vector<Ran> launches;
};

Program record(rt::Backend& b) {
  auto x = b.allocate(4096), y = b.allocate(1024);
  REQUIRE(x);
  REQUIRE(y);
  auto k1 = b.createKernel(ptx("k1", 2), "k1", 128, 0, 2, false);
  auto k2 = b.createKernel(ptx("k2", 1), "k2", 256, 64 * 1024, 1, false);
  REQUIRE(k1);
  REQUIRE(k2);
  std::vector<rt::DispatchCommand> cmds(3);
  cmds[0] = {*k1, {4, 1, 1}, {{*x, 0, 4096}, {*y, 0, 1024}}};
  cmds[1] = {*k2, {2, 3, 1}, {{*x, 256, 512}}};
  cmds[2] = {*k1, {1, 1, 5}, {{*y, 0, 1024}, {*x, 512, 1024}}};
  REQUIRE(drv.allocations.size() == 2);
  unsigned long long px = drv.allocations[0], py = drv.allocations[1];
  Program p;
  p.launches = {{"k1", {4, 1, 1}, 128, 0, {px, py}},
                {"k2", {2, 3, 1}, 256, 64 * 1024, {px + 256}},
                {"k1", {1, 1, 5}, 128, 0, {py, px + 512}}};
  auto id = b.record(cmds);
  REQUIRE_MESSAGE(bool(id), (id ? "" : id.error().str()));
  p.id = *id;
  return p;
}

// Runs the program `runs` times; each run's device time is the fake events'
// 0.25 ms.
void runTimes(rt::Backend& b, const Program& p, int runs) {
  for (int i = 0; i < runs; ++i) {
    REQUIRE(b.lastRunDeviceSeconds() == (i == 0 ? std::nullopt : std::optional<double>(0.25e-3)));
    auto s = b.run(p.id);
    REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  }
  CHECK(b.lastRunDeviceSeconds() == std::optional<double>(0.25e-3));
}

std::vector<Ran> repeated(const std::vector<Ran>& launches, int times) {
  std::vector<Ran> out;
  for (int i = 0; i < times; ++i) out.insert(out.end(), launches.begin(), launches.end());
  return out;
}

}  // namespace

TEST_CASE("runtime cuda replay: a program is captured once and every run launches its graph") {
  auto b = openFake(true);
  CHECK(b->submission() == rt::Submission::Replay);
  CHECK(!b->replayFallback());
  Program p = record(*b);
  // Recording captured the three launches; nothing ran.
  CHECK(drv.captures == 1);
  CHECK(drv.kernelLaunches == 3);
  CHECK(drv.ran.empty());
  CHECK(drv.execs == 1);
  CHECK(drv.graphs == 0);  // the captured graph is destroyed once instantiated
  runTimes(*b, p, 3);
  CHECK(drv.graphLaunches == 3);
  CHECK(drv.kernelLaunches == 3);  // no launch after the capture
  CHECK(drv.ran == repeated(p.launches, 3));

  // An empty program has no graph and runs nothing.
  auto empty = b->record({});
  REQUIRE(empty);
  CHECK(drv.captures == 1);
  CHECK(bool(b->run(*empty)));
  CHECK(drv.graphLaunches == 3);
  b.reset();
  CHECK(drv.execs == 0);  // the backend destroys its graphs
  CHECK(drv.memory.empty());
}

TEST_CASE("runtime cuda replay: without the graph entry points the backend launches in order and says why") {
  for (const char* lacking : {"cuGraphInstantiateWithFlags", "cuStreamBeginCapture_v2", "cuGraphLaunch"}) {
    CAPTURE(lacking);
    auto b = openFake(true, {lacking});
    CHECK(b->submission() == rt::Submission::InOrder);
    auto why = b->replayFallback();
    REQUIRE(why);
    CHECK(why->kind == ErrorKind::Capability);
    CHECK(why->capability == "GraphReplay");
    CHECK(why->message == std::string("cuda graph replay is not available: libcuda.so.1 has no ") + lacking +
                              " (a driver older than cuda 11.4); dispatches are launched in order");
    Program p = record(*b);
    CHECK(drv.kernelLaunches == 0);
    runTimes(*b, p, 2);
    CHECK(drv.captures == 0);
    CHECK(drv.graphLaunches == 0);
    CHECK(drv.kernelLaunches == 6);
    CHECK(drv.ran == repeated(p.launches, 2));
  }
  // A required entry point missing is still a refusal.
  drv = Driver{};
  drv.missing = {"cuLaunchKernel"};
  auto refused = rt::createCudaBackend(rt::CudaOptions{}, symbol);
  REQUIRE(!refused);
  CHECK(refused.error().capability == "Cuda");
  CHECK(refused.error().message ==
        "cuda is not available: libcuda.so.1 has no cuLaunchKernel (the driver is too old)");
}

TEST_CASE("runtime cuda replay: with replay off every run launches in order, with no reason given") {
  auto b = openFake(false);
  CHECK(b->submission() == rt::Submission::InOrder);
  CHECK(!b->replayFallback());
  Program p = record(*b);
  runTimes(*b, p, 2);
  CHECK(drv.captures == 0);
  CHECK(drv.graphLaunches == 0);
  CHECK(drv.ran == repeated(p.launches, 2));
}

TEST_CASE("runtime cuda replay: a capture the driver refuses is an error of record, and nothing is left") {
  auto b = openFake(true);
  drv.beginCapture = kInvalidValue;
  auto x = b->allocate(256);
  auto k = b->createKernel(ptx("k", 1), "k", 32, 0, 1, false);
  REQUIRE(x);
  REQUIRE(k);
  auto refused = b->record({{*k, {1, 1, 1}, {{*x, 0, 256}}}});
  REQUIRE(!refused);
  CHECK(refused.error().kind == ErrorKind::Io);
  CHECK(refused.error().message ==
        "cuda: cuStreamBeginCapture failed (CUDA_ERROR_FAKE: a fake error)");
  CHECK(drv.kernelLaunches == 0);
  CHECK(drv.graphs == 0);
  CHECK(drv.execs == 0);
}

TEST_CASE("runtime cuda replay: a kernel that waits for the previous ones is a dependent launch, captured too") {
  for (bool replay : {true, false}) {
    for (bool hasEx : {true, false}) {
      CAPTURE(replay);
      CAPTURE(hasEx);
      auto b = openFake(replay, hasEx ? std::set<std::string>{} : std::set<std::string>{"cuLaunchKernelEx"});
      auto x = b->allocate(256);
      auto plain = b->createKernel(ptx("plain", 1), "plain", 32, 0, 1, false);
      auto waits = b->createKernel(ptx("waits", 1), "waits", 64, 64 * 1024, 1, true);
      REQUIRE(x);
      REQUIRE(plain);
      REQUIRE(waits);
      auto id = b->record({{*plain, {1, 1, 1}, {{*x, 0, 256}}}, {*waits, {3, 2, 1}, {{*x, 0, 256}}}});
      REQUIRE_MESSAGE(bool(id), (id ? "" : id.error().str()));
      auto s = b->run(*id);
      REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
      unsigned long long px = drv.allocations[0];
      std::vector<Ran> want = {{"plain", {1, 1, 1}, 32, 0, {px}, false},
                               {"waits", {3, 2, 1}, 64, 64 * 1024, {px}, hasEx}};
      CHECK(drv.ran == want);
      CHECK(drv.graphLaunches == (replay ? 1 : 0));
    }
  }
}

TEST_CASE("runtime cuda replay: a profiled program launches in order, each kernel the ordinary way, timed one by one") {
  for (bool replay : {true, false}) {
    CAPTURE(replay);
    auto b = openFake(replay);
    auto x = b->allocate(256);
    auto plain = b->createKernel(ptx("plain", 1), "plain", 32, 0, 1, false);
    auto waits = b->createKernel(ptx("waits", 1), "waits", 64, 64 * 1024, 1, true);
    REQUIRE((x && plain && waits));
    auto id = b->recordProfiled({{*plain, {1, 1, 1}, {{*x, 0, 256}}}, {*waits, {3, 2, 1}, {{*x, 0, 256}}}});
    REQUIRE_MESSAGE(bool(id), (id ? "" : id.error().str()));
    CHECK(drv.captures == 0);
    for (int run = 0; run < 2; ++run) {
      auto s = b->run(*id);
      REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
      // The fake's events are 0.25 ms apart, whichever two.
      CHECK(b->lastRunDispatchSeconds() == std::vector<double>{double(0.25f) * 1e-3, double(0.25f) * 1e-3});
    }
    unsigned long long px = drv.allocations[0];
    std::vector<Ran> want = {{"plain", {1, 1, 1}, 32, 0, {px}, false}, {"waits", {3, 2, 1}, 64, 64 * 1024, {px}, false}};
    CHECK(drv.ran == repeated(want, 2));
    CHECK(drv.graphLaunches == 0);
    // A program recorded the usual way reports no dispatch times.
    auto plainId = b->record({{*plain, {1, 1, 1}, {{*x, 0, 256}}}});
    REQUIRE(plainId);
    REQUIRE(bool(b->run(*plainId)));
    CHECK(b->lastRunDispatchSeconds().empty());
  }
}

TEST_CASE("runtime cuda: what the driver made of each kernel: its attributes and the blocks an SM holds") {
  auto b = openFake(true);
  rt::KernelId small = *b->createKernel(ptx("small", 1), "small", 128, 1024, 1, false);
  rt::KernelId big = *b->createKernel(ptx("big", 1), "big", 256, 64 * 1024, 1, false);
  auto s = b->kernelStats(small);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  CHECK(s->registers == 72);
  CHECK(s->localBytes == 8);
  CHECK(s->workgroupMemoryBytes == 2048);  // the driver's static figure
  CHECK(s->residentWorkgroups == 16);
  CHECK(s->driver ==
        std::vector<std::pair<std::string, std::string>>{{"CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK", "1024"}});
  // Past 48 KiB the kernel's shared memory is dynamic: counted in the
  // figure and in the occupancy.
  s = b->kernelStats(big);
  REQUIRE(s);
  CHECK(s->workgroupMemoryBytes == 2048 + 64 * 1024);
  CHECK(s->residentWorkgroups == 8);
  CHECK(drv.occupancies == std::vector<std::string>{"small 128 0", "big 256 65536"});

  drv.occupancy = kInvalidValue;
  auto refused = b->kernelStats(big);
  REQUIRE(!refused);
  CHECK(refused.error().kind == ErrorKind::Io);
  CHECK(refused.error().message ==
        "cuda: cuOccupancyMaxActiveBlocksPerMultiprocessor for 'big' failed (CUDA_ERROR_FAKE: a fake error)");
  auto none = b->kernelStats(2);
  REQUIRE(!none);
  CHECK(none.error().message == "cuda: no kernel 2");
}

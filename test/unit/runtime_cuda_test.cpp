// Unit tests of the CUDA backend (lib/runtime/backends/cuda.h) that need no
// GPU: on a host without libcuda.so.1, opening the backend is a typed
// Capability error that says the driver could not be loaded (on a host with
// one, the device it opens reports a ptx arch instead); device names become
// profile-style slugs; and a Session, on a fake backend that reports what
// the CUDA backend reports, takes a plan compiled for targets/nvidia-h200.yaml
// on an sm_90 device (or newer), passes each kernel's workgroup memory to
// createKernel, and refuses it on an older sm with a Capability error.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <cstring>

#include "passes/pass.h"
#include "plan/buffers.h"
#include "plan/plan_file.h"
#include "plan/planner.h"
#include "runtime/backends/backends.h"
#include "runtime/backends/cuda.h"
#include "runtime/session.h"
#include "ir/io.h"
#include "testing.h"
#include "../../tools/poot/profile_text.h"

using namespace poot;

namespace {

// A plan for nvidia-h200 as the runtime reads it, kernels without code.
rt::PlanFile h200Plan(const std::string& example) {
  auto text = readFile(testing::exampleGraph(example).string());
  REQUIRE(bool(text));
  Graph g = testing::parse(*text);
  DeviceProfile d = testing::loadTarget("nvidia-h200");
  testing::runPasses(g, d);
  auto p = planGraph(g, d);
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  auto b = planBuffers(*p);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  auto f = rt::readPlanFile(writePlan(*p), "h200.plan");
  REQUIRE_MESSAGE(bool(f), (f ? "" : f.error().str()));
  return f.take();
}

// What the CUDA backend reports on an H200.
rt::DeviceInfo h200Info() {
  rt::DeviceInfo d;
  d.name = "NVIDIA H200";
  d.slug = rt::cudaSlug(d.name);
  d.target = rt::Target::Ptx;
  d.arch = "sm_90";
  d.computeUnits = 132;
  d.workgroupMemoryBytes = 232448;
  d.maxWorkgroupSize = 1024;
  d.subgroupSize = 32;
  d.gridLimits[0] = 2147483647;
  d.gridLimits[1] = d.gridLimits[2] = 65535;
  d.memoryBytes = d.maxBindingBytes = 150109880320;
  d.bindingAlignment = 256;
  d.maxBindings = 512;
  return d;
}

// Host memory for buffers; records the workgroup memory of each kernel.
class FakeCuda final : public rt::Backend {
 public:
  FakeCuda(rt::DeviceInfo info, std::vector<int64_t>* workgroupMemory)
      : info_(std::move(info)), workgroupMemory_(workgroupMemory) {}
  const rt::DeviceInfo& info() const override { return info_; }
  Expected<rt::BufferId> allocate(int64_t bytes) override {
    mem_.emplace_back(size_t(bytes), uint8_t(1));
    return rt::BufferId(mem_.size() - 1);
  }
  Status upload(rt::BufferId b, int64_t offset, const void* data, int64_t bytes) override {
    std::memcpy(mem_[size_t(b)].data() + offset, data, size_t(bytes));
    return ok();
  }
  Status download(rt::BufferId b, int64_t offset, void* data, int64_t bytes) override {
    std::memcpy(data, mem_[size_t(b)].data() + offset, size_t(bytes));
    return ok();
  }
  Status copy(rt::BufferId src, rt::BufferId dst, int64_t bytes) override {
    std::memcpy(mem_[size_t(dst)].data(), mem_[size_t(src)].data(), size_t(bytes));
    return ok();
  }
  Expected<rt::KernelId> createKernel(const std::vector<uint8_t>&, const std::string&, int64_t,
                                      int64_t workgroupMemory, int, bool) override {
    workgroupMemory_->push_back(workgroupMemory);
    return rt::KernelId(workgroupMemory_->size() - 1);
  }
  Expected<rt::ProgramId> record(const std::vector<rt::DispatchCommand>&) override { return programs_++; }
  Status run(rt::ProgramId) override { return ok(); }
  rt::Submission submission() const override { return rt::Submission::Replay; }

 private:
  rt::DeviceInfo info_;
  std::vector<int64_t>* workgroupMemory_;
  std::vector<std::vector<uint8_t>> mem_;
  int programs_ = 0;
};

Expected<std::unique_ptr<rt::Session>> session(rt::PlanFile p, rt::DeviceInfo info, std::vector<int64_t>* wm) {
  for (rt::Kernel& k : p.kernels) k.blob.assign({'/', '/'});
  return rt::Session::create(std::move(p), std::make_unique<FakeCuda>(std::move(info), wm));
}

}  // namespace

TEST_CASE("runtime cuda: without libcuda.so.1 the backend is a capability refusal") {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto b = rt::openBackend("cuda", "");
  if (lib) {
    dlclose(lib);
    // A CUDA host: the backend opens (or the driver says why not).
    if (b) {
      CHECK((*b)->info().target == rt::Target::Ptx);
      CHECK((*b)->info().arch.rfind("sm_", 0) == 0);
    } else {
      MESSAGE("libcuda.so.1 loads but the backend does not open: " << b.error().str());
    }
    return;
  }
  REQUIRE(!b);
  CHECK(b.error().kind == ErrorKind::Capability);
  CHECK(b.error().capability == "Cuda");
  CHECK(b.error().message.find("cuda is not available: cannot load libcuda.so.1") != std::string::npos);
}

TEST_CASE("runtime cuda: device names become profile slugs") {
  CHECK(rt::cudaSlug("NVIDIA H200") == "nvidia-h200");
  CHECK(rt::cudaSlug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3");
  CHECK(rt::cudaSlug("NVIDIA GeForce RTX 4090") == "nvidia-geforce-rtx-4090");
  CHECK(rt::cudaSlug("Tesla V100-SXM2-16GB") == "nvidia-tesla-v100-sxm2-16gb");
  CHECK(rt::cudaSlug("nvidia  a100 (pcie)") == "nvidia-a100");
}

// poot probe --backend cuda: an H200 as the CUDA backend reports it (the
// attributes read on the project's H200) gives the shipped profile's every
// figure, under the comments of CUDA's attributes, not Vulkan's queries.
TEST_CASE("runtime cuda: poot probe's profile of an H200 is targets/nvidia-h200.yaml's") {
  rt::DeviceInfo d;
  d.name = "NVIDIA H200";
  d.slug = "nvidia-h200";
  d.target = rt::Target::Ptx;
  d.arch = "sm_90a";  // compute capability 9.0 probes as its arch-specific ptx, for wgmma
  d.driver = "cuda 13.0";
  d.computeUnits = 132;
  d.workgroupMemoryBytes = 232448;
  d.maxWorkgroupSize = 1024;
  d.subgroupSize = 32;
  d.gridLimits[0] = 2147483647, d.gridLimits[1] = 65535, d.gridLimits[2] = 65535;
  d.memoryBytes = d.maxBindingBytes = 150109880320;
  d.maxBindings = 512;
  d.f16 = d.bf16 = {true, true, true};
  d.matrixOps = {MatrixOp::M64NK16Bf16, MatrixOp::M64NK16F16, MatrixOp::M16N8K16Bf16, MatrixOp::M16N8K16F16,
                 MatrixOp::M16N8K8Tf32};
  std::string text = profileText(d);
  CHECK(text.find("# CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT.\ncompute_units: 132\n") != std::string::npos);
  CHECK(text.find("maxComputeSharedMemorySize") == std::string::npos);
  auto probed = parseProfile(text, "probed.yaml");
  REQUIRE_MESSAGE(bool(probed), (probed ? "" : probed.error().str()));
  DeviceProfile shipped = testing::loadTarget("nvidia-h200");
  CHECK(probed->name == shipped.name);
  CHECK(probed->target == shipped.target);
  CHECK(probed->arch == shipped.arch);
  CHECK(probed->compute_units == shipped.compute_units);
  CHECK(probed->workgroup_memory_bytes == shipped.workgroup_memory_bytes);
  CHECK(probed->max_workgroup_size == shipped.max_workgroup_size);
  CHECK(probed->subgroup_size == shipped.subgroup_size);
  for (int i = 0; i < 3; ++i) CHECK(probed->grid_limits[i] == shipped.grid_limits[i]);
  CHECK(probed->max_buffer_bytes == shipped.max_buffer_bytes);
  CHECK(probed->max_bindings == shipped.max_bindings);
  CHECK(probed->memory_bytes == shipped.memory_bytes);
  for (auto [a, b] : {std::pair{probed->f16, shipped.f16}, {probed->bf16, shipped.bf16}})
    CHECK((a.storage == b.storage && a.arith == b.arith && a.select == b.select));
  CHECK(probed->matrix_ops == shipped.matrix_ops);
  // Every figure but the measured bandwidth, which the probe leaves out
  // (it reads the driver, it measures nothing): with the shipped figure
  // written in, the probed profile hashes as the shipped one does.
  CHECK(probed->memory_bandwidth_bytes_per_s == 0);
  probed->memory_bandwidth_bytes_per_s = shipped.memory_bandwidth_bytes_per_s;
  CHECK(profileHash(*probed) == profileHash(shipped));
}

TEST_CASE("runtime cuda: a ptx plan runs on its sm or newer, not on an older one") {
  // The H200 profile's plans are arch-specific (sm_90a, for wgmma); the
  // same plan for sm_90 runs on newer sms too.
  rt::PlanFile plan = h200Plan("decode-attention.pg");
  REQUIRE(plan.device.target == rt::Target::Ptx);
  REQUIRE(plan.device.arch == "sm_90a");
  plan.device.arch = "sm_90";

  std::vector<int64_t> wm;
  auto s = session(plan, h200Info(), &wm);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));
  // One createKernel per kernel a dispatch uses, with the plan's workgroup memory.
  std::vector<int64_t> planned;
  for (const rt::Kernel& k : plan.kernels)
    for (const rt::Dispatch& d : plan.dispatches)
      if (&plan.kernels[size_t(d.kernel)] == &k) {
        planned.push_back(k.workgroupMemory);
        break;
      }
  CHECK(wm == planned);

  rt::DeviceInfo newer = h200Info();
  newer.arch = "sm_100";
  CHECK(bool(session(plan, newer, &wm)));

  rt::DeviceInfo older = h200Info();
  older.arch = "sm_80";
  auto refused = session(plan, older, &wm);
  REQUIRE(!refused);
  CHECK(refused.error().kind == ErrorKind::Capability);
  CHECK(refused.error().capability == "Device");
  CHECK(refused.error().message ==
        "the plan's kernels are ptx for sm_90, device 'NVIDIA H200' is sm_80");

  // Arch-specific ptx (sm_90a) runs only on its own sm.
  rt::PlanFile specific = plan;
  specific.device.arch = "sm_90a";
  CHECK(bool(session(specific, h200Info(), &wm)));
  CHECK(!session(specific, newer, &wm));
}

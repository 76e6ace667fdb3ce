// A fake backend for the runtime's and the engine's tests: host memory
// for buffers, kernels and programs only counted, every allocation and
// transfer logged, and a DeviceInfo like lavapipe's, so a Session (or an
// engine of two) runs its binds and its bookkeeping with no device; and the
// plans it runs, compiled for lavapipe without kernel code.
#pragma once

#include <cstring>
#include <utility>
#include <vector>

#include <doctest/doctest.h>

#include "ir/io.h"
#include "passes/pass.h"
#include "plan/buffers.h"
#include "plan/plan_file.h"
#include "plan/planner.h"
#include "runtime/backend.h"
#include "runtime/plan_reader.h"
#include "testing.h"

namespace poot::testing {

// What a FakeBackend was asked to do: counts, and every allocation and
// transfer with its buffer and bytes.
struct Calls {
  int uploads = 0, runs = 0, copies = 0;
  std::vector<int64_t> allocations;                          // bytes, in order (the buffer id is the index)
  std::vector<std::pair<rt::BufferId, int64_t>> uploaded;    // (buffer, bytes) of each upload
  std::vector<std::pair<rt::BufferId, int64_t>> downloaded;  // (buffer, bytes) of each download
  int failRuns = 0;      // the next runs to fail (an Io error), then counted down
  int failDownload = 0;  // n > 0: the n-th download from now fails (an Io error); 0: none
};

// Host memory for buffers; kernels and programs are only counted. Fresh
// buffers hold 0x01 bytes, so every witness reads true.
class FakeBackend final : public rt::Backend {
 public:
  FakeBackend(rt::DeviceInfo info, Calls* calls) : info_(std::move(info)), calls_(calls) {}
  const rt::DeviceInfo& info() const override { return info_; }
  Expected<rt::BufferId> allocate(int64_t bytes) override {
    mem_.emplace_back(size_t(bytes), uint8_t(1));
    calls_->allocations.push_back(bytes);
    return rt::BufferId(mem_.size() - 1);
  }
  Status upload(rt::BufferId b, int64_t offset, const void* data, int64_t bytes) override {
    ++calls_->uploads;
    calls_->uploaded.emplace_back(b, bytes);
    REQUIRE(size_t(offset + bytes) <= mem_[size_t(b)].size());
    std::memcpy(mem_[size_t(b)].data() + offset, data, size_t(bytes));
    return ok();
  }
  Status download(rt::BufferId b, int64_t offset, void* data, int64_t bytes) override {
    if (calls_->failDownload > 0 && --calls_->failDownload == 0)
      return makeError(ErrorKind::Io, {}, "the fake device failed a download");
    calls_->downloaded.emplace_back(b, bytes);
    REQUIRE(size_t(offset + bytes) <= mem_[size_t(b)].size());
    std::memcpy(data, mem_[size_t(b)].data() + offset, size_t(bytes));
    return ok();
  }
  Status copy(rt::BufferId src, rt::BufferId dst, int64_t bytes) override {
    ++calls_->copies;
    std::memcpy(mem_[size_t(dst)].data(), mem_[size_t(src)].data(), size_t(bytes));
    return ok();
  }
  Expected<rt::KernelId> createKernel(const std::vector<uint8_t>&, const std::string&, int64_t, int64_t, int,
                                      bool) override {
    return kernels_++;
  }
  Expected<rt::ProgramId> record(const std::vector<rt::DispatchCommand>&) override { return programs_++; }
  Status run(rt::ProgramId) override {
    if (calls_->failRuns > 0) {
      --calls_->failRuns;
      return makeError(ErrorKind::Io, {}, "the fake device failed a run");
    }
    ++calls_->runs;
    return ok();
  }
  rt::Submission submission() const override { return rt::Submission::Replay; }

 private:
  rt::DeviceInfo info_;
  Calls* calls_;
  std::vector<std::vector<uint8_t>> mem_;
  int kernels_ = 0, programs_ = 0;
};

// What lavapipe reports.
inline rt::DeviceInfo lavapipeInfo() {
  rt::DeviceInfo d;
  d.name = "llvmpipe (fake)";
  d.slug = "lavapipe";
  d.arch = "vulkan1.3";
  d.workgroupMemoryBytes = 32768;
  d.maxWorkgroupSize = 1024;
  d.subgroupSize = 8;
  for (int64_t& g : d.gridLimits) g = 65535;
  d.maxBindingBytes = int64_t(1) << 27;
  d.maxBindings = 32;
  d.memoryBytes = int64_t(1) << 31;
  return d;
}

// Every kernel gets placeholder code (the fake backend does not read it).
inline rt::PlanFile withPlaceholderCode(rt::PlanFile p) {
  for (rt::Kernel& k : p.kernels) k.blob = {3, 2, 0x23, 7};
  return p;
}

// Compiles graph text for lavapipe into plan file bytes. Kernels have no
// code (the tests give them some).
inline std::string planBytes(const std::string& text) {
  Graph g = testing::parse(text);
  DeviceProfile d = testing::loadTarget("lavapipe");
  testing::runPasses(g, d);
  auto p = planGraph(g, d);
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  auto b = planBuffers(*p);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  return writePlan(*p);
}

// The plan as the runtime reads it.
inline rt::PlanFile compilePlan(const std::string& text) {
  auto f = rt::readPlanFile(planBytes(text), "t.plan");
  REQUIRE_MESSAGE(bool(f), (f ? "" : f.error().str()));
  return f.take();
}

inline std::string exampleText(const std::string& name) {
  auto text = readFile(testing::exampleGraph(name).string());
  REQUIRE(bool(text));
  return *text;
}

inline rt::PlanFile compileExample(const std::string& name) { return compilePlan(exampleText(name)); }

}  // namespace poot::testing

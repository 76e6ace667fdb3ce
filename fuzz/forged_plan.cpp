// libFuzzer target: forged plans, loaded and run. Where the `plan` target
// stops at the reader, this one goes on as `poot run` does: a plan the
// reader accepts gets a Session on lavapipe (its kernels built, so each
// SPIR-V blob reaches the driver), its weights and inputs bound (zeros; each
// slot word at the bottom of its declared range) and one step run. The
// custom mutator rewrites the checksum after every mutation
// (sealPlanChecksum), so every input it makes, and every one it keeps in the
// corpus, is a plan someone edited with care: `poot run` on it gets past the
// checksum too. Anything but a typed error or a run is a finding: a crash in
// the runtime or inside the Vulkan driver, a sanitizer report, a hang.
//
// The harness skips, as out of its scope, a plan whose buffers and arena
// hold more than 64 MiB in all (it would only measure the machine's memory),
// and does nothing where no lavapipe device is found (it says so once).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "oracle/tensor.h"
#include "plan/plan_file.h"
#include "runtime/backends/vulkan.h"
#include "runtime/plan_reader.h"
#include "runtime/session.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max, unsigned int) {
  size = LLVMFuzzerMutate(data, size, max);
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (poot::sealPlanChecksum(bytes)) std::memcpy(data, bytes.data(), size);
  return size;
}

namespace {

std::shared_ptr<poot::rt::Backend> lavapipe() {
  static std::shared_ptr<poot::rt::Backend> backend = [] {
    // Mesa's shader cache only where the caller names one (scripts/fuzz.sh
    // does: unchanged kernels then skip the driver's compiler).
    if (!std::getenv("MESA_SHADER_CACHE_DIR")) setenv("MESA_SHADER_CACHE_DISABLE", "true", 0);
    auto b = poot::rt::createVulkanBackend({"lavapipe"});
    if (!b) {
      std::fprintf(stderr, "fuzz_forged_plan: no lavapipe (%s): plans are only read\n", b.error().str().c_str());
      return std::shared_ptr<poot::rt::Backend>();
    }
    return std::shared_ptr<poot::rt::Backend>(b.take());
  }();
  return backend;
}

void setWord(poot::Tensor& t, int64_t i, int64_t v) {
  if (t.type.dtype == poot::DType::I64) std::memcpy(t.bytes.data() + 8 * i, &v, 8);
  else if (t.type.dtype == poot::DType::I32) {
    int32_t w = int32_t(v);
    std::memcpy(t.bytes.data() + 4 * i, &w, 4);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace poot;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto plan = rt::readPlanFile(bytes, "forged.plan");
  if (!plan) return 0;
  int64_t total = plan->arenaBytes;
  for (const rt::Buffer& b : plan->buffers) total += b.inArena() ? 0 : b.bytes;
  if (total > (int64_t(64) << 20)) return 0;
  auto backend = lavapipe();
  if (!backend) return 0;
  std::map<std::string, Tensor> weights, inputs;
  for (const rt::Buffer& b : plan->buffers)
    if (b.role == rt::Role::Weight) weights.emplace(b.name, Tensor(b.type));
    else if (b.role == rt::Role::Input) inputs.emplace(b.name, Tensor(b.type));
  for (const rt::Slot& s : plan->slots) {
    Tensor t(plan->buffers[size_t(s.buffer)].type);
    for (int64_t i = 0; i < numel(t.type.shape); ++i) setWord(t, i, s.lo);
    inputs[s.name] = std::move(t);
  }
  rt::SessionOptions opts;
  opts.allowOtherDevice = true;
  auto session = rt::Session::create(plan.take(), backend, opts);
  if (!session) return 0;
  if (!(*session)->bindWeights(weights)) return 0;
  (void)(*session)->step(inputs);
  return 0;
}

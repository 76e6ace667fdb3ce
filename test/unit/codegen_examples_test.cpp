// The end-to-end check of code generation on real graphs: every example graph
// (examples/graphs/*.pg) is compiled for every device profile (targets/*.yaml)
// the way pootc compile does it (the pass pipeline with the profile's grid
// limits, planGraph, planBuffers, the memory budget, then the KIR of every
// kernel), and every emitted kernel is checked for its target. SPIR-V plans
// go through emitKernels, which must succeed, and every module must pass
// SPIRV-Tools validation, as written and with its local indices bounded as
// the Vulkan backend bounds them (runtime/spirv_bounds.h). For PTX and HSACO, which LLVM makes from the KIR
// alone, each kernel whose KIR is new to the profile (equal KIR under another
// entry name counts as seen) is compiled once with the profile's Lowering, as
// emitKernels would: an HSACO costs an LLVM compile and a link, and the
// example graphs share most kernels. PTX must pass the text checks of kernel_checks.h and
// assemble with ptxas for the profile's arch (when ptxas is installed); HSACO
// must be an AMDGPU ELF64 whose kernel descriptor records the workgroup
// memory of the kernel's KIR. A pair the planner refuses with a capability
// error is allowed and listed in a message; any other failure fails the test,
// as does a profile for which every graph is refused.
#include <doctest/doctest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "codegen/kir/print.h"
#include "codegen/llvm/llvm.h"
#include "codegen/spirv/spirv.h"
#include "kernel_checks.h"
#include "passes/pass.h"
#include "plan/buffers.h"
#include "runtime/spirv_bounds.h"
#include "plan/planner.h"
#include "testing.h"

using namespace poot;
using namespace poot::testing;

namespace {

// The plan of g on d as pootc compile makes it, before code generation.
Expected<Plan> planFor(const Graph& g, const DeviceProfile& d) {
  auto plan = planGraph(g, d);
  if (!plan) return plan.error();
  if (auto s = planBuffers(*plan); !s) return s.error();
  if (auto s = checkMemoryBudget(*plan, d); !s) return s.error();
  return plan;
}

// A blob of SPIR-V words, stored little-endian, as words.
std::vector<uint32_t> spirvWords(const std::vector<uint8_t>& blob) {
  REQUIRE(blob.size() % 4 == 0);
  std::vector<uint32_t> words(blob.size() / 4);
  for (size_t w = 0; w < words.size(); ++w)
    for (int b = 0; b < 4; ++b) words[w] |= uint32_t(blob[w * 4 + size_t(b)]) << (8 * b);
  return words;
}

// The KIR as text under a fixed entry name: kernels equal in it compile to
// the same code but for the name.
std::string kirModuloEntry(const kir::Kernel& k) {
  kir::Kernel renamed = k;
  renamed.entry = "kernel";
  return kir::print(renamed);
}

}  // namespace

TEST_CASE("codegen examples: every kernel of every example graph on every profile passes its target's checks") {
  const std::string ptxas = ptxasPath();
  if (ptxas.empty()) MESSAGE("ptxas not found: the ptx is checked but not assembled");
  std::vector<std::string> refused;
  for (const auto& profilePath : filesIn(sourceDir() / "targets", "", ".yaml")) {
    DeviceProfile d = loadTarget(profilePath.stem().string());
    std::unique_ptr<llvmgen::Lowering> lowering;
    if (d.target != Target::Spirv) {
      auto l = llvmgen::Lowering::create(d.target, d.arch);
      REQUIRE_MESSAGE(bool(l), d.name << ": " << (l ? "" : l.error().str()));
      lowering = l.take();
    }
    std::set<std::string> seen;  // kirModuloEntry of each kernel compiled for d
    int compiled = 0;
    for (const auto& graphPath : exampleGraphs()) {
      const std::string pair = d.name + " / " + graphPath.filename().string();
      INFO(pair);
      Graph g = loadGraphFile(graphPath);
      PassContext ctx;
      for (int i = 0; i < 3; ++i) ctx.gridLimits[i] = d.grid_limits[i];
      ctx.maxBindings = d.max_bindings;
      if (auto s = runPipeline(g, ctx, {}); !s) {
        FAIL_CHECK(s.error().str());
        continue;
      }
      auto plan = planFor(g, d);
      if (!plan && plan.error().kind == ErrorKind::Capability) {
        refused.push_back(pair + ": " + plan.error().str());  // its check in brackets
        continue;
      }
      if (!plan) {
        FAIL_CHECK(plan.error().str());
        continue;
      }
      auto kernels = generateKir(*plan, d);
      if (!kernels) {
        FAIL_CHECK(kernels.error().str());
        continue;
      }
      ++compiled;
      if (!lowering) {
        auto emitted = emitKernels(*plan, d, *kernels);
        CHECK_MESSAGE(bool(emitted), (emitted ? "" : emitted.error().str()));
        if (!emitted) continue;
        for (const Kernel& k : plan->kernels) {
          auto valid = spirv::validate(spirvWords(k.blob));
          CHECK_MESSAGE(bool(valid), k.entry << ": " << (valid ? "" : valid.error().str()));
          // And as the Vulkan backend hands it to the driver, its local
          // indices bounded.
          auto bounded = rt::boundLocalIndices(spirvWords(k.blob));
          REQUIRE_MESSAGE(bool(bounded), k.entry << ": " << (bounded ? "" : bounded.error().str()));
          auto boundedValid = spirv::validate(*bounded);
          CHECK_MESSAGE(bool(boundedValid),
                        k.entry << " bounded: " << (boundedValid ? "" : boundedValid.error().str()));
        }
        continue;
      }
      for (const kir::Kernel& k : *kernels) {
        if (!seen.insert(kirModuloEntry(k)).second) continue;
        INFO("kernel " << k.entry);
        auto blob = lowering->compile(k);
        CHECK_MESSAGE(bool(blob), (blob ? "" : blob.error().str()));
        if (!blob) continue;
        if (d.target == Target::Hsaco) {
          checkHsaco(k, *blob);
          continue;
        }
        std::string ptx(blob->begin(), blob->end());
        checkPtxText(k, ptx);
        if (!ptxas.empty()) checkPtxAssembles(ptxas, d.arch, ptx, pair + " kernel " + k.entry);
      }
    }
    CHECK_MESSAGE(compiled > 0, d.name << ": every example graph was refused");
    if (lowering) MESSAGE(d.name << ": " << seen.size() << " distinct kernels compiled and checked");
  }
  std::string list;
  for (const std::string& r : refused) list += "\n  " + r;
  MESSAGE(refused.size() << " profile/graph pairs refused by the planner:" << list);
}

// The driver loop: KIR for every kernel, legalized for the target
// (kir/legalize.h), then one emitter for the target. PTX and HSACO kernels are compiled by LLVM on one thread per core, each
// thread with its own lowering (llvm.h), and come back in kernel order;
// SPIR-V modules are written and validated one after another.
#include "codegen/codegen.h"

#include <thread>

#include "codegen/gen/generators.h"
#include "codegen/kir/legalize.h"
#include "codegen/kir/verify.h"
#include "codegen/llvm/llvm.h"
#include "codegen/spirv/spirv.h"
#include "plan/request.h"

namespace poot {

namespace {

// The first dispatch of each kernel: its grid fixes the kernel's fold, and
// its eqn is where a refusal points.
std::vector<const Dispatch*> firstDispatches(const Plan& p) {
  std::vector<const Dispatch*> first(p.kernels.size(), nullptr);
  for (auto it = p.dispatches.rbegin(); it != p.dispatches.rend(); ++it) first[size_t(it->kernel)] = &*it;
  return first;
}

Error inKernel(const Plan& p, const Dispatch* d, const Kernel& k, const Error& e) {
  Error out = e;
  if (d && out.loc.file.empty()) out.loc = p.source.eqns[size_t(d->eqn)].loc;
  out.message = "kernel " + k.entry + " (" + printRequest(k.request) + "): " + e.message;
  return out;
}

}  // namespace

Expected<std::vector<kir::Kernel>> generateKir(const Plan& p, const DeviceProfile& d) {
  std::vector<const Dispatch*> first = firstDispatches(p);
  std::vector<kir::Kernel> out;
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const Kernel& k = p.kernels[i];
    const Dispatch* f = first[i];
    std::array<int64_t, 3> grid = {0, 0, 0};
    if (f) grid = {f->grid[0], f->grid[1], f->grid[2]};
    auto kernel = generateKernel(GenInput{k.request, d, k.entry, grid});
    if (!kernel) return inKernel(p, f, k, kernel.error());
    if (auto s = kir::verify(*kernel); !s) return inKernel(p, f, k, s.error());
    // The plan records the schedule's workgroup memory, which the runtime
    // checks against the device and a CUDA launch passes on: it must be
    // what the kernel declares.
    if (kernel->sharedBytes() != k.request.schedule.workgroupMemory)
      return inKernel(p, f, k,
                      makeError(ErrorKind::Verify, {},
                                "internal: the kernel declares " + std::to_string(kernel->sharedBytes()) +
                                    " bytes of workgroup memory, its schedule " +
                                    std::to_string(k.request.schedule.workgroupMemory)));
    out.push_back(std::move(*kernel));
  }
  return out;
}

Status generateKernels(Plan& p, const DeviceProfile& d) {
  auto kernels = generateKir(p, d);
  if (!kernels) return kernels.error();
  return emitKernels(p, d, *kernels);
}

Status emitKernels(Plan& p, const DeviceProfile& d, const std::vector<kir::Kernel>& generated) {
  std::vector<const Dispatch*> first = firstDispatches(p);
  std::vector<kir::Kernel> kernels = generated;
  for (kir::Kernel& k : kernels) kir::legalize(k, d.target);
  if (d.target != Target::Spirv) {
    auto blobs = llvmgen::compileKernels(d.target, d.arch, kernels, std::thread::hardware_concurrency());
    if (!blobs) return blobs.error();
    for (size_t i = 0; i < kernels.size(); ++i) {
      auto& blob = (*blobs)[i];
      if (!blob) return inKernel(p, first[i], p.kernels[i], blob.error());
      p.kernels[i].blob = blob.take();
    }
    return ok();
  }
  for (size_t i = 0; i < kernels.size(); ++i) {
    Kernel& k = p.kernels[i];
    auto words = spirv::emit(kernels[i]);
    if (!words) return inKernel(p, first[i], k, words.error());
    if (auto s = spirv::validate(*words); !s) return inKernel(p, first[i], k, s.error());
    k.blob.resize(words->size() * 4);
    for (size_t w = 0; w < words->size(); ++w)
      for (int b = 0; b < 4; ++b) k.blob[w * 4 + size_t(b)] = uint8_t((*words)[w] >> (8 * b));
  }
  return ok();
}

}  // namespace poot

// The Lowering: only the NVPTX and AMDGPU targets are initialized (once per
// process), one TargetMachine is made per Lowering (PTX ISA 8.0 for NVPTX:
// the first with sm_90a, and one CUDA 13's ptxas accepts), and
// each kernel gets a fresh LLVMContext, its module (module.h), the new pass
// manager's O2 pipeline with the target's own passes, then the legacy
// codegen pipeline into memory; compileKernels runs that on several threads,
// one target machine each (LLVM shares nothing else between them), and
// links the HSACO objects once they have all been made. PTX is that assembly text; HSACO is the
// object linked by lld in process (link.h). The context's error diagnostics (an
// AMDGPU kernel over its arch's LDS, say) are collected and returned as an
// error instead of LLVM's default, which prints them and exits.
#include "codegen/llvm/llvm.h"

#include "codegen/codegen.h"

#include <llvm/Config/llvm-config.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <thread>

#include "codegen/llvm/link.h"
#include "codegen/llvm/module.h"

namespace poot::llvmgen {

namespace {

void initializeTargets() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
  });
}

// A Capability error; `check` is TargetArch (no such target or arch) or
// LlvmBackend (the backend refused the kernel).
Error capability(const char* check, std::string message) {
  Error e = makeError(ErrorKind::Capability, Loc{}, std::move(message));
  e.capability = check;
  return e;
}

// One kernel's LLVM context and the errors LLVM reported in it.
struct KernelContext {
  llvm::LLVMContext ctx;
  std::string errors;

  KernelContext() { ctx.setDiagnosticHandlerCallBack(&KernelContext::handle, this); }

  static void handle(const llvm::DiagnosticInfo* info, void* self) {
    if (info->getSeverity() != llvm::DS_Error) return;
    std::string text;
    llvm::raw_string_ostream os(text);
    llvm::DiagnosticPrinterRawOStream printer(os);
    info->print(printer);
    if (text.rfind("<unknown>:0:0: ", 0) == 0) text.erase(0, 15);
    std::string& errors = static_cast<KernelContext*>(self)->errors;
    errors += (errors.empty() ? "" : "; ") + text;
  }
};

class LlvmLowering final : public Lowering {
 public:
  LlvmLowering(Target target, std::unique_ptr<llvm::TargetMachine> tm) : target_(target), tm_(std::move(tm)) {}

  Expected<std::vector<uint8_t>> compile(const kir::Kernel& k) override {
    auto code = emit(k);
    if (!code || target_ == Target::Ptx) return code;
    return linkHsaco(*code);
  }

  Expected<std::vector<uint8_t>> emit(const kir::Kernel& k) override {
    KernelContext kc;
    auto m = optimized(k, kc.ctx);
    if (!m) return m.error();
    llvm::SmallVector<char, 0> code;
    llvm::raw_svector_ostream os(code);
    llvm::legacy::PassManager pm;
    auto type = target_ == Target::Ptx ? llvm::CodeGenFileType::AssemblyFile : llvm::CodeGenFileType::ObjectFile;
    if (tm_->addPassesToEmitFile(pm, os, nullptr, type))
      return capability("LlvmBackend", "the llvm target machine cannot emit this file type");
    pm.run(**m);
    if (!kc.errors.empty()) return capability("LlvmBackend", "llvm refused " + k.entry + ": " + kc.errors);
    return std::vector<uint8_t>(code.begin(), code.end());
  }

  std::string llvmIr(const kir::Kernel& k) override {
    KernelContext kc;
    auto m = optimized(k, kc.ctx);
    if (!m) return "; error: " + m.error().message + "\n";
    std::string text;
    llvm::raw_string_ostream os(text);
    (*m)->print(os, nullptr);
    return text;
  }

 private:
  Expected<std::unique_ptr<llvm::Module>> optimized(const kir::Kernel& k, llvm::LLVMContext& ctx) {
    auto m = buildModule(k, target_, *tm_, ctx);
    if (!m) return m.error();
    std::string problems;
    llvm::raw_string_ostream os(problems);
    if (llvm::verifyModule(**m, &os))
      return makeError(ErrorKind::Verify, Loc{}, "the llvm module of " + k.entry + " is broken: " + problems);
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(tm_.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(**m, mam);
    return m;
  }

  Target target_;
  std::unique_ptr<llvm::TargetMachine> tm_;
};

}  // namespace

Expected<std::unique_ptr<Lowering>> Lowering::create(Target target, const std::string& arch) {
  if (target == Target::Spirv) return capability("TargetArch", "spirv is not an llvm target");
  initializeTargets();
  std::string triple = target == Target::Ptx ? "nvptx64-nvidia-cuda" : "amdgcn-amd-amdhsa";
  std::string problem;
  const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, problem);
  if (!t) return capability("TargetArch", "llvm has no target " + triple + ": " + problem);
  std::unique_ptr<llvm::MCSubtargetInfo> sti(t->createMCSubtargetInfo(triple, "", ""));
  if (!sti || !sti->isCPUStringValid(arch))
    return capability("TargetArch", "llvm 19 has no " + std::string(targetName(target)) + " arch " + arch);
  std::string features = target == Target::Ptx ? "+ptx80" : "";
  std::unique_ptr<llvm::TargetMachine> tm(t->createTargetMachine(
      triple, arch, features, llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt, llvm::CodeGenOptLevel::Default));
  if (!tm) return capability("TargetArch", "llvm cannot make a target machine for " + triple + " " + arch);
  return std::unique_ptr<Lowering>(std::make_unique<LlvmLowering>(target, std::move(tm)));
}

Expected<std::vector<Expected<std::vector<uint8_t>>>> compileKernels(Target target, const std::string& arch,
                                                                     const std::vector<kir::Kernel>& kernels,
                                                                     unsigned threads) {
  size_t workers = std::clamp<size_t>(threads, 1, std::max<size_t>(kernels.size(), 1));
  std::vector<std::unique_ptr<Lowering>> lowerings;
  for (size_t w = 0; w < workers; ++w) {
    auto l = Lowering::create(target, arch);
    if (!l) return l.error();
    lowerings.push_back(std::move(*l));
  }
  // The largest kernels first, so that no worker starts a long one last.
  std::vector<size_t> order(kernels.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return kernels[a].insts.size() > kernels[b].insts.size(); });
  std::vector<Expected<std::vector<uint8_t>>> blobs(kernels.size(), std::vector<uint8_t>{});
  std::atomic<size_t> next = 0;
  auto work = [&](Lowering& l) {
    for (size_t n = next++; n < order.size(); n = next++) blobs[order[n]] = l.emit(kernels[order[n]]);
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(work, std::ref(*lowerings[w]));
  work(*lowerings[0]);
  for (std::thread& t : pool) t.join();
  // lld (re)initializes every LLVM target at each link, which must not
  // overlap a compile on another thread: the links come after, in order.
  if (target == Target::Hsaco)
    for (auto& blob : blobs)
      if (blob) blob = linkHsaco(*blob);
  return blobs;
}

}  // namespace poot::llvmgen

namespace poot {

std::string llvmVersion() { return LLVM_VERSION_STRING; }

}  // namespace poot

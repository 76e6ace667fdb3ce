// LLVM lowering: a KIR kernel as LLVM IR, then machine code for the profile's
// target with LLVM 19: NVPTX -> PTX text for the profile's sm, AMDGPU -> an
// object linked by lld (in process, as `ld.lld -shared`) into an HSACO code
// object for its gfx.
// Storage buffers are kernel pointer parameters in address space 1 in
// binding order; workgroup arrays are address space 3 globals (on NVPTX past
// 48 KiB, offsets into the one dynamic shared array, so a launch passes the
// kernel's workgroup memory as its dynamic shared size); thread and
// workgroup ids are the target's intrinsics. A Lowering holds one target
// machine, which compiles one kernel at a time; compileKernels spreads a
// plan's kernels over threads, each with a Lowering of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codegen/kir/kir.h"
#include "ir/diag.h"
#include "plan/profile.h"

namespace poot::llvmgen {

class Lowering {
 public:
  // Fails with a Capability error when LLVM has no target for the arch.
  static Expected<std::unique_ptr<Lowering>> create(Target target, const std::string& arch);
  virtual ~Lowering() = default;

  // The kernel's blob: PTX text (ptx) or the HSACO ELF (hsaco).
  virtual Expected<std::vector<uint8_t>> compile(const kir::Kernel& k) = 0;
  // What LLVM makes of the kernel before any link: the PTX text, or the
  // AMDGPU relocatable object that linkHsaco (link.h) makes the HSACO of.
  virtual Expected<std::vector<uint8_t>> emit(const kir::Kernel& k) = 0;
  // The LLVM IR module as text, for tests and debugging.
  virtual std::string llvmIr(const kir::Kernel& k) = 0;
};

// Every kernel's blob, in kernel order, emitted on up to `threads` threads
// (at most one per kernel), each with its own Lowering, then, for HSACO,
// linked one after another once every thread is done; a kernel's blob is
// what compile() makes of it alone, so the thread count changes nothing in
// the output. Fails when a Lowering cannot be made; a kernel that fails has
// its error in its place.
Expected<std::vector<Expected<std::vector<uint8_t>>>> compileKernels(Target target, const std::string& arch,
                                                                     const std::vector<kir::Kernel>& kernels,
                                                                     unsigned threads);

}  // namespace poot::llvmgen

// LLVM lowering: a KIR kernel as LLVM IR, then machine code for the profile's
// target with LLVM 19: NVPTX -> PTX text for the profile's sm, AMDGPU -> an
// object linked by lld (in process, as `ld.lld -shared`) into an HSACO code
// object for its gfx.
// Storage buffers are kernel pointer parameters in address space 1 in
// binding order; workgroup arrays are address space 3 globals (on NVPTX past
// 48 KiB, offsets into the one dynamic shared array, so a launch passes the
// kernel's workgroup memory as its dynamic shared size); thread and
// workgroup ids are the target's intrinsics. One Lowering is made per
// compile and holds the target machine every kernel is compiled with.
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
  // The LLVM IR module as text, for tests and debugging.
  virtual std::string llvmIr(const kir::Kernel& k) = 0;
};

}  // namespace poot::llvmgen

// The codegen driver: fills every kernel of a planned plan with its blob for
// the plan's target. For each kernel: generate its KIR from the request (the
// grid of its first dispatch fixes the fold), verify it, then emit SPIR-V
// (validated by SPIRV-Tools for Vulkan 1.2) or lower it through LLVM to PTX
// or HSACO. Any failure names the kernel's entry and request.
#pragma once

#include <string>
#include <vector>

#include "codegen/kir/kir.h"
#include "ir/diag.h"
#include "plan/plan.h"
#include "plan/profile.h"

namespace poot {

// The KIR of every kernel of p, in kernel order (for --emit=kir and tests).
Expected<std::vector<kir::Kernel>> generateKir(const Plan& p, const DeviceProfile& d);

// Fills every p.kernels[i].blob from its KIR (kernels[i]): SPIR-V words
// (little-endian), PTX text or an HSACO ELF.
Status emitKernels(Plan& p, const DeviceProfile& d, const std::vector<kir::Kernel>& kernels);

// generateKir then emitKernels. Run after planBuffers.
Status generateKernels(Plan& p, const DeviceProfile& d);

// The LLVM release the PTX and HSACO lowering is built on ("19.1.7").
std::string llvmVersion();

}  // namespace poot

// KIR to LLVM IR: one kernel as one module for the target machine's triple
// and data layout, before any optimization. The entry function is the
// kernel's entry with one `ptr addrspace(1)` parameter per buffer in binding
// order (buffers may alias, so none is noalias), marked as a kernel the
// target's way with its workgroup size as the maximum; workgroup arrays are
// internal address space 3 globals; variables are entry-block allocas left
// for SROA/mem2reg.
#pragma once

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>

#include "codegen/kir/kir.h"
#include "ir/diag.h"
#include "plan/profile.h"

namespace poot::llvmgen {

// A Verify error when the kernel has an operation on a type that means
// nothing (pow on integers, float bit operations).
Expected<std::unique_ptr<llvm::Module>> buildModule(const kir::Kernel& k, Target target,
                                                    const llvm::TargetMachine& tm, llvm::LLVMContext& ctx);

}  // namespace poot::llvmgen

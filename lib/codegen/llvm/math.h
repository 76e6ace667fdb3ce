// The f32 functions KIR has and the targets' backends do not all lower, as
// LLVM IR built in place: exp, exp2, log, sin, cos, tanh, pow, sqrt and rsqrt.
// NVPTX has no libdevice here, so its functions are built on the PTX
// approximations (ex2, lg2, sin, cos); AMDGPU's backend lowers exp, log, sin
// and cos itself. tanh and pow are one expansion for both targets, over each
// target's exp and log2/exp2.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "plan/profile.h"

namespace poot::llvmgen {

class Math {
 public:
  Math(llvm::IRBuilder<>& b, Target target) : b_(b), target_(target) {}

  llvm::Value* exp(llvm::Value* x);
  llvm::Value* exp2(llvm::Value* x);  // PTX's ex2.approx: 2^-inf is +0
  llvm::Value* log(llvm::Value* x);
  llvm::Value* sin(llvm::Value* x);
  llvm::Value* cos(llvm::Value* x);
  llvm::Value* tanh(llvm::Value* x);
  llvm::Value* pow(llvm::Value* x, llvm::Value* y);  // as C's powf, up to the approximations
  llvm::Value* sqrt(llvm::Value* x);                 // correctly rounded
  llvm::Value* rsqrt(llvm::Value* x);

 private:
  llvm::Value* log2(llvm::Value* x);
  llvm::Value* reduceTurn(llvm::Value* x);  // x - 2*pi*round(x / (2*pi)), in [-pi, pi]
  llvm::Value* unary(llvm::Intrinsic::ID id, llvm::Value* x);
  llvm::Value* fma(llvm::Value* a, llvm::Value* b, llvm::Value* c);
  llvm::Value* f(double v);

  llvm::IRBuilder<>& b_;
  Target target_;
};

}  // namespace poot::llvmgen

// What the runtime checks in a kernel blob before a driver sees it: that it
// is well formed for its target, as far as that can be read without the
// compiler's libraries (no SPIRV-Tools, no LLVM: `poot` links neither), and
// the few facts the plan's records must agree with.
//
// - SPIR-V: a whole number of little-endian words, the 5-word header (magic
//   number, version 1.0 to 1.6, a nonzero id bound, schema 0), an
//   instruction stream whose word counts end exactly at the module's end, a
//   GLCompute entry point of the kernel's name; only the capabilities the
//   SPIR-V writer declares, Logical addressing, no pointer access chains,
//   variables only in the storage classes kernels use (no push constants),
//   bindings only on storage buffers, in descriptor set 0. Its LocalSize
//   and its storage buffer bindings (numbered 0 to n-1) are the facts.
// - PTX: text without NUL bytes, a `.version` directive, a `.target` that is
//   the plan's arch and a `.entry` of the kernel's name, whose `.param`
//   count (one pointer per binding) is a fact, and so is whether its body
//   waits for the kernels launched before it (griddepcontrol.wait) before
//   it touches memory (codegen/llvm/module.cpp writes that wait for sm_90
//   and newer): only then may a backend launch it before they have ended.
// - HSACO: a 64-bit little-endian ELF shared object for AMDGPU (e_machine
//   224, the AMDHSA OS ABI) whose program and section header tables lie
//   within the blob, naming the kernel's descriptor `ENTRY.kd`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "runtime/plan_reader.h"

namespace poot::rt {

// What the code itself says; -1 where the target's format does not say it.
struct BlobFacts {
  int bindings = -1;              // storage buffers the kernel takes
  int64_t workgroupSize = -1;     // threads a workgroup, as the code fixes it
  bool waitsForPrevious = false;  // PTX: griddepcontrol.wait before any memory access
};

// `arch` is the plan's device arch (a PTX module must target it). A refusal
// is a Format error with no place: the plan reader names the file and the
// kernel.
Expected<BlobFacts> checkKernelBlob(Target target, const std::vector<uint8_t>& blob, const std::string& entry,
                                    const std::string& arch);

}  // namespace poot::rt

// The SPIR-V writer: a KIR kernel as a Vulkan 1.2 compute shader module
// (SPIR-V 1.5 words), written by our own three layers: legalize (what the
// capabilities and storage rules of Vulkan need: 8/16-bit storage, i64),
// a module builder with caching type and constant getters, and the binary
// writer. Storage buffer i is set 0, binding i (a runtime array of its
// element type in a Block struct); workgroup arrays are Workgroup variables;
// the entry point is the kernel's entry with LocalSize(workgroupSize, 1, 1).
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/kir/kir.h"
#include "ir/diag.h"

namespace poot::spirv {

Expected<std::vector<uint32_t>> emit(const kir::Kernel& k);

// SPIRV-Tools validation for the Vulkan 1.2 environment: ok, or a Verify
// error carrying the validator's message.
Status validate(const std::vector<uint32_t>& words);

// The module as SPIRV-Tools disassembly, for tests and --dump-kernels.
std::string disassemble(const std::vector<uint32_t>& words);

}  // namespace poot::spirv

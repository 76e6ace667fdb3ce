// Checks of emitted LLVM-target kernels, shared by the unit tests that look at
// PTX and HSACO blobs (llvm_test.cpp on hand-built KIR kernels,
// codegen_examples_test.cpp on every kernel of every example graph). PTX text
// must name the entry, bound the workgroup size, declare workgroup memory of
// the kernel's size (statically up to 48 KiB, past that as the one dynamic
// shared array the launch sizes), synchronize with bar.sync when it has any
// and make no calls; ptxas (found on PATH or in CUDA's default place) must
// assemble it for a given arch. HSACO must be a little-endian AMDGPU ELF64 whose `<entry>.kd`
// kernel descriptor records the kernel's workgroup memory and whose metadata
// note names the kernel. Everything is inline, in namespace poot::testing, and
// reports through doctest assertions.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "codegen/kir/kir.h"

namespace poot::testing {

// A file holding `bytes` in the temp directory, removed afterwards.
struct TempFile {
  std::string path;
  explicit TempFile(const std::vector<uint8_t>& bytes, const std::string& suffix) {
    static int counter = 0;
    path = (std::filesystem::temp_directory_path() /
            ("poot-kernel-check-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + suffix))
               .string();
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  ~TempFile() { std::filesystem::remove(path); }
};

// ptxas on PATH, else CUDA's default place; empty when neither has it.
inline std::string ptxasPath() {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  for (size_t i = 0; i < path.size();) {
    size_t j = std::min(path.find(':', i), path.size());
    std::string candidate = path.substr(i, j - i) + "/ptxas";
    if (j > i && access(candidate.c_str(), X_OK) == 0) return candidate;
    i = j + 1;
  }
  return access("/usr/local/cuda/bin/ptxas", X_OK) == 0 ? "/usr/local/cuda/bin/ptxas" : "";
}

// The most workgroup memory a PTX kernel may declare statically; past it the
// lowering declares the one dynamic shared array instead.
constexpr int64_t kPtxStaticSharedBytes = 48 * 1024;

// The checks of the PTX text itself that every kernel must pass.
inline void checkPtxText(const kir::Kernel& k, const std::string& ptx) {
  CHECK(ptx.find(".visible .entry " + k.entry + "(") != std::string::npos);
  CHECK(ptx.find(".maxntid " + std::to_string(k.workgroupSize) + ", 1, 1") != std::string::npos);
  std::regex shared(R"(\.shared \.align \d+ \.b8 \S+\[(\d+)\];)");
  int64_t bytes = 0;
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), shared); it != std::sregex_iterator(); ++it)
    bytes += std::stoll((*it)[1]);
  bool dynamic = std::regex_search(ptx, std::regex(R"(\.extern \.shared \.align (16|1024) \.b8 poot_dynamic_shared\[\];)"));
  if (k.sharedBytes() > kPtxStaticSharedBytes) {
    CHECK_MESSAGE(dynamic, k.entry << ": " << k.sharedBytes() << " bytes of workgroup memory but no dynamic .shared");
    CHECK_MESSAGE(bytes == 0, k.entry << ": " << bytes << " bytes of static .shared besides the dynamic array");
  } else {
    CHECK_MESSAGE(!dynamic, k.entry << ": dynamic .shared for " << k.sharedBytes() << " bytes");
    CHECK_MESSAGE(bytes == k.sharedBytes(), k.entry << ": .shared bytes " << bytes << ", KIR " << k.sharedBytes());
  }
  if (k.sharedBytes() > 0) CHECK(ptx.find("bar.sync") != std::string::npos);
  CHECK(ptx.find("call") == std::string::npos);  // no libcalls: every function is expanded
}

// `ptxas -arch=<arch>` assembles the PTX; a failure shows the command and
// what ptxas printed. `what` names the kernel in that message.
inline void checkPtxAssembles(const std::string& ptxas, const std::string& arch, const std::string& ptx,
                              const std::string& what) {
  TempFile file(std::vector<uint8_t>(ptx.begin(), ptx.end()), ".ptx");
  std::string cmd = ptxas + " -arch=" + arch + " -o /dev/null " + file.path + " 2>&1";
  std::string output;
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE_MESSAGE(pipe != nullptr, cmd);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  int status = pclose(pipe);
  CHECK_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), what << ": " << cmd << "\n" << output);
}

// The text checks, then ptxas for `arch` when it is installed.
inline void checkPtx(const kir::Kernel& k, const std::string& ptx, const std::string& arch) {
  checkPtxText(k, ptx);
  std::string ptxas = ptxasPath();
  if (ptxas.empty()) {
    MESSAGE("ptxas not found: skipped assembling the ptx");
    return;
  }
  checkPtxAssembles(ptxas, arch, ptx, k.entry);
}

namespace detail {

// A little-endian read of `bytes` bytes at `at`.
inline uint64_t rd(const std::vector<uint8_t>& b, size_t at, int bytes) {
  REQUIRE(at + size_t(bytes) <= b.size());
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | b[at + size_t(i)];
  return v;
}

struct Section {
  uint32_t name, type;
  uint64_t addr, offset, size, link, entsize;
};

}  // namespace detail

// The ELF checks of an HSACO: AMDGPU ELF64, `<entry>.kd` of 64 bytes whose
// first word (group_segment_fixed_size) is the kernel's workgroup memory, and
// a note naming the kernel.
inline void checkHsaco(const kir::Kernel& k, const std::vector<uint8_t>& elf) {
  using detail::rd;
  REQUIRE(elf.size() > 64);
  REQUIRE(std::memcmp(elf.data(), "\x7f" "ELF", 4) == 0);
  CHECK(elf[4] == 2);  // ELFCLASS64
  CHECK(elf[5] == 1);  // little-endian
  CHECK(rd(elf, 18, 2) == 224);  // EM_AMDGPU
  uint64_t shoff = rd(elf, 40, 8);
  size_t shentsize = rd(elf, 58, 2), shnum = rd(elf, 60, 2);
  std::vector<detail::Section> sections;
  for (size_t i = 0; i < shnum; ++i) {
    size_t s = shoff + i * shentsize;
    sections.push_back({uint32_t(rd(elf, s, 4)), uint32_t(rd(elf, s + 4, 4)), rd(elf, s + 16, 8), rd(elf, s + 24, 8),
                        rd(elf, s + 32, 8), rd(elf, s + 40, 4), rd(elf, s + 56, 8)});
  }
  bool foundKd = false, foundNote = false;
  const std::string kd = k.entry + ".kd";
  for (const detail::Section& sec : sections) {
    if (sec.type == 7 /* SHT_NOTE */) {
      std::string note(elf.begin() + long(sec.offset), elf.begin() + long(sec.offset + sec.size));
      if (note.find("AMDGPU") != std::string::npos && note.find(k.entry) != std::string::npos) foundNote = true;
    }
    if (sec.type != 2 /* SHT_SYMTAB */ && sec.type != 11 /* SHT_DYNSYM */) continue;
    const detail::Section& strtab = sections[sec.link];
    for (uint64_t at = sec.offset; at + 24 <= sec.offset + sec.size; at += 24) {
      const char* name = reinterpret_cast<const char*>(elf.data() + strtab.offset + rd(elf, at, 4));
      if (kd != name) continue;
      foundKd = true;
      CHECK(rd(elf, at + 16, 8) == 64);
      const detail::Section& home = sections[rd(elf, at + 6, 2)];
      uint64_t offset = home.offset + (rd(elf, at + 8, 8) - home.addr);
      int64_t group = int64_t(rd(elf, offset, 4));  // group_segment_fixed_size
      CHECK_MESSAGE(group == k.sharedBytes(),
                    kd << ": group_segment_fixed_size " << group << ", KIR workgroup memory " << k.sharedBytes());
    }
  }
  CHECK_MESSAGE(foundKd, "no symbol " << kd);
  CHECK_MESSAGE(foundNote, "no AMDGPU note naming " << k.entry);
}

}  // namespace poot::testing

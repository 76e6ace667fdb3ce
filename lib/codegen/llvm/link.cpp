// lld's ELF driver (liblldELF) run in this process with the arguments
// `ld.lld -shared --threads=1 -o OUT IN`: lld reads and writes only files, so
// the object is written into a fresh mkdtemp directory and the code object
// read back from it, and the directory is removed on every path by its
// owner. lld keeps its state in globals, so links take turns under one mutex.
// A fatal error inside lld would end the process (_exit) unless crash
// recovery is on, so it is on for the length of the link; after a link lld
// could not clean up after, every later one in this process is refused.
#include "codegen/llvm/link.h"

#include <lld/Common/Driver.h>
#include <llvm/Support/CrashRecoveryContext.h>
#include <llvm/Support/raw_ostream.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>

#include "ir/io.h"

LLD_HAS_DRIVER(elf)

namespace poot::llvmgen {

namespace {

// A mkdtemp directory, removed with everything in it when this goes away.
class TempDir {
 public:
  TempDir() = default;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }

  Status create() {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
    std::string name = (ec ? std::filesystem::path("/tmp") : dir) / "poot-hsaco-XXXXXX";
    if (!mkdtemp(name.data()))
      return makeError(ErrorKind::Io, Loc{name}, std::string("cannot create a directory: ") + strerror(errno));
    path_ = name;
    return ok();
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::mutex lldTurn;
bool lldSpent = false;  // a link crashed or could not reset lld's state

}  // namespace

Expected<std::vector<uint8_t>> linkHsaco(const std::vector<uint8_t>& object) {
  // The output must not exist beforehand: lld writes a new file and renames
  // it into place, and ext4 starts writing a file back to disk when it
  // replaces another by a rename.
  TempDir dir;
  if (auto s = dir.create(); !s) return s.error();
  std::string in = dir.path() + "/kernel.o", out = dir.path() + "/kernel.hsaco";
  if (auto s = writeFileAtomic(in, std::string(object.begin(), object.end())); !s) return s.error();
  // One thread: the objects are small, and lld starts no thread pool then.
  std::vector<const char*> args = {"ld.lld", "-shared", "--threads=1", "-o", out.c_str(), in.c_str()};
  std::string command;
  for (const char* a : args) command += (command.empty() ? "" : " ") + std::string(a);
  std::string text;
  llvm::raw_string_ostream log(text);
  lld::Result result;
  {
    std::lock_guard<std::mutex> turn(lldTurn);
    if (lldSpent)
      return makeError(ErrorKind::Io, Loc{},
                       command + ": lld cannot run again in this process after a link it could not finish");
    llvm::CrashRecoveryContext::Enable();
    result = lld::lldMain(args, log, log, {{lld::Gnu, &lld::elf::link}});
    llvm::CrashRecoveryContext::Disable();
    lldSpent = !result.canRunAgain;
  }
  if (result.retCode != 0) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '.')) text.pop_back();
    return makeError(ErrorKind::Io, Loc{},
                     command + " failed (exit status " + std::to_string(result.retCode) + "): " + text);
  }
  auto bytes = readFile(out);
  if (!bytes) return bytes.error();
  if (bytes->empty()) return makeError(ErrorKind::Io, Loc{out}, command + " wrote nothing");
  return std::vector<uint8_t>(bytes->begin(), bytes->end());
}

}  // namespace poot::llvmgen

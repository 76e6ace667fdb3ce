// ld.lld through posix_spawn (no shell): the object is written to a mkstemp
// file, the output goes to another, the linker's stdout and stderr are read
// from one pipe until it closes, then the child is reaped and the output
// read back. The temporary files are removed on every path by their owner.
#include "codegen/llvm/link.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

extern char** environ;

namespace poot::llvmgen {

namespace {

// A mkstemp file, removed when this goes away.
class TempFile {
 public:
  TempFile() = default;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (!path_.empty()) unlink(path_.c_str());
  }

  // Creates the file holding `bytes`.
  Status create(std::string_view bytes) {
    std::error_code ec;
    std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
    std::string name = (ec ? std::filesystem::path("/tmp") : dir) / "poot-hsaco-XXXXXX";
    int fd = mkstemp(name.data());
    if (fd < 0) return makeError(ErrorKind::Io, Loc{name}, std::string("cannot create a temporary file: ") + strerror(errno));
    path_ = name;
    while (!bytes.empty()) {
      ssize_t n = ::write(fd, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        int e = errno;
        close(fd);
        return makeError(ErrorKind::Io, Loc{path_}, std::string("cannot write: ") + strerror(e));
      }
      bytes.remove_prefix(size_t(n));
    }
    close(fd);
    return ok();
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs argv[0] with argv; its exit status and everything it printed.
struct Run {
  int status = 0;
  std::string output;
};

Expected<Run> spawn(const std::vector<std::string>& args, const std::string& command) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return makeError(ErrorKind::Io, Loc{}, "cannot run " + command + ": " + strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return makeError(ErrorKind::Io, Loc{}, "cannot run " + command + ": " + strerror(rc));
  }
  Run run;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    run.output.append(buf, size_t(n));
  }
  close(fds[0]);
  while (waitpid(pid, &run.status, 0) < 0)
    if (errno != EINTR) return makeError(ErrorKind::Io, Loc{}, "cannot wait for " + command + ": " + strerror(errno));
  return run;
}

}  // namespace

Expected<std::vector<uint8_t>> linkHsaco(std::string_view object) {
  TempFile in, out;
  if (auto s = in.create(object); !s) return s.error();
  if (auto s = out.create({}); !s) return s.error();
  std::vector<std::string> args = {POOT_LD_LLD, "-shared", "-o", out.path(), in.path()};
  std::string command;
  for (const std::string& a : args) command += (command.empty() ? "" : " ") + a;
  auto run = spawn(args, command);
  if (!run) return run.error();
  if (!WIFEXITED(run->status) || WEXITSTATUS(run->status) != 0) {
    std::string why = WIFEXITED(run->status) ? "exit status " + std::to_string(WEXITSTATUS(run->status))
                                             : "killed by signal " + std::to_string(WTERMSIG(run->status));
    std::string text = run->output;
    while (!text.empty() && (text.back() == '\n' || text.back() == '.')) text.pop_back();
    return makeError(ErrorKind::Io, Loc{}, command + " failed (" + why + "): " + text);
  }
  std::ifstream f(out.path(), std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (!f.good() && !f.eof()) return makeError(ErrorKind::Io, Loc{out.path()}, "cannot read the linked code object");
  if (bytes.empty()) return makeError(ErrorKind::Io, Loc{out.path()}, command + " wrote nothing");
  return bytes;
}

}  // namespace poot::llvmgen

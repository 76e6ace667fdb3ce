// File I/O with typed errors; see io.h for the atomic-write contract.
#include "ir/io.h"

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace poot {

Expected<std::string> readFile(const std::string& path) {
  if (path == "-") {
    std::ostringstream buf;
    buf << std::cin.rdbuf();
    if (std::cin.bad()) return makeError(ErrorKind::Io, {path}, "cannot read standard input");
    return buf.str();
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return makeError(ErrorKind::Io, {path}, std::string("cannot open file: ") + std::strerror(EISDIR));
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(ErrorKind::Io, {path}, std::string("cannot open file: ") + std::strerror(errno));
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return makeError(ErrorKind::Io, {path}, "cannot read file");
  return buf.str();
}

Status writeFileAtomic(const std::string& path, const std::string& bytes) {
  if (path == "-") {
    if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
      return makeError(ErrorKind::Io, {path}, "cannot write standard output");
    return ok();
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  // A symlink is followed: its target is replaced and the link kept. An
  // existing device, FIFO, socket or directory is refused: the rename would
  // put a regular file in its place.
  fs::path target = path;
  for (int hops = 0; fs::is_symlink(target, ec); ++hops) {
    if (hops == 40) return makeError(ErrorKind::Io, {path}, "cannot write output: " + std::string(std::strerror(ELOOP)));
    fs::path next = fs::read_symlink(target, ec);
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  fs::file_status st = fs::status(target, ec);
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    fs::file_type t = st.type();
    const char* what = t == fs::file_type::directory   ? "a directory"
                       : t == fs::file_type::character ? "a character device"
                       : t == fs::file_type::block     ? "a block device"
                       : t == fs::file_type::fifo      ? "a FIFO"
                       : t == fs::file_type::socket    ? "a socket"
                                                       : "not a regular file";
    return makeError(ErrorKind::Io, {path}, std::string("cannot write output: it is ") + what + ", not a regular file");
  }
  std::string tmp = target.string() + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return makeError(ErrorKind::Io, {path}, std::string("cannot create output: ") + std::strerror(errno));
  bool good = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  good = (std::fclose(f) == 0) && good;
  if (!good || std::rename(tmp.c_str(), target.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return makeError(ErrorKind::Io, {path}, "cannot write output: " + why);
  }
  return ok();
}

std::string printable(std::string_view text) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char ch : text) {
    auto c = uint8_t(ch);
    if (c >= 0x20 && c < 0x7f) out += ch;
    else out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
  }
  return out;
}

}  // namespace poot

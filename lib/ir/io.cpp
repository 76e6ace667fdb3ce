// File I/O with typed errors; see io.h for the atomic-write contract.
#include "ir/io.h"

#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace poot {

Expected<std::string> readFile(const std::string& path) {
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
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return makeError(ErrorKind::Io, {path}, std::string("cannot create output: ") + std::strerror(errno));
  bool good = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  good = (std::fclose(f) == 0) && good;
  if (!good || std::rename(tmp.c_str(), path.c_str()) != 0) {
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

// Finding and calling the SPIR-V validator plugin (spirv_validator.h).
#include "runtime/spirv_validator.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>

namespace poot::rt {

namespace {

using ValidateFn = int (*)(const uint32_t*, size_t, char*, size_t);

struct Plugin {
  ValidateFn validate = nullptr;
  std::string where;  // the path, or "none: ..."
  std::string error;  // a required plugin that did not load
};

constexpr const char* kName = "poot-spirv-validate.so";

bool tryLoad(const std::string& path, Plugin& p, std::string* why) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    if (why) *why = dlerror();
    return false;
  }
  auto fn = reinterpret_cast<ValidateFn>(dlsym(h, "poot_spirv_validate_v1"));
  if (!fn) {
    if (why) *why = "it has no poot_spirv_validate_v1";
    dlclose(h);
    return false;
  }
  p.validate = fn;
  p.where = path;
  return true;
}

const Plugin& plugin() {
  static Plugin p = [] {
    Plugin p;
    if (const char* env = std::getenv("POOT_SPIRV_VALIDATOR"); env && *env) {
      if (std::string(env) == "off") {
        p.where = "none: POOT_SPIRV_VALIDATOR=off";
        return p;
      }
      std::string why;
      if (!tryLoad(env, p, &why))
        p.error = std::string("POOT_SPIRV_VALIDATOR names ") + env + ", which does not load: " + why;
      return p;
    }
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    std::vector<std::string> candidates;
    if (!ec) {
      candidates.push_back((exe.parent_path() / kName).string());
      candidates.push_back((exe.parent_path() / ".." / "lib" / "poot" / kName).string());
    }
#ifdef POOT_SPIRV_VALIDATOR_BUILD_PATH
    candidates.push_back(POOT_SPIRV_VALIDATOR_BUILD_PATH);
#endif
    for (const std::string& c : candidates)
      if (std::filesystem::exists(c, ec) && tryLoad(c, p, nullptr)) return p;
    p.where = std::string("none: no ") + kName + " beside the executable, in ../lib/poot/ or in the build tree";
    return p;
  }();
  return p;
}

std::mutex& callMutex() {
  static std::mutex m;
  return m;
}

}  // namespace

Status validateSpirv(const std::vector<uint8_t>& blob) {
  const Plugin& p = plugin();
  if (!p.error.empty()) return makeError(ErrorKind::Capability, {}, p.error);
  if (!p.validate) return ok();
  std::vector<uint32_t> words(blob.size() / 4);
  std::memcpy(words.data(), blob.data(), words.size() * 4);
  char message[1024];
  int r;
  {
    std::lock_guard<std::mutex> lock(callMutex());
    r = p.validate(words.data(), words.size(), message, sizeof message);
  }
  if (r == 0) return ok();
  // SPIRV-Tools adds the disassembled instruction on lines of its own: one
  // line here, its spaces squeezed.
  std::string text;
  for (const char* c = message; *c; ++c) {
    char ch = (*c == '\n' || *c == '\t') ? ' ' : *c;
    if (ch == ' ' && (text.empty() || text.back() == ' ')) continue;
    text += ch;
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return makeError(ErrorKind::Format, {}, "the SPIR-V validator refuses it: " + text);
}

std::string spirvValidator() {
  const Plugin& p = plugin();
  return p.error.empty() ? p.where : "none: " + p.error;
}

}  // namespace poot::rt

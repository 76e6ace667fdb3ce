#include "runtime/backends/common.h"

#include <algorithm>
#include <cctype>

namespace poot::rt {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(uint8_t(c)));
  return s;
}

}  // namespace

std::string nameSlug(const std::string& name) {
  std::string out;
  int depth = 0;
  for (char c : name) {
    if (c == '(') ++depth;
    else if (c == ')') depth = std::max(0, depth - 1);
    else if (depth == 0 && std::isalnum(uint8_t(c))) out += char(std::tolower(uint8_t(c)));
    else if (depth == 0 && !out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::string deviceSlug(const std::string& name, const std::string& vendor) {
  std::string out = nameSlug(name);
  if (out.empty()) return vendor + "-gpu";
  return out == vendor || out.rfind(vendor + "-", 0) == 0 ? out : vendor + "-" + out;
}

Expected<int> pickDeviceByName(const std::vector<std::string>& names, const std::string& want,
                               const std::string& vendor, const char* backend) {
  if (want.empty()) return 0;
  bool index = std::all_of(want.begin(), want.end(), [](char c) { return std::isdigit(uint8_t(c)); });
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    if (index ? std::to_string(i) == want
              : lower(name).find(lower(want)) != std::string::npos || deviceSlug(name, vendor) == lower(want))
      return int(i);
  }
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) list += (i ? ", " : "") + std::to_string(i) + ": " + names[i];
  Error e = makeError(ErrorKind::Capability, {},
                      "no " + std::string(backend) + " device matches '" + want + "' (devices: " + list + ")");
  e.capability = "Device";
  return e;
}

Error outsideBuffer(const char* backend, BufferId buffer, int64_t size, int64_t offset, int64_t bytes) {
  return makeError(ErrorKind::Io, {},
                   std::string(backend) + ": bytes [" + std::to_string(offset) + ", " + std::to_string(offset + bytes) +
                       ") are outside buffer " + std::to_string(buffer) + " of " + std::to_string(size) + " bytes");
}

Status checkKernelLimits(const DeviceInfo& info, const std::string& entry, int64_t workgroupSize,
                         int64_t workgroupMemory) {
  auto refuse = [](const char* kind, std::string msg) {
    Error e = makeError(ErrorKind::Capability, {}, std::move(msg));
    e.capability = kind;
    return e;
  };
  if (workgroupSize < 1 || workgroupSize > info.maxWorkgroupSize)
    return refuse("WorkgroupSize", "kernel '" + entry + "' runs " + std::to_string(workgroupSize) +
                                       " threads a workgroup, " + info.name + " holds " +
                                       std::to_string(info.maxWorkgroupSize));
  if (workgroupMemory < 0 || workgroupMemory > info.workgroupMemoryBytes)
    return refuse("WorkgroupMemory", "kernel '" + entry + "' uses " + std::to_string(workgroupMemory) +
                                         " bytes of workgroup memory, " + info.name + " has " +
                                         std::to_string(info.workgroupMemoryBytes));
  return ok();
}

}  // namespace poot::rt

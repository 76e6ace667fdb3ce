// A package folder (tools/common/package.h) as the plans `poot generate` and
// `poot serve` run: the manifest read and checked before any plan is, each
// refusal naming the manifest's field or the file at fault.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ir/hash.h"
#include "ir/io.h"
#include "package.h"
#include "prompts.h"
#include "tool.h"

namespace poot {

namespace {

namespace fs = std::filesystem;

// A file name the manifest gives: a plain name inside the folder.
Expected<std::string> fileField(const nlohmann::json& j, const char* key, const fs::path& dir, const Loc& at) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string())
    return makeError(ErrorKind::Format, at, std::string("missing, or not a string: '") + key + "'");
  std::string name = j[key];
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    return makeError(ErrorKind::Format, at, "'" + name + "' is not a file name inside the folder");
  return (dir / name).string();
}

Loc field(const fs::path& manifest, std::string item) { return Loc{manifest.string(), 0, 0, std::move(item)}; }

// j[key] when j is an object that has it, else null.
nlohmann::json member(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) ? j[key] : nlohmann::json();
}

}  // namespace

Status resolveEngineArgs(EngineArgs& a) {
  if (a.plans.size() == 2) {
    a.prefillPlan = a.plans[0];
    a.decodePlan = a.plans[1];
    return ok();
  }
  fs::path dir(a.plans.at(0)), manifestPath = dir / package::kManifest;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return makeError(ErrorKind::Usage, Loc{dir.string()},
                     "one plan given: name a package folder (pootc package), or both the prefill and the decode plan");
  auto text = readFile(manifestPath.string());
  if (!text) return makeError(ErrorKind::Io, text.error().loc,
                              text.error().message + " (a package folder has the manifest.json pootc package writes)");
  nlohmann::json m;
  try {
    m = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    return makeError(ErrorKind::Format, Loc{manifestPath.string()}, std::string("not JSON: ") + e.what());
  }
  if (member(m, "format") != package::kFormat)
    return makeError(ErrorKind::Format, field(manifestPath, "format"),
                     std::string("not \"") + package::kFormat + "\": not a package's manifest");
  if (member(m, "version") != package::kVersion)
    return makeError(ErrorKind::Format, field(manifestPath, "version"),
                     "not " + std::to_string(package::kVersion) + ", the one version this poot reads");
  if (!m.contains("files") || !m["files"].is_array())
    return makeError(ErrorKind::Format, field(manifestPath, "files"), "missing, or not an array of file names");
  for (size_t i = 0; i < m["files"].size(); ++i) {
    auto at = field(manifestPath, "files[" + std::to_string(i) + "]");
    auto path = fileField(nlohmann::json{{"file", m["files"][i]}}, "file", dir, at);
    if (!path) return path.error();
    if (!fs::is_regular_file(*path, ec))
      return makeError(ErrorKind::Io, Loc{*path}, "missing: the manifest lists it (" + at.str() + ")");
  }
  const nlohmann::json plans = member(m, "plans");
  auto prefill = fileField(member(plans, "prefill"), "file", dir, field(manifestPath, "plans.prefill.file"));
  if (!prefill) return prefill.error();
  auto decode = fileField(member(plans, "decode"), "file", dir, field(manifestPath, "plans.decode.file"));
  if (!decode) return decode.error();
  std::string mixed;  // optional: a package made with --mixed-tokens 0 has none
  if (plans.is_object() && plans.contains("mixed")) {
    auto m = fileField(member(plans, "mixed"), "file", dir, field(manifestPath, "plans.mixed.file"));
    if (!m) return m.error();
    mixed = *m;
  }
  for (const std::string& p : {*prefill, *decode, mixed})
    if (!p.empty() && !fs::is_regular_file(p, ec)) return makeError(ErrorKind::Io, Loc{p}, "missing: the manifest's plan");

  // The config: the packaged copy is the one hashed, and a --weights folder
  // must hold the same.
  const nlohmann::json config = member(m, "config");
  auto configPath = fileField(config, "file", dir, field(manifestPath, "config.file"));
  if (!configPath) return configPath.error();
  if (!config.contains("fnv1a64") || !config["fnv1a64"].is_string())
    return makeError(ErrorKind::Format, field(manifestPath, "config.fnv1a64"), "missing, or not a string");
  std::string hash = config["fnv1a64"];
  auto packaged = readFile(*configPath);
  if (!packaged) return packaged.error();
  if (hex64(fnv1a(*packaged)) != hash)
    return makeError(ErrorKind::Format, Loc{*configPath},
                     "its FNV-1a 64 is " + hex64(fnv1a(*packaged)) + ", the manifest's config.fnv1a64 " + hash +
                         ": the file changed after pootc package wrote it");
  fs::path weightsConfig = fs::path(a.weights) / package::kConfig;
  if (!a.weights.empty() && fs::is_directory(a.weights, ec) && fs::exists(weightsConfig, ec)) {
    auto given = readFile(weightsConfig.string());
    if (!given) return given.error();
    if (*given != *packaged)
      return makeError(ErrorKind::Bind, Loc{weightsConfig.string()},
                       "not the config the package was built from (" + *configPath + "): these weights are another "
                       "model's");
  }

  if (a.eos.empty() && a.config.empty())
    for (const char* name : {"generation_config.json", package::kConfig}) {
      fs::path p = dir / name;
      if (!fs::exists(p, ec)) continue;
      auto ids = readEosIds(p.string());
      if (!ids) return ids.error();
      if (!ids->empty()) {
        a.config = p.string();
        break;
      }
    }
  a.package = dir.string();
  a.prefillPlan = *prefill;
  a.decodePlan = *decode;
  if (a.mixedPlan.empty()) a.mixedPlan = mixed;
  return ok();
}

}  // namespace poot

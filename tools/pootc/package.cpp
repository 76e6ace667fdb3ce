// pootc package: a model as one folder (tools/common/package.h). Traces the
// model's config with runTrace and compiles its graphs (prefill, decode and,
// unless asked not to, mixed) with runCompile, as
// `pootc trace` and `pootc compile` would, into a fresh folder beside
// OUT_DIR, copies the model's files, writes the manifest, and only then
// renames the folder to OUT_DIR: a failure at any step leaves no OUT_DIR and
// no temporary folder. The output is the same bytes for the same inputs
// (the plans are; the manifest holds no time or path).
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "driver.h"
#include "ir/hash.h"
#include "ir/io.h"
#include "package.h"
#include "plan/plan_file.h"

namespace poot {

namespace {

namespace fs = std::filesystem;

// Removes the folder it holds when destroyed, unless released.
class TempDir {
 public:
  explicit TempDir(fs::path p) : path_(std::move(p)) {}
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

Error io(const fs::path& p, const std::string& msg) { return makeError(ErrorKind::Io, Loc{p.string()}, msg); }

// Traces and compiles one phase's plan into dir/NAME (its graph is a
// temporary file there): the prefill plan, the decode plan, or the mixed
// plan of `mixedTokens` over the decode plan's sequences. Returns
// runTrace's or runCompile's exit code.
enum class Phase { Prefill, Decode, Mixed };
int tracedPlan(const PackageOptions& o, const fs::path& dir, Phase phase, int64_t slots, int64_t mixedTokens) {
  TraceOptions t;
  t.config = (fs::path(o.model) / package::kConfig).string();
  t.phase = phase == Phase::Prefill ? "prefill" : phase == Phase::Decode ? "decode" : "mixed";
  t.kv = "paged";
  t.live = phase != Phase::Prefill;
  t.nextToken = true;  // greedy steps read token ids, not logits
  t.batch = phase == Phase::Prefill ? o.prefillBatch : o.decodeBatch;
  if (phase == Phase::Prefill) t.tokens = o.tokens;
  if (phase == Phase::Mixed) t.tokens = mixedTokens;
  t.capacity = o.capacity;
  t.poolSlots = slots;
  std::string name = phase == Phase::Prefill ? package::kPrefillPlan
                     : phase == Phase::Decode ? package::kDecodePlan
                                              : package::kMixedPlan;
  t.output = (dir / (name + ".pgb")).string();
  if (int rc = runTrace(t)) return rc;
  CompileOptions c;
  c.graph = t.output;
  c.device = o.device;
  c.output = (dir / name).string();
  int rc = runCompile(c);
  std::error_code ec;
  fs::remove(t.output, ec);
  return rc;
}

nlohmann::ordered_json planEntry(const char* file, int64_t batch, int64_t tokens, const PackageOptions& o,
                                 int64_t slots) {
  return {{"file", file}, {"batch", batch}, {"tokens", tokens}, {"capacity", o.capacity}, {"pool_slots", slots}};
}

}  // namespace

int runPackage(const PackageOptions& o) {
  using Count = std::pair<const char*, int64_t>;
  for (auto [name, v] : {Count{"--prefill-batch", o.prefillBatch}, Count{"--tokens", o.tokens},
                         Count{"--batch", o.decodeBatch}, Count{"--capacity", o.capacity}})
    if (v < 1) return report(makeError(ErrorKind::Usage, {}, std::string(name) + " must be at least 1, got " +
                                                                    std::to_string(v)));
  const int64_t mixedTokens = o.mixedTokens.value_or(o.decodeBatch >= 2 ? o.decodeBatch + o.tokens : 0);
  if (mixedTokens != 0 && (o.decodeBatch < 2 || mixedTokens < o.decodeBatch))
    return report(makeError(ErrorKind::Usage, {},
                            "--mixed-tokens " + std::to_string(mixedTokens) +
                                ": a mixed plan takes a token of each of --batch sequences (at least 2) and more for "
                                "prompts, so at least --batch " + std::to_string(o.decodeBatch) +
                                " tokens; 0 makes none"));
  fs::path model(o.model), out(o.output);
  std::error_code ec;
  if (!fs::is_directory(model, ec)) return report(io(model, "not a directory (a model directory holding config.json)"));
  auto config = readFile((model / package::kConfig).string());
  if (!config) return report(config.error());
  if (out.empty() || o.output == "-") return report(makeError(ErrorKind::Usage, {}, "-o names the folder to create"));
  if (fs::exists(fs::symlink_status(out, ec)))
    return report(io(out, "already exists: pootc package writes a new folder (remove it or name another)"));
  auto profile = deviceProfile(o.device);
  if (!profile) return report(profile.error());
  int64_t slots = o.poolSlots.value_or(o.decodeBatch * o.capacity);

  // The folder is made beside OUT_DIR, so that the last rename stays on one
  // file system.
  fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
  TempDir tmp(parent / ("." + out.filename().string() + ".tmp-" + std::to_string(getpid())));
  if (!fs::create_directory(tmp.path(), ec)) return report(io(tmp.path(), "cannot create the folder: " + ec.message()));
  if (int rc = tracedPlan(o, tmp.path(), Phase::Prefill, slots, 0)) return rc;
  if (int rc = tracedPlan(o, tmp.path(), Phase::Decode, slots, 0)) return rc;
  if (mixedTokens > 0)
    if (int rc = tracedPlan(o, tmp.path(), Phase::Mixed, slots, mixedTokens)) return rc;

  std::vector<std::string> files = {package::kConfig};
  if (auto s = writeFileAtomic((tmp.path() / package::kConfig).string(), *config); !s) return report(s.error());
  for (const char* name : package::kModelFiles) {
    if (!fs::exists(model / name, ec)) continue;
    auto bytes = readFile((model / name).string());
    if (!bytes) return report(bytes.error());
    if (auto s = writeFileAtomic((tmp.path() / name).string(), *bytes); !s) return report(s.error());
    files.push_back(name);
  }
  files.push_back(package::kPrefillPlan);
  files.push_back(package::kDecodePlan);
  if (mixedTokens > 0) files.push_back(package::kMixedPlan);

  nlohmann::ordered_json plans = {{"prefill", planEntry(package::kPrefillPlan, o.prefillBatch, o.tokens, o, slots)},
                                   {"decode", planEntry(package::kDecodePlan, o.decodeBatch, 1, o, slots)}};
  if (mixedTokens > 0) plans["mixed"] = planEntry(package::kMixedPlan, o.decodeBatch, mixedTokens, o, slots);
  nlohmann::ordered_json manifest = {
      {"format", package::kFormat},
      {"version", package::kVersion},
      {"poot", POOT_VERSION},
      {"plan_format", kPlanFileVersion},
      {"profile", {{"name", profile->name}, {"target", targetName(profile->target)}}},
      {"config", {{"file", package::kConfig}, {"fnv1a64", hex64(fnv1a(*config))}}},
      {"plans", plans},
      {"files", files}};
  if (auto s = writeFileAtomic((tmp.path() / package::kManifest).string(), manifest.dump(2) + "\n"); !s)
    return report(s.error());
  fs::rename(tmp.path(), out, ec);
  if (ec) return report(io(out, "cannot move the finished folder into place: " + ec.message()));
  tmp.release();
  return 0;
}

}  // namespace poot

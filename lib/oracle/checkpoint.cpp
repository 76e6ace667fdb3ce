// Opening a checkpoint: resolve the path (a directory to its index or its
// one file), read the index (nlohmann/json; a callback catches a tensor
// named twice, which the parser itself would keep the last of), map every
// shard read-only (mmap, closed at once; unmapped when the last copy of the
// Checkpoint goes), check each shard's header with the safetensors reader,
// then check the index against the shards' headers, in name order, so the
// first inconsistency reported is always the same one.
#include "oracle/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "ir/io.h"
#include "oracle/safetensors.h"

namespace poot {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A whole file mapped read-only; unmapped on destruction.
struct Mapping {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() {
    if (data) ::munmap(const_cast<uint8_t*>(data), size);
  }
};

Expected<std::unique_ptr<Mapping>> mapFile(const std::string& path, const std::string& context = "") {
  auto io = [&](const std::string& what) {
    return makeError(ErrorKind::Io, {path}, what + ": " + std::strerror(errno) + context);
  };
  // Non-blocking, so that a FIFO does not wait for a writer; anything but a
  // regular file is refused.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return io("cannot open file");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Error e = io("cannot read file");
    ::close(fd);
    return e;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return makeError(ErrorKind::Io, {path}, "not a regular file" + context);
  }
  auto m = std::make_unique<Mapping>();
  m->size = uint64_t(st.st_size);
  if (m->size > 0) {
    void* p = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      Error e = io("cannot map file");
      ::close(fd);
      return e;
    }
    m->data = static_cast<const uint8_t*>(p);
    // One pass front to back is how a load reads it: read ahead.
    ::madvise(p, m->size, MADV_SEQUENTIAL);
  }
  ::close(fd);
  return m;
}

// "a, b and c"
std::string listNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

// What a directory holds: its index, else its one .safetensors file.
Expected<std::string> resolveDirectory(const std::string& dir) {
  std::vector<std::string> indexes, files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    std::error_code sec;
    if (!e.is_regular_file(sec)) continue;  // follows links, as a Hugging Face cache snapshot holds them
    std::string name = e.path().filename().string();
    if (endsWith(name, ".safetensors.index.json")) indexes.push_back(name);
    else if (endsWith(name, ".safetensors")) files.push_back(name);
  }
  if (ec) return makeError(ErrorKind::Io, {dir}, "cannot read the directory: " + ec.message());
  std::sort(indexes.begin(), indexes.end());
  std::sort(files.begin(), files.end());
  auto in = [&](const std::string& name) { return (fs::path(dir) / name).string(); };
  if (std::find(indexes.begin(), indexes.end(), kIndexName) != indexes.end()) return in(kIndexName);
  if (indexes.size() == 1) return in(indexes[0]);
  if (indexes.size() > 1)
    return makeError(ErrorKind::Format, {dir},
                     std::to_string(indexes.size()) + " shard indexes (" + listNames(indexes) + ") and no " +
                         kIndexName + ": name the one to read");
  if (files.size() == 1) return in(files[0]);
  if (files.empty())
    return makeError(ErrorKind::Io, {dir}, std::string("no ") + kIndexName + " and no .safetensors file in the directory");
  return makeError(ErrorKind::Format, {dir},
                   std::to_string(files.size()) + " .safetensors files (" + listNames(files) + ") and no " +
                       kIndexName + ": name the index, or one file");
}

}  // namespace

Expected<std::map<std::string, std::string>> parseShardIndex(const std::string& text, const std::string& path) {
  auto bad = [&](const std::string& msg) { return makeError(ErrorKind::Format, {path}, "malformed index: " + msg); };
  std::string top;  // the top-level key being parsed
  std::set<std::string> seen;
  std::optional<std::string> twice;
  auto onEvent = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event != json::parse_event_t::key) return true;
    if (depth == 1) top = parsed.get<std::string>();
    if (depth == 2 && top == "weight_map" && !seen.insert(parsed.get<std::string>()).second && !twice)
      twice = parsed.get<std::string>();
    return true;
  };
  json j;
  try {
    j = json::parse(text, onEvent);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    size_t at = what.find("column ");
    at = at == std::string::npos ? std::string::npos : what.find(": ", at);
    return bad("invalid JSON at byte " + std::to_string(e.byte > 0 ? e.byte - 1 : 0) + ": " +
               (at == std::string::npos ? what : what.substr(at + 2)));
  } catch (const json::exception& e) {
    return bad(std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return bad("expected a JSON object whose 'weight_map' maps each tensor to its shard file");
  if (twice) return bad("tensor '" + *twice + "' appears twice in 'weight_map'");
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : j["weight_map"].items()) {
    if (!file.is_string()) return bad("'weight_map' maps tensor '" + name + "' to " + file.dump() + ", not a file name");
    std::string f = file.get<std::string>();
    // A plain file name: no directory part, so nothing outside the index's
    // directory (no "../", no absolute path) is ever opened.
    if (f.empty() || f == "." || f == ".." || fs::path(f).filename() != f || f.find('\\') != std::string::npos)
      return bad("'weight_map' maps tensor '" + name + "' to '" + f + "', not a file beside the index");
    map.emplace(name, f);
  }
  if (map.empty()) return bad("'weight_map' names no tensor");
  return map;
}

struct Checkpoint::Impl {
  std::string path;
  std::vector<std::string> files;
  bool sharded = false;
  std::vector<std::unique_ptr<Mapping>> maps;
  std::map<std::string, CheckpointTensor> tensors;
  int64_t bytes = 0;
};

Expected<Checkpoint> Checkpoint::open(const std::string& path) {
  if (path == "-")
    return makeError(ErrorKind::Io, {path}, "a checkpoint is mapped from files: name a file or directory, not standard input");
  auto impl = std::make_shared<Impl>();
  impl->path = path;
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    return makeError(ErrorKind::Io, {path}, std::string("cannot open file: ") + std::strerror(ENOENT));
  std::string file = path;
  if (fs::is_directory(st)) {
    auto resolved = resolveDirectory(path);
    if (!resolved) return resolved.error();
    file = *resolved;
  }

  // The shards and, through an index, which tensors each must hold.
  std::map<std::string, std::string> index;  // tensor -> shard file name
  std::vector<std::string> names;            // shard file names as the index writes them
  if (endsWith(file, ".json")) {
    if (!fs::is_regular_file(file, ec)) return makeError(ErrorKind::Io, {file}, "not a regular file");
    auto text = readFile(file);
    if (!text) return text.error();
    auto read = parseShardIndex(*text, file);
    if (!read) return read.error();
    index = read.take();
    std::set<std::string> distinct;
    for (const auto& [tensor, shard] : index) distinct.insert(shard);
    names.assign(distinct.begin(), distinct.end());
    impl->sharded = true;
  } else {
    names.push_back(file);
  }

  const fs::path base = impl->sharded ? fs::path(file).parent_path() : fs::path();
  std::map<std::string, std::vector<int32_t>> holders;  // tensor -> the shards whose header has it
  for (size_t s = 0; s < names.size(); ++s) {
    std::string shardPath = impl->sharded ? (base / names[s]).string() : names[s];
    std::string context;
    if (impl->sharded) {
      std::vector<std::string> in;
      for (const auto& [tensor, shard] : index)
        if (shard == names[s]) in.push_back(tensor);
      context = " (" + fs::path(file).filename().string() + " puts tensor '" + in[0] + "'" +
                (in.size() > 1 ? " and " + std::to_string(in.size() - 1) + " more" : std::string()) + " in it)";
    }
    auto m = mapFile(shardPath, context);
    if (!m) return m.error();
    auto entries = parseSafetensorsHeader((*m)->data, (*m)->size, shardPath);
    if (!entries) return entries.error();
    for (const SafetensorsEntry& e : *entries) {
      holders[e.name].push_back(int32_t(s));
      CheckpointTensor t{e.type, (*m)->data + e.offset, int64_t(e.bytes), int32_t(s), e.offset};
      impl->tensors.emplace(e.name, t);  // a second holder is refused below
    }
    impl->files.push_back(shardPath);
    impl->maps.push_back(m.take());
  }

  if (impl->sharded) {
    auto bad = [&](const std::string& msg) { return makeError(ErrorKind::Format, {file}, msg); };
    for (const auto& [tensor, shards] : holders)
      if (shards.size() > 1)
        return bad("tensor '" + tensor + "' is in two shards, '" + names[size_t(shards[0])] + "' and '" +
                   names[size_t(shards[1])] + "'");
    for (const auto& [tensor, shard] : index) {
      auto h = holders.find(tensor);
      if (h == holders.end())
        return bad("the index puts tensor '" + tensor + "' in shard '" + shard + "', which does not hold it");
      if (names[size_t(h->second[0])] != shard)
        return bad("the index puts tensor '" + tensor + "' in shard '" + shard + "', but shard '" +
                   names[size_t(h->second[0])] + "' holds it");
    }
    for (const auto& [tensor, shards] : holders)
      if (!index.count(tensor))
        return bad("shard '" + names[size_t(shards[0])] + "' holds tensor '" + tensor + "', which the index does not name");
  }
  for (const auto& [name, t] : impl->tensors) impl->bytes += t.bytes;
  Checkpoint c;
  c.impl_ = std::move(impl);
  return c;
}

const std::string& Checkpoint::path() const { return impl_->path; }
const std::vector<std::string>& Checkpoint::files() const { return impl_->files; }
bool Checkpoint::sharded() const { return impl_->sharded; }
const std::map<std::string, CheckpointTensor>& Checkpoint::tensors() const { return impl_->tensors; }
int64_t Checkpoint::bytes() const { return impl_->bytes; }

const CheckpointTensor* Checkpoint::find(const std::string& name) const {
  auto it = impl_->tensors.find(name);
  return it == impl_->tensors.end() ? nullptr : &it->second;
}

Tensor Checkpoint::read(const CheckpointTensor& t) const {
  Tensor out(t.type);
  std::memcpy(out.bytes.data(), t.data, size_t(t.bytes));
  return out;
}

void Checkpoint::release(const CheckpointTensor& t) const {
  // The mapping is page-aligned and whole pages are mapped, so the pages
  // around the tensor are in it; a neighbour's bytes that share a page are
  // read again from the file when used (the mapping is never written).
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  uintptr_t begin = uintptr_t(t.data) / page * page;
  uintptr_t end = (uintptr_t(t.data) + uintptr_t(t.bytes) + page - 1) / page * page;
  if (t.bytes > 0) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Expected<CheckpointBinding> bindCheckpoint(const Graph& g, const Checkpoint& c) {
  CheckpointBinding out;
  std::set<std::string> used;
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    if (v.storage != Storage::Weight) continue;
    const CheckpointTensor* t = c.find(v.name);
    if (!t) {
      std::string msg = "weight '" + v.name + "' is missing from the " + (c.sharded() ? "index" : "file");
      std::error_code ec;
      fs::path index = fs::path(c.path()).parent_path() / kIndexName;
      if (!c.sharded() && !fs::is_directory(c.path(), ec) && fs::exists(index, ec))
        msg += " (it is one shard of " + index.string() + ": name the index or its directory)";
      return makeError(ErrorKind::Bind, {c.path()}, msg);
    }
    if (auto s = checkWeight(v, t->type, c.fileOf(*t)); !s) return s.error();
    out.weights.emplace_back(v.name, t);
    out.bytes += t->bytes;
    used.insert(v.name);
  }
  std::sort(out.weights.begin(), out.weights.end(), [](const auto& a, const auto& b) {
    return a.second->shard != b.second->shard ? a.second->shard < b.second->shard : a.second->offset < b.second->offset;
  });
  for (const auto& [name, t] : c.tensors())
    if (!used.count(name)) out.unused.push_back(name);
  return out;
}

std::optional<std::string> LoadProgress::advance(int64_t done) {
  if (total_ < threshold_ || total_ <= 0) return std::nullopt;
  int64_t tenths = std::min<int64_t>(done * 10 / total_, 10);
  if (tenths <= tenths_ || tenths >= 10) return std::nullopt;  // the summary reports the end
  tenths_ = tenths;
  char line[96];
  std::snprintf(line, sizeof line, "loading weights: %.2f of %.2f GB (%d%%)", double(done) / 1e9, double(total_) / 1e9,
                int(done * 100 / total_));
  return std::string(line);
}

std::string formatBytes(int64_t bytes) {
  char s[48];
  if (bytes >= 1'000'000'000) std::snprintf(s, sizeof s, "%.2f GB", double(bytes) / 1e9);
  else if (bytes >= 1'000'000) std::snprintf(s, sizeof s, "%.1f MB", double(bytes) / 1e6);
  else if (bytes >= 1'000) std::snprintf(s, sizeof s, "%.1f kB", double(bytes) / 1e3);
  else std::snprintf(s, sizeof s, "%lld bytes", static_cast<long long>(bytes));
  return s;
}

std::string loadSummary(int64_t bytes, size_t files, double seconds) {
  char s[160];
  std::snprintf(s, sizeof s, "loaded %s of weights from %zu file%s in %.3f s (%.3g GB/s)", formatBytes(bytes).c_str(),
                files, files == 1 ? "" : "s", seconds, double(bytes) / 1e9 / std::max(seconds, 1e-9));
  return s;
}

}  // namespace poot

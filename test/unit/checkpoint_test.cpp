// Unit tests of checkpoints (oracle/checkpoint.h) and of binding them
// (oracle/params.h): one file, an index with its shards and a model
// directory open to the same tensors, mapped and read back byte for byte on
// random data; every refusal with its exact diagnostic (a malformed index, a
// missing shard, a tensor in two shards, an index and a shard that
// disagree, a directory that holds no checkpoint or several); released
// pages read back from the file; a graph bound
// against a checkpoint (missing weights, another dtype with the flag that
// would match, unused tensors, the order the bytes lie on disk); the
// notices a tool prints; and the progress and summary lines of a load.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "oracle/checkpoint.h"
#include "oracle/params.h"
#include "oracle/safetensors.h"
#include "testing.h"

using namespace poot;
namespace fs = std::filesystem;

namespace {

using testing::randomTensor;

// A fresh temporary directory, removed with the object.
struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / ("poot_ckpt_test_" + std::to_string(testing::freshSeed()))) {
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

void write(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// Two shards and an index as Hugging Face writes them.
struct Sharded {
  TensorMap one, two;
  Sharded() {
    one["model.embed_tokens.weight"] = randomTensor({DType::BF16, {16, 8}});
    one["model.norm.weight"] = randomTensor({DType::BF16, {8}});
    two["lm_head.weight"] = randomTensor({DType::BF16, {16, 8}});
    two["model.layers.0.mask"] = randomTensor({DType::Bool, {3}});
  }
  std::string index() const {
    std::string map;
    for (const auto& [name, t] : one) map += (map.empty() ? "\"" : ",\"") + name + "\":\"model-00001-of-00002.safetensors\"";
    for (const auto& [name, t] : two) map += ",\"" + name + "\":\"model-00002-of-00002.safetensors\"";
    return "{\"metadata\":{\"total_size\":552},\"weight_map\":{" + map + "}}";
  }
  void writeTo(const TempDir& d, const std::string& index) const {
    write(d / "model-00001-of-00002.safetensors", safetensorsBytes(one));
    write(d / "model-00002-of-00002.safetensors", safetensorsBytes(two));
    write(d / "model.safetensors.index.json", index);
  }
};

// Two of Sharded's weights, gathered and scaled; `slot` adds the slot %pos
// and an output of it.
Graph normedEmbedding(bool slot = false) {
  return testing::parse(
      std::string("graph g\ninput %tokens : i32[1,2]\nweight %model.norm.weight : bf16[8]\n"
                  "weight %model.embed_tokens.weight : bf16[16,8]\n") +
      (slot ? "slot %pos : i32[] range [0, 3]\n%p = Add(%pos, %pos) : i32[]\n" : "") +
      "%e = Gather(%model.embed_tokens.weight, %tokens) {axis=0} : bf16[1,2,8]\n"
      "%y = Mul(%e, %model.norm.weight) : bf16[1,2,8]\noutput %y\n" +
      (slot ? "output %p\n" : ""));
}

Checkpoint opened(const std::string& path) {
  auto c = Checkpoint::open(path);
  REQUIRE_MESSAGE(bool(c), (c ? "" : c.error().str()));
  return c.take();
}

std::string openError(const std::string& path, ErrorKind kind = ErrorKind::Format) {
  auto c = Checkpoint::open(path);
  REQUIRE(!c);
  CHECK(c.error().kind == kind);
  return c.error().str();
}

// The checkpoint holds exactly `want`, byte for byte.
void checkHolds(const Checkpoint& c, const TensorMap& want) {
  REQUIRE(c.tensors().size() == want.size());
  int64_t bytes = 0;
  for (const auto& [name, t] : want) {
    const CheckpointTensor* got = c.find(name);
    REQUIRE_MESSAGE(got, name);
    CHECK(got->type == t.type);
    CHECK(c.read(*got).bytes == t.bytes);
    bytes += int64_t(t.bytes.size());
  }
  CHECK(c.bytes() == bytes);
}

}  // namespace

TEST_CASE("checkpoint: a file, an index and a directory open to the same tensors") {
  TempDir d;
  Sharded s;
  s.writeTo(d, s.index());
  TensorMap all = s.one;
  all.insert(s.two.begin(), s.two.end());

  Checkpoint index = opened(d / "model.safetensors.index.json");
  CHECK(index.sharded());
  CHECK(index.files() == std::vector<std::string>{d / "model-00001-of-00002.safetensors", d / "model-00002-of-00002.safetensors"});
  checkHolds(index, all);
  CHECK(index.fileOf(*index.find("lm_head.weight")) == d / "model-00002-of-00002.safetensors");
  // Released pages are read from the file again.
  for (const auto& [name, t] : index.tensors()) index.release(t);
  checkHolds(index, all);

  Checkpoint dir = opened(d.path.string());  // the index, found in the directory
  CHECK(dir.sharded());
  checkHolds(dir, all);

  Checkpoint file = opened(d / "model-00002-of-00002.safetensors");
  CHECK(!file.sharded());
  checkHolds(file, s.two);

  // A directory without an index: its one .safetensors file.
  TempDir single;
  write(single / "model.safetensors", safetensorsBytes(s.one));
  write(single / "config.json", "{}");
  Checkpoint one = opened(single.path.string());
  CHECK(one.files() == std::vector<std::string>{single / "model.safetensors"});
  checkHolds(one, s.one);
  // Through a link, as a Hugging Face cache snapshot holds its files.
  TempDir linked;
  fs::create_symlink(single / "model.safetensors", linked.path / "model.safetensors");
  checkHolds(opened(linked.path.string()), s.one);
}

TEST_CASE("checkpoint: a directory with no checkpoint, or several, is refused") {
  TempDir empty;
  write(empty / "config.json", "{}");
  CHECK(openError(empty.path.string(), ErrorKind::Io) ==
        empty.path.string() + ": error: no model.safetensors.index.json and no .safetensors file in the directory");
  TempDir two;
  write(two / "b.safetensors", safetensorsBytes({}));
  write(two / "a.safetensors", safetensorsBytes({}));
  CHECK(openError(two.path.string()) ==
        two.path.string() +
            ": error: 2 .safetensors files (a.safetensors and b.safetensors) and no model.safetensors.index.json: "
            "name the index, or one file");
  TempDir indexes;
  write(indexes / "x.safetensors.index.json", "{}");
  write(indexes / "y.safetensors.index.json", "{}");
  CHECK(openError(indexes.path.string()) ==
        indexes.path.string() +
            ": error: 2 shard indexes (x.safetensors.index.json and y.safetensors.index.json) and no "
            "model.safetensors.index.json: name the one to read");
  CHECK(openError(empty / "nope.safetensors", ErrorKind::Io) ==
        empty / "nope.safetensors" + ": error: cannot open file: No such file or directory");
  // A shard's own header is checked as any .safetensors file is.
  write(empty / "short.safetensors", "abc");
  CHECK(openError(empty / "short.safetensors") ==
        empty / "short.safetensors" + ": error: file is too short to hold the 8-byte header length");
  write(empty / "zero.safetensors", "");
  CHECK(openError(empty / "zero.safetensors") ==
        empty / "zero.safetensors" + ": error: file is too short to hold the 8-byte header length");
}

TEST_CASE("checkpoint: a malformed index is refused naming the index") {
  TempDir d;
  Sharded s;
  std::string index = d / "model.safetensors.index.json";
  auto refused = [&](const std::string& text) {
    s.writeTo(d, text);
    return openError(index);
  };
  const std::string at = index + ": error: malformed index: ";
  CHECK(refused("{\"weight_map\": {") ==
        at + "invalid JSON at byte 16: syntax error while parsing object key - unexpected end of input; expected "
             "string literal");
  CHECK(refused("[]") == at + "expected a JSON object whose 'weight_map' maps each tensor to its shard file");
  CHECK(refused("{\"metadata\": {}}") == at + "expected a JSON object whose 'weight_map' maps each tensor to its shard file");
  CHECK(refused("{\"weight_map\": []}") ==
        at + "expected a JSON object whose 'weight_map' maps each tensor to its shard file");
  CHECK(refused("{\"weight_map\": {}}") == at + "'weight_map' names no tensor");
  CHECK(refused("{\"weight_map\": {\"w\": 3}}") == at + "'weight_map' maps tensor 'w' to 3, not a file name");
  CHECK(refused("{\"weight_map\": {\"w\": \"/abs/x.safetensors\"}}") ==
        at + "'weight_map' maps tensor 'w' to '/abs/x.safetensors', not a file beside the index");
  for (const char* escape : {"../x.safetensors", "sub/../../x.safetensors", "..", "sub/x.safetensors"})
    CHECK(refused(std::string("{\"weight_map\": {\"w\": \"") + escape + "\"}}") ==
          at + "'weight_map' maps tensor 'w' to '" + escape + "', not a file beside the index");
  CHECK(refused("{\"weight_map\": {\"w\": \"a\", \"w\": \"b\"}}") == at + "tensor 'w' appears twice in 'weight_map'");
  // "metadata" may hold anything; a key twice there is not a tensor twice.
  s.writeTo(d, "{\"metadata\": {\"k\": 1, \"k\": 2}, \"weight_map\": {\"model.norm.weight\": "
               "\"model-00001-of-00002.safetensors\", \"model.embed_tokens.weight\": \"model-00001-of-00002.safetensors\"}}");
  checkHolds(opened(index), s.one);
}

TEST_CASE("checkpoint: a missing shard, a tensor in two shards and a disagreeing index are refused") {
  TempDir d;
  Sharded s;
  std::string index = d / "model.safetensors.index.json";
  s.writeTo(d, s.index());
  fs::remove(d / "model-00002-of-00002.safetensors");
  CHECK(openError(index, ErrorKind::Io) ==
        d / "model-00002-of-00002.safetensors" +
            ": error: cannot open file: No such file or directory (model.safetensors.index.json puts tensor "
            "'lm_head.weight' and 1 more in it)");

  // A tensor in both shards' headers (the index names one of them).
  Sharded twice;
  twice.two["model.norm.weight"] = twice.one["model.norm.weight"];
  twice.writeTo(d, s.index());
  CHECK(openError(index) == index + ": error: tensor 'model.norm.weight' is in two shards, "
                                    "'model-00001-of-00002.safetensors' and 'model-00002-of-00002.safetensors'");

  // The index puts a tensor in the wrong shard, in a shard that lacks it,
  // or does not name a tensor a shard holds.
  s.writeTo(d, s.index());
  std::string text = s.index();
  std::string wrong = text;
  size_t at = wrong.find("\"lm_head.weight\":\"model-00002");
  wrong.replace(at, std::string("\"lm_head.weight\":\"model-00002").size(), "\"lm_head.weight\":\"model-00001");
  s.writeTo(d, wrong);
  CHECK(openError(index) == index + ": error: the index puts tensor 'lm_head.weight' in shard "
                                    "'model-00001-of-00002.safetensors', but shard 'model-00002-of-00002.safetensors' "
                                    "holds it");
  std::string extra = text;
  extra.insert(extra.size() - 2, ",\"ghost\":\"model-00002-of-00002.safetensors\"");
  s.writeTo(d, extra);
  CHECK(openError(index) ==
        index + ": error: the index puts tensor 'ghost' in shard 'model-00002-of-00002.safetensors', which does not "
                "hold it");
  std::string fewer = text;
  at = fewer.find(",\"model.layers.0.mask\"");
  fewer.erase(at, fewer.find('"', fewer.find(':', at) + 2) + 1 - at);
  s.writeTo(d, fewer);
  CHECK(openError(index) == index + ": error: shard 'model-00002-of-00002.safetensors' holds tensor "
                                    "'model.layers.0.mask', which the index does not name");
}

TEST_CASE("checkpoint: a graph binds every weight through it, checked, in disk order") {
  TempDir d;
  Sharded s;
  s.writeTo(d, s.index());
  Graph g = normedEmbedding();
  Checkpoint c = opened(d.path.string());
  auto b = bindCheckpoint(g, c);
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  REQUIRE(b->weights.size() == 2);
  // Sorted by where the bytes lie: the embedding (first in the file) first.
  CHECK(b->weights[0].first == "model.embed_tokens.weight");
  CHECK(b->weights[1].first == "model.norm.weight");
  CHECK(b->weights[0].second == c.find("model.embed_tokens.weight"));
  CHECK(b->bytes == 16 * 8 * 2 + 8 * 2);
  CHECK(b->unused == std::vector<std::string>{"lm_head.weight", "model.layers.0.mask"});

  auto refused = [&](const Graph& graph, const Checkpoint& ck) {
    auto r = bindCheckpoint(graph, ck);
    REQUIRE(!r);
    CHECK(r.error().kind == ErrorKind::Bind);
    return r.error().str();
  };
  // The embedding alone, declared as `type`.
  auto embedding = [](const std::string& type, const std::string& result) {
    return testing::parse("graph g\ninput %tokens : i32[1,2]\nweight %model.embed_tokens.weight : " + type +
                          "\n%e = Gather(%model.embed_tokens.weight, %tokens) {axis=0} : " + result + "\noutput %e\n");
  };
  const std::string shard1 = d / "model-00001-of-00002.safetensors";
  CHECK(refused(embedding("f32[16,8]", "f32[1,2,8]"), c) ==
        shard1 + ": error: weight 'model.embed_tokens.weight' is bf16[16,8] in the file but the graph declares "
                 "f32[16,8] (trace with --weights-dtype bf16 to match the file)");
  CHECK(refused(embedding("bf16[8,16]", "bf16[1,2,16]"), c) ==
        shard1 + ": error: weight 'model.embed_tokens.weight' is bf16[16,8] in the file but the graph declares "
                 "bf16[8,16]");
  Graph more = testing::parse("graph g\nweight %extra : f32[2]\n%y = Neg(%extra) : f32[2]\noutput %y\n");
  CHECK(refused(more, c) == d.path.string() + ": error: weight 'extra' is missing from the index");
  // One shard named alone, beside its index: the message says so.
  CHECK(refused(g, opened(d / "model-00002-of-00002.safetensors")) ==
        d / "model-00002-of-00002.safetensors" + ": error: weight 'model.norm.weight' is missing from the file (it is "
                                                 "one shard of " +
            d / "model.safetensors.index.json" + ": name the index or its directory)");
}

TEST_CASE("checkpoint: bindParamArgs leaves the checkpoint's weights mapped and counts what it generated") {
  TempDir d;
  Sharded s;
  s.writeTo(d, s.index());
  Graph g = testing::parse(
      "graph g\ninput %tokens : i32[1,2]\nweight %model.norm.weight : bf16[8]\nweight %scale : f32[8]\n"
      "weight %model.embed_tokens.weight : bf16[16,8]\nslot %pos : i32[] range [0, 3]\n"
      "%e = Gather(%model.embed_tokens.weight, %tokens) {axis=0} : bf16[1,2,8]\n"
      "%y = Mul(%e, %model.norm.weight) : bf16[1,2,8]\n%f = Convert(%y) : f32[1,2,8]\n%z = Mul(%f, %scale) : f32[1,2,8]\n"
      "%p = Add(%pos, %pos) : i32[]\noutput %z\noutput %p\n");
  // A weight the checkpoint lacks is refused: a checkpoint is all of them or none.
  auto missing = bindParamArgs(g, ParamArgs{{}, {"pos=1"}, d.path.string(), 3});
  REQUIRE(!missing);
  CHECK(missing.error().str() == d.path.string() + ": error: weight 'scale' is missing from the index");

  Graph small = normedEmbedding(true);
  auto p = bindParamArgs(small, ParamArgs{{}, {"pos=1"}, d.path.string(), 3});
  REQUIRE_MESSAGE(bool(p), (p ? "" : p.error().str()));
  CHECK(p->tensors.count("model.norm.weight") == 0);  // left in the mapping
  CHECK(p->tensors.count("tokens") == 1);
  REQUIRE(p->generated.size() == 1);
  CHECK(small.value(p->generated[0]).name == "tokens");
  auto host = p->hostTensors();
  CHECK(host.at("model.norm.weight").bytes == s.one.at("model.norm.weight").bytes);
  CHECK(host.size() == 4);
  std::string shard2 = d / "model-00002-of-00002.safetensors";
  // The notices as the tools print them: their text lines.
  auto lines = [](const std::vector<Error>& notices) {
    std::vector<std::string> out;
    for (const Error& e : notices) out.push_back(e.str());
    return out;
  };
  CHECK(lines(bindNotices(small, *p)) ==
        std::vector<std::string>{shard2 + ": warning: tensor 'lm_head.weight' is not used by the graph",
                                 shard2 + ": warning: tensor 'model.layers.0.mask' is not used by the graph",
                                 "note: generated 1 input from seed 3, not read from any file (name them with "
                                 "--weights, --input and --slot)"});

  // Without a checkpoint every weight is generated, and the note says how many.
  auto none = bindParamArgs(g, ParamArgs{{}, {}, "", 0});
  REQUIRE(bool(none));
  std::vector<Error> drawn = bindNotices(g, *none);
  CHECK(lines(drawn) ==
        std::vector<std::string>{"note: generated 1 input, 3 weights and 1 slot from seed 0, not read from any file "
                                 "(name them with --weights, --input and --slot)"});
  CHECK(drawn[0].json() ==
        "{\"file\":\"\",\"line\":0,\"column\":0,\"item\":\"\",\"severity\":\"note\",\"kind\":\"Bind\",\"message\":"
        "\"generated 1 input, 3 weights and 1 slot from seed 0, not read from any file (name them with --weights, "
        "--input and --slot)\",\"figures\":{\"inputs\":1,\"weights\":3,\"slots\":1}}");

  // Past eight unused tensors, one line counts the rest.
  TensorMap many;
  for (int i = 0; i < 11; ++i) many["t" + std::to_string(i)] = randomTensor({DType::F32, {2}});
  many["model.norm.weight"] = s.one.at("model.norm.weight");
  many["model.embed_tokens.weight"] = s.one.at("model.embed_tokens.weight");
  write(d / "many.safetensors", safetensorsBytes(many));
  auto m = bindParamArgs(small, ParamArgs{{"tokens=" + std::string("/nonexistent.npy")}, {}, d / "many.safetensors", 0});
  REQUIRE(!m);  // the .npy is read first: nothing of the checkpoint is opened
  CHECK(m.error().kind == ErrorKind::Io);
  auto ok = bindParamArgs(small, ParamArgs{{}, {}, d / "many.safetensors", 0});
  REQUIRE(bool(ok));
  std::vector<std::string> notes = lines(bindNotices(small, *ok));
  REQUIRE(notes.size() == 10);
  CHECK(notes[0] == d / "many.safetensors" + ": warning: tensor 't0' is not used by the graph");
  CHECK(notes[8] == d / "many.safetensors" + ": warning: 3 more tensors are not used by the graph");
}

TEST_CASE("checkpoint: load progress lines, byte counts and the summary") {
  LoadProgress small(999);
  CHECK(!small.advance(999));
  LoadProgress big(4'000'000'000);
  CHECK(!big.advance(100'000'000));
  CHECK(big.advance(400'000'000) == std::optional<std::string>("loading weights: 0.40 of 4.00 GB (10%)"));
  CHECK(!big.advance(700'000'000));
  CHECK(big.advance(2'100'000'000) == std::optional<std::string>("loading weights: 2.10 of 4.00 GB (52%)"));
  CHECK(!big.advance(4'000'000'000));  // the end is the summary's
  LoadProgress low(2000, 1000);
  CHECK(low.advance(1000) == std::optional<std::string>("loading weights: 0.00 of 0.00 GB (50%)"));
  CHECK(formatBytes(512) == "512 bytes");
  CHECK(formatBytes(4000) == "4.0 kB");
  CHECK(formatBytes(12'345'678) == "12.3 MB");
  CHECK(formatBytes(16'060'000'000) == "16.06 GB");
  CHECK(loadSummary(16'060'000'000, 4, 6.1) == "loaded 16.06 GB of weights from 4 files in 6.100 s (2.63 GB/s)");
  CHECK(loadSummary(2000, 1, 0.001) == "loaded 2.0 kB of weights from 1 file in 0.001 s (0.002 GB/s)");
}

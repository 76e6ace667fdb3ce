// Unit tests of LoRA adapters (oracle/lora.h): the merge W + scale * B A on
// a small hand-checked weight, with lora_alpha / r and rsLoRA's
// lora_alpha / sqrt(r), the refusals of a malformed adapter, and an
// AdapterSet's identities through loads, a hot reload and retiring.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "ir/text.h"
#include "oracle/lora.h"
#include "oracle/safetensors.h"

using namespace poot;

namespace {

Tensor f32(Shape shape, std::vector<double> values) {
  Tensor t(Type{DType::F32, std::move(shape)});
  for (size_t i = 0; i < values.size(); ++i) t.set(int64_t(i), values[i]);
  return t;
}

// The adapters' folders, removed when the test case ends.
struct TempDirs {
  std::vector<std::filesystem::path> dirs;
  ~TempDirs() {
    std::error_code ec;
    for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
  }
};

std::string writeAdapter(TempDirs& temps, const std::string& name, const std::string& config, const TensorMap& tensors) {
  auto dir = std::filesystem::temp_directory_path() / ("poot-lora-test-" + name);
  temps.dirs.push_back(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "adapter_config.json") << config;
  std::ofstream(dir / "adapter_model.safetensors", std::ios::binary) << safetensorsBytes(tensors);
  return dir.string();
}

// W [2, 3], A [1, 3], B [2, 1]: B A = [[2, 4, 6], [-1, -2, -3]].
TensorMap rankOne() {
  return {{"base_model.model.proj.lora_A.weight", f32({1, 3}, {1, 2, 3})},
          {"base_model.model.proj.lora_B.weight", f32({2, 1}, {2, -1})}};
}

Graph oneWeight() {
  auto g = parseGraph("graph g\nweight %proj.weight : f32[2,3]\n%y = Neg(%proj.weight) : f32[2,3]\noutput %y\n", "g.pg");
  REQUIRE_MESSAGE(g, g.error().str());
  return g.take();
}

}  // namespace

TEST_CASE("lora: the merge is W + (lora_alpha / r) B A, or over sqrt(r) with rsLoRA") {
  TempDirs temps;
  Graph g = oneWeight();
  BoundParams base;
  base.tensors["proj.weight"] = f32({2, 3}, {1, 0, -1, 0.5, 0.25, 0});
  for (bool rs : {false, true}) {
    std::string dir = writeAdapter(temps, rs ? "rs" : "plain",
                                   std::string("{\"r\": 1, \"lora_alpha\": 4") + (rs ? ", \"use_rslora\": true}" : "}"),
                                   rankOne());
    auto a = loadAdapter(dir);
    REQUIRE_MESSAGE(a, a.error().str());
    CHECK(a->rank == 1);
    CHECK(a->scale == 4.0);  // sqrt(1) = 1: the two agree at rank 1
    auto m = mergeAdapter(g, base, *a);
    REQUIRE_MESSAGE(m, m.error().str());
    const Tensor& w = m->at("proj.weight");
    std::vector<double> want{1 + 8, 16, -1 + 24, 0.5 - 4, 0.25 - 8, -12};
    for (int64_t i = 0; i < 6; ++i) CHECK(w.get(i) == want[size_t(i)]);
  }
  TensorMap rank4{{"base_model.model.proj.lora_A.weight", f32({4, 3}, std::vector<double>(12, 1))},
                  {"base_model.model.proj.lora_B.weight", f32({2, 4}, std::vector<double>(8, 1))}};
  auto rs = loadAdapter(writeAdapter(temps, "rs4", "{\"r\": 4, \"lora_alpha\": 4, \"use_rslora\": true}", rank4));
  REQUIRE(rs);
  CHECK(rs->scale == 2.0);
  auto plain = loadAdapter(writeAdapter(temps, "plain4", "{\"r\": 4, \"lora_alpha\": 4}", rank4));
  REQUIRE(plain);
  CHECK(plain->scale == 1.0);
}

TEST_CASE("lora: malformed adapters are refused") {
  TempDirs temps;
  auto refused = [&temps](const std::string& name, const std::string& config, const TensorMap& t, const std::string& what) {
    auto a = loadAdapter(writeAdapter(temps, name, config, t));
    REQUIRE_FALSE(a);
    CHECK_MESSAGE(a.error().message.find(what) != std::string::npos, a.error().str());
  };
  refused("noalpha", "{\"r\": 1}", rankOne(), "no lora_alpha number");
  refused("fanin", "{\"r\": 1, \"lora_alpha\": 1, \"fan_in_fan_out\": true}", rankOne(), "fan_in_fan_out");
  TensorMap onlyA{{"base_model.model.proj.lora_A.weight", f32({1, 3}, {1, 2, 3})}};
  refused("onlya", "{\"r\": 1, \"lora_alpha\": 1}", onlyA, "lacks its lora_B weight");
  TensorMap other = rankOne();
  other["base_model.model.proj.bias"] = f32({2}, {1, 1});
  refused("other", "{\"r\": 1, \"lora_alpha\": 1}", other, "is not a lora_A or lora_B weight");

  // A target whose shape does not compose with the graph's weight.
  Graph g = oneWeight();
  BoundParams base;
  base.tensors["proj.weight"] = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  TensorMap wide{{"base_model.model.proj.lora_A.weight", f32({1, 4}, {1, 1, 1, 1})},
                 {"base_model.model.proj.lora_B.weight", f32({2, 1}, {1, 1})}};
  auto a = loadAdapter(writeAdapter(temps, "wide", "{\"r\": 1, \"lora_alpha\": 1}", wide));
  REQUIRE(a);
  auto m = mergeAdapter(g, base, *a);
  REQUIRE_FALSE(m);
  CHECK(m.error().message == "the adapter of proj.weight is [2, 4], the weight f32[2,3]");
}

TEST_CASE("lora: an adapter set gives each load a fresh identity and keeps a reloaded one's weights until retired") {
  TempDirs temps;
  Graph g = oneWeight();
  BoundParams base;
  base.tensors["proj.weight"] = f32({2, 3}, {1, 0, -1, 0.5, 0.25, 0});
  std::string one = writeAdapter(temps, "set1", "{\"r\": 1, \"lora_alpha\": 1}", rankOne());  // + B A
  std::string two = writeAdapter(temps, "set2", "{\"r\": 1, \"lora_alpha\": 2}", rankOne());  // + 2 B A
  AdapterSet set(g, base);
  CHECK(set.merged(AdapterSet::kBase)->empty());
  CHECK_FALSE(set.identity("a"));

  auto a = set.load("a", one);
  REQUIRE_MESSAGE(a, a.error().str());
  auto b = set.load("b", two);
  REQUIRE_MESSAGE(b, b.error().str());
  CHECK(*a == 2);
  CHECK(*b == 3);
  CHECK(set.names() == std::vector<std::string>{"a", "b"});
  CHECK(set.merged(*a)->at("proj.weight").get(0) == 1 + 2);

  // A reload: a fresh identity for the name, the old weights still held.
  auto reloaded = set.load("a", two);
  REQUIRE(reloaded);
  CHECK(*reloaded == 4);
  CHECK(set.identity("a") == 4u);
  CHECK(set.merged(4)->at("proj.weight").get(0) == 1 + 4);
  REQUIRE(set.merged(2) != nullptr);
  CHECK(set.merged(2)->at("proj.weight").get(0) == 1 + 2);

  // A failed load changes nothing and takes no identity.
  auto bad = set.load("a", writeAdapter(temps, "set-bad", "{\"r\": 1}", rankOne()));
  REQUIRE_FALSE(bad);
  CHECK(set.identity("a") == 4u);
  auto unnamed = set.load("", one);
  REQUIRE_FALSE(unnamed);
  CHECK(unnamed.error().kind == ErrorKind::Usage);

  // Only a replaced identity can be retired.
  for (uint64_t held : {AdapterSet::kBase, uint64_t(3), uint64_t(4)}) {
    auto r = set.retire(held);
    REQUIRE_FALSE(r);
    CHECK(r.error().kind == ErrorKind::Usage);
    CHECK(set.merged(held) != nullptr);
  }
  REQUIRE(set.retire(2));
  CHECK(set.merged(2) == nullptr);
  CHECK_FALSE(set.retire(2));
  auto again = set.load("b", one);
  REQUIRE(again);
  CHECK(*again == 5);
  CHECK(set.merged(3) != nullptr);  // b's old identity, held until retired
}

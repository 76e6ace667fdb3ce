// Unit tests of .safetensors reading, writing and weight binding: round trips
// of every dtype on fresh random data, the exact layout our writer produces,
// a file laid out as the reference writer lays it (with __metadata__),
// malformed files each with its exact diagnostic, and bindWeights against a
// small graph (missing, wrong dtype, wrong shape, unused tensors dropped).
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "oracle/safetensors.h"
#include "testing.h"

using namespace poot;

namespace {

using testing::randomTensor;

// A file from a header's JSON text and the data section, as written by hand.
std::string stFile(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string stError(const std::string& bytes) {
  auto m = parseSafetensors(bytes, "w.safetensors");
  REQUIRE(!m);
  CHECK(m.error().kind == ErrorKind::Format);
  return m.error().str();
}

// Header text of one tensor entry.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
}

const std::string kData16(16, '\x22');

}  // namespace

TEST_CASE("safetensors: every dtype round-trips on random data") {
  TensorMap m;
  m["b.bool"] = randomTensor({DType::Bool, {3, 5}});
  m["a.f32"] = randomTensor({DType::F32, {2, 3}});
  m["model.layers.0.f16"] = randomTensor({DType::F16, {7}});
  m["bf16"] = randomTensor({DType::BF16, {2, 2, 2}});
  m["i32 scalar"] = randomTensor({DType::I32, {}});
  m["i64"] = randomTensor({DType::I64, {1, 3}});
  std::string bytes = safetensorsBytes(m);
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i) headerLen = headerLen << 8 | uint8_t(bytes[size_t(i)]);
  CHECK(headerLen % 8 == 0);
  size_t total = 0;
  for (const auto& [name, t] : m) total += t.bytes.size();
  CHECK(bytes.size() == 8 + headerLen + total);  // contiguous, nothing between tensors

  auto back = parseSafetensors(bytes, "rt.safetensors");
  REQUIRE_MESSAGE(bool(back), (back ? "" : back.error().str()));
  REQUIRE(back->size() == m.size());
  for (const auto& [name, t] : m) {
    REQUIRE(back->count(name) == 1);
    CHECK(back->at(name).type == t.type);
    CHECK(back->at(name).bytes == t.bytes);
  }
}

TEST_CASE("safetensors: exact layout of a small file") {
  TensorMap m;
  m["z"] = randomTensor({DType::I64, {1}});
  m["a"] = randomTensor({DType::F16, {2}});
  std::string bytes = safetensorsBytes(m);
  const std::string header =
      "{\"a\":{\"data_offsets\":[0,4],\"dtype\":\"F16\",\"shape\":[2]},"
      "\"z\":{\"data_offsets\":[4,12],\"dtype\":\"I64\",\"shape\":[1]}}";
  REQUIRE(header.size() == 108);
  REQUIRE(bytes.size() == 8 + 112 + 12);
  CHECK(bytes.substr(0, 8) == std::string("\x70\0\0\0\0\0\0\0", 8));
  CHECK(bytes.substr(8, 112) == header + "    ");
  CHECK(std::memcmp(bytes.data() + 120, m["a"].bytes.data(), 4) == 0);
  CHECK(std::memcmp(bytes.data() + 124, m["z"].bytes.data(), 8) == 0);
  CHECK(safetensorsBytes({}) == std::string("\x08\0\0\0\0\0\0\0{}      ", 16));
}

TEST_CASE("safetensors: a file with metadata, in offset order unlike name order") {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}," + entry("b", "F32", "[2]", "[0,8]") + "," +
                       entry("a", "BOOL", "[]", "[8,9]") + "," + entry("c", "BF16", "[1,1]", "[9,11]") + "}  ";
  std::string data = std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8) + "\x01" + "\x80\x3f";
  auto m = parseSafetensors(stFile(header, data), "m.safetensors");
  REQUIRE_MESSAGE(bool(m), (m ? "" : m.error().str()));
  REQUIRE(m->size() == 3);  // __metadata__ is not a tensor
  CHECK(m->at("b").type == Type{DType::F32, {2}});
  float b[2];
  std::memcpy(b, m->at("b").bytes.data(), 8);
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == -2.0f);
  CHECK(m->at("a").type == Type{DType::Bool, {}});
  CHECK(m->at("a").bytes == std::vector<uint8_t>{1});
  CHECK(m->at("c").bytes == std::vector<uint8_t>{0x80, 0x3f});  // the gap byte '?' belongs to nobody
}

TEST_CASE("safetensors: readSafetensors reports unreadable files as Io") {
  auto dir = std::filesystem::temp_directory_path() / ("poot_st_test_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  TensorMap m{{"w", randomTensor({DType::F32, {4}})}};
  std::string path = (dir / "w.safetensors").string();
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    std::string bytes = safetensorsBytes(m);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  auto back = readSafetensors(path);
  REQUIRE(bool(back));
  CHECK(back->at("w").bytes == m["w"].bytes);
  auto missing = readSafetensors((dir / "nope.safetensors").string());
  REQUIRE(!missing);
  CHECK(missing.error().kind == ErrorKind::Io);
  std::filesystem::remove_all(dir);
}

TEST_CASE("safetensors: malformed files are typed errors naming the file and the tensor") {
  auto one = [](const std::string& e) { return "{" + e + "}"; };
  // The well-formed base case first, so every failure below is the one change.
  CHECK(bool(parseSafetensors(stFile(one(entry("w", "F32", "[2,2]", "[0,16]")), kData16), "w.safetensors")));

  CHECK(stError("\x05\0\0") == "w.safetensors: error: file is too short to hold the 8-byte header length");
  CHECK(stError(std::string("\x40\0\0\0\0\0\0\0{}", 10)) ==
        "w.safetensors: error: header length 64 runs past the end of the file (10 bytes)");
  CHECK(stError(std::string("\0\0\0\x10\0\0\0\0{}", 10)) ==
        "w.safetensors: error: header length 268435456 is over the 100 MB limit");
  CHECK(stError(std::string("\xff\xff\xff\xff\xff\xff\xff\xff", 8)) ==
        "w.safetensors: error: header length 18446744073709551615 is over the 100 MB limit");
  CHECK(stError(stFile("{\"w\":{\"dtype\":\"F32\",}}", "")) ==
        "w.safetensors: error: malformed JSON header at file offset 28: syntax error while parsing object key - "
        "unexpected '}'; expected string literal");
  CHECK(stError(stFile("", "")) ==
        "w.safetensors: error: malformed JSON header at file offset 8: syntax error while parsing value - "
        "unexpected end of input; expected '[', '{', or a literal");
  CHECK(stError(stFile("[1,2]", "")) == "w.safetensors: error: header is not a JSON object");
  CHECK(stError(stFile("{\"__metadata__\":{\"n\":3}}", "")) ==
        "w.safetensors: error: '__metadata__' must be an object of strings");
  CHECK(stError(stFile("{\"w\":[]}", "")) == "w.safetensors: error: tensor 'w': entry is not an object");
  CHECK(stError(stFile("{\"w\":{\"dtype\":\"F32\",\"shape\":[]}}", "")) ==
        "w.safetensors: error: tensor 'w': entry has no 'data_offsets'");
  CHECK(stError(stFile(one(entry("w", "F64", "[2]", "[0,16]")), kData16)) ==
        "w.safetensors: error: tensor 'w': unknown dtype 'F64' (expected F32, F16, BF16, I32, I64 or BOOL)");
  CHECK(stError(stFile("{\"w\":{\"dtype\":4,\"shape\":[4],\"data_offsets\":[0,16]}}", kData16)) ==
        "w.safetensors: error: tensor 'w': unknown dtype 4 (expected F32, F16, BF16, I32, I64 or BOOL)");
  CHECK(stError(stFile(one(entry("w", "F32", "[-4]", "[0,16]")), kData16)) ==
        "w.safetensors: error: tensor 'w': shape [-4] is not a list of non-negative integers");
  CHECK(stError(stFile(one(entry("w", "F32", "[4.0]", "[0,16]")), kData16)) ==
        "w.safetensors: error: tensor 'w': shape [4.0] is not a list of non-negative integers");
  CHECK(stError(stFile(one(entry("w", "F32", "4", "[0,16]")), kData16)) ==
        "w.safetensors: error: tensor 'w': shape 4 is not a list of non-negative integers");
  CHECK(stError(stFile(one(entry("w", "F32", "[4,0]", "[0,0]")), kData16)) ==
        "w.safetensors: error: tensor 'w': shape [4,0] has a zero-size dimension, which the IR does not allow");
  CHECK(stError(stFile(one(entry("w", "F32", "[4294967296,4294967296]", "[0,16]")), kData16)) ==
        "w.safetensors: error: tensor 'w': shape [4294967296,4294967296] is too large");
  CHECK(stError(stFile(one(entry("w", "F32", "[4]", "[0]")), kData16)) ==
        "w.safetensors: error: tensor 'w': data_offsets [0] are not two integers [begin, end] with begin <= end");
  CHECK(stError(stFile(one(entry("w", "F32", "[4]", "[16,0]")), kData16)) ==
        "w.safetensors: error: tensor 'w': data_offsets [16,0] are not two integers [begin, end] with begin <= end");
  CHECK(stError(stFile(one(entry("w", "F32", "[4]", "[-1,15]")), kData16)) ==
        "w.safetensors: error: tensor 'w': data_offsets [-1,15] are not two integers [begin, end] with begin <= end");
  CHECK(stError(stFile(one(entry("w", "F32", "[4]", "[4,20]")), kData16)) ==
        "w.safetensors: error: tensor 'w': data_offsets [4,20] end past the data section (16 bytes)");
  CHECK(stError(stFile(one(entry("w", "F32", "[3]", "[0,16]")), kData16)) ==
        "w.safetensors: error: tensor 'w': data_offsets [0,16] hold 16 bytes but f32[3] needs 12");
  CHECK(stError(stFile("{" + entry("a", "F32", "[2]", "[0,8]") + "," + entry("b", "I32", "[2]", "[4,12]") + "}",
                       kData16)) == "w.safetensors: error: tensors 'a' and 'b' overlap in the data section");
  CHECK(stError(stFile("{" + entry("b", "I64", "[1]", "[8,16]") + "," + entry("a", "F16", "[4]", "[8,16]") + "}",
                       kData16)) == "w.safetensors: error: tensors 'a' and 'b' overlap in the data section");
  CHECK(stError(stFile("{" + entry("w", "F32", "[2]", "[0,8]") + "," + entry("w", "F32", "[2]", "[8,16]") + "}",
                       kData16)) == "w.safetensors: error: tensor 'w' appears twice in the header");
  // The tensors cover the data section exactly: no gap, no tail. A header
  // length one byte short (the last padding space left in the data) shifts
  // every tensor by a byte and leaves one byte past them.
  CHECK(stError(stFile("{" + entry("a", "F32", "[1]", "[0,4]") + "," + entry("b", "F32", "[2]", "[8,16]") + "}",
                       kData16)) == "w.safetensors: error: bytes [4, 8) of the data section are in no tensor (the next is 'b')");
  CHECK(stError(stFile(one(entry("w", "F32", "[3]", "[0,12]")), kData16)) ==
        "w.safetensors: error: the data section has 16 bytes but its tensors end at byte 12 (is the header's length right?)");
  TensorMap four;
  four["w"] = randomTensor({DType::F32, {4}});
  std::string shifted = safetensorsBytes(four);
  REQUIRE(shifted[8 + uint8_t(shifted[0]) - 1] == ' ');  // the header is padded: one byte less still parses
  shifted[0] = char(shifted[0] - 1);
  CHECK(stError(shifted).find("the data section has 17 bytes but its tensors end at byte 16") != std::string::npos);
  CHECK(stError(stFile(one(entry("m", "BOOL", "[2]", "[0,2]")), "\x01\x07")) ==
        "w.safetensors: error: tensor 'm': bool element 1 is 7 (expected 0 or 1)");
}

TEST_CASE("safetensors: bindWeights checks a graph's weights against the file") {
  Graph g;
  g.addParam("tokens", {DType::I32, {1, 4}}, Storage::Input);
  g.addParam("model.embed_tokens.weight", {DType::BF16, {16, 8}}, Storage::Weight);
  g.addParam("w", {DType::F32, {8, 4}}, Storage::Weight);
  g.addParam("pos", {DType::I32, {}}, Storage::Slot);

  TensorMap file;
  file["model.embed_tokens.weight"] = randomTensor({DType::BF16, {16, 8}});
  file["w"] = randomTensor({DType::F32, {8, 4}});
  file["lm_head.weight"] = randomTensor({DType::F32, {8, 16}});  // not in the graph
  file["tokens"] = randomTensor({DType::I32, {1, 4}});           // an input, not a weight

  auto bound = bindWeights(g, file, "m.safetensors");
  REQUIRE_MESSAGE(bool(bound), (bound ? "" : bound.error().str()));
  CHECK(bound->size() == 2);
  CHECK(bound->count("lm_head.weight") == 0);
  CHECK(bound->count("tokens") == 0);
  CHECK(bound->at("w").bytes == file["w"].bytes);
  CHECK(bound->at("model.embed_tokens.weight").bytes == file["model.embed_tokens.weight"].bytes);

  auto bindError = [&](const TensorMap& f) {
    auto r = bindWeights(g, f, "m.safetensors");
    REQUIRE(!r);
    CHECK(r.error().kind == ErrorKind::Bind);
    return r.error().str();
  };
  TensorMap missing = file;
  missing.erase("model.embed_tokens.weight");
  CHECK(bindError(missing) == "m.safetensors: error: weight 'model.embed_tokens.weight' is missing from the file");
  TensorMap wrongShape = file;
  wrongShape["w"] = randomTensor({DType::F32, {4, 8}});
  CHECK(bindError(wrongShape) == "m.safetensors: error: weight 'w' is f32[4,8] in the file but the graph declares f32[8,4]");
  TensorMap wrongDtype = file;
  wrongDtype["model.embed_tokens.weight"] = randomTensor({DType::F16, {16, 8}});
  CHECK(bindError(wrongDtype) ==
        "m.safetensors: error: weight 'model.embed_tokens.weight' is f16[16,8] in the file but the graph declares "
        "bf16[16,8] (trace with --weights-dtype f16 to match the file)");

  // Reading then binding: the whole path a --weights file takes.
  auto reread = parseSafetensors(safetensorsBytes(file), "m.safetensors");
  REQUIRE(bool(reread));
  auto rebound = bindWeights(g, *reread, "m.safetensors");
  REQUIRE(bool(rebound));
  CHECK(rebound->size() == 2);
}

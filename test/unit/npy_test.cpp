// Unit tests of .npy reading and writing: round trips of every dtype on fresh
// random data, the exact bytes our writer produces (NumPy's header text and
// its 64-byte alignment), files written by real NumPy (test/unit/Inputs/, made
// by make_npy_fixtures.py there), and malformed files, each with its exact
// diagnostic.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "ir/io.h"
#include "oracle/npy.h"
#include "testing.h"

using namespace poot;

namespace {

const std::string kInputs = POOT_SOURCE_DIR "/test/unit/Inputs/";

using testing::randomTensor;

// A version 1.0 file with the given header text, padded as NumPy pads it.
std::string npyWith(std::string header, const std::string& data) {
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header + data;
}

std::string npyError(const std::string& bytes) {
  auto t = parseNpy(bytes, "x.npy");
  REQUIRE(!t);
  CHECK(t.error().kind == ErrorKind::Format);
  return t.error().str();
}

Tensor readFixture(const std::string& name) {
  auto t = readNpy(kInputs + name);
  REQUIRE_MESSAGE(bool(t), (t ? "" : t.error().str()));
  return t.take();
}

template <class T>
std::vector<T> elements(const Tensor& t) {
  std::vector<T> out(t.bytes.size() / sizeof(T));
  std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

const std::string kF32Header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
const std::string kEight(8, '\x11');

}  // namespace

TEST_CASE("npy: every dtype round-trips on random data") {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool}) {
    for (const Shape& shape : {Shape{}, Shape{7}, Shape{2, 3, 5}, Shape{1, 4, 1, 3}}) {
      Tensor t = randomTensor({dt, shape});
      std::string bytes = npyBytes(t);
      uint16_t headerLen = uint16_t(uint8_t(bytes[8]) | uint8_t(bytes[9]) << 8);
      CHECK((10 + headerLen) % 64 == 0);
      CHECK(bytes.size() == 10 + headerLen + t.bytes.size());
      auto back = parseNpy(bytes, "rt.npy");
      REQUIRE_MESSAGE(bool(back), (back ? "" : back.error().str()));
      CHECK(back->type == t.type);
      CHECK(back->bytes == t.bytes);
    }
  }
}

TEST_CASE("npy: exact bytes of a small f32 file") {
  Tensor t({DType::F32, {2, 3}});
  const float values[] = {1, 2, 3, 4, 5, -6.5f};
  std::memcpy(t.bytes.data(), values, sizeof values);
  std::string bytes = npyBytes(t);
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  // 10 bytes of preamble and 60 of header text: the data starts at 128.
  REQUIRE(bytes.size() == 128 + 24);
  CHECK(bytes.substr(0, 10) == std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  CHECK(bytes.substr(10, header.size()) == header);
  CHECK(bytes.substr(10 + header.size(), 127 - 10 - header.size()) == std::string(127 - 10 - header.size(), ' '));
  CHECK(bytes[127] == '\n');
  CHECK(std::memcmp(bytes.data() + 128, values, sizeof values) == 0);
}

TEST_CASE("npy: shapes print as Python tuples and bf16 is written as <V2") {
  auto headerOf = [](const Tensor& t) {
    std::string b = npyBytes(t);
    return b.substr(10, b.find('}') - 9);
  };
  CHECK(headerOf(randomTensor({DType::I64, {}})) == "{'descr': '<i8', 'fortran_order': False, 'shape': (), }");
  CHECK(headerOf(randomTensor({DType::Bool, {3}})) == "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }");
  CHECK(headerOf(randomTensor({DType::BF16, {4, 1}})) == "{'descr': '<V2', 'fortran_order': False, 'shape': (4, 1), }");
  CHECK(headerOf(randomTensor({DType::F16, {1}})) == "{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }");
  CHECK(headerOf(randomTensor({DType::I32, {9, 8, 7}})) ==
        "{'descr': '<i4', 'fortran_order': False, 'shape': (9, 8, 7), }");
}

TEST_CASE("npy: a header too long for version 1.0 is written as 2.0") {
  Tensor t = randomTensor({DType::Bool, Shape(25000, 1)});
  std::string bytes = npyBytes(t);
  CHECK(bytes[6] == 2);
  uint32_t headerLen = 0;
  for (int i = 3; i >= 0; --i) headerLen = headerLen << 8 | uint8_t(bytes[8 + size_t(i)]);
  CHECK(headerLen > 0xffff);
  CHECK((12 + headerLen) % 64 == 0);
  auto back = parseNpy(bytes, "big.npy");
  REQUIRE_MESSAGE(bool(back), (back ? "" : back.error().str()));
  CHECK(back->type == t.type);
  CHECK(back->bytes == t.bytes);
}

TEST_CASE("npy: writeNpy and readNpy go through the file system") {
  auto dir = std::filesystem::temp_directory_path() / ("poot_npy_test_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "t.npy").string();
  Tensor t = randomTensor({DType::F32, {3, 4}});
  REQUIRE(bool(writeNpy(path, t)));
  auto back = readNpy(path);
  REQUIRE(bool(back));
  CHECK(back->bytes == t.bytes);
  auto missing = readNpy((dir / "missing.npy").string());
  REQUIRE(!missing);
  CHECK(missing.error().kind == ErrorKind::Io);
  CHECK(missing.error().loc.file == (dir / "missing.npy").string());
  std::filesystem::remove_all(dir);
}

TEST_CASE("npy: files written by NumPy") {
  Tensor s = readFixture("npy_scalar_f32.npy");
  CHECK(s.type == Type{DType::F32, {}});
  CHECK(elements<float>(s) == std::vector<float>{1.5f});

  Tensor i = readFixture("npy_i64_1d.npy");
  CHECK(i.type == Type{DType::I64, {4}});
  CHECK(elements<int64_t>(i) == std::vector<int64_t>{-3, 0, 7, int64_t(1) << 40});

  Tensor h = readFixture("npy_f16_2d.npy");
  CHECK(h.type == Type{DType::F16, {2, 3}});
  CHECK(elements<uint16_t>(h) == std::vector<uint16_t>{0x3c00, 0xc100, 0x2e66, 0x7bff, 0x8000, 0x0400});

  Tensor b = readFixture("npy_bool.npy");
  CHECK(b.type == Type{DType::Bool, {5}});
  CHECK(b.bytes == std::vector<uint8_t>{1, 0, 0, 1, 1});

  Tensor bf = readFixture("npy_bf16_v2.npy");  // '|V2', as NumPy writes a 2-byte void view
  CHECK(bf.type == Type{DType::BF16, {4}});
  CHECK(elements<uint16_t>(bf) == std::vector<uint16_t>{0x3f80, 0xc040, 0x0000, 0x7f80});

  Tensor v2 = readFixture("npy_i32_version2.npy");
  CHECK(v2.type == Type{DType::I32, {2, 2}});
  CHECK(elements<int32_t>(v2) == std::vector<int32_t>{1, -2, 2147483647, -2147483647 - 1});

  auto be = readNpy(kInputs + "npy_f32_big_endian.npy");
  REQUIRE(!be);
  CHECK(be.error().str() == kInputs +
                                "npy_f32_big_endian.npy: error: big-endian data is not supported (descr '>f4'); "
                                "save it little-endian");
  auto fo = readNpy(kInputs + "npy_f32_fortran.npy");
  REQUIRE(!fo);
  CHECK(fo.error().str() ==
        kInputs + "npy_f32_fortran.npy: error: 'fortran_order' is True: only C-order arrays are supported");
}

TEST_CASE("npy: malformed files are typed errors naming what is wrong") {
  // The well-formed base case first, so every failure below is the one change.
  CHECK(bool(parseNpy(npyWith(kF32Header, kEight), "x.npy")));

  CHECK(npyError("PK\x03\x04 not numpy") ==
        "x.npy: error: not a .npy file (it does not start with the \\x93NUMPY magic string)");
  CHECK(npyError(std::string("\x93NUMPY\x01\x00\x10", 9)) == "x.npy: error: file ends inside the .npy preamble");
  CHECK(npyError(std::string("\x93NUMPY\x04\x00\x10\x00", 10)) ==
        "x.npy: error: unsupported .npy format version 4.0 (expected 1.0, 2.0 or 3.0)");
  CHECK(npyError(std::string("\x93NUMPY\x01\x00\xff\x00{}", 12)) ==
        "x.npy: error: header length 255 runs past the end of the file (12 bytes)");
  CHECK(npyError(npyWith("{'descr' '<f4', 'fortran_order': False, 'shape': (2,), }", kEight)) ==
        "x.npy: error: malformed header: expected ':' after 'descr' at header offset 9");
  CHECK(npyError(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", kEight)) ==
        "x.npy: error: malformed header: expected the end of the header after '}' at header offset 58");
  CHECK(npyError(npyWith("{'descr': '<f4', 'fortran_order': False, }", kEight)) ==
        "x.npy: error: header is missing 'shape'");
  CHECK(npyError(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1, }", kEight)) ==
        "x.npy: error: header has unexpected key 'extra'");
  CHECK(npyError(npyWith("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", kEight)) ==
        "x.npy: error: header key 'descr' appears twice");
  CHECK(npyError(npyWith("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", kEight)) ==
        "x.npy: error: unsupported dtype '<c8' (expected <f4, <f2, <i4, <i8, |b1 or <V2 for bf16)");
  CHECK(npyError(npyWith("{'descr': '|u1', 'fortran_order': False, 'shape': (8,), }", kEight)) ==
        "x.npy: error: unsupported dtype '|u1' (expected <f4, <f2, <i4, <i8, |b1 or <V2 for bf16)");
  CHECK(npyError(npyWith("{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }", kEight)) ==
        "x.npy: error: big-endian data is not supported (descr '>i8'); save it little-endian");
  CHECK(npyError(npyWith("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", kEight)) ==
        "x.npy: error: structured dtypes are not supported (expected a plain descr such as '<f4')");
  CHECK(npyError(npyWith("{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", kEight)) ==
        "x.npy: error: malformed header: expected a string, True, False or a tuple at header offset 34");
  CHECK(npyError(npyWith("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", kEight)) ==
        "x.npy: error: 'fortran_order' is True: only C-order arrays are supported");
  CHECK(npyError(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", kEight)) ==
        "x.npy: error: 'shape' must be a tuple of non-negative integers");
  CHECK(npyError(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", kEight)) ==
        "x.npy: error: 'shape' must be a tuple of non-negative integers");
  CHECK(npyError(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0), }", "")) ==
        "x.npy: error: shape (2, 0) has a zero-size dimension, which the IR does not allow");
  CHECK(npyError(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "")) ==
        "x.npy: error: shape dimension is too large");
  CHECK(npyError(npyWith("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", "")) ==
        "x.npy: error: shape (4294967296, 4294967296) is too large");
  CHECK(npyError(npyWith(kF32Header, kEight.substr(0, 7))) ==
        "x.npy: error: data is 7 bytes but shape (2,) of <f4 needs 8");
  CHECK(npyError(npyWith(kF32Header, kEight + "\n")) ==
        "x.npy: error: data is 9 bytes but shape (2,) of <f4 needs 8");
  CHECK(npyError(npyWith("{'descr': '|b1', 'fortran_order': False, 'shape': (), }", "\x02")) ==
        "x.npy: error: bool element 0 is 2 (expected 0 or 1)");
}

TEST_CASE("npy: header variations NumPy's own reader accepts") {
  // Keys in another order, double quotes, no trailing comma, a version 3.0 header.
  std::string data(6, '\x01');
  auto a = parseNpy(npyWith("{\"shape\": (3, 2) , \"fortran_order\": False, \"descr\": \"|b1\"}", data), "y.npy");
  REQUIRE_MESSAGE(bool(a), (a ? "" : a.error().str()));
  CHECK(a->type == Type{DType::Bool, {3, 2}});
  std::string header = "{'descr': '<V2', 'fortran_order': False, 'shape': (3,), }\n";
  std::string v3 = std::string("\x93NUMPY\x03\x00", 8) + char(header.size()) + std::string(3, '\0') + header + data;
  auto b = parseNpy(v3, "z.npy");
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  CHECK(b->type == Type{DType::BF16, {3}});
}

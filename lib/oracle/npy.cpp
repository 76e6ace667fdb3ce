// Reading and writing .npy files. The reader takes the file apart in order:
// the magic string and version, the header length, the header (a Python dict
// literal, read by a small parser that knows only strings, True/False and
// tuples of integers), then checks the dtype, the order and the shape, and
// that the data is exactly as long as the shape says. The writer produces
// what NumPy itself writes: version 1.0, the header padded with spaces and a
// newline so that the data starts at a multiple of 64 bytes.
#include "oracle/npy.h"

#include <cstdint>
#include <limits>
#include <optional>

#include "ir/io.h"

namespace poot {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;

struct Descr { const char* text; DType dtype; };
constexpr Descr kDescrs[] = {
    {"<f4", DType::F32}, {"<f2", DType::F16}, {"<i4", DType::I32}, {"<i8", DType::I64},
    {"|b1", DType::Bool}, {"<V2", DType::BF16},
    {"|V2", DType::BF16},  // what NumPy writes for a plain 2-byte void view
};

const char* descrOf(DType t) {
  for (const Descr& d : kDescrs)
    if (d.dtype == t) return d.text;
  return "?";
}

// "()", "(3,)", "(2, 3)": a Python tuple's repr, as NumPy prints shapes.
std::string tupleStr(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

// One value of the header dict.
struct HeaderValue {
  enum Kind { Str, Bool, Tuple, Int } kind = Str;
  std::string str;
  bool flag = false;
  Shape dims;
  bool negative = false;  // a tuple with a negative integer in it
};

// The header dict: `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& file) : s_(text), file_(file) {}

  Expected<bool> parse(std::optional<HeaderValue>& descr, std::optional<HeaderValue>& fortran,
                       std::optional<HeaderValue>& shape) {
    skipSpace();
    if (!eat('{')) return fail("'{'");
    for (;;) {
      skipSpace();
      if (eat('}')) break;
      std::string key;
      if (!readString(key)) return fail("a quoted key or '}'");
      std::optional<HeaderValue>* slot = key == "descr" ? &descr : key == "fortran_order" ? &fortran
                                       : key == "shape" ? &shape : nullptr;
      if (!slot) return err("header has unexpected key '" + key + "'");
      if (slot->has_value()) return err("header key '" + key + "' appears twice");
      skipSpace();
      if (!eat(':')) return fail("':' after '" + key + "'");
      skipSpace();
      if (key == "descr" && (peek('[') || peek('{')))
        return err("structured dtypes are not supported (expected a plain descr such as '<f4')");
      Expected<HeaderValue> v = value();
      if (!v) return v.error();
      *slot = v.take();
      skipSpace();
      if (eat('}')) break;
      if (!eat(',')) return fail("',' or '}'");
    }
    skipSpace();
    if (pos_ != s_.size()) return fail("the end of the header after '}'");
    return true;
  }

 private:
  Error err(std::string msg) { return makeError(ErrorKind::Format, {file_}, std::move(msg)); }
  Error fail(const std::string& what) {
    return err("malformed header: expected " + what + " at header offset " + std::to_string(pos_));
  }
  bool peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  bool eat(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  bool eatWord(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  bool readString(std::string& out) {
    if (!peek('\'') && !peek('"')) return false;
    char q = s_[pos_];
    size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) return false;
    out = std::string(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return true;
  }

  Expected<HeaderValue> value() {
    HeaderValue v;
    if (readString(v.str)) return v;
    v.kind = HeaderValue::Bool;
    if (eatWord("True")) {
      v.flag = true;
      return v;
    }
    if (eatWord("False")) return v;
    if (!eat('(')) return fail("a string, True, False or a tuple");
    v.kind = HeaderValue::Tuple;
    bool comma = false;
    for (;;) {
      skipSpace();
      if (eat(')')) break;
      if (eat('-')) v.negative = true;
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return fail("an integer or ')'");
      int64_t n = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        int digit = s_[pos_++] - '0';
        if (n > (std::numeric_limits<int64_t>::max() - digit) / 10) return err("shape dimension is too large");
        n = n * 10 + digit;
      }
      v.dims.push_back(n);
      skipSpace();
      if (eat(')')) break;
      if (!eat(',')) return fail("',' or ')'");
      comma = true;
    }
    // `(3)` is the integer 3 in Python, not a tuple.
    if (v.dims.size() == 1 && !comma) v.kind = HeaderValue::Int;
    return v;
  }

  std::string_view s_;
  const std::string& file_;
  size_t pos_ = 0;
};

uint64_t readLE(const std::string& b, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | uint8_t(b[at + size_t(i)]);
  return v;
}

}  // namespace

Expected<Tensor> parseNpy(const std::string& bytes, const std::string& file) {
  auto err = [&](std::string msg) { return makeError(ErrorKind::Format, {file}, std::move(msg)); };
  if (bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0)
    return err("not a .npy file (it does not start with the \\x93NUMPY magic string)");
  if (bytes.size() < 10) return err("file ends inside the .npy preamble");
  int major = uint8_t(bytes[6]), minor = uint8_t(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    return err("unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
               " (expected 1.0, 2.0 or 3.0)");
  size_t lenBytes = major == 1 ? 2 : 4;
  size_t start = 8 + lenBytes;
  if (bytes.size() < start) return err("file ends inside the .npy preamble");
  uint64_t headerLen = readLE(bytes, 8, int(lenBytes));
  if (headerLen > bytes.size() - start)
    return err("header length " + std::to_string(headerLen) + " runs past the end of the file (" +
               std::to_string(bytes.size()) + " bytes)");

  std::optional<HeaderValue> descr, fortran, shape;
  HeaderParser parser(std::string_view(bytes).substr(start, headerLen), file);
  if (Expected<bool> r = parser.parse(descr, fortran, shape); !r) return r.error();
  if (!descr) return err("header is missing 'descr'");
  if (!fortran) return err("header is missing 'fortran_order'");
  if (!shape) return err("header is missing 'shape'");

  if (descr->kind != HeaderValue::Str) return err("'descr' must be a string such as '<f4'");
  std::optional<DType> dtype;
  for (const Descr& d : kDescrs)
    if (descr->str == d.text) dtype = d.dtype;
  if (!dtype) {
    if (!descr->str.empty() && descr->str[0] == '>')
      return err("big-endian data is not supported (descr '" + descr->str + "'); save it little-endian");
    return err("unsupported dtype '" + descr->str + "' (expected <f4, <f2, <i4, <i8, |b1 or <V2 for bf16)");
  }
  if (fortran->kind != HeaderValue::Bool) return err("'fortran_order' must be True or False");
  if (fortran->flag) return err("'fortran_order' is True: only C-order arrays are supported");
  if (shape->kind != HeaderValue::Tuple || shape->negative)
    return err("'shape' must be a tuple of non-negative integers");

  Type type{*dtype, shape->dims};
  std::string shapeText = tupleStr(type.shape);
  uint64_t need = uint64_t(dtypeBytes(*dtype));
  for (int64_t d : type.shape) {
    if (d == 0) return err("shape " + shapeText + " has a zero-size dimension, which the IR does not allow");
    if (need > std::numeric_limits<uint64_t>::max() / uint64_t(d)) return err("shape " + shapeText + " is too large");
    need *= uint64_t(d);
  }
  size_t dataStart = start + headerLen;
  uint64_t have = bytes.size() - dataStart;
  if (have != need)
    return err("data is " + std::to_string(have) + " bytes but shape " + shapeText + " of " + descr->str +
               " needs " + std::to_string(need));

  Tensor t(type);
  std::copy(bytes.begin() + std::ptrdiff_t(dataStart), bytes.end(), t.bytes.begin());
  if (*dtype == DType::Bool)
    for (size_t i = 0; i < t.bytes.size(); ++i)
      if (t.bytes[i] > 1)
        return err("bool element " + std::to_string(i) + " is " + std::to_string(t.bytes[i]) + " (expected 0 or 1)");
  return t;
}

Expected<Tensor> readNpy(const std::string& path) {
  Expected<std::string> bytes = readFile(path);
  if (!bytes) return bytes.error();
  return parseNpy(*bytes, path);
}

std::string npyBytes(const Tensor& t) {
  std::string header = std::string("{'descr': '") + descrOf(t.dtype()) +
                       "', 'fortran_order': False, 'shape': " + tupleStr(t.shape()) + ", }";
  // Version 1.0 has a 2-byte header length; only a header past 64 KiB needs 2.0.
  auto padded = [&](size_t preamble) { return (preamble + header.size() + 1 + kAlign - 1) / kAlign * kAlign; };
  size_t preamble = padded(10) - 10 > 0xffff ? 12 : 10;
  size_t total = padded(preamble);
  header.append(total - preamble - header.size() - 1, ' ');
  header += '\n';

  std::string out(kMagic, kMagicLen);
  out += char(preamble == 10 ? 1 : 2);
  out += '\0';
  for (size_t i = 0; i < preamble - 8; ++i) out += char((header.size() >> (8 * i)) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return out;
}

Status writeNpy(const std::string& path, const Tensor& t) { return writeFileAtomic(path, npyBytes(t)); }

}  // namespace poot

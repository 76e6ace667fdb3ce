// Loading and validating device profiles. The YAML text is parsed with
// yaml-cpp, then every field is checked on its own (type, range), then the
// fields are checked against each other (arch against target, sizes against
// sizes). The first problem found is returned as an Error located at the
// offending node; a missing field is located at the mapping that lacks it.
// docs/device-profile.md lists the rules this file enforces.
#include "plan/profile.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "ir/io.h"

namespace poot {

const char* targetName(Target t) {
  switch (t) {
    case Target::Spirv: return "spirv";
    case Target::Ptx: return "ptx";
    case Target::Hsaco: return "hsaco";
  }
  return "?";
}

namespace {

constexpr int64_t kMinWorkgroupMemory = 1024;  // less cannot hold one tile
constexpr int64_t kMaxSubgroup = 128;          // no device has wider
constexpr int64_t kMaxGrid = 4294967295;       // every API takes 32-bit counts
constexpr int64_t kMaxBindings = 4294967295;   // Vulkan counts descriptors in 32 bits
constexpr size_t kMaxName = 128;

using MaybeError = std::optional<Error>;

// A place in `file`; yaml-cpp marks are 0-based, a null mark is the file as a whole.
Loc place(const std::string& file, int line, int col) {
  Loc loc;
  loc.file = file;
  loc.line = line;
  loc.col = col;
  return loc;
}
Loc place(const std::string& file, const YAML::Mark& m) {
  return m.is_null() ? place(file, 0, 0) : place(file, m.line + 1, m.column + 1);
}

// One key and its value in a mapping, in file order.
struct Entry {
  std::string key;
  YAML::Node keyNode;
  YAML::Node value;
};

// How a node reads in a message: a scalar quoted, anything else by its kind.
std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar: {
      std::string s;
      for (char c : n.Scalar()) s += c == '\n' ? std::string("\\n") : std::string(1, c);
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return "'" + s + "'";
    }
    default: return "nothing";
  }
}

// Records where each YAML document starts, and nothing else.
struct DocumentStarts : YAML::EventHandler {
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& m) override { marks.push_back(m); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

class ProfileReader {
 public:
  explicit ProfileReader(const std::string& file) : file_(file) {}

  Expected<DeviceProfile> read(const YAML::Node& doc);

 private:
  Loc at(const YAML::Mark& m) const { return place(file_, m); }
  // An empty value has no place of its own (yaml-cpp marks the next token),
  // so it is reported at its key.
  Loc at(const Entry& e) const {
    return at(e.value.IsNull() ? e.keyNode.Mark() : e.value.Mark());
  }
  Error fail(Loc loc, std::string message) const {
    return makeError(ErrorKind::Profile, std::move(loc), std::move(message));
  }
  Error bad(const Entry& e, const std::string& field, const std::string& what) const {
    return fail(at(e), "field '" + field + "': " + what);
  }

  Expected<std::vector<Entry>> entries(const YAML::Node& map, const std::string& prefix,
                                       const std::vector<std::string>& known) const;
  MaybeError missing(const YAML::Node& map, const std::vector<Entry>& got, const std::string& prefix,
                     const std::vector<std::string>& known) const;
  MaybeError field(const Entry& e, DeviceProfile& p);
  MaybeError integer(const Entry& e, const std::string& field, int64_t& out);
  MaybeError gridLimits(const Entry& e, DeviceProfile& p);
  MaybeError twoByteFloats(const Entry& e, DeviceProfile& p);
  MaybeError twoByteOps(const Entry& e, const std::string& field, TwoByteOps& out);
  MaybeError matrixMultiply(const Entry& e, DeviceProfile& p);
  MaybeError consistent(const DeviceProfile& p) const;

  std::string file_;
  std::map<std::string, Loc> where_;  // field path -> location of its value
};

const std::vector<std::string> kTopFields = {
    "name", "target", "arch", "compute_units", "workgroup_memory_bytes", "max_workgroup_size",
    "subgroup_size", "grid_limits", "max_buffer_bytes", "max_bindings", "memory_bytes", "two_byte_floats"};
// Fields a profile may leave out (absent: the capability is missing).
const std::vector<std::string> kOptionalFields = {"matrix_multiply", "memory_bandwidth_bytes_per_s"};
const std::vector<std::string> kGridFields = {"x", "y", "z"};
const std::vector<std::string> kTwoByteFields = {"f16", "bf16"};

// The entries of a mapping, refusing non-scalar keys, unknown keys and keys
// given twice.
Expected<std::vector<Entry>> ProfileReader::entries(const YAML::Node& map, const std::string& prefix,
                                                    const std::vector<std::string>& known) const {
  std::vector<Entry> out;
  std::set<std::string> seen;
  for (const auto& kv : map) {
    YAML::Node k = kv.first;  // a copy: yaml-cpp iterators hand out temporaries
    if (!k.IsScalar()) return fail(at(k.Mark()), "expected a field name, got " + describe(k));
    std::string name = k.Scalar();
    if (std::find(known.begin(), known.end(), name) == known.end())
      return fail(at(k.Mark()), "unknown field '" + prefix + name + "'");
    if (!seen.insert(name).second) return fail(at(k.Mark()), "duplicate field '" + prefix + name + "'");
    out.push_back(Entry{name, k, kv.second});
  }
  return out;
}

MaybeError ProfileReader::missing(const YAML::Node& map, const std::vector<Entry>& got,
                                  const std::string& prefix, const std::vector<std::string>& known) const {
  for (const std::string& name : known) {
    bool present = false;
    for (const Entry& e : got) present = present || e.key == name;
    if (!present) return fail(at(map.Mark()), "missing field '" + prefix + name + "'");
  }
  return {};
}

// A positive decimal integer that fits in int64_t, written plain. Leading
// zeros are refused (YAML 1.1 reads them as octal), as are signs, fractions,
// exponents, and quoted or tagged scalars (a quoted "8" is a string).
MaybeError ProfileReader::integer(const Entry& e, const std::string& field, int64_t& out) {
  const std::string positive = "expected a positive integer, got " + describe(e.value);
  if (!e.value.IsScalar()) return bad(e, field, positive);
  if (e.value.Tag() != "?")
    return bad(e, field, "expected a positive integer, got the " +
                             std::string(e.value.Tag() == "!" ? "quoted string " : "tagged scalar ") +
                             describe(e.value));
  const std::string& s = e.value.Scalar();
  if (s.empty() || s[0] == '0') return bad(e, field, positive);
  int64_t v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return bad(e, field, positive);
    int d = c - '0';
    if (v > (std::numeric_limits<int64_t>::max() - d) / 10)
      return bad(e, field, "integer '" + s + "' is too large");
    v = v * 10 + d;
  }
  out = v;
  where_[field] = at(e);
  return {};
}

MaybeError ProfileReader::gridLimits(const Entry& e, DeviceProfile& p) {
  if (!e.value.IsMap())
    return bad(e, "grid_limits", "expected a mapping with keys x, y and z, got " + describe(e.value));
  auto got = entries(e.value, "grid_limits.", kGridFields);
  if (!got) return got.error();
  for (const Entry& g : *got) {
    int axis = g.key[0] - 'x';
    std::string field = "grid_limits." + g.key;
    if (auto err = integer(g, field, p.grid_limits[axis])) return err;
    if (p.grid_limits[axis] > kMaxGrid)
      return bad(g, field, "expected at most " + std::to_string(kMaxGrid) + ", got " + describe(g.value));
  }
  return missing(e.value, *got, "grid_limits.", kGridFields);
}

MaybeError ProfileReader::twoByteOps(const Entry& e, const std::string& field, TwoByteOps& out) {
  if (!e.value.IsSequence())
    return bad(e, field, "expected a list drawn from [storage, arith, select], got " + describe(e.value));
  for (YAML::Node item : e.value) {
    std::string op = item.IsScalar() ? item.Scalar() : "";
    bool* flag = op == "storage" ? &out.storage
                 : op == "arith" ? &out.arith
                 : op == "select" ? &out.select
                                  : nullptr;
    Loc loc = at(item.Mark());
    if (!flag)
      return fail(loc, "field '" + field + "': expected storage, arith or select, got " + describe(item));
    if (*flag) return fail(loc, "field '" + field + "': '" + op + "' is listed twice");
    *flag = true;
    where_[field + "." + op] = loc;
  }
  if (out.arith && !out.storage) return bad(e, field, "'arith' needs 'storage'");
  if (out.select && !out.storage) return bad(e, field, "'select' needs 'storage'");
  return {};
}

MaybeError ProfileReader::twoByteFloats(const Entry& e, DeviceProfile& p) {
  if (!e.value.IsMap())
    return bad(e, "two_byte_floats", "expected a mapping with keys f16 and bf16, got " + describe(e.value));
  auto got = entries(e.value, "two_byte_floats.", kTwoByteFields);
  if (!got) return got.error();
  for (const Entry& t : *got) {
    TwoByteOps& ops = t.key == "f16" ? p.f16 : p.bf16;
    if (auto err = twoByteOps(t, "two_byte_floats." + t.key, ops)) return err;
  }
  return missing(e.value, *got, "two_byte_floats.", kTwoByteFields);
}

MaybeError ProfileReader::matrixMultiply(const Entry& e, DeviceProfile& p) {
  if (!e.value.IsSequence())
    return bad(e, "matrix_multiply", "expected a list drawn from [" + matrixOpNames() + "], got " + describe(e.value));
  for (YAML::Node item : e.value) {
    Loc loc = at(item.Mark());
    std::optional<MatrixOp> op = item.IsScalar() ? matrixOpNamed(item.Scalar()) : std::nullopt;
    if (!op) return fail(loc, "field 'matrix_multiply': expected one of " + matrixOpNames() + ", got " + describe(item));
    if (p.hasMatrix(*op))
      return fail(loc, "field 'matrix_multiply': '" + item.Scalar() + "' is listed twice");
    p.matrix_ops.push_back(*op);
    if (p.matrix_ops.size() == 1) where_["matrix_multiply"] = loc;
  }
  return {};
}

MaybeError ProfileReader::field(const Entry& e, DeviceProfile& p) {
  const std::string& k = e.key;
  where_[k] = at(e);
  if (k == "name") {
    if (!e.value.IsScalar() || e.value.Scalar().empty())
      return bad(e, k, "expected a non-empty string, got " + describe(e.value));
    const std::string& s = e.value.Scalar();
    for (size_t i = 0; i < s.size(); ++i)
      if (uint8_t c = uint8_t(s[i]); c < 0x20 || c > 0x7e)
        return bad(e, k, "byte " + std::to_string(i) + " (" + std::to_string(c) + ") is not a printable ascii character");
    if (s.size() > kMaxName)
      return bad(e, k, "expected at most " + std::to_string(kMaxName) + " characters, got " + std::to_string(s.size()));
    p.name = s;
    return {};
  }
  if (k == "target") {
    std::string t = e.value.IsScalar() ? e.value.Scalar() : "";
    if (t == "spirv") p.target = Target::Spirv;
    else if (t == "ptx") p.target = Target::Ptx;
    else if (t == "hsaco") p.target = Target::Hsaco;
    else return bad(e, k, "expected spirv, ptx or hsaco, got " + describe(e.value));
    return {};
  }
  if (k == "arch") {
    if (!e.value.IsScalar() || e.value.Scalar().empty())
      return bad(e, k, "expected a non-empty string, got " + describe(e.value));
    p.arch = e.value.Scalar();
    return {};
  }
  if (k == "grid_limits") return gridLimits(e, p);
  if (k == "two_byte_floats") return twoByteFloats(e, p);
  if (k == "matrix_multiply") return matrixMultiply(e, p);

  // poot probe writes 'unknown' where the driver reports no count: the
  // planner sizes its splits by this figure, so it asks rather than guesses.
  if (k == "compute_units" && e.value.IsScalar() && e.value.Tag() == "?" && e.value.Scalar() == "unknown")
    return bad(e, k, "the device's count is unknown (its driver reports none); the planner needs its SMs, CUs or "
                     "cores: write the number here");
  int64_t* slot = k == "compute_units"            ? &p.compute_units
                  : k == "workgroup_memory_bytes" ? &p.workgroup_memory_bytes
                  : k == "max_workgroup_size"     ? &p.max_workgroup_size
                  : k == "subgroup_size"          ? &p.subgroup_size
                  : k == "max_buffer_bytes"       ? &p.max_buffer_bytes
                  : k == "max_bindings"           ? &p.max_bindings
                  : k == "memory_bandwidth_bytes_per_s" ? &p.memory_bandwidth_bytes_per_s
                                                  : &p.memory_bytes;
  if (auto err = integer(e, k, *slot)) return err;
  if (k == "workgroup_memory_bytes" && *slot < kMinWorkgroupMemory)
    return bad(e, k, "expected at least " + std::to_string(kMinWorkgroupMemory) + ", got " + describe(e.value));
  if (k == "max_bindings" && *slot > kMaxBindings)
    return bad(e, k, "expected at most " + std::to_string(kMaxBindings) + ", got " + describe(e.value));
  if (k == "subgroup_size" && (*slot > kMaxSubgroup || (*slot & (*slot - 1)) != 0))
    return bad(e, k, "expected a power of two no larger than " + std::to_string(kMaxSubgroup) + ", got " +
                         describe(e.value));
  return {};
}

// Rules between fields, checked once every field is known to be well formed.
MaybeError ProfileReader::consistent(const DeviceProfile& p) const {
  if (p.max_workgroup_size < p.subgroup_size)
    return fail(where_.at("max_workgroup_size"),
                "field 'max_workgroup_size': " + std::to_string(p.max_workgroup_size) +
                    " is less than subgroup_size " + std::to_string(p.subgroup_size));
  if (p.max_buffer_bytes > p.memory_bytes)
    return fail(where_.at("max_buffer_bytes"),
                "field 'max_buffer_bytes': " + std::to_string(p.max_buffer_bytes) +
                    " is more than memory_bytes " + std::to_string(p.memory_bytes));

  static const std::regex sm("sm_[1-9][0-9]{1,2}a?"), gfx("gfx[0-9][0-9a-f]{2,3}"), vk("vulkan1\\.[0-4]");
  const std::regex& want = p.target == Target::Ptx ? sm : p.target == Target::Hsaco ? gfx : vk;
  const char* form = p.target == Target::Ptx     ? "sm_NN"
                     : p.target == Target::Hsaco ? "gfxNNN"
                                                 : "vulkan1.N (N from 0 to 4)";
  if (!std::regex_match(p.arch, want))
    return fail(where_.at("arch"), std::string("field 'arch': target ") + targetName(p.target) +
                                       " needs an arch of the form " + form + ", got '" + p.arch + "'");

  // Our SPIR-V generator has no two-byte select (see the seed design): a
  // SPIR-V profile that claims one would hide a DtypeLowering refusal.
  // A warp's shape is PTX's mma.sync, which needs sm_80; a warpgroup's is
  // wgmma, which only sm_90a has; a wave's is AMD's MFMA of 16 x 16 x 16
  // (hasWaveMatrixOps).
  for (MatrixOp op : p.matrix_ops) {
    int64_t threads = matrixShape(op).threads;
    bool ok = threads == 64 ? p.target == Target::Hsaco && hasWaveMatrixOps(p.arch)
                            : p.target == Target::Ptx && (threads == 128 ? p.arch == "sm_90a" : std::stoi(p.arch.substr(3)) >= 80);
    if (ok) continue;
    const char* needs = threads == 64    ? "target hsaco and gfx90a, gfx940, gfx941 or gfx942"
                        : threads == 128 ? "target ptx and sm_90a"
                                         : "target ptx and sm_80 or newer";
    return fail(where_.at("matrix_multiply"), std::string("field 'matrix_multiply': ") + matrixShape(op).name + " needs " +
                                                  needs + ", got target " + std::string(targetName(p.target)) + " arch " + p.arch);
  }
  if (p.target == Target::Spirv) {
    for (const char* t : {"f16", "bf16"}) {
      auto it = where_.find(std::string("two_byte_floats.") + t + ".select");
      if (it != where_.end())
        return fail(it->second, std::string("field 'two_byte_floats.") + t + "': target spirv cannot lower 'select'");
    }
  }
  return {};
}

Expected<DeviceProfile> ProfileReader::read(const YAML::Node& doc) {
  if (!doc.IsMap())
    return fail(doc.IsNull() ? place(file_, 1, 1) : at(doc.Mark()),
                "expected a mapping of profile fields, got " + describe(doc));
  std::vector<std::string> known = kTopFields;
  known.insert(known.end(), kOptionalFields.begin(), kOptionalFields.end());
  auto got = entries(doc, "", known);
  if (!got) return got.error();
  DeviceProfile p;
  for (const Entry& e : *got)
    if (auto err = field(e, p)) return *err;
  if (auto err = missing(doc, *got, "", kTopFields)) return *err;
  if (auto err = consistent(p)) return *err;
  return p;
}

}  // namespace

Expected<DeviceProfile> parseProfile(const std::string& text, const std::string& file) {
  YAML::Node doc;
  try {
    // Count the documents first. yaml-cpp 0.7 never finishes YAML::LoadAll
    // on a stray ',' (its issue 1040): the parser reports the same empty
    // document again and again, so a document that starts where the one
    // before it did is a syntax error here.
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStarts docs;
    while (docs.marks.size() < 3 && parser.HandleNextDocument(docs)) {
    }
    for (size_t i = 1; i < docs.marks.size(); ++i) {
      const YAML::Mark& m = docs.marks[i];
      if (m.pos != docs.marks[i - 1].pos) continue;
      bool shown = m.pos >= 0 && static_cast<size_t>(m.pos) < text.size() &&
                   std::isgraph(static_cast<unsigned char>(text[m.pos]));
      std::string what = shown ? "'" + std::string(1, text[m.pos]) + "'" : std::string("token");
      return makeError(ErrorKind::Syntax, place(file, m), "invalid yaml: unexpected " + what);
    }
    if (docs.marks.empty())
      return makeError(ErrorKind::Profile, place(file, 1, 1),
                       "expected a mapping of profile fields, got an empty file");
    if (docs.marks.size() > 1)
      return makeError(ErrorKind::Profile, place(file, docs.marks[1]), "expected one yaml document, found another");
    doc = YAML::Load(text);
  } catch (const YAML::Exception& ex) {
    // yaml-cpp 0.7's depth guard reports too deep a nesting as "bad file"
    // (its DeepRecursion type does not always match across the shared
    // library's boundary, so the message is what identifies it).
    if (ex.msg == "bad file")
      return makeError(ErrorKind::Syntax, place(file, ex.mark), "invalid yaml: nested too deeply");
    std::string msg = printable(ex.msg);
    for (char& c : msg) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return makeError(ErrorKind::Syntax, place(file, ex.mark), "invalid yaml: " + msg);
  }
  return ProfileReader(file).read(doc);
}

Expected<DeviceProfile> loadProfile(const std::string& path) {
  auto text = readFile(path);
  if (!text) return text.error();
  return parseProfile(*text, path);
}

}  // namespace poot

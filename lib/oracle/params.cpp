// NAME=REST parsing, slot values and weights, then completeParams for the
// rest.
#include "oracle/params.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <set>

#include "ir/budget.h"
#include "oracle/npy.h"
#include "oracle/random.h"
#include "oracle/safetensors.h"

namespace poot {

namespace {

Error usage(std::string msg) { return makeError(ErrorKind::Usage, {}, std::move(msg)); }

// Splits NAME=REST and finds the parameter, which must have one of `allowed`
// storage classes.
Expected<std::pair<const Value*, std::string>> namedParam(const Graph& g, const std::string& arg, const char* option,
                                                          std::initializer_list<Storage> allowed, const char* form) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return usage(std::string(option) + " '" + arg + "' must be " + form);
  std::string name = arg.substr(0, eq);
  if (name[0] == '%') name.erase(0, 1);
  for (ValueId id : g.params) {
    const Value& p = g.value(id);
    if (p.name != name) continue;
    if (std::find(allowed.begin(), allowed.end(), p.storage) == allowed.end())
      return usage(std::string(option) + ": %" + name + " is " + (p.storage == Storage::Input ? "an " : "a ") +
                   storageName(p.storage) + ", not " + (allowed.size() == 1 ? "a slot" : "an input or a state"));
    return std::make_pair(&p, arg.substr(eq + 1));
  }
  return usage(std::string(option) + ": graph '" + g.name + "' has no parameter %" + name);
}

// An integer VALUE broadcast to the slot's type, or the tensor of a .npy file
// (a name ending in .npy); anything else is not a slot value.
Expected<Tensor> slotValue(const Value& p, const std::string& text) {
  if (text.size() > 4 && text.compare(text.size() - 4, 4, ".npy") == 0) return readNpy(text);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  bool whole = end == text.data() + text.size();
  if (!whole || (ec != std::errc() && ec != std::errc::result_out_of_range))
    return usage("--slot " + p.name + "=" + text + ": '" + text + "' is not an integer (nor a file ending in .npy)");
  if (ec == std::errc::result_out_of_range || (p.type.dtype == DType::I32 && (v < INT32_MIN || v > INT32_MAX)))
    return makeError(ErrorKind::Range, {}, "--slot " + p.name + "=" + text + " does not fit " + dtypeName(p.type.dtype));
  // Slots are i32 or i64: the integer's own bytes, exactly (no double).
  Tensor t(p.type);
  int32_t v32 = int32_t(v);
  size_t bytes = size_t(dtypeBytes(p.type.dtype));
  for (int64_t i = 0; i < t.size(); ++i)
    std::memcpy(t.bytes.data() + size_t(i) * bytes, bytes == 4 ? static_cast<const void*>(&v32) : &v, bytes);
  return t;
}

}  // namespace

std::map<std::string, Tensor> BoundParams::hostTensors() const {
  std::map<std::string, Tensor> all = tensors;
  for (const auto& [name, t] : fromCheckpoint.weights) all.emplace(name, checkpoint->read(*t));
  return all;
}

Expected<BoundParams> bindParamArgs(const Graph& g, const ParamArgs& args) {
  BoundParams out;
  out.seed = args.seed;
  std::map<std::string, Tensor>& params = out.tensors;
  auto bind = [&](const Value& p, Expected<Tensor> t, const char* option) -> Status {
    if (!t) return t.error();
    if (!params.emplace(p.name, t.take()).second) return usage(std::string(option) + ": %" + p.name + " is bound twice");
    return ok();
  };
  for (const std::string& arg : args.inputs) {
    auto np = namedParam(g, arg, "--input", {Storage::Input, Storage::State}, "NAME=FILE.npy");
    if (!np) return np.error();
    if (auto s = bind(*np->first, readNpy(np->second), "--input"); !s) return s.error();
  }
  for (const std::string& arg : args.slots) {
    auto np = namedParam(g, arg, "--slot", {Storage::Slot}, "NAME=VALUE or NAME=FILE.npy");
    if (!np) return np.error();
    if (auto s = bind(*np->first, slotValue(*np->first, np->second), "--slot"); !s) return s.error();
  }
  std::set<std::string> fromFile;
  if (!args.weights.empty()) {
    auto c = Checkpoint::open(args.weights);
    if (!c) return c.error();
    auto bound = bindCheckpoint(g, *c);
    if (!bound) return bound.error();
    out.checkpoint = c.take();
    out.fromCheckpoint = bound.take();
    for (const auto& [name, t] : out.fromCheckpoint.weights) fromFile.insert(name);
  }
  for (ValueId id : g.params) {
    const std::string& name = g.value(id).name;
    if (!params.count(name) && !fromFile.count(name)) out.generated.push_back(id);
  }
  int64_t drawn = 0;
  for (ValueId id : out.generated) drawn = addBytes(drawn, numel(g.type(id).shape) * dtypeBytes(g.type(id).dtype));
  size_t n = out.generated.size();
  if (auto s = checkHostBytes(drawn, "drawing the " + std::to_string(n) + (n == 1 ? " parameter" : " parameters") +
                                         " that no --weights, --input or --slot names");
      !s)
    return s.error();
  for (ValueId id : out.generated) params.emplace(g.value(id).name, randomParam(g, id, args.seed));
  return out;
}

std::vector<Error> bindNotices(const Graph& g, const BoundParams& p) {
  std::vector<Error> out;
  auto notice = [&](Severity severity, std::string file, std::string message, std::vector<Figure> figures = {}) {
    Error e = makeError(ErrorKind::Bind, Loc{std::move(file)}, std::move(message));
    e.severity = severity;
    e.figures = std::move(figures);
    out.push_back(std::move(e));
  };
  constexpr size_t kNamed = 8;
  const std::vector<std::string>& unused = p.fromCheckpoint.unused;
  for (size_t i = 0; i < unused.size() && i < kNamed; ++i)
    notice(Severity::Warning, p.checkpoint->fileOf(*p.checkpoint->find(unused[i])),
           "tensor '" + unused[i] + "' is not used by the graph", {{"tensor", unused[i]}});
  if (unused.size() > kNamed)
    notice(Severity::Warning, p.checkpoint->path(),
           std::to_string(unused.size() - kNamed) + " more tensors are not used by the graph",
           {{"tensors", int64_t(unused.size() - kNamed)}});
  if (p.generated.empty()) return out;
  std::map<Storage, int64_t> counts;
  for (ValueId id : p.generated) ++counts[g.value(id).storage];
  std::vector<std::string> parts;
  std::vector<Figure> figures;
  for (const auto& [storage, n] : counts) {
    parts.push_back(std::to_string(n) + " " + storageName(storage) + (n == 1 ? "" : "s"));
    figures.push_back({storageName(storage) + std::string("s"), n});
  }
  std::string what;
  for (size_t i = 0; i < parts.size(); ++i) what += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  notice(Severity::Note, "",
         "generated " + what + " from seed " + std::to_string(p.seed) +
             ", not read from any file (name them with --weights, --input and --slot)",
         std::move(figures));
  return out;
}

}  // namespace poot

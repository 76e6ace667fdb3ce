// NAME=REST parsing, slot values and weights, then completeParams for the
// rest.
#include "oracle/params.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>

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

Expected<std::map<std::string, Tensor>> bindParamArgs(const Graph& g, const ParamArgs& args) {
  std::map<std::string, Tensor> params;
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
  if (!args.weights.empty()) {
    auto file = readSafetensors(args.weights);
    if (!file) return file.error();
    auto bound = bindWeights(g, *file, args.weights);
    if (!bound) return bound.error();
    for (auto& [name, t] : *bound) params.emplace(name, std::move(t));
  }
  return completeParams(g, std::move(params), args.seed);
}

}  // namespace poot

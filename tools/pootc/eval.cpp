// pootc eval: evaluate a graph on the CPU with the oracle. Parameters come from
// --input (inputs and states, from .npy), --slot (an integer broadcast to the
// slot's shape, or a .npy), --weights (.safetensors, by tensor name), and the
// rest from the seeded generator. A failed validation witness publishes
// nothing; otherwise each output is written as OUTDIR/NAME.npy, atomically.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <filesystem>

#include "driver.h"
#include "ir/binary.h"
#include "oracle/interp.h"
#include "oracle/npy.h"
#include "oracle/random.h"
#include "oracle/safetensors.h"

namespace poot {

namespace {

Error usage(std::string msg) { return makeError(ErrorKind::Usage, {}, std::move(msg)); }

const Value* findParam(const Graph& g, const std::string& name) {
  for (ValueId id : g.params)
    if (g.value(id).name == name) return &g.value(id);
  return nullptr;
}

// Splits NAME=REST and finds the parameter, which must have one of `allowed`
// storage classes.
Expected<std::pair<const Value*, std::string>> namedParam(const Graph& g, const std::string& arg, const char* option,
                                                          std::initializer_list<Storage> allowed, const char* form) {
  size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return usage(std::string(option) + " '" + arg + "' must be " + form);
  std::string name = arg.substr(0, eq);
  if (!name.empty() && name[0] == '%') name.erase(0, 1);
  const Value* p = findParam(g, name);
  if (!p) return usage(std::string(option) + ": graph '" + g.name + "' has no parameter %" + name);
  if (std::find(allowed.begin(), allowed.end(), p->storage) == allowed.end())
    return usage(std::string(option) + ": %" + name + " is " + (p->storage == Storage::Input ? "an " : "a ") +
                 storageName(p->storage) + ", not " +
                 (allowed.size() == 1 ? "a slot" : "an input or a state"));
  return std::make_pair(p, arg.substr(eq + 1));
}

// An integer VALUE broadcast to the slot's type, or the tensor of a .npy file.
Expected<Tensor> slotValue(const Value& p, const std::string& text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return readNpy(text);
  if (p.type.dtype == DType::I32 && (v < INT32_MIN || v > INT32_MAX))
    return makeError(ErrorKind::Range, {}, "--slot " + p.name + "=" + text + " does not fit i32");
  Tensor t(p.type);
  int32_t v32 = int32_t(v);
  size_t bytes = size_t(dtypeBytes(p.type.dtype));  // slots are i32 or i64
  for (int64_t i = 0; i < t.size(); ++i)
    std::memcpy(t.bytes.data() + size_t(i) * bytes, bytes == 4 ? (const void*)&v32 : &v, bytes);
  return t;
}

Status bindNamed(std::map<std::string, Tensor>& params, const Value& p, Expected<Tensor> t, const char* option) {
  if (!t) return t.error();
  if (!params.emplace(p.name, t.take()).second) return usage(std::string(option) + ": %" + p.name + " is bound twice");
  return ok();
}

}  // namespace

int runEval(const EvalOptions& opts) {
  auto graph = loadGraph(opts.graph);
  if (!graph) return report(graph.error());
  const Graph& g = *graph;

  std::map<std::string, Tensor> params;
  for (const std::string& arg : opts.inputs) {
    auto np = namedParam(g, arg, "--input", {Storage::Input, Storage::State}, "NAME=FILE.npy");
    if (!np) return report(np.error());
    if (auto s = bindNamed(params, *np->first, readNpy(np->second), "--input"); !s) return report(s.error());
  }
  for (const std::string& arg : opts.slots) {
    auto np = namedParam(g, arg, "--slot", {Storage::Slot}, "NAME=VALUE or NAME=FILE.npy");
    if (!np) return report(np.error());
    if (auto s = bindNamed(params, *np->first, slotValue(*np->first, np->second), "--slot"); !s)
      return report(s.error());
  }
  if (!opts.weights.empty()) {
    auto file = readSafetensors(opts.weights);
    if (!file) return report(file.error());
    auto bound = bindWeights(g, *file, opts.weights);
    if (!bound) return report(bound.error());
    for (auto& [name, t] : *bound) params.emplace(name, std::move(t));
  }

  auto ev = evaluate(g, completeParams(g, std::move(params), opts.seed));
  if (!ev) return report(ev.error());
  if (!ev->valid()) {
    for (const Export& v : g.validations)
      if (!ev->validations.at(g.value(v.value).name))
        std::fprintf(stderr, "error: validation failed: %%%s\n", g.value(v.value).name.c_str());
    return 1;
  }

  std::error_code ec;
  std::filesystem::create_directories(opts.outputDir, ec);
  if (ec) return report(makeError(ErrorKind::Io, {opts.outputDir}, "cannot create the output directory: " + ec.message()));
  for (const auto& [name, t] : ev->outputs)
    if (auto s = writeNpy((std::filesystem::path(opts.outputDir) / (name + ".npy")).string(), t); !s)
      return report(s.error());
  return 0;
}

}  // namespace poot

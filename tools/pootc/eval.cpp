// pootc eval: evaluate a graph on the CPU with the oracle. Parameters come from
// --input (inputs and states, from .npy), --slot (an integer broadcast to the
// slot's shape, or a .npy), --weights (a checkpoint: a .safetensors file, a
// shard index or a model directory, by tensor name), and the rest from the
// seeded generator (bindParamArgs, shared with poot run; its notices go to
// stderr). A failed validation witness publishes nothing; otherwise each
// output is written as OUTDIR/NAME.npy, atomically.
#include <filesystem>

#include "driver.h"
#include "ir/binary.h"
#include "oracle/interp.h"
#include "oracle/npy.h"
#include "oracle/params.h"

namespace poot {

int runEval(const EvalOptions& opts) {
  auto graph = loadGraph(opts.graph);
  if (!graph) return report(graph.error());
  const Graph& g = *graph;

  auto params = bindParamArgs(g, ParamArgs{opts.inputs, opts.slots, opts.weights, opts.seed});
  if (!params) return report(params.error());
  for (const Error& n : bindNotices(g, *params)) notice(n);
  auto ev = evaluate(g, params->hostTensors());
  if (!ev) return report(ev.error());
  if (!ev->valid()) {
    for (const Export& v : g.validations)
      if (!ev->validations.at(g.value(v.value).name))
        report(makeError(ErrorKind::Range, {}, "validation failed: %" + g.value(v.value).name));
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

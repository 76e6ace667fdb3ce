// pootc trace: read a model config (a Hugging Face config.json as
// published), trace the model into a graph with lib/trace, and write it as
// text (standard output or -o FILE) or, for a .pgb output, in the binary form.
// --pool-slots sizes a paged graph's pools apart from its rows (`poot
// generate` pairs a prefill and a decode plan of one pool). Weights are
// declared in --weights-dtype, by default the dtype the config
// says its checkpoint stores (torch_dtype or dtype), else f32; activations
// are in --dtype, by default the weights' dtype, as transformers 5 loads a
// checkpoint (its dtype="auto").
// The graph goes to stdout and nothing else does; errors are typed and exit 1
// (2 for a bad option), and a failed trace writes no file.
#include "driver.h"
#include "trace/model.h"

namespace poot {

namespace {

trace::TraceOptions traceOptions(const TraceOptions& o) {
  trace::TraceOptions t;
  t.phase = o.phase == "prefill" ? trace::Phase::Prefill : o.phase == "mixed" ? trace::Phase::Mixed : trace::Phase::Decode;
  t.kv = o.kv == "paged" ? trace::ops::KvLayout::Paged : trace::ops::KvLayout::Fixed;
  t.live = o.live;
  t.nextToken = o.nextToken;
  t.layers = o.layers;
  t.batch = o.batch;
  t.tokens = o.tokens;
  t.capacity = o.capacity;
  t.poolSlots = o.poolSlots.value_or(0);
  if (!o.dtype.empty()) t.dtype = *parseDType(o.dtype);
  if (!o.kvDtype.empty()) t.kvDtype = *parseDType(o.kvDtype);
  return t;
}

}  // namespace

int runTrace(const TraceOptions& opts) {
  if (opts.poolSlots && opts.kv != "paged")
    return report(makeError(ErrorKind::Usage, {}, "--pool-slots needs --kv paged: a fixed cache has no pool"));
  if (opts.poolSlots && *opts.poolSlots < 1)
    return report(makeError(ErrorKind::Usage, {}, "--pool-slots must be at least 1, got " + std::to_string(*opts.poolSlots)));
  auto cfg = trace::loadConfig(opts.config);
  if (!cfg) return report(cfg.error());
  trace::TraceOptions t = traceOptions(opts);
  if (opts.weightsDtype.empty()) {
    auto stored = trace::checkpointDtype(*cfg);
    if (!stored) return report(stored.error());
    t.weightsDtype = *stored;
  } else {
    t.weightsDtype = parseDType(opts.weightsDtype);
  }
  if (opts.dtype.empty()) t.dtype = *t.weightsDtype;
  auto graph = trace::traceModel(*cfg, t);
  if (!graph) return report(graph.error());
  return emitGraph(*graph, opts.output);
}

}  // namespace poot

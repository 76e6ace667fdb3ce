// The pass interface and the pipeline. A pass is one function over a graph
// that returns whether it changed it; the pipeline (pipeline.cpp) lists the
// passes in order. Drivers use runPipeline with hooks for --print-after and
// --stop-after, so no pass knows about dumping or stopping.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "analysis/ranges.h"
#include "ir/diag.h"
#include "ir/graph.h"

namespace poot {

// Why a candidate pattern did not fire, naming the eqn it was anchored at.
// `pootc compile --remarks` prints every one: a fusion never fails silently.
struct Remark {
  std::string pass;
  Loc loc;           // the anchor eqn's location
  std::string eqn;   // the anchor's first result, "%name"
  std::string message;
};

// What a pass may know beyond the graph: the device's launch limits (copied
// from the profile by the driver, so passes do not depend on lib/plan) and a
// sink for remarks.
struct PassContext {
  int64_t gridLimits[3] = {INT64_MAX, INT64_MAX, INT64_MAX};
  int64_t maxBindings = INT64_MAX;  // storage buffers one kernel may bind (fuse keeps every group within it)
  std::vector<Remark> remarks;
  // Value ranges of the graph, computed by the ranges pass for the passes
  // after it (attention-rewrite proves live lengths and paged read maps with
  // them). A pass that needs them and finds them missing or computed for
  // another graph (ranges.isFor) recomputes them: see rangesFor.
  std::optional<ValueRanges> ranges;

  void remark(const char* pass, const Graph& g, const Eqn& anchor, std::string message);
};

struct Pass {
  const char* name;
  const char* summary;
  Expected<bool> (*run)(Graph& g, PassContext& ctx);
};

// The passes in pipeline order.
const std::vector<Pass>& pipeline();
const Pass* findPass(const std::string& name);

struct PipelineOptions {
  std::string stopAfter;  // empty: run every pass
  // Called after each pass that ran, with whether it changed the graph.
  std::function<void(const Pass&, const Graph&, bool changed)> afterPass;
};

// Runs the pipeline in order, verifying the graph after every pass (a pass
// that breaks the IR is a compiler bug, reported as such).
Status runPipeline(Graph& g, PassContext& ctx, const PipelineOptions& opts);

// Passes, each in its own file, in pipeline order.
Expected<bool> runCanonicalize(Graph& g, PassContext& ctx);     // canonicalize.cpp
Expected<bool> runRope(Graph& g, PassContext& ctx);             // rope.cpp
Expected<bool> runRanges(Graph& g, PassContext& ctx);           // ranges.cpp
// ctx.ranges for g as it is now, computed first when missing or stale (ranges.cpp).
const ValueRanges& rangesFor(const Graph& g, PassContext& ctx);
Expected<bool> runAttentionRewrite(Graph& g, PassContext& ctx); // attention.cpp
Expected<bool> runSelection(Graph& g, PassContext& ctx);        // selection.cpp

// Mixture of experts, not in the pipeline yet: routed-experts forms
// RoutedExperts from the tracer's dense primitive chain (remarks name the
// check that declined), routed-experts-dense writes each one back as that
// chain. They join the pipeline, after selection, once the routed-gemv
// kernel reads stacked expert weights (docs/passes.md says why).
Expected<bool> runRoutedExperts(Graph& g, PassContext& ctx);       // experts.cpp
Expected<bool> runRoutedExpertsDense(Graph& g, PassContext& ctx);  // experts_dense.cpp
Expected<bool> runMatMulOperands(Graph& g, PassContext& ctx);   // matmul_operands.cpp
Expected<bool> runCleanup(Graph& g, PassContext& ctx);          // cleanup.cpp
Expected<bool> runGuardsFirst(Graph& g, PassContext& ctx);      // guards_first.cpp
Expected<bool> runFuse(Graph& g, PassContext& ctx);             // fuse.cpp

}  // namespace poot

// The random graph generator of the differential test: from a seed, a
// well-typed graph of primitive ops, as the tracer would write one, built
// from a few stages applied to one running value: elementwise chains with
// broadcast operands; row reductions feeding elementwise ops (RMSNorm,
// LayerNorm, softmax) over odd row lengths and other axes, with some of
// their values used outside the chain; MatMuls of odd sizes with weights in
// both layouts (a Transpose of an [out, in] weight), bf16 and f16 weights
// widened by a Convert or by the product, a bias, a SiLU-gated pair of
// products of one input; reshapes and transposes; and one attention chain,
// either in a form the attention rewrite must recognize
// (trace::ops::attention_core: causal, sliding window, ALiBi, softcap, GQA)
// or a near miss it must leave alone. Every value stays f32 and of modest
// magnitude (the generator squashes a value through Tanh before it could
// grow), so boundGraph (bound.h) gives a meaningful bound. The same seed
// gives the same graph on every platform.
#pragma once

#include <cstdint>
#include <string>

#include "ir/diag.h"
#include "ir/graph.h"

namespace poot::diff {

struct Generated {
  Graph graph;
  std::string recipe;      // the stages drawn, for the report
  int64_t attentions = 0;  // Attention eqns the passes must form
};

Expected<Generated> generate(uint64_t seed);

}  // namespace poot::diff

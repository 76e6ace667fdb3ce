// The oracle: a reference interpreter that evaluates a graph op by op on the
// CPU, for every op of the op table (primitive and compiler-formed). It is
// the ground truth every compiled plan and every rewrite is compared with.
// Semantics (reduction order, rounding, NaN rules) are stated in interp.cpp's
// header comment and in docs/oracle.md.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "oracle/tensor.h"

namespace poot {

struct Evaluation {
  std::map<std::string, Tensor> outputs;  // by output value name
  std::map<std::string, Tensor> states;   // each state's new value, by state name
  std::map<std::string, bool> validations;  // each witness, by name
  std::vector<Tensor> values;             // every value, by ValueId (empty for orphans)

  bool valid() const;  // every witness true
};

// Evaluates g with every parameter bound by name. A parameter left unbound, or
// bound to a tensor of another dtype or shape, is an ErrorKind::Bind error; a
// slot value outside its declared range is an ErrorKind::Range error. Both are
// raised before any eqn is evaluated.
Expected<Evaluation> evaluate(const Graph& g, const std::map<std::string, Tensor>& params);

}  // namespace poot

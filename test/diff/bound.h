// The error bound of a random graph's outputs, as a graph the oracle runs.
// A plan (or the graph after the passes) computes the same outputs as the
// oracle on the graph before the passes, but in other orders, with fused
// multiply-adds, with the device's exp and tanh: docs/codegen.md states what
// each kernel may differ by (a sum of n terms within 2 gamma_n sum |x| of the
// oracle's, gamma_n = n u / (1 - n u), u = 2^-24; a MatMul within
// 2 gamma_K sum_k |a_k b_k|). boundGraph carries those per-kernel bounds
// through a whole graph: beside each f32 value it computes E, a bound on how
// far another executor's value may be from the oracle's, from its operands'
// values and bounds (first-order error propagation: for Mul,
// |a| Eb + |b| Ea + Ea Eb plus both sides' rounding; for a transcendental
// function, its slope over [x - E, x + E] times E plus the device's own error;
// see the rules in bound.cpp). Its outputs are those bounds, named as the
// graph's outputs; it declares the graph's parameters under their names, so
// the same parameters bind both. Ops without a rule (states, TopK, formed
// ops, float compares, non-f32 arithmetic) are refused: the generator must
// not make them.
#pragma once

#include "ir/diag.h"
#include "ir/graph.h"

namespace poot::diff {

Expected<Graph> boundGraph(const Graph& g);

}  // namespace poot::diff

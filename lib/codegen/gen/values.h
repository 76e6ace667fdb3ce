// The graph's scalar semantics as KIR values, shared by the elementwise and
// the fused generators: constants as the store then writes them, Convert
// between value types, and every unary, binary and compare op. Arithmetic
// follows the oracle: floats in f32, integers wrapping in their own width
// (the low bits of the oracle's int64), Max/Min propagating NaN, integer
// division truncating with x / -1 a wrapping negation and x / 0 giving 0 (the
// oracle refuses it, a kernel cannot), float to integer conversion
// saturating with NaN to 0. Private to lib/codegen/gen.
#pragma once

#include <vector>

#include "codegen/gen/index.h"

namespace poot::gen {

// A Constant value of dtype t, as the value the store then writes exactly.
V constValue(Builder& b, DType t, double v);
// Element `id` of vals[lo, hi): a balanced select tree, a leaf per run of
// bit-identical values.
V constTree(Builder& b, DType t, V id, const std::vector<double>& vals, size_t lo, size_t hi);
// x, a value of dtype `from` (every float loads as f32), as a value of dtype
// `to`: two-byte floats stay f32 for the store to round.
V convertValue(Builder& b, V x, DType from, DType to);
V unaryValue(Builder& b, Op op, V x);
V binaryValue(Builder& b, Op op, V x, V y);  // binary and compare ops

// x clamped to [0, hi] in its own integer type, then as an i32 index.
V clampIndex(Builder& b, V x, int64_t hi);
// Where element `id` of a DynamicUpdateSlice's update (shape u) goes in its
// target (shape x) along `axis`, from the start as read, clamped so that
// the update fits (the oracle's rule).
V sliceTarget(Builder& b, V id, const Shape& x, const Shape& u, int64_t axis, V start);

}  // namespace poot::gen

// .safetensors weights: an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype (F32, F16, BF16, I32, I64, BOOL), shape and
// [begin, end) data offsets, then the raw data. Reading checks the header
// (well-formed JSON, known dtypes, offsets in range, sizes agree with shapes,
// no two tensors overlapping); binding checks every weight of a graph against
// the file (present, same dtype and shape). Every error is typed and names the
// file and the tensor.
#pragma once

#include <map>
#include <string>

#include "ir/diag.h"
#include "ir/graph.h"
#include "oracle/tensor.h"

namespace poot {

using TensorMap = std::map<std::string, Tensor>;

Expected<TensorMap> parseSafetensors(const std::string& bytes, const std::string& file);
Expected<TensorMap> readSafetensors(const std::string& path);
std::string safetensorsBytes(const TensorMap& tensors);

// The tensors of `file` that the graph's weights name, checked against them:
// a graph weight missing from the file, or of another dtype or shape, is an
// ErrorKind::Bind error naming the tensor. Tensors the graph does not use are
// left out.
Expected<TensorMap> bindWeights(const Graph& g, const TensorMap& file, const std::string& path);

}  // namespace poot

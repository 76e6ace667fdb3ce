// .safetensors weights: an 8-byte little-endian header length, a JSON header
// naming each tensor's dtype (F32, F16, BF16, I32, I64, BOOL), shape and
// [begin, end) data offsets, then the raw data. Reading checks the header
// (well-formed JSON, known dtypes, offsets in range, sizes agree with shapes,
// no two tensors overlapping); binding checks every weight of a graph against
// the file (present, same dtype and shape). Every error is typed and names the
// file and the tensor. The header reader works on bytes in memory, so a
// mapped checkpoint (checkpoint.h) is checked without copying its data.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "oracle/tensor.h"

namespace poot {

using TensorMap = std::map<std::string, Tensor>;

// One tensor of a header, checked: its type and where its bytes lie,
// counted from the start of the file.
struct SafetensorsEntry {
  std::string name;
  Type type;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// Every check above on the `size` bytes of a whole file; only the header is
// read, and the elements of bool tensors (0 or 1). Entries in name order.
Expected<std::vector<SafetensorsEntry>> parseSafetensorsHeader(const uint8_t* bytes, uint64_t size,
                                                               const std::string& file);
Expected<TensorMap> parseSafetensors(const std::string& bytes, const std::string& file);
Expected<TensorMap> readSafetensors(const std::string& path);
std::string safetensorsBytes(const TensorMap& tensors);

// A graph weight against the type a checkpoint stores it in: an
// ErrorKind::Bind error at `file` naming the tensor and both types, and, when
// only the float dtype differs, the --weights-dtype a trace would need.
Status checkWeight(const Value& weight, const Type& stored, const std::string& file);

// The tensors of `file` that the graph's weights name, checked against them:
// a graph weight missing from the file, or of another dtype or shape, is an
// ErrorKind::Bind error naming the tensor. Tensors the graph does not use are
// left out.
Expected<TensorMap> bindWeights(const Graph& g, const TensorMap& file, const std::string& path);

}  // namespace poot

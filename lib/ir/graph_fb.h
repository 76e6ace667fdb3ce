// FlatBuffer pieces shared by every reader and writer of graph.fbs tables:
// the .pgb graph (binary.cpp), the plan writer (lib/plan) and the runtime's
// plan reader, which embed graph attributes in plan.fbs.
#pragma once

#include <cstring>
#include <optional>
#include <vector>

#include "ir/ops.h"
#include "schemas/graph_generated.h"

namespace poot {

// FlatBuffers 2.0's verifier checks a vector's length field but not that its
// 8-byte elements are 8-byte aligned, so vectors are copied out bytewise
// rather than read through a possibly misaligned pointer.
template <class T>
std::vector<T> copyVector(const flatbuffers::Vector<T>* v) {
  std::vector<T> out(v ? v->size() : 0);
  if (!out.empty()) std::memcpy(out.data(), v->Data(), out.size() * sizeof(T));
  return out;
}

flatbuffers::Offset<fb::Attr> writeAttr(flatbuffers::FlatBufferBuilder& b, const Attr& a);
// nullopt for an attribute kind this version does not know.
std::optional<AttrValue> readAttr(const fb::Attr& a);

}  // namespace poot

// Reading, writing and binding .safetensors files. The reader checks the
// 8-byte header length against the file and a 100 MB limit, parses the JSON
// header with nlohmann/json (its exceptions become typed errors that say at
// which byte the JSON went wrong), checks every tensor entry on its own and
// then, sorted by offset, that no two tensors share bytes. The writer lays
// the tensors out contiguously in name order behind a space-padded,
// 8-byte-aligned header.
#include "oracle/safetensors.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/io.h"

namespace poot {

namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeader = 100'000'000;

struct DtypeName { const char* name; DType dtype; };
constexpr DtypeName kDtypes[] = {
    {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16},
    {"I32", DType::I32}, {"I64", DType::I64}, {"BOOL", DType::Bool},
};

std::optional<DType> dtypeOf(const std::string& name) {
  for (const DtypeName& d : kDtypes)
    if (name == d.name) return d.dtype;
  return std::nullopt;
}

const char* nameOf(DType t) {
  for (const DtypeName& d : kDtypes)
    if (d.dtype == t) return d.name;
  return "?";
}

}  // namespace

Expected<std::vector<SafetensorsEntry>> parseSafetensorsHeader(const uint8_t* bytes, uint64_t size,
                                                               const std::string& file) {
  auto err = [&](std::string msg) { return makeError(ErrorKind::Format, {file}, std::move(msg)); };
  if (size < 8) return err("file is too short to hold the 8-byte header length");
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i) headerLen = headerLen << 8 | bytes[i];
  if (headerLen > kMaxHeader) return err("header length " + std::to_string(headerLen) + " is over the 100 MB limit");
  if (headerLen > size - 8)
    return err("header length " + std::to_string(headerLen) + " runs past the end of the file (" +
               std::to_string(size) + " bytes)");
  const uint64_t data = 8 + headerLen;
  const uint64_t dataSize = size - data;

  // nlohmann keeps the last of two equal keys; a callback sees every key, so
  // a tensor named twice is caught here.
  std::optional<std::string> twice;
  std::set<std::string> seen;
  auto onEvent = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && !seen.insert(parsed.get<std::string>()).second && !twice)
      twice = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(bytes + 8, bytes + data, onEvent);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    size_t at = what.find("column ");
    at = at == std::string::npos ? std::string::npos : what.find(": ", at);
    std::string why = at == std::string::npos ? what : what.substr(at + 2);
    // e.byte counts the characters read, the offending one included.
    return err("malformed JSON header at file offset " + std::to_string(8 + e.byte - 1) + ": " + why);
  } catch (const json::exception& e) {
    return err(std::string("malformed JSON header: ") + e.what());
  }
  if (!header.is_object()) return err("header is not a JSON object");
  if (twice) return err("tensor '" + *twice + "' appears twice in the header");

  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      bool strings = info.is_object() && std::all_of(info.begin(), info.end(), [](const json& v) { return v.is_string(); });
      if (!strings) return err("'__metadata__' must be an object of strings");
      continue;
    }
    auto bad = [&, &name = name](const std::string& msg) { return err("tensor '" + name + "': " + msg); };
    if (!info.is_object()) return bad("entry is not an object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!info.contains(key)) return bad(std::string("entry has no '") + key + "'");

    SafetensorsEntry e{name, {}, 0, 0};
    const json& dt = info["dtype"];
    std::optional<DType> dtype = dt.is_string() ? dtypeOf(dt.get<std::string>()) : std::nullopt;
    if (!dtype)
      return bad("unknown dtype " + (dt.is_string() ? "'" + dt.get<std::string>() + "'" : dt.dump()) +
                 " (expected F32, F16, BF16, I32, I64 or BOOL)");
    e.type.dtype = *dtype;

    const json& shape = info["shape"];
    bool dimsOk = shape.is_array() && std::all_of(shape.begin(), shape.end(), [](const json& d) {
      return d.is_number_unsigned() && d.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max());
    });
    if (!dimsOk) return bad("shape " + shape.dump() + " is not a list of non-negative integers");
    for (const json& d : shape) e.type.shape.push_back(d.get<int64_t>());
    uint64_t need = uint64_t(dtypeBytes(*dtype));
    for (int64_t d : e.type.shape) {
      if (d == 0) return bad("shape " + shapeStr(e.type.shape) + " has a zero-size dimension, which the IR does not allow");
      if (need > std::numeric_limits<uint64_t>::max() / uint64_t(d)) return bad("shape " + shapeStr(e.type.shape) + " is too large");
      need *= uint64_t(d);
    }

    const json& off = info["data_offsets"];
    bool offOk = off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned() &&
                 off[0].get<uint64_t>() <= off[1].get<uint64_t>();
    if (!offOk) return bad("data_offsets " + off.dump() + " are not two integers [begin, end] with begin <= end");
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (end > dataSize)
      return bad("data_offsets " + off.dump() + " end past the data section (" + std::to_string(dataSize) + " bytes)");
    if (end - begin != need)
      return bad("data_offsets " + off.dump() + " hold " + std::to_string(end - begin) + " bytes but " +
                 e.type.str() + " needs " + std::to_string(need));
    e.offset = data + begin;
    e.bytes = need;
    entries.push_back(std::move(e));
  }

  std::vector<const SafetensorsEntry*> byOffset;
  for (const SafetensorsEntry& e : entries) byOffset.push_back(&e);
  std::sort(byOffset.begin(), byOffset.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->name < b->name;
  });
  for (size_t i = 1; i < byOffset.size(); ++i)
    if (byOffset[i]->offset < byOffset[i - 1]->offset + byOffset[i - 1]->bytes)
      return err("tensors '" + byOffset[i - 1]->name + "' and '" + byOffset[i]->name + "' overlap in the data section");
  // The tensors cover the data section exactly, as the format requires: a
  // gap or a tail (a header length off by a byte shifts every tensor and
  // leaves one) means the offsets do not describe these bytes.
  uint64_t covered = 0;
  for (const SafetensorsEntry* e : byOffset) {
    if (e->offset - data > covered)
      return err("bytes [" + std::to_string(covered) + ", " + std::to_string(e->offset - data) +
                 ") of the data section are in no tensor (the next is '" + e->name + "')");
    covered = std::max(covered, e->offset - data + e->bytes);
  }
  if (covered != dataSize)
    return err("the data section has " + std::to_string(dataSize) + " bytes but its tensors end at byte " +
               std::to_string(covered) + " (is the header's length right?)");

  // Bool elements are read here (bool tensors are rare and small): every
  // other tensor's bytes are left untouched until they are used.
  for (const SafetensorsEntry& e : entries) {
    if (e.type.dtype != DType::Bool) continue;
    for (uint64_t i = 0; i < e.bytes; ++i)
      if (bytes[e.offset + i] > 1)
        return err("tensor '" + e.name + "': bool element " + std::to_string(i) + " is " +
                   std::to_string(bytes[e.offset + i]) + " (expected 0 or 1)");
  }
  return entries;
}

Expected<TensorMap> parseSafetensors(const std::string& bytes, const std::string& file) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  auto entries = parseSafetensorsHeader(data, bytes.size(), file);
  if (!entries) return entries.error();
  TensorMap out;
  for (const SafetensorsEntry& e : *entries) {
    Tensor t(e.type);
    std::copy_n(data + e.offset, e.bytes, t.bytes.begin());
    out.emplace(e.name, std::move(t));
  }
  return out;
}

Expected<TensorMap> readSafetensors(const std::string& path) {
  Expected<std::string> bytes = readFile(path);
  if (!bytes) return bytes.error();
  return parseSafetensors(*bytes, path);
}

std::string safetensorsBytes(const TensorMap& tensors) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", nameOf(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  // A name that is not UTF-8 cannot be JSON; replace its bad bytes rather than throw.
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string out;
  for (int i = 0; i < 8; ++i) out += char((uint64_t(text.size()) >> (8 * i)) & 0xff);
  out += text;
  for (const auto& [name, t] : tensors) out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  return out;
}

Status checkWeight(const Value& weight, const Type& stored, const std::string& file) {
  if (stored == weight.type) return ok();
  std::string msg = "weight '" + weight.name + "' is " + stored.str() + " in the file but the graph declares " +
                    weight.type.str();
  if (stored.shape == weight.type.shape && isFloat(stored.dtype) && isFloat(weight.type.dtype))
    msg += std::string(" (trace with --weights-dtype ") + dtypeName(stored.dtype) + " to match the file)";
  return makeError(ErrorKind::Bind, {file}, msg);
}

Expected<TensorMap> bindWeights(const Graph& g, const TensorMap& file, const std::string& path) {
  TensorMap out;
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    if (v.storage != Storage::Weight) continue;
    auto it = file.find(v.name);
    if (it == file.end())
      return makeError(ErrorKind::Bind, {path}, "weight '" + v.name + "' is missing from the file");
    if (auto s = checkWeight(v, it->second.type, path); !s) return s.error();
    out.emplace(v.name, it->second);
  }
  return out;
}

}  // namespace poot

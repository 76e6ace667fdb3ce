// How a plan prints. One line per record, in the plan's own order, so a diff
// of two plans reads like a diff of two programs; the arena map is the arena
// buffers sorted by offset (then first use). Requests print through
// printRequest, the same line the plan key hashes. JSON is built with
// nlohmann::ordered_json, whose keys keep their insertion order.
#include "plan/plan_text.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "plan/buffers.h"
#include "plan/request.h"

namespace poot {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

bool inArena(BufferRole r) { return r == BufferRole::Temp || r == BufferRole::Scratch; }

// A step's floor: its bytes at the device's memory bandwidth.
double stepFloorMs(const StepReads& s, int64_t bandwidth) {
  return 1e3 * double(s.weightBytes + s.stateBytes) / double(bandwidth);
}

// Three significant digits.
std::string figure(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

std::string lifetime(const Buffer& b) { return "eqns " + str(b.first) + ".." + str(b.last); }

size_t readCount(const Dispatch& d) { return std::min(d.reads.size(), d.bindings.size()); }

std::string bindingName(const Plan& p, int32_t b) {
  return b >= 0 && size_t(b) < p.buffers.size() ? "%" + p.buffers[size_t(b)].name : "#" + str(b);
}

// Arena buffers by offset, then first use, then index.
std::vector<size_t> arenaOrder(const Plan& p) {
  std::vector<size_t> order;
  for (size_t i = 0; i < p.buffers.size(); ++i)
    if (inArena(p.buffers[i].role)) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Buffer &x = p.buffers[a], &y = p.buffers[b];
    return x.offset != y.offset ? x.offset < y.offset : x.first < y.first;
  });
  return order;
}

std::string bufferLine(const Plan& p, size_t i) {
  const Buffer& b = p.buffers[i];
  std::string out = "#" + str(int64_t(i)) + " " + bufferRoleName(b.role) + " %" + b.name + " " + b.type.str() + " " +
                    str(b.bytes) + " bytes";
  if (b.role == BufferRole::Slot) out += " range [" + str(b.lo) + ", " + str(b.hi) + "]";
  if (inArena(b.role)) out += " @" + str(b.offset) + " " + lifetime(b);
  if (b.role == BufferRole::View) {
    out += " of #" + str(b.aliasOf) + " " + bindingName(p, b.aliasOf);
    if (b.first >= 0) out += " " + lifetime(b);
  }
  return out;
}

}  // namespace

const char* bufferRoleName(BufferRole r) {
  switch (r) {
    case BufferRole::Input: return "input";
    case BufferRole::Weight: return "weight";
    case BufferRole::State: return "state";
    case BufferRole::Slot: return "slot";
    case BufferRole::Output: return "output";
    case BufferRole::Validation: return "validation";
    case BufferRole::Temp: return "temp";
    case BufferRole::Scratch: return "scratch";
    case BufferRole::View: return "view";
  }
  return "?";
}

std::string printPlan(const Plan& p) {
  const Graph& g = p.source;
  std::string out = "plan " + g.name + "\n";
  out += "device " + p.deviceName + " target " + targetName(p.target) + " arch " + p.deviceArch + " hash " +
         hex64(p.deviceHash) + "\n";
  out += "key " + p.key + "\n";
  std::vector<size_t> arena = arenaOrder(p);
  out += "arena " + str(p.arenaBytes) + " bytes, " + str(int64_t(arena.size())) + " buffers\n";
  // Device memory by role (views take none; temp and scratch are the arena).
  int64_t bytes[int(BufferRole::View) + 1] = {};
  for (const Buffer& b : p.buffers) bytes[int(b.role)] += b.bytes;
  out += "bytes arena " + str(p.arenaBytes);
  for (BufferRole r : {BufferRole::Weight, BufferRole::State, BufferRole::Input, BufferRole::Slot, BufferRole::Output,
                       BufferRole::Validation})
    out += std::string(" ") + bufferRoleName(r) + " " + str(bytes[int(r)]);
  out += "\n";
  StepReads step = stepReads(p);
  out += "step reads " + str(step.weightBytes) + " weight bytes, " + str(step.stateBytes) + " state bytes: ";
  if (p.memoryBandwidth > 0)
    out += "floor " + figure(stepFloorMs(step, p.memoryBandwidth)) + " ms at " +
           figure(double(p.memoryBandwidth) / 1e9) + " GB/s\n";
  else
    out += "floor unknown (the profile gives no memory_bandwidth_bytes_per_s)\n";

  out += "buffers " + str(int64_t(p.buffers.size())) + "\n";
  for (size_t i = 0; i < p.buffers.size(); ++i) out += "  " + bufferLine(p, i) + "\n";

  out += "arena map\n";
  for (size_t i : arena) {
    const Buffer& b = p.buffers[i];
    out += "  @" + str(b.offset) + " " + str(b.bytes) + " " + lifetime(b) + " #" + str(int64_t(i)) + " %" + b.name +
           "\n";
  }

  out += "kernels " + str(int64_t(p.kernels.size())) + "\n";
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const Kernel& x = p.kernels[k];
    out += "  k" + str(int64_t(k)) + " " + x.entry + " " + targetName(p.target) + " blob " +
           str(int64_t(x.blob.size())) + " bytes\n";
    out += "    " + printRequest(x.request) + "\n";
  }

  out += "dispatches " + str(int64_t(p.dispatches.size())) + "\n";
  for (size_t i = 0; i < p.dispatches.size(); ++i) {
    const Dispatch& d = p.dispatches[i];
    std::string entry = d.kernel >= 0 && size_t(d.kernel) < p.kernels.size() ? p.kernels[size_t(d.kernel)].entry : "?";
    out += "  d" + str(int64_t(i)) + " eqn " + str(d.eqn) + " k" + str(d.kernel) + " " + entry + " grid " +
           str(d.grid[0]) + "x" + str(d.grid[1]) + "x" + str(d.grid[2]) + " (";
    size_t reads = readCount(d);
    for (size_t j = 0; j < d.bindings.size(); ++j) {
      if (j == reads) out += ") -> (";
      else if (j > 0) out += ", ";
      out += bindingName(p, d.bindings[j]);
    }
    if (reads == d.bindings.size()) out += ") -> (";
    out += ")";
    if (!d.params.empty()) {
      out += " params [";
      for (size_t j = 0; j < d.params.size(); ++j) out += (j ? ", " : "") + str(d.params[j]);
      out += "]";
    }
    out += "\n";
  }

  std::vector<int32_t> held = valueBuffers(p);
  auto holder = [&](ValueId v) { return " #" + str(size_t(v) < held.size() ? held[size_t(v)] : -1); };
  out += "slots\n";
  for (ValueId v : g.params)
    if (g.value(v).storage == Storage::Slot)
      out += "  %" + g.value(v).name + holder(v) + " range [" + str(g.value(v).lo) + ", " + str(g.value(v).hi) + "]\n";
  out += "state\n";
  for (const StateOut& s : g.stateOuts)
    out += "  %" + g.value(s.state).name + holder(s.state) + " written in place by %" + g.value(s.value).name + "\n";
  out += "outputs\n";
  for (const Export& x : g.outputs) out += "  %" + g.value(x.value).name + holder(x.value) + "\n";
  out += "validations\n";
  for (const Export& x : g.validations) out += "  %" + g.value(x.value).name + holder(x.value) + "\n";
  return out;
}

std::string printPlanJson(const Plan& p) {
  using json = nlohmann::ordered_json;
  const Graph& g = p.source;
  json j;
  j["graph"] = g.name;
  j["device"] = {{"name", p.deviceName}, {"target", targetName(p.target)}, {"arch", p.deviceArch},
                 {"hash", hex64(p.deviceHash)}, {"memory_bandwidth_bytes_per_s", p.memoryBandwidth}};
  j["key"] = p.key;
  j["arena_bytes"] = p.arenaBytes;
  StepReads step = stepReads(p);
  j["step_weight_bytes"] = step.weightBytes;
  j["step_state_bytes"] = step.stateBytes;
  j["step_floor_ms"] = p.memoryBandwidth > 0 ? json(stepFloorMs(step, p.memoryBandwidth)) : json(nullptr);
  json buffers = json::array();
  for (const Buffer& b : p.buffers) {
    json x = {{"name", b.name}, {"role", bufferRoleName(b.role)}, {"dtype", dtypeName(b.type.dtype)},
              {"shape", b.type.shape}, {"bytes", b.bytes}};
    if (inArena(b.role) || b.role == BufferRole::View) x["offset"] = b.offset;
    if (b.role == BufferRole::View) x["alias"] = b.aliasOf;
    if (b.first >= 0) x["lifetime"] = {b.first, b.last};
    if (b.role == BufferRole::Slot) x["range"] = {b.lo, b.hi};
    buffers.push_back(std::move(x));
  }
  j["buffers"] = std::move(buffers);
  json arena = json::array();
  for (size_t i : arenaOrder(p)) arena.push_back(i);
  j["arena"] = std::move(arena);
  json kernels = json::array();
  for (const Kernel& k : p.kernels) {
    const Schedule& s = k.request.schedule;
    json operands = json::array(), results = json::array();
    for (const Type& t : k.request.operands) operands.push_back(t.str());
    for (const Type& t : k.request.results) results.push_back(t.str());
    kernels.push_back({{"entry", k.entry},
                       {"target", targetName(p.target)},
                       {"blob_bytes", k.blob.size()},
                       {"op", opName(k.request.op)},
                       {"operands", std::move(operands)},
                       {"results", std::move(results)},
                       {"attrs", printAttrs(k.request.attrs)},
                       {"schedule",
                        {{"kind", s.kind},
                         {"lanes", s.lanes},
                         {"splits", s.splits},
                         {"workgroup_size", s.workgroupSize},
                         {"workgroup_memory", s.workgroupMemory}}},
                       {"request", printRequest(k.request)}});
  }
  j["kernels"] = std::move(kernels);
  json dispatches = json::array();
  for (const Dispatch& d : p.dispatches) {
    size_t reads = readCount(d);
    std::vector<int32_t> r(d.bindings.begin(), d.bindings.begin() + long(reads));
    std::vector<int32_t> w(d.bindings.begin() + long(reads), d.bindings.end());
    dispatches.push_back({{"kernel", d.kernel},
                          {"eqn", d.eqn},
                          {"grid", {d.grid[0], d.grid[1], d.grid[2]}},
                          {"reads", r},
                          {"writes", w},
                          {"params", d.params}});
  }
  j["dispatches"] = std::move(dispatches);
  std::vector<int32_t> held = valueBuffers(p);
  auto holder = [&](ValueId v) { return size_t(v) < held.size() ? held[size_t(v)] : -1; };
  json slots = json::array(), outputs = json::array(), validations = json::array(), state = json::array();
  for (ValueId v : g.params)
    if (g.value(v).storage == Storage::Slot)
      slots.push_back({{"name", g.value(v).name}, {"buffer", holder(v)}, {"range", {g.value(v).lo, g.value(v).hi}}});
  for (const StateOut& s : g.stateOuts)
    state.push_back({{"name", g.value(s.state).name}, {"buffer", holder(s.state)}, {"new_value", g.value(s.value).name}});
  for (const Export& x : g.outputs) outputs.push_back({{"name", g.value(x.value).name}, {"buffer", holder(x.value)}});
  for (const Export& x : g.validations)
    validations.push_back({{"name", g.value(x.value).name}, {"buffer", holder(x.value)}});
  j["slots"] = std::move(slots);
  j["state"] = std::move(state);
  j["outputs"] = std::move(outputs);
  j["validations"] = std::move(validations);
  return j.dump(2) + "\n";
}

std::string printArenaDot(const Plan& p) {
  // Points: 36 per eqn across, the arena scaled to 720 points high; every box
  // at least 4 points tall so small buffers stay visible.
  const double perEqn = 36, height = 720;
  double scale = p.arenaBytes > 0 ? height / double(p.arenaBytes) : 0;
  std::string out = "// the arena of plan " + p.source.name + " over time: x = eqn, y = offset; render with neato -n2\n";
  out += "digraph arena {\n  node [shape=box, style=filled, fillcolor=\"#dde8f5\", fontsize=8, fixedsize=true];\n";
  for (size_t i : arenaOrder(p)) {
    const Buffer& b = p.buffers[i];
    double w = double(b.last - b.first + 1) * perEqn, h = std::max(4.0, double(b.bytes) * scale);
    double x = double(b.first) * perEqn + w / 2, y = double(b.offset) * scale + h / 2;
    char pos[96];
    std::snprintf(pos, sizeof pos, "%.1f,%.1f", x, y);
    char size[96];
    std::snprintf(size, sizeof size, "width=%.3f, height=%.3f", w / 72, h / 72);
    std::string fill = b.role == BufferRole::Scratch ? ", fillcolor=\"#f5d6a8\"" : "";
    out += "  b" + str(int64_t(i)) + " [label=\"%" + b.name + "\\n@" + str(b.offset) + " " + str(b.bytes) + "\", pos=\"" +
           pos + "\", " + size + fill + "];\n";
  }
  return out + "}\n";
}

}  // namespace poot

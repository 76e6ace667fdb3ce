// The Session. create() checks the plan against the backend's DeviceInfo
// (target, arch, name, kernel and dispatch limits), then allocates: the arena
// and every buffer outside it, zeroing the states; builds each kernel used by
// a dispatch; finds the paged write maps in the source graph (slots that
// reach a ScatterUpdate's index operand through reshapes) and the index
// inputs (integer inputs that reach a Gather's indices); and splits the
// dispatches into phases. Phase one ends before the first dispatch that
// writes a state (through a view or not) when every witness's last writer
// is in it; otherwise there is one phase and a device-side copy of every
// state, taken before each step and restored when a witness fails. Binds are
// all checked before the first upload, so a refused step touches nothing.
#include "runtime/session.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>

namespace poot::rt {

namespace {

Error capability(const char* kind, std::string msg, std::vector<Figure> figures) {
  Error e = makeError(ErrorKind::Capability, {}, std::move(msg));
  e.capability = kind;
  e.figures = std::move(figures);
  return e;
}

Error bindError(std::string msg) { return makeError(ErrorKind::Bind, {}, std::move(msg)); }

// "vulkan1.3" -> 3; -1 when it is not of that form (a minor of at most two
// digits).
int vulkanMinor(const std::string& arch) {
  const std::string prefix = "vulkan1.";
  if (arch.rfind(prefix, 0) != 0 || arch.size() == prefix.size() || arch.size() > prefix.size() + 2) return -1;
  int minor = 0;
  for (size_t i = prefix.size(); i < arch.size(); ++i) {
    if (!std::isdigit(uint8_t(arch[i]))) return -1;
    minor = minor * 10 + (arch[i] - '0');
  }
  return minor;
}

// "sm_90" -> 90, "sm_90a" -> 90 (the suffix in `suffix`); -1 when it is not
// of that form.
int smVersion(const std::string& arch, std::string* suffix = nullptr) {
  if (arch.rfind("sm_", 0) != 0) return -1;
  size_t end = 3;
  while (end < arch.size() && std::isdigit(uint8_t(arch[end]))) ++end;
  if (end == 3 || end > 7) return -1;
  if (suffix) *suffix = arch.substr(end);
  return std::stoi(arch.substr(3, end - 3));
}

int64_t word(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::I64) {
    int64_t v;
    std::memcpy(&v, t.bytes.data() + size_t(i) * 8, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, t.bytes.data() + size_t(i) * 4, 4);
  return v;
}

// Zeroes a buffer from one fixed block of zeros, so that no host copy of a
// state (gigabytes for a KV cache) is ever made.
Status zeroFill(Backend& backend, BufferId buffer, int64_t bytes) {
  static const std::vector<uint8_t> zeros(size_t(1) << 20);
  for (int64_t at = 0; at < bytes; at += int64_t(zeros.size()))
    if (auto s = backend.upload(buffer, at, zeros.data(), std::min(bytes - at, int64_t(zeros.size()))); !s) return s;
  return ok();
}

}  // namespace

Status checkDevice(const PlanFile& p, const DeviceInfo& d, const SessionOptions& opts) {
  if (p.device.target != d.target)
    return capability("Target",
                      std::string("the plan is for target ") + targetName(p.device.target) + ", device '" + d.name +
                          "' runs " + targetName(d.target),
                      {{"plan_target", targetName(p.device.target)}, {"device_target", targetName(d.target)}});
  int planMinor = vulkanMinor(p.device.arch);
  if (d.target == Target::Spirv && (planMinor < 0 || planMinor > vulkanMinor(d.arch)))
    return capability("Device", "the plan needs " + p.device.arch + ", device '" + d.name + "' runs " + d.arch,
                      {{"plan_arch", p.device.arch}, {"device_arch", d.arch}});
  // PTX for sm_N runs on sm_N and newer; an arch-specific sm_Na only on sm_N.
  std::string suffix;
  int planSm = smVersion(p.device.arch, &suffix);
  if (d.target == Target::Ptx &&
      (planSm < 0 || planSm > smVersion(d.arch) || (!suffix.empty() && planSm != smVersion(d.arch))))
    return capability("Device", "the plan's kernels are ptx for " + p.device.arch + ", device '" + d.name + "' is " +
                                    d.arch,
                      {{"plan_arch", p.device.arch}, {"device_arch", d.arch}});
  const std::string& name = p.device.name;
  bool same = name == d.slug || name.rfind(d.slug + "-", 0) == 0;
  if (!same && !opts.allowOtherDevice)
    return capability("Device",
                      "the plan was built for device '" + name + "', this is '" + d.slug + "' (" + d.name +
                          "); recompile it for this device or allow another device",
                      {{"plan_device", name}, {"device", d.slug}});
  for (const Kernel& k : p.kernels) {
    if (k.workgroupSize > d.maxWorkgroupSize)
      return capability("WorkgroupSize",
                        "kernel '" + k.entry + "' runs " + std::to_string(k.workgroupSize) +
                            " threads a workgroup, device '" + d.name + "' holds " + std::to_string(d.maxWorkgroupSize),
                        {{"workgroup_size", k.workgroupSize}, {"max_workgroup_size", d.maxWorkgroupSize}});
    if (k.workgroupMemory > d.workgroupMemoryBytes)
      return capability("WorkgroupMemory",
                        "kernel '" + k.entry + "' uses " + std::to_string(k.workgroupMemory) +
                            " bytes of workgroup memory, device '" + d.name + "' has " +
                            std::to_string(d.workgroupMemoryBytes),
                        {{"bytes", k.workgroupMemory}, {"workgroup_memory_bytes", d.workgroupMemoryBytes}});
  }
  for (size_t i = 0; i < p.dispatches.size(); ++i) {
    const Dispatch& x = p.dispatches[i];
    for (int k = 0; k < 3; ++k)
      if (x.grid[k] < 1 || x.grid[k] > d.gridLimits[k])
        return capability("GridLimit",
                          "dispatch " + std::to_string(i) + " has " + std::to_string(x.grid[k]) + " workgroups along " +
                              "xyz"[k] + ", device '" + d.name + "' allows " + std::to_string(d.gridLimits[k]),
                          {{"dispatch", int64_t(i)},
                           {"axis", std::string(1, "xyz"[k])},
                           {"workgroups", x.grid[k]},
                           {"grid_limit", d.gridLimits[k]}});
    if (int64_t(x.bindings.size()) > d.maxBindings)
      return capability("BindingLimit",
                        "dispatch " + std::to_string(i) + " (kernel '" + p.kernels[size_t(x.kernel)].entry +
                            "') binds " + std::to_string(x.bindings.size()) + " storage buffers, device '" + d.name +
                            "' allows " + std::to_string(d.maxBindings) + " per kernel",
                        {{"dispatch", int64_t(i)},
                         {"bindings", int64_t(x.bindings.size())},
                         {"max_bindings", d.maxBindings}});
    if (!x.params.empty())
      return makeError(ErrorKind::Format, {}, "dispatch " + std::to_string(i) +
                                                  " has scalar parameters, which this runtime does not pass");
  }
  for (const Buffer& b : p.buffers)
    if (b.bytes > d.maxBindingBytes)
      return capability("BufferBytes",
                        "buffer %" + b.name + " has " + std::to_string(b.bytes) + " bytes, device '" + d.name +
                            "' binds at most " + std::to_string(d.maxBindingBytes),
                        {{"bytes", b.bytes}, {"max_binding_bytes", d.maxBindingBytes}});
  if (256 % d.bindingAlignment)
    return capability("Device",
                      "device '" + d.name + "' needs binding offsets aligned to " +
                          std::to_string(d.bindingAlignment) + " bytes, the arena is aligned to 256",
                      {{"binding_alignment", d.bindingAlignment}, {"arena_alignment", int64_t(256)}});
  return ok();
}

Expected<std::vector<KernelId>> buildKernels(const PlanFile& plan, Backend& backend) {
  std::vector<int> bindings(plan.kernels.size(), -1);
  for (const Dispatch& d : plan.dispatches) bindings[size_t(d.kernel)] = int(d.bindings.size());
  std::vector<KernelId> kernels(plan.kernels.size(), -1);
  for (size_t k = 0; k < plan.kernels.size(); ++k) {
    if (bindings[k] < 0) continue;
    const Kernel& kn = plan.kernels[k];
    if (kn.blob.empty())
      return makeError(ErrorKind::Format, {}, "kernel '" + kn.entry + "' has no code (the plan was written without it)");
    auto id = backend.createKernel(kn.blob, kn.entry, kn.workgroupSize, kn.workgroupMemory, bindings[k],
                                   kn.waitsForPrevious);
    if (!id) return id.error();
    kernels[k] = *id;
  }
  return kernels;
}

Expected<std::unique_ptr<Session>> Session::create(PlanFile plan, std::shared_ptr<Backend> backend,
                                                   SessionOptions opts) {
  if (auto s = checkDevice(plan, backend->info(), opts); !s) return s.error();
  for (const auto& entry : opts.shared) {
    const auto& [name, shared] = entry;
    auto it = std::find_if(plan.buffers.begin(), plan.buffers.end(), [&](const Buffer& b) {
      return b.name == entry.first && (b.role == Role::Weight || b.role == Role::State);
    });
    if (it == plan.buffers.end()) return bindError("the plan has no weight or state %" + name + " to share");
    if (it->type != shared.type)
      return bindError(std::string(roleName(it->role)) + " %" + name + " is " + it->type.str() +
                       ", the shared buffer holds " + shared.type.str());
  }
  std::unique_ptr<Session> s(new Session(std::move(plan), std::move(backend)));
  if (auto b = s->build(opts.shared); !b) return b.error();
  return s;
}

std::map<std::string, SharedBuffer> Session::sharedBuffers() const {
  std::map<std::string, SharedBuffer> out;
  for (size_t i = 0; i < plan_.buffers.size(); ++i) {
    const Buffer& b = plan_.buffers[i];
    if (b.role == Role::Weight || b.role == Role::State) out[b.name] = {own_[i], b.type};
  }
  return out;
}

BufferRange Session::rangeOf(int32_t buffer) const {
  const Buffer* b = &plan_.buffers[size_t(buffer)];
  if (b->role == Role::View) buffer = b->alias, b = &plan_.buffers[size_t(buffer)];
  if (b->inArena()) return {arena_, b->offset, b->bytes};
  return {own_[size_t(buffer)], 0, b->bytes};
}

Status Session::build(const std::map<std::string, SharedBuffer>& shared) {
  const std::vector<Buffer>& bufs = plan_.buffers;
  auto arena = backend_->allocate(plan_.arenaBytes);
  if (!arena) return arena.error();
  arena_ = *arena;
  own_.assign(bufs.size(), -1);
  weightBound_.assign(bufs.size(), false);
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (bufs[i].inArena() || bufs[i].role == Role::View) continue;
    if (bufs[i].role == Role::State) states_.push_back(int32_t(i));
    auto from = shared.find(bufs[i].name);
    if (from != shared.end() && (bufs[i].role == Role::Weight || bufs[i].role == Role::State)) {
      own_[i] = from->second.buffer;
      weightBound_[i] = bufs[i].role == Role::Weight;
      continue;
    }
    auto b = backend_->allocate(bufs[i].bytes);
    if (!b) return b.error();
    own_[i] = *b;
    if (bufs[i].role == Role::State)
      if (auto z = zeroFill(*backend_, *b, bufs[i].bytes); !z) return z;
  }

  // Kernels, each built once with the binding count of its dispatches (the
  // reader checked that they agree).
  auto kernels = buildKernels(plan_, *backend_);
  if (!kernels) return kernels.error();

  // Paged write maps: slots that reach a ScatterUpdate's index operand.
  const Graph& g = plan_.source;
  for (const Eqn& e : g.eqns) {
    if (e.op != Op::ScatterUpdate) continue;
    ValueId v = e.operands[1];
    while (g.value(v).storage == Storage::Result && g.eqns[size_t(g.value(v).def)].op == Op::Reshape)
      v = g.eqns[size_t(g.value(v).def)].operands[0];
    if (g.value(v).storage != Storage::Slot) continue;
    int64_t pool = g.type(e.operands[0]).shape.at(0);
    for (const Slot& s : plan_.slots)
      if (bufs[size_t(s.buffer)].value == v) {
        auto [it, fresh] = writeMaps_.emplace(s.buffer, pool);
        if (!fresh) it->second = std::min(it->second, pool);
      }
  }

  // Index inputs: integer inputs whose words reach a Gather's indices in
  // the graph, or that a Gather kernel's dispatch binds as its indices (the
  // kernel's own table extent: the dispatches, not the graph, say what runs).
  for (size_t i = 0; i < bufs.size(); ++i)
    if (bufs[i].role == Role::Input && isInt(bufs[i].type.dtype))
      if (int64_t n = gatherBound(g, bufs[i].value); n > 0) indexBounds_.emplace(int32_t(i), n);
  for (const Dispatch& d : plan_.dispatches) {
    int64_t n = gatherExtent(plan_.kernels[size_t(d.kernel)].request);
    if (n == 0 || d.reads < 2) continue;
    int32_t b = d.bindings[1];
    if (bufs[size_t(b)].role == Role::View) b = bufs[size_t(b)].alias;
    if (bufs[size_t(b)].role != Role::Input || !isInt(bufs[size_t(b)].type.dtype)) continue;
    auto [it, fresh] = indexBounds_.emplace(b, n);
    if (!fresh) it->second = std::min(it->second, n);
  }

  // Phases: see the file comment.
  auto base = [&](int32_t b) { return bufs[size_t(b)].role == Role::View ? bufs[size_t(b)].alias : b; };
  size_t firstStateWrite = plan_.dispatches.size();
  std::map<int32_t, size_t> lastWrite;
  for (size_t i = 0; i < plan_.dispatches.size(); ++i) {
    const Dispatch& d = plan_.dispatches[i];
    for (size_t j = size_t(d.reads); j < d.bindings.size(); ++j) {
      int32_t b = base(d.bindings[j]);
      lastWrite[b] = i;
      if (bufs[size_t(b)].role == Role::State) firstStateWrite = std::min(firstStateWrite, i);
    }
  }
  bool hoisted = true;
  for (const Export& v : plan_.validations)
    if (lastWrite.count(v.buffer) && lastWrite[v.buffer] >= firstStateWrite) hoisted = false;
  std::vector<std::vector<DispatchCommand>> phases(1);
  for (size_t i = 0; i < plan_.dispatches.size(); ++i) {
    if (i == firstStateWrite && hoisted && !plan_.validations.empty()) phases.emplace_back();
    const Dispatch& d = plan_.dispatches[i];
    DispatchCommand c;
    c.kernel = (*kernels)[size_t(d.kernel)];
    std::copy(d.grid, d.grid + 3, c.grid);
    for (int32_t b : d.bindings) c.bindings.push_back(rangeOf(b));
    phases.back().push_back(std::move(c));
  }
  for (const auto& cmds : phases) {
    auto p = backend_->record(cmds);
    if (!p) return p.error();
    phases_.push_back(*p);
  }
  phaseCommands_ = std::move(phases);
  if (!hoisted)
    for (int32_t s : states_) {
      auto b = backend_->allocate(bufs[size_t(s)].bytes);
      if (!b) return b.error();
      stateBackup_.push_back(*b);
    }
  return ok();
}

int32_t Session::findBuffer(const std::string& name, Role role) const {
  for (size_t i = 0; i < plan_.buffers.size(); ++i)
    if (plan_.buffers[i].role == role && plan_.buffers[i].name == name) return int32_t(i);
  return -1;
}

Status Session::upload(int32_t buffer, const Tensor& t) {
  return backend_->upload(own_[size_t(buffer)], 0, t.bytes.data(), int64_t(t.bytes.size()));
}

Expected<Tensor> Session::download(int32_t buffer) {
  BufferRange r = rangeOf(buffer);
  Tensor t(plan_.buffers[size_t(buffer)].type);
  if (auto s = backend_->download(r.buffer, r.offset, t.bytes.data(), int64_t(t.bytes.size())); !s) return s.error();
  return t;
}

namespace {

// The bytes fit the buffer exactly: dtype, shape and byte count.
Status checkType(const char* what, const Buffer& b, const Type& type, int64_t bytes) {
  if (type != b.type)
    return bindError(std::string(what) + " %" + b.name + " is bound to " + type.str() + ", expected " + b.type.str());
  if (bytes != b.bytes)
    return bindError(std::string(what) + " %" + b.name + " holds " + std::to_string(bytes) + " bytes, its type " +
                     b.type.str() + " needs " + std::to_string(b.bytes));
  return ok();
}

Status checkType(const char* what, const Buffer& b, const Tensor& t) {
  return checkType(what, b, t.type, int64_t(t.bytes.size()));
}

}  // namespace

Expected<WeightLoad> Session::bindWeights(const std::vector<WeightBytes>& weights,
                                          const std::function<void(size_t, int64_t, int64_t)>& uploaded) {
  std::vector<int32_t> buffers;
  WeightLoad load;
  for (const WeightBytes& w : weights) {
    int32_t b = findBuffer(w.name, Role::Weight);
    if (b < 0) return bindError("the plan has no weight %" + w.name);
    if (auto s = checkType("weight", plan_.buffers[size_t(b)], w.type, w.bytes); !s) return s.error();
    buffers.push_back(b);
    load.bytes += w.bytes;
  }
  auto start = std::chrono::steady_clock::now();
  int64_t done = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (auto s = backend_->upload(own_[size_t(buffers[i])], 0, weights[i].data, weights[i].bytes); !s)
      return s.error();
    weightBound_[size_t(buffers[i])] = true;
    done += weights[i].bytes;
    if (uploaded) uploaded(i, done, load.bytes);
  }
  load.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return load;
}

Status Session::bindWeights(const std::map<std::string, Tensor>& weights) {
  std::vector<WeightBytes> views;
  for (const auto& [name, t] : weights) views.push_back({name, t.type, t.bytes.data(), int64_t(t.bytes.size())});
  auto load = bindWeights(views);
  if (!load) return load.error();
  return ok();
}

Status Session::setState(const std::string& name, const Tensor& value) {
  int32_t b = findBuffer(name, Role::State);
  if (b < 0) return bindError("the plan has no state %" + name);
  if (auto s = checkType("state", plan_.buffers[size_t(b)], value); !s) return s;
  return upload(b, value);
}

Expected<Tensor> Session::readState(const std::string& name) {
  int32_t b = findBuffer(name, Role::State);
  if (b < 0) return bindError("the plan has no state %" + name);
  return download(b);
}

Status Session::checkBinds(const std::map<std::string, Tensor>& inputs) const {
  const std::vector<Buffer>& bufs = plan_.buffers;
  for (const auto& [name, t] : inputs)
    if (findBuffer(name, Role::Input) < 0 && findBuffer(name, Role::Slot) < 0) {
      for (const Buffer& b : bufs)
        if (b.name == name && b.value >= 0 && (b.role == Role::Weight || b.role == Role::State))
          return bindError("%" + name + " is a " + roleName(b.role) + ", not an input or a slot");
      return bindError("the plan has no input or slot %" + name);
    }
  for (size_t i = 0; i < bufs.size(); ++i) {
    const Buffer& b = bufs[i];
    if (b.role == Role::Weight && !weightBound_[i]) return bindError("weight %" + b.name + " is not bound");
    if (b.role != Role::Input && b.role != Role::Slot) continue;
    const char* what = b.role == Role::Input ? "input" : "slot";
    auto it = inputs.find(b.name);
    if (it == inputs.end()) return bindError(std::string(what) + " %" + b.name + " is not bound");
    if (auto s = checkType(what, b, it->second); !s) return s;
  }
  for (const auto& [buffer, n] : indexBounds_) {
    const Buffer& b = bufs[size_t(buffer)];
    const Tensor& t = inputs.at(b.name);
    for (int64_t i = 0; i < t.size(); ++i)
      if (int64_t w = word(t, i); w < 0 || w >= n)
        return makeError(ErrorKind::Range, {},
                         "input %" + b.name + " word " + std::to_string(i) + " has value " + std::to_string(w) +
                             " outside [0, " + std::to_string(n - 1) + "], the table axis it indexes (Gather)");
  }
  for (const Slot& s : plan_.slots) {
    const Tensor& t = inputs.at(s.name);
    auto pool = writeMaps_.find(s.buffer);
    if (pool != writeMaps_.end()) {
      std::map<int64_t, int64_t> named;  // pool slot -> the word that names it
      for (int64_t i = 0; i < t.size(); ++i) {
        int64_t w = word(t, i);
        if (w == -1) continue;
        if (w < 0 || w >= pool->second)
          return bindError("slot map %" + s.name + ": word " + std::to_string(i) + " is " + std::to_string(w) +
                           ", not -1 or a slot of the pool [0, " + std::to_string(pool->second) + ")");
        auto [at, fresh] = named.emplace(w, i);
        if (!fresh)
          return bindError("slot map %" + s.name + ": pool slot " + std::to_string(w) + " is named twice (words " +
                           std::to_string(at->second) + " and " + std::to_string(i) + ")");
      }
    }
    for (int64_t i = 0; i < t.size(); ++i) {
      int64_t w = word(t, i);
      if (w < s.lo || w > s.hi)
        return makeError(ErrorKind::Range, {},
                         "slot %" + s.name + " word " + std::to_string(i) + " has value " + std::to_string(w) +
                             " outside its declared range [" + std::to_string(s.lo) + ", " + std::to_string(s.hi) + "]");
    }
  }
  return ok();
}

Status Session::copyStates(bool restore) {
  for (size_t i = 0; i < states_.size(); ++i) {
    BufferId live = own_[size_t(states_[i])];
    int64_t bytes = plan_.buffers[size_t(states_[i])].bytes;
    auto s = restore ? backend_->copy(stateBackup_[i], live, bytes) : backend_->copy(live, stateBackup_[i], bytes);
    if (!s) return s;
  }
  return ok();
}

Expected<StepResult> Session::step(const std::map<std::string, Tensor>& inputs, bool readOutputs, bool profile) {
  if (auto s = checkBinds(inputs); !s) return s.error();
  if (profile && profiled_.empty()) {
    std::vector<ProgramId> programs;
    for (const auto& cmds : phaseCommands_) {
      auto p = backend_->recordProfiled(cmds);
      if (!p) return p.error();
      programs.push_back(*p);
    }
    profiled_ = std::move(programs);
  }
  const std::vector<ProgramId>& programs = profile ? profiled_ : phases_;
  for (size_t i = 0; i < plan_.buffers.size(); ++i) {
    const Buffer& b = plan_.buffers[i];
    if (b.role == Role::Input || b.role == Role::Slot)
      if (auto s = upload(int32_t(i), inputs.at(b.name)); !s) return s.error();
  }
  if (copiesStates())
    if (auto s = copyStates(false); !s) return s.error();

  StepResult result;
  result.deviceSeconds = 0.0;
  auto start = std::chrono::steady_clock::now();
  for (size_t p = 0; p < programs.size(); ++p) {
    if (auto s = backend_->run(programs[p]); !s) return s.error();
    if (profile)
      for (double t : backend_->lastRunDispatchSeconds()) result.dispatchSeconds.push_back(t);
    std::optional<double> device = backend_->lastRunDeviceSeconds();
    if (device && result.deviceSeconds) *result.deviceSeconds += *device;
    else result.deviceSeconds.reset();
    if (p > 0) continue;
    std::string failed;
    for (const Export& v : plan_.validations) {
      auto w = download(v.buffer);
      if (!w) return w.error();
      if (std::any_of(w->bytes.begin(), w->bytes.end(), [](uint8_t x) { return x == 0; }))
        failed += (failed.empty() ? "%" : ", %") + v.name;
    }
    if (failed.empty()) continue;
    if (copiesStates())
      if (auto s = copyStates(true); !s) return s.error();
    return makeError(ErrorKind::Range, {}, "validation failed: " + failed);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const Export& o : plan_.outputs) {
    if (!readOutputs) break;
    auto t = download(o.buffer);
    if (!t) return t.error();
    result.outputs.emplace(o.name, t.take());
  }
  return result;
}

Status Session::readOutput(const std::string& name, int64_t first, int64_t count, void* into) {
  for (const Export& o : plan_.outputs) {
    if (o.name != name) continue;
    const Type& type = plan_.buffers[size_t(o.buffer)].type;
    int64_t n = numel(type.shape), width = int64_t(dtypeBytes(type.dtype));
    if (first < 0 || count < 0 || first > n - count)
      return makeError(ErrorKind::Range, {},
                       "elements [" + std::to_string(first) + ", " + std::to_string(first + count) + ") of output %" +
                           name + " are not all among its " + std::to_string(n));
    BufferRange r = rangeOf(o.buffer);
    return backend_->download(r.buffer, r.offset + first * width, into, count * width);
  }
  return bindError("the plan has no output %" + name);
}

}  // namespace poot::rt

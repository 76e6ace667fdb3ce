// How a plan file is read. In order: the size and the "PPLN" identifier; the
// schema version, read from a root table that has been verified on its own
// (so a newer file says which version it is rather than "corrupted"); the
// checksum over every byte (ir/hash.h), before anything else in the file is
// believed; the FlatBuffers verifier over the whole file, including the
// nested graph; the embedded graph, read and verified like a .pgb file; then
// record by record into the runtime's own structs, checking every index and
// figure and each kernel's blob (kernel_blob.h). 8-byte vectors are copied
// out with memcpy, since FlatBuffers 2.0's verifier does not check their
// alignment.
#include "runtime/plan_reader.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "ir/binary.h"
#include "ir/graph_fb.h"
#include "ir/hash.h"
#include "ir/io.h"
#include "runtime/kernel_blob.h"
#include "runtime/spirv_validator.h"
#include "schemas/plan_generated.h"

namespace poot::rt {

namespace {

namespace fbg = ::poot::fb;
namespace fbp = ::poot::pfb;

// Arena offsets are multiples of this (the compiler's kArenaAlign; part of the
// format, so every backend can bind an arena range at any buffer's offset).
constexpr int64_t kArenaAlign = 256;

// What each target's launch interface can express at all, whatever the
// device: vkCmdDispatch counts workgroups in 32 bits; CUDA launches at most
// 2^31-1 blocks along x and 65535 along y and z, of at most 1024 threads;
// HSA dispatch packets count work-items (not workgroups) in 32 bits an axis,
// in workgroups of at most 1024. The live device's own limits are the
// Session's to check.
struct LaunchLimits {
  int64_t grid[3];
  int64_t workgroupSize;  // 0: no limit of the interface's own
  bool gridInItems;       // the grid limit counts work-items along x
};

LaunchLimits launchLimits(Target t) {
  constexpr int64_t u32 = 0xffffffffll;
  switch (t) {
    case Target::Spirv: return {{u32, u32, u32}, 0, false};
    case Target::Ptx: return {{0x7fffffffll, 65535, 65535}, 1024, false};
    case Target::Hsaco: return {{u32, u32, u32}, 1024, true};
  }
  return {{u32, u32, u32}, 0, false};
}

std::string str(int64_t v) { return std::to_string(v); }

class Reader {
 public:
  Reader(const fbp::Plan& fp, const std::string& file) : fp_(fp), file_(file) {}

  Expected<PlanFile> run() {
    out_.version = fp_.version();
    // The graph first: buffer values and dispatch eqns are checked against it.
    if (!fp_.source() || fp_.source()->size() == 0) return fail("source", "the plan carries no source graph");
    std::string bytes(reinterpret_cast<const char*>(fp_.source()->Data()), fp_.source()->size());
    auto g = readBinaryGraph(bytes, file_);
    if (!g) return fail("source", "embedded graph: " + g.error().message);
    if (auto s = verify(*g); !s) return fail("source", "embedded graph: " + s.error().message);
    out_.source = g.take();

    const fbp::Device& d = *fp_.device();
    auto target = readTarget(d.target());
    if (!target) return fail("device", "unknown target " + str(int(d.target())));
    out_.device = Device{d.name()->str(), d.hash(), *target, d.arch()->str(), d.memory_bandwidth()};
    if (out_.device.memoryBandwidth < 0)
      return fail("device", "negative memory bandwidth " + str(out_.device.memoryBandwidth));
    if (out_.device.name.empty()) return fail("device", "the device has no name");
    out_.key = fp_.key()->str();
    out_.arenaBytes = fp_.arena_bytes();
    if (out_.arenaBytes < 0) return fail("plan", "negative arena size " + str(out_.arenaBytes));

    if (fp_.buffers())
      for (flatbuffers::uoffset_t i = 0; i < fp_.buffers()->size(); ++i)
        if (auto s = readBuffer(*fp_.buffers()->Get(i), i); !s) return s.error();
    for (size_t i = 0; i < out_.buffers.size(); ++i)
      if (auto s = checkBuffer(i); !s) return s.error();
    if (auto s = checkArena(); !s) return s.error();
    if (fp_.kernels())
      for (flatbuffers::uoffset_t i = 0; i < fp_.kernels()->size(); ++i)
        if (auto s = readKernel(*fp_.kernels()->Get(i), i); !s) return s.error();
    if (fp_.dispatches())
      for (flatbuffers::uoffset_t i = 0; i < fp_.dispatches()->size(); ++i)
        if (auto s = readDispatch(*fp_.dispatches()->Get(i), i); !s) return s.error();
    if (auto s = checkBindingCounts(); !s) return s.error();
    if (fp_.slots())
      for (flatbuffers::uoffset_t i = 0; i < fp_.slots()->size(); ++i) {
        const fbp::Slot& s = *fp_.slots()->Get(i);
        Slot slot{s.name()->str(), s.buffer(), s.lo(), s.hi()};
        if (!validBuffer(slot.buffer) || out_.buffers[size_t(slot.buffer)].role != Role::Slot)
          return fail(item("slot", i), "slot '" + slot.name + "' names buffer " + str(slot.buffer) + ", not a slot buffer");
        if (slot.lo > slot.hi) return fail(item("slot", i), "empty declared range [" + str(slot.lo) + ", " + str(slot.hi) + "]");
        out_.slots.push_back(std::move(slot));
      }
    if (auto s = readExports(fp_.outputs(), out_.source.outputs, out_.outputs, "output"); !s) return s.error();
    if (auto s = readExports(fp_.validations(), out_.source.validations, out_.validations, "validation"); !s)
      return s.error();
    // The records against each other: what a kernel was generated for
    // against what its dispatches bind, and the dispatches against the
    // graph they claim to run.
    if (auto s = checkBufferValues(); !s) return s.error();
    for (size_t i = 0; i < out_.dispatches.size(); ++i)
      if (auto s = checkRequest(i); !s) return s.error();
    if (auto s = checkGrids(); !s) return s.error();
    if (auto s = checkDataflow(); !s) return s.error();
    if (auto s = checkIndexSlots(); !s) return s.error();
    return std::move(out_);
  }

 private:
  const fbp::Plan& fp_;
  std::string file_;
  PlanFile out_;
  std::vector<BlobFacts> facts_;  // per kernel, what its blob says (-1s for an empty blob)

  static std::string item(const char* what, size_t i) { return std::string(what) + " " + std::to_string(i); }
  Error fail(const std::string& where, std::string msg) const {
    return makeError(ErrorKind::Format, Loc{file_, 0, 0, where}, std::move(msg));
  }
  bool validBuffer(int32_t b) const { return b >= 0 && size_t(b) < out_.buffers.size(); }

  static std::optional<Target> readTarget(fbp::Target t) {
    switch (t) {
      case fbp::Target::spirv: return Target::Spirv;
      case fbp::Target::ptx: return Target::Ptx;
      case fbp::Target::hsaco: return Target::Hsaco;
    }
    return std::nullopt;
  }

  std::optional<Type> readType(fbg::DType dt, const flatbuffers::Vector<int64_t>* shape) const {
    int d = int(dt);
    if (d < 0 || d > int(DType::Bool)) return std::nullopt;
    Type t{DType(d), copyVector(shape)};
    for (int64_t n : t.shape)
      if (n <= 0 || n > (int64_t(1) << 40)) return std::nullopt;
    return t;
  }

  // Element count times element size, or -1 when it would not fit 2^62.
  static int64_t bytesOf(const Type& t) {
    int64_t n = dtypeBytes(t.dtype);
    for (int64_t d : t.shape) {
      if (n > (int64_t(1) << 62) / d) return -1;
      n *= d;
    }
    return n;
  }

  Status readBuffer(const fbp::Buffer& b, size_t i) {
    std::string where = item("buffer", i);
    int role = int(b.role());
    if (role < 0 || role > int(Role::View)) return fail(where, "unknown buffer role " + str(role));
    auto type = readType(b.dtype(), b.shape());
    if (!type) return fail(where, "buffer '" + b.name()->str() + "' has an invalid type");
    out_.buffers.push_back(Buffer{b.name()->str(), Role(role), *type, b.value(), b.offset(), b.bytes(), b.alias(),
                                  b.lo(), b.hi(), b.first(), b.last()});
    return ok();
  }

  Status checkBuffer(size_t i) const {
    const Buffer& b = out_.buffers[i];
    std::string where = item("buffer", i), name = "buffer '" + b.name + "'";
    int64_t neqns = int64_t(out_.source.eqns.size());
    if (bytesOf(b.type) < 0) return fail(where, name + " has type " + b.type.str() + ", too large for any device");
    if (b.bytes != bytesOf(b.type))
      return fail(where, name + " has " + str(b.bytes) + " bytes but its type " + b.type.str() + " needs " +
                             str(bytesOf(b.type)));
    if (b.value < -1 || b.value >= int32_t(out_.source.values.size()))
      return fail(where, name + " names value " + str(b.value) + ", which the source graph does not have");
    if (b.value < 0 && b.role != Role::Scratch) return fail(where, name + " holds no value");
    if ((b.role == Role::View) != (b.alias >= 0))
      return fail(where, b.role == Role::View ? name + " is a view of no buffer" : name + " is not a view but has an alias");
    if (b.role == Role::View) {
      if (!validBuffer(b.alias) || out_.buffers[size_t(b.alias)].role == Role::View)
        return fail(where, name + " is a view of buffer " + str(b.alias) + ", which is not a base buffer");
      const Buffer& base = out_.buffers[size_t(b.alias)];
      if (b.bytes > base.bytes || b.offset != (base.inArena() ? base.offset : 0))
        return fail(where, name + " does not lie within its base '" + base.name + "'");
    }
    if (b.inArena() || (b.role == Role::View && out_.buffers[size_t(b.alias)].inArena())) {
      if (b.first < 0 || b.first > b.last || b.last >= neqns)
        return fail(where, name + " has lifetime " + str(b.first) + ".." + str(b.last) + " outside the graph's " +
                               str(neqns) + " eqns");
    }
    if (b.inArena()) {
      if (b.offset < 0 || b.offset % kArenaAlign != 0)
        return fail(where, name + " has arena offset " + str(b.offset) + ", not a multiple of " + str(kArenaAlign));
      if (b.offset > out_.arenaBytes - b.bytes)
        return fail(where, name + " ends at " + str(b.offset + b.bytes) + ", past the arena's " +
                               str(out_.arenaBytes) + " bytes");
    }
    if (b.role == Role::Slot && b.lo > b.hi)
      return fail(where, name + " has an empty declared range [" + str(b.lo) + ", " + str(b.hi) + "]");
    return ok();
  }

  // No two arena buffers may share bytes while both are live.
  Status checkArena() const {
    std::vector<size_t> order;
    for (size_t i = 0; i < out_.buffers.size(); ++i)
      if (out_.buffers[i].inArena()) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return out_.buffers[a].offset != out_.buffers[b].offset ? out_.buffers[a].offset < out_.buffers[b].offset : a < b;
    });
    for (size_t i = 0; i < order.size(); ++i) {
      const Buffer& a = out_.buffers[order[i]];
      for (size_t j = i + 1; j < order.size(); ++j) {
        const Buffer& b = out_.buffers[order[j]];
        if (b.offset >= a.offset + a.bytes) break;
        if (a.first <= b.last && b.first <= a.last)
          return fail(item("buffer", std::max(order[i], order[j])),
                      "buffers '" + a.name + "' and '" + b.name + "' share arena bytes while both are live");
      }
    }
    return ok();
  }


  Status readTypes(const flatbuffers::Vector<flatbuffers::Offset<fbp::TensorType>>* ts, std::vector<Type>& out,
                   const std::string& where) const {
    if (!ts) return ok();
    for (const fbp::TensorType* t : *ts) {
      auto type = readType(t->dtype(), t->shape());
      if (!type) return fail(where, "the request has an invalid operand or result type");
      out.push_back(*type);
    }
    return ok();
  }

  Status readKernel(const fbp::Kernel& k, size_t i) {
    std::string where = item("kernel", i);
    auto target = readTarget(k.target());
    if (!target) return fail(where, "unknown target " + str(int(k.target())));
    if (*target != out_.device.target)
      return fail(where, std::string("kernel for ") + targetName(*target) + " in a plan for " +
                             targetName(out_.device.target));
    const fbp::Request& r = *k.request();
    auto op = parseOp(r.op()->str());
    if (!op) return fail(where, "unknown op '" + r.op()->str() + "'");
    Kernel out;
    out.target = *target;
    out.entry = k.entry()->str();
    if (out.entry.empty()) return fail(where, "the kernel has no entry point name");
    out.blob = copyVector(k.blob());
    out.workgroupSize = k.workgroup_size();
    out.workgroupMemory = k.workgroup_memory();
    out.request.op = *op;
    if (auto s = readTypes(r.operands(), out.request.operands, where); !s) return s;
    if (auto s = readTypes(r.results(), out.request.results, where); !s) return s;
    if (r.attrs())
      for (const fbg::Attr* a : *r.attrs()) {
        auto v = readAttr(*a);
        if (!v) return fail(where, "attribute '" + a->name()->str() + "' has an unknown kind");
        out.request.attrs.push_back(Attr{a->name()->str(), *v});
      }
    const fbp::Schedule& s = *r.schedule();
    out.request.schedule = Schedule{s.kind()->str(), s.lanes(),    s.splits(),  s.workgroup_size(), s.workgroup_memory(),
                                    s.k_lanes(),     s.unroll(),   s.vector(),    s.tile_m(),         s.tile_n(),
                                    s.tile_k(),      s.thread_m(), s.thread_n(),
                                    s.matrix() ? s.matrix()->str() : ""};
    out.request.text = r.text()->str();
    if (out.workgroupSize < 1 || out.workgroupMemory < 0)
      return fail(where, "workgroup size " + str(out.workgroupSize) + " or workgroup memory " +
                             str(out.workgroupMemory) + " is not possible");
    LaunchLimits limits = launchLimits(out.target);
    if (limits.workgroupSize > 0 && out.workgroupSize > limits.workgroupSize)
      return fail(where, "workgroup size " + str(out.workgroupSize) + " is more than " + targetName(out.target) +
                             " can launch (" + str(limits.workgroupSize) + ")");
    // An empty blob is a plan planned but not generated (tests write such
    // plans); the Session refuses to build it.
    BlobFacts facts;
    if (!out.blob.empty()) {
      auto f = checkKernelBlob(out.target, out.blob, out.entry, out_.device.arch);
      if (!f) return fail(where, "kernel '" + out.entry + "': " + f.error().message);
      facts = *f;
      // Then SPIRV-Tools' validator, where its plugin is found.
      if (out.target == Target::Spirv)
        if (auto v = validateSpirv(out.blob); !v) {
          if (v.error().kind != ErrorKind::Format) return v.error();
          return fail(where, "kernel '" + out.entry + "': " + v.error().message);
        }
    }
    if (facts.workgroupSize >= 0 && facts.workgroupSize != out.workgroupSize)
      return fail(where, "kernel '" + out.entry + "' runs " + str(facts.workgroupSize) +
                             " threads a workgroup in its code, " + str(out.workgroupSize) + " in the plan");
    out.waitsForPrevious = facts.waitsForPrevious;
    facts_.push_back(facts);
    out_.kernels.push_back(std::move(out));
    return ok();
  }

  // Every dispatch of a kernel binds as many buffers as the kernel's code
  // takes, or where the code does not say, as its first dispatch binds (a
  // backend builds the kernel once, for one binding count).
  Status checkBindingCounts() const {
    std::vector<int64_t> want(out_.kernels.size()), from(out_.kernels.size(), -1);
    for (size_t k = 0; k < want.size(); ++k) want[k] = facts_[k].bindings;
    for (size_t i = 0; i < out_.dispatches.size(); ++i) {
      const Dispatch& d = out_.dispatches[i];
      size_t k = size_t(d.kernel);
      int64_t n = int64_t(d.bindings.size());
      if (want[k] < 0) want[k] = n, from[k] = int64_t(i);
      if (want[k] != n)
        return fail(item("dispatch", i), "binds " + str(n) + " buffers, kernel '" + out_.kernels[k].entry + "' takes " +
                                             str(want[k]) +
                                             (from[k] < 0 ? " in its code" : " (as dispatch " + str(from[k]) + " binds it)"));
    }
    return ok();
  }

  Status readDispatch(const fbp::Dispatch& d, size_t i) {
    std::string where = item("dispatch", i);
    Dispatch out;
    out.kernel = d.kernel();
    out.eqn = d.eqn();
    if (out.kernel < 0 || size_t(out.kernel) >= out_.kernels.size())
      return fail(where, "kernel index " + str(out.kernel) + " is out of range (the plan has " +
                             str(int64_t(out_.kernels.size())) + " kernels)");
    if (out.eqn < 0 || size_t(out.eqn) >= out_.source.eqns.size())
      return fail(where, "eqn index " + str(out.eqn) + " is out of range (the graph has " +
                             str(int64_t(out_.source.eqns.size())) + " eqns)");
    std::vector<int64_t> grid = copyVector(d.grid());
    if (grid.size() != 3) return fail(where, "the grid has " + str(int64_t(grid.size())) + " dimensions, not 3");
    const Kernel& k = out_.kernels[size_t(out.kernel)];
    LaunchLimits limits = launchLimits(k.target);
    for (int a = 0; a < 3; ++a) {
      int64_t n = grid[size_t(a)];
      if (n < 1) return fail(where, "grid dimension " + str(n) + " is not positive");
      int64_t items = limits.gridInItems && a == 0 ? k.workgroupSize : 1;
      if (n > limits.grid[a] / items)
        return fail(where, std::string("grid ") + "xyz"[a] + " of " + str(n) + " workgroups" +
                               (items > 1 ? " of " + str(items) : "") + " is more than " + targetName(k.target) +
                               " can launch (" + str(limits.grid[a]) + (items > 1 ? " work-items)" : ")"));
      out.grid[a] = n;
    }
    out.bindings = copyVector(d.bindings());
    for (int32_t b : out.bindings)
      if (!validBuffer(b)) return fail(where, "binding " + str(b) + " names no buffer");
    out.reads = d.reads();
    if (out.reads < 0 || size_t(out.reads) > out.bindings.size())
      return fail(where, str(out.reads) + " reads among " + str(int64_t(out.bindings.size())) + " bindings");
    // What a dispatch writes lives per step or per run: never a parameter
    // the caller binds (a weight would stay changed for every later step).
    for (size_t j = size_t(out.reads); j < out.bindings.size(); ++j) {
      const Buffer& b = out_.buffers[size_t(out.bindings[j])];
      const Buffer& base = b.role == Role::View ? out_.buffers[size_t(b.alias)] : b;
      if (base.role == Role::Input || base.role == Role::Weight || base.role == Role::Slot)
        return fail(where, "writes " + std::string(roleName(base.role)) + " '" + base.name + "', which the caller binds");
    }
    out.params = copyVector(d.params());
    out_.dispatches.push_back(std::move(out));
    return ok();
  }

  const Buffer& baseOf(int32_t b) const {
    const Buffer& x = out_.buffers[size_t(b)];
    return x.role == Role::View ? out_.buffers[size_t(x.alias)] : x;
  }
  int32_t baseIndex(int32_t b) const {
    return out_.buffers[size_t(b)].role == Role::View ? out_.buffers[size_t(b)].alias : b;
  }
  std::string bufferStr(int32_t b) const {
    const Buffer& x = out_.buffers[size_t(b)];
    return "buffer " + str(b) + " '" + x.name + "' (" + roleName(x.role) + " " + x.type.str() + ")";
  }

  // A buffer that holds a value of the source graph has the value's type,
  // and a parameter's buffer (what the caller binds) is that parameter's.
  Status checkBufferValues() const {
    const Graph& g = out_.source;
    for (size_t i = 0; i < out_.buffers.size(); ++i) {
      const Buffer& b = out_.buffers[i];
      if (b.value < 0) continue;
      const Value& v = g.value(b.value);
      if (b.type != v.type)
        return fail(item("buffer", i), "buffer '" + b.name + "' is " + b.type.str() + " but the value it holds, %" +
                                           v.name + ", is " + v.type.str() + " in the source graph");
      Storage want = b.role == Role::Input    ? Storage::Input
                     : b.role == Role::Weight ? Storage::Weight
                     : b.role == Role::State  ? Storage::State
                     : b.role == Role::Slot   ? Storage::Slot
                                              : Storage::Result;
      bool param = want != Storage::Result;
      if (param ? v.storage != want : (b.role == Role::Temp || b.role == Role::View) && v.storage != Storage::Result)
        return fail(item("buffer", i), std::string(roleName(b.role)) + " buffer '" + b.name + "' holds %" + v.name +
                                           ", a " + storageName(v.storage) + " of the source graph");
    }
    return ok();
  }

  // Floats of scratch a split kernel writes (its partials) or reads (its
  // combine), from its request: the planner's own sizes (planner.cpp).
  // 0: the kernel takes no scratch.
  static int64_t scratchFloats(const Request& r) {
    int64_t s = r.schedule.splits;
    if (s < 2 || s > (int64_t(1) << 20)) return 0;
    if (r.op == Op::MatMul) {
      int64_t n = 0;
      for (const Type& t : r.results) n += numel(t.shape);
      return s * n;
    }
    if (r.op == Op::Attention && !r.operands.empty() && !r.results.empty() && r.operands[0].rank() == 4 &&
        r.results[0].rank() == 4)
      return r.operands[0].shape[0] * r.operands[0].shape[1] * s * (r.results[0].shape[3] + 2);
    return 0;
  }

  // A dispatch binds, in order, one buffer of each operand type of its
  // kernel's request, then one of each result type: the extents and dtypes
  // the kernel was generated for. A split kernel's partials write one
  // scratch in place of its results, and its combine reads that scratch in
  // place of its operands. Its kernel computes the op of the eqn it names.
  Status checkRequest(size_t i) const {
    const Dispatch& d = out_.dispatches[i];
    const Kernel& k = out_.kernels[size_t(d.kernel)];
    const Request& r = k.request;
    const Graph& g = out_.source;
    std::string where = item("dispatch", i);
    if (g.eqns[size_t(d.eqn)].op != r.op)
      return fail(where, "runs kernel '" + k.entry + "' (" + opName(r.op) + ") for eqn " + str(d.eqn) + ", which is " +
                             opName(g.eqns[size_t(d.eqn)].op));
    size_t reads = size_t(d.reads), writes = d.bindings.size() - reads;
    auto isScratch = [&](size_t j) { return out_.buffers[size_t(d.bindings[j])].role == Role::Scratch; };
    bool partials = writes == 1 && isScratch(reads), combine = reads == 1 && isScratch(0);
    std::vector<const Type*> want;
    if (!combine)
      for (const Type& t : r.operands) want.push_back(&t);
    if (!partials)
      for (const Type& t : r.results) want.push_back(&t);
    size_t wantReads = combine ? 1 : r.operands.size(), wantWrites = partials ? 1 : r.results.size();
    if (reads != wantReads || writes != wantWrites)
      return fail(where, "reads " + str(int64_t(reads)) + " and writes " + str(int64_t(writes)) + " buffers, kernel '" +
                             k.entry + "' was generated for " + str(int64_t(wantReads)) + " operands and " +
                             str(int64_t(wantWrites)) + " results");
    for (size_t j = 0, w = 0; j < d.bindings.size(); ++j) {
      const Buffer& b = out_.buffers[size_t(d.bindings[j])];
      bool scratch = (partials && j == reads) || (combine && j == 0);
      if (scratch) {
        int64_t need = scratchFloats(r);
        if (need == 0 || b.type.dtype != DType::F32 || numel(b.type.shape) < need)
          return fail(where, "binding " + str(int64_t(j)) + ": " + bufferStr(d.bindings[j]) + " as the scratch of kernel '" +
                                 k.entry + "', which " +
                                 (need == 0 ? std::string("takes none") : "needs f32[" + str(need) + "]"));
        continue;
      }
      if (b.role == Role::Scratch)
        return fail(where, "binding " + str(int64_t(j)) + ": " + bufferStr(d.bindings[j]) +
                               " where kernel '" + k.entry + "' takes no scratch");
      const Type& t = *want[w++];
      if (b.type != t)
        return fail(where, "binding " + str(int64_t(j)) + ": " + bufferStr(d.bindings[j]) + " where kernel '" + k.entry +
                               "' takes its " + (j < reads ? "operand " + str(int64_t(j)) : "result " + str(int64_t(j - reads))) +
                               " as " + t.str());
    }
    return ok();
  }

  // A kernel's request fixes its grid (the planner derives it from the
  // request's types and schedule and the device), so every dispatch of one
  // kernel launches the same grid.
  Status checkGrids() const {
    std::vector<int64_t> first(out_.kernels.size(), -1);
    for (size_t i = 0; i < out_.dispatches.size(); ++i) {
      const Dispatch& d = out_.dispatches[i];
      int64_t& f = first[size_t(d.kernel)];
      if (f < 0) {
        f = int64_t(i);
        continue;
      }
      const Dispatch& o = out_.dispatches[size_t(f)];
      if (!std::equal(d.grid, d.grid + 3, o.grid))
        return fail(item("dispatch", i), "launches kernel '" + out_.kernels[size_t(d.kernel)].entry + "' on a grid of " +
                                             str(d.grid[0]) + " x " + str(d.grid[1]) + " x " + str(d.grid[2]) +
                                             ", dispatch " + str(f) + " on " + str(o.grid[0]) + " x " + str(o.grid[1]) +
                                             " x " + str(o.grid[2]) + ": one request has one grid");
    }
    return ok();
  }

  // In dispatch order (the graph's eqn order), nothing is read before it is
  // written: a temporary, scratch, output or witness is read only after a
  // dispatch wrote it (a dropped or moved dispatch would leave stale arena
  // bytes there), an arena buffer is bound only within its lifetime (outside
  // it its bytes belong to another), and every output and witness, and every
  // state the graph gives a new value, is written.
  Status checkDataflow() const {
    const Graph& g = out_.source;
    std::vector<bool> written(out_.buffers.size(), false);
    int32_t lastEqn = 0;
    for (size_t i = 0; i < out_.dispatches.size(); ++i) {
      const Dispatch& d = out_.dispatches[i];
      std::string where = item("dispatch", i);
      if (d.eqn < lastEqn)
        return fail(where, "runs eqn " + str(d.eqn) + " after a dispatch of eqn " + str(lastEqn) +
                               ": dispatches follow the graph's order");
      lastEqn = d.eqn;
      for (size_t j = 0; j < d.bindings.size(); ++j) {
        int32_t bi = baseIndex(d.bindings[j]);
        const Buffer& b = out_.buffers[size_t(bi)];
        const Buffer& bound = out_.buffers[size_t(d.bindings[j])];
        if (b.inArena() && (d.eqn < bound.first || d.eqn > bound.last))
          return fail(where, "binding " + str(int64_t(j)) + ": " + bufferStr(d.bindings[j]) + " lives in eqns " +
                                 str(bound.first) + ".." + str(bound.last) + ", not at eqn " + str(d.eqn));
        bool initial = b.role == Role::Input || b.role == Role::Weight || b.role == Role::Slot || b.role == Role::State;
        if (j < size_t(d.reads) && !initial && !written[size_t(bi)])
          return fail(where, "binding " + str(int64_t(j)) + ": reads " + bufferStr(d.bindings[j]) +
                                 ", which no dispatch before it writes");
      }
      for (size_t j = size_t(d.reads); j < d.bindings.size(); ++j) written[size_t(baseIndex(d.bindings[j]))] = true;
    }
    for (size_t i = 0; i < out_.buffers.size(); ++i) {
      const Buffer& b = out_.buffers[i];
      bool must = b.role == Role::Output || b.role == Role::Validation;
      if (b.role == Role::State)
        for (const StateOut& so : g.stateOuts) must |= so.state == b.value;
      if (must && !written[i])
        return fail(item("buffer", i), std::string(roleName(b.role)) + " '" + b.name + "' is written by no dispatch");
    }
    return ok();
  }

  // A slot's words index memory where it is a paged attention's read map
  // (rows of the key and value pools) or a Gather's indices: its declared
  // range, which the Session holds every bound word to, lies inside what
  // those kernels' buffers really hold.
  Status checkIndexSlots() const {
    auto slotRange = [&](int32_t buffer) -> const Slot* {
      for (const Slot& s : out_.slots)
        if (s.buffer == buffer) return &s;
      return nullptr;
    };
    auto sym = [](const Attrs& attrs, std::string_view name) -> std::string {
      for (const Attr& a : attrs)
        if (a.name == name)
          if (const auto* s = std::get_if<std::string>(&a.value)) return *s;
      return "";
    };
    for (size_t i = 0; i < out_.dispatches.size(); ++i) {
      const Dispatch& d = out_.dispatches[i];
      const Request& r = out_.kernels[size_t(d.kernel)].request;
      size_t index = 0;
      int64_t bound = 0, lowest = 0;
      std::string what;
      const std::string& entry = out_.kernels[size_t(d.kernel)].entry;
      if (r.op == Op::Attention && sym(r.attrs, "key") == "paged" && d.reads >= 4 && r.operands.size() >= 4) {
        index = 3;
        bound = std::min(r.operands[1].shape.at(0), r.operands[2].shape.at(0));
        what = "the read map of paged attention kernel '" + entry + "' into pools of " + str(bound) + " slots";
      } else if (r.op == Op::ScatterUpdate && d.reads >= 2 && r.operands.size() == 3 && r.operands[0].rank() > 0) {
        index = 1;
        lowest = -1;  // a write map's -1 writes nothing
        bound = r.operands[0].shape[0];
        what = "the write map of scatter kernel '" + entry + "' into a pool of " + str(bound) + " slots";
      } else if (int64_t n = gatherExtent(r); n > 0 && d.reads >= 2) {
        index = 1;
        bound = n;
        what = "the indices of gather kernel '" + entry + "' into an axis of " + str(bound);
      } else {
        continue;
      }
      int32_t b = d.bindings[index];
      if (out_.buffers[size_t(b)].role == Role::View) b = out_.buffers[size_t(b)].alias;
      const Slot* s = slotRange(b);
      if (!s) continue;
      if (s->lo < lowest || s->hi >= bound)
        return fail(item("dispatch", i), "slot '" + s->name + "' (declared [" + str(s->lo) + ", " + str(s->hi) +
                                             "]) is " + what + ": its range must lie in [" + str(lowest) + ", " +
                                             str(bound - 1) + "]");
    }
    return ok();
  }

  Status readExports(const flatbuffers::Vector<flatbuffers::Offset<fbp::Export>>* xs,
                     const std::vector<poot::Export>& declared, std::vector<Export>& out, const char* what) const {
    // Each export is one of the source graph's outputs (or witnesses), once,
    // in a buffer of its type: what the caller reads back, and what `poot
    // run --check` compares with the oracle, has the graph's size.
    const Graph& g = out_.source;
    size_t count = xs ? xs->size() : 0;
    if (count != declared.size())
      return fail(what, "the plan exports " + str(int64_t(count)) + " " + what + "s, the source graph " +
                            str(int64_t(declared.size())));
    for (flatbuffers::uoffset_t i = 0; i < count; ++i) {
      const fbp::Export& x = *xs->Get(i);
      const std::string name = x.name()->str();
      if (!validBuffer(x.buffer())) return fail(item(what, i), std::string(what) + " '" + name + "' names no buffer");
      if (g.value(declared[i].value).name != name)
        return fail(item(what, i), std::string(what) + " '" + name + "' is not the source graph's " + what + " " +
                                       str(int64_t(i)) + " ('" + g.value(declared[i].value).name + "')");
      const Type& want = g.type(declared[i].value);
      const Buffer& b = out_.buffers[size_t(x.buffer())];
      if (b.type != want)
        return fail(item(what, i), std::string(what) + " '" + name + "' is " + want.str() +
                                       " in the source graph, but its buffer '" + b.name + "' holds " + b.type.str());
      out.push_back(Export{name, x.buffer()});
    }
    return ok();
  }
};

}  // namespace

int64_t gatherExtent(const Request& r) {
  if (r.op != Op::Gather || r.operands.size() != 2 || r.operands[0].rank() == 0) return 0;
  int64_t axis = 0;
  for (const Attr& a : r.attrs)
    if (a.name == "axis")
      if (const auto* v = std::get_if<int64_t>(&a.value)) axis = *v;
  if (axis < 0) axis += r.operands[0].rank();
  if (axis < 0 || axis >= r.operands[0].rank()) return 0;
  return r.operands[0].shape[size_t(axis)];
}

const char* roleName(Role r) {
  static const char* names[] = {"input", "weight", "state", "slot", "output", "validation", "temp", "scratch", "view"};
  return names[int(r)];
}

const char* targetName(Target t) {
  static const char* names[] = {"spirv", "ptx", "hsaco"};
  return names[int(t)];
}

bool isPlanFile(const std::string& bytes) {
  if (bytes.size() < 8 || !fbp::PlanBufferHasIdentifier(bytes.data())) return false;
  uint32_t root = flatbuffers::ReadScalar<uint32_t>(bytes.data());
  return root >= 8 && root < bytes.size();
}

Expected<PlanFile> readPlanFile(const std::string& bytes, const std::string& file) {
  auto fail = [&](std::string msg) { return makeError(ErrorKind::Format, Loc{file}, std::move(msg)); };
  if (bytes.size() < 8)
    return fail("not a plan file: " + std::to_string(bytes.size()) + " bytes is too short (truncated?)");
  if (!fbp::PlanBufferHasIdentifier(bytes.data())) {
    std::string id;
    for (char c : bytes.substr(4, 4)) id += (c >= 0x20 && c < 0x7f) ? c : '?';
    return fail("not a plan file: the file identifier is '" + id + "', expected '" + fbp::PlanIdentifier() + "'");
  }
  if (!isPlanFile(bytes)) return fail("truncated or corrupted plan file (the root offset is outside the file)");
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  const fbp::Plan* root = fbp::GetPlan(data);
  const auto* table = flatbuffers::GetRoot<flatbuffers::Table>(data);
  {
    flatbuffers::Verifier head(data, bytes.size());
    if (!table->VerifyTableStart(head) || !table->VerifyField<uint32_t>(head, fbp::Plan::VT_VERSION, 4) ||
        !table->VerifyField<uint64_t>(head, fbp::Plan::VT_CHECKSUM, 8))
      return fail("truncated or corrupted plan file (the root table does not verify)");
  }
  if (root->version() != kPlanVersion)
    return fail("plan file version " + std::to_string(root->version()) + " is not supported (this runtime reads version " +
                std::to_string(kPlanVersion) + ")");
  flatbuffers::voffset_t field = table->GetOptionalFieldOffset(fbp::Plan::VT_CHECKSUM);
  if (field == 0) return fail("truncated or corrupted plan file (it records no checksum)");
  size_t at = size_t(reinterpret_cast<const uint8_t*>(table) - data) + field;
  uint64_t recorded = root->checksum(), actual = fnv1aMasked(bytes, at, 8);
  if (actual != recorded)
    return fail("truncated or corrupted plan file (checksum mismatch: the file records " + hex64(recorded) +
                ", its bytes hash to " + hex64(actual) + ")");
  flatbuffers::Verifier verifier(data, bytes.size());
  if (!fbp::VerifyPlanBuffer(verifier)) return fail("truncated or corrupted plan file (the FlatBuffer does not verify)");
  return Reader(*root, file).run();
}

Expected<PlanFile> loadPlanFile(const std::string& path, const TrustedKeys& trusted) {
  auto bytes = readFile(path);
  if (!bytes) return bytes.error();
  if (!trusted.empty())
    if (Status s = verifyPlan(*bytes, path, signaturePath(path), trusted); !s) return s.error();
  return readPlanFile(*bytes, path);
}

}  // namespace poot::rt

// How a plan is serialized: one FlatBufferBuilder pass over the plan's vectors
// in their own order (buffers, kernels, dispatches, then the graph's slots,
// outputs and witnesses), so the bytes follow from the plan alone. Value
// indices are renumbered the way writeBinaryGraph numbers the embedded graph
// (parameters, then each eqn's results), and the graph goes in as its .pgb
// bytes, 8-byte aligned inside the plan so it can also be read in place.
// The checksum field is written with a placeholder (a field equal to its
// default would be left out) and sealed once the bytes are final.
#include "plan/plan_file.h"

#include <cstring>

#include "ir/binary.h"
#include "ir/graph_fb.h"
#include "ir/hash.h"
#include "ir/io.h"
#include "plan/buffers.h"
#include "plan/request.h"
#include "schemas/plan_generated.h"

namespace poot {

namespace {

namespace fbg = ::poot::fb;
namespace fbp = ::poot::pfb;

using Builder = flatbuffers::FlatBufferBuilder;

fbp::Target toFb(Target t) {
  switch (t) {
    case Target::Spirv: return fbp::Target::spirv;
    case Target::Ptx: return fbp::Target::ptx;
    case Target::Hsaco: return fbp::Target::hsaco;
  }
  return fbp::Target::spirv;
}

fbp::BufferRole toFb(BufferRole r) {
  switch (r) {
    case BufferRole::Input: return fbp::BufferRole::input;
    case BufferRole::Weight: return fbp::BufferRole::weight;
    case BufferRole::State: return fbp::BufferRole::state;
    case BufferRole::Slot: return fbp::BufferRole::slot;
    case BufferRole::Output: return fbp::BufferRole::output;
    case BufferRole::Validation: return fbp::BufferRole::validation;
    case BufferRole::Temp: return fbp::BufferRole::temp;
    case BufferRole::Scratch: return fbp::BufferRole::scratch;
    case BufferRole::View: return fbp::BufferRole::view;
  }
  return fbp::BufferRole::temp;
}

fbg::DType toFb(DType t) { return fbg::DType(int(t)); }


flatbuffers::Offset<fbp::TensorType> writeType(Builder& b, const Type& t) {
  return fbp::CreateTensorType(b, toFb(t.dtype), b.CreateVector(t.shape));
}

flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fbp::TensorType>>> writeTypes(Builder& b,
                                                                                          const std::vector<Type>& ts) {
  std::vector<flatbuffers::Offset<fbp::TensorType>> out;
  for (const Type& t : ts) out.push_back(writeType(b, t));
  return b.CreateVector(out);
}

flatbuffers::Offset<fbp::Kernel> writeKernel(Builder& b, const Kernel& k, Target target) {
  const KernelRequest& r = k.request;
  std::vector<flatbuffers::Offset<fbg::Attr>> attrs;
  for (const Attr& a : r.attrs) attrs.push_back(writeAttr(b, a));
  const Schedule& s = r.schedule;
  auto schedule = fbp::CreateSchedule(b, b.CreateString(s.kind), s.lanes, s.splits, s.workgroupSize, s.workgroupMemory,
                                      s.kLanes, s.unroll, s.vector, s.tileM, s.tileN, s.tileK, s.threadM, s.threadN,
                                      s.matrix.empty() ? flatbuffers::Offset<flatbuffers::String>() : b.CreateString(s.matrix));
  auto request = fbp::CreateRequest(b, b.CreateString(opName(r.op)), writeTypes(b, r.operands),
                                    writeTypes(b, r.results), b.CreateVector(attrs), schedule,
                                    b.CreateString(printRequest(r)));
  return fbp::CreateKernel(b, toFb(target), b.CreateString(k.entry), b.CreateVector(k.blob), s.workgroupSize,
                           s.workgroupMemory, request);
}

}  // namespace

std::string writePlan(const Plan& p) {
  const Graph& g = p.source;
  // The embedded graph's numbering (see writeBinaryGraph).
  std::vector<int32_t> index(g.values.size(), -1);
  int32_t next = 0;
  for (ValueId v : g.params) index[size_t(v)] = next++;
  for (const Eqn& e : g.eqns)
    for (ValueId r : e.results) index[size_t(r)] = next++;
  auto remap = [&](ValueId v) { return v >= 0 && size_t(v) < index.size() ? index[size_t(v)] : -1; };

  Builder b(1 << 16);
  std::string graph = writeBinaryGraph(g);
  b.ForceVectorAlignment(graph.size(), 1, 8);
  auto source = b.CreateVector(reinterpret_cast<const uint8_t*>(graph.data()), graph.size());

  std::vector<flatbuffers::Offset<fbp::Buffer>> buffers;
  for (const Buffer& x : p.buffers)
    buffers.push_back(fbp::CreateBuffer(b, b.CreateString(x.name), toFb(x.role), toFb(x.type.dtype),
                                        b.CreateVector(x.type.shape), remap(x.value), x.offset, x.bytes, x.aliasOf,
                                        x.lo, x.hi, x.first, x.last));

  std::vector<flatbuffers::Offset<fbp::Kernel>> kernels;
  for (const Kernel& k : p.kernels) kernels.push_back(writeKernel(b, k, p.target));

  std::vector<flatbuffers::Offset<fbp::Dispatch>> dispatches;
  for (const Dispatch& d : p.dispatches) {
    std::vector<int64_t> grid(d.grid, d.grid + 3);
    int32_t reads = int32_t(std::min(d.reads.size(), d.bindings.size()));
    dispatches.push_back(fbp::CreateDispatch(b, d.kernel, d.eqn, b.CreateVector(grid), b.CreateVector(d.bindings),
                                             reads, b.CreateVector(d.params)));
  }

  std::vector<int32_t> held = valueBuffers(p);
  auto bufferOf = [&](ValueId v) { return v >= 0 && size_t(v) < held.size() ? held[size_t(v)] : -1; };
  std::vector<flatbuffers::Offset<fbp::Slot>> slots;
  for (ValueId v : g.params)
    if (g.value(v).storage == Storage::Slot)
      slots.push_back(fbp::CreateSlot(b, b.CreateString(g.value(v).name), bufferOf(v), g.value(v).lo, g.value(v).hi));
  auto exports = [&](const std::vector<Export>& xs) {
    std::vector<flatbuffers::Offset<fbp::Export>> out;
    for (const Export& x : xs) out.push_back(fbp::CreateExport(b, b.CreateString(g.value(x.value).name), bufferOf(x.value)));
    return b.CreateVector(out);
  };
  auto outputs = exports(g.outputs);
  auto validations = exports(g.validations);

  auto device = fbp::CreateDevice(b, b.CreateString(p.deviceName), p.deviceHash, toFb(p.target),
                                  b.CreateString(p.deviceArch), p.memoryBandwidth);
  auto root = fbp::CreatePlan(b, kPlanFileVersion, device, b.CreateString(p.key), p.arenaBytes, b.CreateVector(buffers),
                              b.CreateVector(kernels), b.CreateVector(dispatches), b.CreateVector(slots), outputs,
                              validations, source, /*checksum placeholder=*/~uint64_t(0));
  fbp::FinishPlanBuffer(b, root);
  std::string bytes(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
  sealPlanChecksum(bytes);
  return bytes;
}

bool sealPlanChecksum(std::string& bytes) {
  if (bytes.size() < 8) return false;
  uint32_t root = flatbuffers::ReadScalar<uint32_t>(bytes.data());
  if (root > bytes.size() - 4) return false;
  const auto* table = flatbuffers::GetRoot<flatbuffers::Table>(bytes.data());
  flatbuffers::Verifier head(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!table->VerifyTableStart(head) || !table->VerifyField<uint64_t>(head, fbp::Plan::VT_CHECKSUM, 8)) return false;
  flatbuffers::voffset_t field = table->GetOptionalFieldOffset(fbp::Plan::VT_CHECKSUM);
  if (field == 0) return false;
  size_t at = size_t(reinterpret_cast<const char*>(table) - bytes.data()) + field;
  uint64_t sum = flatbuffers::EndianScalar(fnv1aMasked(bytes, at, 8));
  std::memcpy(bytes.data() + at, &sum, 8);
  return true;
}

Status writePlanFile(const Plan& p, const std::string& path) { return writeFileAtomic(path, writePlan(p)); }

}  // namespace poot

// FlatBuffer graph reading and writing. The reader runs the FlatBuffers
// verifier first, so a truncated or corrupted file is an error, never a read
// out of bounds; then it rebuilds the Graph record by record, checking every
// index, and leaves the IR rules to the verifier.
#include "ir/binary.h"
#include "ir/graph_fb.h"

#include <cstring>

#include "ir/io.h"
#include "ir/text.h"
#include "schemas/graph_generated.h"

namespace poot {

namespace {

constexpr uint32_t kVersion = 1;


fb::DType toFb(DType t) { return fb::DType(int(t)); }


class Reader {
 public:
  Reader(const fb::Graph& fg, const std::string& file) : fg_(fg), file_(file) {}

  Expected<Graph> run() {
    if (fg_.version() != kVersion)
      return fail("graph", "schema version " + std::to_string(fg_.version()) + " is not supported (expected " +
                               std::to_string(kVersion) + ")");
    g_.name = fg_.name()->str();
    g_.loc = Loc{file_, 0, 0, "graph"};
    size_t nvalues = fg_.values() ? fg_.values()->size() : 0;
    for (size_t i = 0; i < nvalues; ++i) {
      const fb::Value* v = fg_.values()->Get(flatbuffers::uoffset_t(i));
      int dt = int(v->dtype());
      if (dt < 0 || dt > int(DType::Bool)) return fail(item("value", i), "unknown dtype " + std::to_string(dt));
      int st = int(v->storage());
      if (st < 0 || st > int(Storage::Slot)) return fail(item("value", i), "unknown storage " + std::to_string(st));
      Shape shape = copyVector(v->shape());
      g_.values.push_back(Value{v->name()->str(), Type{DType(dt), shape}, Storage(st), v->lo(), v->hi(), -1,
                                Loc{file_, 0, 0, item("value", i)}});
    }
    if (fg_.params())
      for (size_t i = 0; i < fg_.params()->size(); ++i) {
        auto id = index(fg_.params()->Get(flatbuffers::uoffset_t(i)), item("param", i));
        if (!id) return id.error();
        g_.params.push_back(*id);
      }
    size_t neqns = fg_.eqns() ? fg_.eqns()->size() : 0;
    for (size_t i = 0; i < neqns; ++i)
      if (auto s = readEqn(*fg_.eqns()->Get(flatbuffers::uoffset_t(i)), i); !s) return s.error();
    if (auto s = readExports(fg_.outputs(), g_.outputs, "output"); !s) return s.error();
    if (auto s = readExports(fg_.validations(), g_.validations, "validation"); !s) return s.error();
    if (fg_.state_outs())
      for (size_t i = 0; i < fg_.state_outs()->size(); ++i) {
        const fb::StateOut* so = fg_.state_outs()->Get(flatbuffers::uoffset_t(i));
        auto st = index(so->state(), item("state_out", i));
        if (!st) return st.error();
        auto v = index(so->value(), item("state_out", i));
        if (!v) return v.error();
        g_.stateOuts.push_back(StateOut{*st, *v, Loc{file_, 0, 0, item("state_out", i)}});
      }
    return std::move(g_);
  }

 private:
  const fb::Graph& fg_;
  std::string file_;
  Graph g_;

  static std::string item(const char* what, size_t i) { return std::string(what) + " " + std::to_string(i); }
  Error fail(const std::string& where, std::string msg) {
    return makeError(ErrorKind::Format, Loc{file_, 0, 0, where}, std::move(msg));
  }
  Expected<ValueId> index(int32_t v, const std::string& where) {
    if (v < 0 || size_t(v) >= g_.values.size())
      return fail(where, "value index " + std::to_string(v) + " is out of range (the graph has " +
                             std::to_string(g_.values.size()) + " values)");
    return ValueId(v);
  }

  Status readExports(const flatbuffers::Vector<int32_t>* ids, std::vector<Export>& out, const char* what) {
    if (!ids) return ok();
    for (size_t i = 0; i < ids->size(); ++i) {
      auto v = index(ids->Get(flatbuffers::uoffset_t(i)), item(what, i));
      if (!v) return v.error();
      out.push_back(Export{*v, Loc{file_, 0, 0, item(what, i)}});
    }
    return ok();
  }

  Status readEqn(const fb::Eqn& fe, size_t i) {
    std::string where = item("eqn", i);
    auto op = parseOp(fe.op()->str());
    if (!op) return fail(where, "unknown op '" + fe.op()->str() + "'");
    Eqn e{*op, {}, {}, {}, Loc{file_, 0, 0, where}, Loc{file_, 0, 0, where}};
    if (fe.operands())
      for (int32_t v : *fe.operands()) {
        auto id = index(v, where);
        if (!id) return id.error();
        e.operands.push_back(*id);
      }
    if (fe.results())
      for (int32_t v : *fe.results()) {
        auto id = index(v, where);
        if (!id) return id.error();
        Value& r = g_.value(*id);
        if (r.storage != Storage::Result || r.def != -1)
          return fail(where, "value " + std::to_string(v) + " cannot be a result of this eqn");
        r.def = int32_t(g_.eqns.size());
        r.loc = e.loc;
        e.results.push_back(*id);
      }
    if (fe.attrs())
      for (const fb::Attr* a : *fe.attrs()) {
        auto v = readAttr(*a);
        if (!v) return fail(where, "attribute '" + a->name()->str() + "' has an unknown kind");
        e.attrs.push_back(Attr{a->name()->str(), *v});
      }
    sortAttrs(opInfo(*op), e.attrs);
    g_.eqns.push_back(std::move(e));
    return ok();
  }

};

}  // namespace

flatbuffers::Offset<fb::Attr> writeAttr(flatbuffers::FlatBufferBuilder& b, const Attr& a) {
  auto name = b.CreateString(a.name);
  const AttrValue& v = a.value;
  switch (attrKindOf(v)) {
    case AttrKind::Int:
      return fb::CreateAttr(b, name, fb::AttrData::IntAttr, fb::CreateIntAttr(b, std::get<int64_t>(v)).Union());
    case AttrKind::Float:
      return fb::CreateAttr(b, name, fb::AttrData::FloatAttr, fb::CreateFloatAttr(b, std::get<double>(v)).Union());
    case AttrKind::Bool:
      return fb::CreateAttr(b, name, fb::AttrData::BoolAttr, fb::CreateBoolAttr(b, std::get<bool>(v)).Union());
    case AttrKind::Sym:
      return fb::CreateAttr(b, name, fb::AttrData::SymAttr,
                            fb::CreateSymAttr(b, b.CreateString(std::get<std::string>(v))).Union());
    case AttrKind::Ints:
      return fb::CreateAttr(b, name, fb::AttrData::IntsAttr,
                            fb::CreateIntsAttr(b, b.CreateVector(std::get<std::vector<int64_t>>(v))).Union());
    case AttrKind::Floats:
      return fb::CreateAttr(b, name, fb::AttrData::FloatsAttr,
                            fb::CreateFloatsAttr(b, b.CreateVector(std::get<std::vector<double>>(v))).Union());
  }
  return {};
}

std::optional<AttrValue> readAttr(const fb::Attr& a) {
  switch (a.data_type()) {
    case fb::AttrData::IntAttr: return AttrValue(a.data_as_IntAttr()->v());
    case fb::AttrData::FloatAttr: return AttrValue(a.data_as_FloatAttr()->v());
    case fb::AttrData::BoolAttr: return AttrValue(a.data_as_BoolAttr()->v());
    case fb::AttrData::SymAttr: return AttrValue(a.data_as_SymAttr()->v()->str());
    case fb::AttrData::IntsAttr: return AttrValue(copyVector(a.data_as_IntsAttr()->v()));
    case fb::AttrData::FloatsAttr: return AttrValue(copyVector(a.data_as_FloatsAttr()->v()));
    default: return std::nullopt;
  }
}

bool isBinaryGraph(const std::string& bytes) {
  // The identifier alone could be text ("#   PGRF"); a FlatBuffer also starts
  // with the offset of its root table, which lies inside the file.
  if (bytes.size() < 8 || !fb::GraphBufferHasIdentifier(bytes.data())) return false;
  uint32_t root = flatbuffers::ReadScalar<uint32_t>(bytes.data());
  return root >= 8 && root < bytes.size();
}

Expected<Graph> readBinaryGraph(const std::string& bytes, const std::string& file) {
  flatbuffers::Verifier verifier(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!isBinaryGraph(bytes) || !fb::VerifyGraphBuffer(verifier))
    return makeError(ErrorKind::Format, Loc{file}, "not a valid binary graph (truncated or corrupted FlatBuffer)");
  return Reader(*fb::GetGraph(bytes.data()), file).run();
}

std::string writeBinaryGraph(const Graph& g) {
  // Only parameters and results of current eqns are written (a pass may have
  // orphaned values), renumbered densely in that order.
  std::vector<int32_t> index(g.values.size(), -1);
  std::vector<ValueId> order;
  auto keep = [&](ValueId v) { index[size_t(v)] = int32_t(order.size()); order.push_back(v); };
  for (ValueId p : g.params) keep(p);
  for (const Eqn& e : g.eqns)
    for (ValueId r : e.results) keep(r);
  auto remap = [&](const std::vector<ValueId>& ids) {
    std::vector<int32_t> out;
    for (ValueId v : ids) out.push_back(index[size_t(v)]);
    return out;
  };
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fb::Value>> values;
  for (ValueId id : order) {
    const Value& v = g.value(id);
    values.push_back(fb::CreateValue(b, b.CreateString(v.name), toFb(v.type.dtype), b.CreateVector(v.type.shape),
                                     fb::Storage(int(v.storage)), v.lo, v.hi));
  }
  std::vector<flatbuffers::Offset<fb::Eqn>> eqns;
  for (const Eqn& e : g.eqns) {
    std::vector<flatbuffers::Offset<fb::Attr>> attrs;
    for (const Attr& a : e.attrs) attrs.push_back(writeAttr(b, a));
    eqns.push_back(fb::CreateEqn(b, b.CreateString(opName(e.op)), b.CreateVector(remap(e.operands)),
                                 b.CreateVector(remap(e.results)), b.CreateVector(attrs)));
  }
  auto exports = [&](const std::vector<Export>& xs) {
    std::vector<int32_t> out;
    for (const Export& x : xs) out.push_back(index[size_t(x.value)]);
    return b.CreateVector(out);
  };
  std::vector<fb::StateOut> stateOuts;
  for (const StateOut& s : g.stateOuts) stateOuts.emplace_back(index[size_t(s.state)], index[size_t(s.value)]);
  std::vector<int32_t> params(g.params.size());
  for (size_t i = 0; i < params.size(); ++i) params[i] = int32_t(i);
  auto root = fb::CreateGraph(b, kVersion, b.CreateString(g.name), b.CreateVector(values), b.CreateVector(params),
                              b.CreateVector(eqns), exports(g.outputs), b.CreateVectorOfStructs(stateOuts),
                              exports(g.validations));
  fb::FinishGraphBuffer(b, root);
  return std::string(reinterpret_cast<const char*>(b.GetBufferPointer()), b.GetSize());
}

Expected<Graph> loadGraph(const std::string& path) {
  auto bytes = readFile(path);
  if (!bytes) return bytes.error();
  if (bytes->size() >= 8 && bytes->compare(4, 4, "PPLN") == 0)
    return makeError(ErrorKind::Format, {path}, "not a graph: the file is a plan (pootc inspect reads plans)");
  auto g = isBinaryGraph(*bytes) ? readBinaryGraph(*bytes, path) : parseGraph(*bytes, path);
  if (!g) return g.error();
  if (auto s = verify(*g); !s) return s.error();
  return g;
}

}  // namespace poot

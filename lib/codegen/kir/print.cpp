// The KIR printer: the header line, the declarations, then the body, two
// spaces of indent a level. A value instruction prints as
// `%N = opc operands : type`; loads and stores name their buffer bN or shared
// array sN with the index in brackets, variables print as vN, a For as
// `for %N = lo to hi step S {`, an If as `if %c {` with `} else {` only when it
// has an else block. f32 constants print as the shortest text that reads
// back as the same f32 (std::to_chars on the float), as in the graph text.
#include "codegen/kir/print.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cmath>

namespace poot::kir {

namespace {

std::string f32Text(double v) {
  float f = float(v);
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[32];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, f);
  return std::string(buf, p);
}

class Printer {
 public:
  explicit Printer(const Kernel& k) : k_(k) {}

  std::string run() {
    out_ = "kernel " + k_.entry + " workgroup=" + std::to_string(k_.workgroupSize) +
           " grid_x=" + std::to_string(k_.gridX) + " shared_bytes=" + std::to_string(k_.sharedBytes()) + "\n";
    for (size_t i = 0; i < k_.buffers.size(); ++i) {
      const Buffer& b = k_.buffers[i];
      out_ += "  buffer " + std::to_string(i) + " " + b.name + " " + elemName(b.elem) + "[" + std::to_string(b.elems) +
              "] " + (b.written ? "write" : "read") + "\n";
    }
    for (size_t i = 0; i < k_.shared.size(); ++i) {
      const Shared& s = k_.shared[i];
      out_ += "  shared " + std::to_string(i) + " " + s.name + " " + scalarName(s.type) + "[" +
              std::to_string(s.elems) + "]\n";
    }
    for (size_t i = 0; i < k_.vars.size(); ++i)
      out_ += "  var " + std::to_string(i) + " " + scalarName(k_.vars[i]) + "\n";
    block(k_.body, 1);
    return out_;
  }

 private:
  static std::string val(V v) { return "%" + std::to_string(v); }

  std::string args(const Inst& in, size_t from, size_t to = SIZE_MAX) const {
    std::string s;
    for (size_t i = from; i < std::min(to, in.args.size()); ++i) s += (i > from ? ", " : "") + val(in.args[i]);
    return s;
  }

  std::string constant(const Inst& in) const {
    switch (in.type) {
      case Scalar::Bool: return in.imm ? "true" : "false";
      case Scalar::F32: return f32Text(in.fimm);
      default: return std::to_string(in.imm);
    }
  }

  // The text of instruction v after the indent, without nested blocks.
  std::string line(V v, const Inst& in) const {
    std::string ref = "[" + (in.args.empty() ? std::string() : val(in.args[0])) + "]";
    std::string typed = " : " + std::string(scalarName(in.type));
    std::string def = val(v) + " = ";
    switch (in.op) {
      case Opc::Const: return def + "const " + constant(in) + typed;
      case Opc::Load: return def + "load b" + std::to_string(in.ref) + ref + typed;
      case Opc::LoadVec:
        return def + "load.vec" + std::to_string(in.imm) + " b" + std::to_string(in.ref) + ref + typed;
      case Opc::Lane: return def + "lane " + val(in.args.at(0)) + "[" + std::to_string(in.imm) + "]" + typed;
      case Opc::SharedLoad: return def + "shared.load s" + std::to_string(in.ref) + ref + typed;
      case Opc::SharedLoadVec:
        return def + "shared.load.vec" + std::to_string(in.imm) + " s" + std::to_string(in.ref) + ref + typed;
      case Opc::Store: return "store b" + std::to_string(in.ref) + ref + ", " + args(in, 1);
      case Opc::SharedStore: return "shared.store s" + std::to_string(in.ref) + ref + ", " + args(in, 1);
      case Opc::SharedStoreVec:
        return "shared.store.vec" + std::to_string(in.imm) + " s" + std::to_string(in.ref) + ref + ", " + args(in, 1);
      case Opc::GetVar: return def + "get v" + std::to_string(in.ref) + typed;
      case Opc::SetVar: return "set v" + std::to_string(in.ref) + ", " + args(in, 0);
      case Opc::For:
        return "for " + val(v) + " = " + val(in.args.at(0)) + " to " + val(in.args.at(1)) + " step " +
               std::to_string(in.imm) + " {";
      case Opc::If: return "if " + args(in, 0) + " {";
      case Opc::Barrier: return "barrier";
      case Opc::CopyAsync:
        return "copy.async s" + std::to_string(in.imm) + "[" + val(in.args.at(1)) + "] <- b" + std::to_string(in.ref) + ref +
               " if " + val(in.args.at(2));
      case Opc::AsyncCommit: return "async.commit";
      case Opc::AsyncWait: return "async.wait " + std::to_string(in.imm);
      case Opc::ShuffleXor: return def + "shuffle.xor " + args(in, 0) + " ^ " + std::to_string(in.imm) + typed;
      case Opc::Mma: return def + "mma " + matrixShape(MatrixOp(in.ref)).name + " " + args(in, 0) + typed;
      case Opc::MmaShared: {
        auto tile = [&](size_t i) { return "s" + std::to_string(in.imm) + "[" + args(in, i, i + 2) + "]"; };
        return def + "mma.shared " + matrixShape(MatrixOp(in.ref)).name + " " + tile(0) + ", " + tile(2) + ", " +
               args(in, 4) + typed;
      }
      case Opc::MmaSharedB:
        return def + "mma.shared.b " + matrixShape(MatrixOp(in.ref)).name + " (" + args(in, 0, 8) + "), s" +
               std::to_string(in.imm) + "[" + args(in, 8, 11) + "], " + args(in, 11) + typed;
      case Opc::MmaWait: {
        std::string a = args(in, 0);
        return def + "mma.wait " + std::to_string(in.imm) + (a.empty() ? "" : ", " + a) + typed;
      }
      default: {
        std::string a = args(in, 0);
        return def + opcName(in.op) + (a.empty() ? "" : " " + a) + typed;
      }
    }
  }

  void block(const Block& b, int depth) {
    std::string indent(size_t(depth) * 2, ' ');
    for (V v : b.items) {
      const Inst& in = k_.insts[size_t(v)];
      out_ += indent + line(v, in) + "\n";
      if (in.op != Opc::For && in.op != Opc::If) continue;
      block(in.body, depth + 1);
      if (!in.orelse.items.empty()) {
        out_ += indent + "} else {\n";
        block(in.orelse, depth + 1);
      }
      out_ += indent + "}\n";
    }
  }

  const Kernel& k_;
  std::string out_;
};

}  // namespace

std::string print(const Kernel& k) { return Printer(k).run(); }

}  // namespace poot::kir

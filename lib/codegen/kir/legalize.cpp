// The SPIR-V lowering walks the structured body once, rebuilding each
// block's item list: an instruction keeps its index (so its users need no
// change) and gets its new type, and the instructions a conversion needs are
// appended to Kernel::insts and placed just before it. Types are read from a
// copy taken before the walk, since operands are rewritten before their
// users.
#include "codegen/kir/legalize.h"

#include <utility>
#include <vector>

namespace poot::kir {

namespace {

class SpirvLowering {
 public:
  explicit SpirvLowering(Kernel& k) : k_(k) {
    for (const Inst& in : k.insts) types_.push_back(in.type);
  }

  void run() {
    for (Buffer& b : k_.buffers)
      if (b.elem == Elem::BF16) b.elem = Elem::U16;
    for (Shared& s : k_.shared)
      if (s.type == Scalar::BF16) s.type = Scalar::I32;
    for (Scalar& s : k_.vars)
      if (s == Scalar::BF16) s = Scalar::I32;
    k_.body.items = block(k_.body.items);
  }

 private:
  std::vector<V> block(const std::vector<V>& items) {
    std::vector<V> out;
    for (V v : items) {
      Opc op = k_.insts[size_t(v)].op;
      if (op == Opc::For || op == Opc::If) {
        std::vector<V> body = block(k_.insts[size_t(v)].body.items), orelse = block(k_.insts[size_t(v)].orelse.items);
        k_.insts[size_t(v)].body.items = std::move(body);
        k_.insts[size_t(v)].orelse.items = std::move(orelse);
      } else {
        lower(v, out);
      }
      out.push_back(v);
    }
    return out;
  }

  // Instruction v in terms of i32 bit patterns, any instructions it needs
  // appended to out.
  void lower(V v, std::vector<V>& out) {
    Inst& in = k_.insts[size_t(v)];
    out_ = &out;
    if (in.op == Opc::Convert && in.type == Scalar::F16 && types_[size_t(in.args[0])] == Scalar::F32) {
      V rounded = roundToHalf(in.args[0]);
      k_.insts[size_t(v)].args[0] = rounded;
      return;
    }
    bool fromBf16 = in.op == Opc::Convert && types_[size_t(in.args[0])] == Scalar::BF16;
    if (in.type != Scalar::BF16 && !fromBf16) return;
    if (in.op != Opc::Convert) {
      in.type = Scalar::I32;  // loads, lanes, selects: the 16 bits, zero-extended
      return;
    }
    V x = in.args[0];
    if (fromBf16) {
      V high = emit(Opc::Shl, Scalar::I32, {x, i32(16)});
      k_.insts[size_t(v)] = Inst{Opc::Bitcast, Scalar::F32, {high}};
      return;
    }
    // Round to nearest even on the f32 bit pattern; a NaN keeps a quiet NaN.
    V bits = emit(Opc::Bitcast, Scalar::I32, {x});
    V top = emit(Opc::ShrL, Scalar::I32, {bits, i32(16)});
    V lsb = emit(Opc::And, Scalar::I32, {top, i32(1)});
    V sum = emit(Opc::Add, Scalar::I32, {bits, emit(Opc::Add, Scalar::I32, {i32(0x7fff), lsb})});
    V rounded = emit(Opc::ShrL, Scalar::I32, {sum, i32(16)});
    V quiet = emit(Opc::Or, Scalar::I32, {top, i32(0x40)});
    V nan = emit(Opc::Ne, Scalar::Bool, {x, x});
    k_.insts[size_t(v)] = Inst{Opc::Select, Scalar::I32, {nan, quiet, rounded}};
  }

  // The f32 value x rounded to the nearest f16 value, still in f32. f16
  // keeps 11 significant bits from 2^-14 up, multiples of 2^-24 below.
  // Normal range: nearest even on the bit pattern (a carry rolls into the
  // exponent); from 65520 up (halfway to 2^16, ties to even) an infinity.
  // Below 2^-14: adding 0.5 leaves an ulp of 2^-24, so the f32 add rounds
  // to the subnormal grid and subtracting 0.5 again is exact. NaN stays.
  V roundToHalf(V x) {
    V bits = emit(Opc::Bitcast, Scalar::I32, {x});
    V sign = emit(Opc::And, Scalar::I32, {bits, i32(int32_t(0x80000000u))});
    V mag = emit(Opc::And, Scalar::I32, {bits, i32(0x7fffffff)});
    V lsb = emit(Opc::And, Scalar::I32, {emit(Opc::ShrL, Scalar::I32, {mag, i32(13)}), i32(1)});
    V sum = emit(Opc::Add, Scalar::I32, {mag, emit(Opc::Add, Scalar::I32, {i32(0xfff), lsb})});
    V normal = emit(Opc::And, Scalar::I32, {sum, i32(int32_t(0xffffe000u))});
    V big = emit(Opc::Ge, Scalar::Bool, {normal, i32(0x47800000)});
    normal = emit(Opc::Select, Scalar::I32, {big, i32(0x7f800000), normal});
    V ax = emit(Opc::Bitcast, Scalar::F32, {mag});
    V up = emit(Opc::Add, Scalar::F32, {ax, f32(0.5)});
    V tiny = emit(Opc::Bitcast, Scalar::I32, {emit(Opc::Sub, Scalar::F32, {up, f32(0.5)})});
    V small = emit(Opc::Lt, Scalar::Bool, {mag, i32(0x38800000)});
    V r = emit(Opc::Select, Scalar::I32, {small, tiny, normal});
    V value = emit(Opc::Bitcast, Scalar::F32, {emit(Opc::Or, Scalar::I32, {r, sign})});
    return emit(Opc::Select, Scalar::F32, {emit(Opc::Ne, Scalar::Bool, {x, x}), x, value});
  }

  V emit(Opc op, Scalar t, std::vector<V> args) {
    k_.insts.push_back(Inst{op, t, std::move(args)});
    V v = V(k_.insts.size() - 1);
    out_->push_back(v);
    return v;
  }
  V i32(int64_t c) {
    V v = emit(Opc::Const, Scalar::I32, {});
    k_.insts[size_t(v)].imm = c;
    return v;
  }
  V f32(double c) {
    V v = emit(Opc::Const, Scalar::F32, {});
    k_.insts[size_t(v)].fimm = c;
    return v;
  }

  Kernel& k_;
  std::vector<Scalar> types_;  // each instruction's type before the walk
  std::vector<V>* out_ = nullptr;
};

}  // namespace

void legalize(Kernel& k, Target t) {
  if (t == Target::Spirv) SpirvLowering(k).run();
}

}  // namespace poot::kir

// The KIR interpreter, SIMT in lockstep: one workgroup at a time, every value
// a vector over the workgroup's threads (one 64-bit lane a thread, holding the
// value's bits: i32 and f32 in the low half, f16 and bf16 in the low 16 bits,
// bool as 0/1), every block run
// under an active-thread mask. An If runs its then block under mask & cond and
// its else block under mask & !cond (a block no thread enters is skipped); a
// For keeps its own mask of the threads still looping, each with its own
// induction value in the For's lanes, and stops when none is left. Variables
// are per-thread lanes too; workgroup arrays are bytes, their elements
// little-endian, filled with all-ones bits (a NaN, an integer -1) when each
// workgroup starts so a read before a write shows. Conversions to and from
// f16 and bf16 are the oracle's (oracle/tensor.h). The lanes of every instruction, the variables and the
// masks (one per nesting depth) are allocated once per call and reused by
// every workgroup. A warp operation (ShuffleXor, Mma) reads the lanes of
// each warp with an active thread, all 32 of which must be active; an
// MmaShared or MmaSharedB likewise each warpgroup, whose 128 threads must
// agree on its indices. A chain is computed when issued; the workgroup-memory
// bytes it read are kept until the MmaWait that finishes it, which stops the
// run if any of them changed (kir.h: they must stay put until then). Where
// kir.h is silent: Rem on f32 is C's fmod, and f32 -> int conversion
// saturates (NaN gives 0). The kernel is verified first, so
// the opcode cases assume well-typed operands; a barrier reached by part of
// the workgroup is still checked, as a guard behind the verifier's rule.
// Errors (out-of-bounds access, division by zero, a shift out of range, that
// barrier) stop the run as Verify errors naming the instruction, the
// workgroup and, where one thread is at fault, the thread.
#include "codegen/kir/interp.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <compare>
#include <cstring>
#include <deque>
#include <limits>
#include <type_traits>
#include <unordered_map>

#include "codegen/kir/verify.h"
#include "oracle/tensor.h"

namespace poot::kir {

namespace {

template <class T>
T get(uint64_t x) {
  if constexpr (std::is_same_v<T, bool>) return x != 0;
  else if constexpr (std::is_same_v<T, float>) return std::bit_cast<float>(uint32_t(x));
  else if constexpr (std::is_same_v<T, int32_t>) return int32_t(uint32_t(x));
  else if constexpr (std::is_same_v<T, uint16_t>) return uint16_t(x);
  else return int64_t(x);
}

template <class T>
uint64_t put(T v) {
  if constexpr (std::is_same_v<T, bool>) return v ? 1 : 0;
  else if constexpr (std::is_same_v<T, float>) return std::bit_cast<uint32_t>(v);
  else if constexpr (std::is_same_v<T, int32_t>) return uint32_t(v);
  else return uint64_t(v);
}

// f32 -> integer, truncating; NaN gives 0 and out-of-range values saturate
// (kir.h leaves both unspecified; this keeps them defined in C++).
template <class I>
I truncate(float f) {
  if (std::isnan(f)) return 0;
  if (f <= float(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (f >= float(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return I(f);
}

int depthOf(const Kernel& k, const Block& b) {
  int d = 0;
  for (V v : b.items) {
    const Inst& in = k.insts[size_t(v)];
    if (in.op == Opc::For || in.op == Opc::If)
      d = std::max(d, 1 + std::max(depthOf(k, in.body), depthOf(k, in.orelse)));
  }
  return d;
}

// The elements a wide instruction's Lanes read from what the machine kept
// (wide_): a SharedLoadVec's and an Mma's imm, a warpgroup product's n / 2, an
// MmaWait's operands; 0 for every other instruction (a LoadVec keeps its
// index and reads the buffer).
int64_t heldElements(const Kernel& k, V v) {
  const Inst& in = k.insts[size_t(v)];
  if (in.op == Opc::SharedLoadVec || in.op == Opc::Mma) return in.imm;
  if (in.op == Opc::MmaWait) return int64_t(in.args.size());
  return isGroupMma(in.op) ? mmaSharedColumns(k, v) / 2 : 0;
}

class Machine {
 public:
  Machine(const Kernel& k, const std::vector<std::vector<uint8_t>*>& buffers)
      : k_(k), bufs_(buffers), w_(size_t(k.workgroupSize)), lanes_(k.insts.size() * w_), vars_(k.vars.size() * w_) {
    masks_.assign(size_t(depthOf(k, k.body)) + 1, std::vector<uint8_t>(w_, 0));
    for (const Shared& s : k.shared) shared_.emplace_back(size_t(s.elems * scalarBytes(s.type)), uint8_t(0));
    for (size_t v = 0; v < k.insts.size(); ++v) {
      if (int64_t n = heldElements(k, V(v)); n > 0) wide_[V(v)].assign(size_t(n) * w_, 0);
      if (V onto = chainedOnto(k, k.insts[v]); onto >= 0) chainedBy_[size_t(onto)] = 1;
    }
  }

  Status run(int64_t gridY) {
    for (int64_t gy = 0; gy < gridY; ++gy)
      for (int64_t gx = 0; gx < k_.gridX; ++gx) {
        gx_ = int32_t(gx);
        gy_ = int32_t(gy);
        for (auto& s : shared_) std::fill(s.begin(), s.end(), uint8_t(0xff));
        std::fill(masks_[0].begin(), masks_[0].end(), 1);
        if (!block(k_.body, 0)) return err_;
        for (size_t t = 0; t < w_; ++t)
          if (!open_[t].empty() || !closed_[t].empty())
            return makeError(ErrorKind::Verify, {},
                             "kernel " + k_.entry + ": thread " + std::to_string(t) + " of workgroup (" +
                                 std::to_string(gx) + ", " + std::to_string(gy) + ") ends with copies not waited for");
        for (size_t g = 0; g < pending_.size(); ++g)
          if (!pending_[g].empty())
            return makeError(ErrorKind::Verify, {},
                             "kernel " + k_.entry + ": warpgroup " + std::to_string(g) + " of workgroup (" +
                                 std::to_string(gx) + ", " + std::to_string(gy) + ") ends with the chain of %" +
                                 std::to_string(pending_[g].front().last) + " not waited for");
      }
    return ok();
  }

 private:
  uint64_t* lanes(V v) { return lanes_.data() + size_t(v) * w_; }

  // Records the error of instruction v in this workgroup (and thread t, when
  // one thread is at fault); false, so callers can return it.
  bool fail(V v, int64_t t, const std::string& msg) {
    err_ = makeError(ErrorKind::Verify, {},
                     "kernel " + k_.entry + ": %" + std::to_string(v) + " (" + opcName(k_.insts[size_t(v)].op) +
                         "): " + msg + " in workgroup (" + std::to_string(gx_) + ", " + std::to_string(gy_) + ")" +
                         (t >= 0 ? " thread " + std::to_string(t) : ""));
    return false;
  }
  bool unsupported(V v, const Inst& in) {
    return fail(v, -1, std::string("no ") + opcName(in.op) + " on " + scalarName(in.type));
  }

  // r[t] = f(a[t]) or f(a[t], b[t]) on the active threads.
  template <class T, class F>
  void map1(const uint8_t* m, V v, const Inst& in, F f) {
    const uint64_t* a = lanes(in.args[0]);
    uint64_t* r = lanes(v);
    for (size_t t = 0; t < w_; ++t)
      if (m[t]) r[t] = put(f(get<T>(a[t])));
  }
  template <class T, class F>
  void map2(const uint8_t* m, V v, const Inst& in, F f) {
    const uint64_t* a = lanes(in.args[0]);
    const uint64_t* b = lanes(in.args[1]);
    uint64_t* r = lanes(v);
    for (size_t t = 0; t < w_; ++t)
      if (m[t]) r[t] = put(f(get<T>(a[t]), get<T>(b[t])));
  }

  // A regular form (kir.h: Binary, Unary, Compare) by its row's meaning, on
  // its operands' type.
  bool regular(const uint8_t* m, V v, const Inst& in) {
    const OpInfo& info = opInfo(in.op);
    const Meaning& mean = info.meaning;
    Scalar type = k_.insts[size_t(in.args[0])].type;
    bool two = in.args.size() > 1;
    if (type == Scalar::F32) {
      if (info.form == Form::Compare)
        map2<float>(m, v, in, [&](float x, float y) { return mean.holds(x <=> y); });
      else if (!mean.f32)
        return unsupported(v, in);
      else if (two)
        map2<float>(m, v, in, [&](float x, float y) { return mean.f32(x, y); });
      else
        map1<float>(m, v, in, [&](float x) { return mean.f32(x, 0.0f); });
      return true;
    }
    int bits = type == Scalar::I32 ? 32 : type == Scalar::I64 ? 64 : 1;
    if (type != Scalar::I32 && type != Scalar::I64 && type != Scalar::Bool) return unsupported(v, in);
    // Operands sign-extended from their width (bool as 0/1); results wrapped back.
    auto read = [&](uint64_t x) -> int64_t { return bits == 32 ? int64_t(int32_t(uint32_t(x))) : int64_t(x); };
    auto wrap = [&](int64_t r) -> uint64_t { return bits == 32 ? uint64_t(uint32_t(r)) : bits == 1 ? uint64_t(r & 1) : uint64_t(r); };
    const uint64_t* a = lanes(in.args[0]);
    const uint64_t* b = two ? lanes(in.args[1]) : nullptr;
    uint64_t* r = lanes(v);
    if (info.form == Form::Compare) {
      for (size_t t = 0; t < w_; ++t)
        if (m[t]) r[t] = put(mean.holds(std::partial_ordering(read(a[t]) <=> read(b[t]))));
      return true;
    }
    if (!mean.ints) return unsupported(v, in);
    for (size_t t = 0; t < w_; ++t) {
      if (!m[t]) continue;
      int64_t y = two ? read(b[t]) : 0;
      if (mean.guard == Guard::Divisor && y == 0) return fail(v, int64_t(t), "division by zero");
      if (mean.guard == Guard::ShiftAmount && (y < 0 || y >= bits))
        return fail(v, int64_t(t), "shift amount " + std::to_string(y) + " outside [0, " + std::to_string(bits) + ")");
      r[t] = wrap(mean.ints(read(a[t]), y, bits));
    }
    return true;
  }

  // f32 <-> f16 or bf16, the only conversions of two-byte values.
  void convertTwoByte(const uint8_t* m, V v, const Inst& in, Scalar from) {
    bool half = from == Scalar::F16 || in.type == Scalar::F16;
    if (from == Scalar::F32)
      map1<float>(m, v, in, [half](float x) { return half ? floatToHalf(x) : floatToBf16(x); });
    else
      map1<uint16_t>(m, v, in, [half](uint16_t x) { return half ? halfToFloat(x) : bf16ToFloat(x); });
  }

  template <class From>
  void convertFrom(const uint8_t* m, V v, const Inst& in) {
    switch (in.type) {
      case Scalar::Bool: map1<From>(m, v, in, [](From x) { return x != From(0); }); break;
      case Scalar::F32: map1<From>(m, v, in, [](From x) { return float(x); }); break;
      case Scalar::I32:
        if constexpr (std::is_same_v<From, float>)
          map1<From>(m, v, in, [](From x) { return truncate<int32_t>(x); });
        else
          map1<From>(m, v, in, [](From x) { return int32_t(x); });  // modular since C++20
        break;
      default:  // i64 (a two-byte result is convertTwoByte's)
        if constexpr (std::is_same_v<From, float>)
          map1<From>(m, v, in, [](From x) { return truncate<int64_t>(x); });
        else
          map1<From>(m, v, in, [](From x) { return int64_t(x); });
        break;
    }
  }

  // The index lanes of a Load/Store/SharedLoad/SharedStore, checked against
  // `elems` elements and the `bytes` the bound vector holds.
  bool checkIndex(const uint8_t* m, V v, const Inst& in, int64_t elems, int64_t bytes, int64_t elemSize,
                  const char* kind, const std::string& name) {
    const uint64_t* idx = lanes(in.args[0]);
    for (size_t t = 0; t < w_; ++t) {
      if (!m[t]) continue;
      int64_t i = get<int32_t>(idx[t]);
      if (i < 0 || i >= elems || (i + 1) * elemSize > bytes)
        return fail(v, int64_t(t),
                    "index " + std::to_string(i) + " outside [0, " + std::to_string(std::min(elems, bytes / elemSize)) +
                        ") of " + kind + " " + std::to_string(in.ref) + " (" + name + ")");
    }
    return true;
  }

  // Element i of buffer `ref` (checked), widened to its value type.
  uint64_t element(int32_t ref, int64_t i) const {
    const Buffer& b = k_.buffers[size_t(ref)];
    int sz = elemBytes(b.elem);
    uint64_t raw = 0;
    std::memcpy(&raw, bufs_[size_t(ref)]->data() + size_t(i) * size_t(sz), size_t(sz));
    // f32, i32 (low half), i64, f16, bf16, u8 and u16 zero-extended; i8 sign-extended
    return b.elem == Elem::I8 ? put(int32_t(int8_t(raw))) : raw;
  }

  bool load(const uint8_t* m, V v, const Inst& in) {
    const Buffer& b = k_.buffers[size_t(in.ref)];
    if (!checkIndex(m, v, in, b.elems, int64_t(bufs_[size_t(in.ref)]->size()), elemBytes(b.elem), "buffer", b.name))
      return false;
    const uint64_t* idx = lanes(in.args[0]);
    uint64_t* r = lanes(v);
    for (size_t t = 0; t < w_; ++t)
      if (m[t]) r[t] = element(in.ref, get<int32_t>(idx[t]));
    return true;
  }

  // A LoadVec checks its whole run and its alignment, and keeps its index;
  // each Lane then reads its element (the buffer is read-only, so when it
  // reads does not matter).
  bool loadVec(const uint8_t* m, V v, const Inst& in) {
    const Buffer& b = k_.buffers[size_t(in.ref)];
    int64_t have = std::min(b.elems, int64_t(bufs_[size_t(in.ref)]->size()) / elemBytes(b.elem));
    const uint64_t* idx = lanes(in.args[0]);
    uint64_t* r = lanes(v);
    for (size_t t = 0; t < w_; ++t) {
      if (!m[t]) continue;
      int64_t i = get<int32_t>(idx[t]);
      if (i < 0 || i + in.imm > have || i % in.imm != 0)
        return fail(v, int64_t(t),
                    "elements [" + std::to_string(i) + ", " + std::to_string(i + in.imm) + ") are not an aligned run in [0, " +
                        std::to_string(have) + ") of buffer " + std::to_string(in.ref) + " (" + b.name + ")");
      r[t] = idx[t];
    }
    return true;
  }

  void lane(const uint8_t* m, V v, const Inst& in) {
    const Inst& vec = k_.insts[size_t(in.args[0])];
    uint64_t* r = lanes(v);
    if (heldElements(k_, in.args[0]) > 0) {
      const uint64_t* words = wide_.at(in.args[0]).data() + size_t(in.imm) * w_;
      for (size_t t = 0; t < w_; ++t)
        if (m[t]) r[t] = words[t];
      return;
    }
    const uint64_t* base = lanes(in.args[0]);
    for (size_t t = 0; t < w_; ++t)
      if (m[t]) r[t] = element(vec.ref, get<int32_t>(base[t]) + in.imm);
  }

  // A SharedLoadVec or SharedStoreVec checks each thread's run and its
  // alignment; a load keeps the words as they are now, for its Lanes.
  bool sharedWide(const uint8_t* m, V v, const Inst& in) {
    const Shared& s = k_.shared[size_t(in.ref)];
    uint8_t* bytes = shared_[size_t(in.ref)].data();
    size_t sz = size_t(scalarBytes(s.type));
    const uint64_t* idx = lanes(in.args[0]);
    for (size_t t = 0; t < w_; ++t) {
      if (!m[t]) continue;
      int64_t i = get<int32_t>(idx[t]);
      if (i < 0 || i + in.imm > s.elems || i % in.imm != 0)
        return fail(v, int64_t(t),
                    "elements [" + std::to_string(i) + ", " + std::to_string(i + in.imm) + ") are not an aligned run in [0, " +
                        std::to_string(s.elems) + ") of shared " + std::to_string(in.ref) + " (" + s.name + ")");
      for (int64_t e = 0; e < in.imm; ++e) {
        uint8_t* p = bytes + size_t(i + e) * sz;
        if (in.op == Opc::SharedLoadVec) {
          uint64_t x = 0;
          std::memcpy(&x, p, sz);
          wide_.at(v)[size_t(e) * w_ + t] = x;
        } else {
          std::memcpy(p, &lanes(in.args[size_t(e) + 1])[t], sz);
        }
      }
    }
    return true;
  }

  // Each active thread's copy: its 16 source bytes (or zeros) read now,
  // landing in workgroup memory at the wait that finishes its group.
  bool copyAsync(const uint8_t* m, V v, const Inst& in) {
    const Buffer& b = k_.buffers[size_t(in.ref)];
    const std::vector<uint8_t>& src = *bufs_[size_t(in.ref)];
    const Shared& s = k_.shared[size_t(in.imm)];
    int64_t sz = elemBytes(b.elem), n = 16 / sz;
    const uint64_t *g = lanes(in.args[0]), *si = lanes(in.args[1]), *ok = lanes(in.args[2]);
    for (size_t t = 0; t < w_; ++t) {
      if (!m[t]) continue;
      Copy c{size_t(in.imm), 0, {}};
      int64_t j = get<int32_t>(si[t]);
      if (j < 0 || j + n > s.elems || j % n != 0)
        return fail(v, int64_t(t),
                    "elements [" + std::to_string(j) + ", " + std::to_string(j + n) + ") are not an aligned run in [0, " +
                        std::to_string(s.elems) + ") of shared " + std::to_string(in.imm) + " (" + s.name + ")");
      c.at = size_t(j * sz);
      if (ok[t] & 1) {
        int64_t i = get<int32_t>(g[t]);
        if (i < 0 || i + n > b.elems || (i + n) * sz > int64_t(src.size()) || i % n != 0)
          return fail(v, int64_t(t),
                      "elements [" + std::to_string(i) + ", " + std::to_string(i + n) + ") are not an aligned run in [0, " +
                          std::to_string(b.elems) + ") of buffer " + std::to_string(in.ref) + " (" + b.name + ")");
        std::memcpy(c.bytes, src.data() + size_t(i * sz), 16);
      }
      open_[t].push_back(c);
    }
    return true;
  }

  // Whether the warp (size 32), wave (64) or warpgroup (128) of threads from t0 runs
  // the warp operation v: 1 when all of it is active, 0 when none is, -1
  // (the error recorded) when only part of it is.
  int reached(const uint8_t* m, V v, size_t t0, size_t size) {
    size_t n = size_t(std::count(m + t0, m + t0 + size, uint8_t(1)));
    if (n == 0 || n == size) return n == size;
    fail(v, -1, "reached by " + std::to_string(n) + " of " + (size == 128 ? "warpgroup " : size == 64 ? "wave " : "warp ") +
                    std::to_string(t0 / size) + "'s " + std::to_string(size) + " threads");
    return -1;
  }

  // A ShuffleXor or Mma, warp by warp (an Mma's warp: its op's threads).
  bool warp(const uint8_t* m, V v, const Inst& in) {
    const size_t lanesOf = size_t(groupThreads(in));
    for (size_t w0 = 0; w0 < w_; w0 += lanesOf) {
      if (int r = reached(m, v, w0, lanesOf); r <= 0) {
        if (r < 0) return false;
        continue;
      }
      if (in.op == Opc::ShuffleXor) {
        const uint64_t* x = lanes(in.args[0]);
        uint64_t* r = lanes(v);
        for (size_t l = 0; l < 32; ++l) r[w0 + l] = x[w0 + (l ^ size_t(in.imm))];
        continue;
      }
      // A, B and C as kir.h lays them out; two-byte operands widened exactly.
      const MatrixShape& shape = matrixShape(MatrixOp(in.ref));
      Scalar ot = mmaOperand(shape.op);
      auto operand = [&](size_t e, size_t l) -> double {
        uint64_t bits = lanes(in.args[e])[w0 + l];
        if (ot == Scalar::BF16) return bf16ToFloat(uint16_t(bits));
        if (ot == Scalar::F16) return halfToFloat(uint16_t(bits));
        return get<float>(bits);
      };
      size_t na = size_t(shape.aRegs), nb = size_t(shape.bRegs);
      std::vector<double> a(size_t(shape.m * shape.k)), b(size_t(shape.k * shape.n)), c(size_t(shape.m * shape.n));
      for (size_t l = 0; l < lanesOf; ++l) {
        for (size_t e = 0; e < na + nb; ++e) {
          uint32_t bits = uint32_t(lanes(in.args[e])[w0 + l]);
          if (ot == Scalar::F32 && (bits & 0x1FFFu))
            return fail(v, int64_t(w0 + l), "operand " + std::to_string(e) + " is not a tf32 value (its low 13 bits are " +
                                                 std::to_string(bits & 0x1FFFu) + ")");
        }
        for (size_t e = 0; e < na; ++e) {
          RowCol rc = mmaA(shape.op, int(l), int(e));
          a[size_t(rc.row * shape.k + rc.col)] = operand(e, l);
        }
        for (size_t e = 0; e < nb; ++e) {
          RowCol rc = mmaB(shape.op, int(l), int(e));
          b[size_t(rc.row * shape.n + rc.col)] = operand(na + e, l);
        }
        for (size_t e = 0; e < 4; ++e) {
          RowCol rc = mmaC(shape.op, int(l), int(e));
          c[size_t(rc.row * shape.n + rc.col)] = get<float>(lanes(in.args[na + nb + e])[w0 + l]);
        }
      }
      std::vector<uint64_t>& d = wide_.at(v);
      for (size_t l = 0; l < lanesOf; ++l)
        for (size_t e = 0; e < 4; ++e) {
          RowCol rc = mmaC(shape.op, int(l), int(e));
          double sum = c[size_t(rc.row * shape.n + rc.col)];
          for (int64_t k = 0; k < shape.k; ++k) sum += a[size_t(rc.row * shape.k + k)] * b[size_t(k * shape.n + rc.col)];
          d[e * w_ + w0 + l] = put(float(sum));
        }
    }
    return true;
  }

  // An MmaShared or MmaSharedB, warpgroup by warpgroup: A read from
  // workgroup memory (MmaShared) or from the threads' operands, B from
  // workgroup memory, both in kir.h's 128-byte swizzle; C from the c
  // operands (or the chained link's D), each sum in double rounded once.
  bool warpgroup(const uint8_t* m, V v, const Inst& in) {
    const Shared& s = k_.shared[size_t(in.imm)];
    const uint8_t* bytes = shared_[size_t(in.imm)].data();
    Scalar ot = s.type;
    const bool regsA = in.op == Opc::MmaSharedB;
    const size_t c0 = groupMmaC(in.op), i0 = regsA ? 8 : 0;  // c operands; indices
    int64_t n = mmaSharedColumns(k_, v);
    V chain = chainedOnto(k_, in);
    std::vector<uint64_t>& d = wide_.at(v);
    auto value = [&](uint64_t bits) { return ot == Scalar::BF16 ? bf16ToFloat(uint16_t(bits)) : halfToFloat(uint16_t(bits)); };
    for (size_t g0 = 0; g0 < w_; g0 += 128) {
      if (int r = reached(m, v, g0, 128); r <= 0) {
        if (r < 0) return false;
        continue;
      }
      int64_t idx[4];
      for (size_t i = 0; i < c0 - i0; ++i) {
        const uint64_t* x = lanes(in.args[i0 + i]);
        idx[i] = get<int32_t>(x[g0]);
        for (size_t t = g0; t < g0 + 128; ++t)
          if (x[t] != x[g0])
            return fail(v, int64_t(t), "operand " + std::to_string(i0 + i) + " differs between threads of the warpgroup (" +
                                           std::to_string(get<int32_t>(x[t])) + " and " + std::to_string(idx[i]) + ")");
      }
      if (regsA) {
        for (size_t i = 0; i < 3; ++i)
          if (idx[i] < 0 || idx[i] % 512 != 0 || (i > 0 && idx[i] >= (1 << 17)))
            return fail(v, int64_t(g0), "B's " + std::string(i == 0 ? "start " : i == 1 ? "row stride " : "block stride ") +
                                            std::to_string(idx[i]) + " is not as kir.h has it");
      } else {
        for (size_t i : {0, 2})
          if (idx[i] < 0 || idx[i] % 8 != 0 || idx[i] % 64 > 48 || idx[i + 1] < 0 || idx[i + 1] % 512 != 0)
            return fail(v, int64_t(g0), std::string(i == 0 ? "A" : "B") + "'s start " + std::to_string(idx[i]) +
                                            " or row stride " + std::to_string(idx[i + 1]) + " is not as kir.h has them");
      }
      // The element at `at`, swizzled; kept among the bytes the warpgroup's
      // open chain read.
      Chain& reading = openChains_[g0 / 128];
      reading.array = size_t(in.imm);
      auto element = [&](int64_t at, double& out) {
        int64_t x = 2 * at;
        x ^= ((x >> 7) & 7) << 4;
        if (x < 0 || x + 2 > s.elems * 2) return false;
        uint16_t bits = 0;
        std::memcpy(&bits, bytes + size_t(x), 2);
        reading.reads.emplace_back(uint32_t(x), bits);
        out = value(bits);
        return true;
      };
      auto outside = [&](const char* which, int64_t row, int64_t col) {
        return fail(v, int64_t(g0), std::string(which) + "'s element (" + std::to_string(row) + ", " + std::to_string(col) +
                                        ") is outside shared " + std::to_string(in.imm) + " (" + s.name + ")");
      };
      std::vector<double> a(64 * 16), b(size_t(n) * 16);  // a[r][k], b[j][k]
      if (regsA) {
        for (size_t l = 0; l < 128; ++l)
          for (int e = 0; e < 8; ++e) {
            RowCol rc = mmaA(MatrixOp::M16N8K16Bf16, int(l % 32), e);
            a[size_t((16 * int64_t(l / 32) + rc.row) * 16 + rc.col)] = value(lanes(in.args[size_t(e)])[g0 + l]);
          }
        for (int64_t kk = 0; kk < 16; ++kk)
          for (int64_t j = 0; j < n; ++j)
            if (!element(idx[0] + (kk / 8) * idx[1] + (kk % 8) * 64 + (j / 64) * idx[2] + j % 64, b[size_t(j * 16 + kk)]))
              return outside("B", kk, j);
      } else {
        for (int64_t r = 0; r < 64; ++r)
          for (int64_t kk = 0; kk < 16; ++kk)
            if (!element(idx[0] + (r / 8) * idx[1] + (r % 8) * 64 + kk, a[size_t(r * 16 + kk)])) return outside("A", r, kk);
        for (int64_t j = 0; j < n; ++j)
          for (int64_t kk = 0; kk < 16; ++kk)
            if (!element(idx[2] + (j / 8) * idx[3] + (j % 8) * 64 + kk, b[size_t(j * 16 + kk)])) return outside("B", kk, j);
      }
      const std::vector<uint64_t>* onto = chain >= 0 ? &wide_.at(chain) : nullptr;
      for (size_t l = 0; l < 128; ++l)
        for (int64_t e = 0; e < n / 2; ++e) {
          RowCol rc = mmaGroupC(int(l), int(e));
          uint64_t c = onto ? (*onto)[size_t(e) * w_ + g0 + l] : lanes(in.args[c0 + size_t(e)])[g0 + l];
          double sum = get<float>(c);
          for (int64_t kk = 0; kk < 16; ++kk) sum += a[size_t(rc.row * 16 + kk)] * b[size_t(rc.col * 16 + kk)];
          d[size_t(e) * w_ + g0 + l] = put(float(sum));
        }
      if (!chainedBy_[size_t(v)]) {  // the chain's last link: now pending
        reading.last = v;
        pending_[g0 / 128].push_back(std::move(reading));
        reading = Chain{};
      }
    }
    return true;
  }

  // An MmaWait, warpgroup by warpgroup: its operands given back, and the
  // oldest pending chains finished until at most imm are left, each checked
  // to have read what workgroup memory still holds.
  bool mmaWait(const uint8_t* m, V v, const Inst& in) {
    for (size_t g0 = 0; g0 < w_; g0 += 128) {
      if (int r = reached(m, v, g0, 128); r <= 0) {
        if (r < 0) return false;
        continue;
      }
      for (size_t e = 0; e < in.args.size(); ++e)
        std::copy_n(lanes(in.args[e]) + g0, 128, wide_.at(v).begin() + std::ptrdiff_t(e * w_ + g0));
      std::deque<Chain>& q = pending_[g0 / 128];
      while (q.size() > size_t(in.imm)) {
        const Chain& c = q.front();
        const std::vector<uint8_t>& now = shared_[c.array];
        for (auto [x, bits] : c.reads)
          if (now[x] != uint8_t(bits) || now[x + 1] != uint8_t(bits >> 8))
            return fail(v, -1, "byte " + std::to_string(x) + " of shared " + std::to_string(c.array) + " (" +
                                   k_.shared[c.array].name + "), which warpgroup " + std::to_string(g0 / 128) +
                                   "'s chain of %" + std::to_string(c.last) + " read, changed before this wait finished it");
        q.pop_front();
      }
    }
    return true;
  }

  bool store(const uint8_t* m, V v, const Inst& in) {
    const Buffer& b = k_.buffers[size_t(in.ref)];
    std::vector<uint8_t>& bytes = *bufs_[size_t(in.ref)];
    int sz = elemBytes(b.elem);
    if (!checkIndex(m, v, in, b.elems, int64_t(bytes.size()), sz, "buffer", b.name))
      return false;
    const uint64_t* idx = lanes(in.args[0]);
    const uint64_t* val = lanes(in.args[1]);
    for (size_t t = 0; t < w_; ++t) {
      if (!m[t]) continue;
      uint8_t* p = bytes.data() + size_t(get<int32_t>(idx[t])) * size_t(sz);
      std::memcpy(p, &val[t], size_t(sz));  // little-endian: the low bytes narrow
    }
    return true;
  }

  bool sharedAccess(const uint8_t* m, V v, const Inst& in) {
    const Shared& s = k_.shared[size_t(in.ref)];
    int sz = scalarBytes(s.type);
    if (!checkIndex(m, v, in, s.elems, s.elems * sz, sz, "shared", s.name))
      return false;
    const uint64_t* idx = lanes(in.args[0]);
    uint64_t* r = lanes(v);
    const uint64_t* val = in.op == Opc::SharedStore ? lanes(in.args[1]) : nullptr;
    for (size_t t = 0; t < w_; ++t) {
      if (!m[t]) continue;
      uint8_t* p = shared_[size_t(in.ref)].data() + size_t(get<int32_t>(idx[t])) * size_t(sz);
      if (val) {
        std::memcpy(p, &val[t], size_t(sz));
      } else {
        r[t] = 0;
        std::memcpy(&r[t], p, size_t(sz));
      }
    }
    return true;
  }

  // Threads of m that also satisfy pred, into out; whether any does.
  template <class P>
  bool narrow(const uint8_t* m, uint8_t* out, P pred) {
    bool any = false;
    for (size_t t = 0; t < w_; ++t) {
      out[t] = m[t] && pred(t);
      any |= out[t] != 0;
    }
    return any;
  }

  bool loop(V v, const Inst& in, int depth) {
    const uint8_t* m = masks_[size_t(depth)].data();
    uint8_t* inner = masks_[size_t(depth) + 1].data();
    const uint64_t* lo = lanes(in.args[0]);
    const uint64_t* hi = lanes(in.args[1]);
    uint64_t* i = lanes(v);
    for (size_t t = 0; t < w_; ++t)
      if (m[t]) i[t] = lo[t];
    bool any = narrow(m, inner, [&](size_t t) { return get<int32_t>(i[t]) < get<int32_t>(hi[t]); });
    while (any) {
      if (!block(in.body, depth + 1)) return false;
      any = false;
      for (size_t t = 0; t < w_; ++t) {
        if (!inner[t]) continue;
        int64_t next = int64_t(get<int32_t>(i[t])) + in.imm;  // stops before i could wrap
        if (next < get<int32_t>(hi[t])) {
          i[t] = put(int32_t(next));
          any = true;
        } else {
          inner[t] = 0;
        }
      }
    }
    return true;
  }

  bool branch(const Inst& in, int depth) {
    const uint8_t* m = masks_[size_t(depth)].data();
    uint8_t* inner = masks_[size_t(depth) + 1].data();
    const uint64_t* c = lanes(in.args[0]);
    if (narrow(m, inner, [&](size_t t) { return c[t] != 0; }) && !block(in.body, depth + 1)) return false;
    if (narrow(m, inner, [&](size_t t) { return c[t] == 0; }) && !block(in.orelse, depth + 1)) return false;
    return true;
  }

  bool block(const Block& b, int depth) {
    const uint8_t* m = masks_[size_t(depth)].data();
    for (V v : b.items) {
      const Inst& in = k_.insts[size_t(v)];
      uint64_t* r = lanes(v);
      switch (in.op) {
        case Opc::Const: {
          uint64_t x = in.type == Scalar::F32 ? put(float(in.fimm))
                       : in.type == Scalar::I32 ? put(int32_t(in.imm))
                       : in.type == Scalar::Bool ? put(in.imm != 0)
                       : put(in.imm);
          for (size_t t = 0; t < w_; ++t)
            if (m[t]) r[t] = x;
          break;
        }
        case Opc::GroupX:
        case Opc::GroupY:
          for (size_t t = 0; t < w_; ++t)
            if (m[t]) r[t] = put(in.op == Opc::GroupX ? gx_ : gy_);
          break;
        case Opc::Local:
          for (size_t t = 0; t < w_; ++t)
            if (m[t]) r[t] = put(int32_t(t));
          break;
        case Opc::Select: {
          const uint64_t* c = lanes(in.args[0]);
          const uint64_t* x = lanes(in.args[1]);
          const uint64_t* y = lanes(in.args[2]);
          for (size_t t = 0; t < w_; ++t)
            if (m[t]) r[t] = c[t] ? x[t] : y[t];
          break;
        }
        case Opc::Fma: {
          const uint64_t* a = lanes(in.args[0]);
          const uint64_t* x = lanes(in.args[1]);
          const uint64_t* c = lanes(in.args[2]);
          for (size_t t = 0; t < w_; ++t)
            if (m[t]) r[t] = put(std::fma(get<float>(a[t]), get<float>(x[t]), get<float>(c[t])));
          break;
        }
        case Opc::Convert: {
          Scalar from = k_.insts[size_t(in.args[0])].type;
          if (isTwoByte(from) || isTwoByte(in.type)) {
            convertTwoByte(m, v, in, from);
            break;
          }
          switch (from) {
            case Scalar::Bool: convertFrom<bool>(m, v, in); break;
            case Scalar::I32: convertFrom<int32_t>(m, v, in); break;
            case Scalar::I64: convertFrom<int64_t>(m, v, in); break;
            default: convertFrom<float>(m, v, in); break;  // f32 (two-byte types above)
          }
          break;
        }
        case Opc::Bitcast: {  // f32 <-> i32: both keep their 32 bits in the low half
          const uint64_t* a = lanes(in.args[0]);
          for (size_t t = 0; t < w_; ++t)
            if (m[t]) r[t] = a[t];
          break;
        }
        case Opc::Load:
          if (!load(m, v, in)) return false;
          break;
        case Opc::LoadVec:
          if (!loadVec(m, v, in)) return false;
          break;
        case Opc::Lane:
          lane(m, v, in);
          break;
        case Opc::Store:
          if (!store(m, v, in)) return false;
          break;
        case Opc::SharedLoad:
        case Opc::SharedStore:
          if (!sharedAccess(m, v, in)) return false;
          break;
        case Opc::SharedLoadVec:
        case Opc::SharedStoreVec:
          if (!sharedWide(m, v, in)) return false;
          break;
        case Opc::ShuffleXor:
        case Opc::Mma:
          if (!warp(m, v, in)) return false;
          break;
        case Opc::MmaShared:
        case Opc::MmaSharedB:
          if (!warpgroup(m, v, in)) return false;
          break;
        case Opc::MmaWait:
          if (!mmaWait(m, v, in)) return false;
          break;
        case Opc::GetVar: {
          const uint64_t* x = vars_.data() + size_t(in.ref) * w_;
          for (size_t t = 0; t < w_; ++t)
            if (m[t]) r[t] = x[t];
          break;
        }
        case Opc::SetVar: {
          uint64_t* x = vars_.data() + size_t(in.ref) * w_;
          const uint64_t* a = lanes(in.args[0]);
          for (size_t t = 0; t < w_; ++t)
            if (m[t]) x[t] = a[t];
          break;
        }
        case Opc::For:
          if (!loop(v, in, depth)) return false;
          break;
        case Opc::If:
          if (!branch(in, depth)) return false;
          break;
        case Opc::CopyAsync:
          if (!copyAsync(m, v, in)) return false;
          break;
        case Opc::AsyncCommit:
          for (size_t t = 0; t < w_; ++t)
            if (m[t]) closed_[t].push_back(std::move(open_[t])), open_[t].clear();
          break;
        case Opc::AsyncWait:
          for (size_t t = 0; t < w_; ++t)
            while (m[t] && closed_[t].size() > size_t(in.imm)) {
              for (const Copy& c : closed_[t].front()) std::memcpy(shared_[c.array].data() + c.at, c.bytes, 16);
              closed_[t].pop_front();
            }
          break;
        case Opc::Barrier: {
          size_t n = size_t(std::count(m, m + w_, uint8_t(1)));
          if (n != w_)
            return fail(v, -1, "reached by " + std::to_string(n) + " of the workgroup's " + std::to_string(w_) + " threads");
          break;
        }
        default:  // the regular forms
          if (!regular(m, v, in)) return false;
          break;
      }
    }
    return true;
  }

  const Kernel& k_;
  const std::vector<std::vector<uint8_t>*>& bufs_;
  size_t w_;
  std::vector<uint64_t> lanes_;  // instruction v's lanes at [v * w_, (v + 1) * w_)
  std::vector<uint64_t> vars_;   // variable j's lanes at [j * w_, (j + 1) * w_)
  std::vector<std::vector<uint8_t>> masks_;  // the active threads at each nesting depth
  std::vector<std::vector<uint8_t>> shared_;  // each workgroup array's bytes
  // A SharedLoadVec's, Mma's, MmaShared's or MmaWait's elements: e of thread
  // t at [e * w_ + t].
  std::unordered_map<V, std::vector<uint64_t>> wide_;
  // Each thread's asynchronous copies: its open group, and its closed groups
  // oldest first.
  struct Copy {
    size_t array, at;      // destination: workgroup array and byte offset
    uint8_t bytes[16];     // the source's bytes, or zeros
  };
  std::vector<std::vector<Copy>> open_ = std::vector<std::vector<Copy>>(w_);
  std::vector<std::deque<std::vector<Copy>>> closed_ = std::vector<std::deque<std::vector<Copy>>>(w_);
  // Each warpgroup's matrix chains: the bytes its open chain read so far
  // (byte offset and value), and its pending chains oldest first.
  struct Chain {
    V last = -1;
    size_t array = 0;
    std::vector<std::pair<uint32_t, uint16_t>> reads;
  };
  std::vector<Chain> openChains_ = std::vector<Chain>((w_ + 127) / 128);
  std::vector<std::deque<Chain>> pending_ = std::vector<std::deque<Chain>>((w_ + 127) / 128);
  std::vector<uint8_t> chainedBy_ = std::vector<uint8_t>(k_.insts.size(), 0);  // MmaShared a later link chains onto
  int32_t gx_ = 0, gy_ = 0;
  Error err_{ErrorKind::Verify, {}, ""};
};

}  // namespace

Status interpret(const Kernel& k, int64_t gridY, const std::vector<std::vector<uint8_t>*>& buffers) {
  if (auto s = verify(k); !s) return s;
  if (buffers.size() != k.buffers.size())
    return makeError(ErrorKind::Verify, {},
                     "kernel " + k.entry + ": " + std::to_string(buffers.size()) + " buffers bound, " +
                         std::to_string(k.buffers.size()) + " declared");
  for (size_t i = 0; i < buffers.size(); ++i)
    if (!buffers[i])
      return makeError(ErrorKind::Verify, {}, "kernel " + k.entry + ": buffer " + std::to_string(i) + " not bound");
  return Machine(k, buffers).run(gridY);
}

}  // namespace poot::kir

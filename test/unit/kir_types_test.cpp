// Unit tests of KIR's two-byte types (kir.h): every conversion between f32
// and f16 or bf16 on the interpreter against the oracle's rounding functions
// (oracle/tensor.h), over every two-byte pattern and f32 values at each
// rounding edge (ties, NaN, infinities, f16 overflow at 65504 / 65520, f16
// and f32 subnormals), both as the Builder writes the kernel and after
// kir::legalize for SPIR-V, whose integer rounding must agree bit for bit;
// the oracle's own answers at those edges; two-byte workgroup arrays (their
// byte layout, a round trip through them) and i8 sign extension; the
// legalized kernel as text; and the verifier refusing two-byte operands
// where kir.h allows none.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codegen/kir/builder.h"
#include "codegen/kir/interp.h"
#include "codegen/kir/legalize.h"
#include "codegen/kir/print.h"
#include "codegen/kir/verify.h"
#include "oracle/tensor.h"
#include "testing.h"

namespace poot::kir {

namespace {

using testing::bytesOf;
using testing::elementAt;

float fromBits(uint32_t b) { return std::bit_cast<float>(b); }

// f32 inputs at every rounding edge of f16 and bf16, each with both signs:
// special values, every bf16 value with its ties and neighbours, every
// finite f16 value with the midpoints to the next one and their neighbours,
// f32 subnormals, then random bit patterns.
std::vector<float> edgeValues(uint64_t seed) {
  std::vector<float> v = {0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                          fromBits(0x7f800001u), fromBits(0x7fc12345u), 65504.0f, 65519.99f, 65520.0f,
                          std::nextafter(65520.0f, 0.0f), 65536.0f, 1e10f, 0x1p-24f, 0x1p-25f, 3 * 0x1p-25f,
                          0x1p-14f, 0x1p-14f - 0x1p-25f, fromBits(1u), fromBits(0x007fffffu), fromBits(0x00400000u)};
  for (uint32_t p = 0; p < 0x8000u; ++p)
    for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u}) v.push_back(fromBits(p << 16 | low));
  for (uint16_t h = 0; h < 0x7c00u; ++h) {
    float mid = (halfToFloat(h) + halfToFloat(uint16_t(h + 1))) / 2;  // exact: 12 significant bits
    v.insert(v.end(), {halfToFloat(h), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
  }
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 50000; ++i) v.push_back(fromBits(uint32_t(rng())));
  size_t n = v.size();
  for (size_t i = 0; i < n; ++i) v.push_back(-v[i]);
  return v;
}

// x (f32) narrowed into an f16 and a bf16 buffer, and rounded to each
// (Builder::roundTo) into f32 buffers.
Kernel narrowing(int64_t n) {
  Builder b("narrow", 256, (n + 255) / 256);
  int32_t x = b.buffer("x", DType::F32, n, false), h = b.buffer("h", DType::F16, n, true);
  int32_t bf = b.buffer("bf", DType::BF16, n, true), rh = b.buffer("rh", DType::F32, n, true);
  int32_t rb = b.buffer("rb", DType::F32, n, true);
  V i = b.add(b.mul(b.workgroupId(), b.i32(256)), b.local());
  b.ifThen(b.lt(i, b.i32(n)), [&] {
    V v = b.load(x, i);
    b.store(h, i, v);
    b.store(bf, i, v);
    b.store(rh, i, b.roundTo(v, DType::F16));
    b.store(rb, i, b.roundTo(v, DType::BF16));
  });
  return b.finish();
}

// Every f16 and every bf16 bit pattern widened to f32.
Kernel widening() {
  Builder b("widen", 256, 256);
  int32_t h = b.buffer("h", DType::F16, 65536, false), bf = b.buffer("bf", DType::BF16, 65536, false);
  int32_t out = b.buffer("out", DType::F32, 2 * 65536, true);
  V i = b.add(b.mul(b.workgroupId(), b.i32(256)), b.local());
  b.store(out, i, b.load(h, i));
  b.store(out, b.add(i, b.i32(65536)), b.load(bf, i));
  return b.finish();
}

Kernel legalized(Kernel k) {
  legalize(k, Target::Spirv);
  return k;
}

void run(const Kernel& k, const std::vector<std::vector<uint8_t>*>& buffers) {
  auto v = verify(k);
  REQUIRE_MESSAGE(bool(v), (v ? "" : v.error().message));
  auto s = interpret(k, 1, buffers);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().message));
}

std::string errorOf(const Status& s) { return s ? "" : s.error().message; }

}  // namespace

TEST_CASE("kir types: the oracle's roundings at the edges kir.h names") {
  CHECK(floatToHalf(65504.0f) == 0x7bff);
  CHECK(floatToHalf(65519.99f) == 0x7bff);
  CHECK(floatToHalf(65520.0f) == 0x7c00);  // halfway to 2^16: ties to even, an infinity
  CHECK(floatToHalf(-65520.0f) == 0xfc00);
  CHECK(floatToHalf(0x1p-24f) == 0x0001);
  CHECK(floatToHalf(0x1p-25f) == 0x0000);      // a tie to the even zero
  CHECK(floatToHalf(3 * 0x1p-25f) == 0x0002);  // a tie to the even subnormal
  CHECK(floatToHalf(fromBits(1u)) == 0x0000);  // f32 subnormals vanish, sign kept
  CHECK(floatToHalf(-fromBits(1u)) == 0x8000);
  CHECK((floatToHalf(std::numeric_limits<float>::quiet_NaN()) & 0x7fff) > 0x7c00);
  CHECK(floatToBf16(1.0f + 0x1p-8f) == 0x3f80);  // a tie to even
  CHECK(floatToBf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
  CHECK(floatToBf16(fromBits(0x7f800001u)) == 0x7fc0);  // a signalling NaN made quiet
  CHECK(floatToBf16(fromBits(0x7f7fffffu)) == 0x7f80);  // rounds up to an infinity
  CHECK(bf16ToFloat(0x0001) == fromBits(0x00010000u));  // bf16 subnormals are f32's
}

TEST_CASE("kir types: f32 to f16 and bf16 on the interpreter, as written and legalized for spir-v, equal the oracle's") {
  uint64_t seed = testing::freshSeed();
  CAPTURE(seed);
  std::vector<float> x = edgeValues(seed);
  int64_t n = int64_t(x.size());
  Kernel k = narrowing(n);
  for (bool spirv : {false, true}) {
    CAPTURE(spirv);
    std::vector<uint8_t> xb = bytesOf(x), h(size_t(n) * 2), bf(size_t(n) * 2), rh(size_t(n) * 4), rb(size_t(n) * 4);
    run(spirv ? legalized(k) : k, {&xb, &h, &bf, &rh, &rb});
    size_t bad = 0;
    std::string first;
    for (size_t j = 0; j < size_t(n); ++j) {
      uint16_t wantH = floatToHalf(x[j]), wantB = floatToBf16(x[j]);
      // The rounded f32 is the two-byte value widened back, bit for bit.
      bool good = elementAt<uint16_t>(h, j) == wantH && elementAt<uint16_t>(bf, j) == wantB &&
                  std::bit_cast<uint32_t>(elementAt<float>(rh, j)) == std::bit_cast<uint32_t>(halfToFloat(wantH)) &&
                  std::bit_cast<uint32_t>(elementAt<float>(rb, j)) == std::bit_cast<uint32_t>(bf16ToFloat(wantB));
      if (!good && bad++ == 0) first = "x bits " + std::to_string(std::bit_cast<uint32_t>(x[j]));
    }
    CHECK_MESSAGE(bad == 0, bad << " values differ, first " << first);
  }
}

TEST_CASE("kir types: every f16 and bf16 pattern widens to the oracle's f32, as written and legalized") {
  std::vector<uint16_t> pat(65536);
  for (size_t i = 0; i < pat.size(); ++i) pat[i] = uint16_t(i);
  for (bool spirv : {false, true}) {
    CAPTURE(spirv);
    std::vector<uint8_t> h = bytesOf(pat), bf = bytesOf(pat), out(2 * 65536 * 4);
    run(spirv ? legalized(widening()) : widening(), {&h, &bf, &out});
    size_t bad = 0;
    for (size_t j = 0; j < 65536; ++j) {
      bad += std::bit_cast<uint32_t>(elementAt<float>(out, j)) != std::bit_cast<uint32_t>(halfToFloat(uint16_t(j)));
      bad += std::bit_cast<uint32_t>(elementAt<float>(out, 65536 + j)) != std::bit_cast<uint32_t>(bf16ToFloat(uint16_t(j)));
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("kir types: two-byte workgroup arrays, selects and i8 loads") {
  // Thread t stages its f16 and bf16 elements in workgroup arrays, then reads
  // its mirror's (W - 1 - t) back, picks by parity with a two-byte select,
  // and reads a wide run of four f16 elements; i8 loads sign-extend.
  const int64_t W = 32;
  Builder b("stage", W, 1);
  int32_t h = b.buffer("h", DType::F16, W, false), bf = b.buffer("bf", DType::BF16, W, false);
  int32_t q = b.buffer("q", DType::I32, W, false), oh = b.buffer("oh", DType::F16, W, true);
  int32_t obf = b.buffer("obf", DType::BF16, W, true), oq = b.buffer("oq", DType::I32, W, true);
  int32_t run4 = b.buffer("run4", DType::F32, W, true);
  int32_t lead = b.shared("lead", Scalar::F16, 4), sh = b.shared("sh", Scalar::F16, W);
  int32_t sb = b.shared("sb", Scalar::BF16, W);
  V t = b.local(), mirror = b.sub(b.i32(W - 1), t);
  V hv = b.convert(b.load(h, t), Scalar::F16), bv = b.convert(b.load(bf, t), Scalar::BF16);
  b.sharedStore(lead, b.i32(0), hv);
  b.sharedStore(sh, t, hv);
  b.sharedStore(sb, t, bv);
  b.barrier();
  V odd = b.eq(b.binary(Opc::And, t, b.i32(1)), b.i32(1));
  b.store(oh, t, b.select(odd, b.sharedLoad(sh, mirror), hv));
  b.store(obf, t, b.select(odd, b.sharedLoad(sb, mirror), bv));
  std::vector<V> four = b.sharedLoadVec(sh, b.mul(b.div(t, b.i32(4)), b.i32(4)), 4);
  b.store(run4, t, b.convert(four[3], Scalar::F32));
  b.store(oq, t, b.load(q, t));
  Kernel k = b.finish();
  k.buffers[size_t(q)].elem = Elem::I8;  // no graph dtype is i8: the buffer retyped
  // lead ends at byte 8, so sh starts there (a multiple of the wide
  // access's 8 bytes) and sb at 8 + 64.
  CHECK(k.sharedOffsets() == std::vector<int64_t>{0, 8, 72});
  CHECK(k.sharedBytes() == 136);

  std::vector<uint16_t> hs(W), bs(W);
  std::vector<int8_t> qs(W);
  for (int64_t i = 0; i < W; ++i) {
    hs[size_t(i)] = uint16_t(0x3c00 + 37 * i);
    bs[size_t(i)] = uint16_t(0xbf80 + 11 * i);
    qs[size_t(i)] = int8_t(i * 9 - 128);
  }
  for (bool spirv : {false, true}) {
    CAPTURE(spirv);
    std::vector<uint8_t> hb = bytesOf(hs), bb = bytesOf(bs), qb = bytesOf(qs), ohb(W * 2), obfb(W * 2), oqb(W * 4),
                         rb(W * 4);
    run(spirv ? legalized(k) : k, {&hb, &bb, &qb, &ohb, &obfb, &oqb, &rb});
    for (size_t i = 0; i < size_t(W); ++i) {
      CAPTURE(i);
      size_t from = i % 2 ? size_t(W) - 1 - i : i;
      CHECK(elementAt<uint16_t>(ohb, i) == hs[from]);
      CHECK(elementAt<uint16_t>(obfb, i) == bs[from]);
      CHECK(elementAt<float>(rb, i) == halfToFloat(hs[i / 4 * 4 + 3]));
      CHECK(elementAt<int32_t>(oqb, i) == int32_t(qs[i]));
    }
  }
}

TEST_CASE("kir types: legalize for spir-v spells bf16 in integers and pre-rounds f16 but llvm targets keep both") {
  Builder b("cast", 1, 1);
  int32_t x = b.buffer("x", DType::BF16, 1, false), y = b.buffer("y", DType::BF16, 1, true);
  int32_t s = b.shared("s", Scalar::BF16, 2);
  b.sharedStore(s, b.i32(1), b.convert(b.load(x, b.i32(0)), Scalar::BF16));
  b.store(y, b.i32(0), b.convert(b.sharedLoad(s, b.i32(1)), Scalar::F32));
  Kernel k = b.finish();
  for (Target t : {Target::Ptx, Target::Hsaco}) {
    Kernel same = k;
    legalize(same, t);
    CHECK(print(same) == print(k));
  }
  legalize(k, Target::Spirv);
  CHECK(bool(verify(k)));
  // The bf16 buffers are u16, the array i32; a widening is a shift and a
  // bitcast, a narrowing rounds the f32 bits to nearest even, a NaN quiet.
  CHECK(print(k) ==
        "kernel cast workgroup=1 grid_x=1 shared_bytes=8\n"
        "  buffer 0 x u16[1] read\n"
        "  buffer 1 y u16[1] write\n"
        "  shared 0 s i32[2]\n"
        "  %0 = const 0 : i32\n"
        "  %1 = load b0[%0] : i32\n"
        "  %12 = const 16 : i32\n"
        "  %13 = shl %1, %12 : i32\n"
        "  %2 = bitcast %13 : f32\n"
        "  %14 = bitcast %2 : i32\n"
        "  %15 = const 16 : i32\n"
        "  %16 = shr.l %14, %15 : i32\n"
        "  %17 = const 1 : i32\n"
        "  %18 = and %16, %17 : i32\n"
        "  %19 = const 32767 : i32\n"
        "  %20 = add %19, %18 : i32\n"
        "  %21 = add %14, %20 : i32\n"
        "  %22 = const 16 : i32\n"
        "  %23 = shr.l %21, %22 : i32\n"
        "  %24 = const 64 : i32\n"
        "  %25 = or %16, %24 : i32\n"
        "  %26 = ne %2, %2 : bool\n"
        "  %3 = select %26, %25, %23 : i32\n"
        "  %4 = const 1 : i32\n"
        "  shared.store s0[%4], %3\n"
        "  %6 = const 1 : i32\n"
        "  %7 = shared.load s0[%6] : i32\n"
        "  %27 = const 16 : i32\n"
        "  %28 = shl %7, %27 : i32\n"
        "  %8 = bitcast %28 : f32\n"
        "  %9 = const 0 : i32\n"
        "  %29 = bitcast %8 : i32\n"
        "  %30 = const 16 : i32\n"
        "  %31 = shr.l %29, %30 : i32\n"
        "  %32 = const 1 : i32\n"
        "  %33 = and %31, %32 : i32\n"
        "  %34 = const 32767 : i32\n"
        "  %35 = add %34, %33 : i32\n"
        "  %36 = add %29, %35 : i32\n"
        "  %37 = const 16 : i32\n"
        "  %38 = shr.l %36, %37 : i32\n"
        "  %39 = const 64 : i32\n"
        "  %40 = or %31, %39 : i32\n"
        "  %41 = ne %8, %8 : bool\n"
        "  %10 = select %41, %40, %38 : i32\n"
        "  store b1[%9], %10\n");

  // f16 stays, but a conversion from f32 takes an operand already rounded
  // to an f16 value (the select that keeps a NaN).
  Builder h("half", 1, 1);
  int32_t in = h.buffer("x", DType::F32, 1, false), out = h.buffer("y", DType::F16, 1, true);
  h.store(out, h.i32(0), h.load(in, h.i32(0)));
  Kernel hk = h.finish();
  V narrow = 3;  // %0 index, %1 load, %2 the store's index, %3 the convert
  REQUIRE(hk.insts[size_t(narrow)].op == Opc::Convert);
  legalize(hk, Target::Spirv);
  CHECK(bool(verify(hk)));
  const Inst& c = hk.insts[size_t(narrow)];
  CHECK(c.type == Scalar::F16);
  CHECK(hk.insts[size_t(c.args[0])].op == Opc::Select);
  CHECK(print(hk).find("  %3 = convert %" + std::to_string(c.args[0]) + " : f16\n  store b1[%2], %3\n") != std::string::npos);
}

TEST_CASE("kir types: the verifier refuses two-byte operands where kir.h allows none") {
  auto kernel = [](Scalar t, Opc op) {
    Builder b("k", 1, 1);
    int32_t x = b.buffer("x", t == Scalar::F16 ? DType::F16 : DType::BF16, 1, false);
    V v = b.convert(b.load(x, b.i32(0)), t);  // %0 index, %1 load, %2 convert to f32, %3 back
    Kernel k = b.finish();
    k.insts.push_back(Inst{op, op >= Opc::Lt && op <= Opc::Ne ? Scalar::Bool : t, {v, v}});
    if (op == Opc::Neg) k.insts.back().args.pop_back();
    k.body.items.push_back(V(k.insts.size() - 1));
    return errorOf(verify(k));
  };
  CHECK(kernel(Scalar::F16, Opc::Add) == "kernel k: %4 (add): not defined on f16");
  CHECK(kernel(Scalar::BF16, Opc::Mul) == "kernel k: %4 (mul): not defined on bf16");
  CHECK(kernel(Scalar::F16, Opc::Neg) == "kernel k: %4 (neg): not defined on f16");
  CHECK(kernel(Scalar::BF16, Opc::Lt) == "kernel k: %4 (lt): not defined on bf16");
  CHECK(kernel(Scalar::F16, Opc::Eq) == "kernel k: %4 (eq): not defined on f16");
  CHECK(kernel(Scalar::F16, Opc::Select) == "kernel k: %4 (select): 2 operands, expected 3");

  Builder c("c", 1, 1);
  V i = c.i32(1);
  Kernel k = c.finish();
  k.insts.push_back(Inst{Opc::Convert, Scalar::F16, {i}});
  k.body.items.push_back(1);
  CHECK(errorOf(verify(k)) == "kernel c: %1 (convert): convert from i32 to f16 (f16 and bf16 convert to and from f32 only)");
  k.insts[1] = Inst{Opc::Const, Scalar::BF16};
  CHECK(errorOf(verify(k)) == "kernel c: %1 (const): not defined on bf16");
  k.insts.pop_back();
  k.body.items.pop_back();
  k.shared.push_back(Shared{"wide", Scalar::I64, 4});
  k.insts.push_back(Inst{Opc::SharedLoadVec, Scalar::I64, {0}, 0});
  k.insts.back().imm = 4;
  k.body.items.push_back(1);
  CHECK(errorOf(verify(k)) == "kernel c: %1 (shared.load.vec): 4 i64 elements are more than 16 bytes");
}

}  // namespace poot::kir

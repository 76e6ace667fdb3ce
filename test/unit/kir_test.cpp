// Unit tests of the KIR tools (lib/codegen/kir): the interpreter on kernels
// built here with the Builder, over fresh random inputs, against values the
// test computes directly from kir.h's semantics (every opcode on every type it
// takes, per-thread loop trip counts, if/else masking, a workgroup reduction in
// shared memory across barriers, u8 bool, f16 and bf16 storage, f16 rounding,
// out-of-bounds and other run-time errors); the verifier on each malformed
// case; the printer on one kernel checked line by line; and the plan runner of
// kir_plan.h on small graphs against the oracle. Each random test prints its
// seed when it fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codegen/kir/builder.h"
#include "codegen/kir/interp.h"
#include "codegen/kir/print.h"
#include "codegen/kir/verify.h"
#include "kir_plan.h"
#include "testing.h"

namespace poot::kir {

using testing::freshSeed;

namespace {

using testing::bytesOf;
using testing::elementAt;

// The same f32, or both NaN.
bool same(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) || (std::isnan(a) && std::isnan(b)); }

void runOk(const Kernel& k, int64_t gridY, const std::vector<std::vector<uint8_t>*>& buffers) {
  auto v = verify(k);
  REQUIRE_MESSAGE(bool(v), (v ? "" : v.error().message));
  auto s = interpret(k, gridY, buffers);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().message));
}

std::string errorOf(const Status& s) {
  REQUIRE_FALSE(bool(s));
  CHECK(s.error().kind == ErrorKind::Verify);
  return s.error().message;
}

// Random f32 of magnitude in [0.25, 4) with a random sign, a few NaN, inf,
// zero and negative zero among them.
std::vector<float> randomFloats(std::mt19937_64& rng, size_t n) {
  std::uniform_real_distribution<float> mag(0.25f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = (rng() & 1 ? -1.0f : 1.0f) * mag(rng);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 0.0f, -0.0f};
  for (float s : specials) v[rng() % n] = s;
  return v;
}

// One thread per element: out[j * n + i] = op_j(a[i], b[i]) for each
// operation j that `ops` lists; n = 4 workgroups of 32 in x by 2 in y.
constexpr int64_t kW = 32, kGridX = 2, kGridY = 2, kN = kW * kGridX * kGridY;

struct Elementwise {
  DType dtype;       // of a and b
  DType outDtype;    // of out
  int64_t ops;       // operations, each writing n elements
  // Emits op j on the loaded a and b; returns the value stored.
  std::function<V(Builder&, int64_t j, V a, V b)> body;

  Kernel kernel() const {
    Builder bl("ew", kW, kGridX);
    int32_t a = bl.buffer("a", dtype, kN, false), b = bl.buffer("b", dtype, kN, false);
    int32_t out = bl.buffer("out", outDtype, kN * ops, true);
    V i = bl.add(bl.mul(bl.workgroupId(), bl.i32(kW)), bl.local());
    V x = bl.load(a, i), y = bl.load(b, i);
    for (int64_t j = 0; j < ops; ++j) bl.store(out, bl.add(bl.i32(j * kN), i), body(bl, j, x, y));
    return bl.finish();
  }
};

}  // namespace

TEST_CASE("kir interpret: f32 arithmetic, functions and compares") {
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::vector<float> a = randomFloats(rng, kN), b = randomFloats(rng, kN);
  const Opc binary[] = {Opc::Add, Opc::Sub, Opc::Mul, Opc::Div, Opc::Rem, Opc::Min, Opc::Max, Opc::Pow};
  const Opc unary[] = {Opc::Neg, Opc::Abs, Opc::Exp, Opc::Exp2, Opc::Log, Opc::Sqrt, Opc::Rsqrt,
                       Opc::Tanh, Opc::Sin, Opc::Cos, Opc::Floor};
  const Opc compares[] = {Opc::Lt, Opc::Le, Opc::Gt, Opc::Ge, Opc::Eq, Opc::Ne};
  const int64_t nb = int64_t(std::size(binary)), nu = int64_t(std::size(unary));

  Elementwise f{DType::F32, DType::F32, nb + nu + 1, [&](Builder& bl, int64_t j, V x, V y) {
                  if (j < nb) return bl.binary(binary[j], x, y);
                  if (j < nb + nu) return bl.unary(unary[j - nb], x);
                  return bl.select(bl.lt(x, y), x, y);
                }};
  Elementwise c{DType::F32, DType::Bool, int64_t(std::size(compares)),
                [&](Builder& bl, int64_t j, V x, V y) { return bl.compare(compares[j], x, y); }};
  std::vector<uint8_t> ab = bytesOf(a), bb = bytesOf(b);
  std::vector<uint8_t> fo(size_t(f.ops * kN) * 4), co(size_t(c.ops * kN));
  runOk(f.kernel(), kGridY, {&ab, &bb, &fo});
  runOk(c.kernel(), kGridY, {&ab, &bb, &co});

  for (size_t i = 0; i < size_t(kN); ++i) {
    float x = a[i], y = b[i];
    const float want[] = {x + y, x - y, x * y, x / y, std::fmod(x, y), std::fmin(x, y), std::fmax(x, y), std::pow(x, y),
                          -x, std::fabs(x), std::exp(x), std::exp2(x), std::log(x), std::sqrt(x), 1.0f / std::sqrt(x),
                          std::tanh(x), std::sin(x), std::cos(x), std::floor(x), x < y ? x : y};
    for (size_t j = 0; j < std::size(want); ++j) {
      CAPTURE(j);
      CAPTURE(i);
      float got = elementAt<float>(fo, j * size_t(kN) + i);
      // Min and Max of +0 and -0 may give either zero (kir.h leaves the sign
      // unspecified, as fmin and fmax do).
      if ((j == 5 || j == 6) && x == 0 && y == 0) CHECK(got == 0.0f);
      else CHECK(same(got, want[j]));
    }
    const bool cmp[] = {x < y, x <= y, x > y, x >= y, x == y, x != y};
    for (size_t j = 0; j < std::size(cmp); ++j) CHECK(co[j * size_t(kN) + i] == uint8_t(cmp[j]));
  }
  // Min and Max return the other operand when one is NaN.
  size_t nan = size_t(std::find_if(a.begin(), a.end(), [](float v) { return std::isnan(v); }) - a.begin());
  if (nan < a.size() && !std::isnan(b[nan])) {
    CHECK(same(elementAt<float>(fo, 5 * size_t(kN) + nan), b[nan]));
    CHECK(same(elementAt<float>(fo, 6 * size_t(kN) + nan), b[nan]));
  }
}

TEST_CASE("kir interpret: fma rounds once") {
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::vector<float> a = randomFloats(rng, kN), b = randomFloats(rng, kN);
  // (1 + 2^-12)^2 - 1 is 2^-11 + 2^-24 fused; a rounded product first loses
  // the 2^-24 (a tie, to even).
  a[0] = b[0] = 1.0f + 0x1p-12f;
  Elementwise f{DType::F32, DType::F32, 2, [](Builder& bl, int64_t j, V x, V y) {
                  return j == 0 ? bl.fma(x, y, bl.f32(-1)) : bl.fma(x, y, x);
                }};
  std::vector<uint8_t> ab = bytesOf(a), bb = bytesOf(b), out(size_t(2 * kN) * 4);
  runOk(f.kernel(), kGridY, {&ab, &bb, &out});
  CHECK(elementAt<float>(out, 0) == 0x1p-11f + 0x1p-24f);
  volatile float product = a[0] * b[0];
  CHECK(product - 1.0f == 0x1p-11f);
  for (size_t i = 0; i < size_t(kN); ++i) {
    CAPTURE(i);
    CHECK(same(elementAt<float>(out, i), std::fma(a[i], b[i], -1.0f)));
    CHECK(same(elementAt<float>(out, size_t(kN) + i), std::fma(a[i], b[i], a[i])));
  }
}

TEST_CASE_TEMPLATE("kir interpret: integer arithmetic wraps, divides toward zero and shifts", T, int32_t, int64_t) {
  using U = std::make_unsigned_t<T>;
  constexpr bool wide = sizeof(T) == 8;
  constexpr int bits = wide ? 64 : 32;
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::vector<T> a(kN), b(kN);
  for (size_t i = 0; i < size_t(kN); ++i) {
    a[i] = T(rng());
    b[i] = i % 4 == 0 ? T(rng() % 7) - 3 : T(rng());  // small divisors too, -1 among them
    if (b[i] == 0) b[i] = 1;
  }
  a[3] = std::numeric_limits<T>::min();
  b[3] = -1;
  const Opc binary[] = {Opc::Add, Opc::Sub, Opc::Mul, Opc::Div, Opc::Rem, Opc::Min, Opc::Max, Opc::And, Opc::Or, Opc::Xor};
  const Opc shifts[] = {Opc::Shl, Opc::ShrA, Opc::ShrL};
  const Opc unary[] = {Opc::Neg, Opc::Not, Opc::Abs};
  const Opc compares[] = {Opc::Lt, Opc::Le, Opc::Gt, Opc::Ge, Opc::Eq, Opc::Ne};
  const int64_t nb = int64_t(std::size(binary)), ns = int64_t(std::size(shifts)), nu = int64_t(std::size(unary));
  DType dt = wide ? DType::I64 : DType::I32;
  Elementwise f{dt, dt, nb + ns + nu, [&](Builder& bl, int64_t j, V x, V y) {
                  if (j < nb) return bl.binary(binary[j], x, y);
                  if (j < nb + ns) {
                    V mask = wide ? bl.i64(bits - 1) : bl.i32(bits - 1);
                    return bl.binary(shifts[j - nb], x, bl.binary(Opc::And, y, mask));
                  }
                  return bl.unary(unary[j - nb - ns], x);
                }};
  Elementwise c{dt, DType::Bool, int64_t(std::size(compares)),
                [&](Builder& bl, int64_t j, V x, V y) { return bl.compare(compares[j], x, y); }};
  std::vector<uint8_t> ab = bytesOf(a), bb = bytesOf(b);
  std::vector<uint8_t> fo(size_t(f.ops * kN) * sizeof(T)), co(size_t(c.ops * kN));
  runOk(f.kernel(), kGridY, {&ab, &bb, &fo});
  runOk(c.kernel(), kGridY, {&ab, &bb, &co});
  for (size_t i = 0; i < size_t(kN); ++i) {
    T x = a[i], y = b[i];
    int s = int(U(y) & U(bits - 1));
    bool overflow = x == std::numeric_limits<T>::min() && y == -1;
    const T want[] = {T(U(x) + U(y)), T(U(x) - U(y)), T(U(x) * U(y)), overflow ? x : T(x / y), overflow ? T(0) : T(x % y),
                      std::min(x, y), std::max(x, y), T(x & y), T(x | y), T(x ^ y),
                      T(U(x) << s), T(x >> s), T(U(x) >> s), T(U(0) - U(x)), T(~x), x < 0 ? T(U(0) - U(x)) : x};
    for (size_t j = 0; j < std::size(want); ++j) {
      CAPTURE(j);
      CAPTURE(i);
      CHECK(elementAt<T>(fo, j * size_t(kN) + i) == want[j]);
    }
    const bool cmp[] = {x < y, x <= y, x > y, x >= y, x == y, x != y};
    for (size_t j = 0; j < std::size(cmp); ++j) CHECK(co[j * size_t(kN) + i] == uint8_t(cmp[j]));
  }
}

TEST_CASE("kir interpret: bool logic, select, converts and bitcasts") {
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::vector<float> a = randomFloats(rng, kN);
  std::vector<int32_t> b(kN);
  for (size_t i = 0; i < size_t(kN); ++i) {
    b[i] = int32_t(rng());
    a[i] *= float(1 << (rng() % 20));  // magnitudes well past 1 so truncation shows
  }
  b[1] = 0;
  b[2] = 1 << 30;
  a[5] = 0.75f;
  a[6] = -1.5f;

  Builder bl("cv", kW, kGridX);
  int32_t fa = bl.buffer("a", DType::F32, kN, false), ib = bl.buffer("b", DType::I32, kN, false);
  int32_t of = bl.buffer("of", DType::F32, kN * 4, true), oi = bl.buffer("oi", DType::I32, kN * 3, true);
  int32_t ol = bl.buffer("ol", DType::I64, kN * 2, true), ob = bl.buffer("ob", DType::Bool, kN * 6, true);
  V i = bl.add(bl.mul(bl.workgroupId(), bl.i32(kW)), bl.local());
  V x = bl.load(fa, i), y = bl.load(ib, i);
  V n = bl.i32(kN);
  auto slot = [&](int64_t j) { return bl.add(bl.mul(bl.i32(j), n), i); };
  V p = bl.gt(x, bl.f32(0)), q = bl.ne(y, bl.i32(0));
  bl.store(of, slot(0), bl.convert(y, Scalar::F32));
  bl.store(of, slot(1), bl.convert(p, Scalar::F32));
  bl.store(of, slot(2), bl.bitcast(y, Scalar::F32));
  bl.store(of, slot(3), bl.convert(bl.convert(y, Scalar::I64), Scalar::F32));
  bl.store(oi, slot(0), bl.convert(x, Scalar::I32));
  bl.store(oi, slot(1), bl.bitcast(x, Scalar::I32));
  bl.store(oi, slot(2), bl.convert(bl.add(bl.convert(y, Scalar::I64), bl.i64(int64_t(1) << 40)), Scalar::I32));
  bl.store(ol, slot(0), bl.convert(y, Scalar::I64));
  bl.store(ol, slot(1), bl.convert(x, Scalar::I64));
  bl.store(ob, slot(0), bl.binary(Opc::And, p, q));
  bl.store(ob, slot(1), bl.binary(Opc::Or, p, q));
  bl.store(ob, slot(2), bl.binary(Opc::Xor, p, q));
  bl.store(ob, slot(3), bl.unary(Opc::Not, p));
  bl.store(ob, slot(4), bl.convert(x, Scalar::Bool));
  bl.store(ob, slot(5), bl.select(q, bl.eq(p, q), bl.ne(p, q)));
  Kernel k = bl.finish();

  std::vector<uint8_t> ab = bytesOf(a), bb = bytesOf(b), fo(size_t(kN) * 16), io(size_t(kN) * 12), lo(size_t(kN) * 16),
                       bo(size_t(kN) * 6);
  runOk(k, kGridY, {&ab, &bb, &fo, &io, &lo, &bo});
  for (size_t j = 0; j < size_t(kN); ++j) {
    CAPTURE(j);
    float xf = a[j];
    int32_t yi = b[j];
    bool pp = xf > 0, qq = yi != 0;
    CHECK(same(elementAt<float>(fo, j), float(yi)));
    CHECK(same(elementAt<float>(fo, size_t(kN) + j), pp ? 1.0f : 0.0f));
    CHECK(same(elementAt<float>(fo, 2 * size_t(kN) + j), std::bit_cast<float>(yi)));
    CHECK(same(elementAt<float>(fo, 3 * size_t(kN) + j), float(int64_t(yi))));
    if (std::isfinite(xf)) CHECK(elementAt<int32_t>(io, j) == int32_t(std::trunc(xf)));
    CHECK(elementAt<int32_t>(io, size_t(kN) + j) == std::bit_cast<int32_t>(xf));
    CHECK(elementAt<int32_t>(io, 2 * size_t(kN) + j) == yi);  // i64 -> i32 keeps the low bits
    CHECK(elementAt<int64_t>(lo, j) == int64_t(yi));
    if (std::isfinite(xf)) CHECK(elementAt<int64_t>(lo, size_t(kN) + j) == int64_t(std::trunc(xf)));
    const bool want[] = {pp && qq, pp || qq, pp != qq, !pp, xf != 0, qq ? pp == qq : pp != qq};
    for (size_t m = 0; m < std::size(want); ++m) CHECK(bo[m * size_t(kN) + j] == uint8_t(want[m]));
  }
  CHECK(elementAt<int32_t>(io, 5) == 0);   // 0.75 truncates toward zero
  CHECK(elementAt<int32_t>(io, 6) == -1);  // -1.5 too
}

TEST_CASE("kir interpret: f16, bf16 and bool (u8) storage") {
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::vector<float> x = randomFloats(rng, kN);
  for (float& v : x) v *= 1.0f + float(rng() % 1000) * 1e-4f;  // bits below bf16 and f16 precision
  x[7] = -std::numeric_limits<float>::quiet_NaN();
  x[8] = 1.0f + 1.0f / 256.0f;  // a bf16 tie, rounding to even
  x[9] = 70000.0f;              // past f16's range: inf
  std::vector<uint16_t> h(kN), bf(kN);
  std::vector<uint8_t> bo(kN);
  for (size_t i = 0; i < size_t(kN); ++i) {
    h[i] = uint16_t(rng());
    bf[i] = uint16_t(rng());
    bo[i] = uint8_t(rng() & 1);
  }

  Builder bl("st", kW, kGridX);
  int32_t fx = bl.buffer("x", DType::F32, kN, false), fh = bl.buffer("h", DType::F16, kN, false);
  int32_t fb = bl.buffer("bf", DType::BF16, kN, false), fbool = bl.buffer("b", DType::Bool, kN, false);
  int32_t oh = bl.buffer("oh", DType::F16, kN, true), obf = bl.buffer("obf", DType::BF16, kN, true);
  int32_t of = bl.buffer("of", DType::F32, kN * 2, true), ob = bl.buffer("ob", DType::Bool, kN, true);
  V i = bl.add(bl.mul(bl.workgroupId(), bl.i32(kW)), bl.local());
  V v = bl.load(fx, i);
  bl.store(oh, i, v);
  bl.store(obf, i, v);
  bl.store(of, i, bl.load(fh, i));
  bl.store(of, bl.add(i, bl.i32(kN)), bl.load(fb, i));
  V flag = bl.load(fbool, i);
  CHECK(bl.typeOf(flag) == Scalar::Bool);
  bl.store(ob, i, bl.unary(Opc::Not, flag));
  Kernel k = bl.finish();
  CHECK(k.buffers[size_t(fb)].elem == Elem::BF16);
  CHECK(k.buffers[size_t(fbool)].elem == Elem::U8);

  std::vector<uint8_t> xb = bytesOf(x), hb = bytesOf(h), bfb = bytesOf(bf), ohb(size_t(kN) * 2, 0xff),
                       obfb(size_t(kN) * 2, 0xff), ofb(size_t(kN) * 8), obb(size_t(kN), 0xff);
  runOk(k, kGridY, {&xb, &hb, &bfb, &bo, &ohb, &obfb, &ofb, &obb});
  for (size_t j = 0; j < size_t(kN); ++j) {
    CAPTURE(j);
    CHECK(elementAt<uint16_t>(ohb, j) == floatToHalf(x[j]));
    CHECK(elementAt<uint16_t>(obfb, j) == floatToBf16(x[j]));
    CHECK(same(elementAt<float>(ofb, j), halfToFloat(h[j])));
    CHECK(same(elementAt<float>(ofb, size_t(kN) + j), bf16ToFloat(bf[j])));
    CHECK(obb[j] == uint8_t(!bo[j]));
  }
  CHECK(std::isnan(bf16ToFloat(elementAt<uint16_t>(obfb, 7))));
  CHECK(elementAt<uint16_t>(obfb, 8) == 0x3f80);
  CHECK(elementAt<uint16_t>(ohb, 9) == 0x7c00);
}

TEST_CASE("kir interpret: loops with per-thread trip counts, variables and if/else masking") {
  // Thread t of workgroup g: sum of i for i = t % 5 to t + g step 3, in a
  // variable; odd iterations also count into a second variable, under an If;
  // then the two results land in out[g * W + t] by an if/else on t's parity.
  constexpr int64_t W = 16, G = 3;
  Builder bl("loops", W, G);
  int32_t out = bl.buffer("out", DType::I32, 2 * W * G, true);
  V t = bl.local(), g = bl.groupX();
  int32_t sum = bl.var(Scalar::I32, bl.i32(0)), odd = bl.var(Scalar::I32, bl.i32(0));
  bl.forRange(bl.rem(t, bl.i32(5)), bl.add(t, g), 3, [&](V i) {
    bl.set(sum, bl.add(bl.get(sum), i));
    bl.ifThen(bl.eq(bl.binary(Opc::And, i, bl.i32(1)), bl.i32(1)), [&] { bl.set(odd, bl.add(bl.get(odd), bl.i32(1))); });
  });
  V slot = bl.add(bl.mul(g, bl.i32(W)), t);
  bl.ifElse(bl.eq(bl.rem(t, bl.i32(2)), bl.i32(0)), [&] { bl.store(out, slot, bl.get(sum)); },
            [&] { bl.store(out, slot, bl.neg(bl.get(sum))); });
  bl.store(out, bl.add(slot, bl.i32(W * G)), bl.get(odd));
  Kernel k = bl.finish();
  std::vector<uint8_t> o(size_t(2 * W * G) * 4, 0xff);
  runOk(k, 1, {&o});
  for (int32_t gg = 0; gg < G; ++gg)
    for (int32_t tt = 0; tt < W; ++tt) {
      CAPTURE(gg);
      CAPTURE(tt);
      int32_t s = 0, n = 0;
      for (int32_t i = tt % 5; i < tt + gg; i += 3) {
        s += i;
        n += i & 1;
      }
      CHECK(elementAt<int32_t>(o, size_t(gg * W + tt)) == (tt % 2 == 0 ? s : -s));
      CHECK(elementAt<int32_t>(o, size_t(W * G + gg * W + tt)) == n);
    }
}

TEST_CASE("kir interpret: a loop near the top of i32 stops without wrapping") {
  Builder bl("top", 1, 1);
  int32_t out = bl.buffer("out", DType::I32, 1, true);
  int32_t n = bl.var(Scalar::I32, bl.i32(0));
  int32_t top = std::numeric_limits<int32_t>::max();
  bl.forRange(bl.i32(top - 10), bl.i32(top), 4, [&](V) { bl.set(n, bl.add(bl.get(n), bl.i32(1))); });
  bl.store(out, bl.i32(0), bl.get(n));
  std::vector<uint8_t> o(4);
  runOk(bl.finish(), 1, {&o});
  CHECK(elementAt<int32_t>(o, 0) == 3);
}

TEST_CASE("kir interpret: a workgroup reduction in shared memory across barriers") {
  // Each workgroup of 64 sums its 64 elements by halving strides, a barrier
  // before each step; thread 0 writes the sum. 5 x 2 workgroups.
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  constexpr int64_t W = 64, GX = 5, GY = 2, N = W * GX * GY;
  std::vector<float> x(N);
  std::uniform_real_distribution<float> dist(0.5f, 2.0f);
  for (float& v : x) v = (rng() & 1 ? -1.0f : 1.0f) * dist(rng);

  Builder bl("reduce", W, GX);
  int32_t in = bl.buffer("x", DType::F32, N, false), out = bl.buffer("sum", DType::F32, GX * GY, true);
  int32_t sh = bl.shared("partial", Scalar::F32, W);
  V t = bl.local(), wg = bl.workgroupId();
  bl.sharedStore(sh, t, bl.load(in, bl.add(bl.mul(wg, bl.i32(W)), t)));
  bl.forRange(bl.i32(0), bl.i32(6), 1, [&](V step) {
    V stride = bl.binary(Opc::ShrL, bl.i32(W / 2), step);
    bl.barrier();
    bl.ifThen(bl.lt(t, stride), [&] {
      bl.sharedStore(sh, t, bl.add(bl.sharedLoad(sh, t), bl.sharedLoad(sh, bl.add(t, stride))));
    });
  });
  bl.barrier();
  bl.ifThen(bl.eq(t, bl.i32(0)), [&] { bl.store(out, wg, bl.sharedLoad(sh, bl.i32(0))); });
  Kernel k = bl.finish();
  CHECK(k.sharedBytes() == W * 4);
  std::vector<uint8_t> xb = bytesOf(x), ob(size_t(GX * GY) * 4);
  runOk(k, GY, {&xb, &ob});
  for (size_t g = 0; g < size_t(GX * GY); ++g) {
    std::vector<float> p(x.begin() + long(g * W), x.begin() + long((g + 1) * W));  // the same tree, in f32
    for (size_t s = W / 2; s >= 1; s /= 2)
      for (size_t j = 0; j < s; ++j) p[j] += p[j + s];
    CAPTURE(g);
    CHECK(same(elementAt<float>(ob, g), p[0]));
  }
}

TEST_CASE("kir interpret: wide loads give each lane its element, widened as a load") {
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::vector<float> x = randomFloats(rng, kN);
  std::vector<uint16_t> bf(kN), h(kN);
  for (size_t i = 0; i < size_t(kN); ++i) bf[i] = uint16_t(rng()), h[i] = uint16_t(rng());
  // Thread t reads the run at 4 * (t / 4) of x and 8 * (t / 8) of bf and h,
  // and stores the lane that is its own element.
  Builder bl("vec", kW, kGridX);
  int32_t fx = bl.buffer("x", DType::F32, kN, false), fb = bl.buffer("bf", DType::BF16, kN, false);
  int32_t fh = bl.buffer("h", DType::F16, kN, false), out = bl.buffer("out", DType::F32, kN * 3, true);
  V i = bl.add(bl.mul(bl.workgroupId(), bl.i32(kW)), bl.local());
  for (int64_t j = 0; j < 3; ++j) {
    int64_t w = j == 0 ? 4 : 8;
    int32_t buf = j == 0 ? fx : j == 1 ? fb : fh;
    std::vector<V> run = bl.loadVec(buf, bl.mul(bl.div(i, bl.i32(w)), bl.i32(w)), w);
    V mine = run[0];
    for (int64_t e = 1; e < w; ++e) mine = bl.select(bl.eq(bl.rem(i, bl.i32(w)), bl.i32(e)), run[size_t(e)], mine);
    bl.store(out, bl.add(bl.i32(j * kN), i), mine);
  }
  std::vector<uint8_t> xb = bytesOf(x), bfb = bytesOf(bf), hb = bytesOf(h), ob(size_t(kN) * 12, 0xff);
  runOk(bl.finish(), kGridY, {&xb, &bfb, &hb, &ob});
  for (size_t j = 0; j < size_t(kN); ++j) {
    CAPTURE(j);
    CHECK(same(elementAt<float>(ob, j), x[j]));
    CHECK(same(elementAt<float>(ob, size_t(kN) + j), bf16ToFloat(bf[j])));
    CHECK(same(elementAt<float>(ob, 2 * size_t(kN) + j), halfToFloat(h[j])));
  }
}

TEST_CASE("kir interpret: shared wide stores and loads move consecutive words at once") {
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  std::vector<float> x = randomFloats(rng, size_t(kW) * 4);
  // Thread t stores x[4t .. 4t + 3] into the tile in wide runs (the tile
  // after a 2- or 4-word array, so its offset is a multiple of the width),
  // reads its own words back one by one (y) and thread t + 1's in wide runs
  // (z), then overwrites its words after a barrier: z keeps what was read.
  for (int64_t lead : {2, 4}) {
    CAPTURE(lead);
    Builder bl("shared_vec", kW, 1);
    int32_t in = bl.buffer("x", DType::F32, kW * 4, false), own = bl.buffer("y", DType::F32, kW * 4, true);
    int32_t next = bl.buffer("z", DType::F32, kW * 4, true);
    bl.shared("lead", Scalar::F32, lead);
    int32_t tile = bl.shared("tile", Scalar::F32, kW * 4);
    int64_t width = lead;
    V t = bl.local(), base = bl.mul(t, bl.i32(4));
    for (int64_t e = 0; e < 4; e += width) {
      std::vector<V> run;
      for (int64_t c = 0; c < width; ++c) run.push_back(bl.load(in, bl.add(base, bl.i32(e + c))));
      bl.sharedStoreVec(tile, bl.add(base, bl.i32(e)), run);
    }
    bl.barrier();
    V nb = bl.mul(bl.rem(bl.add(t, bl.i32(1)), bl.i32(kW)), bl.i32(4));
    std::vector<V> got;
    for (int64_t e = 0; e < 4; e += width) {
      std::vector<V> run = bl.sharedLoadVec(tile, bl.add(nb, bl.i32(e)), width);
      got.insert(got.end(), run.begin(), run.end());
    }
    for (int64_t e = 0; e < 4; ++e) bl.store(own, bl.add(base, bl.i32(e)), bl.sharedLoad(tile, bl.add(base, bl.i32(e))));
    bl.barrier();
    for (int64_t e = 0; e < 4; ++e) bl.sharedStore(tile, bl.add(base, bl.i32(e)), bl.f32(-1));
    bl.barrier();
    for (int64_t e = 0; e < 4; ++e) bl.store(next, bl.add(base, bl.i32(e)), got[size_t(e)]);
    std::vector<uint8_t> xb = bytesOf(x), yb(size_t(kW) * 16, 0xff), zb(size_t(kW) * 16, 0xff);
    runOk(bl.finish(), 1, {&xb, &yb, &zb});
    for (size_t j = 0; j < size_t(kW) * 4; ++j) {
      CAPTURE(j);
      CHECK(same(elementAt<float>(yb, j), x[j]));
      CHECK(same(elementAt<float>(zb, j), x[(j + 4) % x.size()]));
    }
  }
}

// The lane that holds element (i, j) of each Mma operand and which of its
// registers, as the PTX ISA draws the fragments (written here independently
// of kir::mmaA/B/C): m16n8k8.tf32 A 16 x 8 and B 8 x 8; m16n8k16 A 16 x 16
// and B 16 x 8; C and D 16 x 8 for both.
struct Slot {
  size_t lane, reg;
};
// A wave's m16n16k16 (AMD's matrix instruction calculator for CDNA 3's
// v_mfma_f32_16x16x16_bf16 and _f16): A[i][k] in lane i + 16 (k / 4),
// register k % 4; B[k][j] in lane j + 16 (k / 4), register k % 4; C and D
// [i][j] in lane j + 16 (i / 4), register i % 4.
bool wave(MatrixOp op) { return matrixShape(op).threads == 64; }
Slot slotA(MatrixOp op, size_t i, size_t j) {
  if (wave(op)) return {i + 16 * (j / 4), j % 4};
  if (op == MatrixOp::M16N8K8Tf32) return {(i % 8) * 4 + j % 4, (j / 4) * 2 + i / 8};
  return {(i % 8) * 4 + (j % 8) / 2, j % 2 + 2 * (i / 8) + 4 * (j / 8)};
}
Slot slotB(MatrixOp op, size_t i, size_t j) {
  if (wave(op)) return {j + 16 * (i / 4), i % 4};
  if (op == MatrixOp::M16N8K8Tf32) return {j * 4 + i % 4, i / 4};
  return {j * 4 + (i % 8) / 2, i % 2 + 2 * (i / 8)};
}
Slot slotC(MatrixOp op, size_t i, size_t j) {
  if (wave(op)) return {j + 16 * (i / 4), i % 4};
  return {(i % 8) * 4 + j / 2, (i / 8) * 2 + j % 2};
}

TEST_CASE("kir interpret: mma multiplies each warp's (or wave's) fragments as kir.h lays them out, every shape") {
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  for (const MatrixShape& shape : matrixShapes()) {
    if (shape.threads == 128) continue;  // a warpgroup's: the mma.shared tests
    CAPTURE(shape.name);
    // Two warps or waves (and a second workgroup in y), each with its own A, B and
    // C; every lane loads its operands, brings A and B to the shape's type
    // (toTf32, or a conversion to bf16 or f16) and stores D. Random f32
    // stand in for A and B whole, so the cut or the rounding must happen.
    // Expected: C plus the products of the cut operands, added exactly
    // (double) and rounded once.
    const int64_t kWarps = 2, kLanes = shape.threads, kThreads = kWarps * kLanes, kGroups = 2;
    size_t na = size_t(shape.aRegs), nb = size_t(shape.bRegs), per = na + nb + 4;
    std::vector<float> in = randomFloats(rng, size_t(kGroups * kThreads) * per);
    for (float& x : in)
      if (!std::isfinite(x)) x = 1.5f;  // special values are checked below
    Builder bl("mma", kThreads, 1);
    int32_t src = bl.buffer("in", DType::F32, kGroups * kThreads * int64_t(per), false);
    int32_t dst = bl.buffer("out", DType::F32, kGroups * kThreads * 4, true);
    V t = bl.add(bl.mul(bl.groupY(), bl.i32(kThreads)), bl.local());
    auto arg = [&](size_t e) { return bl.load(src, bl.add(bl.mul(t, bl.i32(int64_t(per))), bl.i32(int64_t(e)))); };
    Scalar ot = mmaOperand(shape.op);
    auto cut = [&](V x) { return ot == Scalar::F32 ? bl.toTf32(x) : bl.convert(x, ot); };
    std::vector<V> a, b;
    for (size_t e = 0; e < na; ++e) a.push_back(cut(arg(e)));
    for (size_t e = 0; e < nb; ++e) b.push_back(cut(arg(na + e)));
    std::array<V, 4> d = bl.mma(shape.op, a, b, {arg(na + nb), arg(na + nb + 1), arg(na + nb + 2), arg(na + nb + 3)});
    for (int64_t e = 0; e < 4; ++e) bl.store(dst, bl.add(bl.mul(t, bl.i32(4)), bl.i32(e)), d[size_t(e)]);
    std::vector<uint8_t> ib = bytesOf(in), ob(size_t(kGroups * kThreads * 4) * 4, 0xff);
    runOk(bl.finish(), kGroups, {&ib, &ob});
    auto cutHere = [&](float x) {
      if (ot == Scalar::F32) return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0xFFFFE000u);
      return ot == Scalar::BF16 ? bf16ToFloat(floatToBf16(x)) : halfToFloat(floatToHalf(x));
    };
    for (int64_t w = 0; w < kGroups * kWarps; ++w) {
      auto value = [&](Slot sl, size_t first) { return in[size_t(w * kLanes + int64_t(sl.lane)) * per + first + sl.reg]; };
      for (size_t i = 0; i < size_t(shape.m); ++i)
        for (size_t j = 0; j < size_t(shape.n); ++j) {
          CAPTURE(w);
          CAPTURE(i);
          CAPTURE(j);
          double sum = value(slotC(shape.op, i, j), na + nb);
          for (size_t k = 0; k < size_t(shape.k); ++k)
            sum += double(cutHere(value(slotA(shape.op, i, k), 0))) * double(cutHere(value(slotB(shape.op, k, j), na)));
          Slot sl = slotC(shape.op, i, j);
          CHECK(elementAt<float>(ob, size_t(w * kLanes + int64_t(sl.lane)) * 4 + sl.reg) == float(sum));
        }
    }
  }
}

// Thread and register of a warpgroup's D that hold element (i, j), as the
// PTX ISA draws wgmma's m64nNk16 accumulator (written here independently of
// kir::mmaGroupC): warp i / 16 has rows 16w .. 16w + 15, in m16n8 blocks
// side by side, four registers a block.
Slot slotGroupD(size_t i, size_t j) {
  return {(i / 16) * 32 + (i % 8) * 4 + (j % 8) / 2, (j / 8) * 4 + ((i % 16) / 8) * 2 + j % 2};
}

// Elements 0 .. elems - 1 of buffer `in` (f32), converted to ot, into the
// same elements of workgroup array `tiles`, by a workgroup of `threads`;
// then a barrier.
void stageTiles(Builder& bl, int32_t in, int32_t tiles, int64_t elems, int64_t threads, Scalar ot) {
  V t = bl.local();
  bl.forRange(bl.i32(0), bl.i32(elems), threads, [&](V e0) {
    V e = bl.add(e0, t);
    bl.ifThen(bl.lt(e, bl.i32(elems)), [&] { bl.sharedStore(tiles, e, bl.convert(bl.load(in, e), ot)); });
  });
  bl.barrier();
}

TEST_CASE("kir interpret: mma.shared multiplies each warpgroup's tiles from workgroup memory as kir.h lays them out") {
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  for (MatrixOp op : {MatrixOp::M64NK16Bf16, MatrixOp::M64NK16F16})
    for (int64_t n : {8, 40, 256}) {
      std::string name = matrixShape(op).name;
      CAPTURE(name);
      CAPTURE(n);
      // Two warpgroups, each with its own A (64 rows of 64 keys) and B (n
      // rows of 64 keys) in one workgroup array, and its own C: every
      // thread stores its share of the array's elements as they are
      // (converted from random f32), then each warpgroup multiplies keys 16
      // .. 47 as a chain of two links. A's 8-row blocks lie 2048 elements
      // apart (every other 1024 bytes), B's 512.
      constexpr int64_t kThreads = 256, kA = 128 * 64;
      int64_t perGroup = kA + n * 64, elems = 2 * perGroup, c = n / 2;
      std::vector<float> src = randomFloats(rng, size_t(elems + kThreads * c));
      for (float& x : src)
        if (!std::isfinite(x) || std::abs(x) > 1e4f) x = 0.75f;
      Builder bl("mma_shared", kThreads, 1);
      int32_t in = bl.buffer("in", DType::F32, int64_t(src.size()), false);
      int32_t out = bl.buffer("out", DType::F32, kThreads * c, true);
      Scalar ot = mmaOperand(op);
      int32_t tiles = bl.shared("tiles", ot, elems);
      V t = bl.local();
      stageTiles(bl, in, tiles, elems, kThreads, ot);
      V base = bl.mul(bl.div(t, bl.i32(128)), bl.i32(perGroup));
      auto aTile = [&](int64_t ks) { return Builder::SharedTile{bl.add(base, bl.i32(16 + ks * 16)), bl.i32(1024)}; };
      auto bTile = [&](int64_t ks) { return Builder::SharedTile{bl.add(base, bl.i32(kA + 16 + ks * 16)), bl.i32(512)}; };
      std::vector<V> cs;
      for (int64_t e = 0; e < c; ++e) cs.push_back(bl.load(in, bl.add(bl.i32(elems + e), bl.mul(t, bl.i32(c)))));
      V d = bl.mmaShared(bl.mmaShared(op, tiles, aTile(0), bTile(0), cs), aTile(1), bTile(1));
      std::vector<V> ds = bl.mmaWait(0, bl.mmaResult(d));
      for (int64_t e = 0; e < c; ++e) bl.store(out, bl.add(bl.mul(t, bl.i32(c)), bl.i32(e)), ds[size_t(e)]);
      std::vector<uint8_t> ib = bytesOf(src), ob(size_t(kThreads * c) * 4, 0xff);
      runOk(bl.finish(), 1, {&ib, &ob});
      auto stored = [&](size_t i) { return ot == Scalar::BF16 ? bf16ToFloat(floatToBf16(src[i])) : halfToFloat(floatToHalf(src[i])); };
      // The element (row, key) of rows of 64 keys from `first`, 8-row
      // blocks `block` elements apart, as PTX's 128-byte swizzle stores it:
      // the 16-byte run key / 8 of row r at run (key / 8) ^ (r % 8).
      auto at = [](size_t first, size_t block, size_t r, size_t key) {
        return first + (r / 8) * block + (r % 8) * 64 + (((key / 8) ^ (r % 8)) * 8) + key % 8;
      };
      int64_t bad = 0;
      for (size_t w = 0; w < 2; ++w)
        for (size_t i = 0; i < 64; ++i)
          for (size_t j = 0; j < size_t(n); ++j) {
            Slot sl = slotGroupD(i, j);
            size_t thread = w * 128 + sl.lane;
            double sum = src[size_t(elems) + thread * size_t(c) + sl.reg], mag = std::abs(sum);
            for (size_t k = 16; k < 48; ++k) {
              double p = double(stored(at(w * size_t(perGroup), 1024, i, k))) *
                         double(stored(at(w * size_t(perGroup) + size_t(kA), 512, j, k)));
              sum += p;
              mag += std::abs(p);
            }
            // Two links, each rounding its sum to f32 once: within 2^-24 of
            // the first link's magnitude and of the result's.
            float got = elementAt<float>(ob, thread * size_t(c) + sl.reg);
            if (std::abs(double(got) - sum) > 0x1p-23 * mag) ++bad;
          }
      CHECK(bad == 0);
    }
}

TEST_CASE("kir interpret: mma.shared.b multiplies A from the threads by an N-major B from workgroup memory") {
  uint64_t seed = freshSeed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  for (MatrixOp op : {MatrixOp::M64NK16Bf16, MatrixOp::M64NK16F16})
    for (int64_t n : {8, 72, 256}) {
      std::string name = matrixShape(op).name;
      CAPTURE(name);
      CAPTURE(n);
      // Two warpgroups, each with its own B (32 rows of n columns, the
      // columns in blocks of 64 that lie 2048 elements apart, rows of 64 in
      // 8-row blocks 512 apart) in one workgroup array, its own A (each
      // thread's 8 operands of two links, loaded) and its own C. Each
      // multiplies keys 0 .. 31 as a chain of two links.
      constexpr int64_t kThreads = 256;
      int64_t blocks = (n + 63) / 64, perGroup = blocks * 2048, elems = 2 * perGroup, c = n / 2;
      std::vector<float> src = randomFloats(rng, size_t(elems + kThreads * (16 + c)));
      for (float& x : src)
        if (!std::isfinite(x) || std::abs(x) > 1e4f) x = -0.625f;
      Builder bl("mma_shared_b", kThreads, 1);
      int32_t in = bl.buffer("in", DType::F32, int64_t(src.size()), false);
      int32_t out = bl.buffer("out", DType::F32, kThreads * c, true);
      Scalar ot = mmaOperand(op);
      int32_t tiles = bl.shared("tiles", ot, elems);
      V t = bl.local();
      stageTiles(bl, in, tiles, elems, kThreads, ot);
      auto arg = [&](int64_t e) { return bl.load(in, bl.add(bl.i32(elems + e), bl.mul(t, bl.i32(16 + c)))); };
      std::array<std::vector<V>, 2> a;
      for (int64_t e = 0; e < 16; ++e) a[size_t(e / 8)].push_back(bl.convert(arg(e), ot));
      std::vector<V> cs;
      for (int64_t e = 0; e < c; ++e) cs.push_back(arg(16 + e));
      V base = bl.mul(bl.div(t, bl.i32(128)), bl.i32(perGroup));
      auto bTile = [&](int64_t ks) { return Builder::NMajorTile{bl.add(base, bl.i32(ks * 1024)), bl.i32(512), bl.i32(2048)}; };
      V d = bl.mmaSharedB(bl.mmaSharedB(op, tiles, a[0], bTile(0), cs), a[1], bTile(1));
      std::vector<V> ds = bl.mmaWait(0, bl.mmaResult(d));
      for (int64_t e = 0; e < c; ++e) bl.store(out, bl.add(bl.mul(t, bl.i32(c)), bl.i32(e)), ds[size_t(e)]);
      std::vector<uint8_t> ib = bytesOf(src), ob(size_t(kThreads * c) * 4, 0xff);
      runOk(bl.finish(), 1, {&ib, &ob});
      auto stored = [&](float x) { return ot == Scalar::BF16 ? bf16ToFloat(floatToBf16(x)) : halfToFloat(floatToHalf(x)); };
      // B's (k, j) from `first`, as PTX's 128-byte swizzle stores it: the
      // 16-byte run (j % 64) / 8 of row k at run ((j % 64) / 8) ^ (k % 8).
      auto bAt = [](size_t first, size_t k, size_t j) {
        return first + (k / 8) * 512 + (k % 8) * 64 + (j / 64) * 2048 + ((((j % 64) / 8) ^ (k % 8)) * 8) + j % 8;
      };
      // A's (i, k) of link k / 16: warp i / 16's m16n8k16 A fragment.
      auto aOf = [&](size_t w, size_t i, size_t k) {
        Slot sl = slotA(MatrixOp::M16N8K16Bf16, i % 16, k % 16);
        size_t thread = w * 128 + (i / 16) * 32 + sl.lane;
        return stored(src[size_t(elems) + thread * size_t(16 + c) + (k / 16) * 8 + sl.reg]);
      };
      int64_t bad = 0;
      for (size_t w = 0; w < 2; ++w)
        for (size_t i = 0; i < 64; ++i)
          for (size_t j = 0; j < size_t(n); ++j) {
            Slot sl = slotGroupD(i, j);
            size_t thread = w * 128 + sl.lane;
            double sum = src[size_t(elems) + thread * size_t(16 + c) + 16 + sl.reg], mag = std::abs(sum);
            for (size_t k = 0; k < 32; ++k) {
              double p = double(aOf(w, i, k)) * double(stored(src[bAt(w * size_t(perGroup), k, j)]));
              sum += p;
              mag += std::abs(p);
            }
            float got = elementAt<float>(ob, thread * size_t(c) + sl.reg);
            if (std::abs(double(got) - sum) > 0x1p-23 * mag) ++bad;
          }
      CHECK(bad == 0);
    }
}

TEST_CASE("kir: mma.shared.b errors: a operands computed inside the chain, mixed chains, tiles not as kir.h has them") {
  // %0 .. %2 the indices, %3 one, %4 a bf16 one, %5 the head; the link's
  // a operand 3 a fresh convert (%7) when `late`.
  auto kernel = [](bool late, int64_t start) {
    Builder bl("group_b", 128, 1);
    int32_t tiles = bl.shared("tiles", Scalar::BF16, 32 * 64);
    V zero = bl.i32(int32_t(start)), rows = bl.i32(512), blocks = bl.i32(2048), f = bl.f32(1);
    V h16 = bl.convert(f, Scalar::BF16);
    std::vector<V> a(8, h16);
    V h = bl.mmaSharedB(MatrixOp::M64NK16Bf16, tiles, a, {zero, rows, blocks}, {f, f, f, f});
    std::vector<V> a2 = a;
    if (late) a2[3] = bl.convert(bl.f32(2), Scalar::BF16);
    bl.mmaWait(0, bl.mmaResult(bl.mmaSharedB(h, a2, {bl.add(zero, bl.i32(1024)), rows, blocks})));
    return bl.finish();
  };
  CHECK(bool(verify(kernel(false, 0))));
  runOk(kernel(false, 0), 1, {});
  CHECK(errorOf(verify(kernel(true, 0))) ==
        "kernel group_b: %10 (mma.shared.b): takes a operand %7, defined after its chain's first link %5");
  CHECK(errorOf(interpret(kernel(false, 64), 1, {})) ==
        "kernel group_b: %5 (mma.shared.b): B's start 64 is not as kir.h has it in workgroup (0, 0) thread 0");
  CHECK(errorOf(interpret(kernel(false, 1024), 1, {})) ==  // the second link's rows start at the array's end
        "kernel group_b: %8 (mma.shared.b): B's element (0, 0) is outside shared 0 (tiles) in workgroup (0, 0) thread 0");
  Kernel k = kernel(false, 0);
  k.insts[5].args[2] = 3;  // an f32 where a bf16 a operand stands
  CHECK(errorOf(verify(k)).find("kernel group_b: %5 (mma.shared.b): a ") == 0);
  // A link of one opcode onto a chain of the other is no chain: its last
  // operand is taken as its one c operand.
  Builder bl("mixed", 128, 1);
  int32_t tiles = bl.shared("tiles", Scalar::BF16, 64 * 64 + 8 * 64);
  V zero = bl.i32(0), rows = bl.i32(512), f = bl.f32(1);
  V h = bl.mmaShared(MatrixOp::M64NK16Bf16, tiles, {zero, rows}, {bl.i32(64 * 64), rows}, {f, f, f, f});
  Kernel mixed = bl.finish();
  Inst link{Opc::MmaSharedB, Scalar::F32, std::vector<V>(8, 0)};
  link.args.insert(link.args.end(), {0, 1, 1, h});
  link.ref = int32_t(MatrixOp::M64NK16Bf16);
  mixed.insts.push_back(link);
  mixed.body.items.push_back(V(mixed.insts.size() - 1));
  CHECK(!verify(mixed));
}

TEST_CASE("kir: mma.shared errors: chains broken or shared, warpgroups split, tiles off their array") {
  // %0 .. %3 constants, %4 the head, %5 the link's row stride and %6 the
  // link (%5 a barrier, %6 the stride and %7 the link, with one between).
  auto kernel = [](int64_t threads, bool barrierBetween) {
    Builder bl("group", threads, 1);
    int32_t tiles = bl.shared("tiles", Scalar::BF16, 64 * 64 + 8 * 64);
    V zero = bl.i32(0), b0 = bl.i32(64 * 64), f = bl.f32(1);
    V h = bl.mmaShared(MatrixOp::M64NK16Bf16, tiles, {zero, bl.i32(512)}, {b0, zero}, {f, f, f, f});
    if (barrierBetween) bl.barrier();
    bl.mmaResult(bl.mmaShared(h, {zero, bl.i32(512)}, {b0, zero}));
    return bl.finish();
  };
  CHECK(bool(verify(kernel(128, false))));
  CHECK(errorOf(verify(kernel(64, false))) ==
        "kernel group: %4 (mma.shared) in a workgroup of 64 threads, not whole warpgroups of 128");
  CHECK(errorOf(verify(kernel(128, true))) == "kernel group: %7 (mma.shared): chains onto %4 across %5 (barrier)");
  Kernel k = kernel(128, false);
  k.insts.push_back(Inst{Opc::Lane, Scalar::F32, {4}});  // reads the head, which the link chains onto
  k.body.items.push_back(V(k.insts.size() - 1));
  CHECK(errorOf(verify(k)) == "kernel group: %6 (mma.shared): chains onto %4, which has 1 other uses");
  k = kernel(128, false);
  k.insts[4].ref = int32_t(MatrixOp::M16N8K16Bf16);
  CHECK(errorOf(verify(k)) == "kernel group: %4 (mma.shared): matrix op 1 is not a warpgroup's one of ir/matrix.h");
  k = kernel(128, false);
  k.insts[4].args.pop_back();
  CHECK(errorOf(verify(k)) == "kernel group: %4 (mma.shared): 3 accumulators: n = 6 is not a multiple of 8 up to 256");
  k = kernel(128, false);
  k.shared[0].type = Scalar::F16;
  CHECK(errorOf(verify(k)) == "kernel group: %4 (mma.shared): reads shared 0 (tiles) of f16, not bf16");
  k = kernel(128, false);
  k.shared.insert(k.shared.begin(), Shared{"before", Scalar::F32, 4});
  k.insts[4].imm = k.insts[6].imm = 1;
  CHECK(errorOf(verify(k)) == "kernel group: %4 (mma.shared): shared 1 (tiles) does not start at a multiple of 1024 bytes");

  // In the interpreter: B's tile runs off the array; a start that differs
  // between the threads of a warpgroup; a start whose 16 keys leave their row.
  k = kernel(128, false);
  k.shared[0].elems = 64 * 64 + 4 * 64;  // B's rows 4 .. 7 past the end
  CHECK(errorOf(interpret(k, 1, {})) ==
        "kernel group: %4 (mma.shared): B's element (0, 4) is outside shared 0 (tiles) in workgroup (0, 0) thread 0");
  k = kernel(128, false);
  k.insts[0].imm = 56;  // A's and B's start (b0 is another constant): keys 56 .. 71
  CHECK(errorOf(interpret(k, 1, {})) ==
        "kernel group: %4 (mma.shared): A's start 56 or row stride 512 is not as kir.h has them in workgroup (0, 0) thread 0");
  Builder bl("split", 256, 1);
  int32_t tiles = bl.shared("tiles", Scalar::F16, 64 * 64 * 3);
  V zero = bl.i32(0), f = bl.f32(0);
  V start = bl.mul(bl.rem(bl.local(), bl.i32(2)), bl.i32(8));
  bl.mmaResult(bl.mmaShared(MatrixOp::M64NK16F16, tiles, {start, zero}, {zero, zero}, {f, f, f, f}));
  CHECK(errorOf(interpret(bl.finish(), 1, {})) ==
        "kernel split: %7 (mma.shared): operand 0 differs between threads of the warpgroup (8 and 0) in workgroup (0, 0) thread 1");
}

// A warpgroup's chains in flight (kir.h, MmaWait): two chains of one link,
// the second onto the first's accumulators through variables, the first
// finished by a wait for at most one pending chain, the second by a wait
// for none (`finish`) that gives the sums back. Before or after the first
// wait the kernel may store into element `overwrite` of the array.
Kernel pendingChains(int64_t overwrite, bool afterWait, bool finish) {
  constexpr int64_t kTile = 64 * 64 + 8 * 64, kSecond = kTile;  // A's 64 rows and B's 8, twice
  Builder bl("pending", 128, 1);
  int32_t out = bl.buffer("out", DType::F32, 128 * 4, true);
  int32_t tiles = bl.shared("tiles", Scalar::BF16, 2 * kTile);
  V t = bl.local();
  bl.forRange(bl.i32(0), bl.i32(2 * kTile), 128, [&](V e) {
    V x = bl.add(e, t);
    bl.sharedStore(tiles, x, bl.convert(bl.convert(bl.rem(x, bl.i32(7)), Scalar::F32), Scalar::BF16));
  });
  bl.barrier();
  V stride = bl.i32(512), f = bl.f32(1);
  auto store = [&] { bl.sharedStore(tiles, bl.i32(int32_t(overwrite)), bl.convert(bl.f32(100), Scalar::BF16)); };
  std::vector<int32_t> acc;
  for (V x : bl.mmaResult(bl.mmaShared(MatrixOp::M64NK16Bf16, tiles, {bl.i32(0), stride}, {bl.i32(64 * 64), stride},
                                       {f, f, f, f})))
    acc.push_back(bl.var(Scalar::F32, x));
  std::vector<V> c;
  for (int32_t x : acc) c.push_back(bl.get(x));
  V second = bl.mmaShared(MatrixOp::M64NK16Bf16, tiles, {bl.i32(kSecond), stride}, {bl.i32(kSecond + 64 * 64), stride}, c);
  std::vector<V> d = bl.mmaResult(second);
  if (overwrite >= 0 && !afterWait) store();
  bl.mmaWait(1, {});
  if (overwrite >= 0 && afterWait) store();
  if (finish) {
    std::vector<V> sums = bl.mmaWait(0, d);
    for (int64_t e = 0; e < 4; ++e) bl.store(out, bl.add(bl.mul(t, bl.i32(4)), bl.i32(e)), sums[size_t(e)]);
  }
  return bl.finish();
}

TEST_CASE("kir: mma.wait finishes chains oldest first, each chain's tiles kept until then, a chain's D read through it") {
  std::vector<uint8_t> ob(128 * 4 * 4, 0xff);
  // Element 64 * 64 is B's row 0, key 0 of the first chain (its 128-byte
  // run is not moved by the swizzle); kSecond the second chain's A's.
  constexpr int64_t kFirstB = 64 * 64, kSecondA = 64 * 64 + 8 * 64;
  runOk(pendingChains(-1, false, true), 1, {&ob});
  runOk(pendingChains(kFirstB, true, true), 1, {&ob});  // the first chain is finished by then
  CHECK(errorOf(interpret(pendingChains(kFirstB, false, true), 1, {&ob})) ==
        "kernel pending: %39 (mma.wait): byte 8192 of shared 0 (tiles), which warpgroup 0's chain of %15 read, changed "
        "before this wait finished it in workgroup (0, 0)");
  CHECK(errorOf(interpret(pendingChains(kSecondA, true, true), 1, {&ob})) ==
        "kernel pending: %40 (mma.wait): byte 9216 of shared 0 (tiles), which warpgroup 0's chain of %30 read, changed "
        "before this wait finished it in workgroup (0, 0)");
  CHECK(errorOf(interpret(pendingChains(-1, false, false), 1, {&ob})) ==
        "kernel pending: warpgroup 0 of workgroup (0, 0) ends with the chain of %30 not waited for");

  // The verifier: a chain's Lane, or an accumulator set from one, read by
  // anything but a set, a later chain's c operands or a wait.
  auto early = [](bool throughVar) {
    Builder bl("early", 128, 1);
    int32_t out = bl.buffer("out", DType::F32, 128, true);
    int32_t tiles = bl.shared("tiles", Scalar::BF16, 64 * 64 + 8 * 64);
    V f = bl.f32(1);
    V x = bl.mmaResult(bl.mmaShared(MatrixOp::M64NK16Bf16, tiles, {bl.i32(0), bl.i32(512)}, {bl.i32(64 * 64), bl.i32(512)},
                                    {f, f, f, f}))[0];
    if (throughVar) x = bl.get(bl.var(Scalar::F32, x));
    bl.store(out, bl.local(), bl.add(x, f));
    bl.mmaWait(0, {});
    return bl.finish();
  };
  CHECK(errorOf(verify(early(false))) ==
        "kernel early: %10 (add): reads %6, a matrix chain's result, before an mma.wait gives it back");
  CHECK(errorOf(verify(early(true))) ==
        "kernel early: %12 (add): reads %11, a matrix chain's result, before an mma.wait gives it back");
}

TEST_CASE("kir interpret: toTf32 keeps sign, exponent and 10 mantissa bits, NaN and infinities stay") {
  const float in[] = {1.0f + 0x1.0p-10f + 0x1.0p-11f, -3.14159f, std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                      std::bit_cast<float>(0x7F800001u), std::numeric_limits<float>::max(), -0.0f};
  const float want[] = {1.0f + 0x1.0p-10f, std::bit_cast<float>(std::bit_cast<uint32_t>(-3.14159f) & 0xFFFFE000u),
                        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        std::bit_cast<float>(0x7F7FE000u), -0.0f};
  Builder bl("tf32", 8, 1);
  int32_t x = bl.buffer("x", DType::F32, 8, false), y = bl.buffer("y", DType::F32, 8, true);
  bl.store(y, bl.local(), bl.toTf32(bl.load(x, bl.local())));
  std::vector<uint8_t> xb = bytesOf(std::vector<float>(std::begin(in), std::end(in))), yb(32, 0);
  runOk(bl.finish(), 1, {&xb, &yb});
  for (size_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    // A NaN whose only set mantissa bits are low ones comes out infinite
    // (the bits toTf32 keeps); every other value keeps its kind.
    CHECK(same(elementAt<float>(yb, i), want[i]));
  }
}

// Asynchronous copies: each thread copies 16 bytes (4 f32) of its own run,
// or zeros where told; a read of the destination before the wait sees what
// was there (the interpreter lands a group at its wait), after the wait and
// a barrier every thread sees every thread's copy. Two groups in flight,
// waited for one at a time.
TEST_CASE("kir interpret: copy.async lands a group at the wait that finishes it") {
  constexpr int64_t kT = 8;
  Builder bl("copies", kT, 1);
  int32_t src = bl.buffer("src", DType::F32, 2 * kT * 4, false), dst = bl.buffer("dst", DType::F32, 3 * kT * 4, true);
  int32_t tile = bl.shared("tile", Scalar::F32, 2 * kT * 4);
  V t = bl.local();
  V mine = bl.mul(t, bl.i32(4));
  bl.sharedStore(tile, mine, bl.f32(-1));
  bl.sharedStore(tile, bl.add(mine, bl.i32(kT * 4)), bl.f32(-1));
  V odd = bl.eq(bl.rem(t, bl.i32(2)), bl.i32(1));
  bl.copyAsync(src, mine, tile, mine, bl.boolean(true));
  bl.asyncCommit();
  bl.copyAsync(src, bl.add(mine, bl.i32(kT * 4)), tile, bl.add(mine, bl.i32(kT * 4)), odd);  // zeros on even threads
  bl.asyncCommit();
  bl.store(dst, mine, bl.sharedLoad(tile, mine));  // before any wait: the -1 stored above
  bl.asyncWait(1);
  bl.barrier();
  V partner = bl.mul(bl.rem(bl.add(t, bl.i32(1)), bl.i32(kT)), bl.i32(4));  // another thread's copy
  bl.store(dst, bl.add(mine, bl.i32(kT * 4)), bl.sharedLoad(tile, partner));
  bl.asyncWait(0);
  bl.barrier();
  bl.store(dst, bl.add(mine, bl.i32(2 * kT * 4)), bl.sharedLoad(tile, bl.add(partner, bl.i32(kT * 4 + 3))));
  std::vector<float> in(2 * kT * 4);
  for (size_t i = 0; i < in.size(); ++i) in[i] = float(i) + 0.5f;
  std::vector<uint8_t> ib = bytesOf(in), ob(3 * kT * 4 * 4, 0);
  runOk(bl.finish(), 1, {&ib, &ob});
  for (int64_t i = 0; i < kT; ++i) {
    CAPTURE(i);
    int64_t p = (i + 1) % kT;
    CHECK(elementAt<float>(ob, size_t(i * 4)) == -1.0f);
    CHECK(elementAt<float>(ob, size_t(kT * 4 + i * 4)) == in[size_t(p * 4)]);
    CHECK(elementAt<float>(ob, size_t(2 * kT * 4 + i * 4)) == (p % 2 ? in[size_t(kT * 4 + p * 4 + 3)] : 0.0f));
  }
}

TEST_CASE("kir: copy.async errors: unwaited copies, runs off their arrays, and what the verifier refuses") {
  auto kernel = [](int64_t srcElems, int64_t at, bool wait) {
    Builder bl("cp", 1, 1);
    int32_t src = bl.buffer("src", DType::BF16, srcElems, false);
    int32_t tile = bl.shared("tile", Scalar::BF16, 16);
    V from = bl.i32(at), to = bl.i32(8), ok = bl.boolean(true);
    bl.copyAsync(src, from, tile, to, ok);
    bl.asyncCommit();
    if (wait) bl.asyncWait(0);
    return bl.finish();
  };
  std::vector<uint8_t> src(64, 0);
  CHECK(bool(interpret(kernel(32, 8, true), 1, {&src})));
  CHECK(errorOf(interpret(kernel(32, 8, false), 1, {&src})) ==
        "kernel cp: thread 0 of workgroup (0, 0) ends with copies not waited for");
  CHECK(errorOf(interpret(kernel(32, 4, true), 1, {&src})).find("elements [4, 12) are not an aligned run in [0, 32) of "
                                                                "buffer 0 (src)") != std::string::npos);
  CHECK(errorOf(interpret(kernel(12, 8, true), 1, {&src})).find("elements [8, 16) are not an aligned run") !=
        std::string::npos);
  Kernel k = kernel(32, 8, true);
  k.shared[0].type = Scalar::F16;
  CHECK(errorOf(verify(k)) == "kernel cp: %3 (copy.async): copies bf16 into shared 0 of f16");
  k = kernel(32, 8, true);
  k.buffers[0].written = true;
  CHECK(errorOf(verify(k)) == "kernel cp: %3 (copy.async): copies from buffer 0 (src), which is written");
  k = kernel(32, 8, true);
  k.shared.insert(k.shared.begin(), Shared{"lead", Scalar::BF16, 4});
  k.insts[3].imm = 1;
  CHECK(errorOf(verify(k)) == "kernel cp: %3 (copy.async): shared 1 (tile) does not start at a multiple of 16 bytes");
  CHECK(print(kernel(32, 8, true)).find("copy.async s0[%1] <- b0[%0] if %2") != std::string::npos);
}

TEST_CASE("kir interpret: shuffle.xor gives the value of the partner lane of the same warp") {
  for (int64_t mask : {1, 2, 4, 16, 31}) {
    CAPTURE(mask);
    Builder bl("shfl", 64, 1);
    int32_t y = bl.buffer("y", DType::F32, 64, true), z = bl.buffer("z", DType::I32, 64, true);
    V t = bl.local();
    bl.store(y, t, bl.shuffleXor(bl.convert(bl.mul(t, bl.i32(3)), Scalar::F32), mask));
    bl.store(z, t, bl.shuffleXor(bl.sub(bl.i32(1000), t), mask));
    std::vector<uint8_t> yb(256, 0), zb(256, 0);
    runOk(bl.finish(), 1, {&yb, &zb});
    for (int64_t i = 0; i < 64; ++i) {
      int64_t partner = (i & ~31) | ((i & 31) ^ mask);
      CHECK(elementAt<float>(yb, size_t(i)) == float(3 * partner));
      CHECK(elementAt<int32_t>(zb, size_t(i)) == 1000 - partner);
    }
  }
}

TEST_CASE("kir interpret: out-of-bounds accesses and other run-time errors") {
  SUBCASE("an m16n8k8.tf32 mma operand that is not tf32") {
    Builder bl("mma_bits", 32, 1);
    V one = bl.f32(1), third = bl.f32(1.0 / 3);
    bl.mma(MatrixOp::M16N8K8Tf32, {one, one, one, one}, {one, third}, {one, one, one, one});
    CHECK(errorOf(interpret(bl.finish(), 1, {})) ==
          "kernel mma_bits: %2 (mma): operand 5 is not a tf32 value (its low 13 bits are 2731) in workgroup (0, 0) "
          "thread 0");
  }
  SUBCASE("a wide load off its alignment or past the buffer") {
    for (int64_t start : {2, 8}) {
      Builder bl("vec_oob", 2, 1);
      int32_t in = bl.buffer("x", DType::F32, 10, false), out = bl.buffer("y", DType::F32, 2, true);
      std::vector<V> run = bl.loadVec(in, bl.add(bl.mul(bl.local(), bl.i32(4)), bl.i32(start)), 4);
      bl.store(out, bl.local(), run[3]);
      std::vector<uint8_t> x(40), y(8);
      std::string e = errorOf(interpret(bl.finish(), 1, {&x, &y}));
      CAPTURE(e);
      CHECK(e.find(start == 2 ? "(load.vec): elements [2, 6) are not an aligned run in [0, 10) of buffer 0 (x) in "
                                "workgroup (0, 0) thread 0"
                              : "(load.vec): elements [8, 12) are not an aligned run in [0, 10) of buffer 0 (x) in "
                                "workgroup (0, 0) thread 0") != std::string::npos);
    }
  }
  SUBCASE("a shared wide load or store off its alignment or past the array") {
    for (bool load : {true, false})
      for (int64_t start : {2, 8}) {
        Builder bl("shared_vec_oob", 2, 1);
        int32_t out = bl.buffer("y", DType::F32, 2, true), sh = bl.shared("s", Scalar::F32, 10);
        V at = bl.add(bl.mul(bl.local(), bl.i32(4)), bl.i32(start));
        if (load) bl.store(out, bl.local(), bl.sharedLoadVec(sh, at, 4)[3]);
        else bl.sharedStoreVec(sh, at, {bl.f32(1), bl.f32(2), bl.f32(3), bl.f32(4)});
        std::vector<uint8_t> y(8);
        std::string e = errorOf(interpret(bl.finish(), 1, {&y}));
        CAPTURE(e);
        CHECK(e.find(std::string(load ? "(shared.load.vec)" : "(shared.store.vec)") + ": elements [" +
                     (start == 2 ? "2, 6" : "8, 12") +
                     ") are not an aligned run in [0, 10) of shared 0 (s) in workgroup (0, 0) thread 0") !=
              std::string::npos);
      }
  }
  SUBCASE("a load past the buffer's elements names the kernel, the instruction and the index") {
    Builder bl("oob_load", 8, 1);
    int32_t in = bl.buffer("x", DType::F32, 10, false), out = bl.buffer("y", DType::F32, 16, true);
    V i = bl.add(bl.local(), bl.i32(5));
    V ld = bl.load(in, i);
    bl.store(out, i, ld);
    std::vector<uint8_t> x(64), y(64);
    std::string e = errorOf(interpret(bl.finish(), 1, {&x, &y}));
    CHECK(e == "kernel oob_load: %" + std::to_string(ld) +
                   " (load): index 10 outside [0, 10) of buffer 0 (x) in workgroup (0, 0) thread 5");
  }
  SUBCASE("a store past the bytes bound") {
    Builder bl("oob_store", 4, 1);
    int32_t out = bl.buffer("y", DType::I32, 8, true);
    bl.store(out, bl.add(bl.local(), bl.i32(4)), bl.local());
    std::vector<uint8_t> y(24);  // 6 elements, fewer than declared
    CHECK(errorOf(interpret(bl.finish(), 1, {&y})).find("(store): index 6 outside [0, 6) of buffer 0 (y)") !=
          std::string::npos);
  }
  SUBCASE("a negative shared index") {
    Builder bl("oob_shared", 4, 1);
    int32_t sh = bl.shared("m", Scalar::I32, 4);
    bl.sharedStore(sh, bl.sub(bl.local(), bl.i32(1)), bl.local());
    CHECK(errorOf(interpret(bl.finish(), 1, {})).find("(shared.store): index -1 outside [0, 4) of shared 0 (m)") !=
          std::string::npos);
  }
  SUBCASE("integer division by zero") {
    Builder bl("div0", 4, 1);
    int32_t out = bl.buffer("y", DType::I32, 4, true);
    bl.store(out, bl.local(), bl.div(bl.i32(7), bl.sub(bl.local(), bl.i32(2))));
    Kernel k = bl.finish();
    CHECK(errorOf(interpret(k, 1, {nullptr})) == "kernel div0: buffer 0 not bound");
    std::vector<uint8_t> y(16);
    CHECK(errorOf(interpret(k, 1, {&y})).find("division by zero in workgroup (0, 0) thread 2") != std::string::npos);
  }
  SUBCASE("a shift amount out of range") {
    Builder bl("shift", 1, 1);
    int32_t out = bl.buffer("y", DType::I32, 1, true);
    bl.store(out, bl.i32(0), bl.binary(Opc::Shl, bl.i32(1), bl.i32(32)));
    std::vector<uint8_t> y(4);
    CHECK(errorOf(interpret(bl.finish(), 1, {&y})).find("shift amount 32 outside [0, 32)") != std::string::npos);
  }
  SUBCASE("the wrong number of buffers") {
    Builder bl("count", 1, 1);
    bl.buffer("y", DType::I32, 1, true);
    CHECK(errorOf(interpret(bl.finish(), 1, {})) == "kernel count: 0 buffers bound, 1 declared");
  }
}

TEST_CASE("kir verify: rejects each malformed kernel") {
  SUBCASE("warp operations: whole warps, uniform control, their operands") {
    auto shuffled = [](int64_t threads, bool underPerThreadIf) {
      Builder bl("warp", threads, 1);
      auto body = [&] { bl.shuffleXor(bl.f32(1), 1); };
      if (underPerThreadIf) {
        V t = bl.local();
        bl.ifThen(bl.lt(t, bl.i32(16)), body);
      } else {
        body();
      }
      return bl.finish();
    };
    CHECK(bool(verify(shuffled(64, false))));
    CHECK(errorOf(verify(shuffled(48, false))) ==
          "kernel warp: %1 (shuffle.xor) in a workgroup of 48 threads, not whole warps of 32");
    CHECK(errorOf(verify(shuffled(32, true))) ==
          "kernel warp: %5 (shuffle.xor): inside %3 (if), whose condition depends on the thread");
    Kernel k = shuffled(32, false);
    k.insts[1].imm = 32;
    CHECK(errorOf(verify(k)) == "kernel warp: %1 (shuffle.xor): lane mask 32 outside [1, 32)");
    k.insts[1].imm = 1;
    k.insts[1].type = Scalar::Bool;
    CHECK(errorOf(verify(k)) == "kernel warp: %1 (shuffle.xor): result type bool, expected f32");
    Builder bl("mma", 32, 1);
    V one = bl.f32(1);
    bl.mma(MatrixOp::M16N8K8Tf32, {one, one, one, one}, {one, one}, {one, one, one, one});
    Kernel m = bl.finish();  // %0 the constant, %1 the mma, %2 .. %5 its lanes
    CHECK(bool(verify(m)));
    m.insts[5].imm = 4;
    CHECK(errorOf(verify(m)) == "kernel mma: %5 (lane): lane 4 of a mma of 4");
    m.insts[5].imm = 0;
    m.insts[1].ref = int32_t(MatrixOp::M16N8K16Bf16);  // f32 operands where bf16 ones belong
    CHECK(errorOf(verify(m)) == "kernel mma: %1 (mma): 10 operands, expected 16");
    m.insts[1].ref = 7;
    CHECK(errorOf(verify(m)) == "kernel mma: %1 (mma): matrix op 7 is not one of ir/matrix.h's");
    m.insts[1].ref = int32_t(MatrixOp::M64NK16Bf16);
    CHECK(errorOf(verify(m)) == "kernel mma: %1 (mma): m64nNk16.bf16 is not a warp's or a wave's matrix op");
    m.insts[1].ref = int32_t(MatrixOp::M16N8K8Tf32);
    m.insts[5].imm = 3;
    m.insts[1].args.pop_back();
    CHECK(errorOf(verify(m)) == "kernel mma: %1 (mma): 9 operands, expected 10");
    // A wave's op takes whole waves of 64.
    for (int64_t threads : {32, 96, 128}) {
      CAPTURE(threads);
      Builder wb("wave", threads, 1);
      V x = wb.convert(wb.f32(1), Scalar::BF16), c = wb.f32(0);
      wb.mma(MatrixOp::M16N16K16Bf16, {x, x, x, x}, {x, x, x, x}, {c, c, c, c});
      Kernel wave = wb.finish();
      if (threads == 128) CHECK(bool(verify(wave)));
      else CHECK(errorOf(verify(wave)) == "kernel wave: %3 (mma) in a workgroup of " + std::to_string(threads) + " threads, not whole waves of 64");
    }
  }
  SUBCASE("a wide load used other than through lane, of a written buffer, too wide, or a lane past it") {
    auto kernel = [](bool written, int64_t width, DType t) {
      Builder bl("vec", 1, 1);
      bl.buffer("x", t, 16, written);
      Kernel k = bl.finish();
      V idx = V(k.insts.size());
      k.insts.push_back(Inst{Opc::Const, Scalar::I32});
      Inst vec{Opc::LoadVec, t == DType::F32 ? Scalar::F32 : Scalar::BF16, {idx}, 0};
      vec.imm = width;
      k.insts.push_back(vec);
      k.body.items = {idx, idx + 1};
      return k;
    };
    // The kernel holds %0 (the index) and %1 (the load.vec); a reader is %2.
    auto reading = [&](Inst reader) {
      Kernel k = kernel(false, 4, DType::F32);
      k.insts.push_back(std::move(reader));
      k.body.items.push_back(2);
      return errorOf(verify(k));
    };
    CHECK(reading(Inst{Opc::Add, Scalar::F32, {1, 1}}) == "kernel vec: %2 (add): reads the wide load %1 other than through lane");
    Inst lane{Opc::Lane, Scalar::F32, {1}};
    lane.imm = 4;
    CHECK(reading(lane) == "kernel vec: %2 (lane): lane 4 of a load.vec of 4");
    CHECK(reading(Inst{Opc::Lane, Scalar::F32, {0}}) == "kernel vec: %2 (lane): operand %0 is not a wide load");
    CHECK(errorOf(verify(kernel(true, 4, DType::F32))) == "kernel vec: %1 (load.vec): a wide load of written buffer 0 (x)");
    CHECK(errorOf(verify(kernel(false, 8, DType::F32))) ==
          "kernel vec: %1 (load.vec): 8 f32 elements are more than 16 bytes");
    CHECK(errorOf(verify(kernel(false, 3, DType::BF16))) == "kernel vec: %1 (load.vec): width 3 is not 2, 4 or 8");
    CHECK(bool(verify(kernel(false, 8, DType::BF16))));
  }
  SUBCASE("a shared wide access too wide, of an array that starts off its width, or short of values") {
    auto kernel = [](int64_t lead, int64_t width) {
      Builder bl("svec", 1, 1);
      bl.shared("lead", Scalar::F32, lead);
      bl.shared("tile", Scalar::F32, 16);
      Kernel k = bl.finish();
      k.insts.push_back(Inst{Opc::Const, Scalar::I32});
      Inst vec{Opc::SharedLoadVec, Scalar::F32, {0}, 1};
      vec.imm = width;
      k.insts.push_back(vec);
      k.body.items = {0, 1};
      return errorOf(verify(k));
    };
    CHECK(kernel(2, 4) == "kernel svec: %1 (shared.load.vec): shared 1 (tile) starts at byte 8, not a multiple of 16");
    CHECK(kernel(4, 8) == "kernel svec: %1 (shared.load.vec): 8 f32 elements are more than 16 bytes");
    CHECK(kernel(4, 3) == "kernel svec: %1 (shared.load.vec): width 3 is not 2, 4 or 8");
    // A wide store takes its width's values.
    Builder st("svec", 1, 1);
    st.shared("tile", Scalar::F32, 16);
    Kernel k = st.finish();
    k.insts.push_back(Inst{Opc::Const, Scalar::I32});
    Inst store{Opc::SharedStoreVec, Scalar::I32, {0, 0, 0}, 0};
    store.imm = 4;
    k.insts.push_back(store);
    k.body.items = {0, 1};
    CHECK(errorOf(verify(k)) == "kernel svec: %1 (shared.store.vec): 3 operands, expected 5");
    Builder ok("svec", 1, 1);
    ok.shared("lead", Scalar::F32, 2);
    int32_t tile = ok.shared("tile", Scalar::F32, 16);
    ok.sharedLoadVec(tile, ok.i32(0), 2);
    CHECK(bool(verify(ok.finish())));
  }
  SUBCASE("an fma of integers") {
    Builder bl("ifma", 1, 1);
    V a = bl.i32(1);
    Kernel k = bl.finish();
    k.insts.push_back(Inst{Opc::Fma, Scalar::F32, {a, a, a}});
    k.body.items.push_back(V(k.insts.size() - 1));
    CHECK(errorOf(verify(k)) == "kernel ifma: %1 (fma): factor %0 (i32) is not f32");
  }
  SUBCASE("operand types differ") {
    Builder bl("mix", 1, 1);
    V a = bl.i32(1), b = bl.f32(2);
    Kernel k = bl.finish();
    k.insts.push_back(Inst{Opc::Add, Scalar::I32, {a, b}});
    k.body.items.push_back(V(k.insts.size() - 1));
    CHECK(errorOf(verify(k)) == "kernel mix: %2 (add): operand types i32 and f32 differ");
  }
  SUBCASE("a float-only op on an integer") {
    Builder bl("ints", 1, 1);
    V a = bl.i32(1);
    Kernel k = bl.finish();
    k.insts.push_back(Inst{Opc::Exp, Scalar::I32, {a}});
    k.body.items.push_back(1);
    CHECK(errorOf(verify(k)) == "kernel ints: %1 (exp): not defined on i32");
  }
  SUBCASE("the regular forms' operand types (kir.h's OpInfo rows)") {
    // opcode, operand type, whether the verifier takes it.
    struct Row {
      Opc op;
      Scalar t;
      bool ok;
    };
    for (Row r : {Row{Opc::Shl, Scalar::I64, true}, Row{Opc::Shl, Scalar::F32, false}, Row{Opc::Shl, Scalar::Bool, false},
                  Row{Opc::And, Scalar::Bool, true}, Row{Opc::Xor, Scalar::F32, false}, Row{Opc::Pow, Scalar::F32, true},
                  Row{Opc::Pow, Scalar::I32, false}, Row{Opc::Min, Scalar::I64, true}, Row{Opc::Add, Scalar::Bool, false},
                  Row{Opc::Not, Scalar::I32, true}, Row{Opc::Abs, Scalar::Bool, false}, Row{Opc::Floor, Scalar::F32, true},
                  Row{Opc::Lt, Scalar::Bool, false}, Row{Opc::Eq, Scalar::Bool, true}, Row{Opc::Ge, Scalar::I64, true}}) {
      CAPTURE(opcName(r.op));
      CAPTURE(scalarName(r.t));
      Builder bl("form", 1, 1);
      V a = bl.constant(r.t, 1);
      Kernel k = bl.finish();
      const Form form = opInfo(r.op).form;
      Scalar result = form == Form::Compare ? Scalar::Bool : r.t;
      k.insts.push_back(Inst{r.op, result, form == Form::Unary ? std::vector<V>{a} : std::vector<V>{a, a}});
      k.body.items.push_back(V(k.insts.size() - 1));
      if (r.ok) CHECK(bool(verify(k)));
      else CHECK(errorOf(verify(k)) == "kernel form: %1 (" + std::string(opcName(r.op)) + "): not defined on " + scalarName(r.t));
    }
    // An id takes no operand.
    Builder bl("id", 1, 1);
    V a = bl.i32(1);
    Kernel k = bl.finish();
    k.insts.push_back(Inst{Opc::Local, Scalar::I32, {a}});
    k.body.items.push_back(1);
    CHECK(errorOf(verify(k)).find("(local): 1 operand") != std::string::npos);
  }
  SUBCASE("a value used after the block that defines it") {
    Builder bl("scope", 4, 1);
    int32_t out = bl.buffer("y", DType::I32, 4, true);
    V inner = -1;
    bl.ifThen(bl.boolean(true), [&] { inner = bl.add(bl.local(), bl.i32(1)); });
    bl.store(out, bl.i32(0), bl.i32(0));
    Kernel k = bl.finish();
    V st = k.body.items.back();
    k.insts[size_t(st)].args[1] = inner;
    CHECK(errorOf(verify(k)) == "kernel scope: %" + std::to_string(st) + " (store): operand %" + std::to_string(inner) +
                                    " is not defined before it in scope");
  }
  SUBCASE("a for's induction value after the loop, and a value used before its definition") {
    Builder bl("after", 4, 1);
    int32_t out = bl.buffer("y", DType::I32, 4, true);
    V loop = -1;
    bl.forRange(bl.i32(0), bl.i32(4), 1, [&](V i) { loop = i; });
    V z = bl.i32(0);
    bl.store(out, z, z);
    Kernel k = bl.finish();
    V st = k.body.items.back();
    Kernel early = k;
    k.insts[size_t(st)].args[1] = loop;
    CHECK(errorOf(verify(k)) == "kernel after: %" + std::to_string(st) + " (store): operand %" + std::to_string(loop) +
                                    " is not defined before it in scope");
    std::swap(early.body.items[early.body.items.size() - 2], early.body.items.back());  // the store before its const
    CHECK(errorOf(verify(early)).find("operand %" + std::to_string(z) + " is not defined before it in scope") !=
          std::string::npos);
  }
  SUBCASE("a store to a read-only buffer, and a stored value of the wrong type") {
    Builder bl("ro", 1, 1);
    int32_t x = bl.buffer("x", DType::F32, 1, false);
    V z = bl.i32(0), f = bl.f32(1);
    Kernel k = bl.finish();
    k.insts.push_back(Inst{Opc::Store, Scalar::I32, {z, f}, x});
    k.body.items.push_back(2);
    CHECK(errorOf(verify(k)) == "kernel ro: %2 (store): store to read-only buffer 0 (x)");
    k.buffers[0].written = true;
    CHECK(bool(verify(k)));
    k.insts[2].args[1] = z;
    CHECK(errorOf(verify(k)) == "kernel ro: %2 (store): value %0 (i32) is not f32");
  }
  SUBCASE("out-of-range references") {
    Builder bl("refs", 1, 1);
    V z = bl.i32(0);
    Kernel k = bl.finish();
    k.insts.push_back(Inst{Opc::Load, Scalar::F32, {z}, 3});
    k.body.items.push_back(1);
    CHECK(errorOf(verify(k)) == "kernel refs: %1 (load): buffer 3 out of range (0)");
  }
  SUBCASE("a barrier under an if on the thread index") {
    Builder bl("bar", 8, 1);
    bl.ifThen(bl.lt(bl.local(), bl.i32(4)), [&] { bl.barrier(); });
    CHECK(errorOf(verify(bl.finish())) == "kernel bar: %4 (barrier): inside %3 (if), whose condition depends on the thread");
  }
  SUBCASE("a barrier in a for whose bound is per-thread, through a variable set in a loop") {
    Builder bl("bar2", 8, 1);
    int32_t n = bl.var(Scalar::I32, bl.i32(1));
    bl.forRange(bl.i32(0), bl.i32(2), 1, [&](V) {
      bl.forRange(bl.i32(0), bl.get(n), 1, [&](V) { bl.barrier(); });
      bl.set(n, bl.local());
    });
    CHECK(errorOf(verify(bl.finish())).find("(barrier): inside %") != std::string::npos);
  }
  SUBCASE("a barrier under workgroup-uniform control is fine") {
    Builder bl("bar3", 8, 4);
    int32_t x = bl.buffer("x", DType::I32, 4, false);
    bl.ifThen(bl.lt(bl.groupX(), bl.i32(2)), [&] {
      bl.forRange(bl.i32(0), bl.load(x, bl.groupX()), 1, [&](V) { bl.barrier(); });
    });
    CHECK(bool(verify(bl.finish())));
  }
  SUBCASE("a statement used as a value, and a bad step") {
    Builder bl("stmt", 1, 1);
    bl.barrier();
    V one = bl.i32(1);
    Kernel k = bl.finish();
    k.insts.push_back(Inst{Opc::Neg, Scalar::I32, {0}});
    k.body.items.push_back(2);
    CHECK(errorOf(verify(k)) == "kernel stmt: %2 (neg): operand %0 is a statement");
    k.insts[2] = Inst{Opc::For, Scalar::I32, {one, one}};
    CHECK(errorOf(verify(k)) == "kernel stmt: %2 (for): step 0 is not positive");
  }
}

TEST_CASE("kir print: a small kernel, exactly") {
  // Every value is built in its own statement, so the numbering does not
  // depend on the order C++ evaluates arguments in.
  Builder bl("scale_0", 64, 3);
  int32_t x = bl.buffer("x", DType::F32, 100, false), y = bl.buffer("y", DType::I64, 100, true);
  int32_t sh = bl.shared("m", Scalar::F32, 64);
  V t = bl.local();
  V n = bl.i32(100);
  V inside = bl.lt(t, n);
  int32_t acc = bl.var(Scalar::F32, bl.f32(0.1));
  bl.ifElse(
      inside,
      [&] {
        V lo = bl.i32(0);
        V hi = bl.i32(2);
        bl.forRange(lo, hi, 1, [&](V) {
          V a = bl.get(acc);
          V b = bl.load(x, t);
          bl.set(acc, bl.mul(a, b));
        });
        V a = bl.get(acc);
        bl.sharedStore(sh, t, a);
      },
      [&] {
        V big = bl.f32(-1e30);
        bl.sharedStore(sh, t, big);
      });
  bl.barrier();
  V g = bl.groupX();
  V first = bl.eq(g, bl.i32(0));
  bl.ifThen(first, [&] {
    V zero = bl.i32(0);
    V s = bl.sharedLoad(sh, zero);
    V wide = bl.convert(s, Scalar::I64);
    bl.store(y, zero, bl.add(wide, bl.i64(-5)));
  });
  Kernel k = bl.finish();
  REQUIRE(bool(verify(k)));
  CHECK(print(k) ==
        "kernel scale_0 workgroup=64 grid_x=3 shared_bytes=256\n"
        "  buffer 0 x f32[100] read\n"
        "  buffer 1 y i64[100] write\n"
        "  shared 0 m f32[64]\n"
        "  var 0 f32\n"
        "  %0 = local : i32\n"
        "  %1 = const 100 : i32\n"
        "  %2 = lt %0, %1 : bool\n"
        "  %3 = const 0.1 : f32\n"
        "  set v0, %3\n"
        "  if %2 {\n"
        "    %6 = const 0 : i32\n"
        "    %7 = const 2 : i32\n"
        "    for %8 = %6 to %7 step 1 {\n"
        "      %9 = get v0 : f32\n"
        "      %10 = load b0[%0] : f32\n"
        "      %11 = mul %9, %10 : f32\n"
        "      set v0, %11\n"
        "    }\n"
        "    %13 = get v0 : f32\n"
        "    shared.store s0[%0], %13\n"
        "  } else {\n"
        "    %15 = const -1e+30 : f32\n"
        "    shared.store s0[%0], %15\n"
        "  }\n"
        "  barrier\n"
        "  %18 = group.x : i32\n"
        "  %19 = const 0 : i32\n"
        "  %20 = eq %18, %19 : bool\n"
        "  if %20 {\n"
        "    %22 = const 0 : i32\n"
        "    %23 = shared.load s0[%22] : f32\n"
        "    %24 = convert %23 : i64\n"
        "    %25 = const -5 : i64\n"
        "    %26 = add %24, %25 : i64\n"
        "    store b1[%22], %26\n"
        "  }\n");
  Builder flags("flags", 1, 1);
  flags.boolean(true);
  flags.boolean(false);
  flags.f32(std::numeric_limits<double>::infinity());
  flags.f32(1.0 / 3.0);
  CHECK(print(flags.finish()) ==
        "kernel flags workgroup=1 grid_x=1 shared_bytes=0\n"
        "  %0 = const true : bool\n"
        "  %1 = const false : bool\n"
        "  %2 = const inf : f32\n"
        "  %3 = const 0.33333334 : f32\n");
}

TEST_CASE("kir plan runner: a chain of temporaries, a view and a state update against the oracle") {
  // a, b and e are arena temporaries (a and e may share bytes), c a view of b,
  // d the state's new value written over it in place and read again after.
  Graph g = testing::parse(
      "graph t\ninput %x : f32[4,8]\nstate %s : f32[32]\n"
      "%a = Exp(%x) : f32[4,8]\n%b = Neg(%a) : f32[4,8]\n%c = Reshape(%b) : f32[32]\n"
      "%d = Add(%c, %s) : f32[32]\n%e = Mul(%d, %d) : f32[32]\n%f = Tanh(%e) : f32[32]\n"
      "output %f\nstate_out %s = %d\n");
  DeviceProfile d = testing::loadTarget("lavapipe");
  auto p = planGraph(g, d);
  REQUIRE(bool(p));
  REQUIRE(bool(planBuffers(*p)));
  int views = 0, temps = 0;
  for (const poot::Buffer& b : p->buffers) {
    views += b.role == BufferRole::View;
    temps += b.role == BufferRole::Temp;
  }
  CHECK(views == 1);
  CHECK(temps == 3);
  CHECK(p->dispatches.size() == 5);
  testing::checkKirMatchesOracle(g, d, freshSeed(), testing::relativeToLarger(1e-5));
}

TEST_CASE("kir plan runner: a parameter left unbound is a bind error") {
  Graph g = testing::parse("graph t\ninput %x : f32[3]\n%y = Neg(%x) : f32[3]\noutput %y\n");
  auto r = testing::runOnKir(g, testing::loadTarget("lavapipe"), {});
  REQUIRE_FALSE(bool(r));
  CHECK(r.error().kind == ErrorKind::Bind);
  CHECK(r.error().message == "parameter x not bound");
}

}  // namespace poot::kir

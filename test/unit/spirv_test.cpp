// Unit tests of the SPIR-V writer: kernels built with kir::Builder over every
// opcode, value type and buffer dtype, nested loops and ifs, workgroup memory
// with barriers and variables are emitted and must pass the SPIRV-Tools
// validator for Vulkan 1.2; their disassembly must show the structure the
// writer promises (capabilities only when used, storage conversions, the
// structured-control-flow merges, the entry point's interface, LocalSize).
// Emission is deterministic, legalize refuses what has no lowering, and the
// validator itself rejects a broken module. Then the modules run on lavapipe
// (the runtime's Vulkan backend) against the KIR interpreter on the same
// random inputs: integer, bool, conversion, storage and control-flow results
// must match bit for bit, floats exactly where IEEE fixes them and within a
// few ulp for the device's transcendental functions.
#include <doctest/doctest.h>

#include <spirv/unified1/spirv.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "codegen/kir/builder.h"
#include "codegen/kir/interp.h"
#include "codegen/kir/legalize.h"
#include "codegen/spirv/spirv.h"
#include "runtime/backends/vulkan.h"

using namespace poot;
using kir::Opc;
using kir::Scalar;
using kir::V;

namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// Emits k legalized for SPIR-V (as the codegen driver does), requires the
// validator to accept it and returns its disassembly.
std::string emitValid(kir::Kernel k) {
  kir::legalize(k, Target::Spirv);
  Expected<std::vector<uint32_t>> words = spirv::emit(k);
  REQUIRE_MESSAGE(bool(words), (words ? "" : words.error().str()));
  std::string text = spirv::disassemble(*words);
  Status valid = spirv::validate(*words);
  REQUIRE_MESSAGE(bool(valid), (valid ? "" : valid.error().str() + "\n" + text));
  return text;
}

// out[i] = exp(x[i]) for i < n: the Builder's own example.
kir::Kernel elementwise() {
  kir::Builder b("add_elementwise_0", 256, 4);
  int32_t x = b.buffer("x", DType::F32, 1000, false), out = b.buffer("out", DType::F32, 1000, true);
  V i = b.add(b.mul(b.workgroupId(), b.i32(256)), b.local());
  b.ifThen(b.lt(i, b.i32(1000)), [&] { b.store(out, i, b.exp(b.load(x, i))); });
  return b.finish();
}

}  // namespace

TEST_CASE("spirv: an elementwise kernel validates and has the promised interface") {
  std::string text = emitValid(elementwise());
  CHECK(text.find("; Version: 1.5") != std::string::npos);
  // Shader, and IEEE infinities and NaN in f32 (every module asks for them).
  CHECK(count(text, "OpCapability") == 2);
  CHECK(text.find("OpCapability Shader") != std::string::npos);
  CHECK(text.find("OpCapability SignedZeroInfNanPreserve") != std::string::npos);
  CHECK(text.find("OpExecutionMode %add_elementwise_0 SignedZeroInfNanPreserve 32") != std::string::npos);
  CHECK(text.find("OpMemoryModel Logical GLSL450") != std::string::npos);
  // The interface lists the buffers in binding order, then the builtins.
  CHECK(text.find("OpEntryPoint GLCompute %add_elementwise_0 \"add_elementwise_0\" %x %out %") != std::string::npos);
  size_t entry = text.find("OpEntryPoint"), line = text.find('\n', entry);
  CHECK(text.find("%workgroup_id", entry) < line);
  CHECK(text.find("%local_index", entry) < line);
  CHECK(text.find("OpExecutionMode %add_elementwise_0 LocalSize 256 1 1") != std::string::npos);
  CHECK(text.find("OpDecorate %x Binding 0") != std::string::npos);
  CHECK(text.find("OpDecorate %out Binding 1") != std::string::npos);
  CHECK(count(text, "DescriptorSet 0") == 2);
  CHECK(text.find("OpDecorate %x NonWritable") != std::string::npos);
  CHECK(count(text, "NonWritable") == 1);
  CHECK(count(text, "Restrict") == 0);
  // Both f32 buffers share one Block struct.
  CHECK(count(text, " Block") == 1);
  CHECK(count(text, "ArrayStride 4") == 1);
  CHECK(text.find("BuiltIn WorkgroupId") != std::string::npos);
  CHECK(text.find("BuiltIn LocalInvocationIndex") != std::string::npos);
  CHECK(count(text, "OpSelectionMerge") == 1);
  CHECK(text.find("Exp %") != std::string::npos);
  CHECK(count(text, "OpExtInstImport \"GLSL.std.450\"") == 1);
}

TEST_CASE("spirv: the header and determinism") {
  kir::Kernel k = elementwise();
  Expected<std::vector<uint32_t>> a = spirv::emit(k), b = spirv::emit(elementwise());
  REQUIRE(a);
  REQUIRE(b);
  CHECK(*a == *b);
  REQUIRE(a->size() > 5);
  CHECK((*a)[0] == SpvMagicNumber);
  CHECK((*a)[1] == 0x00010500u);
  CHECK((*a)[2] == 0u);
  CHECK((*a)[4] == 0u);
  // The bound is one past the largest id: OpFunction's result is below it.
  std::string text = spirv::disassemble(*a);
  CHECK(text.find("; Bound: " + std::to_string((*a)[3])) != std::string::npos);
}

TEST_CASE("spirv: buffers of every graph dtype load, convert and store") {
  kir::Builder b("dtypes", 64, 1);
  const DType dts[] = {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64, DType::Bool};
  std::vector<int32_t> in, out;
  for (DType t : dts) {
    in.push_back(b.buffer(std::string("in_") + dtypeName(t), t, 64, false));
    out.push_back(b.buffer(std::string("out_") + dtypeName(t), t, 64, true));
  }
  V i = b.local();
  for (size_t j = 0; j < in.size(); ++j) b.store(out[j], i, b.load(in[j], i));
  std::string text = emitValid(b.finish());
  CHECK(text.find("OpCapability Int64") != std::string::npos);
  CHECK(text.find("OpCapability StorageBuffer8BitAccess") != std::string::npos);
  CHECK(text.find("OpCapability StorageBuffer16BitAccess") != std::string::npos);
  // No 8/16-bit arithmetic: only storage and conversions.
  CHECK(text.find("OpCapability Int8") == std::string::npos);
  CHECK(text.find("OpCapability Int16") == std::string::npos);
  CHECK(text.find("OpCapability Float16") == std::string::npos);
  CHECK(count(text, "OpExtension") == 0);
  for (const char* stride : {"ArrayStride 1", "ArrayStride 2", "ArrayStride 4", "ArrayStride 8"})
    CHECK_MESSAGE(text.find(stride) != std::string::npos, std::string(stride));
  // f16 and u16 (bf16) are different element types; bool is u8.
  CHECK(text.find("OpTypeFloat 16") != std::string::npos);
  CHECK(text.find("OpTypeInt 16 0") != std::string::npos);
  CHECK(text.find("OpTypeInt 8 0") != std::string::npos);
  CHECK(text.find("OpTypeInt 64 1") != std::string::npos);
  // f16: a load widens; a store's conversion (rounded by kir::legalize)
  // narrows and widens back, then the store narrows: all exact, so no
  // rounding mode.
  CHECK(count(text, "OpFConvert") == 4);
  CHECK(count(text, "FPRoundingMode") == 0);
  // u8 and u16: a load zero-extends, a store truncates.
  CHECK(count(text, "OpUConvert %uint") == 2);
  CHECK(count(text, "OpUConvert %uchar") == 1);
  CHECK(count(text, "OpUConvert %ushort") == 1);
  CHECK(count(text, "NonWritable") == 6);
  CHECK(count(text, " Binding ") == 12);
  CHECK(text.find("OpDecorate %out_bool Binding 11") != std::string::npos);
}

TEST_CASE("spirv: every scalar opcode on every type it takes") {
  kir::Builder b("ops", 32, 1);
  int32_t fi = b.buffer("f", DType::F32, 32, false), ii = b.buffer("i", DType::I32, 32, false);
  int32_t li = b.buffer("l", DType::I64, 32, false), bi = b.buffer("b", DType::Bool, 32, false);
  int32_t fo = b.buffer("fo", DType::F32, 32, true), io = b.buffer("io", DType::I32, 32, true);
  int32_t lo = b.buffer("lo", DType::I64, 32, true), bo = b.buffer("bo", DType::Bool, 32, true);
  V t = b.local();
  V f = b.load(fi, t), i = b.load(ii, t), l = b.load(li, t), c = b.load(bi, t);
  V g = b.add(f, b.f32(0.5)), j = b.add(i, b.i32(3)), m = b.add(l, b.i64(int64_t(1) << 40));
  V d = b.ne(c, b.boolean(true));
  for (Opc op : {Opc::Add, Opc::Sub, Opc::Mul, Opc::Div, Opc::Min, Opc::Max, Opc::Pow}) b.store(fo, t, b.binary(op, f, g));
  for (Opc op : {Opc::Add, Opc::Sub, Opc::Mul, Opc::Div, Opc::Rem, Opc::Min, Opc::Max, Opc::And, Opc::Or, Opc::Xor,
                 Opc::Shl, Opc::ShrA, Opc::ShrL}) {
    b.store(io, t, b.binary(op, i, j));
    b.store(lo, t, b.binary(op, l, m));
  }
  for (Opc op : {Opc::And, Opc::Or, Opc::Xor}) b.store(bo, t, b.binary(op, c, d));
  for (Opc op : {Opc::Neg, Opc::Abs, Opc::Exp, Opc::Exp2, Opc::Log, Opc::Sqrt, Opc::Rsqrt, Opc::Tanh, Opc::Sin, Opc::Cos,
                 Opc::Floor})
    b.store(fo, t, b.unary(op, f));
  for (Opc op : {Opc::Neg, Opc::Not, Opc::Abs}) {
    b.store(io, t, b.unary(op, i));
    b.store(lo, t, b.unary(op, l));
  }
  b.store(bo, t, b.unary(Opc::Not, c));
  for (Opc op : {Opc::Lt, Opc::Le, Opc::Gt, Opc::Ge, Opc::Eq, Opc::Ne}) {
    b.store(bo, t, b.compare(op, f, g));
    b.store(bo, t, b.compare(op, i, j));
    b.store(bo, t, b.compare(op, l, m));
  }
  b.store(bo, t, b.eq(c, d));
  b.store(fo, t, b.select(c, f, g));
  b.store(io, t, b.select(d, i, j));
  b.store(lo, t, b.select(c, l, m));
  b.store(bo, t, b.select(c, c, d));
  const Scalar all[] = {Scalar::Bool, Scalar::I32, Scalar::I64, Scalar::F32};
  const V of[] = {c, i, l, f};
  const int32_t into[] = {bo, io, lo, fo};
  for (int from = 0; from < 4; ++from)
    for (int to = 0; to < 4; ++to)
      if (from != to) b.store(into[to], t, b.convert(of[from], all[to]));
  b.store(io, t, b.bitcast(f, Scalar::I32));
  b.store(fo, t, b.bitcast(i, Scalar::F32));
  b.store(fo, t, b.erf(f));
  std::string text = emitValid(b.finish());
  for (const char* want :
       {"OpFAdd", "OpFSub", "OpFMul", "OpFDiv", "NMin", "NMax", "Pow", "OpIAdd %long", "OpISub", "OpIMul", "OpSDiv",
        "OpSRem", "SMin", "SMax", "OpBitwiseAnd", "OpBitwiseOr", "OpBitwiseXor", "OpShiftLeftLogical",
        "OpShiftRightArithmetic", "OpShiftRightLogical", "OpLogicalAnd", "OpLogicalOr", "OpLogicalNotEqual",
        "OpFNegate", "FAbs", "Exp", "Exp2", "Log", "Sqrt", "InverseSqrt", "Tanh", "Sin", "Cos", "Floor", "OpSNegate",
        "OpNot %int", "OpNot %long", "SAbs", "OpLogicalNot", "OpFOrdLessThan", "OpFOrdLessThanEqual",
        "OpFOrdGreaterThan", "OpFOrdGreaterThanEqual", "OpFOrdEqual", "OpFUnordNotEqual", "OpSLessThan",
        "OpSLessThanEqual", "OpSGreaterThan", "OpSGreaterThanEqual", "OpIEqual", "OpINotEqual", "OpLogicalEqual",
        "OpSelect %float", "OpSelect %int", "OpSelect %long", "OpSelect %bool", "OpConvertFToS %int",
        "OpConvertFToS %long", "OpConvertSToF %float", "OpSConvert %long", "OpSConvert %int", "OpBitcast %float",
        "OpBitcast %int"})
    CHECK_MESSAGE(text.find(want) != std::string::npos, std::string(want));
  // Floats compare ordered except Ne; ints never use float compares.
  CHECK(text.find("OpFOrdNotEqual") == std::string::npos);
  CHECK(text.find("OpFUnordLessThan") == std::string::npos);
  CHECK(text.find("OpUDiv") == std::string::npos);
  CHECK(text.find("OpSMod") == std::string::npos);
  CHECK(text.find("OpFMin") == std::string::npos);
  // The i64 constant keeps its high word.
  CHECK(text.find("OpConstant %long 1099511627776") != std::string::npos);
}

TEST_CASE("spirv: nested loops and ifs, workgroup memory, barriers and variables") {
  kir::Builder b("reduce_rows", 128, 8);
  int32_t x = b.buffer("x", DType::F32, 8 * 1024, false), out = b.buffer("out", DType::F32, 8, true);
  int32_t partial = b.shared("partial", Scalar::F32, 128), counts = b.shared("counts", Scalar::I32, 128);
  V row = b.groupX(), t = b.local();
  int32_t acc = b.var(Scalar::F32, b.f32(0)), seen = b.var(Scalar::I32, b.i32(0));
  b.forRange(t, b.i32(1024), 128, [&](V k) {
    V v = b.load(x, b.add(b.mul(row, b.i32(1024)), k));
    b.ifElse(
        b.isNan(v), [&] { b.set(acc, v); },
        [&] {
          b.forRange(b.i32(0), b.i32(2), 1, [&](V) { b.set(acc, b.add(b.get(acc), v)); });
          b.set(seen, b.add(b.get(seen), b.i32(1)));
        });
  });
  b.sharedStore(partial, t, b.get(acc));
  b.sharedStore(counts, t, b.get(seen));
  b.barrier();
  b.forRange(b.i32(0), b.i32(7), 1, [&](V s) {
    V half = b.binary(Opc::ShrA, b.i32(64), s);
    b.ifThen(b.lt(t, half), [&] {
      b.sharedStore(partial, t, b.add(b.sharedLoad(partial, t), b.sharedLoad(partial, b.add(t, half))));
      b.sharedStore(counts, t, b.add(b.sharedLoad(counts, t), b.sharedLoad(counts, b.add(t, half))));
    });
    b.barrier();
  });
  b.ifThen(b.eq(t, b.i32(0)), [&] {
    V n = b.convert(b.sharedLoad(counts, b.i32(0)), Scalar::F32);
    b.store(out, row, b.div(b.sharedLoad(partial, b.i32(0)), n));
  });
  std::string text = emitValid(b.finish());
  CHECK(count(text, "OpLoopMerge") == 3);
  CHECK(count(text, "OpPhi %int") == 3);
  CHECK(count(text, "OpSelectionMerge") == 3);
  CHECK(count(text, "OpControlBarrier") == 2);
  CHECK(text.find("OpControlBarrier %uint_2 %uint_2 %uint_264") != std::string::npos);  // AcquireRelease|WorkgroupMemory
  CHECK(text.find("OpTypeArray %float %uint_128") != std::string::npos);
  CHECK(text.find("OpTypeArray %int %uint_128") != std::string::npos);
  CHECK(count(text, "OpVariable %_ptr_Workgroup") == 2);
  CHECK(count(text, "OpVariable %_ptr_Function") == 2);
  CHECK(text.find("OpEntryPoint GLCompute %reduce_rows \"reduce_rows\" %x %out %partial %counts") !=
        std::string::npos);
  CHECK(text.find("LocalSize 128 1 1") != std::string::npos);
  CHECK(count(text, "OpCapability") == 2);
}

TEST_CASE("spirv: group y, an if with an empty then, an unused buffer") {
  kir::Builder b("grid", 1, 65535);
  int32_t out = b.buffer("out", DType::I32, 1 << 20, true);
  b.buffer("unused", DType::F16, 4, false);
  V w = b.workgroupId();
  b.ifElse(b.ge(w, b.i32(1 << 20)), [] {}, [&] { b.store(out, w, b.groupY()); });
  std::string text = emitValid(b.finish());
  CHECK(count(text, "OpCompositeExtract %uint") == 3);
  CHECK(text.find("LocalSize 1 1 1") != std::string::npos);
  CHECK(text.find("local_index") == std::string::npos);  // an unused builtin is not declared
  CHECK(text.find("OpDecorate %unused Binding 1") != std::string::npos);
  CHECK(text.find("OpCapability StorageBuffer16BitAccess") != std::string::npos);
}

TEST_CASE("spirv: legalize refuses what has no lowering") {
  struct Case {
    Opc op;
    Scalar type;
    const char* message;
  };
  for (Case c : {Case{Opc::Rem, Scalar::F32, "rem on f32"}, Case{Opc::Pow, Scalar::I32, "pow on i32"},
                 Case{Opc::Add, Scalar::Bool, "add on bool"}, Case{Opc::Xor, Scalar::F32, "xor on f32"},
                 Case{Opc::Shl, Scalar::Bool, "shl on bool"}}) {
    kir::Builder b("bad", 1, 1);
    V x = b.constant(c.type, 1);
    b.binary(c.op, x, x);
    Expected<std::vector<uint32_t>> r = spirv::emit(b.finish());
    REQUIRE(!r);
    CHECK(r.error().kind == ErrorKind::Verify);
    CHECK(r.error().str() == std::string("bad:inst 1: error: spir-v has no lowering for ") + c.message);
  }
  kir::Builder b("cmp", 1, 1);
  V x = b.boolean(true);
  b.lt(x, x);
  b.unary(Opc::Exp, b.i32(1));
  Expected<std::vector<uint32_t>> r = spirv::emit(b.finish());
  REQUIRE(!r);
  CHECK(r.error().message == "spir-v has no lowering for lt on bool");
  // The warp operations exist for PTX alone (the planner never gives them
  // to a SPIR-V profile).
  kir::Builder w("warp", 32, 1);
  V one = w.f32(1);
  w.shuffleXor(one, 1);
  Expected<std::vector<uint32_t>> shuffled = spirv::emit(w.finish());
  REQUIRE(!shuffled);
  CHECK(shuffled.error().message == "spir-v has no lowering for shuffle.xor on f32");
  kir::Builder m("mma", 32, 1);
  V f = m.f32(1);
  m.mma(MatrixOp::M16N8K8Tf32, {f, f, f, f}, {f, f}, {f, f, f, f});
  Expected<std::vector<uint32_t>> multiplied = spirv::emit(m.finish());
  REQUIRE(!multiplied);
  CHECK(multiplied.error().message == "spir-v has no lowering for mma on f32");
  // bf16 reaches the writer only through kir::legalize.
  kir::Builder h("bf16", 1, 1);
  h.load(h.buffer("x", DType::BF16, 1, false), h.i32(0));
  Expected<std::vector<uint32_t>> raw = spirv::emit(h.finish());
  REQUIRE(!raw);
  CHECK(raw.error().message == "spir-v has no lowering for a bf16 buffer (kir::legalize lowers it)");
}

TEST_CASE("spirv: the validator rejects a broken module") {
  Expected<std::vector<uint32_t>> words = spirv::emit(elementwise());
  REQUIRE(words);
  std::vector<uint32_t> broken = *words;
  broken.pop_back();  // OpFunctionEnd
  Status s = spirv::validate(broken);
  REQUIRE(!s);
  CHECK(s.error().kind == ErrorKind::Verify);
  CHECK(s.error().message.find("invalid module") == 0);
}

namespace {

using Bytes = std::vector<uint8_t>;

// Runs k over gridX x gridY workgroups in the interpreter (cpu) and, legalized
// for SPIR-V, on lavapipe (gpu), each on its own copy of `buffers`.
void runBoth(kir::Kernel k, int64_t gridY, const std::vector<Bytes>& buffers, std::vector<Bytes>& cpu,
             std::vector<Bytes>& gpu) {
  cpu = gpu = buffers;
  std::vector<Bytes*> ptrs;
  for (Bytes& b : cpu) ptrs.push_back(&b);
  Status s = kir::interpret(k, gridY, ptrs);
  REQUIRE_MESSAGE(bool(s), (s ? "" : s.error().str()));

  kir::legalize(k, Target::Spirv);
  Expected<std::vector<uint32_t>> words = spirv::emit(k);
  REQUIRE(words);
  Status valid = spirv::validate(*words);
  REQUIRE_MESSAGE(bool(valid), (valid ? "" : valid.error().str()));
  Bytes blob(words->size() * 4);
  std::memcpy(blob.data(), words->data(), blob.size());
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  auto be = rt::createVulkanBackend({"lavapipe"});
  REQUIRE_MESSAGE(bool(be), (be ? "" : be.error().str()));
  rt::Backend& b = **be;
  auto kid = b.createKernel(blob, k.entry, k.workgroupSize, k.sharedBytes(), int(buffers.size()), false);
  REQUIRE_MESSAGE(bool(kid), (kid ? "" : kid.error().str()));
  rt::DispatchCommand d;
  d.kernel = *kid;
  d.grid[0] = k.gridX;
  d.grid[1] = gridY;
  for (const Bytes& buf : gpu) {
    auto id = b.allocate(int64_t(buf.size()));
    REQUIRE(id);
    REQUIRE(b.upload(*id, 0, buf.data(), int64_t(buf.size())));
    d.bindings.push_back(rt::BufferRange{*id, 0, int64_t(buf.size())});
  }
  auto prog = b.record({d});
  REQUIRE(prog);
  REQUIRE(b.run(*prog));
  for (size_t i = 0; i < gpu.size(); ++i) REQUIRE(b.download(d.bindings[i].buffer, 0, gpu[i].data(), int64_t(gpu[i].size())));
}

template <class T>
Bytes bytesOf(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

template <class T>
T at(const Bytes& b, size_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}

std::mt19937_64& rng() {
  static std::mt19937_64 r{std::random_device{}()};
  return r;
}

// Slots of one output buffer: each stored value goes to out[slot * n + t].
struct Outs {
  kir::Builder& b;
  int32_t buffer;
  V t;
  int64_t n;
  int64_t slots = 0;
  void put(V v) { b.store(buffer, b.add(b.i32(slots++ * n), t), v); }
};

}  // namespace

TEST_CASE("spirv on lavapipe: integer, bool and conversion results equal the interpreter's bit for bit") {
  const int64_t W = 64, G = 2, N = W * G, S = 64;  // threads; slots per output buffer
  kir::Builder b("ints", W, G);
  int32_t ai = b.buffer("a", DType::I32, N, false), bi = b.buffer("b", DType::I32, N, false);
  int32_t la = b.buffer("la", DType::I64, N, false), lb = b.buffer("lb", DType::I64, N, false);
  int32_t io = b.buffer("io", DType::I32, N * S, true), lo = b.buffer("lo", DType::I64, N * S, true);
  int32_t bo = b.buffer("bo", DType::Bool, N * S, true), fo = b.buffer("fo", DType::F32, N * S, true);
  V t = b.add(b.mul(b.groupX(), b.i32(W)), b.local());
  Outs oi{b, io, t, N}, ol{b, lo, t, N}, ob{b, bo, t, N}, of{b, fo, t, N};
  V x = b.load(ai, t), y = b.load(bi, t), lx = b.load(la, t), ly = b.load(lb, t);
  for (Opc op : {Opc::Add, Opc::Sub, Opc::Mul, Opc::Div, Opc::Rem, Opc::Min, Opc::Max, Opc::And, Opc::Or, Opc::Xor}) {
    oi.put(b.binary(op, x, y));
    ol.put(b.binary(op, lx, ly));
  }
  for (Opc op : {Opc::Shl, Opc::ShrA, Opc::ShrL}) {
    oi.put(b.binary(op, x, b.binary(Opc::And, y, b.i32(31))));
    ol.put(b.binary(op, lx, b.binary(Opc::And, ly, b.i64(63))));
  }
  for (Opc op : {Opc::Neg, Opc::Not, Opc::Abs}) {
    oi.put(b.unary(op, x));
    ol.put(b.unary(op, lx));
  }
  V c = b.lt(x, y), d = b.ge(lx, ly);
  for (Opc op : {Opc::Lt, Opc::Le, Opc::Gt, Opc::Ge, Opc::Eq, Opc::Ne}) {
    ob.put(b.compare(op, x, y));
    ob.put(b.compare(op, lx, ly));
    ob.put(b.compare(op, b.binary(Opc::And, x, b.i32(1)), b.binary(Opc::And, y, b.i32(1))));  // often equal
  }
  for (Opc op : {Opc::And, Opc::Or, Opc::Xor}) ob.put(b.binary(op, c, d));
  ob.put(b.unary(Opc::Not, c));
  ob.put(b.eq(c, d));
  ob.put(b.ne(c, d));
  ob.put(b.convert(x, Scalar::Bool));
  ob.put(b.convert(b.binary(Opc::And, lx, b.i64(1)), Scalar::Bool));
  oi.put(b.select(c, x, y));
  ol.put(b.select(d, lx, ly));
  oi.put(b.convert(lx, Scalar::I32));
  ol.put(b.convert(x, Scalar::I64));
  oi.put(b.convert(c, Scalar::I32));
  ol.put(b.convert(d, Scalar::I64));
  of.put(b.convert(c, Scalar::F32));
  of.put(b.convert(x, Scalar::F32));
  of.put(b.convert(lx, Scalar::F32));
  of.put(b.bitcast(x, Scalar::F32));
  V f = b.mul(b.convert(b.binary(Opc::ShrA, x, b.i32(8)), Scalar::F32), b.f32(-0.37));  // in range of both
  oi.put(b.convert(f, Scalar::I32));
  ol.put(b.convert(f, Scalar::I64));
  oi.put(b.bitcast(f, Scalar::I32));
  REQUIRE(oi.slots <= S);
  REQUIRE(ob.slots <= S);

  std::vector<int32_t> a(N), bb(N);
  std::vector<int64_t> l1(N), l2(N);
  for (int64_t i = 0; i < N; ++i) {
    a[size_t(i)] = int32_t(rng()());
    bb[size_t(i)] = i % 3 == 0 ? int32_t(rng()() % 7) - 3 : int32_t(rng()());
    if (bb[size_t(i)] == 0) bb[size_t(i)] = 5;
    l1[size_t(i)] = int64_t(rng()());
    l2[size_t(i)] = i % 3 == 0 ? int64_t(rng()() % 9) + 1 : int64_t(rng()());
    if (l2[size_t(i)] == 0) l2[size_t(i)] = -7;
  }
  std::vector<Bytes> in = {bytesOf(a), bytesOf(bb), bytesOf(l1), bytesOf(l2), Bytes(size_t(N * S * 4)),
                           Bytes(size_t(N * S * 8)), Bytes(size_t(N * S)), Bytes(size_t(N * S * 4))};
  std::vector<Bytes> cpu, gpu;
  runBoth(b.finish(), 1, in, cpu, gpu);
  for (size_t i = 4; i < in.size(); ++i) {
    CAPTURE(i);
    size_t bad = 0, first = 0;
    for (size_t j = 0; j < cpu[i].size(); ++j)
      if (cpu[i][j] != gpu[i][j] && bad++ == 0) first = j;
    CHECK_MESSAGE(bad == 0, "first differing byte " << first);
  }
}

TEST_CASE("spirv on lavapipe: float results, storage conversions and control flow match the interpreter") {
  const int64_t W = 32, G = 3, GY = 2, N = W * G * GY, S = 32;
  kir::Builder b("floats", W, G);
  int32_t fi = b.buffer("f", DType::F32, N, false), gi = b.buffer("g", DType::F32, N, false);
  int32_t hi = b.buffer("h", DType::F16, N, false), bfi = b.buffer("bf", DType::BF16, N, false);
  int32_t fo = b.buffer("fo", DType::F32, N * S, true), ho = b.buffer("ho", DType::F16, N * S, true);
  int32_t bfo = b.buffer("bfo", DType::BF16, N * S, true), io = b.buffer("io", DType::I32, N * S, true);
  int32_t tr = b.buffer("tr", DType::F32, N * S, true);
  int32_t sh = b.shared("sh", Scalar::F32, W);
  V t = b.add(b.mul(b.workgroupId(), b.i32(W)), b.local());
  Outs of{b, fo, t, N}, oh{b, ho, t, N}, obf{b, bfo, t, N}, oi{b, io, t, N}, otr{b, tr, t, N};
  V f = b.load(fi, t), g = b.load(gi, t);
  for (Opc op : {Opc::Add, Opc::Sub, Opc::Mul, Opc::Div, Opc::Min, Opc::Max}) of.put(b.binary(op, f, g));
  for (Opc op : {Opc::Neg, Opc::Abs, Opc::Floor, Opc::Sqrt}) of.put(b.unary(op, f));
  for (Opc op : {Opc::Lt, Opc::Le, Opc::Gt, Opc::Ge, Opc::Eq, Opc::Ne}) oi.put(b.convert(b.compare(op, f, g), Scalar::I32));
  oi.put(b.convert(b.convert(f, Scalar::Bool), Scalar::I32));
  of.put(b.select(b.isNan(f), g, f));
  V pos = b.add(b.unary(Opc::Abs, g), b.f32(0.25));
  for (Opc op : {Opc::Exp, Opc::Exp2, Opc::Log, Opc::Rsqrt, Opc::Tanh, Opc::Sin, Opc::Cos}) otr.put(b.unary(op, b.min(pos, b.f32(20))));
  otr.put(b.binary(Opc::Pow, b.min(pos, b.f32(20)), b.f32(1.7)));  // no NaN: Vulkan's pow need not keep it
  otr.put(b.erf(g));
  // Storage: f16 and bf16 in and out, f32 narrowed to both.
  of.put(b.load(hi, t));
  of.put(b.load(bfi, t));
  oh.put(b.load(hi, t));
  oh.put(f);
  oh.put(b.mul(f, b.f32(1e-5)));  // f16 subnormals
  obf.put(b.load(bfi, t));
  obf.put(f);
  // Control flow: per-thread trip counts, nested if/else with variables,
  // a loop near the top of i32, a shared-memory tree sum across barriers.
  int32_t acc = b.var(Scalar::I32, b.i32(0));
  V local = b.local();
  b.forRange(b.i32(0), b.binary(Opc::And, local, b.i32(7)), 1, [&](V i) {
    b.forRange(i, b.i32(9), 3, [&](V j) {
      b.ifElse(b.eq(b.binary(Opc::And, j, b.i32(1)), b.i32(0)), [&] { b.set(acc, b.add(b.get(acc), j)); },
               [&] { b.set(acc, b.sub(b.get(acc), b.i32(100))); });
    });
  });
  oi.put(b.get(acc));
  int32_t n = b.var(Scalar::I32, b.i32(0));
  b.forRange(b.i32(std::numeric_limits<int32_t>::max() - 10), b.i32(std::numeric_limits<int32_t>::max()), 4,
             [&](V) { b.set(n, b.add(b.get(n), b.i32(1))); });
  oi.put(b.get(n));
  oi.put(b.groupY());
  b.sharedStore(sh, local, b.unary(Opc::Floor, f));
  b.barrier();
  b.forRange(b.i32(0), b.i32(5), 1, [&](V s) {
    V half = b.binary(Opc::ShrA, b.i32(W / 2), s);
    b.ifThen(b.lt(local, half), [&] { b.sharedStore(sh, local, b.add(b.sharedLoad(sh, local), b.sharedLoad(sh, b.add(local, half)))); });
    b.barrier();
  });
  of.put(b.sharedLoad(sh, b.i32(0)));
  // Wide loads (the buffers' vector views) and wide workgroup-memory
  // stores and loads: thread t's own element picked out of the run that
  // holds it, and the words a neighbour's wide store left.
  auto own = [&](const std::vector<V>& run) {
    V at = b.rem(t, b.i32(int64_t(run.size()))), mine = run[0];
    for (size_t e = 1; e < run.size(); ++e) mine = b.select(b.eq(at, b.i32(int64_t(e))), run[e], mine);
    return mine;
  };
  auto runOf = [&](int64_t w) { return b.mul(b.div(t, b.i32(w)), b.i32(w)); };
  of.put(own(b.loadVec(fi, runOf(4), 4)));
  of.put(own(b.loadVec(gi, runOf(2), 2)));
  of.put(own(b.loadVec(hi, runOf(8), 8)));
  of.put(own(b.loadVec(bfi, runOf(4), 4)));
  oh.put(own(b.loadVec(hi, runOf(2), 2)));
  b.barrier();
  b.sharedStore(sh, local, f);
  b.barrier();
  of.put(own(b.sharedLoadVec(sh, b.mul(b.div(local, b.i32(4)), b.i32(4)), 4)));
  b.barrier();
  b.ifThen(b.eq(b.rem(local, b.i32(2)), b.i32(0)), [&] { b.sharedStoreVec(sh, local, {g, f}); });
  b.barrier();
  of.put(b.sharedLoad(sh, local));
  REQUIRE(of.slots <= S);
  REQUIRE(oi.slots <= S);

  std::vector<float> f1(N), f2(N);
  std::vector<uint16_t> h(N), bf(N);
  std::uniform_real_distribution<float> u(-50, 50);
  for (int64_t i = 0; i < N; ++i) {
    f1[size_t(i)] = u(rng());
    f2[size_t(i)] = i % 4 == 0 ? f1[size_t(i)] : u(rng());
    h[size_t(i)] = uint16_t(rng()());
    bf[size_t(i)] = uint16_t(rng()());
    if ((h[size_t(i)] & 0x7c00) == 0x7c00) h[size_t(i)] &= 0x83ff;  // no f16 inf or NaN: payloads may differ
    if ((bf[size_t(i)] & 0x7f80) == 0x7f80) bf[size_t(i)] &= 0x807f;
  }
  // Not -0 against +0: NMin and NMax may return either zero.
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  f1[1] = nan, f2[2] = nan, f1[3] = inf, f2[3] = -inf, f1[5] = -0.0f, f2[5] = 3.0f, f1[6] = 70000.0f;
  std::vector<Bytes> in = {bytesOf(f1), bytesOf(f2), bytesOf(h), bytesOf(bf), Bytes(size_t(N * S * 4)),
                           Bytes(size_t(N * S * 2)), Bytes(size_t(N * S * 2)), Bytes(size_t(N * S * 4)),
                           Bytes(size_t(N * S * 4))};
  std::vector<Bytes> cpu, gpu;
  runBoth(b.finish(), GY, in, cpu, gpu);
  // fo: equal, or both NaN. ho, bfo, io: bit for bit.
  size_t badF = 0;
  std::string diffs;
  for (size_t j = 0; j < size_t(N * of.slots); ++j) {
    float c = at<float>(cpu[4], j), gv = at<float>(gpu[4], j);
    if (!(std::bit_cast<uint32_t>(c) == std::bit_cast<uint32_t>(gv) || (std::isnan(c) && std::isnan(gv))) &&
        badF++ < 4)
      diffs += "slot " + std::to_string(j / N) + " thread " + std::to_string(j % N) + ": " + std::to_string(c) +
               " vs " + std::to_string(gv) + "; ";
  }
  CHECK_MESSAGE(badF == 0, diffs);
  for (size_t i : {size_t(5), size_t(6), size_t(7)}) {
    CAPTURE(i);
    CHECK(cpu[i] == gpu[i]);
  }
  size_t badT = 0;
  diffs.clear();
  for (size_t j = 0; j < size_t(N * otr.slots); ++j) {
    float c = at<float>(cpu[8], j), gv = at<float>(gpu[8], j);
    bool same = c == gv || (std::isnan(c) && std::isnan(gv)) || std::fabs(c - gv) <= 1e-5f * std::fabs(c) + 1e-6f;
    if (!same && badT++ < 4)
      diffs += "slot " + std::to_string(j / N) + " thread " + std::to_string(j % N) + ": " + std::to_string(c) +
               " vs " + std::to_string(gv) + "; ";
  }
  CHECK_MESSAGE(badT == 0, diffs);
}

TEST_CASE("spirv on lavapipe: two-byte selects, roundings, lanes, workgroup arrays and i8 loads match the interpreter") {
  const int64_t W = 64, G = 4, N = W * G;
  kir::Builder b("two_byte", W, G);
  int32_t fi = b.buffer("f", DType::F32, N, false), hi = b.buffer("h", DType::F16, N, false);
  int32_t bfi = b.buffer("bf", DType::BF16, N, false), qi = b.buffer("q", DType::I32, N, false);
  int32_t ho = b.buffer("ho", DType::F16, N * 4, true), bfo = b.buffer("bfo", DType::BF16, N * 4, true);
  int32_t fo = b.buffer("fo", DType::F32, N * 4, true), qo = b.buffer("qo", DType::I32, N, true);
  int32_t sh = b.shared("sh", Scalar::F16, W), sb = b.shared("sb", Scalar::BF16, W);
  V lid = b.local(), t = b.add(b.mul(b.workgroupId(), b.i32(W)), lid);
  Outs oh{b, ho, t, N}, obf{b, bfo, t, N}, of{b, fo, t, N};
  V f = b.load(fi, t);
  V hv = b.convert(b.load(hi, t), Scalar::F16), bv = b.convert(b.load(bfi, t), Scalar::BF16);
  V odd = b.eq(b.binary(Opc::And, t, b.i32(1)), b.i32(1));
  oh.put(b.select(odd, hv, b.convert(f, Scalar::F16)));
  obf.put(b.select(odd, b.convert(f, Scalar::BF16), bv));
  of.put(b.roundTo(f, DType::F16));
  of.put(b.roundTo(b.mul(f, b.f32(1e-9)), DType::F16));  // f16 subnormals and zeros
  of.put(b.roundTo(f, DType::BF16));
  b.sharedStore(sh, lid, hv);
  b.sharedStore(sb, lid, bv);
  b.barrier();
  V mirror = b.sub(b.i32(W - 1), lid);
  oh.put(b.sharedLoad(sh, mirror));
  obf.put(b.sharedLoad(sb, mirror));
  oh.put(b.sharedLoadVec(sh, b.mul(b.div(lid, b.i32(4)), b.i32(4)), 4)[1]);
  auto runOf = [&](int64_t w) { return b.mul(b.div(t, b.i32(w)), b.i32(w)); };
  of.put(b.loadVec(hi, runOf(8), 8)[5]);
  obf.put(b.loadVec(bfi, runOf(4), 4)[2]);
  oh.put(b.loadVec(bfi, runOf(2), 2)[1]);  // bf16 -> f32 -> f16 rounding
  b.store(qo, t, b.load(qi, t));
  kir::Kernel k = b.finish();
  k.buffers[size_t(qi)].elem = kir::Elem::I8;  // no graph dtype is i8: the buffer retyped
  std::string text = emitValid(k);
  CHECK(text.find("OpCapability Float16") != std::string::npos);  // the f16 workgroup array
  CHECK(text.find("OpCapability StorageBuffer8BitAccess") != std::string::npos);

  std::vector<float> f1(N);
  std::vector<uint16_t> h(N), bf(N);
  std::vector<int8_t> q(N);
  std::uniform_real_distribution<float> u(-70000, 70000);
  for (int64_t i = 0; i < N; ++i) {
    f1[size_t(i)] = i % 3 == 0 ? u(rng()) * 1e-4f : u(rng());
    h[size_t(i)] = uint16_t(rng()());
    bf[size_t(i)] = uint16_t(rng()());
    q[size_t(i)] = int8_t(rng()());
    if ((h[size_t(i)] & 0x7c00) == 0x7c00) h[size_t(i)] &= 0x83ff;  // no f16 inf or NaN: payloads may differ
    if ((bf[size_t(i)] & 0x7f80) == 0x7f80) bf[size_t(i)] &= 0x807f;
  }
  f1[0] = 65504.0f, f1[1] = 65519.99f, f1[2] = 65520.0f, f1[3] = 0x1p-25f, f1[4] = 1.0f + 0x1p-8f;
  std::vector<Bytes> in = {bytesOf(f1), bytesOf(h), bytesOf(bf), bytesOf(q), Bytes(size_t(N * 4 * 2)),
                           Bytes(size_t(N * 4 * 2)), Bytes(size_t(N * 4 * 4)), Bytes(size_t(N * 4))};
  std::vector<Bytes> cpu, gpu;
  runBoth(k, 1, in, cpu, gpu);
  for (size_t i : {size_t(4), size_t(5), size_t(6), size_t(7)}) {
    CAPTURE(i);
    CHECK(cpu[i] == gpu[i]);
  }
  CHECK(at<float>(cpu[6], 1) == 65504.0f);  // 65519.99 rounds down to f16's largest
  CHECK(std::isinf(at<float>(cpu[6], 2)));  // 65520 overflows
  CHECK(at<int32_t>(cpu[7], 5) == int32_t(q[5]));
}

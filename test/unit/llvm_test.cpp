// Unit tests of the LLVM lowering (codegen/llvm): kernels built with the KIR
// Builder that use every opcode on every type it applies to, nested loops and
// ifs, variables, workgroup arrays and barriers. PTX must name the entry,
// declare workgroup memory of the kernel's size, synchronize with bar.sync and
// pass ptxas (when it is installed); HSACO must be an AMDGPU ELF whose kernel
// descriptor records the kernel's workgroup memory and whose metadata note
// names the kernel (those checks live in kernel_checks.h). Both are
// byte-identical across compiles, and compileKernels, which spreads kernels
// over threads, gives each the same bytes. lld links in this process, leaves
// no temporary file and links again after a failed link. The compile time of a 200-instruction
// kernel is printed, not asserted.
#include <doctest/doctest.h>

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "codegen/kir/builder.h"
#include "codegen/llvm/link.h"
#include "codegen/llvm/llvm.h"
#include "kernel_checks.h"

using namespace poot;
using testing::checkHsaco;
using testing::checkPtx;
using kir::Opc;
using kir::Scalar;
using kir::V;

namespace {

std::unique_ptr<llvmgen::Lowering> lowering(Target t, const std::string& arch) {
  auto l = llvmgen::Lowering::create(t, arch);
  REQUIRE_MESSAGE(bool(l), (l ? "" : l.error().str()));
  return l.take();
}

std::vector<uint8_t> compile(llvmgen::Lowering& l, const kir::Kernel& k) {
  auto blob = l.compile(k);
  REQUIRE_MESSAGE(bool(blob), (blob ? "" : blob.error().str()));
  REQUIRE(!blob->empty());
  return blob.take();
}

// Every opcode on every type it means something for, f16/bf16/bool/i64
// storage, two workgroup arrays with barriers around them, variables, and a
// loop nest with an if/else inside a loop and a loop inside an if.
kir::Kernel allOps(int64_t wg) {
  const int64_t n = 4096;
  kir::Builder b("all_ops", wg, 8);
  int32_t xf = b.buffer("x", DType::F32, n, false);
  int32_t xh = b.buffer("h", DType::F16, n, true);
  int32_t xi = b.buffer("i", DType::I32, n, true);
  int32_t xl = b.buffer("l", DType::I64, n, true);
  int32_t xb = b.buffer("b", DType::Bool, n, true);
  int32_t xbf = b.buffer("bf", DType::BF16, n, true);
  int32_t out = b.buffer("out", DType::F32, n, true);
  int32_t tile = b.shared("tile", Scalar::F32, wg);
  int32_t count = b.shared("count", Scalar::I32, 2 * wg);
  V lid = b.local();
  V gid = b.add(b.mul(b.workgroupId(), b.i32(wg)), lid);
  V x = b.load(xf, gid);
  V f = b.add(x, b.load(xh, gid));
  for (Opc op : {Opc::Add, Opc::Sub, Opc::Mul, Opc::Div, Opc::Rem, Opc::Min, Opc::Max, Opc::Pow})
    f = b.binary(op, f, b.f32(1.5));
  for (Opc op : {Opc::Neg, Opc::Abs, Opc::Exp, Opc::Exp2, Opc::Log, Opc::Sqrt, Opc::Rsqrt, Opc::Tanh, Opc::Sin, Opc::Cos,
                 Opc::Floor})
    f = b.add(f, b.unary(op, x));
  V i = b.load(xi, gid);
  V l = b.load(xl, gid);
  for (Opc op : {Opc::Add, Opc::Sub, Opc::Mul, Opc::Div, Opc::Rem, Opc::Min, Opc::Max, Opc::And, Opc::Or, Opc::Xor,
                 Opc::Shl, Opc::ShrA, Opc::ShrL}) {
    i = b.binary(op, i, b.i32(3));
    l = b.binary(op, l, b.i64(5));
  }
  for (Opc op : {Opc::Neg, Opc::Not, Opc::Abs}) {
    i = b.unary(op, i);
    l = b.unary(op, l);
  }
  V c = b.load(xb, gid);
  for (Opc op : {Opc::Lt, Opc::Le, Opc::Gt, Opc::Ge, Opc::Eq, Opc::Ne}) {
    c = b.binary(Opc::Xor, c, b.compare(op, f, x));
    c = b.binary(Opc::Or, c, b.compare(op, i, b.i32(7)));
    c = b.binary(Opc::And, c, b.compare(op, l, b.i64(-9)));
    c = b.binary(Opc::Xor, c, b.compare(op, c, b.boolean(true)));
  }
  c = b.unary(Opc::Not, c);
  f = b.add(f, b.convert(i, Scalar::F32));
  f = b.add(f, b.convert(l, Scalar::F32));
  f = b.add(f, b.convert(c, Scalar::F32));
  i = b.add(i, b.convert(f, Scalar::I32));
  i = b.add(i, b.convert(l, Scalar::I32));
  i = b.add(i, b.convert(c, Scalar::I32));
  i = b.add(i, b.convert(b.convert(i, Scalar::Bool), Scalar::I32));
  l = b.add(l, b.convert(f, Scalar::I64));
  l = b.add(l, b.convert(i, Scalar::I64));
  l = b.add(l, b.convert(c, Scalar::I64));
  c = b.binary(Opc::Xor, c, b.convert(f, Scalar::Bool));
  c = b.binary(Opc::Xor, c, b.convert(l, Scalar::Bool));
  f = b.select(c, f, b.bitcast(b.binary(Opc::Xor, b.bitcast(f, Scalar::I32), i), Scalar::F32));
  b.store(xh, gid, f);
  b.store(xi, gid, i);
  b.store(xl, gid, l);
  b.store(xb, gid, c);
  b.store(xbf, gid, b.load(xbf, gid));
  b.store(xbf, b.add(gid, b.i32(1)), f);

  b.sharedStore(tile, lid, f);
  b.sharedStore(count, lid, i);
  b.sharedStore(count, b.add(lid, b.i32(int32_t(wg))), b.i32(0));
  b.barrier();
  int32_t acc = b.var(Scalar::F32, b.f32(0));
  int32_t hits = b.var(Scalar::I32, b.i32(0));
  b.forRange(b.i32(0), b.i32(int32_t(wg)), 1, [&](V j) {
    V t = b.sharedLoad(tile, b.rem(b.add(lid, j), b.i32(int32_t(wg))));
    b.ifElse(
        b.gt(t, b.get(acc)), [&] { b.set(acc, t); },
        [&] {
          b.forRange(b.i32(0), b.i32(4), 2, [&](V q) { b.set(hits, b.add(b.get(hits), q)); });
        });
  });
  b.barrier();
  b.ifThen(b.lt(b.groupY(), b.i32(2)), [&] {
    b.forRange(b.i32(0), b.i32(3), 1, [&](V r) {
      b.sharedStore(count, b.add(lid, b.i32(int32_t(wg))), b.add(b.get(hits), r));
      b.barrier();
    });
  });
  V total = b.add(b.get(acc), b.convert(b.sharedLoad(count, b.add(lid, b.i32(int32_t(wg)))), Scalar::F32));
  b.ifThen(b.lt(gid, b.i32(int32_t(n))), [&] { b.store(out, gid, total); });
  return b.finish();
}

// A straight chain of about 200 instructions, as an elementwise kernel.
kir::Kernel chain200() {
  kir::Builder b("chain", 256, 64);
  int32_t x = b.buffer("x", DType::F32, 1 << 14, false), out = b.buffer("out", DType::F32, 1 << 14, true);
  V gid = b.add(b.mul(b.workgroupId(), b.i32(256)), b.local());
  V v = b.load(x, gid);
  while (b.kernel().insts.size() < 200) v = b.add(b.mul(v, b.f32(1.0001)), b.exp(b.neg(b.mul(v, v))));
  b.store(out, gid, v);
  return b.finish();
}

// pow on integers, which no target lowers.
kir::Kernel intPow() {
  kir::Builder b("int_pow", 32, 1);
  int32_t out = b.buffer("out", DType::I32, 32, true);
  b.store(out, b.local(), b.binary(Opc::Pow, b.local(), b.i32(2)));
  return b.finish();
}

// Bytes that are no object.
std::vector<uint8_t> junk() {
  std::string text = "not an object";
  return std::vector<uint8_t>(text.begin(), text.end());
}

}  // namespace

TEST_CASE("llvm: ptx of every opcode names the entry, sizes .shared, has bar.sync and passes ptxas") {
  auto l = lowering(Target::Ptx, "sm_90");
  for (int64_t wg : {64, 256}) {
    CAPTURE(wg);
    kir::Kernel k = allOps(wg);
    auto blob = compile(*l, k);
    checkPtx(k, std::string(blob.begin(), blob.end()), "sm_90");
  }
}

TEST_CASE("llvm: ptx math uses the ptx approximations with ieee sqrt and division") {
  auto l = lowering(Target::Ptx, "sm_90");
  std::string ptx;
  for (auto blob = compile(*l, allOps(64)); uint8_t c : blob) ptx += char(c);
  for (const char* op : {"ex2.approx.f32", "lg2.approx.f32", "sin.approx.f32", "cos.approx.f32", "sqrt.rn.f32",
                         "div.rn.f32", "min.f32", "max.f32", "cvt.rmi.f32.f32", "cvt.f32.f16", "cvt.rn.f16.f32"})
    CHECK_MESSAGE(ptx.find(op) != std::string::npos, op);
  CHECK(ptx.find(".ftz") == std::string::npos);
}

TEST_CASE("llvm: the ir marks the kernel the target's way and keeps buffers may-alias") {
  kir::Kernel k = allOps(128);
  std::string ptxIr = lowering(Target::Ptx, "sm_90")->llvmIr(k);
  CHECK(ptxIr.find("define ptx_kernel void @all_ops(ptr addrspace(1)") != std::string::npos);
  CHECK(ptxIr.find("!\"maxntidx\", i32 128") != std::string::npos);
  // Both workgroup arrays (128 f32, 256 i32) in one aligned object.
  CHECK(ptxIr.find("@poot_shared = internal unnamed_addr addrspace(3) global [1536 x i8] undef, align 16") != std::string::npos);
  CHECK(ptxIr.find("noalias") == std::string::npos);
  CHECK(ptxIr.find("alloca") == std::string::npos);  // variables promoted
  std::string amdIr = lowering(Target::Hsaco, "gfx942")->llvmIr(k);
  CHECK(amdIr.find("define amdgpu_kernel void @all_ops(ptr addrspace(1)") != std::string::npos);
  CHECK(amdIr.find("\"amdgpu-flat-work-group-size\"=\"1,128\"") != std::string::npos);
  CHECK(amdIr.find("fence syncscope(\"workgroup\") release") != std::string::npos);
  CHECK(amdIr.find("@llvm.amdgcn.s.barrier") != std::string::npos);
  CHECK(amdIr.find("noalias") == std::string::npos);
}

TEST_CASE("llvm: hsaco for gfx942 and gfx1100 is an amdgpu elf with the kernel descriptor and metadata") {
  for (const char* arch : {"gfx942", "gfx1100"}) {
    CAPTURE(arch);
    auto l = lowering(Target::Hsaco, arch);
    for (int64_t wg : {64, 256}) {
      CAPTURE(wg);
      kir::Kernel k = allOps(wg);
      checkHsaco(k, compile(*l, k));
    }
    kir::Kernel plain = chain200();
    checkHsaco(plain, compile(*l, plain));
  }
}

TEST_CASE("llvm: compiles are deterministic") {
  kir::Kernel k = allOps(64);
  for (auto [t, arch] : {std::pair{Target::Ptx, "sm_90"}, {Target::Hsaco, "gfx942"}}) {
    CAPTURE(arch);
    auto l = lowering(t, arch);
    auto first = compile(*l, k);
    CHECK(compile(*l, k) == first);
    CHECK(compile(*lowering(t, arch), k) == first);
  }
}

TEST_CASE("llvm: unknown archs and spirv are capability errors naming them") {
  for (auto [t, arch] : {std::pair{Target::Ptx, "sm_999"}, {Target::Hsaco, "gfx9999"}, {Target::Ptx, "gfx942"}}) {
    auto l = llvmgen::Lowering::create(t, arch);
    REQUIRE(!l);
    CHECK(l.error().kind == ErrorKind::Capability);
    CHECK(l.error().message.find(arch) != std::string::npos);
  }
  auto s = llvmgen::Lowering::create(Target::Spirv, "vulkan1.2");
  REQUIRE(!s);
  CHECK(s.error().kind == ErrorKind::Capability);
}

TEST_CASE("llvm: warp operations are mma.sync and shfl.sync on ptx, refused on amdgpu") {
  kir::Builder b("warp_ops", 64, 1);
  int32_t out = b.buffer("out", DType::F32, 64 * 4, true);
  V x = b.toTf32(b.convert(b.local(), kir::Scalar::F32));
  std::array<V, 4> d = b.mma(MatrixOp::M16N8K8Tf32, {x, x, x, x}, {x, x}, {b.f32(0), b.f32(0), b.f32(0), b.shuffleXor(x, 3)});
  V h = b.convert(x, kir::Scalar::BF16), f = b.convert(x, kir::Scalar::F16);
  d = b.mma(MatrixOp::M16N8K16Bf16, std::vector<V>(8, h), std::vector<V>(4, h), d);
  d = b.mma(MatrixOp::M16N8K16F16, std::vector<V>(8, f), std::vector<V>(4, f), d);
  for (int64_t e = 0; e < 4; ++e) b.store(out, b.add(b.mul(b.local(), b.i32(4)), b.i32(e)), d[size_t(e)]);
  kir::Kernel k = b.finish();
  std::string ptx;
  for (auto blob = compile(*lowering(Target::Ptx, "sm_90"), k); uint8_t c : blob) ptx += char(c);
  CHECK(ptx.find("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != std::string::npos);
  CHECK(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != std::string::npos);
  CHECK(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") != std::string::npos);
  CHECK(ptx.find("shfl.sync.bfly.b32") != std::string::npos);
  checkPtx(k, ptx, "sm_90");
  auto amd = lowering(Target::Hsaco, "gfx942")->compile(k);
  REQUIRE(!amd);
  CHECK(amd.error().message.find("shuffle.xor on f32 has no llvm lowering") != std::string::npos);
}

// A chain of three mma.shared and waits for it: one fence (the async
// proxy's and wgmma's) before the first link, one wgmma.mma_async a link,
// one commit after the last, then the waits (for all but one chain, with no
// operands; for all, the sums threaded through it); the descriptors carry
// the 128-byte swizzle (bit 62); the workgroup memory is 1024-byte aligned;
// sm_90a.
// The kernel's PTX for sm_90a (the warpgroup ops'), and how often `what`
// stands in a text.
std::string sm90aPtx(const kir::Kernel& k) {
  std::string ptx;
  for (auto blob = compile(*lowering(Target::Ptx, "sm_90a"), k); uint8_t c : blob) ptx += char(c);
  return ptx;
}
size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("llvm: a chain of mma.shared is wgmma on ptx sm_90a, refused on amdgpu") {
  kir::Builder b("group_ops", 128, 1);
  int32_t out = b.buffer("out", DType::F32, 128 * 8, true);
  int32_t tiles = b.shared("tiles", kir::Scalar::F16, 64 * 64 + 16 * 64);
  V zero = b.i32(0), rows = b.i32(512), f = b.convert(b.local(), kir::Scalar::F32);
  b.sharedStore(tiles, b.local(), b.convert(f, kir::Scalar::F16));
  b.barrier();
  V d = b.mmaShared(MatrixOp::M64NK16F16, tiles, {zero, rows}, {b.i32(64 * 64), rows}, std::vector<V>(8, f));
  d = b.mmaShared(d, {b.i32(16), rows}, {b.i32(64 * 64 + 16), rows});
  d = b.mmaShared(d, {b.i32(32), rows}, {b.i32(64 * 64 + 32), rows});
  std::vector<V> acc = b.mmaResult(d);
  b.mmaWait(1, {});  // as a pipelined product waits for the chain before the last
  std::vector<V> r = b.mmaWait(0, acc);
  for (int64_t e = 0; e < 8; ++e) b.store(out, b.add(b.mul(b.local(), b.i32(8)), b.i32(e)), r[size_t(e)]);
  kir::Kernel k = b.finish();
  std::string ptx = sm90aPtx(k);
  auto count = [&](const std::string& what) { return occurrences(ptx, what); };
  CHECK(count("wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16") == 3);
  CHECK(count("fence.proxy.async.shared::cta") == 1);
  CHECK(count("wgmma.fence.sync.aligned") == 1);
  CHECK(count("wgmma.commit_group.sync.aligned") == 1);
  CHECK(count("wgmma.wait_group.sync.aligned 1;") == 1);
  CHECK(count("wgmma.wait_group.sync.aligned 0;") == 1);
  CHECK(ptx.find("wgmma.fence.sync.aligned") < ptx.find("wgmma.mma_async"));
  CHECK(ptx.rfind("wgmma.mma_async") < ptx.find("wgmma.commit_group"));
  CHECK(ptx.find("wgmma.commit_group") < ptx.find("wgmma.wait_group"));
  CHECK(ptx.find(".align 1024") != std::string::npos);
  // 1 << 62 | (1024 / 16) << 32: the 128-byte swizzle and the 1024-byte block stride.
  CHECK(ptx.find("4611686293305294848") != std::string::npos);
  checkPtx(k, ptx, "sm_90a");
  auto amd = lowering(Target::Hsaco, "gfx942")->compile(k);
  REQUIRE(!amd);
  CHECK(amd.error().message.find("mma.shared on f32 has no llvm lowering") != std::string::npos);
}

TEST_CASE("llvm: a chain of mma.shared.b is wgmma with A in registers and B read transposed") {
  kir::Builder b("group_b_ops", 128, 1);
  int32_t out = b.buffer("out", DType::F32, 128 * 64, true);
  int32_t tiles = b.shared("tiles", kir::Scalar::BF16, 2 * 32 * 64);
  V f = b.convert(b.local(), kir::Scalar::F32), h = b.convert(f, kir::Scalar::BF16);
  b.sharedStore(tiles, b.local(), h);
  b.barrier();
  std::vector<V> a(8, h), a2(8, h);
  a[7] = b.convert(b.add(f, f), kir::Scalar::BF16);
  a2[0] = b.convert(b.mul(f, f), kir::Scalar::BF16);
  V rows = b.i32(512), blocks = b.i32(2048);
  V d = b.mmaSharedB(MatrixOp::M64NK16Bf16, tiles, a, {b.i32(0), rows, blocks}, std::vector<V>(64, f));
  d = b.mmaSharedB(d, a2, {b.i32(1024), rows, blocks});
  std::vector<V> r = b.mmaWait(0, b.mmaResult(d));
  for (int64_t e = 0; e < 64; ++e) b.store(out, b.add(b.mul(b.local(), b.i32(64)), b.i32(e)), r[size_t(e)]);
  kir::Kernel k = b.finish();
  std::string ptx = sm90aPtx(k);
  auto count = [&](const std::string& what) { return occurrences(ptx, what); };
  CHECK(count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 2);
  CHECK(count(", p, 1, 1, 1;") == 2);  // imm-trans-b: B is N-major
  // Both links' A registers are packed before the fence: nothing writes a
  // register between the links (ptxas would fence again).
  size_t first = ptx.find("wgmma.mma_async"), commit = ptx.find("wgmma.commit_group");
  CHECK(ptx.substr(first, commit - first).find("mov.b32") == std::string::npos);
  CHECK(count("wgmma.fence.sync.aligned") == 1);
  CHECK(count("wgmma.commit_group.sync.aligned") == 1);
  // 1 << 62 | (1024 / 16) << 32 | (4096 / 16) << 16: the swizzle, the
  // 8-row blocks' stride and the 64-column blocks' stride.
  CHECK(ptx.find(std::to_string((uint64_t(1) << 62) | (uint64_t(64) << 32) | (uint64_t(256) << 16))) != std::string::npos);
  checkPtx(k, ptx, "sm_90a");
}

TEST_CASE("llvm: asynchronous copies are cp.async on ptx, refused on amdgpu") {
  kir::Builder b("copies", 32, 1);
  int32_t src = b.buffer("src", DType::BF16, 32 * 8, false), out = b.buffer("out", DType::F32, 32, true);
  int32_t tile = b.shared("tile", kir::Scalar::BF16, 32 * 8);
  V at = b.mul(b.local(), b.i32(8));
  b.copyAsync(src, at, tile, at, b.lt(b.local(), b.i32(20)));
  b.asyncCommit();
  b.asyncWait(0);
  b.barrier();
  b.store(out, b.local(), b.convert(b.sharedLoad(tile, at), kir::Scalar::F32));
  kir::Kernel k = b.finish();
  std::string ptx;
  for (auto blob = compile(*lowering(Target::Ptx, "sm_90"), k); uint8_t c : blob) ptx += char(c);
  CHECK(ptx.find("cp.async.cg.shared.global") != std::string::npos);
  CHECK(ptx.find("cp.async.commit_group") != std::string::npos);
  CHECK(ptx.find("cp.async.wait_group 0") != std::string::npos);
  checkPtx(k, ptx, "sm_90");
  auto amd = lowering(Target::Hsaco, "gfx942")->compile(k);
  REQUIRE(!amd);
  CHECK(amd.error().message.find("copy.async on i32 has no llvm lowering") != std::string::npos);
}

TEST_CASE("llvm: an operation with no meaning on its type is an error, not a crash") {
  auto blob = lowering(Target::Ptx, "sm_90")->compile(intPow());
  REQUIRE(!blob);
  CHECK(blob.error().kind == ErrorKind::Verify);
  CHECK(blob.error().message.find("pow on i32") != std::string::npos);
}

TEST_CASE("llvm: a failing link is an io error with lld's arguments and messages, and lld links again after it") {
  auto r = llvmgen::linkHsaco(junk());
  REQUIRE(!r);
  CHECK(r.error().kind == ErrorKind::Io);
  CHECK(r.error().message.find("ld.lld -shared") != std::string::npos);
  CHECK(r.error().message.find("failed") != std::string::npos);
  CHECK(r.error().message.find("ld.lld: error: ") != std::string::npos);  // lld's own message
  kir::Kernel k = chain200();
  checkHsaco(k, compile(*lowering(Target::Hsaco, "gfx942"), k));
}

TEST_CASE("llvm: hsaco links leave no temporary files behind") {
  auto dir = std::filesystem::temp_directory_path() / ("poot-llvm-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const char* saved = std::getenv("TMPDIR");
  std::string before = saved ? saved : "";
  setenv("TMPDIR", dir.c_str(), 1);
  auto l = lowering(Target::Hsaco, "gfx942");
  compile(*l, chain200());
  CHECK(!llvmgen::linkHsaco(junk()));
  if (saved) setenv("TMPDIR", before.c_str(), 1);
  else unsetenv("TMPDIR");
  CHECK(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST_CASE("llvm: compileKernels gives each kernel the blob compile() gives it, in order, on any number of threads") {
  std::vector<kir::Kernel> kernels = {chain200(), intPow(), allOps(64)};
  for (auto [t, arch] : {std::pair{Target::Ptx, "sm_90"}, {Target::Hsaco, "gfx942"}}) {
    CAPTURE(arch);
    auto l = lowering(t, arch);
    std::vector<uint8_t> first = compile(*l, kernels[0]), last = compile(*l, kernels[2]);
    for (unsigned threads : {1u, 2u, 8u}) {
      CAPTURE(threads);
      auto blobs = llvmgen::compileKernels(t, arch, kernels, threads);
      REQUIRE(blobs);
      REQUIRE(blobs->size() == kernels.size());
      REQUIRE((*blobs)[0]);
      CHECK(*(*blobs)[0] == first);
      REQUIRE(!(*blobs)[1]);
      CHECK((*blobs)[1].error().message.find("pow on i32") != std::string::npos);
      REQUIRE((*blobs)[2]);
      CHECK(*(*blobs)[2] == last);
    }
  }
  auto none = llvmgen::compileKernels(Target::Hsaco, "gfx9999", kernels, 2);
  REQUIRE(!none);
  CHECK(none.error().kind == ErrorKind::Capability);
}

TEST_CASE("llvm: compile time of a 200-instruction kernel") {
  kir::Kernel k = chain200();
  CHECK(k.insts.size() >= 200);
  using ms = std::chrono::duration<double, std::milli>;
  for (auto [t, arch] : {std::pair{Target::Ptx, "sm_90"}, {Target::Hsaco, "gfx942"}}) {
    auto start = std::chrono::steady_clock::now();
    auto l = lowering(t, arch);
    auto made = std::chrono::steady_clock::now();
    const int runs = 5;
    for (int i = 0; i < runs; ++i) compile(*l, k);
    auto done = std::chrono::steady_clock::now();
    MESSAGE(std::string(targetName(t)) << " " << std::string(arch) << ": lowering made in " << ms(made - start).count() << " ms, "
                          << k.insts.size() << "-instruction kernel compiled in " << ms(done - made).count() / runs
                          << " ms");
  }
}

TEST_CASE("llvm: a kernel the backend refuses is an error, not an exit") {
  kir::Builder b("huge_lds", 64, 1);
  int32_t out = b.buffer("out", DType::F32, 64, true);
  int32_t big = b.shared("big", Scalar::F32, 1 << 20);
  b.sharedStore(big, b.mul(b.local(), b.i32(4096)), b.f32(1));
  b.barrier();
  b.store(out, b.local(), b.sharedLoad(big, b.i32(12345)));
  auto blob = lowering(Target::Hsaco, "gfx942")->compile(b.finish());
  REQUIRE(!blob);
  CHECK(blob.error().kind == ErrorKind::Capability);
  CHECK(blob.error().capability == "LlvmBackend");
  CHECK(blob.error().message.find("huge_lds") != std::string::npos);
}

TEST_CASE("llvm: two-byte values convert, select, load wide and stage in workgroup arrays as half and bfloat") {
  kir::Builder b("two_byte", 64, 2);
  int32_t x = b.buffer("x", DType::F32, 128, false), h = b.buffer("h", DType::F16, 128, false);
  int32_t bf = b.buffer("bf", DType::BF16, 128, false), q = b.buffer("q", DType::I32, 128, false);
  int32_t oh = b.buffer("oh", DType::F16, 128, true), obf = b.buffer("obf", DType::BF16, 128, true);
  int32_t out = b.buffer("out", DType::F32, 128, true);
  int32_t sh = b.shared("sh", Scalar::F16, 64), sb = b.shared("sb", Scalar::BF16, 64);
  V lid = b.local(), t = b.add(b.mul(b.workgroupId(), b.i32(64)), lid);
  V f = b.load(x, t);
  V hv = b.convert(b.load(h, t), Scalar::F16), bv = b.convert(b.load(bf, t), Scalar::BF16);
  V odd = b.eq(b.binary(Opc::And, t, b.i32(1)), b.i32(1));
  b.sharedStore(sh, lid, b.select(odd, hv, b.convert(f, Scalar::F16)));
  b.sharedStore(sb, lid, b.select(odd, b.convert(f, Scalar::BF16), bv));
  b.barrier();
  V mirror = b.sub(b.i32(63), lid);
  b.store(oh, t, b.sharedLoad(sh, mirror));
  b.store(obf, t, b.sharedLoad(sb, mirror));
  V base = b.mul(b.div(t, b.i32(4)), b.i32(4));
  V sum = b.add(b.loadVec(h, base, 4)[1], b.loadVec(bf, base, 4)[2]);
  sum = b.add(sum, b.convert(b.sharedLoadVec(sh, b.mul(b.div(lid, b.i32(4)), b.i32(4)), 4)[3], Scalar::F32));
  sum = b.add(sum, b.roundTo(f, DType::F16));
  b.store(out, t, b.add(sum, b.convert(b.load(q, t), Scalar::F32)));
  kir::Kernel k = b.finish();
  k.buffers[size_t(q)].elem = kir::Elem::I8;  // no graph dtype is i8: the buffer retyped
  CHECK(k.sharedBytes() == 256);

  std::string ir = lowering(Target::Ptx, "sm_90")->llvmIr(k);
  // Optimized IR: the wide loads whose other lanes go unused are narrowed.
  for (const char* want : {"fpext half", "fpext bfloat", "fptrunc float", "to half", "to bfloat", "load half",
                           "load bfloat", "select i1", "load i8", "store half", "store bfloat"})
    CHECK_MESSAGE(ir.find(want) != std::string::npos, std::string(want));
  auto ptx = compile(*lowering(Target::Ptx, "sm_90"), k);
  checkPtx(k, std::string(ptx.begin(), ptx.end()), "sm_90");
  checkHsaco(k, compile(*lowering(Target::Hsaco, "gfx942"), k));
}

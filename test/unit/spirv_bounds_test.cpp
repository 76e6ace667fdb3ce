// Unit tests of the local index bounds (lib/runtime/spirv_bounds.h): a
// generated kernel's workgroup indices are clamped and its storage buffer
// indices left as they were, and the result validates; a module with no
// local arrays comes back unchanged; what the pass cannot follow is refused.
// On lavapipe, an index from the data past a workgroup array (or negative)
// stores to and loads from the array's last element, and the forged plan
// fuzz_forged_plan found (a gemv whose partial-sum index was multiplied out
// of its array; it crashed lavapipe) runs a step.
#include <doctest/doctest.h>

#include <climits>
#include <cstring>
#include <map>
#include <string>

#include "codegen/kir/builder.h"
#include "codegen/kir/legalize.h"
#include "codegen/spirv/spirv.h"
#include "ir/io.h"
#include "lavapipe.h"
#include "oracle/tensor.h"
#include "runtime/plan_reader.h"
#include "runtime/session.h"
#include "runtime/spirv_bounds.h"

using namespace poot;
using kir::Scalar;
using kir::V;

namespace {

std::vector<uint32_t> emitted(kir::Kernel k) {
  kir::legalize(k, Target::Spirv);
  auto words = spirv::emit(k);
  REQUIRE_MESSAGE(bool(words), (words ? "" : words.error().str()));
  return *words;
}

// 64 threads: s[t] = 10 t; then thread 0 stores 777 at s[idx[0]]; then
// out[t] = s[t], and thread 0 also loads out[64] = s[idx[1]]. Both indices
// come from the data, so no compiler can tell they are in range.
std::vector<uint32_t> storeAtIndex() {
  kir::Builder b("store_at_index", 64, 2);
  int32_t idx = b.buffer("idx", DType::I32, 2, false), out = b.buffer("out", DType::F32, 65, true);
  int32_t s = b.shared("s", Scalar::F32, 64);
  V t = b.local();
  b.sharedStore(s, t, b.convert(b.mul(t, b.i32(10)), Scalar::F32));
  b.barrier();
  b.ifThen(b.eq(t, b.i32(0)), [&] { b.sharedStore(s, b.load(idx, b.i32(0)), b.f32(777)); });
  b.barrier();
  b.store(out, t, b.sharedLoad(s, t));
  b.ifThen(b.eq(t, b.i32(0)), [&] { b.store(out, b.i32(64), b.sharedLoad(s, b.load(idx, b.i32(1)))); });
  return emitted(b.finish());
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

template <class T>
T take(Expected<T> e) {
  REQUIRE_MESSAGE(bool(e), (e ? "" : e.error().str()));
  return e.take();
}

}  // namespace

TEST_CASE("spirv bounds: workgroup indices are clamped, buffer indices left alone, the result validates") {
  std::vector<uint32_t> in = storeAtIndex();
  std::string before = spirv::disassemble(in);
  auto out = rt::boundLocalIndices(in);
  REQUIRE_MESSAGE(bool(out), (out ? "" : out.error().str()));
  Status valid = spirv::validate(*out);
  std::string after = spirv::disassemble(*out);
  REQUIRE_MESSAGE(bool(valid), (valid ? "" : valid.error().str() + "\n" + after));
  // Four workgroup accesses (two by the thread's index, two by the data's),
  // none by a constant: four clamps, to the one bound 63.
  size_t chains = count(before, "OpAccessChain %_ptr_Workgroup_float");
  CHECK(chains == 4);
  CHECK(count(after, "UMin") == chains);
  CHECK(count(after, "OpConstant %int 63") == 1);
  CHECK(count(after, "OpAccessChain %_ptr_StorageBuffer") == count(before, "OpAccessChain %_ptr_StorageBuffer"));
  // The kernel imports no GLSL.std.450; its UMin brings the import.
  CHECK(count(before, "GLSL.std.450") == 0);
  CHECK(count(after, "OpExtInstImport \"GLSL.std.450\"") == 1);
  CHECK(out->size() == in.size() + 7 * chains + 4 + 6);  // a UMin each, one constant, the import
  CHECK((*out)[3] == in[3] + chains + 2);                // the bound: the new ids

  // Storage buffer accesses alone: nothing to bound.
  kir::Builder b("copy", 64, 1);
  int32_t x = b.buffer("x", DType::F32, 64, false), y = b.buffer("y", DType::F32, 64, true);
  b.store(y, b.local(), b.load(x, b.local()));
  std::vector<uint32_t> plain = emitted(b.finish());
  CHECK(take(rt::boundLocalIndices(plain)) == plain);
}

TEST_CASE("spirv bounds: what the pass cannot follow is refused") {
  std::vector<uint32_t> in = storeAtIndex();
  auto refusal = [](const std::vector<uint32_t>& w) {
    auto r = rt::boundLocalIndices(w);
    REQUIRE(!r);
    CHECK(r.error().kind == ErrorKind::Format);
    return r.error().message;
  };
  // The first workgroup access chain's base replaced by its index.
  std::vector<uint32_t> w = in;
  size_t at = 0;
  for (size_t i = 5; i < w.size() && !at; i += w[i] >> 16)
    if ((w[i] & 0xffff) == 65 && (w[i] >> 16) == 5 && w[i + 4] != w[i + 3]) {
      bool shared = false;  // its base is the workgroup array: an OpVariable of storage class 4
      for (size_t j = 5; j < w.size(); j += w[j] >> 16)
        shared |= (w[j] & 0xffff) == 59 && w[j + 2] == w[i + 3] && w[j + 3] == 4;
      if (shared) at = i;
    }
  REQUIRE(at > 0);
  w[at + 3] = w[at + 4];
  CHECK(refusal(w) == "the spir-v module indexes through %" + std::to_string(w[at + 4]) +
                          ", which is not a pointer (word " + std::to_string(at) + ")");
  // The array's length made an id that is no constant.
  w = in;
  for (size_t i = 5; i < w.size(); i += w[i] >> 16)
    if ((w[i] & 0xffff) == 28) w[i + 3] = w[3] - 1;  // OpTypeArray's length
  CHECK(refusal(w).find("indexes into an array whose length is not a positive integer constant") !=
        std::string::npos);
}

TEST_CASE("spirv bounds: on lavapipe an index past a workgroup array, or negative, reaches its last element") {
  std::unique_ptr<rt::Backend> b = testing::lavapipe();
  std::vector<uint32_t> words = storeAtIndex();
  std::vector<uint8_t> blob(4 * words.size());
  std::memcpy(blob.data(), words.data(), blob.size());
  rt::KernelId k = take(b->createKernel(blob, "store_at_index", 64, 256, 2, false));
  rt::BufferId idx = take(b->allocate(8)), out = take(b->allocate(65 * 4));
  rt::ProgramId p = take(b->record({{k, {1, 1, 1}, {{idx, 0, 8}, {out, 0, 65 * 4}}}}));
  for (auto [store, load] : std::vector<std::pair<int32_t, int32_t>>{
           {5, 17}, {63, 63}, {64, 64}, {1000, 100000}, {-3, INT_MIN}, {INT_MAX, -1}}) {
    CAPTURE(store);
    CAPTURE(load);
    int32_t i[2] = {store, load};
    REQUIRE(bool(b->upload(idx, 0, i, 8)));
    REQUIRE(bool(b->run(p)));
    std::vector<float> got(65);
    REQUIRE(bool(b->download(out, 0, got.data(), 65 * 4)));
    auto within = [](int32_t v) { return int(std::min<uint32_t>(uint32_t(v), 63)); };
    std::vector<float> want(65);
    for (int t = 0; t < 64; ++t) want[size_t(t)] = float(10 * t);
    want[size_t(within(store))] = 777;
    want[64] = want[size_t(within(load))];
    CHECK(got == want);
  }
}

// fuzz_forged_plan's finding: chain.plan (three products and a negation)
// with one byte of the first gemv's SPIR-V changed, so the constant 8 of
// its partial-sum indexing reads 67108872 (the validator accepts it), and
// the checksum rewritten. Its step wrote far past the workgroup array and
// crashed lavapipe; bounded, it runs (its values are whatever the forged
// indexing makes of zeros).
TEST_CASE("spirv bounds: the forged gemv fuzz_forged_plan found runs a step on lavapipe") {
  std::string path = std::string(POOT_SOURCE_DIR) + "/test/unit/Inputs/forged-workgroup-index.plan";
  auto plan = take(rt::readPlanFile(take(readFile(path)), path));
  std::map<std::string, Tensor> weights, inputs;
  for (const rt::Buffer& buf : plan.buffers)
    if (buf.role == rt::Role::Weight) weights.emplace(buf.name, Tensor(buf.type));
    else if (buf.role == rt::Role::Input) inputs.emplace(buf.name, Tensor(buf.type));
  REQUIRE(plan.slots.empty());
  rt::SessionOptions opts;
  opts.allowOtherDevice = true;
  auto session = take(rt::Session::create(std::move(plan), testing::lavapipe(), opts));
  REQUIRE(bool(session->bindWeights(weights)));
  auto step = session->step(inputs);
  CHECK_MESSAGE(bool(step), (step ? "" : step.error().str()));
}

// KIR: the one kernel IR every generator writes and every emitter reads. A
// kernel is a 1-D workgroup of `workgroupSize` threads over a grid folded into
// x and y; it sees its storage buffers (binding i is buffers[i], in the
// dispatch's binding order), its workgroup-memory arrays and a few mutable
// scalar variables, and runs one structured body: straight-line scalar SSA
// values, `for` loops and `if`s, and barriers. There are no pointers, no
// private arrays and no early returns, so the SPIR-V writer can keep its
// control flow structured and no driver sees a dynamically indexed private
// array. Instructions live in one vector and name each other by index; a
// value defined in a block is visible in that block after it and in the
// blocks nested there.
//
// Semantics (the interpreter in interp.h is the reference; the emitters keep
// it):
//  - Values are bool, i32, i64, f32, f16 or bf16. Buffers store f32, f16,
//    bf16, i32, i64, u8, i8 or u16 elements: a load gives the element's own
//    value type (f16 and bf16 as themselves; u8/u16 zero-extended and i8
//    sign-extended to i32), a store takes it (i32 -> u8/i8/u16 keeps the low
//    bits). The Builder maps graph dtypes onto these: bool is a u8 0/1, and
//    its load() and store() give and take f32 for every float dtype (the
//    typed Load or Store with a Convert), so generators compute in f32.
//  - f16 and bf16 are storage types: only Convert (to and from f32), Load,
//    Store, LoadVec/Lane, Select, variables, workgroup arrays (SharedLoad,
//    SharedStore and their wide forms) and Mma's operands take them; no
//    arithmetic, compare or constant does (the verifier refuses them). Convert f32 -> f16/bf16 rounds
//    to nearest even; NaN stays NaN (quiet, its sign kept), f16 overflows to
//    an infinity from 65520 up and keeps its subnormals; f16/bf16 -> f32 is
//    exact. A target without a two-byte type has it lowered before emission
//    (legalize.h: bf16 becomes its bit pattern in an i32 on SPIR-V).
//  - Integer arithmetic wraps (two's complement); Div and Rem on integers
//    truncate toward zero (the divisor is never 0 in generated code); Shl,
//    ShrA, ShrL take a shift amount in [0, bits).
//  - Float arithmetic is IEEE f32 with round to nearest even; Min and Max on
//    floats return the other operand when one is NaN (generators that must
//    propagate NaN test for it), and either zero for +0 and -0; Exp, Exp2
//    (2^x), Log, Tanh, Sin, Cos, Pow, Sqrt and Rsqrt may be the device's
//    approximations (a few ulp); Exp2 of -inf is +0.
//  - Fma(a, b, c) is a * b + c on f32, rounded once where the target fuses
//    it (the interpreter and LLVM do) and possibly as a rounded product then
//    a rounded sum where it may not (SPIR-V's Fma leaves that to the
//    driver); a generator uses it only where its stated error bound holds
//    either way.
//  - Compares on floats are ordered (false on NaN) except Ne, which is true
//    on NaN, as in C.
//  - Convert: f32 -> int truncates toward zero (out of range is
//    unspecified); int -> f32 rounds; i32 <-> i64 sign-extends or truncates;
//    bool -> number is 0/1; number -> bool is `!= 0`; f16 and bf16 convert
//    to and from f32 only (above). Bitcast: f32 <-> i32.
//  - For(lo, hi) {body} runs its induction value i = lo, lo + step, ... while
//    i < hi (i32, signed); the For instruction's own id is that value inside
//    the body. Generators keep hi + step within i32 (the LLVM lowering adds
//    without wrap); the interpreter and the SPIR-V writer also stop a loop
//    whose next value would wrap.
//  - Barrier: every thread of the workgroup reaches it (generators only place
//    it in workgroup-uniform control flow); it orders workgroup memory.
//  - LoadVec reads `imm` (2, 4 or 8; at most 16 bytes) consecutive elements of
//    a read-only buffer from `index`, a multiple of imm (every buffer starts
//    16-byte aligned, so an emitter may issue one aligned wide access); its
//    value is only ever read by Lane, which gives element index + Lane's imm,
//    typed as Load gives it. The SPIR-V writer, whose logical addressing has
//    no pointer cast, reads it through a second binding of the buffer typed
//    as an array of vectors; the read-only rule makes that aliasing safe.
//  - Workgroup arrays hold elements of any value type but bool, laid end to
//    end in declaration order, each at the first byte offset past the one
//    before that is a multiple of its element size (Kernel::sharedOffsets);
//    Kernel::sharedBytes is where the last ends.
//  - SharedLoadVec reads `imm` (2, 4 or 8) consecutive elements of a workgroup
//    array from `index`, a multiple of imm, all at once: its Lanes give the
//    elements as they were at the SharedLoadVec, whatever is stored after it.
//    The access is at most 16 bytes and the array's byte offset is a
//    multiple of its bytes, so with every array run starting 16-byte aligned
//    it is one aligned wide load; a target without one (the SPIR-V writer)
//    issues the imm scalar loads where the SharedLoadVec stands.
//    SharedStoreVec is its store: imm (2, 4 or 8) values into consecutive
//    elements from `index`, under the same alignment rules.
//  - Warps: threads 32w .. 32w + 31 of the workgroup are warp w, a thread's
//    lane is its index % 32. Mma and ShuffleXor are executed by a whole
//    warp at once: the workgroup size is a multiple of 32 and, like Barrier,
//    they stand only in workgroup-uniform control flow (the verifier checks
//    both), so every lane of a warp takes part.
//  - ShuffleXor(x), imm m in [1, 32): the value x of lane (lane ^ m) of the
//    same warp (f32 or i32).
//  - Mma(a..., b..., c0..c3), ref the MatrixOp (ir/matrix.h): the warp's
//    D = A * B + C for an m x k A, a k x n B and m x n C and D (16 x 8, or
//    16 x 16 for the m16n16k16 shapes, whose "warp" is a wave of 64:
//    threads 64w .. 64w + 63, lane index % 64, the workgroup a multiple of
//    64), each lane holding a fixed part of each, as PTX's mma.sync or
//    AMD's MFMA lays them out (mmaA, mmaB and mmaC below give element e of
//    lane l): A's aRegs and B's bRegs operands are of the shape's operand
//    type (bf16, f16, or f32 holding TF32 values: the low 13 mantissa bits
//    zero, Builder::toTf32, which the interpreter checks and a device may
//    ignore), C's four and D's four are f32, D read by Lane 0..3. Every
//    product is exact in f32; D[i][j] is C[i][j] plus the k products, added
//    in an unspecified order with unspecified rounding of the partial sums
//    (the interpreter adds in double and rounds once): within 2^-19 of the
//    sum of |C[i][j]| and the products' magnitudes, every shape.
//    NaN and infinities propagate as IEEE arithmetic over the products would.
//  - Warpgroups: warps 4w .. 4w + 3 (threads 128w .. 128w + 127) are
//    warpgroup w, a thread's index in it is its index % 128. MmaShared is
//    executed by a whole warpgroup at once: the workgroup size is a multiple
//    of 128 and it stands only in workgroup-uniform control flow.
//  - MmaShared(aStart, aRowStride, bStart, bRowStride, c0..c{n/2 - 1}),
//    ref a warpgroup's MatrixOp (m64nNk16) and imm a workgroup array of its
//    operand type that starts at a multiple of 1024 bytes: the warpgroup's
//    D = A * B + C for a 64 x 16 A, a 16 x n B and 64 x n f32 C and D, n = 2
//    x the c operands (a multiple of 8 up to 256). A and B (held as its
//    transpose, n rows of 16 keys) are read from the array in PTX's 128-byte
//    swizzle: a tile's row is 64 elements (128 bytes), A's element (r, k) at
//    element aStart + (r / 8) aRowStride + (r % 8) 64 + k, and the element at
//    byte x of the array is stored at byte x ^ (((x >> 7) % 8) << 4) (each
//    16-byte run moved within its 128 bytes by their index in their 1024);
//    B's (k, j) likewise at bStart + (j / 8) bRowStride + (j % 8) 64 + k.
//    The four indices are the same in every thread of the warpgroup, starts
//    multiples of 8 elements with start % 64 <= 48 (the 16 keys stay in
//    their row), row strides multiples of 512 elements (1024 bytes) below
//    2^17. C and D are spread over the warpgroup as mmaGroupC gives, D read
//    by Lane 0 .. n/2 - 1. In place of its n/2 c operands an MmaShared may
//    take one operand, an earlier MmaShared of the same op and n,
//    accumulating onto its D: a chain, whose links stand in one block with
//    no Store, SharedStore(Vec), CopyAsync, AsyncWait, Barrier, For or If
//    between them, and each link but the last used by the next link only.
//    Sums as Mma's. A chain runs asynchronously: its last link closes it as
//    one of the warpgroup's pending chains, which reads A and B from
//    workgroup memory at any time until an MmaWait finishes it, so those
//    bytes must not change before then. D is the chain's result at once for
//    a later chain's c operands, but nothing else may read it before the
//    wait: a chain's last link and a variable set from one of its Lanes
//    (an accumulator) are read only by Lane, SetVar, an MmaShared's c
//    operands or an MmaWait.
//  - MmaSharedB(a0..a7, bStart, bRowStride, bBlockStride, c0..c{n/2 - 1}),
//    ref and imm as MmaShared's: the same product with A from the threads
//    and B held N-major. A's 64 x 16 elements are four m16n8k16 A fragments
//    side by side: warp w of the warpgroup holds rows 16w .. 16w + 15, lane
//    l's operand e (of the op's operand type) at (16w + r, c) for (r, c) =
//    mmaA(m16n8k16, l % 32, e). B's (k, j) is read at element bStart + (k /
//    8) bRowStride + (k % 8) 64 + (j / 64) bBlockStride + j % 64 of the
//    array, in the same 128-byte swizzle (so a row of 64 columns of B is
//    128 bytes, as a row of keys is for MmaShared). The three indices are the
//    same in every thread of the warpgroup, multiples of 512 elements (1024
//    bytes) below 2^17. A link's a operands are read when its chain's first
//    link issues: each is defined before that link (the verifier checks).
//    Chains, waits and the rules of D are MmaShared's; a chain's links are
//    all of one opcode. (PTX's wgmma with A in registers and imm-trans-b.)
//  - MmaWait(x0..x{m-1}), imm n: waits until at most n of the warpgroup's
//    pending chains are unfinished (the oldest finish first) and gives the
//    xs back unchanged, read by Lane 0 .. m - 1: the values an accumulator
//    holds become ordinary values through it. A warpgroup operation, like
//    MmaShared; every chain is finished before the kernel ends. (PTX's
//    wgmma.commit_group after a chain and wgmma.wait_group n, the xs threaded
//    through the wait; the interpreter computes a chain when it is issued
//    and stops at the wait that finishes it when the bytes it read changed,
//    or at a kernel's end with chains unfinished.)
//  - CopyAsync(gindex, sindex, ok), ref a read-only buffer and imm a
//    workgroup array whose elements are the buffer's value type: starts a
//    copy of 16 bytes from the buffer's element gindex to the array's element
//    sindex (each index a multiple of 16 bytes' elements, the array's byte
//    offset a multiple of 16), or of 16 zero bytes where ok is false (then
//    gindex is not read). The copy joins the thread's open group;
//    AsyncCommit closes that group. AsyncWait (imm n) waits until at most n
//    of the thread's closed groups are unfinished: the others' bytes are then
//    in workgroup memory for this thread, and for every thread after a
//    Barrier that follows the waits. Until then a destination holds
//    unspecified bytes, and every copy is waited for before the kernel ends.
//    (PTX's cp.async.cg with a source size, sm_80; the interpreter lands a
//    group's bytes at the wait that finishes it, and stops on a kernel that
//    ends with copies unwaited.)
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/matrix.h"

namespace poot::kir {

enum class Scalar : uint8_t { Bool, I32, I64, F32, F16, BF16 };
enum class Elem : uint8_t { F32, F16, BF16, I32, I64, U8, I8, U16 };

const char* scalarName(Scalar s);
const char* elemName(Elem e);
// The value type a load of `e` gives and a store to it takes.
Scalar valueOf(Elem e);
int elemBytes(Elem e);
// The bytes of a value of s in a workgroup array (bool has none: 0).
int scalarBytes(Scalar s);
// f16 or bf16: the types only storage, conversion and select take (above).
inline bool isTwoByte(Scalar s) { return s == Scalar::F16 || s == Scalar::BF16; }

enum class Opc : uint8_t {
  Const,                          // type; imm (bool, ints) or fimm (f32)
  GroupX, GroupY, Local,          // i32: workgroup id x, y; thread index in the workgroup
  // binary, operands and result of one type
  Add, Sub, Mul, Div, Rem, Min, Max, Pow, And, Or, Xor, Shl, ShrA, ShrL,
  // unary, operand and result of one type (Not: bool or int)
  Neg, Not, Abs, Exp, Exp2, Log, Sqrt, Rsqrt, Tanh, Sin, Cos, Floor,
  // compares: two operands of one type, bool result
  Lt, Le, Gt, Ge, Eq, Ne,
  Select,                         // (bool, a, b) -> a's type
  Fma,                            // (a, b, c) f32 -> a * b + c
  Convert, Bitcast,               // (x) -> type
  Load,                           // (index) from buffers[ref] -> valueOf(elem)
  LoadVec,                        // (index) imm elements from buffers[ref]; read only by Lane
  Lane,                           // (a LoadVec or SharedLoadVec) element imm
  Store,                          // (index, value) into buffers[ref]
  SharedLoad,                     // (index) from shared[ref]
  SharedLoadVec,                  // (index) imm elements from shared[ref]; read only by Lane
  SharedStore,                    // (index, value) into shared[ref]
  SharedStoreVec,                 // (index, imm values) into consecutive elements of shared[ref]
  ShuffleXor,                     // (x) -> x of lane (lane ^ imm) of the warp
  Mma,                            // (a..., b..., c0..c3), ref a MatrixOp; read only by Lane 0..3
  MmaShared,                      // (aStart, aRowStride, bStart, bRowStride, c... or a chained MmaShared), ref a MatrixOp, imm shared
  MmaSharedB,                     // (a0..a7, bStart, bRowStride, bBlockStride, c... or a chained MmaSharedB), likewise
  MmaWait,                        // (x...), imm n: until at most n of the warpgroup's chains are pending; read only by Lane
  CopyAsync,                      // (gindex, sindex, ok): 16 bytes of buffers[ref] into shared[imm]
  AsyncCommit,                    // closes the thread's open group of copies
  AsyncWait,                      // until at most imm of the thread's closed groups are unfinished
  GetVar,                         // () -> vars[ref]
  SetVar,                         // (value) into vars[ref]
  For,                            // (lo, hi), step imm > 0; body; its id is i (i32)
  If,                             // (cond); body, orelse
  Barrier,
};

// The one row each opcode has here: its name, what it defines, who executes
// it, which emitters lower it and, for the regular forms, its operand rule
// and its meaning. The verifier, the interpreter and the printer read the
// regular forms from here alone, so a new arithmetic opcode is its row plus
// its lowering in each emitter; the operand rules and meanings of the other
// forms (memory, warp and control operations, conversions) stay in the
// verifier's, the interpreter's and each emitter's switch.
enum class Defines : uint8_t {
  Value,    // an SSA value (For: its induction value)
  Wide,     // several elements, read only through Lane
  Nothing,  // a statement
};
enum class Scope : uint8_t {
  Thread,     // each thread on its own
  Warp,       // a whole warp at once (32 threads), in workgroup-uniform control flow
  Warpgroup,  // a whole warpgroup at once (128 threads), likewise
  Workgroup,  // every thread of the workgroup (Barrier)
};
// The regular forms, whose operand rule is the row's: Id (no operand, an
// i32), Binary (two operands of one type, giving it), Unary (one operand,
// giving its type), Compare (two operands of one type, giving a bool); the
// operand type must be one of the row's `types`. Other: the verifier's own
// rule.
enum class Form : uint8_t { Other, Id, Binary, Unary, Compare };
// A set of Scalars, one bit each (bit s for Scalar s).
using Types = uint8_t;
constexpr Types typeBit(Scalar s) { return Types(1u << unsigned(s)); }
constexpr Types kIntTypes = typeBit(Scalar::I32) | typeBit(Scalar::I64);
constexpr Types kNumberTypes = kIntTypes | typeBit(Scalar::F32);
constexpr Types kBitTypes = kIntTypes | typeBit(Scalar::Bool);
// Operand values a regular integer form refuses (the interpreter stops;
// generated code never passes them): a zero divisor, a shift amount outside
// [0, bits).
enum class Guard : uint8_t { None, Divisor, ShiftAmount };
// What a regular form computes, for each operand type it takes (a Unary's
// functions ignore y):
//  - f32(x, y): on f32, rounded as IEEE f32 (the host's libm for the
//    transcendental ones, which the devices approximate within a few ulp);
//  - ints(x, y, bits): on i32 (bits 32), i64 (64) and bool (1, as 0 or 1),
//    given the operands sign-extended from `bits` (bool's read as 0/1) and
//    giving a result whose low `bits` bits are the value (wrapping);
//  - holds(order): a Compare's value given how x orders against y
//    (unordered when either is NaN).
struct Meaning {
  float (*f32)(float x, float y) = nullptr;
  int64_t (*ints)(int64_t x, int64_t y, int bits) = nullptr;
  bool (*holds)(std::partial_ordering order) = nullptr;
  Guard guard = Guard::None;
};
struct OpInfo {
  const char* name;
  Defines defines;
  Scope scope;
  bool ptxOnly;  // only the NVPTX lowering has it (Mma: but a wave's op only AMDGPU's); SPIR-V's legalization and AMDGPU's refuse it
  Form form = Form::Other;
  Types types = 0;  // the operand types a regular form takes
  Meaning meaning = {};  // a regular form's (Id's is the interpreter's: the thread's or workgroup's index)
};
const OpInfo& opInfo(Opc o);
inline const char* opcName(Opc o) { return opInfo(o).name; }
// The threads a warp or warpgroup operation takes together: 32 or 128.
inline int64_t scopeThreads(Scope s) { return s == Scope::Warpgroup ? 128 : 32; }
struct Inst;
// The threads instruction `in` takes together: an Mma's op's (32 or 64),
// else its scope's.
int64_t groupThreads(const Inst& in);

// Lane l's element e of an Mma's A, B and C (or D) as (row, column): PTX's
// layouts, g = l / 4 and t = l % 4. m16n8k8.tf32: A's e (0..3) at
// (g + 8 (e % 2), t + 4 (e / 2)), B's e (0..1) at (t + 4 e, g); the m16n8k16
// shapes: A's e (0..7) at (g + 8 ((e / 2) % 2), 2t + e % 2 + 8 (e / 4)),
// B's e (0..3) at (2t + e % 2 + 8 (e / 2), g); C and D of every shape: e
// (0..3) at (g + 8 (e / 2), 2t + e % 2). The m16n16k16 shapes (a wave of
// 64, AMD's layouts as its matrix instruction calculator prints them for
// CDNA 3), with r = l % 16 and q = l / 16: A's e (0..3) at (r, 4q + e), B's
// e (0..3) at (4q + e, r), C and D's e (0..3) at (4q + e, r).
struct RowCol {
  int row, col;
};
RowCol mmaA(MatrixOp op, int lane, int e);
RowCol mmaB(MatrixOp op, int lane, int e);
RowCol mmaC(MatrixOp op, int lane, int e);
// Element e of a warpgroup's C (or D) in thread l of the warpgroup (l in
// [0, 128)), PTX's wgmma layout: warp w = l / 32 has rows 16w .. 16w + 15,
// as m16n8 blocks side by side: (16w + g + 8 ((e % 4) / 2), 8 (e / 4) + 2t
// + e % 2), g and t of the lane l % 32.
RowCol mmaGroupC(int thread, int e);
// The type of an Mma's A and B operands: f32 (tf32), bf16 or f16.
Scalar mmaOperand(MatrixOp op);

using V = int32_t;  // an instruction's index in Kernel::insts, and the value it defines

struct Block {
  std::vector<V> items;  // in order
};

struct Inst {
  Opc op = Opc::Const;
  Scalar type = Scalar::I32;  // the result type; I32 for statements
  std::vector<V> args;
  int32_t ref = -1;   // buffer, shared array or variable index; Mma, MmaShared: its MatrixOp
  int64_t imm = 0;    // Const bool/int value; For step; wide access width; Lane index; ShuffleXor mask; MmaShared's array
  double fimm = 0;    // Const f32 value
  Block body, orelse; // For: body; If: then and else
};

struct Buffer {
  std::string name;
  Elem elem = Elem::F32;
  int64_t elems = 0;     // elements the kernel may touch: indices in [0, elems)
  bool written = false;  // stored to (a read-only buffer is never stored to)
};

struct Shared {
  std::string name;
  Scalar type = Scalar::F32;  // any but bool
  int64_t elems = 0;
};

struct Kernel {
  std::string entry;
  int64_t workgroupSize = 1;  // threads, in x
  int64_t gridX = 1;          // the dispatch's workgroups in x (the grid fold)
  std::vector<Buffer> buffers;
  std::vector<Shared> shared;
  std::vector<Scalar> vars;
  std::vector<Inst> insts;
  Block body;

  // Each workgroup array's byte offset, and the bytes they span (kir.h's
  // layout: in order, each aligned to its element size).
  std::vector<int64_t> sharedOffsets() const;
  int64_t sharedBytes() const;
};

// A warpgroup's product: MmaShared or MmaSharedB.
inline bool isGroupMma(Opc op) { return op == Opc::MmaShared || op == Opc::MmaSharedB; }
// Where a warpgroup product's c operands (or the link it chains onto)
// start: 4 for MmaShared, 11 for MmaSharedB.
size_t groupMmaC(Opc op);
// The link of the same opcode that `in` (a warpgroup product) accumulates
// onto, its last operand in place of the c operands; -1 when it takes its
// C as values.
V chainedOnto(const Kernel& k, const Inst& in);
// A warpgroup product's n: twice its c operands, or its chain's first
// link's n.
int64_t mmaSharedColumns(const Kernel& k, V mmaShared);

}  // namespace poot::kir

// Kernel families and the registry the planner walks. A family is one way
// of running an op on a device: the schedule kind its kernels carry (the
// `kind` of Schedule, plan.h), the ops it serves, the fields its schedule
// line prints, and, where the planner chooses between families, a rule that
// reads the op's shape and the device profile and returns a schedule or the
// reason it declined. Each op category that has a choice keeps one table of
// rules in order of preference (attentionRules, matmulRules); the planner
// walks it, the first rule that returns a schedule wins, and every reason
// met on the way ends up in `pootc compile --remarks`.
//
// The generators live in lib/codegen (gen/generators.h): one line there maps
// each family of kernelFamilies() to its generator, and a unit test holds the
// two lists equal. Nothing here knows the generators. docs/planner.md, "The
// family registry", says how to add a family.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ir/ops.h"
#include "plan/plan.h"
#include "plan/profile.h"

namespace poot {

// A rule's answer: a schedule and why it suits, or no schedule and why the
// family declined. A decline with an empty reason means the family does not
// apply at all (a profile without its matrix op, a prefill rule for one query
// row) and is left out of the remarks.
struct Choice {
  std::optional<Schedule> schedule;
  std::string reason;
};

// The ops a family's kernels serve. Attention and SelectedAttention share the
// kind "streaming", so a generator is found by the kind and what it serves.
enum class Serves : uint8_t { Attention, SelectedAttention, MatMul, RoutedExperts, OtherOps };
Serves servesOf(Op op);

struct KernelFamily {
  std::string_view kind;  // Schedule::kind, and the middle of its kernels' entry names
  Serves serves;
  // Its fields in the schedule line, after the common ones (printSchedule):
  // " tile=64x64 vector=4 ..."; "" for a family that has none.
  std::string (*fields)(const Schedule& s);
};

// Every family, each (kind, serves) once.
std::span<const KernelFamily> kernelFamilies();
// The family of kind `kind` that serves `serves`, or nullptr.
const KernelFamily* findFamily(std::string_view kind, Serves serves);

// Walks `rules` in order: the first rule whose choice has a schedule wins.
// The reason returned is every decline's reason met before it (the empty
// ones left out), then the winner's, joined by "; ". With no winner, the
// declines alone and no schedule; `*winner` (when asked for) is then nullptr.
template <class Rule, class Shape>
Choice walkRules(std::span<const Rule> rules, const Shape& shape, const DeviceProfile& d,
                 const Rule** winner = nullptr) {
  std::string reasons;
  for (const Rule& rule : rules) {
    Choice c = rule.choose(shape, d);
    if (!c.reason.empty()) reasons += (reasons.empty() ? "" : "; ") + c.reason;
    if (c.schedule) {
      if (winner) *winner = &rule;
      return Choice{std::move(c.schedule), std::move(reasons)};
    }
  }
  if (winner) *winner = nullptr;
  return Choice{std::nullopt, std::move(reasons)};
}

// An attention as its rules see it: B batch rows, Hq query heads over Hkv KV
// heads (n_rep = Hq / Hkv), Lq query rows a head, Lk keys; key widths dh
// (and ds for a split key's shared part), value width dv; the dtype q, the
// keys and the values share (F32 where they differ); whether every query row
// of a KV head drops the same keys (no additive mask, a causal one only at
// one query row); and the streaming lanes (attentionLanes, at least 1).
struct AttentionShape {
  int64_t B, Hq, Hkv, Lq, Lk, nrep, dh, ds, dv;
  DType operands;
  bool rowsShareMask;
  int64_t lanes;
  int64_t packed() const { return nrep * Lq; }  // the query rows of one KV head
};

// One line of the attention registry. `workgroups` is the launch of the
// schedule it chose (a split one's partials: every split's), `counted` says
// how it was counted for a GridLimit refusal (the planner adds " * splits"
// for a split schedule). A chosen schedule with splits
// > 1 writes the partial state to the eqn's scratch and a split-kv-combine
// follows (planner.cpp).
struct AttentionRule {
  std::string_view family;
  Choice (*choose)(const AttentionShape& a, const DeviceProfile& d);
  int64_t (*workgroups)(const Schedule& s, const AttentionShape& a);
  const char* counted;
};
// decode-mma, decode, prefill-mma, prefill, split-kv-partials, streaming: the
// last always accepts.
std::span<const AttentionRule> attentionRules();

// A MatMul as its rules see it: [batch..., m, k] x b ([k, n], or [n, k] when
// transposedB), of dtypes a and b.
struct MatMulShape {
  int64_t batch, m, k, n;
  bool transposedB;
  DType a, b;
};

// One line of the MatMul registry. `groups`: a product group (ir/fusion.h)
// chosen onto it runs as one kernel, its members' column blocks in one
// launch; otherwise each member is planned alone.
struct MatMulRule {
  std::string_view family;
  Choice (*choose)(const MatMulShape& p, const DeviceProfile& d);
  bool groups;
};
// gemv-mma, gemv (few rows, or i64), gemm-mma, gemm, gemv (what no gemm tile
// fits): the last always accepts.
std::span<const MatMulRule> matmulRules();

// A RoutedExperts (ir/ops.h) as its rules see it: `rows` token rows of
// width H, E experts of width I, k selected a row; `bindings` the storage
// buffers its kernel binds (h, the router, 3 a expert, the result).
struct RoutedShape {
  int64_t rows, H, E, I, k, bindings;
};

// One line of the RoutedExperts registry.
struct RoutedRule {
  std::string_view family;
  Choice (*choose)(const RoutedShape& s, const DeviceProfile& d);
};
// routed-gemv (a decode's few rows, reading only the selected experts). No
// rule always accepts: where every rule declines, the planner refuses the
// op (NoGenerator) with their reasons.
std::span<const RoutedRule> routedRules();

}  // namespace poot

// The registry (family.h): every kernel family with the fields its schedule
// line prints, and the rule tables the planner walks, one line a family in
// order of preference. The rules themselves are schedule.h's.
#include <algorithm>

#include "plan/family.h"
#include "plan/schedule.h"

namespace poot {

namespace {

std::string str(int64_t v) { return std::to_string(v); }
std::string none(const Schedule&) { return ""; }
std::string tile2(const Schedule& s) { return " tile=" + str(s.tileM) + "x" + str(s.tileN); }
std::string tile3(const Schedule& s) { return tile2(s) + "x" + str(s.tileK); }
std::string vector(const Schedule& s) { return " vector=" + str(s.vector); }
std::string thread(const Schedule& s) { return " thread=" + str(s.threadM) + "x" + str(s.threadN); }
std::string matrix(const Schedule& s) { return " matrix=" + s.matrix; }

constexpr KernelFamily kFamilies[] = {
    {"decode-mma", Serves::Attention,
     [](const Schedule& s) { return " rows=" + str(s.tileM) + vector(s) + " tile_k=" + str(s.tileK) + matrix(s); }},
    {"decode", Serves::Attention,
     [](const Schedule& s) {
       return " rows=" + str(s.tileM) + " k_lanes=" + str(s.kLanes) + vector(s) + " tile_k=" + str(s.tileK);
     }},
    {"prefill-mma", Serves::Attention, [](const Schedule& s) { return tile2(s) + vector(s) + matrix(s); }},
    {"prefill", Serves::Attention, [](const Schedule& s) { return tile2(s) + vector(s) + thread(s); }},
    {"split-kv-partials", Serves::Attention, none},
    {"split-kv-combine", Serves::Attention, none},
    {"streaming", Serves::Attention, none},
    {"streaming", Serves::SelectedAttention, none},
    {"gemv-mma", Serves::MatMul, [](const Schedule& s) { return tile3(s) + vector(s) + matrix(s); }},
    {"gemv", Serves::MatMul,
     [](const Schedule& s) {
       return " k_lanes=" + str(s.kLanes) + " unroll=" + str(s.unroll) + vector(s) + thread(s);
     }},
    {"gemm-mma", Serves::MatMul,
     [](const Schedule& s) {
       return tile3(s) + vector(s) + " warp=" + str(s.threadM) + "x" + str(s.threadN) + matrix(s);
     }},
    {"gemm", Serves::MatMul, [](const Schedule& s) { return tile3(s) + vector(s) + thread(s); }},
    {"matmul-combine", Serves::MatMul, none},
    {"routed-gemv", Serves::RoutedExperts, none},
    {"elementwise", Serves::OtherOps, none},
    {"in-place", Serves::OtherOps, none},
    {"reduce", Serves::OtherOps, none},
    {"fused", Serves::OtherOps, none},
    {"fused-rows", Serves::OtherOps, none},
    {"rows", Serves::OtherOps, none},
    {"sample", Serves::OtherOps, none},
    {"guard", Serves::OtherOps, none},
};

// The workgroups of a schedule that serves a KV head's rows (decode,
// decode-mma): B * Hkv * row groups, times its splits.
int64_t kvHeadWorkgroups(const Schedule& s, const AttentionShape& a) {
  return a.B * a.Hkv * (a.packed() / s.tileM) * s.splits;
}
// A prefill's: B * Hkv * blocks of tileM / n_rep query positions.
int64_t queryBlockWorkgroups(const Schedule& s, const AttentionShape& a) {
  return a.B * a.Hkv * ceilDiv(a.Lq, s.tileM / a.nrep);
}
// Streaming and its partials: one a query row, times the splits.
int64_t queryRowWorkgroups(const Schedule& s, const AttentionShape& a) { return a.B * a.Hq * a.Lq * s.splits; }

constexpr AttentionRule kAttentionRules[] = {
    {"decode-mma", decodeMma, kvHeadWorkgroups, "B * Hkv * row groups"},
    {"decode", decodeRule, kvHeadWorkgroups, "B * Hkv * row groups"},
    {"prefill-mma", prefillMmaRule, queryBlockWorkgroups, "B * Hkv * query blocks"},
    {"prefill", prefillRule, queryBlockWorkgroups, "B * Hkv * query blocks"},
    {"split-kv-partials", splitKvRule, queryRowWorkgroups, "B * Hq"},
    {"streaming", streamingRule, queryRowWorkgroups, "B * Hq * Lq"},
};

constexpr MatMulRule kMatMulRules[] = {
    {"gemv-mma", gemvMmaRule, true},
    {"gemv", gemvRule, true},
    {"gemm-mma", gemmMmaRule, false},
    {"gemm", gemmRule, false},
    {"gemv", gemvFallbackRule, true},
};

constexpr RoutedRule kRoutedRules[] = {
    {"routed-gemv", routedGemvRule},
};

}  // namespace

Serves servesOf(Op op) {
  switch (op) {
    case Op::Attention: return Serves::Attention;
    case Op::SelectedAttention: return Serves::SelectedAttention;
    case Op::MatMul: return Serves::MatMul;
    case Op::RoutedExperts: return Serves::RoutedExperts;
    default: return Serves::OtherOps;
  }
}

std::span<const KernelFamily> kernelFamilies() { return kFamilies; }

const KernelFamily* findFamily(std::string_view kind, Serves serves) {
  auto it = std::find_if(std::begin(kFamilies), std::end(kFamilies),
                         [&](const KernelFamily& f) { return f.kind == kind && f.serves == serves; });
  return it == std::end(kFamilies) ? nullptr : it;
}

std::span<const AttentionRule> attentionRules() { return kAttentionRules; }
std::span<const MatMulRule> matmulRules() { return kMatMulRules; }
std::span<const RoutedRule> routedRules() { return kRoutedRules; }

}  // namespace poot

// The fit of a model's plans: each plan's paged shape read from its source
// graph (the slots and output by name, dtype and rank, the pool whole
// blocks named by both maps, every state a pool), then the decode plan's
// and the mixed plan's against the prefill plan's, figure by figure and
// name by name.
#include "engine/plans.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "kv/batch.h"

namespace poot::engine {
namespace {

Error planError(const std::string& plan, std::string message) {
  return makeError(ErrorKind::Bind, {plan}, std::move(message));
}

const Value* param(const Graph& g, const std::string& name) {
  for (ValueId id : g.params)
    if (g.value(id).name == name) return &g.value(id);
  return nullptr;
}

Expected<PagedShape> pagedShape(const Graph& g, const std::string& plan) {
  auto need = [&](const std::string& name, Storage storage, DType dtype, int64_t rank) -> Expected<const Value*> {
    const Value* v = param(g, name);
    if (!v || v->storage != storage || v->type.dtype != dtype || v->type.rank() != rank)
      return planError(plan, "not a paged step plan: it has no " + std::string(storageName(storage)) + " %" + name +
                                 " : " + dtypeName(dtype) + " of rank " + std::to_string(rank) +
                                 " (trace it with --kv paged)");
    return v;
  };
  auto tokens = need("tokens", Storage::Input, DType::I32, 2);
  if (!tokens) return tokens.error();
  auto pos = need("pos", Storage::Slot, DType::I32, 1);
  if (!pos) return pos.error();
  auto read = need("read", Storage::Slot, DType::I32, 2);
  if (!read) return read.error();
  auto write = need("write", Storage::Slot, DType::I32, 1);
  if (!write) return write.error();
  PagedShape s;
  // A mixed plan (pootc trace --phase mixed) names each token's row of the
  // read map and each row's token for the logits.
  s.mixed = param(g, "row") != nullptr;
  std::vector<std::string> slots{"tokens", "pos", "read", "write"};
  if (s.mixed) {
    auto row = need("row", Storage::Slot, DType::I32, 1);
    if (!row) return row.error();
    auto sample = need("sample", Storage::Slot, DType::I32, 1);
    if (!sample) return sample.error();
    s.rows = (*read)->type.shape[0];
    s.tokens = (*tokens)->type.shape[0];
    if ((*tokens)->type.shape[1] != 1 || (*pos)->type.shape[0] != s.tokens || (*write)->type.shape[0] != s.tokens ||
        (*row)->type.shape[0] != s.tokens || (*sample)->type.shape[0] != s.rows)
      return planError(plan, "its positions, rows, write map and samples do not match a mixed step of its tokens' " +
                                 std::to_string(s.tokens) + " over its read map's " + std::to_string(s.rows) + " rows");
    slots.insert(slots.end(), {"row", "sample"});
  } else {
    s.rows = (*tokens)->type.shape[0];
    s.tokens = (*tokens)->type.shape[1];
    if ((*pos)->type.shape[0] != s.rows || (*read)->type.shape[0] != s.rows ||
        (*write)->type.shape[0] != s.rows * s.tokens)
      return planError(plan, "its positions, read and write maps do not match its tokens' " + std::to_string(s.rows) +
                                 " rows of " + std::to_string(s.tokens));
  }
  s.capacity = (*read)->type.shape[1];
  s.poolSlots = (*write)->hi + 1;
  if (s.poolSlots % kv::kBlockSize != 0 || (*read)->hi + 1 != s.poolSlots)
    return planError(plan, "its pool of " + std::to_string(s.poolSlots) + " slots is not whole blocks of " +
                               std::to_string(kv::kBlockSize) + " named by both maps");
  // A plan with next tokens (pootc trace --next-token) takes their sampling
  // parameters, one a row of logits (checked below).
  s.next = param(g, "uniform") != nullptr;
  if (s.next) {
    for (const SampleParam& p : kSampleParams) slots.push_back(p.name);
    for (const SampleParam& p : kSamplePenalties) slots.push_back(p.name);
  }
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    if (v.storage == Storage::Weight) s.weights[v.name] = v.type;
    else if (v.storage == Storage::State) s.states[v.name] = v.type;
    else if (std::find(slots.begin(), slots.end(), v.name) == slots.end())
      return planError(plan, "its " + std::string(storageName(v.storage)) + " %" + v.name +
                                 " is not one the engine binds (tokens, pos, read, write; a mixed plan's row and "
                                 "sample; next tokens' temperature, top_k, top_p, min_p, uniform, repetition_penalty, seen "
                                 "and seen_penalty)");
  }
  for (const auto& [name, t] : s.states)
    if (t.rank() < 1 || t.shape[0] != s.poolSlots)
      return planError(plan, "its state %" + name + " is not a pool of " + std::to_string(s.poolSlots) + " slots");
  // The logits: a row's tokens each, or one a row in a mixed plan.
  const int64_t logitRows = s.rows, logitTokens = s.mixed ? 1 : s.tokens;
  for (const Export& o : g.outputs)
    if (g.value(o.value).name == "logits") {
      const Type& t = g.value(o.value).type;
      if (t.dtype != DType::F32 || t.rank() != 3 || t.shape[0] != logitRows || t.shape[1] != logitTokens)
        return planError(plan, "its logits are " + t.str() + ", not f32[" + std::to_string(logitRows) + "," +
                                   std::to_string(logitTokens) + ",vocab]");
      s.vocab = t.shape[2];
    }
  if (s.vocab == 0) return planError(plan, "it has no output %logits");
  if (!s.next) return s;
  const Type rows{DType::I32, {logitRows, logitTokens}};
  auto next = std::find_if(g.outputs.begin(), g.outputs.end(), [&](const Export& o) { return g.value(o.value).name == "next"; });
  if (next == g.outputs.end() || g.value(next->value).type != rows)
    return planError(plan, "it takes sampling inputs but has no output %next " + rows.str() + " (a row of logits each)");
  for (const SampleParam& p : kSampleParams) {
    Type want{p.dtype, rows.shape};
    const Value* in = param(g, p.name);
    if (!in || in->storage != Storage::Input || in->type != want)
      return planError(plan, std::string("its next tokens want the input %") + p.name + " : " + want.str() +
                                 " (trace it with --next-token)");
  }
  // The penalties: a list a sequence, wide enough for every token a
  // sequence of the capacity can hold, so no request outgrows it.
  for (const SampleParam& p : kSamplePenalties) {
    Type want{p.dtype, &p == &kSamplePenalties[0] ? Shape{logitRows} : Shape{logitRows, s.capacity}};
    const Value* in = param(g, p.name);
    if (!in || in->storage != Storage::Input || in->type != want)
      return planError(plan, std::string("its next tokens want the input %") + p.name + " : " + want.str() +
                                 " (a list a sequence of its capacity; trace it with --next-token)");
  }
  return s;
}

// Another plan of the model against the prefill plan: the same pools,
// weights, capacity and vocabulary.
Status fitTogether(const PagedShape& p, const PagedShape& d, const std::string& otherPlan) {
  auto figure = [&](const char* what, int64_t a, int64_t b) -> Status {
    if (a == b) return ok();
    return planError(otherPlan, std::string("its ") + what + " is " + std::to_string(b) + ", the prefill plan's " +
                                    std::to_string(a));
  };
  if (auto f = figure("capacity", p.capacity, d.capacity); !f) return f;
  if (auto f = figure("vocabulary", p.vocab, d.vocab); !f) return f;
  if (auto f = figure("pool (slots)", p.poolSlots, d.poolSlots); !f) return f;
  for (const auto& [what, a, b] : {std::tuple{"state", &p.states, &d.states}, std::tuple{"weight", &p.weights, &d.weights}})
    for (const auto& [name, t] : *a) {
      auto it = b->find(name);
      if (it == b->end()) return planError(otherPlan, std::string("it has no ") + what + " %" + name + " of the prefill plan");
      if (it->second != t)
        return planError(otherPlan, std::string("its ") + what + " %" + name + " is " + it->second.str() +
                                        ", the prefill plan's " + t.str());
    }
  for (const auto& [what, a, b] : {std::tuple{"state", &d.states, &p.states}, std::tuple{"weight", &d.weights, &p.weights}})
    for (const auto& [name, t] : *a)
      if (!b->count(name)) return planError(otherPlan, std::string("its ") + what + " %" + name + " is not in the prefill plan");
  return ok();
}

// Which kind of plan each place takes: the prefill and decode plans padded,
// the decode plan one token a row, the mixed plan mixed.
Status isKind(const PagedShape& s, const std::string& plan, const char* role) {
  bool mixedRole = std::string(role) == "mixed";
  if (s.mixed != mixedRole)
    return planError(plan, s.mixed ? std::string("a mixed plan is not a ") + role + " plan (pass it as the mixed plan)"
                                   : "a mixed plan is traced with --phase mixed, this one is not");
  if (s.mixed && s.rows < 2)
    return planError(plan, "a mixed plan runs sampled tokens beside a prompt, so it takes at least 2 sequences "
                           "(--batch), this one 1");
  if (std::string(role) == "decode" && s.tokens != 1)
    return planError(plan, "a decode plan takes one token a row, this one " + std::to_string(s.tokens));
  return ok();
}

}  // namespace

Expected<ModelPlans> ModelPlans::load(const std::string& prefillPath, const std::string& decodePath,
                                      const rt::TrustedKeys& trusted, const std::string& mixedPath) {
  auto prefill = rt::loadPlanFile(prefillPath, trusted);
  if (!prefill) return prefill.error();
  auto decode = rt::loadPlanFile(decodePath, trusted);
  if (!decode) return decode.error();
  std::optional<rt::PlanFile> mixed;
  if (!mixedPath.empty()) {
    auto m = rt::loadPlanFile(mixedPath, trusted);
    if (!m) return m.error();
    mixed = m.take();
  }
  return check(prefill.take(), prefillPath, decode.take(), decodePath, std::move(mixed), mixedPath);
}

Expected<ModelPlans> ModelPlans::check(rt::PlanFile prefill, const std::string& prefillName, rt::PlanFile decode,
                                       const std::string& decodeName, std::optional<rt::PlanFile> mixed,
                                       const std::string& mixedName) {
  auto p = pagedShape(prefill.source, prefillName);
  if (!p) return p.error();
  if (auto k = isKind(*p, prefillName, "prefill"); !k) return k.error();
  auto d = pagedShape(decode.source, decodeName);
  if (!d) return d.error();
  if (auto k = isKind(*d, decodeName, "decode"); !k) return k.error();
  if (auto f = fitTogether(*p, *d, decodeName); !f) return f.error();
  ModelPlans plans;
  if (mixed) {
    auto m = pagedShape(mixed->source, mixedName);
    if (!m) return m.error();
    if (auto k = isKind(*m, mixedName, "mixed"); !k) return k.error();
    if (auto f = fitTogether(*p, *m, mixedName); !f) return f.error();
    plans.mixedFile_ = std::move(*mixed);
    plans.mixedShape_ = m.take();
  }
  plans.prefillFile_ = std::move(prefill);
  plans.decodeFile_ = std::move(decode);
  plans.prefillShape_ = p.take();
  plans.decodeShape_ = d.take();
  return plans;
}

int32_t ModelPlans::poolBlocks() const { return int32_t(prefillShape_.poolSlots / kv::kBlockSize); }

Status checkRequest(const PagedShape& shape, const Request& q) {
  for (size_t i = 0; i < q.prompt.size(); ++i)
    if (q.prompt[i] < 0 || q.prompt[i] >= shape.vocab)
      return makeError(ErrorKind::Range, {}, "token " + std::to_string(i) + " of the prompt is " +
                                                 std::to_string(q.prompt[i]) + ", outside the vocabulary [0, " +
                                                 std::to_string(shape.vocab) + ")");
  const SampleOptions& s = q.sampling;
  if (!std::isfinite(s.temperature) || s.temperature < 0)
    return makeError(ErrorKind::Usage, {}, "a temperature is finite and at least 0 (0 is greedy), not " +
                                               std::to_string(s.temperature));
  if (!(s.topP > 0 && s.topP <= 1))
    return makeError(ErrorKind::Usage, {}, "top_p is in (0, 1], not " + std::to_string(s.topP));
  if (!(std::isfinite(s.repetitionPenalty) && s.repetitionPenalty > 0))
    return makeError(ErrorKind::Usage, {}, "repetition_penalty is finite and above 0 (1: off), not " +
                                               std::to_string(s.repetitionPenalty));
  for (auto [name, v] : {std::pair{"frequency_penalty", s.frequencyPenalty}, std::pair{"presence_penalty", s.presencePenalty}})
    if (!(v >= -2 && v <= 2))
      return makeError(ErrorKind::Usage, {}, std::string(name) + " is in [-2, 2] (0: off), not " + std::to_string(v));
  if (s.topK < 0) return makeError(ErrorKind::Usage, {}, "top_k is at least 0 (0: every token), not " + std::to_string(s.topK));
  if (!(s.minP >= 0 && s.minP <= 1))
    return makeError(ErrorKind::Usage, {}, "min_p is in [0, 1] (0: every token), not " + std::to_string(s.minP));
  kv::KvConfig cache{.numBlocks = int32_t(shape.poolSlots / kv::kBlockSize), .capacity = int32_t(shape.capacity)};
  if (auto c = kv::checkRequest(cache, {q.prompt, q.identity, q.maxNew, q.stop}); !c) return kvError(c.error());
  return ok();
}

Error kvError(const kv::KvError& e, Loc loc) {
  using K = kv::KvErrorKind;
  ErrorKind kind = e.kind == K::Capacity || e.kind == K::OutOfBlocks                             ? ErrorKind::Range
                   : e.kind == K::EmptyPrompt || e.kind == K::BadRequest || e.kind == K::UnknownRequest ? ErrorKind::Usage
                                                                                                  : ErrorKind::Bind;
  return makeError(kind, std::move(loc), e.message);
}

}  // namespace poot::engine

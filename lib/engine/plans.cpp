// The fit of a model's plans: each plan's paged shape read from its source
// graph (the slots and output by name, dtype and rank, the pool whole
// blocks named by both maps, every state a pool), then the decode plan's
// against the prefill plan's, figure by figure and name by name.
#include "engine/plans.h"

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
  s.rows = (*tokens)->type.shape[0];
  s.tokens = (*tokens)->type.shape[1];
  s.capacity = (*read)->type.shape[1];
  s.poolSlots = (*write)->hi + 1;
  if ((*pos)->type.shape[0] != s.rows || (*read)->type.shape[0] != s.rows ||
      (*write)->type.shape[0] != s.rows * s.tokens)
    return planError(plan, "its positions, read and write maps do not match its tokens' " + std::to_string(s.rows) +
                               " rows of " + std::to_string(s.tokens));
  if (s.poolSlots % kv::kBlockSize != 0 || (*read)->hi + 1 != s.poolSlots)
    return planError(plan, "its pool of " + std::to_string(s.poolSlots) + " slots is not whole blocks of " +
                               std::to_string(kv::kBlockSize) + " named by both maps");
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    if (v.storage == Storage::Weight) s.weights[v.name] = v.type;
    else if (v.storage == Storage::State) s.states[v.name] = v.type;
    else if (v.name != "tokens" && v.name != "pos" && v.name != "read" && v.name != "write")
      return planError(plan, "its " + std::string(storageName(v.storage)) + " %" + v.name +
                                 " is not one the engine binds (tokens, pos, read, write)");
  }
  for (const auto& [name, t] : s.states)
    if (t.rank() < 1 || t.shape[0] != s.poolSlots)
      return planError(plan, "its state %" + name + " is not a pool of " + std::to_string(s.poolSlots) + " slots");
  for (const Export& o : g.outputs)
    if (g.value(o.value).name == "logits") {
      const Type& t = g.value(o.value).type;
      if (t.dtype != DType::F32 || t.rank() != 3 || t.shape[0] != s.rows || t.shape[1] != s.tokens)
        return planError(plan, "its logits are " + t.str() + ", not f32[" + std::to_string(s.rows) + "," +
                                   std::to_string(s.tokens) + ",vocab]");
      s.vocab = t.shape[2];
    }
  if (s.vocab == 0) return planError(plan, "it has no output %logits");
  return s;
}

// The decode plan against the prefill plan: the same pools, weights,
// capacity and vocabulary, one token a row.
Status fitTogether(const PagedShape& p, const PagedShape& d, const std::string& decodePlan) {
  if (d.tokens != 1)
    return planError(decodePlan, "a decode plan takes one token a row, this one " + std::to_string(d.tokens));
  auto figure = [&](const char* what, int64_t a, int64_t b) -> Status {
    if (a == b) return ok();
    return planError(decodePlan, std::string("its ") + what + " is " + std::to_string(b) + ", the prefill plan's " +
                                     std::to_string(a));
  };
  if (auto f = figure("capacity", p.capacity, d.capacity); !f) return f;
  if (auto f = figure("vocabulary", p.vocab, d.vocab); !f) return f;
  if (auto f = figure("pool (slots)", p.poolSlots, d.poolSlots); !f) return f;
  for (const auto& [what, a, b] : {std::tuple{"state", &p.states, &d.states}, std::tuple{"weight", &p.weights, &d.weights}})
    for (const auto& [name, t] : *a) {
      auto it = b->find(name);
      if (it == b->end()) return planError(decodePlan, std::string("it has no ") + what + " %" + name + " of the prefill plan");
      if (it->second != t)
        return planError(decodePlan, std::string("its ") + what + " %" + name + " is " + it->second.str() +
                                         ", the prefill plan's " + t.str());
    }
  for (const auto& [what, a, b] : {std::tuple{"state", &d.states, &p.states}, std::tuple{"weight", &d.weights, &p.weights}})
    for (const auto& [name, t] : *a)
      if (!b->count(name)) return planError(decodePlan, std::string("its ") + what + " %" + name + " is not in the prefill plan");
  return ok();
}

}  // namespace

Expected<ModelPlans> ModelPlans::load(const std::string& prefillPath, const std::string& decodePath,
                                      const rt::TrustedKeys& trusted) {
  auto prefill = rt::loadPlanFile(prefillPath, trusted);
  if (!prefill) return prefill.error();
  auto decode = rt::loadPlanFile(decodePath, trusted);
  if (!decode) return decode.error();
  return check(prefill.take(), prefillPath, decode.take(), decodePath);
}

Expected<ModelPlans> ModelPlans::check(rt::PlanFile prefill, const std::string& prefillName, rt::PlanFile decode,
                                       const std::string& decodeName) {
  auto p = pagedShape(prefill.source, prefillName);
  if (!p) return p.error();
  auto d = pagedShape(decode.source, decodeName);
  if (!d) return d.error();
  if (auto f = fitTogether(*p, *d, decodeName); !f) return f.error();
  ModelPlans plans;
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

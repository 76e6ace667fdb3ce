// The engine's step is poot generate's loop of before, one turn of it: the
// batcher plans a step over one identity, the device's weights change to
// that identity if they hold another (only the weights either identity
// changes), the step's maps become the plan's tokens, pos (each row's
// own, or each token's in a mixed step, with its row and sample), read and
// write, the plan runs with its logits left on the device; a plan that
// samples takes each row's draw and penalties and only its token ids come
// back, else (or where a row wants logprobs) the rows that sample read
// their logits back (a decode or mixed step's rows in one read, a
// prefill's one position a row), each sampled by its request's own Sampler; then the batcher commits and the sink hears every token. Both Sessions
// share the weight and pool buffers (SessionOptions::shared), so a change
// of plan moves nothing.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <span>

namespace poot::engine {
namespace {

template <class T>
Tensor tensorOf(DType dtype, Shape shape, const std::vector<T>& values) {
  Tensor t(Type{dtype, std::move(shape)});
  for (size_t i = 0; i < values.size(); ++i) t.set(int64_t(i), values[i]);
  return t;
}
Tensor i32(Shape shape, const std::vector<int32_t>& words) { return tensorOf(DType::I32, std::move(shape), words); }
Tensor f32(Shape shape, const std::vector<float>& values) { return tensorOf(DType::F32, std::move(shape), values); }

}  // namespace

Engine::Engine(const ModelPlans& plans, std::shared_ptr<rt::Backend> backend, std::unique_ptr<ModelWeights> weights,
               EngineOptions options)
    : prefillShape_(plans.prefill()),
      decodeShape_(plans.decode()),
      mixedShape_(plans.mixed()),
      backend_(std::move(backend)),
      weights_(std::move(weights)),
      options_(std::move(options)),
      cache_({.numBlocks = plans.poolBlocks(),
              .capacity = int32_t(plans.prefill().capacity),
              .prefixCache = options_.prefixCache}),
      batcher_(cache_, {.prefillRows = int32_t(plans.prefill().rows),
                        .prefillTokens = int32_t(plans.prefill().tokens),
                        .decodeRows = int32_t(plans.decode().rows),
                        .mixedRows = int32_t(plans.mixed() ? plans.mixed()->rows : 0),
                        .mixedTokens = int32_t(plans.mixed() ? plans.mixed()->tokens : 0)}) {}

Expected<std::unique_ptr<Engine>> Engine::create(ModelPlans plans, std::shared_ptr<rt::Backend> backend,
                                                 std::unique_ptr<ModelWeights> weights, EngineOptions options) {
  std::unique_ptr<Engine> e(new Engine(plans, backend, std::move(weights), std::move(options)));
  auto prefill = rt::Session::create(std::move(plans.prefillFile_), backend, {e->options_.allowOtherDevice});
  if (!prefill) return prefill.error();
  e->prefill_ = prefill.take();
  if (auto load = e->prefill_->bindWeights(e->weights_->base()); !load) return load.error();
  auto decode = rt::Session::create(std::move(plans.decodeFile_), backend,
                                    {e->options_.allowOtherDevice, e->prefill_->sharedBuffers()});
  if (!decode) return decode.error();
  e->decode_ = decode.take();
  if (plans.mixedFile_) {
    auto mixed = rt::Session::create(std::move(*plans.mixedFile_), backend,
                                     {e->options_.allowOtherDevice, e->prefill_->sharedBuffers()});
    if (!mixed) return mixed.error();
    e->mixed_ = mixed.take();
  }
  return e;
}

Expected<int64_t> Engine::submit(const Request& request) {
  if (auto c = checkRequest(prefillShape_, request); !c) return c.error();
  if (!weights_->adapters().merged(request.identity))
    return makeError(ErrorKind::Usage, {}, "no weights of identity " + std::to_string(request.identity) +
                                               " (the base model is " + std::to_string(AdapterSet::kBase) +
                                               ", adapters are loaded ones)");
  auto id = batcher_.submit({request.prompt, request.identity, request.maxNew, request.stop});
  if (!id) return kvError(id.error());
  samplers_.emplace(*id, Sampler(request.sampling, request.sampling.stream.value_or(*id), request.prompt));
  return *id;
}

Status Engine::bindIdentity(uint64_t identity) {
  if (identity == bound_) return ok();
  auto load = prefill_->bindWeights(weights_->change(bound_, identity));  // the decode Session shares them
  if (!load) return load.error();
  bound_ = identity;
  ++rebinds_;
  retireOld();
  return ok();
}

void Engine::retireOld() {
  std::erase_if(replaced_, [&](uint64_t old) {
    if (old == bound_ || batcher_.unfinished(old) > 0) return false;
    return bool(weights_->adapters().retire(old));
  });
}

Expected<uint64_t> Engine::loadAdapter(const std::string& name, const std::string& dir) {
  std::optional<uint64_t> old = weights_->adapters().identity(name);
  auto id = weights_->adapters().load(name, dir);
  if (!id) return id.error();
  if (old) replaced_.push_back(*old);
  retireOld();
  return *id;
}

Expected<bool> Engine::cancel(int64_t request) {
  auto cancelled = batcher_.cancel(request);
  if (!cancelled) return kvError(cancelled.error());
  if (!*cancelled) return false;
  samplers_.erase(request);
  retireOld();
  if (options_.onToken) options_.onToken({request, -1, kv::Finish::Cancelled});
  return true;
}

Expected<std::optional<StepReport>> Engine::step() {
  const auto start = std::chrono::steady_clock::now();
  auto planned = batcher_.next();
  if (!planned) return kvError(planned.error());
  if (!*planned) return std::optional<StepReport>{};
  const kv::PlannedStep& step = **planned;
  if (auto b = bindIdentity(step.identity); !b) return b.error();
  // The plan's Session and shape (the batcher plans mixed steps only with a mixed plan).
  const bool prefill = step.plan == kv::Plan::Prefill, decode = step.plan == kv::Plan::Decode;
  rt::Session& s = prefill ? *prefill_ : decode ? *decode_ : *mixed_;
  const PagedShape& shape = prefill ? prefillShape_ : decode ? decodeShape_ : *mixedShape_;
  const kv::StepMaps& m = step.maps;
  std::map<std::string, Tensor> inputs;
  if (m.ragged) {
    inputs["tokens"] = i32({m.tokens, 1}, m.tokenIds);
    inputs["pos"] = i32({m.tokens}, m.tokenPos);
    inputs["write"] = i32({m.tokens}, m.write);
    inputs["row"] = i32({m.tokens}, m.tokenRow);
    inputs["sample"] = i32({m.rows}, m.last);
  } else {
    inputs["tokens"] = i32({m.rows, m.tokens}, m.tokenIds);
    inputs["pos"] = i32({m.rows}, m.pos);
    inputs["write"] = i32({m.rows * m.tokens}, m.write);
  }
  inputs["read"] = i32({m.rows, m.capacity}, m.read);
  // A plan with the output `next` picks each row's token itself: where no
  // row wants logprobs, it takes each sampled position's parameters and
  // draw and each row's penalties, and only the ids come back.
  bool onDevice = shape.next;
  for (int32_t r = 0; r < m.rows && onDevice; ++r)
    if (step.sampleAt[r] >= 0) onDevice = samplers_.at(step.requests[r]).options().logprobs < 0;
  std::map<int64_t, Sampler> drawn;  // the samplers as they will be once the step is committed
  const int64_t perRow = m.ragged ? 1 : m.tokens;
  if (shape.next) {  // bound in every step; greedy rows without penalties where the logits are read
    const std::vector<int64_t> rows = {m.rows, perRow}, lists = {m.rows, m.capacity};
    std::vector<float> temperature(size_t(m.rows * perRow)), topP(temperature.size(), 1.0f), minP(temperature.size()),
        uniform(temperature.size()), repetition(size_t(m.rows), 1.0f), amounts(size_t(m.rows) * size_t(m.capacity));
    std::vector<int32_t> topK(temperature.size()), seen(amounts.size(), -1);
    for (int32_t r = 0; r < m.rows && onDevice; ++r) {
      if (step.sampleAt[r] < 0) continue;
      Sampler& sampler = drawn.emplace(step.requests[r], samplers_.at(step.requests[r])).first->second;
      SampleParams p = sampler.draw();
      size_t at = size_t(r * perRow + (m.ragged ? 0 : step.sampleAt[r])), list = size_t(r) * size_t(m.capacity);
      temperature[at] = p.temperature, topK[at] = p.topK, topP[at] = p.topP, minP[at] = p.minP, uniform[at] = p.uniform;
      auto penalty = sampler.penalties(std::span(seen).subspan(list, size_t(m.capacity)),
                                       std::span(amounts).subspan(list, size_t(m.capacity)));
      if (!penalty) return penalty.error();
      repetition[size_t(r)] = *penalty;
    }
    inputs["temperature"] = f32(rows, temperature);
    inputs["top_k"] = i32(rows, topK);
    inputs["top_p"] = f32(rows, topP);
    inputs["min_p"] = f32(rows, minP);
    inputs["uniform"] = f32(rows, uniform);
    inputs["repetition_penalty"] = f32({m.rows}, repetition);
    inputs["seen"] = i32(lists, seen);
    inputs["seen_penalty"] = f32(lists, amounts);
  }
  auto result = s.step(inputs, false);  // the logits stay on the device: one row a sequence is read
  if (!result) return result.error();

  std::vector<int32_t> sampled(size_t(m.rows), -1);
  std::vector<std::optional<TokenLogprobs>> logprobs(size_t(m.rows));
  if (onDevice) {
    next_.resize(size_t(m.rows * perRow));
    if (auto read = s.readOutput("next", 0, int64_t(next_.size()), next_.data()); !read) return read.error();
    for (int32_t r = 0; r < m.rows; ++r) {
      if (step.sampleAt[r] < 0) continue;
      sampled[r] = next_[size_t(r * perRow + (m.ragged ? 0 : step.sampleAt[r]))];
      if (sampled[r] < 0 || sampled[r] >= prefillShape_.vocab)  // a plan computes what it likes
        return makeError(ErrorKind::Range, {}, "the plan's next token for row " + std::to_string(r) + " is " +
                                                   std::to_string(sampled[r]) + ", outside the vocabulary [0, " +
                                                   std::to_string(prefillShape_.vocab) + ")");
      drawn.at(step.requests[r]).took(sampled[r]);
    }
  } else {
    // The logits of the positions sampled (f32: ModelPlans checked it),
    // into a buffer kept across steps: a row each of a decode or mixed
    // step in one read, a prefill's one position a row.
    const int64_t vocab = prefillShape_.vocab;
    const bool oneRead = m.ragged || m.tokens == 1;
    logits_.resize(size_t(oneRead ? m.rows * vocab : vocab));
    if (oneRead)
      if (auto read = s.readOutput("logits", 0, int64_t(logits_.size()), logits_.data()); !read) return read.error();
    for (int32_t r = 0; r < m.rows; ++r) {
      if (step.sampleAt[r] < 0) continue;
      size_t offset = size_t(r) * size_t(vocab);
      if (!oneRead) {
        int64_t at = (int64_t(r) * m.tokens + step.sampleAt[r]) * vocab;
        if (auto read = s.readOutput("logits", at, vocab, logits_.data()); !read) return read.error();
        offset = 0;
      }
      Sampler& sampler = drawn.emplace(step.requests[r], samplers_.at(step.requests[r])).first->second;
      std::span<const float> row = std::span<const float>(logits_).subspan(offset, size_t(vocab));
      sampled[r] = sampler.next(row);
      if (sampler.options().logprobs >= 0) logprobs[r] = tokenLogprobs(row, sampled[r], sampler.options().logprobs);
    }
  }
  auto ended = batcher_.complete(step, sampled);
  if (!ended) return kvError(ended.error());
  StepReport report{.plan = step.plan,
                    .seconds = result->seconds,
                    .deviceSeconds = result->deviceSeconds,
                    .requests = std::count_if(step.requests.begin(), step.requests.end(), [](int64_t q) { return q >= 0; })};
  for (auto& [request, sampler] : drawn) samplers_.at(request) = std::move(sampler);
  std::vector<TokenEvent> events;
  for (int32_t r = 0; r < m.rows; ++r) {
    if (step.sampleAt[r] < 0) continue;
    ++report.tokens;
    events.push_back({step.requests[r], sampled[r], (*ended)[r], std::move(logprobs[r])});
    if ((*ended)[r] != kv::Finish::None) samplers_.erase(step.requests[r]);
  }
  retireOld();
  report.hostSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - report.seconds;
  if (options_.onToken)
    for (const TokenEvent& e : events) options_.onToken(e);
  return std::optional<StepReport>(report);
}

}  // namespace poot::engine

// The C API (include/poot/poot.h) over the runtime and the engine: each
// function checks its pointers, turns C tensors and requests into the
// library's types (an exact byte count, no negative dimension) and leaves
// every other check to the library (readPlanFile, Session,
// uploadCheckpoint, the engine), whose typed errors become a status and this
// thread's last message. The engine's tokens wait in a queue of events the
// caller polls. Nothing throws across the
// boundary: an exception (only host allocation can raise one) is caught at
// it and becomes an error too.
#include "poot/poot.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "runtime/backends/backends.h"
#include "runtime/plan_reader.h"
#include "runtime/session.h"
#include "runtime/weights.h"

using namespace poot;

struct poot_plan {
  rt::PlanFile file;
  std::string path;  // as loaded, for diagnostics
  // Per poot_kind, in the graph's order.
  std::vector<std::pair<std::string, Type>> params[POOT_OUTPUT + 1];
};

struct poot_session {
  poot_plan plan;
  std::unique_ptr<rt::Session> session;
  std::map<std::string, Tensor> outputs;  // of the last step
  std::map<std::string, Tensor> states;   // as last read back
};

struct poot_engine {
  std::unique_ptr<engine::Engine> engine;
  std::deque<poot_event> events;  // not yet polled
};

namespace {

static_assert(int(DType::F32) == POOT_F32 && int(DType::F16) == POOT_F16 && int(DType::BF16) == POOT_BF16 &&
              int(DType::I32) == POOT_I32 && int(DType::I64) == POOT_I64 && int(DType::Bool) == POOT_BOOL);
static_assert(int(kv::Finish::None) == POOT_FINISH_NONE && int(kv::Finish::Length) == POOT_FINISH_LENGTH &&
              int(kv::Finish::Stop) == POOT_FINISH_STOP && int(kv::Finish::Cancelled) == POOT_FINISH_CANCELLED);
static_assert(int(ErrorKind::Io) + 1 == POOT_ERROR_IO && int(ErrorKind::Trust) + 1 == POOT_ERROR_TRUST);

thread_local std::string lastError;

poot_status fail(const Error& e) {
  lastError = e.str();
  return poot_status(int(e.kind) + 1);
}

poot_status fail(ErrorKind kind, const std::string& message) { return fail(makeError(kind, {}, message)); }

// Runs `body`, turning an escaping exception into an error of `fn`.
template <class F>
poot_status guarded(const char* fn, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(ErrorKind::Memory, std::string(fn) + ": out of host memory");
  } catch (const std::exception& e) {
    return fail(ErrorKind::Memory, std::string(fn) + ": " + e.what());
  }
}

poot_status isNull(const char* fn, const char* what) {
  return fail(ErrorKind::Usage, std::string(fn) + ": " + what + " is null");
}

// A C tensor's type, checked against its byte count and pointers.
Expected<Type> typeOf(const char* fn, const poot_tensor* t) {
  auto usage = [&](const std::string& m) { return makeError(ErrorKind::Usage, {}, std::string(fn) + ": " + m); };
  if (!t) return usage("tensor is null");
  if (!t->name) return usage("a tensor's name is null");
  std::string name = std::string("%") + t->name;
  if (int(t->dtype) < POOT_F32 || int(t->dtype) > POOT_BOOL)
    return usage(name + " has dtype " + std::to_string(int(t->dtype)) + ", not a poot_dtype");
  if (t->rank < 0 || (t->rank > 0 && !t->shape)) return usage(name + " has rank " + std::to_string(t->rank) +
                                                              (t->rank < 0 ? "" : " and a null shape"));
  Type type{DType(t->dtype), Shape(t->shape, t->shape + t->rank)};
  uint64_t bytes = uint64_t(dtypeBytes(type.dtype));
  for (int64_t d : type.shape)
    if (d < 0 || __builtin_mul_overflow(bytes, uint64_t(d), &bytes))
      return makeError(ErrorKind::Bind, {}, std::string(fn) + ": " + name + " has shape " + shapeStr(type.shape));
  if (bytes != t->bytes)
    return makeError(ErrorKind::Bind, {}, std::string(fn) + ": " + name + " is " + type.str() + ", " +
                                              std::to_string(bytes) + " bytes, but " + std::to_string(t->bytes) +
                                              " are given");
  if (bytes > 0 && !t->data) return usage(name + "'s data is null");
  return type;
}

Expected<Tensor> tensorOf(const char* fn, const poot_tensor* t) {
  auto type = typeOf(fn, t);
  if (!type) return type.error();
  Tensor out(type.take());
  if (!out.bytes.empty()) std::memcpy(out.bytes.data(), t->data, out.bytes.size());
  return out;
}

// Fills `view` with a tensor the library holds.
void describe(const std::string& name, const Tensor& t, poot_tensor* view) {
  *view = {name.c_str(), poot_dtype(t.dtype()), int32_t(t.shape().size()), t.shape().data(), t.bytes.data(),
           t.bytes.size()};
}

poot_plan planOf(rt::PlanFile file, std::string path) {
  poot_plan p{std::move(file), std::move(path), {}};
  const Graph& g = p.file.source;
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    poot_kind kind = v.storage == Storage::Input    ? POOT_INPUT
                     : v.storage == Storage::Weight ? POOT_WEIGHT
                     : v.storage == Storage::State  ? POOT_STATE
                                                    : POOT_SLOT;
    p.params[kind].emplace_back(v.name, v.type);
  }
  for (const Export& e : g.outputs) p.params[POOT_OUTPUT].emplace_back(g.value(e.value).name, g.type(e.value));
  return p;
}

// The plan's parameters of `kind`, or the error of `fn` that says why not.
Expected<const std::vector<std::pair<std::string, Type>>*> paramsOf(const char* fn, const poot_plan* plan,
                                                                      poot_kind kind) {
  if (!plan) return makeError(ErrorKind::Usage, {}, std::string(fn) + ": plan is null");
  if (int(kind) < POOT_INPUT || int(kind) > POOT_OUTPUT)
    return makeError(ErrorKind::Usage, {},
                     std::string(fn) + ": kind " + std::to_string(int(kind)) + " is not a poot_kind");
  return &plan->params[kind];
}

}  // namespace

extern "C" {

const char* poot_last_error(void) { return lastError.c_str(); }

int poot_api_version(void) { return POOT_API_VERSION; }

poot_status poot_plan_load(const char* path, poot_plan** plan) {
  return guarded("poot_plan_load", [&] {
    if (!path) return isNull("poot_plan_load", "path");
    if (!plan) return isNull("poot_plan_load", "plan");
    auto file = rt::loadPlanFile(path);
    if (!file) return fail(file.error());
    *plan = new poot_plan(planOf(file.take(), path));
    return POOT_OK;
  });
}

poot_status poot_plan_load_trusted(const char* path, const char* const* public_keys, size_t count, poot_plan** plan) {
  return guarded("poot_plan_load_trusted", [&] {
    if (!path) return isNull("poot_plan_load_trusted", "path");
    if (!plan) return isNull("poot_plan_load_trusted", "plan");
    if (count == 0 || !public_keys)
      return fail(ErrorKind::Usage, "poot_plan_load_trusted: no public keys given (trust at least one)");
    std::vector<std::string> files;
    for (size_t i = 0; i < count; ++i) {
      if (!public_keys[i]) return isNull("poot_plan_load_trusted", "a public key path");
      files.push_back(public_keys[i]);
    }
    auto trusted = rt::loadTrustedKeys(files);
    if (!trusted) return fail(trusted.error());
    auto file = rt::loadPlanFile(path, *trusted);
    if (!file) return fail(file.error());
    *plan = new poot_plan(planOf(file.take(), path));
    return POOT_OK;
  });
}

void poot_plan_free(poot_plan* plan) { delete plan; }

const char* poot_plan_target(const poot_plan* plan) { return plan ? rt::targetName(plan->file.device.target) : ""; }

const char* poot_plan_device(const poot_plan* plan) { return plan ? plan->file.device.name.c_str() : ""; }

poot_status poot_plan_count(const poot_plan* plan, poot_kind kind, size_t* count) {
  auto params = paramsOf("poot_plan_count", plan, kind);
  if (!params) return fail(params.error());
  if (!count) return isNull("poot_plan_count", "count");
  *count = (*params)->size();
  return POOT_OK;
}

poot_status poot_plan_param(const poot_plan* plan, poot_kind kind, size_t index, poot_tensor* param) {
  auto params = paramsOf("poot_plan_param", plan, kind);
  if (!params) return fail(params.error());
  if (!param) return isNull("poot_plan_param", "param");
  if (index >= (*params)->size())
    return fail(ErrorKind::Usage, "poot_plan_param: index " + std::to_string(index) + " is past the plan's " +
                                      std::to_string((*params)->size()) + " of kind " + std::to_string(int(kind)));
  const auto& [name, type] = (**params)[index];
  *param = {name.c_str(), poot_dtype(type.dtype), int32_t(type.shape.size()), type.shape.data(), nullptr, 0};
  return POOT_OK;
}

poot_status poot_session_create(const poot_plan* plan, const char* backend, const char* device,
                                int allow_other_device, poot_session** session) {
  return guarded("poot_session_create", [&] {
    if (!plan) return isNull("poot_session_create", "plan");
    if (!backend) return isNull("poot_session_create", "backend");
    if (!session) return isNull("poot_session_create", "session");
    auto opened = rt::openBackend(backend, device ? device : "");
    if (!opened) return fail(opened.error());
    auto s = std::make_unique<poot_session>(poot_session{*plan, nullptr, {}, {}});
    auto created = rt::Session::create(plan->file, opened.take(), {allow_other_device != 0});
    if (!created) return fail(created.error());
    s->session = created.take();
    *session = s.release();
    return POOT_OK;
  });
}

void poot_session_free(poot_session* session) { delete session; }

const poot_plan* poot_session_plan(const poot_session* session) { return session ? &session->plan : nullptr; }

poot_status poot_session_bind_weights_file(poot_session* session, const char* path) {
  return guarded("poot_session_bind_weights_file", [&] {
    if (!session) return isNull("poot_session_bind_weights_file", "session");
    if (!path) return isNull("poot_session_bind_weights_file", "path");
    auto load = uploadCheckpoint(*session->session, path);
    return load ? POOT_OK : fail(load.error());
  });
}

poot_status poot_session_bind_weights(poot_session* session, const poot_tensor* weights, size_t count) {
  return guarded("poot_session_bind_weights", [&] {
    if (!session) return isNull("poot_session_bind_weights", "session");
    if (!weights && count > 0) return isNull("poot_session_bind_weights", "weights");
    std::vector<rt::WeightBytes> views;
    for (size_t i = 0; i < count; ++i) {
      auto type = typeOf("poot_session_bind_weights", &weights[i]);
      if (!type) return fail(type.error());
      views.push_back({weights[i].name, type.take(), weights[i].data, int64_t(weights[i].bytes)});
    }
    auto load = session->session->bindWeights(views);
    return load ? POOT_OK : fail(load.error());
  });
}

poot_status poot_session_set_state(poot_session* session, const poot_tensor* state) {
  return guarded("poot_session_set_state", [&] {
    if (!session) return isNull("poot_session_set_state", "session");
    auto t = tensorOf("poot_session_set_state", state);
    if (!t) return fail(t.error());
    auto s = session->session->setState(state->name, *t);
    return s ? POOT_OK : fail(s.error());
  });
}

poot_status poot_session_step(poot_session* session, const poot_tensor* inputs, size_t count) {
  return guarded("poot_session_step", [&] {
    if (!session) return isNull("poot_session_step", "session");
    if (!inputs && count > 0) return isNull("poot_session_step", "inputs");
    session->outputs.clear();
    session->states.clear();
    std::map<std::string, Tensor> bound;
    for (size_t i = 0; i < count; ++i) {
      auto t = tensorOf("poot_session_step", &inputs[i]);
      if (!t) return fail(t.error());
      if (!bound.emplace(inputs[i].name, t.take()).second)
        return fail(ErrorKind::Bind, std::string("poot_session_step: %") + inputs[i].name + " is given twice");
    }
    auto result = session->session->step(bound);
    if (!result) return fail(result.error());
    session->outputs = std::move(result->outputs);
    return POOT_OK;
  });
}

poot_status poot_session_output(poot_session* session, const char* name, poot_tensor* output) {
  if (!session) return isNull("poot_session_output", "session");
  if (!name) return isNull("poot_session_output", "name");
  if (!output) return isNull("poot_session_output", "output");
  auto it = session->outputs.find(name);
  if (it == session->outputs.end())
    return fail(ErrorKind::Bind, session->outputs.empty()
                                     ? std::string("poot_session_output: no step has run, or the last one failed")
                                     : std::string("poot_session_output: the plan has no output %") + name);
  describe(it->first, it->second, output);
  return POOT_OK;
}

poot_status poot_session_read_state(poot_session* session, const char* name, poot_tensor* state) {
  return guarded("poot_session_read_state", [&] {
    if (!session) return isNull("poot_session_read_state", "session");
    if (!name) return isNull("poot_session_read_state", "name");
    if (!state) return isNull("poot_session_read_state", "state");
    auto t = session->session->readState(name);
    if (!t) return fail(t.error());
    auto& slot = session->states[name];
    slot = t.take();
    describe(session->states.find(name)->first, slot, state);
    return POOT_OK;
  });
}

poot_status poot_engine_create(const poot_plan* prefill, const poot_plan* decode, const poot_plan* mixed,
                               const char* backend, const char* device, int allow_other_device, const char* weights, int prefix_cache,
                               poot_engine** engine) {
  return guarded("poot_engine_create", [&] {
    if (!prefill) return isNull("poot_engine_create", "prefill");
    if (!decode) return isNull("poot_engine_create", "decode");
    if (!backend) return isNull("poot_engine_create", "backend");
    if (!engine) return isNull("poot_engine_create", "engine");
    auto plans = engine::ModelPlans::check(prefill->file, prefill->path, decode->file, decode->path,
                                           mixed ? std::optional<rt::PlanFile>(mixed->file) : std::nullopt,
                                           mixed ? mixed->path : std::string());
    if (!plans) return fail(plans.error());
    auto bound = engine::ModelWeights::bind(plans->graph(), weights ? weights : "");
    if (!bound) return fail(bound.error());
    auto opened = rt::openBackend(backend, device ? device : "");
    if (!opened) return fail(opened.error());
    auto e = std::make_unique<poot_engine>();
    poot_engine* self = e.get();
    engine::EngineOptions opts{.allowOtherDevice = allow_other_device != 0,
                               .prefixCache = prefix_cache != 0,
                               .onToken = [self](const engine::TokenEvent& t) {
                                 self->events.push_back({t.request, t.token, poot_finish(int(t.finish))});
                               }};
    auto created = engine::Engine::create(plans.take(), opened.take(), bound.take(), std::move(opts));
    if (!created) return fail(created.error());
    e->engine = created.take();
    *engine = e.release();
    return POOT_OK;
  });
}

void poot_engine_free(poot_engine* engine) { delete engine; }

poot_status poot_engine_load_adapter(poot_engine* engine, const char* name, const char* dir) {
  return guarded("poot_engine_load_adapter", [&] {
    if (!engine) return isNull("poot_engine_load_adapter", "engine");
    if (!name) return isNull("poot_engine_load_adapter", "name");
    if (!dir) return isNull("poot_engine_load_adapter", "dir");
    auto id = engine->engine->loadAdapter(name, dir);
    return id ? POOT_OK : fail(id.error());
  });
}

poot_status poot_engine_submit(poot_engine* engine, const poot_request* request, int64_t* id) {
  return guarded("poot_engine_submit", [&] {
    if (!engine) return isNull("poot_engine_submit", "engine");
    if (!request) return isNull("poot_engine_submit", "request");
    if (!id) return isNull("poot_engine_submit", "id");
    if (!request->prompt && request->length > 0) return isNull("poot_engine_submit", "the prompt");
    if (!request->stop && request->stop_count > 0) return isNull("poot_engine_submit", "the stop ids");
    engine::Request q;
    q.prompt.assign(request->prompt, request->prompt + request->length);
    q.stop.insert(request->stop, request->stop + request->stop_count);
    q.maxNew = request->max_new;
    q.sampling = {.temperature = request->temperature,
                  .topP = request->top_p,
                  .topK = request->top_k,
                  .minP = request->min_p,
                  .repetitionPenalty = request->repetition_penalty,
                  .frequencyPenalty = request->frequency_penalty,
                  .presencePenalty = request->presence_penalty,
                  .seed = request->seed};
    if (request->adapter) {
      auto identity = engine->engine->weights().adapters().identity(request->adapter);
      if (!identity)
        return fail(ErrorKind::Usage, std::string("poot_engine_submit: no adapter '") + request->adapter +
                                          "' (poot_engine_load_adapter loads one)");
      q.identity = *identity;
    }
    auto submitted = engine->engine->submit(q);
    if (!submitted) return fail(submitted.error());
    *id = *submitted;
    return POOT_OK;
  });
}

poot_status poot_engine_step(poot_engine* engine, int* ran) {
  return guarded("poot_engine_step", [&] {
    if (!engine) return isNull("poot_engine_step", "engine");
    if (!ran) return isNull("poot_engine_step", "ran");
    auto step = engine->engine->step();
    if (!step) return fail(step.error());
    *ran = step->has_value() ? 1 : 0;
    return POOT_OK;
  });
}

poot_status poot_engine_cancel(poot_engine* engine, int64_t id, int* cancelled) {
  return guarded("poot_engine_cancel", [&] {
    if (!engine) return isNull("poot_engine_cancel", "engine");
    if (!cancelled) return isNull("poot_engine_cancel", "cancelled");
    auto c = engine->engine->cancel(id);
    if (!c) return fail(c.error());
    *cancelled = *c ? 1 : 0;
    return POOT_OK;
  });
}

poot_status poot_engine_poll(poot_engine* engine, poot_event* events, size_t capacity, size_t* count) {
  if (!engine) return isNull("poot_engine_poll", "engine");
  if (!count) return isNull("poot_engine_poll", "count");
  if (!events && capacity > 0) return isNull("poot_engine_poll", "events");
  size_t n = std::min(capacity, engine->events.size());
  std::copy(engine->events.begin(), engine->events.begin() + std::ptrdiff_t(n), events);
  engine->events.erase(engine->events.begin(), engine->events.begin() + std::ptrdiff_t(n));
  *count = n;
  return POOT_OK;
}

}  // extern "C"

// poot serve: the OpenAI API over the serving engine, on cpp-httplib. What
// can be checked before the device opens is checked first (the plans fit
// together, the end ids, the tokenizer); then the engine starts on its own
// thread (serve_loop.h), the server binds (before the device opens) and says where it listens, and
// each HTTP handler thread checks its request (serve_api.h), submits it to
// the loop and follows its tokens: a whole answer, or server-sent events as
// the tokens come. A client gone from a stream, queued or running, is
// noticed at the next write (a stream with nothing new writes a comment
// every kTick) and its request cancelled. SIGINT or SIGTERM stops the server: no new
// connection is taken, the requests running finish, then the loop stops.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <pthread.h>

#include "engine/engine.h"
#include "prompts.h"
#include "runtime/backends/backends.h"
#include "serve_api.h"
#include "serve_loop.h"
#include "tool.h"

namespace poot {
namespace {

using json = nlohmann::json;

// Elements [from, to) of a generation's tokens or their logprobs.
template <class T>
std::span<const T> slice(const std::vector<T>& v, size_t from, size_t to) {
  return std::span<const T>(v).subspan(from, to - from);
}

void log(const std::string& line) { std::fprintf(stderr, "poot serve: %s\n", line.c_str()); }

int64_t now() { return int64_t(std::time(nullptr)); }

void answerError(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.body(), "application/json");
}

// How a generation ended, as the answer says it.
struct Outcome {
  std::string finish;  // "stop" or "length"; empty with an error or a client gone
  std::string error;
  int64_t tokens = 0;  // generated (the one that ended it included)
  Generation::Update last;  // the generation as last seen: its tokens and their logprobs
};

// How often a generation with nothing new asks whether its client is still there.
constexpr auto kTick = std::chrono::milliseconds(100);

// Follows a generation to its end, each piece of text to `emit` as it
// comes with how many tokens it has taken so far; `emit` false (the client
// is gone) cancels it, and so does `idle` false, asked each kTick that
// brings nothing (a stream writes its client a comment then, which fails
// once the client is gone, queued or running).
Outcome follow(EngineLoop& loop, const std::shared_ptr<Generation>& g, TextCutter& text,
               const std::function<bool(const std::string&, const Generation::Update&, size_t)>& emit,
               const std::function<bool()>& idle) {
  size_t have = 0;
  for (;;) {
    Generation::Update u = g->wait(have, kTick);
    if (u.tokens.size() == have && u.finish == kv::Finish::None && u.error.empty() && !idle()) {
      loop.cancel(g, "the client is gone");
      return {"", "", int64_t(have), std::move(u)};
    }
    for (; have < u.tokens.size(); ++have) {
      auto piece = text.push(u.tokens[have]);
      if (!piece) {
        loop.cancel(g, "its text cannot be decoded");
        return {"", piece.error().message, int64_t(have) + 1, std::move(u)};
      }
      if (!piece->empty() && !emit(*piece, u, have + 1)) {
        loop.cancel(g, "the client is gone");
        return {"", "", int64_t(have) + 1, std::move(u)};
      }
      if (text.stopped()) {
        loop.cancel(g, "its text reached a stop string");
        return {"stop", "", int64_t(have) + 1, std::move(u)};
      }
    }
    if (!u.error.empty()) return {"", u.error, int64_t(have), std::move(u)};
    if (u.finish == kv::Finish::None) continue;
    if (u.finish == kv::Finish::Cancelled) return {"", "the request was cancelled", int64_t(have), std::move(u)};
    std::string rest = text.finish();
    if (!rest.empty() && !emit(rest, u, have)) return {"", "", int64_t(have), std::move(u)};
    return {u.finish == kv::Finish::Length ? "length" : "stop", "", int64_t(have), std::move(u)};
  }
}

std::string sse(const json& j) {
  return "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

class Server {
 public:
  Server(const ServedModel& model, EngineLoop& loop) : model_(model), loop_(loop) {}

  void routes(httplib::Server& http) {
    http.set_payload_max_length(kMaxBody);
    http.Post("/v1/chat/completions",
              [this](const httplib::Request& q, httplib::Response& r) { complete(Endpoint::Chat, q, r); });
    http.Post("/v1/completions",
              [this](const httplib::Request& q, httplib::Response& r) { complete(Endpoint::Completion, q, r); });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(modelsJson(model_.name, started_).dump(), "application/json");
    });
    // Every error answer without a body of ours (no route, a body too
    // large, a request httplib could not read) gets an OpenAI error body.
    http.set_error_handler([](const httplib::Request& q, httplib::Response& r) {
      if (!r.body.empty()) return;
      if (r.status == 404) answerError(r, {404, "no such endpoint: " + q.method + " " + q.path, {}, "not_found"});
      else if (r.status == 413)
        answerError(r, {413, "the body is larger than " + std::to_string(kMaxBody) + " bytes", {}, "body_too_large"});
      else answerError(r, {r.status, "the request could not be read (HTTP status " + std::to_string(r.status) + ")"});
    });
  }

 private:
  void complete(Endpoint endpoint, const httplib::Request& q, httplib::Response& res) {
    auto parsed = parseRequest(endpoint, q.body, model_);
    if (auto* e = std::get_if<ApiError>(&parsed)) return answerError(res, *e);
    auto r = std::make_shared<ApiRequest>(std::get<ApiRequest>(std::move(parsed)));
    Answer a{endpoint, (endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-") + std::to_string(started_) + "-" +
                           std::to_string(++answers_), now(), model_.name};
    int64_t promptTokens = int64_t(r->engine.prompt.size());
    auto g = loop_.submit(r->engine);
    const text::Tokenizer& tokenizer = *model_.tokenizer;
    if (!r->stream) {
      TextCutter text(tokenizer, r->stop);
      std::string out;
      Outcome o = follow(
          loop_, g, text,
          [&](const std::string& piece, const Generation::Update&, size_t) {
            out += piece;
            return true;
          },
          [] { return true; });
      if (!o.error.empty()) return answerError(res, {500, o.error, {}, {}, "server_error"});
      int64_t offset = 0;
      json logprobs = r->engine.sampling.logprobs < 0
                          ? json()
                          : logprobsJson(endpoint, tokenizer, slice(o.last.tokens, 0, o.tokens),
                                         slice(o.last.logprobs, 0, o.tokens), offset);
      res.set_content(completionJson(a, out, o.finish, promptTokens, o.tokens, logprobs)
                          .dump(-1, ' ', false, json::error_handler_t::replace),
                      "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    EngineLoop& loop = loop_;
    res.set_chunked_content_provider(
        "text/event-stream",
        [&loop, &tokenizer, g, r, a, promptTokens](size_t, httplib::DataSink& sink) {
          auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
          if (a.endpoint == Endpoint::Chat && !write(sse(chunkJson(a, "", true, {}, r->includeUsage, json())))) {
            loop.cancel(g, "the client is gone");
            return false;
          }
          // A chunk's logprobs are those of the tokens taken since the last chunk.
          size_t sent = 0;
          int64_t offset = 0;
          auto logprobs = [&](const Generation::Update& u, size_t upTo) {
            if (r->engine.sampling.logprobs < 0) return json();
            json j = logprobsJson(a.endpoint, tokenizer, slice(u.tokens, sent, upTo),
                                  slice(u.logprobs, sent, upTo), offset);
            sent = upTo;
            return j;
          };
          TextCutter text(tokenizer, r->stop);
          Outcome o = follow(
              loop, g, text,
              [&](const std::string& piece, const Generation::Update& u, size_t taken) {
                return write(sse(chunkJson(a, piece, false, {}, r->includeUsage, logprobs(u, taken))));
              },
              [&] { return write(": waiting\n\n"); });
          if (o.finish.empty() && o.error.empty()) return false;  // the client is gone
          if (!o.error.empty()) {
            write("data: " + ApiError{500, o.error, {}, {}, "server_error"}.body() + "\n\n");
            sink.done();
            return true;
          }
          // The tokens that made no text (an end-of-sequence id) go with the last chunk.
          json rest = sent < size_t(o.tokens) ? logprobs(o.last, size_t(o.tokens)) : json();
          bool fine = write(sse(chunkJson(a, "", false, o.finish, r->includeUsage, rest)));
          if (fine && r->includeUsage) fine = write(sse(usageChunkJson(a, promptTokens, o.tokens)));
          if (fine) write("data: [DONE]\n\n");
          sink.done();
          return true;
        },
        // A client gone before the stream began writing: the request goes too.
        [&loop, g](bool success) {
          if (!success) loop.cancel(g, "the client is gone");
        });
  }

  const ServedModel& model_;
  EngineLoop& loop_;
  const int64_t started_ = now();
  std::atomic<int64_t> answers_{0};
};

// The served model's name: --model, else the tokenizer's directory's name.
std::string modelName(const ServeOptions& o) {
  if (!o.model.empty()) return o.model;
  std::filesystem::path p = std::filesystem::absolute(o.tokenizer);
  std::error_code ec;
  if (!std::filesystem::is_directory(p, ec)) p = p.parent_path();
  return p.lexically_normal().filename().empty() ? p.lexically_normal().parent_path().filename().string()
                                                 : p.lexically_normal().filename().string();
}

}  // namespace

int runServe(const ServeOptions& o) {
  // SIGINT and SIGTERM wait for the thread that stops the server; a write to
  // a client gone is an error, not a signal. Set before any thread starts,
  // so every thread inherits it.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  auto trusted = rt::loadTrustedKeys(o.engine.trust);
  if (!trusted) return report(trusted.error());
  auto plans = engine::ModelPlans::load(o.engine.prefillPlan, o.engine.decodePlan, *trusted, o.engine.mixedPlan);
  if (!plans) return report(plans.error());
  auto eos = eosIds(o.engine.eos, o.engine.config, o.engine.weights);
  if (!eos) return report(eos.error());
  auto tokenizer = text::Tokenizer::load(o.tokenizer);
  if (!tokenizer) return report(textError(tokenizer.error()));
  auto chat = text::ChatConfig::load(o.tokenizer);
  ServedModel model{modelName(o), &*tokenizer, chat ? &*chat : nullptr, chat ? "" : chat.error().message,
                    plans->prefill(), *eos};
  if (!chat) log("chat completions are refused: " + model.noChat);

  // Start-up takes a while on a large model (reading the checkpoint,
  // building every kernel, uploading the weights, zeroing the pools): each
  // stage says when it begins and what it took.
  auto started = std::chrono::steady_clock::now();
  auto took = [&started] {
    auto now = std::chrono::steady_clock::now();
    char text[32];
    std::snprintf(text, sizeof text, " (%.1f s)", std::chrono::duration<double>(now - started).count());
    started = now;
    return std::string(text);
  };
  log(o.engine.weights.empty() ? "drawing seeded weights (no --weights)" : "reading the weights: " + o.engine.weights);
  auto weights = engine::ModelWeights::bind(plans->graph(), o.engine.weights);
  if (!weights) return report(weights.error());
  log("weights ready" + took());
  for (const Error& n : bindNotices((*weights)->graph(), (*weights)->params())) notice(n);
  // The port is taken before the device opens, so a port in use costs
  // nothing; connections wait in the socket's backlog until the engine runs.
  httplib::Server http;
  // A request holds its handler thread until its last token, queued or
  // running, so the pool follows the decode rows, not the cores
  // (cpp-httplib's default, max(8, cores - 1), would keep requests past it
  // from the engine, and a batch wider than that from ever filling): every
  // row's request twice over, and eight more.
  const size_t handlers = size_t(2 * plans->decode().rows + 8);
  http.new_task_queue = [handlers] { return new httplib::ThreadPool(handlers); };
  int port = o.port == 0 ? http.bind_to_any_port(o.host) : http.bind_to_port(o.host, o.port) ? o.port : -1;
  if (port < 0)
    return report(makeError(ErrorKind::Io, {}, "cannot listen on " + o.host + ":" + std::to_string(o.port) +
                                                   " (in use, or not an address of this host)"));
  auto backend = rt::openBackend(o.engine.backend, o.engine.device);
  if (!backend) return report(backend.error());
  log("device open" + took() + "; building the kernels, uploading the weights, zeroing the KV pools");
  auto loop = EngineLoop::create(plans.take(), backend.take(), weights.take(),
                                 {.allowOtherDevice = o.engine.allowOtherDevice, .prefixCache = !o.engine.noPrefixCache}, log);
  if (!loop) return report(loop.error());
  log("engine ready" + took());
  Server server(model, **loop);
  server.routes(http);
  log("serving '" + model.name + "' on http://" + o.host + ":" + std::to_string(port) + "/v1");

  std::atomic<bool> stopped{false};
  std::thread watcher([&] {
    const timespec tick{0, 200'000'000};
    while (!stopped) {
      int s = sigtimedwait(&stopSignals, nullptr, &tick);
      if (s == SIGINT || s == SIGTERM) {
        log(std::string("stopping (") + (s == SIGINT ? "SIGINT" : "SIGTERM") + "): the requests running finish");
        http.stop();
        return;
      }
    }
  });
  bool listened = http.listen_after_bind();
  stopped = true;
  watcher.join();
  (*loop)->stop();
  if (!listened) return report(makeError(ErrorKind::Io, {}, "the server stopped taking connections"));
  log("stopped");
  return 0;
}

}  // namespace poot

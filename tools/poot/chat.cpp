// poot chat: a conversation with a model on the terminal, over the engine
// (lib/engine) as poot generate and poot serve use it. Each line of standard
// input is the user's next message; the whole conversation so far goes
// through the model's chat template (add_generation_prompt), and the reply
// streams to standard output as its tokens come, ended by a newline, until
// an end-of-sequence id or --max-new tokens. The reply joins the
// conversation without its end-of-sequence id (the template writes its own
// turn ends), so the next turn's prompt starts with the last one's and the
// prefix cache finds the full blocks computed before. `/clear` starts a new
// conversation; end of input ends the session. A turn that cannot run (its
// conversation passes the capacity or the pool) is reported and left out,
// and the conversation goes on without it.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "engine/engine.h"
#include "prompts.h"
#include "runtime/backends/backends.h"
#include "tool.h"

namespace poot {

int runChat(const ChatOptions& o) {
  auto trusted = rt::loadTrustedKeys(o.engine.trust);
  if (!trusted) return report(trusted.error());
  auto plans = engine::ModelPlans::load(o.engine.prefillPlan, o.engine.decodePlan, *trusted, o.engine.mixedPlan);
  if (!plans) return report(plans.error());
  const engine::PagedShape shape = plans->prefill();
  auto eos = eosIds(o.engine.eos, o.engine.config, o.engine.weights);
  if (!eos) return report(eos.error());
  auto tokenizer = text::Tokenizer::load(o.tokenizer);
  if (!tokenizer) return report(textError(tokenizer.error()));
  auto chat = text::ChatConfig::load(o.tokenizer);
  if (!chat) return report(textError(chat.error()));
  auto weights = engine::ModelWeights::bind(plans->graph(), o.engine.weights);
  if (!weights) return report(weights.error());
  for (const Error& n : bindNotices((*weights)->graph(), (*weights)->params())) notice(n);
  auto backend = rt::openBackend(o.engine.backend, o.engine.device);
  if (!backend) return report(backend.error());
  std::vector<int32_t> reply;
  bool ended = false;
  auto created = engine::Engine::create(plans.take(), backend.take(), weights.take(),
                                        {.allowOtherDevice = o.engine.allowOtherDevice,
                                         .prefixCache = !o.engine.noPrefixCache,
                                         .onToken = [&](const engine::TokenEvent& e) {
                                           if (e.finish != kv::Finish::Stop) reply.push_back(e.token);
                                           ended = e.finish != kv::Finish::None;
                                         }});
  if (!created) return report(created.error());
  engine::Engine& engine = **created;

  const bool terminal = isatty(STDIN_FILENO);
  nlohmann::json conversation = nlohmann::json::array();
  if (!o.system.empty()) conversation.push_back({{"role", "system"}, {"content", o.system}});
  const size_t start = conversation.size();
  auto ask = [&] {
    if (terminal) std::fputs("> ", stderr);
  };
  ask();
  for (std::string line; std::getline(std::cin, line); ask()) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/clear") {
      conversation.erase(conversation.begin() + ptrdiff_t(start), conversation.end());
      continue;
    }
    nlohmann::json next = conversation;
    next.push_back({{"role", "user"}, {"content", line}});
    auto rendered = chat->apply(next.dump(), true);
    if (!rendered) {
      report(textError(rendered.error(), {}, {"<stdin>"}));
      continue;
    }
    auto ids = tokenizer->encode(*rendered, false);
    if (!ids) return report(makeError(ErrorKind::Syntax, {"<stdin>"}, ids.error().message));
    engine::Request q{*ids, o.sampling, *eos, int32_t(o.maxNew), AdapterSet::kBase};
    if (auto c = engine::checkRequest(shape, q); !c) {
      report(makeError(c.error().kind, {"<stdin>"},
                       c.error().message + " (the conversation so far is " + std::to_string(ids->size()) +
                           " tokens: /clear starts a new one)"));
      continue;
    }
    if (auto s = engine.submit(q); !s) return report(s.error());
    reply.clear();
    ended = false;
    text::Detokenizer out(*tokenizer, true);
    size_t shown = 0;
    while (!ended) {
      auto ran = engine.step();
      if (!ran) return report(ran.error());
      for (; shown < reply.size(); ++shown) {
        auto piece = out.push(reply[shown]);
        if (!piece) return report(makeError(ErrorKind::Range, {}, piece.error().message));
        std::fputs(piece->c_str(), stdout);
      }
      std::fflush(stdout);
    }
    std::fputs((out.finish() + "\n").c_str(), stdout);
    std::fflush(stdout);
    auto text = tokenizer->decode(reply, true);
    if (!text) return report(makeError(ErrorKind::Range, {}, text.error().message));
    next.push_back({{"role", "assistant"}, {"content", *text}});
    conversation = std::move(next);
  }
  if (terminal) std::fputs("\n", stderr);
  return 0;
}

}  // namespace poot

// poot generate: token generation over a paged prefill plan and a paged
// decode plan, a thin layer over the engine (lib/engine). Everything that
// can be checked before a step runs is checked first, so bad input writes
// nothing: the --adapter NAME=DIR words, the two plans must fit together
// (engine::ModelPlans), the prompts file must parse and name only given
// adapters, every adapter must load and merge, every prompt must fit the
// capacity and the pool alone (engine::checkRequest). Then the engine opens
// the backend with the base weights bound once (a checkpoint, else the
// generator's seed 0, as `poot run` draws them) in buffers both plans share,
// the prompts are submitted in the file's order, and the engine is stepped
// until every prompt is done; its tokens stream to the tool as they come. A
// progress line goes to stderr as prompts finish (and at least every 5 s);
// the summary to stdout; --output is written once every prompt is done,
// atomically.
#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "engine/engine.h"
#include "ir/io.h"
#include "prompts.h"
#include "runtime/backends/backends.h"
#include "tool.h"

namespace poot {
namespace {

// The --adapter words, NAME=DIR each: a name of letters, digits, '_', '.'
// and '-', given once.
Expected<std::map<std::string, std::string>> adapterArgs(const std::vector<std::string>& words) {
  std::map<std::string, std::string> out;
  for (const std::string& w : words) {
    size_t eq = w.find('=');
    std::string name = w.substr(0, eq);
    auto nameChar = [](char c) { return std::isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-'; };
    bool fine = eq != std::string::npos && eq > 0 && eq + 1 < w.size() && std::all_of(name.begin(), name.end(), nameChar);
    if (!fine)
      return makeError(ErrorKind::Usage, {}, "--adapter '" + w + "' is not NAME=DIR (a name of letters, digits, '_', "
                                             "'.' and '-', then the adapter's directory)");
    if (!out.emplace(name, w.substr(eq + 1)).second)
      return makeError(ErrorKind::Usage, {}, "--adapter names adapter '" + name + "' twice");
  }
  return out;
}

std::string perSecond(int64_t n, double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", seconds > 0 ? double(n) / seconds : 0.0);
  return buf;
}

// What a prompt has generated so far, as the engine streams it.
struct Generated {
  std::vector<int32_t> tokens;
  bool done = false;
};

}  // namespace

// The generated text on standard output, prompt by prompt in order: the
// first unfinished prompt's text as its tokens come (whole UTF-8 characters
// only), then, once it finishes, the next one's (what it has so far at
// once), each prompt's text ended by a newline. Without a tokenizer, nothing.
class TextStream {
 public:
  TextStream(const std::vector<Generated>& g, const text::Tokenizer* t) : g_(g), t_(t) {}
  Status flush() {
    if (!t_) return ok();
    while (prompts_.size() < g_.size()) prompts_.push_back({{}, text::Detokenizer(*t_, false), 0});
    for (; at_ < g_.size(); ++at_) {
      Prompt& p = prompts_[at_];
      const std::vector<int32_t>& out = g_[at_].tokens;
      for (; p.sent < out.size(); ++p.sent) {
        auto piece = p.detok.push(out[p.sent]);
        if (!piece) return makeError(ErrorKind::Range, {}, piece.error().message);
        emit(p, *piece);
      }
      if (!g_[at_].done) return ok();
      emit(p, p.detok.finish());
      write("\n");
    }
    return ok();
  }
  // Prompt i's text.
  const std::string& text(size_t i) const { return prompts_.at(i).text; }

 private:
  struct Prompt {
    std::string text;
    text::Detokenizer detok;
    size_t sent;  // tokens pushed to detok
  };
  static void write(const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  }
  void emit(Prompt& p, const std::string& piece) {
    p.text += piece;
    write(piece);
  }
  const std::vector<Generated>& g_;
  const text::Tokenizer* t_;
  size_t at_ = 0;  // the prompt streaming now
  std::vector<Prompt> prompts_;
};

int runGenerate(const GenerateOptions& o) {
  auto adapterDirs = adapterArgs(o.adapters);
  if (!adapterDirs) return report(adapterDirs.error());
  std::set<std::string> adapterNames;
  for (const auto& [name, dir] : *adapterDirs) adapterNames.insert(name);
  auto trusted = rt::loadTrustedKeys(o.engine.trust);
  if (!trusted) return report(trusted.error());
  auto plans = engine::ModelPlans::load(o.engine.prefillPlan, o.engine.decodePlan, *trusted, o.engine.mixedPlan);
  if (!plans) return report(plans.error());
  const engine::PagedShape p = plans->prefill(), d = plans->decode();
  auto eos = eosIds(o.engine.eos, o.engine.config, o.engine.weights);
  if (!eos) return report(eos.error());
  std::optional<text::Tokenizer> tokenizer;
  if (!o.tokenizer.empty()) {
    auto t = text::Tokenizer::load(o.tokenizer);
    if (!t) return report(textError(t.error()));
    tokenizer = std::move(*t);
  }
  std::optional<text::ChatConfig> chat;
  if (o.chat) {
    auto c = text::ChatConfig::load(o.tokenizer);
    if (!c) return report(textError(c.error()));
    chat = std::move(*c);
  }
  auto prompts = readPrompts(o.prompts, p.vocab, adapterNames, tokenizer ? &*tokenizer : nullptr, chat ? &*chat : nullptr);
  if (!prompts) return report(prompts.error());
  if (!o.output.empty()) {
    // Refused now, not after the whole run: a folder that is not there.
    std::error_code ec;
    auto parent = std::filesystem::absolute(o.output, ec).parent_path();
    if (ec || !std::filesystem::is_directory(parent, ec))
      return report(makeError(ErrorKind::Io, {o.output}, "cannot write the output: no directory " + parent.string()));
  }

  // Weights: the checkpoint's, the rest from the generator (seed 0).
  auto weights = engine::ModelWeights::bind(plans->graph(), o.engine.weights);
  if (!weights) return report(weights.error());
  for (const Error& n : bindNotices((*weights)->graph(), (*weights)->params())) notice(n);
  for (const auto& [name, dir] : *adapterDirs)
    if (auto a = (*weights)->adapters().load(name, dir); !a) return report(a.error());
  std::vector<engine::Request> requests;
  for (const Prompt& prompt : *prompts) {
    engine::Request q{prompt.tokens, o.sampling, *eos, int32_t(o.maxNew), AdapterSet::kBase};
    if (!prompt.adapter.empty()) q.identity = *(*weights)->adapters().identity(prompt.adapter);
    if (auto c = engine::checkRequest(p, q); !c) {
      Error e = c.error();
      e.loc = {o.prompts, prompt.line, 1};
      return report(e);
    }
    requests.push_back(std::move(q));
  }

  std::vector<Generated> generated(requests.size());
  auto backend = rt::openBackend(o.engine.backend, o.engine.device);
  if (!backend) return report(backend.error());
  auto created = engine::Engine::create(plans.take(), backend.take(), weights.take(),
                                        {.allowOtherDevice = o.engine.allowOtherDevice,
                                         .prefixCache = !o.engine.noPrefixCache,
                                         .onToken = [&](const engine::TokenEvent& e) {
                                           generated[size_t(e.request)].tokens.push_back(e.token);
                                           generated[size_t(e.request)].done = e.finish != kv::Finish::None;
                                         }});
  if (!created) return report(created.error());
  engine::Engine& engine = **created;
  for (const engine::Request& q : requests)
    if (auto s = engine.submit(q); !s) return report(s.error());

  TextStream stream(generated, tokenizer ? &*tokenizer : nullptr);
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double lastProgress = 0;
  // By plan (kv::Plan: prefill, decode, mixed): the steps' device time,
  // where the backend measures it, and the first step's wall time.
  std::array<double, 3> device{};
  std::array<std::optional<double>, 3> first;
  int64_t firstTokens = 0;                       // the tokens those steps generated
  bool deviceTimed = true;
  double stepsSeconds = 0, hostSeconds = 0;  // the engine's steps, and their host part
  for (;;) {
    int64_t doneBefore = std::count_if(generated.begin(), generated.end(), [](const Generated& g) { return g.done; });
    auto ran = engine.step();
    if (!ran) return report(ran.error());
    if (!*ran) break;
    const engine::StepReport& step = **ran;
    stepsSeconds += step.seconds + step.hostSeconds;
    hostSeconds += step.hostSeconds;
    // A plan's first step: where the driver builds kernels on first use.
    const size_t plan = size_t(step.plan);
    if (!first[plan]) {
      first[plan] = step.seconds;
      firstTokens += step.tokens;
    }
    if (step.deviceSeconds) device[plan] += *step.deviceSeconds;
    else deviceTimed = false;
    if (auto s = stream.flush(); !s) return report(s.error());
    int64_t done = std::count_if(generated.begin(), generated.end(), [](const Generated& g) { return g.done; });
    if (done != doneBefore || elapsed() - lastProgress >= 5) {
      lastProgress = elapsed();
      progress("generate: " + std::to_string(done) + " of " + std::to_string(generated.size()) +
               " prompts done, " + std::to_string(engine.stats().generated) + " tokens, " +
               perSecond(engine.stats().generated, elapsed()) + " tokens/s");
    }
  }
  double seconds = elapsed();

  // With a tokenizer the text went to standard output; the report goes to
  // standard error.
  FILE* rep = tokenizer ? stderr : stdout;
  const kv::BatchStats& st = engine.stats();
  const int64_t requested = int64_t(generated.size());
  if (o.engine.noPrefixCache) std::fprintf(rep, "prefix cache: off\n");
  else
    std::fprintf(rep, "prefix cache: %lld of %lld prompts hit, %lld prefill tokens skipped\n", (long long)st.hits,
                (long long)requested, (long long)st.skippedTokens);
  std::fprintf(rep, "peak kv blocks in use: %d of %d\n", st.peakBlocks, int32_t(p.poolSlots / kv::kBlockSize));
  std::fprintf(rep, "generated %lld tokens for %lld prompts in %.3f s: %s tokens/s (%lld prefill, %lld decode and "
                    "%lld mixed steps)\n",
              (long long)st.generated, (long long)requested, seconds, perSecond(st.generated, seconds).c_str(),
              (long long)st.prefillSteps, (long long)st.decodeSteps, (long long)st.mixedSteps);
  if (!adapterNames.empty())
    std::fprintf(rep, "adapters: %zu, weights rebound %lld times\n", adapterNames.size(), (long long)engine.rebinds());
  if (st.decodeSteps > 0)
    std::fprintf(rep, "decode steps used %.2f of %lld rows on average\n", double(st.decodeRowsUsed) / double(st.decodeSteps),
                (long long)d.rows);
  if (st.mixedSteps > 0)
    std::fprintf(rep, "mixed steps used %.2f of %lld tokens on average\n",
                 double(st.mixedTokensUsed) / double(st.mixedSteps), (long long)engine.mixedShape()->tokens);
  if (deviceTimed)
    std::fprintf(rep, "device time: %.3f s of the %.3f s (prefill steps %.3f s, decode steps %.3f s, mixed steps %.3f s)\n",
                device[0] + device[1] + device[2], seconds, device[0], device[1], device[2]);
  std::fprintf(rep, "host time: %.3f s of the steps' %.3f s (%.1f%%): planning, maps and their uploads, reading "
                    "back, sampling\n",
               hostSeconds, stepsSeconds, stepsSeconds > 0 ? 100 * hostSeconds / stepsSeconds : 0.0);
  // Some drivers (lavapipe) compile a kernel when it first runs, not when
  // the plan is loaded: the first steps carry that, once.
  std::array<double, 3> once{first[0].value_or(0), first[1].value_or(0), first[2].value_or(0)};
  std::fprintf(rep, "first steps: prefill %.3f s, decode %.3f s, mixed %.3f s (a driver that builds kernels on first "
                    "use does it there); the rest: %s tokens/s\n",
               once[0], once[1], once[2],
               perSecond(st.generated - firstTokens, std::max(0.0, seconds - once[0] - once[1] - once[2])).c_str());
  if (!o.output.empty()) {
    std::ostringstream out;
    for (size_t i = 0; i < generated.size(); ++i) {
      out << "{\"index\": " << i;
      if (!(*prompts)[i].adapter.empty()) out << ", \"adapter\": \"" << (*prompts)[i].adapter << '"';
      out << ", \"tokens\": [";
      for (size_t k = 0; k < generated[i].tokens.size(); ++k) out << (k ? ", " : "") << generated[i].tokens[k];
      out << "]";
      if (tokenizer) out << ", \"text\": " << nlohmann::json(stream.text(i)).dump();
      out << "}\n";
    }
    if (auto w = writeFileAtomic(o.output, out.str()); !w) return report(w.error());
  }
  return 0;
}

}  // namespace poot

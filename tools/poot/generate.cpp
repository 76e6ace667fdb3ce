// poot generate: token generation over a paged prefill plan and a paged
// decode plan with the KV driver (lib/kv). Everything that can be checked
// before a step runs is checked first, so bad input writes nothing: the
// --adapter NAME=DIR words, the two plans must fit together (the paged slots
// tokens, pos, read and write, the output logits, the same capacity,
// vocabulary, pools and weights; the decode plan one token a row), the
// prompts file must parse and name only given adapters, every prompt must
// fit the capacity and the pool alone, every adapter must load and merge.
// Then both plans open a Session on the backend with the base weights bound
// (a checkpoint, else the generator's seed 0, as `poot run` draws them); the
// adapters' merged weights are kept on the host (oracle/lora.h AdapterSet,
// one weights identity each). The batcher (kv/batch.h) plans each step over
// one identity: a session whose bound identity is another first rebinds the
// weights either identity changes (from the adapter's merged set or the
// base), its maps become the step's tokens, pos, read and write, and the
// sampled tokens go back to it. The two sessions hold their own copies of
// the pools; before a step, the pools move from the session that wrote them
// last to the one that runs (a read back and an upload of every pool, at a
// phase change only). A progress line goes to stderr as prompts finish (and
// at least every 5 s); the summary to stdout; --output is written once every
// prompt is done, atomically.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "ir/io.h"
#include "kv/batch.h"
#include "oracle/lora.h"
#include "oracle/params.h"
#include "prompts.h"
#include "runtime/backends/backends.h"
#include "runtime/session.h"
#include "runtime/weights.h"
#include "sample.h"
#include "tool.h"

namespace poot {
namespace {

// What poot generate needs to know of a paged plan's source graph.
struct PagedShape {
  int64_t rows = 0, tokens = 0, capacity = 0, vocab = 0, poolSlots = 0;
  std::map<std::string, Type> states, weights;
};

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
  auto pos = need("pos", Storage::Slot, DType::I32, 0);
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
  if ((*read)->type.shape[0] != s.rows || (*write)->type.shape[0] != s.rows * s.tokens)
    return planError(plan, "its read and write maps do not match its tokens' " + std::to_string(s.rows) + " rows of " +
                               std::to_string(s.tokens));
  if (s.poolSlots % kv::kBlockSize != 0 || (*read)->hi + 1 != s.poolSlots)
    return planError(plan, "its pool of " + std::to_string(s.poolSlots) + " slots is not whole blocks of " +
                               std::to_string(kv::kBlockSize) + " named by both maps");
  for (ValueId id : g.params) {
    const Value& v = g.value(id);
    if (v.storage == Storage::Weight) s.weights[v.name] = v.type;
    else if (v.storage == Storage::State) s.states[v.name] = v.type;
    else if (v.name != "tokens" && v.name != "pos" && v.name != "read" && v.name != "write")
      return planError(plan, "its " + std::string(storageName(v.storage)) + " %" + v.name +
                                 " is not one poot generate binds (tokens, pos, read, write)");
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

Error kvError(const kv::KvError& e, Loc loc = {}) {
  bool range = e.kind == kv::KvErrorKind::Capacity || e.kind == kv::KvErrorKind::OutOfBlocks;
  return makeError(range ? ErrorKind::Range : ErrorKind::Bind, std::move(loc), e.message);
}

// The end-of-sequence ids: --eos, else --config, else the weights
// directory's generation_config.json, else its config.json, else none.
Expected<std::set<int32_t>> eosIds(const GenerateOptions& o) {
  if (!o.eos.empty()) return std::set<int32_t>(o.eos.begin(), o.eos.end());
  if (!o.config.empty()) return readEosIds(o.config);
  std::error_code ec;  // an unreadable folder reads as none
  if (!o.weights.empty() && std::filesystem::is_directory(o.weights, ec))
    for (const char* name : {"generation_config.json", "config.json"}) {
      auto path = std::filesystem::path(o.weights) / name;
      if (!std::filesystem::exists(path, ec)) continue;
      auto ids = readEosIds(path.string());
      if (!ids || !ids->empty()) return ids;
    }
  return std::set<int32_t>{};
}

// One plan, opened on the backend, the base weights bound.
Expected<std::unique_ptr<rt::Session>> openPlan(const GenerateOptions& o, rt::PlanFile plan,
                                                const std::vector<rt::WeightBytes>& weights) {
  auto backend = rt::openBackend(o.backend, o.device);
  if (!backend) return backend.error();
  auto session = rt::Session::create(std::move(plan), backend.take(), {o.allowOtherDevice});
  if (!session) return session.error();
  auto load = (*session)->bindWeights(weights);
  if (!load) return load.error();
  return session.take();
}

// A plan's session and the weights identity bound in it.
struct Bound {
  std::unique_ptr<rt::Session> session;
  uint64_t identity = AdapterSet::kBase;
};

// Makes `to` the identity bound in b: binds every weight that b's identity
// or `to` changes, with `to`'s value (its merged one, else the base one).
// Returns whether it rebound anything.
Expected<bool> bindIdentity(Bound& b, uint64_t to, const AdapterSet& adapters,
                            const std::vector<rt::WeightBytes>& base) {
  if (b.identity == to) return false;
  const std::map<std::string, Tensor>& was = *adapters.merged(b.identity);
  const std::map<std::string, Tensor>& now = *adapters.merged(to);
  std::vector<rt::WeightBytes> weights;
  for (rt::WeightBytes w : base) {
    if (auto it = now.find(w.name); it != now.end()) {
      w.data = it->second.bytes.data();
      w.bytes = int64_t(it->second.bytes.size());
    } else if (!was.count(w.name)) {
      continue;
    }
    weights.push_back(w);
  }
  auto load = b.session->bindWeights(weights);
  if (!load) return load.error();
  b.identity = to;
  return true;
}

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

Tensor i32(Shape shape, const std::vector<int32_t>& words) {
  Tensor t(Type{DType::I32, std::move(shape)});
  for (size_t i = 0; i < words.size(); ++i) t.set(int64_t(i), words[i]);
  return t;
}

std::string perSecond(int64_t n, double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", seconds > 0 ? double(n) / seconds : 0.0);
  return buf;
}

}  // namespace

// The generated text on standard output, prompt by prompt in order: the
// first unfinished prompt's text as its tokens come (whole UTF-8 characters
// only), then, once it finishes, the next one's (what it has so far at
// once), each prompt's text ended by a newline. Without a tokenizer, nothing.
class TextStream {
 public:
  TextStream(const kv::Batcher& b, const text::Tokenizer* t) : b_(b), t_(t) {}
  Status flush() {
    if (!t_) return ok();
    while (int64_t(prompts_.size()) < b_.requests()) prompts_.push_back({{}, text::Detokenizer(*t_, false), 0});
    for (; at_ < b_.requests(); ++at_) {
      Prompt& p = prompts_[size_t(at_)];
      const std::vector<int32_t>& out = b_.outputs()[size_t(at_)];
      for (; p.sent < out.size(); ++p.sent) {
        auto piece = p.detok.push(out[p.sent]);
        if (!piece) return makeError(ErrorKind::Range, {}, piece.error().message);
        emit(p, *piece);
      }
      if (!b_.finished(at_)) return ok();
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
  const kv::Batcher& b_;
  const text::Tokenizer* t_;
  int64_t at_ = 0;  // the prompt streaming now
  std::vector<Prompt> prompts_;
};

int runGenerate(const GenerateOptions& o) {
  auto adapterDirs = adapterArgs(o.adapters);
  if (!adapterDirs) return report(adapterDirs.error());
  std::set<std::string> adapterNames;
  for (const auto& [name, dir] : *adapterDirs) adapterNames.insert(name);
  auto trusted = rt::loadTrustedKeys(o.trust);
  if (!trusted) return report(trusted.error());
  auto prefillPlan = rt::loadPlanFile(o.prefillPlan, *trusted);
  if (!prefillPlan) return report(prefillPlan.error());
  auto decodePlan = rt::loadPlanFile(o.decodePlan, *trusted);
  if (!decodePlan) return report(decodePlan.error());
  auto p = pagedShape(prefillPlan->source, o.prefillPlan);
  if (!p) return report(p.error());
  auto d = pagedShape(decodePlan->source, o.decodePlan);
  if (!d) return report(d.error());
  if (auto f = fitTogether(*p, *d, o.decodePlan); !f) return report(f.error());
  auto eos = eosIds(o);
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
  auto prompts = readPrompts(o.prompts, p->vocab, adapterNames, tokenizer ? &*tokenizer : nullptr, chat ? &*chat : nullptr);
  if (!prompts) return report(prompts.error());
  if (!o.output.empty()) {
    // Refused now, not after the whole run: a folder that is not there.
    std::error_code ec;
    auto parent = std::filesystem::absolute(o.output, ec).parent_path();
    if (ec || !std::filesystem::is_directory(parent, ec))
      return report(makeError(ErrorKind::Io, {o.output}, "cannot write the output: no directory " + parent.string()));
  }

  kv::KvCache cache({.numBlocks = int32_t(p->poolSlots / kv::kBlockSize),
                     .capacity = int32_t(p->capacity),
                     .prefixCache = !o.noPrefixCache});
  kv::Batcher batcher(cache, {.prefillRows = int32_t(p->rows),
                              .prefillTokens = int32_t(p->tokens),
                              .decodeRows = int32_t(d->rows),
                              .maxNew = int32_t(o.maxNew),
                              .eos = *eos});

  // Weights: the checkpoint's, the rest from the generator (seed 0).
  const Graph source = prefillPlan->source;  // the sessions take the plans
  auto params = bindParamArgs(source, ParamArgs{{}, {}, o.weights, 0});
  if (!params) return report(params.error());
  // Only the weights are bound from here (the pools start as zeros, the
  // maps are the driver's), so only they count in the notice.
  std::erase_if(params->generated, [&](ValueId id) { return source.value(id).storage != Storage::Weight; });
  for (const Error& n : bindNotices(source, *params)) notice(n);
  AdapterSet adapters(source, *params);
  for (const auto& [name, dir] : *adapterDirs)
    if (auto a = adapters.load(name, dir); !a) return report(a.error());
  for (const Prompt& prompt : *prompts) {
    uint64_t identity = prompt.adapter.empty() ? AdapterSet::kBase : *adapters.identity(prompt.adapter);
    if (auto s = batcher.submit(prompt.tokens, identity); !s) return report(kvError(s.error(), {o.prompts, prompt.line, 1}));
  }
  std::vector<rt::WeightBytes> baseWeights = weightBytes(source, *params);
  auto prefillSession = openPlan(o, prefillPlan.take(), baseWeights);
  if (!prefillSession) return report(prefillSession.error());
  auto decodeSession = openPlan(o, decodePlan.take(), baseWeights);
  if (!decodeSession) return report(decodeSession.error());
  Bound prefill{prefillSession.take()}, decode{decodeSession.take()};
  int64_t rebinds = 0;

  TextStream stream(batcher, tokenizer ? &*tokenizer : nullptr);
  std::vector<Sampler> samplers;
  for (int64_t i = 0; i < batcher.requests(); ++i) samplers.emplace_back(SampleOptions{o.temperature, o.topP, o.seed}, i);
  rt::Session* owner = prefill.session.get();  // the session whose pools are current (both start as zeros)
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  double lastProgress = 0;
  std::vector<float> logits;                     // the sampled rows' logits, kept across steps
  double devicePrefill = 0, deviceDecode = 0;  // the steps' device time, where the backend measures it
  std::optional<double> firstPrefill, firstDecode;  // each plan's first step, wall time
  int64_t firstTokens = 0;                       // the tokens those steps sampled
  bool deviceTimed = true;
  for (;;) {
    auto planned = batcher.next();
    if (!planned) return report(kvError(planned.error()));
    if (!*planned) break;
    const kv::PlannedStep& step = **planned;
    Bound& b = step.prefill ? prefill : decode;
    auto rebound = bindIdentity(b, step.identity, adapters, baseWeights);
    if (!rebound) return report(rebound.error());
    rebinds += *rebound;
    rt::Session& s = *b.session;
    if (owner != &s) {
      for (const auto& [name, t] : p->states) {
        auto pool = owner->readState(name);
        if (!pool) return report(pool.error());
        if (auto set = s.setState(name, *pool); !set) return report(set.error());
      }
      owner = &s;
    }
    const kv::StepMaps& m = step.maps;
    std::map<std::string, Tensor> inputs;
    int32_t pos = 0;
    for (int32_t r = 0; r < m.rows; ++r)
      if (m.seqs[r] != kv::kPadding) pos = m.pos[r];
    inputs["tokens"] = i32({m.rows, m.tokens}, m.tokenIds);
    inputs["pos"] = i32({}, {pos});
    inputs["read"] = i32({m.rows, m.capacity}, m.read);
    inputs["write"] = i32({m.rows * m.tokens}, m.write);
    double stepStart = elapsed();
    auto result = s.step(inputs, false);  // the logits stay on the device: one row a sequence is read
    if (!result) return report(result.error());
    // A plan's first step: where the driver builds kernels on first use.
    std::optional<double>& first = step.prefill ? firstPrefill : firstDecode;
    bool firstOfPlan = !first;
    if (firstOfPlan) first = elapsed() - stepStart;
    if (result->deviceSeconds) (step.prefill ? devicePrefill : deviceDecode) += *result->deviceSeconds;
    else deviceTimed = false;
    // The logits of the positions sampled (f32: pagedShape checked it), into
    // a buffer kept across steps: a decode step's rows in one read (one
    // position a row, all of them wanted), a prefill's one position a row on
    // its own (not the 2.1 GB of 32 rows of 128 tokens).
    const size_t vocab = size_t(p->vocab);
    std::vector<int32_t> sampled(m.rows, -1);
    logits.resize(m.tokens == 1 ? size_t(m.rows) * vocab : vocab);
    if (m.tokens == 1)
      if (auto read = s.readOutput("logits", 0, int64_t(logits.size()), logits.data()); !read) return report(read.error());
    for (int32_t r = 0; r < m.rows; ++r) {
      if (step.sampleAt[r] < 0) continue;
      size_t offset = size_t(r) * vocab;
      if (m.tokens > 1) {
        int64_t at = (int64_t(r) * m.tokens + step.sampleAt[r]) * p->vocab;
        if (auto read = s.readOutput("logits", at, p->vocab, logits.data()); !read) return report(read.error());
        offset = 0;
      }
      sampled[r] = samplers[step.requests[r]].next(std::span<const float>(logits).subspan(offset, vocab));
    }
    int64_t finishedBefore = batcher.finished(), generatedBefore = batcher.stats().generated;
    if (auto c = batcher.complete(step, sampled); !c) return report(kvError(c.error()));
    if (firstOfPlan) firstTokens += batcher.stats().generated - generatedBefore;
    if (auto s = stream.flush(); !s) return report(s.error());
    if (batcher.finished() != finishedBefore || elapsed() - lastProgress >= 5) {
      lastProgress = elapsed();
      progress("generate: " + std::to_string(batcher.finished()) + " of " + std::to_string(batcher.requests()) +
               " prompts done, " + std::to_string(batcher.stats().generated) + " tokens, " +
               perSecond(batcher.stats().generated, elapsed()) + " tokens/s");
    }
  }
  double seconds = elapsed();

  // With a tokenizer the text went to standard output; the report goes to
  // standard error.
  FILE* rep = tokenizer ? stderr : stdout;
  const kv::BatchStats& st = batcher.stats();
  if (o.noPrefixCache) std::fprintf(rep, "prefix cache: off\n");
  else
    std::fprintf(rep, "prefix cache: %lld of %lld prompts hit, %lld prefill tokens skipped\n", (long long)st.hits,
                (long long)batcher.requests(), (long long)st.skippedTokens);
  std::fprintf(rep, "peak kv blocks in use: %d of %d\n", st.peakBlocks, cache.pool().size());
  std::fprintf(rep, "generated %lld tokens for %lld prompts in %.3f s: %s tokens/s (%lld prefill and %lld decode steps)\n",
              (long long)st.generated, (long long)batcher.requests(), seconds, perSecond(st.generated, seconds).c_str(),
              (long long)st.prefillSteps, (long long)st.decodeSteps);
  if (!adapterNames.empty())
    std::fprintf(rep, "adapters: %zu, weights rebound %lld times\n", adapterNames.size(), (long long)rebinds);
  if (st.decodeSteps > 0)
    std::fprintf(rep, "decode steps used %.2f of %lld rows on average\n", double(st.decodeRowsUsed) / double(st.decodeSteps),
                (long long)d->rows);
  if (deviceTimed)
    std::fprintf(rep, "device time: %.3f s of the %.3f s (prefill steps %.3f s, decode steps %.3f s)\n",
                devicePrefill + deviceDecode, seconds, devicePrefill, deviceDecode);
  // Some drivers (lavapipe) compile a kernel when it first runs, not when
  // the plan is loaded: the first steps carry that, once.
  double prefillFirst = firstPrefill.value_or(0), decodeFirst = firstDecode.value_or(0);
  std::fprintf(rep, "first steps: prefill %.3f s, decode %.3f s (a driver that builds kernels on first use does it "
                    "there); the rest: %s tokens/s\n",
               prefillFirst, decodeFirst,
               perSecond(st.generated - firstTokens, std::max(0.0, seconds - prefillFirst - decodeFirst)).c_str());
  if (!o.output.empty()) {
    std::ostringstream out;
    for (size_t i = 0; i < batcher.outputs().size(); ++i) {
      out << "{\"index\": " << i;
      if (!(*prompts)[i].adapter.empty()) out << ", \"adapter\": \"" << (*prompts)[i].adapter << '"';
      out << ", \"tokens\": [";
      for (size_t k = 0; k < batcher.outputs()[i].size(); ++k) out << (k ? ", " : "") << batcher.outputs()[i][k];
      out << "]";
      if (tokenizer) out << ", \"text\": " << nlohmann::json(stream.text(i)).dump();
      out << "}\n";
    }
    if (auto w = writeFileAtomic(o.output, out.str()); !w) return report(w.error());
  }
  return 0;
}

}  // namespace poot

// Request bodies are parsed by nlohmann/json without exceptions (a body
// that is not JSON is one refusal); a field found wanting throws a Refusal
// inside this file, which parseRequest turns into its answer.
#include "serve_api.h"

#include <algorithm>

#include "kv/pool.h"

namespace poot {
namespace {

using json = nlohmann::json;

struct Refusal {
  ApiError error;
};

[[noreturn]] void refuse(const std::string& param, const std::string& message, const std::string& code = {}) {
  throw Refusal{{400, message, param, code}};
}

// The fields OpenAI defines for each endpoint that poot takes, and top_k,
// min_p and repetition_penalty as vLLM takes them.
const std::set<std::string>& knownFields(Endpoint e) {
  static const std::set<std::string> chat = {
      "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop", "n", "stream",
      "stream_options", "user", "frequency_penalty", "presence_penalty", "logprobs", "top_logprobs", "logit_bias", "top_k", "min_p", "repetition_penalty"};
  static const std::set<std::string> completion = {
      "model", "prompt", "max_tokens", "temperature", "top_p", "seed", "stop", "n", "stream",
      "stream_options", "user", "frequency_penalty", "presence_penalty", "logprobs", "logit_bias", "top_k", "min_p", "repetition_penalty"};
  return e == Endpoint::Chat ? chat : completion;
}

// The member `name`, or null when it is absent.
const json& field(const json& body, const std::string& name) {
  static const json null;
  auto it = body.find(name);
  return it == body.end() ? null : *it;
}

std::optional<double> number(const json& body, const std::string& name, double lo, double hi, bool aboveLo = false) {
  const json& v = field(body, name);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) refuse(name, name + " is a number");
  double x = v.get<double>();
  if (!(aboveLo ? x > lo : x >= lo) || !(x <= hi))
    refuse(name, name + " is " + v.dump() + ", outside " + (aboveLo ? "(" : "[") + json(lo).dump() + ", " +
                     json(hi).dump() + "]");
  return x;
}

// An integer in [lo, hi] (a JSON integer: 2.0 is refused).
std::optional<int64_t> integer(const json& body, const std::string& name, int64_t lo, int64_t hi) {
  const json& v = field(body, name);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number_integer()) refuse(name, name + " is an integer");
  bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(hi) && int64_t(v.get<uint64_t>()) >= lo
                                      : v.get<int64_t>() >= lo && v.get<int64_t>() <= hi;
  if (!fits)
    refuse(name, name + " is " + v.dump() + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v.is_number_unsigned() ? int64_t(v.get<uint64_t>()) : v.get<int64_t>();
}

std::optional<bool> boolean(const json& body, const std::string& name) {
  const json& v = field(body, name);
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean()) refuse(name, name + " is true or false");
  return v.get<bool>();
}

// Fields poot takes only at the value that changes nothing.
void neutral(const json& body) {
  const json& bias = field(body, "logit_bias");
  if (!bias.is_null() && !(bias.is_object() && bias.empty()))
    refuse("logit_bias", "logit_bias is not supported by poot serve (empty or absent only)");
}

// How many alternatives each token's logprobs list; -1: no logprobs.
// Chat: logprobs true or false, top_logprobs 0..20 with logprobs true;
// completions: logprobs 0..5.
int32_t logprobCount(Endpoint endpoint, const json& body) {
  if (endpoint == Endpoint::Completion) return int32_t(integer(body, "logprobs", 0, 5).value_or(-1));
  bool on = boolean(body, "logprobs").value_or(false);
  std::optional<int64_t> top = integer(body, "top_logprobs", 0, 20);
  if (top && !on) refuse("top_logprobs", "top_logprobs is only allowed when logprobs is true");
  return on ? int32_t(top.value_or(0)) : -1;
}

std::vector<std::string> stops(const json& body) {
  const json& v = field(body, "stop");
  if (v.is_null()) return {};
  std::vector<std::string> out;
  if (v.is_string()) out.push_back(v.get<std::string>());
  else if (v.is_array() && v.size() <= 4 && std::all_of(v.begin(), v.end(), [](const json& s) { return s.is_string(); }))
    for (const json& s : v) out.push_back(s.get<std::string>());
  else refuse("stop", "stop is a string or a list of up to 4 strings");
  if (std::any_of(out.begin(), out.end(), [](const std::string& s) { return s.empty(); }))
    refuse("stop", "a stop string is not empty");
  return out;
}

// The conversation as the chat template takes it: each message's role and
// content, both strings.
std::string conversation(const json& body) {
  const json& messages = field(body, "messages");
  if (!messages.is_array() || messages.empty()) refuse("messages", "messages is a non-empty list of messages");
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) refuse(at, at + " is an object with a role and a content");
    for (const auto& [key, value] : m.items())
      if (key != "role" && key != "content") refuse(at + "." + key, at + "." + key + " is not supported by poot serve");
    if (!field(m, "role").is_string()) refuse(at + ".role", at + ".role is a string");
    if (!field(m, "content").is_string())
      refuse(at + ".content", at + ".content is a string (content parts are not supported)");
    out.push_back({{"role", m["role"]}, {"content", m["content"]}});
  }
  return out.dump();
}

// A prompt given as token ids: used as they are (no special token added),
// each an integer in the model's vocabulary.
std::vector<int32_t> tokenPrompt(const json& prompt, int64_t vocab) {
  if (prompt.empty()) refuse("prompt", "the prompt is empty (no tokens)");
  std::vector<int32_t> ids;
  for (size_t i = 0; i < prompt.size(); ++i) {
    const json& v = prompt[i];
    std::string at = "prompt[" + std::to_string(i) + "]";
    if (!v.is_number_integer())
      refuse("prompt", at + " is " + v.dump() + ": a prompt's list holds token ids (integers; lists of prompts are "
                                                "not supported)");
    bool in = v.is_number_unsigned() ? v.get<uint64_t>() < uint64_t(vocab)
                                     : v.get<int64_t>() >= 0 && v.get<int64_t>() < vocab;
    if (!in)
      refuse("prompt", at + " is " + v.dump() + ", outside the model's vocabulary [0, " + std::to_string(vocab) + ")");
    ids.push_back(int32_t(v.get<int64_t>()));
  }
  return ids;
}

// The prompt's ids: the conversation through the template, the prompt
// string, or the prompt's token ids.
std::vector<int32_t> promptIds(Endpoint endpoint, const json& body, const ServedModel& model) {
  std::string text;
  const std::string param = endpoint == Endpoint::Chat ? "messages" : "prompt";
  if (endpoint == Endpoint::Chat) {
    if (!model.chat) throw Refusal{{400, "chat completions are not served: " + model.noChat, "messages", {}}};
    std::string messages = conversation(body);
    auto rendered = model.chat->apply(messages, true);
    if (!rendered) refuse(param, "the chat template refuses the conversation: " + rendered.error().message);
    text = std::move(*rendered);
  } else {
    const json& prompt = field(body, "prompt");
    if (prompt.is_array()) return tokenPrompt(prompt, model.shape.vocab);
    if (!prompt.is_string())
      refuse(param, std::string("prompt is a string or a list of token ids, not ") + prompt.type_name());
    text = prompt.get<std::string>();
  }
  auto ids = model.tokenizer->encode(text, endpoint == Endpoint::Completion);
  if (!ids) refuse(param, ids.error().message);
  if (ids->empty()) refuse(param, "the prompt is empty (no tokens)");
  for (int32_t id : *ids)
    if (id >= model.shape.vocab)
      refuse(param, "the tokenizer gives token id " + std::to_string(id) + ", outside the model's vocabulary [0, " +
                        std::to_string(model.shape.vocab) + ")");
  return std::move(*ids);
}

ApiRequest parse(Endpoint endpoint, std::string_view body, const ServedModel& model) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) refuse({}, "the body is not JSON");
  if (!j.is_object()) refuse({}, "the body is a JSON object");
  for (const auto& [key, value] : j.items())
    if (!knownFields(endpoint).count(key)) refuse(key, "unrecognized request argument: " + key);
  const json& name = field(j, "model");
  if (!name.is_string()) refuse("model", "model is a string, the served model's name ('" + model.name + "')");
  if (name != model.name)
    throw Refusal{{404, "the model '" + name.get<std::string>() + "' does not exist; this server serves '" + model.name + "'",
                   "model", "model_not_found"}};
  neutral(j);
  if (auto n = integer(j, "n", INT64_MIN, INT64_MAX); n && *n != 1)
    refuse("n", "n is " + std::to_string(*n) + ": poot serve makes one choice a request (n = 1)");

  ApiRequest r;
  r.endpoint = endpoint;
  r.stream = boolean(j, "stream").value_or(false);
  const json& options = field(j, "stream_options");
  if (!options.is_null()) {
    if (!r.stream) refuse("stream_options", "stream_options is only allowed when stream is true");
    if (!options.is_object()) refuse("stream_options", "stream_options is an object");
    for (const auto& [key, value] : options.items())
      if (key != "include_usage") refuse("stream_options." + key, "unrecognized stream option: " + key);
    r.includeUsage = boolean(options, "include_usage").value_or(false);
  }
  if (const json& user = field(j, "user"); !user.is_null() && !user.is_string()) refuse("user", "user is a string");
  r.stop = stops(j);
  r.engine.sampling.temperature = number(j, "temperature", 0, 2).value_or(1);
  r.engine.sampling.topP = number(j, "top_p", 0, 1, /*aboveLo=*/true).value_or(1);
  // vLLM's top_k of -1 is every token, as 0 is.
  r.engine.sampling.topK = int32_t(std::max<int64_t>(0, integer(j, "top_k", -1, int64_t(1) << 30).value_or(0)));
  r.engine.sampling.minP = number(j, "min_p", 0, 1).value_or(0);
  r.engine.sampling.frequencyPenalty = number(j, "frequency_penalty", -2, 2).value_or(0);
  r.engine.sampling.presencePenalty = number(j, "presence_penalty", -2, 2).value_or(0);
  r.engine.sampling.repetitionPenalty = number(j, "repetition_penalty", 0, 1e6, /*aboveLo=*/true).value_or(1);
  r.engine.sampling.seed = uint64_t(integer(j, "seed", INT64_MIN, INT64_MAX).value_or(0));
  r.engine.sampling.stream = 0;  // a seed gives one answer, whichever request asks
  r.engine.sampling.logprobs = logprobCount(endpoint, j);
  std::string maxName = "max_tokens";
  std::optional<int64_t> maxTokens = integer(j, "max_tokens", 1, int64_t(1) << 30);
  if (endpoint == Endpoint::Chat) {
    std::optional<int64_t> completionTokens = integer(j, "max_completion_tokens", 1, int64_t(1) << 30);
    if (maxTokens && completionTokens)
      refuse("max_completion_tokens", "max_tokens and max_completion_tokens are the same limit: give one");
    if (completionTokens) {
      maxTokens = completionTokens;
      maxName = "max_completion_tokens";
    }
  }

  r.engine.prompt = promptIds(endpoint, j, model);
  r.engine.stop = model.eos;
  const std::string promptParam = endpoint == Endpoint::Chat ? "messages" : "prompt";
  int64_t length = int64_t(r.engine.prompt.size());
  // Without a limit: as many tokens as the capacity and the pool hold.
  int64_t room = std::min(model.shape.capacity, model.shape.poolSlots / kv::kBlockSize * kv::kBlockSize) - length + 1;
  if (!maxTokens && room < 1)
    refuse(promptParam,
           "the prompt's " + std::to_string(length) + " tokens leave no room in the model's context of " +
               std::to_string(room + length - 1) + " tokens",
           "context_length_exceeded");
  r.engine.maxNew = int32_t(maxTokens.value_or(room));
  if (auto c = engine::checkRequest(model.shape, r.engine); !c)
    refuse(maxTokens ? maxName : promptParam, c.error().message, "context_length_exceeded");
  return r;
}

}  // namespace

std::string ApiError::body() const {
  json e = {{"message", message},
            {"type", type},
            {"param", param.empty() ? json() : json(param)},
            {"code", code.empty() ? json() : json(code)}};
  return json{{"error", e}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::variant<ApiRequest, ApiError> parseRequest(Endpoint endpoint, std::string_view body, const ServedModel& model) {
  try {
    return parse(endpoint, body, model);
  } catch (const Refusal& r) {
    return r.error;
  }
}

text::TextResult<std::string> TextCutter::push(int32_t token) {
  if (stopped_) return std::string();
  auto piece = detok_.push(token);
  if (!piece) return piece.error();
  held_ += *piece;
  return cut();
}

std::string TextCutter::finish() {
  if (stopped_) return {};
  held_ += detok_.finish();
  std::string out = cut();
  out += held_;  // nothing can complete a stop string now
  held_.clear();
  return out;
}

std::string TextCutter::cut() {
  size_t at = std::string::npos;
  for (const std::string& s : stops_) at = std::min(at, held_.find(s));
  if (at != std::string::npos) {
    std::string out = held_.substr(0, at);
    held_.clear();
    stopped_ = true;
    return out;
  }
  // Held back: the longest end of the text that begins a stop string (it
  // begins where the stop string does, on a character's first byte).
  size_t keep = 0;
  for (const std::string& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

namespace {

json head(const Answer& a, bool chunk) {
  std::string object = a.endpoint == Endpoint::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                     : "text_completion";
  return {{"id", a.id}, {"object", object}, {"created", a.created}, {"model", a.model}};
}

json usage(int64_t promptTokens, int64_t completionTokens) {
  return {{"prompt_tokens", promptTokens},
          {"completion_tokens", completionTokens},
          {"total_tokens", promptTokens + completionTokens}};
}

}  // namespace

json completionJson(const Answer& a, const std::string& text, const std::string& finish, int64_t promptTokens,
                    int64_t completionTokens, const json& logprobs) {
  json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", logprobs}};
  if (a.endpoint == Endpoint::Chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  json out = head(a, false);
  out["choices"] = json::array({choice});
  out["usage"] = usage(promptTokens, completionTokens);
  return out;
}

json chunkJson(const Answer& a, const std::string& text, bool first, const std::string& finish, bool includeUsage,
               const json& logprobs) {
  json choice = {{"index", 0}, {"finish_reason", finish.empty() ? json() : json(finish)}, {"logprobs", logprobs}};
  if (a.endpoint == Endpoint::Chat) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (finish.empty()) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  json out = head(a, true);
  out["choices"] = json::array({choice});
  if (includeUsage) out["usage"] = nullptr;
  return out;
}

json usageChunkJson(const Answer& a, int64_t promptTokens, int64_t completionTokens) {
  json out = head(a, true);
  out["choices"] = json::array();
  out["usage"] = usage(promptTokens, completionTokens);
  return out;
}

json logprobsJson(Endpoint endpoint, const text::Tokenizer& t, std::span<const int32_t> tokens,
                  std::span<const TokenLogprobs> logprobs, int64_t& textOffset) {
  // A token's bytes as decode gives them, special tokens included (an id
  // the tokenizer cannot decode has none), and its text: the bytes, or
  // where they are not UTF-8 (part of a character) "bytes:\xNN..." as
  // OpenAI writes them.
  auto bytes = [&](int32_t id) {
    auto b = t.tokenBytes(id, false);
    return b ? *b : std::string();
  };
  auto tokenText = [](const std::string& b) {
    if (text::invalidUtf8(b) == std::string_view::npos) return b;
    std::string out = "bytes:";
    for (unsigned char c : b) out += "\\x" + std::string(1, "0123456789abcdef"[c >> 4]) + "0123456789abcdef"[c & 15];
    return out;
  };
  auto byteList = [](const std::string& b) {
    json out = json::array();
    for (unsigned char c : b) out.push_back(int(c));
    return out;
  };
  if (endpoint == Endpoint::Chat) {
    json content = json::array();
    for (size_t i = 0; i < tokens.size(); ++i) {
      json top = json::array();
      for (const auto& [id, lp] : logprobs[i].top)
        top.push_back({{"token", tokenText(bytes(id))}, {"logprob", lp}, {"bytes", byteList(bytes(id))}});
      std::string b = bytes(tokens[i]);
      content.push_back(
          {{"token", tokenText(b)}, {"logprob", logprobs[i].logprob}, {"bytes", byteList(b)}, {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string b = bytes(tokens[i]);
    json top = json::object();
    for (const auto& [id, lp] : logprobs[i].top) top[tokenText(bytes(id))] = lp;
    out["tokens"].push_back(tokenText(b));
    out["token_logprobs"].push_back(logprobs[i].logprob);
    out["top_logprobs"].push_back(top);
    out["text_offset"].push_back(textOffset);
    textOffset += int64_t(b.size());
  }
  return out;
}

json modelsJson(const std::string& model, int64_t created) {
  return {{"object", "list"},
          {"data", json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "poot"}}})}};
}

}  // namespace poot

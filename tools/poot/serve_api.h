// The OpenAI API as `poot serve` speaks it: a request body checked field by
// field and turned into an engine request (a refusal is an ApiError naming
// the field, as OpenAI's error bodies do), the text a generation's tokens
// make with its stop strings cut out, and the JSON of the answers.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace poot {

// An answer's error: the HTTP status and OpenAI's error object.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // the field at fault; empty: none (null)
  std::string code;   // empty: none (null)
  std::string type = "invalid_request_error";
  // {"error": {"message", "type", "param", "code"}}
  std::string body() const;
};

enum class Endpoint { Chat, Completion };  // /v1/chat/completions, /v1/completions

// What requests are checked against.
struct ServedModel {
  std::string name;                  // the "model" requests must name
  const text::Tokenizer* tokenizer;  // never null
  const text::ChatConfig* chat;      // null: chat completions are refused with noChat
  std::string noChat;                // why the model has no chat template
  engine::PagedShape shape;          // what the plans can serve
  std::set<int32_t> eos;             // the ids that end a generation
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::Chat;
  engine::Request engine;          // the prompt's ids, sampling, max tokens, end ids
  std::vector<std::string> stop;   // strings that end the text (left out of it)
  bool stream = false;
  bool includeUsage = false;       // stream_options.include_usage: a last chunk with the usage
};

// The largest body a request may have; a larger one is refused (413).
constexpr size_t kMaxBody = size_t(4) << 20;

// A body as the endpoint takes it: a JSON object of the fields OpenAI
// defines for it that poot implements (model, messages or prompt,
// max_tokens (chat: or max_completion_tokens), temperature (default 1),
// top_p, seed, stop, n (1 only), stream, stream_options, user, logprobs
// (chat: true or false, with top_logprobs 0..20; completions: 0..5); the
// penalties and logit_bias at their neutral values only); any
// other field, a wrong type or a value out of range is refused naming it.
// The conversation goes through the chat template with
// add_generation_prompt and is encoded without adding special tokens; a
// prompt string is encoded with them, a prompt of token ids taken as it is. Without max_tokens a request may generate
// up to the plans' capacity.
std::variant<ApiRequest, ApiError> parseRequest(Endpoint endpoint, std::string_view body, const ServedModel& model);

// A generation's text as its tokens come: decoded without special tokens,
// whole UTF-8 characters only, held back while it could be the start of a
// stop string, and ended (stopped()) at the first stop string, which is
// left out.
class TextCutter {
 public:
  TextCutter(const text::Tokenizer& t, std::vector<std::string> stops) : detok_(t, true), stops_(std::move(stops)) {}
  // The text that can go out now.
  text::TextResult<std::string> push(int32_t token);
  // The rest, once the generation has ended.
  std::string finish();
  bool stopped() const { return stopped_; }

 private:
  std::string cut();
  text::Detokenizer detok_;
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

// The JSON of the answers. `id` and `created` are the completion's, the
// same on each of a stream's chunks.
struct Answer {
  Endpoint endpoint;
  std::string id;
  int64_t created;
  std::string model;
};
// A whole completion: the text, why it ended ("stop" or "length") and the usage.
nlohmann::json completionJson(const Answer& a, const std::string& text, const std::string& finish, int64_t promptTokens,
                              int64_t completionTokens, const nlohmann::json& logprobs);
// A stream's chunk: text (a chat's first chunk carries the role too), or
// the end (finish not empty, no text); with includeUsage, "usage": null.
nlohmann::json chunkJson(const Answer& a, const std::string& text, bool first, const std::string& finish,
                         bool includeUsage, const nlohmann::json& logprobs);
// The "logprobs" of a choice (null: none asked) for some of its tokens,
// each token's text the bytes of that token alone: chat's {"content":
// [{"token", "logprob", "bytes", "top_logprobs"}]}, or completions'
// {"tokens", "token_logprobs", "top_logprobs" (token: logprob), "text_offset"},
// each offset the bytes of the tokens before it, from `textOffset` on,
// which ends past these tokens' bytes.
nlohmann::json logprobsJson(Endpoint endpoint, const text::Tokenizer& t, std::span<const int32_t> tokens,
                            std::span<const TokenLogprobs> logprobs, int64_t& textOffset);
// A stream's usage chunk (stream_options.include_usage): no choices.
nlohmann::json usageChunkJson(const Answer& a, int64_t promptTokens, int64_t completionTokens);
// /v1/models.
nlohmann::json modelsJson(const std::string& model, int64_t created);

}  // namespace poot

// ChatConfig: tokenizer_config.json's chat template and special tokens.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"

namespace poot::text {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

TextResult<std::string> readText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return TextError{TextErrorKind::Io, "cannot read " + p.string()};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The template the config names: a string, or the "default" of a list of {name, template}.
TextResult<std::string> pickTemplate(const json& t, const std::string& where) {
  if (t.is_string()) return t.get<std::string>();
  if (!t.is_array()) return TextError{TextErrorKind::Format, where + ": chat_template is neither a string nor a list"};
  for (const json& e : t) {
    if (!e.is_object() || !e.contains("name") || !e.contains("template") || !e["template"].is_string())
      return TextError{TextErrorKind::Format, where + ": a chat_template entry is not {\"name\", \"template\"}"};
    if (e["name"] == "default") return e["template"].get<std::string>();
  }
  return TextError{TextErrorKind::Format, where + ": chat_template lists no template named \"default\""};
}

}  // namespace

TextResult<ChatConfig> ChatConfig::load(const std::string& path) {
  fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  fs::path file = dir / "tokenizer_config.json";
  std::string where = file.string();
  auto text = readText(file);
  if (!text) return text.error();
  json cfg;
  try {
    cfg = json::parse(*text);
  } catch (const json::parse_error& e) {
    return TextError{TextErrorKind::Format, where + ": not JSON (" + e.what() + ")"};
  }
  if (!cfg.is_object()) return TextError{TextErrorKind::Format, where + ": not a JSON object"};
  ChatConfig c;
  std::string source;
  if (auto t = cfg.find("chat_template"); t != cfg.end() && !t->is_null()) {
    auto picked = pickTemplate(*t, where);
    if (!picked) return picked.error();
    source = *picked;
  } else if (fs::exists(dir / "chat_template.jinja")) {
    auto jinja = readText(dir / "chat_template.jinja");
    if (!jinja) return jinja.error();
    source = *jinja;
  } else {
    return TextError{TextErrorKind::Format, where + ": the model has no chat template (no chat_template, no chat_template.jinja)"};
  }
  auto parsed = ChatTemplate::parse(source);
  if (!parsed) {
    TextError e = parsed.error();
    e.message = where + ": chat_template: " + e.message;
    return e;
  }
  c.template_ = std::move(*parsed);
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    auto it = cfg.find(name);
    if (it == cfg.end() || it->is_null()) continue;
    const json* content = it->is_object() && it->contains("content") ? &(*it)["content"] : &*it;
    if (!content->is_string())
      return TextError{TextErrorKind::Format, where + ": " + name + " is neither a string nor {\"content\": string}"};
    c.tokens_.emplace_back(name, content->get<std::string>());
  }
  return c;
}

TextResult<std::string> ChatConfig::apply(std::string_view messagesJson, bool addGenerationPrompt, const RenderLimits& limits) const {
  nlohmann::ordered_json vars;
  try {
    vars["messages"] = nlohmann::ordered_json::parse(messagesJson);
  } catch (const nlohmann::json::parse_error& e) {
    return TextError{TextErrorKind::BadInput, std::string("the messages are not JSON (") + e.what() + ")"};
  }
  const auto& messages = vars["messages"];
  if (!messages.is_array() || messages.empty())
    return TextError{TextErrorKind::BadInput, "the messages are not a non-empty JSON array of message objects"};
  for (const auto& m : messages)
    if (!m.is_object()) return TextError{TextErrorKind::BadInput, "a message is not a JSON object"};
  vars["add_generation_prompt"] = addGenerationPrompt;
  vars["tools"] = nullptr;
  vars["documents"] = nullptr;
  for (const auto& [name, token] : tokens_) vars[name] = token;
  return template_.render(vars.dump(), limits);
}

}  // namespace poot::text

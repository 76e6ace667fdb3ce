// The prompts file is read whole and split by hand (from_chars, so "1e3",
// "+4" or "0x10" are refused rather than half read); the config with
// nlohmann/json, whose exceptions become Format errors naming the file.
#include "prompts.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/io.h"

namespace poot {

Expected<std::vector<Prompt>> readPrompts(const std::string& path, int64_t vocab,
                                          const std::set<std::string>& adapters, const text::Tokenizer* tokenizer,
                                          const text::ChatConfig* chat) {
  auto read = readFile(path);  // "-": standard input
  if (!read) return makeError(ErrorKind::Io, {path}, "cannot read the prompts file (" + read.error().message + ")");
  const std::string& text = *read;
  std::vector<Prompt> prompts;
  size_t at = 0;
  for (int line = 1; at < text.size(); ++line) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view row(text.data() + at, end - at);
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    Prompt p{{}, line, {}};
    // @NAME: the adapter the line runs on; an error where none is given.
    auto takeAdapter = [&](std::string_view word, Loc loc) -> Status {
      p.adapter = word.substr(1);
      if (p.adapter.empty()) return makeError(ErrorKind::Syntax, loc, "'@' names no adapter (write @NAME)");
      if (!adapters.count(p.adapter)) {
        std::string known;
        for (const std::string& a : adapters) known += (known.empty() ? "" : ", ") + a;
        return makeError(ErrorKind::Usage, loc, "no adapter '" + p.adapter + "' (--adapter " + p.adapter +
                                                    "=DIR); " + (known.empty() ? "none is given" : "given: " + known));
      }
      return ok();
    };
    if (tokenizer) {
      std::string_view rest = row;
      if (!row.empty() && row[0] == '@') {
        size_t j = row.find_first_of(" \t");
        if (auto a = takeAdapter(row.substr(0, j), {path, line, 1}); !a) return a.error();
        rest = j == std::string_view::npos ? std::string_view() : row.substr(j + 1);
      }
      int column = int(row.size() - rest.size()) + 1;
      std::string rendered;
      if (chat) {
        auto r = chat->apply(rest, true);
        if (!r) return textError(r.error(), {}, {path, line, column});
        rendered = std::move(*r);
      }
      auto ids = tokenizer->encode(chat ? std::string_view(rendered) : rest, !chat);
      if (!ids) return makeError(ErrorKind::Syntax, {path, line, column}, ids.error().message);
      for (int32_t id : *ids)
        if (id >= vocab)
          return makeError(ErrorKind::Range, {path, line, column},
                           "the tokenizer gives token id " + std::to_string(id) + ", outside the model's vocabulary [0, " +
                               std::to_string(vocab) + ")");
      if (ids->empty()) return makeError(ErrorKind::Syntax, {path, line, column}, "an empty prompt (no text)");
      p.tokens = std::move(*ids);
      prompts.push_back(std::move(p));
      at = end + 1;
      continue;
    }
    size_t i = 0;
    while (i < row.size()) {
      if (row[i] == ' ' || row[i] == '\t') { ++i; continue; }
      size_t j = i;
      while (j < row.size() && row[j] != ' ' && row[j] != '\t') ++j;
      std::string_view word = row.substr(i, j - i);
      Loc loc{path, line, int(i) + 1};
      if (word[0] == '@' && p.tokens.empty() && p.adapter.empty()) {
        if (auto a = takeAdapter(word, loc); !a) return a.error();
        i = j;
        continue;
      }
      int64_t id = 0;
      auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
      if (ec != std::errc() || ptr != word.data() + word.size())
        return makeError(ErrorKind::Syntax, loc,
                         "'" + std::string(word) + "' is not a token id (a decimal integer" +
                             (word[0] == '@' ? "; an @ADAPTER comes first on its line, once)" : ")"));
      if (id < 0 || id >= vocab)
        return makeError(ErrorKind::Range, loc, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                                    std::to_string(vocab) + ")");
      p.tokens.push_back(int32_t(id));
      i = j;
    }
    if (p.tokens.empty()) return makeError(ErrorKind::Syntax, {path, line, 1}, "an empty prompt (a line with no token id)");
    prompts.push_back(std::move(p));
    at = end + 1;
  }
  if (prompts.empty()) return makeError(ErrorKind::Syntax, {path}, "the prompts file has no prompt");
  return prompts;
}

Error textError(const text::TextError& e, const std::string& where, Loc loc) {
  ErrorKind kind = ErrorKind::Format;
  switch (e.kind) {
    case text::TextErrorKind::Io: kind = ErrorKind::Io; break;
    case text::TextErrorKind::Unsupported: kind = ErrorKind::Capability; break;
    case text::TextErrorKind::BadInput:
    case text::TextErrorKind::Raised: kind = ErrorKind::Bind; break;
    case text::TextErrorKind::Template: kind = ErrorKind::Syntax; break;
    case text::TextErrorKind::Format: break;
  }
  return makeError(kind, std::move(loc), (where.empty() ? "" : where + ": ") + e.message);
}

Expected<std::set<int32_t>> readEosIds(const std::string& configPath) {
  std::ifstream in(configPath, std::ios::binary);
  if (!in) return makeError(ErrorKind::Io, {configPath}, "cannot read the model config");
  std::set<int32_t> ids;
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    if (!j.is_object()) return makeError(ErrorKind::Format, {configPath}, "a model config is a JSON object");
    auto it = j.find("eos_token_id");
    if (it == j.end() || it->is_null()) return ids;
    auto add = [&](const nlohmann::json& v) -> bool {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) return false;
      ids.insert(int32_t(v.get<int64_t>()));
      return true;
    };
    bool fine = it->is_array() ? std::all_of(it->begin(), it->end(), add) : add(*it);
    if (!fine)
      return makeError(ErrorKind::Format, {configPath}, "eos_token_id is neither a token id nor a list of them");
  } catch (const nlohmann::json::exception& e) {
    return makeError(ErrorKind::Format, {configPath}, std::string("malformed model config: ") + e.what());
  }
  return ids;
}

Expected<std::set<int32_t>> eosIds(const std::vector<int32_t>& given, const std::string& config,
                                   const std::string& weights) {
  if (!given.empty()) return std::set<int32_t>(given.begin(), given.end());
  if (!config.empty()) return readEosIds(config);
  std::error_code ec;  // an unreadable folder reads as none
  if (!weights.empty() && std::filesystem::is_directory(weights, ec))
    for (const char* name : {"generation_config.json", "config.json"}) {
      auto path = std::filesystem::path(weights) / name;
      if (!std::filesystem::exists(path, ec)) continue;
      auto ids = readEosIds(path.string());
      if (!ids || !ids->empty()) return ids;
    }
  return std::set<int32_t>{};
}

}  // namespace poot

// poot tokenize: a model's tokenizer (lib/text) over standard input, one
// line at a time, for scripts and tests; with --chat, a conversation
// through the model's chat template.
#include <climits>
#include <iostream>
#include <sstream>
#include <string>

#include "ir/io.h"
#include "prompts.h"
#include "tool.h"

namespace poot {

namespace {

// --chat: the conversation rendered through the chat template, printed as
// it is, or its ids encoded without adding special tokens (the template
// writes them, as apply_chat_template(tokenize=True) encodes). The
// tokenizer is loaded only for --ids.
int runChat(const TokenizeOptions& opts) {
  auto chat = text::ChatConfig::load(opts.model);
  if (!chat) return report(textError(chat.error()));
  auto messages = readFile(opts.chat);  // "-": standard input
  if (!messages)
    return report(makeError(ErrorKind::Io, {opts.chat}, "cannot read the messages (" + messages.error().message + ")"));
  auto rendered = chat->apply(*messages, !opts.noGenerationPrompt);
  if (!rendered) return report(textError(rendered.error(), {}, {opts.chat}));
  if (!opts.ids) {
    std::cout << *rendered << std::flush;
    return 0;
  }
  auto tok = text::Tokenizer::load(opts.model);
  if (!tok) return report(textError(tok.error()));
  auto ids = tok->encode(*rendered, false);
  if (!ids) return report(textError(ids.error(), "the rendered conversation"));
  for (size_t i = 0; i < ids->size(); ++i) std::cout << (i ? " " : "") << (*ids)[i];
  std::cout << '\n' << std::flush;
  return 0;
}

}  // namespace

int runTokenize(const TokenizeOptions& opts) {
  if (!opts.chat.empty()) return runChat(opts);
  auto tok = text::Tokenizer::load(opts.model);
  if (!tok) return report(textError(tok.error()));
  std::string line;
  int64_t n = 0;
  // Output is written line by line as input comes (a pipe sees each answer
  // before the next line is read).
  while (std::getline(std::cin, line)) {
    ++n;
    std::string where = "standard input, line " + std::to_string(n);
    if (!opts.decode) {
      auto ids = tok->encode(line, !opts.noSpecial);
      if (!ids) return report(textError(ids.error(), where));
      for (size_t i = 0; i < ids->size(); ++i) std::cout << (i ? " " : "") << (*ids)[i];
      std::cout << '\n' << std::flush;
      continue;
    }
    std::vector<int32_t> ids;
    std::istringstream in(line);
    std::string word;
    while (in >> word) {
      size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != word.size() || v < INT32_MIN || v > INT32_MAX)
        return report(makeError(ErrorKind::Syntax, {}, where + ": '" + word + "' is not a token id"));
      ids.push_back(int32_t(v));
    }
    auto text = tok->decode(ids, opts.noSpecial);
    if (!text) return report(textError(text.error(), where));
    std::cout << *text << '\n' << std::flush;
  }
  return 0;
}

}  // namespace poot

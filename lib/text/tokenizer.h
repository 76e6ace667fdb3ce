// Hugging Face tokenizers as published: a model directory's tokenizer.json
// read as the `tokenizers` library reads it, for the byte-level BPE family
// (GPT-2's scheme as Llama-3, Qwen2/3 and DeepSeek use it) and the
// SentencePiece-style BPE with byte fallback (Llama-2, Mistral, Gemma).
// docs/text.md lists the components read and the ones refused (each a typed
// Unsupported error naming the field).
//
// Encoding, as `tokenizers`' encode(text, add_special_tokens): the text is
// split at added tokens (leftmost, then longest), each other run normalized
// (NFC, Prepend, Replace), split by the pre-tokenizers (regex splits, PCRE2
// with Unicode properties), mapped byte by byte to GPT-2's printable alphabet
// (byte-level; else a character with no token becomes its bytes' <0xXX>
// tokens, or unk) and merged by BPE rank (lowest rank first, leftmost among equals; with
// ignore_merges a piece the vocabulary holds whole is one token); with
// addSpecial the post-processor's template adds its special tokens.
// Decoding maps tokens back to bytes (added tokens as their text); a
// Detokenizer does it a token at a time without breaking a UTF-8 sequence.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/result.h"

namespace poot::text {

// The byte offset of the first byte of s that is not valid UTF-8, or npos.
size_t invalidUtf8(std::string_view s);

class Tokenizer {
 public:
  // PATH: a tokenizer.json, or a directory holding one.
  static TextResult<Tokenizer> load(const std::string& path);

  TextResult<std::vector<int32_t>> encode(std::string_view utf8, bool addSpecial) const;
  // The text of ids; skipSpecial leaves out special added tokens.
  TextResult<std::string> decode(const std::vector<int32_t>& ids, bool skipSpecial) const;
  // The bytes of one token as decode gives them (possibly part of a UTF-8
  // sequence); empty for a skipped special token.
  TextResult<std::string> tokenBytes(int32_t id, bool skipSpecial) const;
  // Ids run 0 .. size() - 1, added tokens included.
  int32_t size() const { return int32_t(tokens_.size()); }

  struct Impl;  // the compiled regexes (tokenizer.cpp)

 private:
  std::vector<int32_t> bpe(const std::string& mapped) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;  // id -> token (vocabulary form, or an added token's text)
  std::vector<bool> added_, special_;
  std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>> merges_;  // pair -> (rank, merged id)
  std::vector<std::pair<std::string, int32_t>> addedByText_;  // matched in the raw text
  struct Normalize {
    enum Kind { Nfc, Prepend, Replace } kind;
    std::string a, b;  // Prepend: a; Replace: a by b
  };
  std::vector<Normalize> normalizers_;
  bool ignoreMerges_ = false, prefixSpace_ = false;
  bool byteLevel_ = false;     // GPT-2's byte alphabet (else BPE on the characters, SentencePiece-style)
  bool byteFallback_ = false;  // a character with no token becomes its bytes' <0xXX> tokens
  bool fuseUnk_ = false;
  int32_t unk_ = -1;
  std::vector<int32_t> byteTokens_;  // <0xXX> of each byte, -1 where absent
  std::string decodeFrom_, decodeTo_;  // SentencePiece decoding: a token's replacement (U+2581 by a space)
  int stripStart_ = 0;                 // spaces the decoder strips off the text's start
  friend class Detokenizer;
  std::vector<int32_t> prefix_, suffix_;  // the template's special tokens around the sequence
  std::shared_ptr<const Impl> impl_;
};

// Streams a sequence's text a token at a time: push gives the text that is
// complete so far (held bytes of a UTF-8 sequence come out with the token
// that completes them); finish gives what is left (invalid bytes as U+FFFD).
class Detokenizer {
 public:
  Detokenizer(const Tokenizer& t, bool skipSpecial) : t_(t), skip_(skipSpecial), strip_(t.stripStart_) {}
  TextResult<std::string> push(int32_t id);
  std::string finish();

 private:
  const Tokenizer& t_;
  bool skip_;
  int strip_;
  std::string pending_;
};

}  // namespace poot::text

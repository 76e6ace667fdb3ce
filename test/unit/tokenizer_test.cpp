// Unit tests of lib/text's tokenizer on small tokenizer.json files written
// here: BPE by merge rank, ignore_merges, added tokens (leftmost, longest),
// the template's special tokens, NFC, byte-level decoding and its streaming
// form, SentencePiece-style BPE with byte fallback, and every refusal typed
// and naming its field. The published
// tokenizers are checked token for token against a reference by
// test/text/published.sh.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace poot {
namespace {

using nlohmann::json;
using text::TextErrorKind;
using text::Tokenizer;

// GPT-2's byte-level character of byte b (derived here from the published
// rule, independently of the library's table).
std::string byteChar(int b) {
  int n = 0;
  for (int x = 0; x < b; ++x)
    if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) ++n;
  bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  uint32_t cp = self ? uint32_t(b) : uint32_t(256 + n);
  std::string s;
  if (cp < 0x80) s += char(cp);
  else s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
  return s;
}

// A byte-level BPE tokenizer: ids 0..255 the bytes, then `merges` in rank
// order (each adds its merged token), then the added tokens.
json tokenizerJson(const std::vector<std::pair<std::string, std::string>>& merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byteChar(b)] = b;
  json ms = json::array();
  int next = 256;
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = next++;
    ms.push_back(a + " " + b);
  }
  return json{{"version", "1.0"},
              {"added_tokens", json::array({json{{"id", next}, {"content", "<s>"}, {"special", true}},
                                           json{{"id", next + 1}, {"content", "<s>x"}, {"special", false}}})},
              {"normalizer", nullptr},
              {"pre_tokenizer",
               json{{"type", "Sequence"},
                    {"pretokenizers",
                     json::array({json{{"type", "Split"},
                                       {"pattern", json{{"Regex", R"( ?\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+)"}}},
                                       {"behavior", "Isolated"},
                                       {"invert", false}},
                                  json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
              {"post_processor", nullptr},
              {"decoder", json{{"type", "ByteLevel"}}},
              {"model", json{{"type", "BPE"}, {"vocab", vocab}, {"merges", ms}, {"ignore_merges", false}}}};
}

struct File {
  std::filesystem::path path;
  explicit File(const json& j) {
    static int n = 0;
    path = std::filesystem::temp_directory_path() / ("poot-tokenizer-test-" + std::to_string(::getpid()) + "-" +
                                                     std::to_string(n++) + ".json");
    std::ofstream(path) << j.dump();
  }
  ~File() { std::filesystem::remove(path); }
};

Tokenizer load(const json& j) {
  File f(j);
  auto t = Tokenizer::load(f.path.string());
  REQUIRE_MESSAGE(bool(t), (t ? "" : t.error().message));
  return std::move(*t);
}

text::TextError refusal(const json& j) {
  File f(j);
  auto t = Tokenizer::load(f.path.string());
  REQUIRE(!t);
  return t.error();
}

std::vector<int32_t> ids(const Tokenizer& t, const std::string& s, bool special = false) {
  auto r = t.encode(s, special);
  REQUIRE_MESSAGE(bool(r), (r ? "" : r.error().message));
  return *r;
}

const std::string G = byteChar(' ');  // "Ġ"

TEST_CASE("tokenizer: merges apply lowest rank first, leftmost among equals") {
  // "abab": a+b (rank 0) twice, then ab+ab (rank 1); b+a is rank 2 and
  // never wins. "aaa": a+a (rank 3) at the left, then the lone a.
  Tokenizer t = load(tokenizerJson({{"a", "b"}, {"ab", "ab"}, {"b", "a"}, {"a", "a"}}));
  CHECK(ids(t, "abab") == std::vector<int32_t>{257});
  CHECK(ids(t, "aba") == std::vector<int32_t>{256, 'a'});
  CHECK(ids(t, "aaa") == std::vector<int32_t>{259, 'a'});
  // The split keeps " ab" one piece: the space byte stays its own token.
  CHECK(ids(t, "x ab") == std::vector<int32_t>{'x', ' ', 256});
  // Bytes past ASCII go through the alphabet: é is two byte tokens.
  CHECK(ids(t, "\xC3\xA9") == std::vector<int32_t>{0xC3, 0xA9});
}

TEST_CASE("tokenizer: ignore_merges takes a whole piece the vocabulary holds") {
  json j = tokenizerJson({{"a", "b"}, {"c", "d"}, {"b", "c"}, {"a", "bc"}});
  // "abcd" by rank: ab, cd -> [ab, cd]; with a token "abcd" in the
  // vocabulary and ignore_merges, one token.
  Tokenizer plain = load(j);
  CHECK(ids(plain, "abcd") == std::vector<int32_t>{256, 257});
  j["model"]["vocab"]["abcd"] = 300;
  j["added_tokens"][0]["id"] = 301, j["added_tokens"][1]["id"] = 302;
  for (int id = 260; id < 300; ++id) j["model"]["vocab"]["filler" + std::to_string(id)] = id;
  j["model"]["ignore_merges"] = true;
  CHECK(ids(load(j), "abcd") == std::vector<int32_t>{300});
}

TEST_CASE("tokenizer: a String split is a literal, not a pattern") {
  json j = tokenizerJson({{"a", "b"}, {"a", "."}});
  j["pre_tokenizer"]["pretokenizers"][0] = json{{"type", "Split"}, {"pattern", json{{"String", "."}}},
                                                {"behavior", "Isolated"}, {"invert", false}};
  Tokenizer t = load(j);
  CHECK(ids(t, "ab") == std::vector<int32_t>{256});           // "." is no wildcard: "ab" stays one piece
  CHECK(ids(t, "a.b") == std::vector<int32_t>{'a', '.', 'b'});  // split at the ".": "a." never merges
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "MergedWithPrevious";
  CHECK(ids(load(j), "a.b") == std::vector<int32_t>{257, 'b'});  // the "." ends the piece before it
}

TEST_CASE("tokenizer: added tokens match in the raw text, leftmost then longest") {
  Tokenizer t = load(tokenizerJson({{"a", "b"}}));
  int32_t s = 257, sx = 258;
  CHECK(ids(t, "ab<s>ab") == std::vector<int32_t>{256, s, 256});
  CHECK(ids(t, "<s>xa") == std::vector<int32_t>{sx, 'a'});
  CHECK(ids(t, "<s><s>") == std::vector<int32_t>{s, s});
  // Decoding: special tokens as text unless skipped.
  CHECK(*t.decode({256, s, 'a'}, false) == "ab<s>a");
  CHECK(*t.decode({256, s, 'a'}, true) == "aba");
  CHECK(*t.decode({sx}, true) == "<s>x");  // not special: kept
}

TEST_CASE("tokenizer: the template's special tokens, NFC, and a round trip") {
  json j = tokenizerJson({{"a", "b"}});
  j["post_processor"] = json{{"type", "TemplateProcessing"},
                             {"single", json::array({json{{"SpecialToken", json{{"id", "<s>"}, {"type_id", 0}}}},
                                                     json{{"Sequence", json{{"id", "A"}, {"type_id", 0}}}}})},
                             {"special_tokens", json{{"<s>", json{{"id", "<s>"}, {"ids", json::array({257})}}}}}};
  Tokenizer t = load(j);
  CHECK(ids(t, "ab", true) == std::vector<int32_t>{257, 256});
  CHECK(ids(t, "ab", false) == std::vector<int32_t>{256});
  // Without NFC, e + combining acute stays three bytes; with it, é's two.
  CHECK(ids(t, "e\xCC\x81").size() == 3);
  j["normalizer"] = json{{"type", "NFC"}};
  CHECK(ids(load(j), "e\xCC\x81") == std::vector<int32_t>{0xC3, 0xA9});
  std::string text = "mixed: 12 \xF0\x9F\xA6\x99 \xE4\xBD\xA0\xE5\xA5\xBD\t end ";
  CHECK(*t.decode(ids(t, text), false) == text);
}

TEST_CASE("tokenizer: streaming holds a UTF-8 sequence until its last byte") {
  Tokenizer t = load(tokenizerJson({}));
  std::vector<int32_t> llama = ids(t, "\xF0\x9F\xA6\x99!");  // four byte tokens, then '!'
  REQUIRE(llama.size() == 5);
  text::Detokenizer d(t, false);
  for (size_t i = 0; i < 3; ++i) CHECK(*d.push(llama[i]) == "");
  CHECK(*d.push(llama[3]) == "\xF0\x9F\xA6\x99");
  CHECK(*d.push(llama[4]) == "!");
  // A sequence cut short comes out as U+FFFD at the end, and a byte that
  // cannot start one at once.
  CHECK(*d.push(0xF0) == "");
  CHECK(d.finish() == "\xEF\xBF\xBD");
  CHECK(*d.push(0x80) == "\xEF\xBF\xBD");
}

// SentencePiece-style BPE as Llama-2 publishes it: "▁" prepended and put
// for spaces, BPE on characters, <0xXX> tokens for a character the
// vocabulary lacks, and a decoder that puts spaces back and strips the
// first.
json sentencePieceJson() {
  const std::string s = "\xE2\x96\x81";  // U+2581
  json vocab = json{{"<unk>", 0}, {"<s>", 1}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    vocab[name] = 2 + b;
  }
  int next = 258;
  for (const std::string& t : {s, std::string("a"), std::string("b"), s + "a", s + "ab", std::string("ab")}) vocab[t] = next++;
  return json{{"added_tokens", json::array({json{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                                           json{{"id", 1}, {"content", "<s>"}, {"special", true}}})},
              {"normalizer", json{{"type", "Sequence"},
                                  {"normalizers", json::array({json{{"type", "Prepend"}, {"prepend", s}},
                                                               json{{"type", "Replace"},
                                                                    {"pattern", json{{"String", " "}}},
                                                                    {"content", s}}})}}},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", json{{"type", "Sequence"},
                               {"decoders", json::array({json{{"type", "Replace"},
                                                             {"pattern", json{{"String", s}}},
                                                             {"content", " "}},
                                                        json{{"type", "ByteFallback"}}, json{{"type", "Fuse"}},
                                                        json{{"type", "Strip"}, {"content", " "}, {"start", 1},
                                                             {"stop", 0}}})}}},
              {"model", json{{"type", "BPE"},
                             {"vocab", vocab},
                             {"merges", json::array({s + " a", "a b", s + "a b"})},
                             {"unk_token", "<unk>"},
                             {"byte_fallback", true},
                             {"fuse_unk", true}}}};
}

TEST_CASE("tokenizer: SentencePiece-style BPE with byte fallback") {
  Tokenizer t = load(sentencePieceJson());
  // "ab ab": "▁ab▁ab"; ▁+a (rank 0) at both, then ▁a+b (rank 2).
  CHECK(ids(t, "ab ab") == std::vector<int32_t>{262, 262});
  CHECK(ids(t, "b") == std::vector<int32_t>{258, 260});
  // é has no token: its two bytes' tokens; at the text's start "▁" first.
  CHECK(ids(t, "\xC3\xA9") == std::vector<int32_t>{258, 2 + 0xC3, 2 + 0xA9});
  // Decoding puts the spaces back and strips the one the normalizer added.
  CHECK(*t.decode(ids(t, "ab ab"), false) == "ab ab");
  CHECK(*t.decode(ids(t, " b \xC3\xA9 a"), false) == " b \xC3\xA9 a");
  // Without byte tokens or an unk a character cannot be encoded; with unk
  // (and fuse_unk) a run of them is one unk.
  json k = sentencePieceJson();
  k["model"]["byte_fallback"] = false;
  Tokenizer u = load(k);
  CHECK(ids(u, "\xC3\xA9\xC3\xA9" "b") == std::vector<int32_t>{258, 0, 260});
  k["model"].erase("unk_token");
  auto none = load(k).encode("\xC3\xA9", false);
  REQUIRE(!none);
  CHECK(none.error().kind == TextErrorKind::BadInput);
}

TEST_CASE("tokenizer: bad input and bad files are typed errors naming the field") {
  Tokenizer t = load(tokenizerJson({}));
  auto bad = t.encode("ok \xFF", false);
  REQUIRE(!bad);
  CHECK(bad.error().kind == TextErrorKind::BadInput);
  CHECK(bad.error().message == "the text is not UTF-8 (byte 3)");
  auto id = t.decode({5, 99999}, false);
  REQUIRE(!id);
  CHECK(id.error().kind == TextErrorKind::BadInput);
  CHECK(id.error().message.find("token id 99999 is not in the vocabulary") == 0);

  json j = tokenizerJson({});
  auto refused = [&](const char* what, TextErrorKind kind, const std::string& says, auto edit) {
    CAPTURE(what);
    json k = j;
    edit(k);
    text::TextError e = refusal(k);
    CHECK(e.kind == kind);
    CHECK_MESSAGE(e.message.find(says) != std::string::npos, e.message);
  };
  refused("unigram", TextErrorKind::Unsupported, "model.type Unigram", [](json& k) { k["model"]["type"] = "Unigram"; });
  refused("byte fallback", TextErrorKind::Unsupported, "model.byte_fallback with a ByteLevel pre-tokenizer",
          [](json& k) { k["model"]["byte_fallback"] = true; });
  refused("decoder", TextErrorKind::Unsupported, "decoder[0]: decoder WordPiece",
          [](json& k) { k["decoder"] = json{{"type", "WordPiece"}}; });
  refused("normalizer", TextErrorKind::Unsupported, "normalizer[0]: normalizer Lowercase",
          [](json& k) { k["normalizer"] = json{{"type", "Lowercase"}}; });
  refused("metaspace", TextErrorKind::Unsupported, "pre_tokenizer[0]: pre-tokenizer Metaspace",
          [](json& k) { k["pre_tokenizer"] = json{{"type", "Metaspace"}}; });
  refused("bad regex", TextErrorKind::Format, "pre_tokenizer[0]: pattern does not compile",
          [](json& k) { k["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; });
  refused("merge of unknown", TextErrorKind::Format, "model.merges[0] ('q', 'zz') names a token the vocabulary lacks",
          [](json& k) { k["model"]["merges"] = json::array({"q zz"}); });
  refused("merge shape", TextErrorKind::Format, "model.merges[0] is not two tokens",
          [](json& k) { k["model"]["merges"] = json::array({"a b c"}); });
  refused("missing byte", TextErrorKind::Format, "lacks the byte-level token of byte 97",
          [](json& k) { k["model"]["vocab"].erase("a"); k["model"]["vocab"]["A2"] = 97; });
  refused("id gap", TextErrorKind::Format, "no token has id 256",
          [](json& k) { k["added_tokens"][0]["id"] = 400; });
  refused("lstrip", TextErrorKind::Unsupported, "added_tokens[0].lstrip true",
          [](json& k) { k["added_tokens"][0]["lstrip"] = true; });
  refused("no model", TextErrorKind::Format, "missing field 'model'", [](json& k) { k.erase("model"); });
  // Not JSON, and no file.
  File notJson(json("x"));
  std::ofstream(notJson.path) << "{\"model\": [";
  auto e = Tokenizer::load(notJson.path.string());
  REQUIRE(!e);
  CHECK(e.error().kind == TextErrorKind::Format);
  auto none = Tokenizer::load("/nonexistent/tokenizer.json");
  REQUIRE(!none);
  CHECK(none.error().kind == TextErrorKind::Io);
}

}  // namespace
}  // namespace poot

#include "text/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace poot::text {

using nlohmann::json;

namespace {

TextError error(TextErrorKind k, std::string m) { return {k, std::move(m)}; }

// One compiled pattern (PCRE2, UTF and Unicode properties).
struct Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

// GPT-2's byte-level alphabet: bytes 33..126, 161..172 and 174..255 stand
// for themselves, the other 68 for U+0100 onwards, in byte order.
struct ByteAlphabet {
  std::string of[256];                      // byte -> its character, UTF-8
  std::unordered_map<uint32_t, uint8_t> back;  // code point -> byte
  ByteAlphabet() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      uint32_t cp = self ? uint32_t(b) : next++;
      utf8proc_uint8_t buf[4];
      auto n = utf8proc_encode_char(utf8proc_int32_t(cp), buf);
      of[b].assign(reinterpret_cast<char*>(buf), size_t(n));
      back[cp] = uint8_t(b);
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

// s with every occurrence of `from` (left to right, not overlapping) by
// `to`; s itself where `from` is empty.
std::string replaceAll(const std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, from.size(), from) == 0) out += to, i += from.size();
    else out += s[i++];
  }
  return out;
}

// The UTF-8 characters of s.
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    utf8proc_int32_t cp;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i), utf8proc_ssize_t(s.size() - i), &cp);
    size_t len = n > 0 ? size_t(n) : 1;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace

size_t invalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t cp;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i), utf8proc_ssize_t(s.size() - i), &cp);
    if (n <= 0) return i;
    i += size_t(n);
  }
  return std::string_view::npos;
}

struct Tokenizer::Impl {
  struct Split {
    std::unique_ptr<Regex> re;
    bool mergedWithPrevious;  // a match joins the piece before it (else it is a piece of its own)
  };
  std::vector<Split> splits;  // the pre-tokenizers' patterns, in order
};

namespace {

// `field` of object j as T, or a Format error naming where.
template <class T>
TextResult<T> get(const json& j, const char* field, const std::string& where) {
  if (!j.is_object() || !j.contains(field)) return error(TextErrorKind::Format, where + ": missing field '" + field + "'");
  try {
    return j.at(field).get<T>();
  } catch (const json::exception&) {
    return error(TextErrorKind::Format, where + ": field '" + field + "' has the wrong type");
  }
}

TextResult<std::unique_ptr<Regex>> compile(const std::string& pattern, const std::string& where) {
  int code;
  PCRE2_SIZE at;
  auto r = std::make_unique<Regex>();
  r->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &code,
                          &at, nullptr);
  if (!r->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(code, msg, sizeof msg);
    return error(TextErrorKind::Format, where + ": pattern does not compile at offset " + std::to_string(at) + ": " +
                                            reinterpret_cast<char*>(msg));
  }
  return r;
}

// The stages of a pipeline field (pre_tokenizer, post_processor): none where
// it is null or absent, its list where it is a Sequence (under `items`), else
// the one.
TextResult<std::vector<json>> stages(const json& j, const char* field, const char* items, const std::string& file) {
  if (!j.contains(field) || j[field].is_null()) return std::vector<json>{};
  const json& p = j[field];
  auto type = get<std::string>(p, "type", file + ": " + field);
  if (!type) return type.error();
  if (*type != "Sequence") return std::vector<json>{p};
  return get<std::vector<json>>(p, items, file + ": " + field);
}

// GPT-2's split (what ByteLevel with use_regex applies).
constexpr const char* kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

TextResult<Tokenizer> Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string file = fs::is_directory(path, ec) ? (fs::path(path) / "tokenizer.json").string() : path;
  if (!fs::is_regular_file(file, ec)) return error(TextErrorKind::Io, file + ": no such regular file");
  std::ifstream in(file, std::ios::binary);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::parse_error& e) {
    return error(TextErrorKind::Format, file + ": not JSON (byte " + std::to_string(e.byte) + ")");
  }
  if (!in.good() && !in.eof()) return error(TextErrorKind::Io, file + ": could not be read");
  Tokenizer t;
  auto impl = std::make_shared<Impl>();
  auto unsupported = [&](const std::string& what) {
    return error(TextErrorKind::Unsupported, file + ": " + what + " (docs/text.md lists what poot reads)");
  };
  auto typeOf = [&](const json& c, const std::string& where) { return get<std::string>(c, "type", file + ": " + where); };

  // The model: byte-level BPE.
  if (!j.contains("model")) return error(TextErrorKind::Format, file + ": missing field 'model'");
  const json& m = j["model"];
  auto mtype = typeOf(m, "model");
  if (!mtype) return mtype.error();
  if (*mtype != "BPE") return unsupported("model.type " + *mtype + " (poot reads BPE)");
  if (m.contains("dropout") && !m["dropout"].is_null()) return unsupported("model.dropout (BPE dropout)");
  for (const char* f : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(f) && m[f].is_string() && !m[f].get<std::string>().empty())
      return unsupported(std::string("model.") + f);
  t.ignoreMerges_ = m.value("ignore_merges", false);
  t.byteFallback_ = m.value("byte_fallback", false);
  t.fuseUnk_ = m.value("fuse_unk", false);
  auto vocab = get<std::map<std::string, int32_t>>(m, "vocab", file + ": model");
  if (!vocab) return vocab.error();
  int32_t most = -1;
  for (const auto& [tok, id] : *vocab) {
    if (id < 0) return error(TextErrorKind::Format, file + ": model.vocab: '" + tok + "' has a negative id");
    most = std::max(most, id);
  }
  // Added tokens: their own ids (past the vocabulary's, or one of them).
  struct Added {
    std::string text;
    int32_t id;
    bool special;
  };
  std::vector<Added> added;
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) return error(TextErrorKind::Format, file + ": added_tokens is not a list");
    for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
      const json& a = j["added_tokens"][i];
      std::string where = file + ": added_tokens[" + std::to_string(i) + "]";
      auto id = get<int32_t>(a, "id", where);
      if (!id) return id.error();
      auto content = get<std::string>(a, "content", where);
      if (!content) return content.error();
      if (*id < 0 || content->empty()) return error(TextErrorKind::Format, where + ": a negative id or empty content");
      for (const char* f : {"lstrip", "rstrip", "single_word"})
        if (a.value(f, false)) return unsupported(std::string("added_tokens[") + std::to_string(i) + "]." + f + " true");
      added.push_back({*content, *id, a.value("special", false)});
      most = std::max(most, *id);
    }
  }
  if (most < 0) return error(TextErrorKind::Format, file + ": model.vocab is empty");
  t.tokens_.assign(size_t(most) + 1, std::string());
  t.added_.assign(size_t(most) + 1, false);
  t.special_.assign(size_t(most) + 1, false);
  std::vector<bool> seen(size_t(most) + 1, false);
  for (const auto& [tok, id] : *vocab) {
    if (seen[size_t(id)]) return error(TextErrorKind::Format, file + ": model.vocab: id " + std::to_string(id) + " twice");
    seen[size_t(id)] = true;
    t.tokens_[size_t(id)] = tok;
    t.vocab_.emplace(tok, id);
  }
  for (const Added& a : added) {
    if (seen[size_t(a.id)] && t.tokens_[size_t(a.id)] != a.text)
      return error(TextErrorKind::Format, file + ": added token '" + a.text + "' takes id " + std::to_string(a.id) +
                                              " of vocabulary token '" + t.tokens_[size_t(a.id)] + "'");
    seen[size_t(a.id)] = true;
    t.tokens_[size_t(a.id)] = a.text;
    t.added_[size_t(a.id)] = true;
    t.special_[size_t(a.id)] = a.special;
    t.addedByText_.push_back({a.text, a.id});
  }
  for (size_t id = 0; id < seen.size(); ++id)
    if (!seen[id]) return error(TextErrorKind::Format, file + ": no token has id " + std::to_string(id));
  // Longest first, so a match at a position takes the longest added token.
  std::stable_sort(t.addedByText_.begin(), t.addedByText_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });

  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    // A vocabulary token, else an added one.
    const std::string name = m["unk_token"].get<std::string>();
    if (auto u = t.vocab_.find(name); u != t.vocab_.end()) t.unk_ = u->second;
    else
      for (const auto& [text, id] : t.addedByText_)
        if (text == name) t.unk_ = id;
    if (t.unk_ < 0) return error(TextErrorKind::Format, file + ": model.unk_token is not a token");
  }
  // Byte fallback's tokens <0x00> .. <0xFF>, where the vocabulary has them.
  t.byteTokens_.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    if (auto it = t.vocab_.find(name); it != t.vocab_.end()) t.byteTokens_[size_t(b)] = it->second;
  }

  // Merges: "a b" strings or [a, b] pairs; rank = position.
  if (!m.contains("merges") || !m["merges"].is_array()) return error(TextErrorKind::Format, file + ": model.merges is not a list");
  for (size_t r = 0; r < m["merges"].size(); ++r) {
    const json& e = m["merges"][r];
    std::string a, b;
    if (e.is_string()) {
      std::string s = e.get<std::string>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return error(TextErrorKind::Format, file + ": model.merges[" + std::to_string(r) + "] is not two tokens");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>(), b = e[1].get<std::string>();
    } else {
      return error(TextErrorKind::Format, file + ": model.merges[" + std::to_string(r) + "] is not two tokens");
    }
    auto ia = t.vocab_.find(a), ib = t.vocab_.find(b), ic = t.vocab_.find(a + b);
    if (ia == t.vocab_.end() || ib == t.vocab_.end() || ic == t.vocab_.end())
      return error(TextErrorKind::Format, file + ": model.merges[" + std::to_string(r) + "] ('" + a + "', '" + b +
                                              "') names a token the vocabulary lacks");
    t.merges_.emplace(std::pair{ia->second, ib->second}, std::pair{int32_t(r), ic->second});
  }

  // Normalizers: NFC, Prepend, Replace of a string, in order.
  auto norms = stages(j, "normalizer", "normalizers", file);
  if (!norms) return norms.error();
  for (size_t i = 0; i < norms->size(); ++i) {
    const json& n = (*norms)[i];
    std::string where = "normalizer[" + std::to_string(i) + "]";
    auto nt = typeOf(n, where);
    if (!nt) return nt.error();
    if (*nt == "NFC") {
      t.normalizers_.push_back({Normalize::Nfc, "", ""});
    } else if (*nt == "Prepend") {
      auto with = get<std::string>(n, "prepend", file + ": " + where);
      if (!with) return with.error();
      t.normalizers_.push_back({Normalize::Prepend, *with, ""});
    } else if (*nt == "Replace") {
      auto from = n.contains("pattern") && n["pattern"].contains("String") && n["pattern"]["String"].is_string()
                      ? n["pattern"]["String"].get<std::string>()
                      : std::string();
      auto to = get<std::string>(n, "content", file + ": " + where);
      if (from.empty()) return unsupported(where + ": a Replace of anything but a non-empty String");
      if (!to) return to.error();
      t.normalizers_.push_back({Normalize::Replace, from, *to});
    } else {
      return unsupported(where + ": normalizer " + *nt + " (poot reads NFC, Prepend and Replace)");
    }
  }
  // Pre-tokenizers: regex splits and byte-level mapping.
  bool& byteLevel = t.byteLevel_;
  auto pres = stages(j, "pre_tokenizer", "pretokenizers", file);
  if (!pres) return pres.error();
  for (size_t i = 0; i < pres->size(); ++i) {
    const json& pre = (*pres)[i];
    std::string where = "pre_tokenizer[" + std::to_string(i) + "]";
    auto pt = typeOf(pre, where);
    if (!pt) return pt.error();
    if (*pt == "ByteLevel") {
      byteLevel = true;
      t.prefixSpace_ = t.prefixSpace_ || pre.value("add_prefix_space", false);
      if (pre.value("use_regex", true)) {
        auto r = compile(kByteLevelPattern, file + ": " + where);
        if (!r) return r.error();
        impl->splits.push_back({std::move(*r), false});
      }
    } else if (*pt == "Split") {
      std::string behavior = pre.value("behavior", std::string());
      if ((behavior != "Isolated" && behavior != "MergedWithPrevious") || pre.value("invert", false))
        return unsupported(where + ": a Split other than behavior Isolated or MergedWithPrevious, invert false");
      const json& pat = pre.contains("pattern") ? pre["pattern"] : json();
      std::string pattern;
      if (pat.contains("Regex") && pat["Regex"].is_string()) {
        pattern = pat["Regex"].get<std::string>();
      } else if (pat.contains("String") && pat["String"].is_string()) {
        // A literal, quoted whole (\Q...\E; a "\E" inside it ends and restarts the quote).
        std::string lit = pat["String"].get<std::string>();
        pattern = "\\Q";
        for (size_t i = 0; i < lit.size(); ++i)
          pattern += lit.compare(i, 2, "\\E") == 0 ? (++i, std::string("\\E\\\\E\\Q")) : std::string(1, lit[i]);
        pattern += "\\E";
      } else {
        return error(TextErrorKind::Format, file + ": " + where + ".pattern is neither Regex nor String");
      }
      auto r = compile(pattern, file + ": " + where);
      if (!r) return r.error();
      impl->splits.push_back({std::move(*r), behavior == "MergedWithPrevious"});
    } else {
      return unsupported(where + ": pre-tokenizer " + *pt + " (poot reads Split and ByteLevel)");
    }
  }
  if (byteLevel && t.byteFallback_) return unsupported("model.byte_fallback with a ByteLevel pre-tokenizer");
  // Decoder: ByteLevel, or SentencePiece's Replace, ByteFallback, Fuse and
  // Strip (of the text's start).
  auto decs = stages(j, "decoder", "decoders", file);
  if (!decs) return decs.error();
  for (size_t i = 0; i < decs->size(); ++i) {
    const json& d = (*decs)[i];
    std::string where = "decoder[" + std::to_string(i) + "]";
    auto dt = typeOf(d, where);
    if (!dt) return dt.error();
    bool fits = *dt == (byteLevel ? "ByteLevel" : "Fuse") || (!byteLevel && *dt == "ByteFallback");
    if (!byteLevel && *dt == "Replace" && d.contains("pattern") && d["pattern"].contains("String") &&
        d["pattern"]["String"].is_string() && d.contains("content") && d["content"].is_string()) {
      t.decodeFrom_ = d["pattern"]["String"].get<std::string>(), t.decodeTo_ = d["content"].get<std::string>();
      fits = !t.decodeFrom_.empty();
    }
    if (!byteLevel && *dt == "Strip" && d.value("content", std::string()) == " " && d.value("stop", 0) == 0) {
      t.stripStart_ = d.value("start", 0);
      fits = true;
    }
    if (!fits) return unsupported(where + ": decoder " + *dt + " here");
  }
  // Post-processor: ByteLevel (nothing to add), TemplateProcessing (its
  // single-sequence template), or a Sequence of those.
  auto posts = stages(j, "post_processor", "processors", file);
  if (!posts) return posts.error();
  for (size_t i = 0; i < posts->size(); ++i) {
    const json& post = (*posts)[i];
    std::string where = "post_processor[" + std::to_string(i) + "]";
    auto pt = typeOf(post, where);
    if (!pt) return pt.error();
    if (*pt == "ByteLevel") continue;
    if (*pt != "TemplateProcessing") return unsupported(where + ": post-processor " + *pt);
    auto single = get<std::vector<json>>(post, "single", file + ": " + where);
    if (!single) return single.error();
    bool afterSequence = false;
    for (const json& piece : *single) {
      if (piece.contains("Sequence")) {
        afterSequence = true;
        continue;
      }
      std::string name = piece.contains("SpecialToken") ? piece["SpecialToken"].value("id", std::string()) : "";
      const json& specials = post.contains("special_tokens") ? post["special_tokens"] : json();
      if (name.empty() || !specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
        return error(TextErrorKind::Format, file + ": " + where + ".single names a special token it does not define");
      for (const json& id : specials[name]["ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= t.size())
          return error(TextErrorKind::Format, file + ": " + where + ": special token '" + name + "' has an id out of range");
        (afterSequence ? t.suffix_ : t.prefix_).push_back(id.get<int32_t>());
      }
    }
  }
  // Every byte's character must be a token.
  for (int b = 0; b < 256 && byteLevel; ++b)
    if (!t.vocab_.count(alphabet().of[b]))
      return error(TextErrorKind::Format, file + ": model.vocab lacks the byte-level token of byte " + std::to_string(b));
  t.impl_ = std::move(impl);
  return t;
}

std::vector<int32_t> Tokenizer::bpe(const std::string& mapped) const {
  if (ignoreMerges_) {
    auto whole = vocab_.find(mapped);
    if (whole != vocab_.end()) return {whole->second};
  }
  std::vector<int32_t> sym;
  for (const std::string& c : characters(mapped)) {
    if (auto it = vocab_.find(c); it != vocab_.end()) {
      sym.push_back(it->second);  // every byte-level character is (load checked it)
      continue;
    }
    bool bytes = byteFallback_;
    for (unsigned char b : c) bytes = bytes && byteTokens_[b] >= 0;
    if (bytes) {
      for (unsigned char b : c) sym.push_back(byteTokens_[b]);
    } else if (!(fuseUnk_ && !sym.empty() && sym.back() == unk_ && unk_ >= 0)) {
      sym.push_back(unk_);  // -1 without an unk token: encode refuses it
    }
  }
  for (;;) {
    int32_t bestRank = INT32_MAX, merged = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      auto it = merges_.find({sym[i], sym[i + 1]});
      if (it != merges_.end() && it->second.first < bestRank) bestRank = it->second.first, merged = it->second.second, at = i;
    }
    if (merged < 0) return sym;
    sym[at] = merged;
    sym.erase(sym.begin() + ptrdiff_t(at) + 1);
  }
}

TextResult<std::vector<int32_t>> Tokenizer::encode(std::string_view utf8, bool addSpecial) const {
  if (size_t bad = invalidUtf8(utf8); bad != std::string_view::npos)
    return error(TextErrorKind::BadInput, "the text is not UTF-8 (byte " + std::to_string(bad) + ")");
  std::vector<int32_t> out;
  bool unknown = false;  // a character with no token, no byte tokens and no unk token
  if (addSpecial) out = prefix_;
  // A run of text between added tokens.
  auto run = [&](std::string_view raw) {
    if (raw.empty()) return;
    std::string s(raw);
    for (const Normalize& n : normalizers_) {
      if (n.kind == Normalize::Nfc) {
        utf8proc_uint8_t* c = utf8proc_NFC(reinterpret_cast<const utf8proc_uint8_t*>(s.c_str()));
        s = reinterpret_cast<char*>(c);
        free(c);
      } else if (n.kind == Normalize::Prepend) {
        if (!s.empty()) s = n.a + s;
      } else {
        s = replaceAll(s, n.a, n.b);
      }
    }
    if (s.empty()) return;
    if (prefixSpace_ && s[0] != ' ') s = " " + s;
    std::vector<std::string> pieces{s};
    for (const auto& [re, merged] : impl_->splits) {
      pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
      std::vector<std::string> next;
      for (const std::string& p : pieces) {
        size_t from = 0, gap = 0;
        auto subject = reinterpret_cast<PCRE2_SPTR>(p.data());
        while (from <= p.size()) {
          int rc = pcre2_match(re->code, subject, p.size(), from, 0, md, nullptr);
          if (rc < 0) break;
          PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
          if (ov[1] == ov[0]) {  // an empty match: step one character on
            from = ov[0] + 1;
            while (from < p.size() && (uint8_t(p[from]) & 0xC0) == 0x80) ++from;
            continue;
          }
          if (merged) {  // the match ends the piece that runs up to it
            next.push_back(p.substr(gap, ov[1] - gap));
          } else {
            if (ov[0] > gap) next.push_back(p.substr(gap, ov[0] - gap));
            next.push_back(p.substr(ov[0], ov[1] - ov[0]));
          }
          gap = from = ov[1];
        }
        if (gap < p.size()) next.push_back(p.substr(gap));
      }
      pcre2_match_data_free(md);
      pieces = std::move(next);
    }
    for (const std::string& p : pieces) {
      std::string mapped;
      if (byteLevel_)
        for (unsigned char c : p) mapped += alphabet().of[c];
      std::vector<int32_t> ids = bpe(byteLevel_ ? mapped : p);
      if (std::count(ids.begin(), ids.end(), -1)) unknown = true;
      out.insert(out.end(), ids.begin(), ids.end());
    }
  };
  // Each added token's next occurrence at or past `at`, searched again only
  // once `at` passes it (so the text is scanned once a token, not once a
  // token for every added token found).
  std::vector<size_t> next;
  for (const auto& added : addedByText_) next.push_back(utf8.find(added.first));
  size_t at = 0;
  while (at < utf8.size()) {
    // The leftmost added token, the longest there.
    size_t best = std::string_view::npos;
    int32_t id = -1, len = 0;
    for (size_t k = 0; k < addedByText_.size(); ++k) {
      const auto& [text, aid] = addedByText_[k];
      if (next[k] < at) next[k] = utf8.find(text, at);
      if (next[k] < best) best = next[k], id = aid, len = int32_t(text.size());
    }
    run(utf8.substr(at, best == std::string_view::npos ? std::string_view::npos : best - at));
    if (best == std::string_view::npos) break;
    out.push_back(id);
    at = best + size_t(len);
  }
  if (unknown) return error(TextErrorKind::BadInput, "the text has a character the vocabulary has no token for (and no unk_token)");
  if (addSpecial) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

TextResult<std::string> Tokenizer::tokenBytes(int32_t id, bool skipSpecial) const {
  if (id < 0 || id >= size())
    return error(TextErrorKind::BadInput, "token id " + std::to_string(id) + " is not in the vocabulary (0 to " +
                                              std::to_string(size() - 1) + ")");
  const std::string& tok = tokens_[size_t(id)];
  if (added_[size_t(id)] && skipSpecial && special_[size_t(id)]) return std::string();
  if (added_[size_t(id)] && byteLevel_) return tok;
  if (!byteLevel_) {
    // A byte token gives its byte; the rest (added tokens too) the
    // decoder's replacement.
    if (auto b = std::find(byteTokens_.begin(), byteTokens_.end(), id); b != byteTokens_.end())
      return std::string(1, char(b - byteTokens_.begin()));
    return replaceAll(tok, decodeFrom_, decodeTo_);
  }
  std::string out;
  for (const std::string& c : characters(tok)) {
    utf8proc_int32_t cp;
    utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(c.data()), utf8proc_ssize_t(c.size()), &cp);
    auto it = alphabet().back.find(uint32_t(cp));
    out += it != alphabet().back.end() ? std::string(1, char(it->second)) : c;  // not of the alphabet: as it is
  }
  return out;
}

TextResult<std::string> Tokenizer::decode(const std::vector<int32_t>& ids, bool skipSpecial) const {
  Detokenizer d(*this, skipSpecial);
  std::string out;
  for (int32_t id : ids) {
    auto piece = d.push(id);
    if (!piece) return piece.error();
    out += *piece;
  }
  return out + d.finish();
}

namespace {
// The length of s's longest prefix that ends on a whole UTF-8 sequence or
// on a byte no continuation can make valid.
size_t completePrefix(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    uint8_t c = uint8_t(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) {
      // Incomplete at the end: hold it while its bytes so far are continuations.
      bool cont = true;
      for (size_t k = i + 1; k < s.size(); ++k) cont = cont && (uint8_t(s[k]) & 0xC0) == 0x80;
      return cont ? i : s.size();
    }
    i += n;
  }
  return s.size();
}

// s with every invalid UTF-8 byte replaced by U+FFFD.
std::string valid(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    utf8proc_int32_t cp;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i), utf8proc_ssize_t(s.size() - i), &cp);
    if (n <= 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s, i, size_t(n));
      i += size_t(n);
    }
  }
  return out;
}
}  // namespace

TextResult<std::string> Detokenizer::push(int32_t id) {
  auto bytes = t_.tokenBytes(id, skip_);
  if (!bytes) return bytes.error();
  pending_ += *bytes;
  // The decoder's Strip: up to stripStart spaces off the text's start.
  while (strip_ > 0 && !pending_.empty()) {
    if (pending_[0] != ' ') {
      strip_ = 0;
      break;
    }
    pending_.erase(0, 1);
    --strip_;
  }
  size_t n = completePrefix(pending_);
  std::string out = valid(pending_.substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string Detokenizer::finish() {
  std::string out = valid(pending_);
  pending_.clear();
  return out;
}

}  // namespace poot::text

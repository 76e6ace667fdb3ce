// Reading a Hugging Face config.json: ConfigFields over nlohmann::json (kept
// private to lib/trace), the fields every llama-like family shares, the rope
// parameters in both published spellings, and the trace options resolved
// against the config. Every refusal names the field and the config file.
#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "ir/budget.h"
#include "ir/io.h"
#include "trace/model.h"

namespace poot::trace {

using nlohmann::json;

struct ConfigFields::Impl {
  json object = json::object();
  std::string file;
  std::string path;  // "" for the top level, "rope_scaling." for a nested object
};

struct ConfigFieldsAccess {
  static ConfigFields make(json j, std::string file, std::string path) {
    auto impl = std::make_shared<ConfigFields::Impl>();
    impl->object = std::move(j);
    impl->file = std::move(file);
    impl->path = std::move(path);
    return ConfigFields(std::move(impl));
  }
  static const json* find(const ConfigFields& f, std::string_view key) {
    auto it = f.impl_->object.find(std::string(key));
    if (it == f.impl_->object.end() || it->is_null()) return nullptr;
    return &*it;
  }
};

namespace {

using A = ConfigFieldsAccess;

// Line and column (1-based) of a byte offset in text.
std::pair<int, int> lineCol(const std::string& text, size_t byte) {
  int line = 1, col = 1;
  for (size_t i = 0; i < std::min(byte, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

// nlohmann's message without its "[json.exception...] parse error at ...: " prefix.
std::string jsonMessage(const std::string& what) {
  size_t colon = what.find(": ");
  std::string m = colon == std::string::npos ? what : what.substr(colon + 2);
  return "invalid JSON: " + m;
}

}  // namespace

ConfigFields::ConfigFields() : impl_(std::make_shared<Impl>()) {}
ConfigFields::ConfigFields(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Expected<ConfigFields> ConfigFields::parse(const std::string& text, const std::string& file) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    auto [line, col] = lineCol(text, e.byte > 0 ? e.byte - 1 : 0);
    return makeError(ErrorKind::Syntax, Loc{file, line, col}, jsonMessage(e.what()));
  } catch (const json::exception& e) {
    // A number past a double's range (out_of_range 406) comes with no place.
    std::string what = e.what();
    size_t tag = what.find("] ");
    return makeError(ErrorKind::Syntax, Loc{file}, "invalid JSON: " + (tag == std::string::npos ? what : what.substr(tag + 2)));
  }
  if (!j.is_object()) return makeError(ErrorKind::Syntax, Loc{file}, "expected a JSON object at the top level");
  return A::make(std::move(j), file, "");
}

const std::string& ConfigFields::file() const { return impl_->file; }

bool ConfigFields::has(std::string_view key) const { return A::find(*this, key) != nullptr; }

std::vector<std::string> ConfigFields::keys() const {
  std::vector<std::string> out;
  for (auto it = impl_->object.begin(); it != impl_->object.end(); ++it) out.push_back(it.key());
  std::sort(out.begin(), out.end());
  return out;
}

Error ConfigFields::error(std::string_view key, const std::string& message) const {
  return makeError(ErrorKind::Syntax, Loc{impl_->file}, "field '" + impl_->path + std::string(key) + "': " + message);
}

namespace {

constexpr const char* kPositiveInt = "expected a positive integer";
constexpr const char* kNonNegativeInt = "expected a non-negative integer";
constexpr const char* kNumber = "expected a number";
constexpr const char* kPositiveNumber = "expected a positive number";
constexpr const char* kBool = "expected true or false";
constexpr const char* kString = "expected a string";

std::optional<int64_t> asInt(const json& j) {
  if (j.is_number_unsigned()) {
    auto u = j.get<uint64_t>();
    return u > uint64_t(INT64_MAX) ? std::nullopt : std::optional<int64_t>(int64_t(u));
  }
  if (j.is_number_integer()) return j.get<int64_t>();
  return std::nullopt;
}

}  // namespace

Expected<std::optional<int64_t>> ConfigFields::optionalPositiveInt(std::string_view key) const {
  const json* j = A::find(*this, key);
  if (!j) return std::optional<int64_t>();
  auto v = asInt(*j);
  if (!v || *v < 1) return error(key, kPositiveInt);
  return std::optional<int64_t>(*v);
}

Expected<int64_t> ConfigFields::positiveInt(std::string_view key) const {
  auto v = optionalPositiveInt(key);
  if (!v) return v.error();
  if (!*v) return error(key, std::string("missing, ") + kPositiveInt);
  return **v;
}

Expected<int64_t> ConfigFields::positiveInt(std::string_view key, int64_t fallback) const {
  auto v = optionalPositiveInt(key);
  if (!v) return v.error();
  return v->value_or(fallback);
}

Expected<int64_t> ConfigFields::nonNegativeInt(std::string_view key, int64_t fallback) const {
  const json* j = A::find(*this, key);
  if (!j) return fallback;
  auto v = asInt(*j);
  if (!v || *v < 0) return error(key, kNonNegativeInt);
  return *v;
}

Expected<std::optional<double>> ConfigFields::optionalNumber(std::string_view key) const {
  const json* j = A::find(*this, key);
  if (!j) return std::optional<double>();
  if (!j->is_number()) return error(key, kNumber);
  return std::optional<double>(j->get<double>());
}

Expected<double> ConfigFields::number(std::string_view key) const {
  auto v = optionalNumber(key);
  if (!v) return v.error();
  if (!*v) return error(key, std::string("missing, ") + kNumber);
  return **v;
}

Expected<double> ConfigFields::number(std::string_view key, double fallback) const {
  auto v = optionalNumber(key);
  if (!v) return v.error();
  return v->value_or(fallback);
}

Expected<double> ConfigFields::positiveNumber(std::string_view key) const {
  const json* j = A::find(*this, key);
  if (!j) return error(key, std::string("missing, ") + kPositiveNumber);
  return positiveNumber(key, 1.0);
}

Expected<double> ConfigFields::positiveNumber(std::string_view key, double fallback) const {
  const json* j = A::find(*this, key);
  if (!j) return fallback;
  if (!j->is_number() || !(j->get<double>() > 0)) return error(key, kPositiveNumber);
  return j->get<double>();
}

Expected<bool> ConfigFields::boolean(std::string_view key, bool fallback) const {
  const json* j = A::find(*this, key);
  if (!j) return fallback;
  if (!j->is_boolean()) return error(key, kBool);
  return j->get<bool>();
}

Expected<std::optional<std::string>> ConfigFields::optionalString(std::string_view key) const {
  const json* j = A::find(*this, key);
  if (!j) return std::optional<std::string>();
  if (!j->is_string()) return error(key, kString);
  return std::optional<std::string>(j->get<std::string>());
}

Expected<std::string> ConfigFields::string(std::string_view key) const {
  auto v = optionalString(key);
  if (!v) return v.error();
  if (!*v) return error(key, std::string("missing, ") + kString);
  return **v;
}

Expected<std::string> ConfigFields::string(std::string_view key, std::string fallback) const {
  auto v = optionalString(key);
  if (!v) return v.error();
  return v->value_or(std::move(fallback));
}

Expected<std::vector<std::string>> ConfigFields::strings(std::string_view key) const {
  std::vector<std::string> out;
  const json* j = A::find(*this, key);
  if (!j) return out;
  if (!j->is_array()) return error(key, "expected a list of strings");
  for (const json& e : *j) {
    if (!e.is_string()) return error(key, "expected a list of strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

Expected<std::vector<int64_t>> ConfigFields::ints(std::string_view key) const {
  std::vector<int64_t> out;
  const json* j = A::find(*this, key);
  if (!j) return out;
  if (!j->is_array()) return error(key, "expected a list of integers");
  for (const json& e : *j) {
    auto v = asInt(e);
    if (!v) return error(key, "expected a list of integers");
    out.push_back(*v);
  }
  return out;
}

Expected<std::optional<ConfigFields>> ConfigFields::object(std::string_view key) const {
  const json* j = A::find(*this, key);
  if (!j) return std::optional<ConfigFields>();
  if (!j->is_object()) return error(key, "expected an object");
  return std::optional<ConfigFields>(A::make(*j, impl_->file, impl_->path + std::string(key) + "."));
}

// ----- the shared fields -----

// Assigns the value of an Expected to lhs, or returns its error.
#define POOT_TRY(lhs, expr)                  \
  do {                                       \
    auto poot_r_ = (expr);                   \
    if (!poot_r_) return poot_r_.error();    \
    lhs = std::move(*poot_r_);               \
  } while (0)

namespace {

Status readRopeType(const ConfigFields& p, RopeConfig& rope) {
  // rope_type, or the older spelling "type"
  const char* key = p.has("rope_type") || !p.has("type") ? "rope_type" : "type";
  POOT_TRY(rope.type, p.string(key, "default"));
  if (rope.type != "llama3") return ok();
  POOT_TRY(rope.factor, p.positiveNumber("factor"));
  POOT_TRY(rope.lowFreqFactor, p.positiveNumber("low_freq_factor"));
  POOT_TRY(rope.highFreqFactor, p.positiveNumber("high_freq_factor"));
  if (rope.highFreqFactor <= rope.lowFreqFactor)
    return p.error("high_freq_factor", "must be greater than low_freq_factor");
  int64_t original = 0;
  POOT_TRY(original, p.positiveInt("original_max_position_embeddings"));
  rope.originalMaxPositions = double(original);
  return ok();
}

}  // namespace

Status readRopeFields(const ConfigFields& f, RopeConfig& rope) {
  POOT_TRY(rope.theta, f.positiveNumber("rope_theta", 10000.0));
  std::optional<ConfigFields> params;
  POOT_TRY(params, f.object("rope_parameters"));
  if (params) {
    POOT_TRY(rope.theta, params->positiveNumber("rope_theta", rope.theta));
  } else {
    POOT_TRY(params, f.object("rope_scaling"));
  }
  rope.params = params;
  if (!params) return ok();
  return readRopeType(*params, rope);
}

Expected<std::vector<bool>> readLayerTypes(const ModelConfig& cfg) {
  const ConfigFields& f = cfg.fields;
  auto types = f.strings("layer_types");
  if (!types) return types.error();
  if (!types->empty() && int64_t(types->size()) != cfg.numLayers)
    return f.error("layer_types", "has " + std::to_string(types->size()) + " entries for " +
                                      std::to_string(cfg.numLayers) + " layers");
  std::vector<bool> sliding;
  for (const std::string& t : *types) {
    if (t != "sliding_attention" && t != "full_attention")
      return f.error("layer_types", "entry '" + t + "' is not sliding_attention or full_attention");
    sliding.push_back(t == "sliding_attention");
  }
  return sliding;
}

Expected<std::vector<double>> ropeInvFreq(const ModelConfig& cfg, int64_t dim) {
  if (auto s = checkHostBytes(mulBytes(dim / 2, 8), "the rotary frequency table of head_dim " + std::to_string(dim),
                              Loc{cfg.file});
      !s)
    return s.error();
  const RopeConfig& r = cfg.rope;
  std::vector<double> inv = ops::rope_inv_freq(r.theta, dim);
  if (r.type == "default") return inv;
  if (r.type == "llama3")
    return ops::rope_llama3_scale(std::move(inv), r.factor, r.lowFreqFactor, r.highFreqFactor, r.originalMaxPositions);
  const ConfigFields& p = r.params ? *r.params : cfg.fields;
  return p.error(p.has("type") && !p.has("rope_type") ? "type" : "rope_type",
                 "rope type '" + r.type + "' is not supported for model_type " + cfg.modelType +
                     " (supported: default, llama3)");
}

Status readCommonFields(const ConfigFields& f, ModelConfig& cfg) {
  POOT_TRY(cfg.hiddenSize, f.positiveInt("hidden_size"));
  POOT_TRY(cfg.intermediateSize, f.positiveInt("intermediate_size"));
  POOT_TRY(cfg.numLayers, f.positiveInt("num_hidden_layers"));
  POOT_TRY(cfg.numHeads, f.positiveInt("num_attention_heads"));
  POOT_TRY(cfg.numKvHeads, f.positiveInt("num_key_value_heads", cfg.numHeads));
  if (cfg.numHeads % cfg.numKvHeads != 0)
    return f.error("num_key_value_heads", std::to_string(cfg.numKvHeads) + " does not divide num_attention_heads " +
                                              std::to_string(cfg.numHeads));
  if (!f.has("head_dim") && cfg.hiddenSize % cfg.numHeads != 0)
    return f.error("hidden_size", std::to_string(cfg.hiddenSize) + " is not a multiple of num_attention_heads " +
                                      std::to_string(cfg.numHeads) + " and no head_dim is given");
  POOT_TRY(cfg.headDim, f.positiveInt("head_dim", cfg.hiddenSize / cfg.numHeads));
  POOT_TRY(cfg.vocabSize, f.positiveInt("vocab_size"));
  POOT_TRY(cfg.normEps, f.positiveNumber("rms_norm_eps", 1e-6));
  if (auto s = readRopeFields(f, cfg.rope); !s) return s.error();
  POOT_TRY(cfg.tieWordEmbeddings, f.boolean("tie_word_embeddings", false));
  POOT_TRY(cfg.qkvBias, f.boolean("attention_bias", false));
  cfg.oBias = cfg.qkvBias;
  POOT_TRY(cfg.mlpBias, f.boolean("mlp_bias", false));
  bool useWindow = true;
  POOT_TRY(useWindow, f.boolean("use_sliding_window", true));
  std::optional<int64_t> window;
  POOT_TRY(window, f.optionalPositiveInt("sliding_window"));
  cfg.slidingWindow = useWindow ? window : std::nullopt;
  POOT_TRY(cfg.maxPositions, f.nonNegativeInt("max_position_embeddings", 0));
  POOT_TRY(cfg.hiddenAct, f.string(f.has("hidden_activation") ? "hidden_activation" : "hidden_act", "silu"));
  POOT_TRY(cfg.torchDtype, f.string(f.has("torch_dtype") ? "torch_dtype" : "dtype", ""));
  return ok();
}

Expected<ModelConfig> parseConfig(const std::string& text, const std::string& file) {
  auto fields = ConfigFields::parse(text, file);
  if (!fields) return fields.error();
  ModelConfig cfg;
  cfg.file = file;
  cfg.fields = *fields;
  POOT_TRY(cfg.modelType, fields->string("model_type"));
  const Family* fam = findFamily(cfg.modelType);
  if (!fam)
    return fields->error("model_type", "unsupported model type '" + cfg.modelType +
                                           "' (supported: " + supportedModelTypes() + ")");
  if (auto s = fam->parse(*fields, cfg); !s) return s.error();
  return cfg;
}

Expected<ModelConfig> loadConfig(const std::string& path) {
  auto text = readFile(path);
  if (!text) return text.error();
  return parseConfig(*text, path);
}

// ----- trace options -----

Expected<int64_t> resolveLayers(const ModelConfig& cfg, const TraceOptions& opts) {
  int64_t layers = opts.layers.value_or(cfg.numLayers);
  if (layers < 1) return makeError(ErrorKind::Usage, {}, "--layers must be at least 1, got " + std::to_string(layers));
  if (layers > cfg.numLayers)
    return makeError(ErrorKind::Usage, {},
                     "--layers " + std::to_string(layers) + " is more than the model's " +
                         std::to_string(cfg.numLayers) + " layers");
  return layers;
}

Expected<ops::StepSpec> resolveStep(const ModelConfig& cfg, const TraceOptions& opts) {
  auto usage = [](std::string m) { return makeError(ErrorKind::Usage, {}, std::move(m)); };
  ops::StepSpec s;
  s.batch = opts.batch;
  s.tokens = opts.tokens.value_or(opts.phase == Phase::Decode ? 1 : kDefaultPrefillTokens);
  s.kv = opts.kv;
  s.poolSlots = opts.poolSlots;
  s.live = opts.live;
  s.nextToken = opts.nextToken;
  s.dtype = opts.dtype;
  s.kvDtype = opts.kvDtype.value_or(opts.dtype);
  s.weightDtype = opts.weightsDtype.value_or(opts.dtype);
  if (opts.phase == Phase::Decode && s.tokens != 1)
    return usage("--tokens must be 1 for decode, got " + std::to_string(s.tokens) + " (use --phase prefill)");
  if (opts.phase == Phase::Mixed) {
    if (s.batch < 1) return usage("--batch must be at least 1, got " + std::to_string(s.batch));
    if (s.kv != ops::KvLayout::Paged) return usage("--phase mixed needs --kv paged: its tokens read their sequences' blocks");
    if (s.batch > s.tokens)
      return usage("--batch " + std::to_string(s.batch) + " sequences of a mixed step need at least as many --tokens, got " +
                   std::to_string(s.tokens));
    // Each token is a row of one token at its own position; `batch` counts
    // the sequences they belong to.
    s.sequences = s.batch;
    s.batch = s.tokens;
    s.tokens = 1;
  }
  s.capacity = opts.capacity.value_or(std::max(kDefaultCapacity, s.tokens));
  if (s.batch < 1) return usage("--batch must be at least 1, got " + std::to_string(s.batch));
  if (s.tokens < 1) return usage("--tokens must be at least 1, got " + std::to_string(s.tokens));
  if (s.capacity < 1) return usage("--capacity must be at least 1, got " + std::to_string(s.capacity));
  if (s.tokens > s.capacity)
    return usage("--tokens " + std::to_string(s.tokens) + " is more than the capacity " + std::to_string(s.capacity));
  if (s.kv == ops::KvLayout::Paged && s.capacity % ops::kBlockSize != 0)
    return usage("--capacity " + std::to_string(s.capacity) + " must be a multiple of the paged block size " +
                 std::to_string(ops::kBlockSize));
  if (s.poolSlots < 0) return usage("the pool must have at least 1 slot, got " + std::to_string(s.poolSlots));
  if (!isFloat(s.dtype)) return usage(std::string("the trace dtype must be a float type, not ") + dtypeName(s.dtype));
  if (!isFloat(s.kvDtype)) return usage(std::string("--kv-dtype must be a float type, not ") + dtypeName(s.kvDtype));
  if (!isFloat(s.weightDtype))
    return usage(std::string("--weights-dtype must be a float type, not ") + dtypeName(s.weightDtype));
  return s;
}

Expected<DType> checkpointDtype(const ModelConfig& cfg) {
  const std::string& t = cfg.torchDtype;
  if (t.empty()) return DType::F32;
  if (t == "float32") return DType::F32;
  if (t == "bfloat16") return DType::BF16;
  if (t == "float16") return DType::F16;
  return cfg.fields.error(cfg.fields.has("torch_dtype") ? "torch_dtype" : "dtype",
                          "'" + t + "' is not a weight dtype the tracer declares (float32, bfloat16, float16): " +
                              "pass --weights-dtype f32, bf16 or f16");
}

std::string graphName(const ModelConfig& cfg, const TraceOptions& opts) {
  const char* phase = opts.phase == Phase::Decode ? "_decode" : opts.phase == Phase::Prefill ? "_prefill" : "_mixed";
  std::string n = cfg.modelType + phase;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0])) || n[0] == '.' || n[0] == '-') n = "m_" + n;
  return n;
}

ValueId declareTokens(Builder& b, const ops::Step& s) {
  return b.input("tokens", Type{DType::I32, {s.spec.batch, s.spec.tokens}});
}

}  // namespace poot::trace

// Models traced from a Hugging Face config.json as published: the config
// (ModelConfig, with typed access to every raw field through ConfigFields),
// the trace options (phase, KV layout, live bound, sizes), the registry of
// model families, and traceModel, which picks the family by model_type.
// Config errors are ErrorKind::Syntax errors located at the config file,
// naming the field: "field 'num_attention_heads': expected a positive
// integer". Adding a family means one new file (lib/trace/<family>.cpp,
// defining the parse and trace functions declared at the end of this header)
// plus one line in the registry (families.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/diag.h"
#include "ir/graph.h"
#include "trace/ops.h"

namespace poot::trace {

// Typed, read-only access to the fields of one JSON object of the config
// (the whole config, or a nested object such as rope_scaling). A field that is
// absent or JSON null counts as absent. Every getter that can fail returns
// the error the tracer reports: "field 'NAME': expected WHAT" (nested fields
// are named with their path, 'rope_scaling.factor') at the config file.
class ConfigFields {
 public:
  ConfigFields();  // an empty object
  // Parses JSON text; a syntax error is ErrorKind::Syntax at `file`, with
  // the line and column the JSON parser reports.
  static Expected<ConfigFields> parse(const std::string& text, const std::string& file);

  const std::string& file() const;
  bool has(std::string_view key) const;  // present and not null
  std::vector<std::string> keys() const; // in sorted order

  // Required fields (absent: "field 'K': missing, expected ...").
  Expected<int64_t> positiveInt(std::string_view key) const;
  Expected<double> number(std::string_view key) const;
  Expected<double> positiveNumber(std::string_view key) const;
  Expected<std::string> string(std::string_view key) const;
  // Optional fields with a fallback used when absent.
  Expected<int64_t> positiveInt(std::string_view key, int64_t fallback) const;
  Expected<int64_t> nonNegativeInt(std::string_view key, int64_t fallback) const;
  Expected<double> number(std::string_view key, double fallback) const;
  Expected<double> positiveNumber(std::string_view key, double fallback) const;
  Expected<bool> boolean(std::string_view key, bool fallback) const;
  Expected<std::string> string(std::string_view key, std::string fallback) const;
  // Optional fields with no fallback.
  Expected<std::optional<int64_t>> optionalPositiveInt(std::string_view key) const;
  Expected<std::optional<double>> optionalNumber(std::string_view key) const;
  Expected<std::optional<std::string>> optionalString(std::string_view key) const;
  Expected<std::vector<std::string>> strings(std::string_view key) const;  // absent: empty
  Expected<std::vector<int64_t>> ints(std::string_view key) const;         // absent: empty
  // A nested object (absent: nullopt; not an object: "expected an object").
  Expected<std::optional<ConfigFields>> object(std::string_view key) const;

  // The error for field `key` of this object: "field 'PATH': MESSAGE".
  Error error(std::string_view key, const std::string& message) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  explicit ConfigFields(std::shared_ptr<const Impl> impl);
  friend struct ConfigFieldsAccess;
};

// Rotary embedding parameters, read from rope_theta + rope_scaling or from
// the newer rope_parameters {rope_theta, rope_type, ...} spelling.
struct RopeConfig {
  double theta = 10000.0;
  std::string type = "default";  // rope_type (or the older "type")
  // Fields of the llama3 type (transformers' names in comments).
  double factor = 1.0;                // factor
  double lowFreqFactor = 1.0;         // low_freq_factor
  double highFreqFactor = 4.0;        // high_freq_factor
  double originalMaxPositions = 0.0;  // original_max_position_embeddings
  // The rope_scaling / rope_parameters object as published, for the types a
  // family reads itself (yarn, linear, ...); nullopt when there is none.
  std::optional<ConfigFields> params;
};

struct ModelConfig {
  std::string file;       // the config's path, for diagnostics
  std::string modelType;  // model_type
  int64_t hiddenSize = 0;        // hidden_size
  int64_t intermediateSize = 0;  // intermediate_size
  int64_t numLayers = 0;         // num_hidden_layers
  int64_t numHeads = 0;          // num_attention_heads
  int64_t numKvHeads = 0;        // num_key_value_heads (default: num_attention_heads)
  int64_t headDim = 0;           // head_dim (default: hidden_size / num_attention_heads)
  int64_t vocabSize = 0;         // vocab_size
  double normEps = 1e-6;         // rms_norm_eps (or the family's layer-norm epsilon)
  RopeConfig rope;
  bool tieWordEmbeddings = false;    // tie_word_embeddings (default false)
  bool qkvBias = false;              // biases on q/k/v_proj: attention_bias, or always for qwen2
  bool oBias = false;                // bias on o_proj: attention_bias (llama)
  bool mlpBias = false;              // mlp_bias
  std::optional<int64_t> slidingWindow;  // sliding_window, when in use (qwen2: use_sliding_window)
  int64_t maxPositions = 0;          // max_position_embeddings (0: absent)
  std::string hiddenAct = "silu";    // hidden_act (or hidden_activation)
  std::string torchDtype;            // torch_dtype (or dtype) as published; see checkpointDtype
  // Every field as published, for family-specific fields (Gemma-2's softcaps,
  // DeepSeek's MLA and MoE sizes, ...).
  ConfigFields fields;
};

// Reads the fields every llama-like family shares (the list above) into cfg.
// Families with other spellings (BLOOM's n_head, ...) read their own.
Status readCommonFields(const ConfigFields& f, ModelConfig& cfg);
// Reads rope_theta / rope_scaling or rope_parameters into cfg.rope, accepting
// any rope type; a family checks the types it supports.
Status readRopeFields(const ConfigFields& f, RopeConfig& rope);
// layer_types as transformers' configs give it, per layer: whether it is
// "sliding_attention" (else "full_attention"); empty when absent. Another
// length than num_hidden_layers, or another entry, is refused naming the
// field.
Expected<std::vector<bool>> readLayerTypes(const ModelConfig& cfg);
// inv_freq of the config's rope for a head of width dim: the default type,
// or llama3 scaling computed on the host. Other types are a config error
// naming the field and the supported types.
Expected<std::vector<double>> ropeInvFreq(const ModelConfig& cfg, int64_t dim);

// Reads and parses a config file: model_type picks the family, which reads
// its fields. An unknown model_type is an error listing the supported ones.
Expected<ModelConfig> loadConfig(const std::string& path);
Expected<ModelConfig> parseConfig(const std::string& text, const std::string& file);

// Decode: one token a row; prefill: `tokens` a row; mixed: `tokens` in all,
// spread over `batch` sequences as the step's caller chooses (a prefill chunk
// of some, one token of others), each token at its own position (paged only).
enum class Phase { Decode, Prefill, Mixed };

// What to trace. Unset means "the default": every layer of the config, one
// token for decode and 16 for prefill and mixed, capacity 256; poolSlots 0
// means batch * capacity pool slots. A value that is set is checked as given (0 layers is
// an error, not the default). Activations are in dtype (f32 whatever the
// config's torch_dtype says unless asked), the KV caches in kvDtype (unset:
// dtype); weights are declared in weightsDtype (unset: dtype), converted
// where they are used.
struct TraceOptions {
  Phase phase = Phase::Decode;
  ops::KvLayout kv = ops::KvLayout::Fixed;
  bool live = false;
  bool nextToken = false;  // --next-token: the output `next` beside the logits (ops::logits)
  std::optional<int64_t> layers;
  int64_t batch = 1;
  std::optional<int64_t> tokens;
  std::optional<int64_t> capacity;
  int64_t poolSlots = 0;
  DType dtype = DType::F32;
  std::optional<DType> kvDtype;
  std::optional<DType> weightsDtype;
};

// The dtype the config says its checkpoint stores weights in, the default of
// `pootc trace --weights-dtype`: torch_dtype (or dtype) "float32", "bfloat16"
// or "float16"; f32 when the config has neither field. Any other value is a
// config error naming the field and the flag.
Expected<DType> checkpointDtype(const ModelConfig& cfg);

inline constexpr int64_t kDefaultPrefillTokens = 16;
inline constexpr int64_t kDefaultCapacity = 256;

// The resolved step (defaults filled in and checked: ErrorKind::Usage for a
// nonsensical option, such as more layers than the config has).
Expected<ops::StepSpec> resolveStep(const ModelConfig& cfg, const TraceOptions& opts);
Expected<int64_t> resolveLayers(const ModelConfig& cfg, const TraceOptions& opts);
// "<model_type>_<phase>", with characters outside the identifier set made '_'.
std::string graphName(const ModelConfig& cfg, const TraceOptions& opts);

// Declares `tokens` i32[B, L] (range of use: [0, vocab)).
ValueId declareTokens(Builder& b, const ops::Step& s);

// ---------------------------------------------------------------------------
// The family registry.

struct Family {
  const char* name;                     // "llama"
  std::vector<const char*> modelTypes;  // model_type values it traces
  // Reads the family's fields (usually readCommonFields plus its own checks).
  Status (*parse)(const ConfigFields& f, ModelConfig& cfg);
  // Traces the model; the config came from this family's parse.
  Expected<Graph> (*trace)(const ModelConfig& cfg, const TraceOptions& opts);
};

// Every registered family, in registration order (families.cpp).
const std::vector<Family>& families();
const Family* findFamily(std::string_view modelType);
// "bloom, deepseek_v2, gemma2, llama, ..." sorted.
std::string supportedModelTypes();

// Picks the family by cfg.modelType and traces.
Expected<Graph> traceModel(const ModelConfig& cfg, const TraceOptions& opts);

// ---------------------------------------------------------------------------
// Family entry points, one pair per file. To add a family: write its .cpp
// defining these two functions, and add its line to the table in
// families.cpp (lib/trace/CMakeLists.txt picks up every .cpp by itself).

// llama.cpp: model_type llama, mistral, qwen2.
Status parseLlama(const ConfigFields& f, ModelConfig& cfg);
Expected<Graph> traceLlama(const ModelConfig& cfg, const TraceOptions& opts);
// The head every family on a Llama body shares (llama, deepseek_v2, the
// sparse family): the final RMSNorm (model.norm.weight), then the logits
// through lm_head.weight or, with tied embeddings, the embedding `embed`.
void llamaHead(Builder& b, const ModelConfig& cfg, const ops::Step& step, ValueId x, ValueId embed);

// EXTENSION POINT gemma2.cpp: model_type gemma2 (softcaps, alternating
// sliding windows, (1 + w) norms, GeGLU, scaled embeddings).
Status parseGemma2(const ConfigFields& f, ModelConfig& cfg);
Expected<Graph> traceGemma2(const ModelConfig& cfg, const TraceOptions& opts);

// EXTENSION POINT bloom.cpp: model_type bloom (ALiBi, LayerNorm, GELU MLP).
Status parseBloom(const ConfigFields& f, ModelConfig& cfg);
Expected<Graph> traceBloom(const ModelConfig& cfg, const TraceOptions& opts);

// EXTENSION POINT deepseek_v2.cpp: model_type deepseek_v2 (MLA split keys, MoE).
Status parseDeepseekV2(const ConfigFields& f, ModelConfig& cfg);
Expected<Graph> traceDeepseekV2(const ModelConfig& cfg, const TraceOptions& opts);

// EXTENSION POINT sparse_indexer.cpp: the sparse-indexer family (block
// selection stated as primitives for BlockTopK / SelectedAttention).
Status parseSparseIndexer(const ConfigFields& f, ModelConfig& cfg);
Expected<Graph> traceSparseIndexer(const ModelConfig& cfg, const TraceOptions& opts);

}  // namespace poot::trace

// What the pootc subcommands do, separated from their command-line parsing
// (main.cpp) so CLI11 stays in one file. Each command returns its exit code:
// 0 ok, 1 a diagnostic about the input, 2 bad usage, 3 a capability refusal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "diagnostics.h"
#include "ir/graph.h"
#include "plan/profile.h"

namespace poot {

struct CompileOptions {
  std::string graph;
  std::string device;
  std::string output;       // empty: standard output (text forms only)
  std::string emit = "plan";
  std::string printAfter;   // a pass name or "all"
  std::string stopAfter;
  bool remarks = false;     // print why each candidate pattern did not fire
  std::string dumpKernels;  // a directory for each kernel's blob (.spv, .ptx, .hsaco)
  bool timePhases = false;  // print each phase's wall time to stderr
  std::string sign;         // a secret key file (pootc keygen): also write OUTPUT.sig
};

int runCompile(const CompileOptions& opts);

// --device: a profile file, or the name of a shipped target: NAME.yaml in
// the installed targets (share/poot/targets of the prefix pootc runs from),
// then in the source tree's.
Expected<DeviceProfile> deviceProfile(const std::string& device);

// pootc keygen -o NAME: a plan-signing key pair, NAME.key and NAME.pub.
int runKeygen(const std::string& name);

struct EvalOptions {
  std::string graph;
  std::string weights;               // a checkpoint (file, index or directory), optional
  std::vector<std::string> inputs;   // NAME=FILE.npy
  std::vector<std::string> slots;    // NAME=VALUE or NAME=FILE.npy
  std::string outputDir = ".";
  uint64_t seed = 0;
};

int runEval(const EvalOptions& opts);

struct WeightsOptions {
  std::string graph;
  std::string output;  // the .safetensors file to write
  uint64_t seed = 0;
};

int runWeights(const WeightsOptions& opts);

struct TraceOptions {
  std::string config;
  std::string phase = "decode";  // decode | prefill
  std::string kv = "fixed";      // fixed | paged
  bool live = false;
  bool nextToken = false;
  std::optional<int64_t> layers;    // unset: the config's own count
  int64_t batch = 1;
  std::optional<int64_t> tokens;    // unset: 1 for decode, a default prompt length for prefill
  std::optional<int64_t> capacity;  // unset: a default KV capacity
  std::optional<int64_t> poolSlots; // paged only; unset: batch * capacity
  std::string dtype;                // f32 | bf16 | f16: activations; empty: the weights' dtype
  std::string kvDtype;              // f32 | bf16 | f16; empty: dtype
  std::string weightsDtype;         // f32 | bf16 | f16; empty: the config's torch_dtype (or dtype), else f32
  std::string output;    // empty: standard output
};

int runTrace(const TraceOptions& opts);

// pootc package MODEL_DIR --device D -o OUT_DIR: a model as one folder
// (tools/common/package.h): MODEL_DIR/config.json traced into a paged prefill
// and a live paged decode graph of one pool, both compiled for D, the
// model's tokenizer and generation config copied, and a manifest.
struct PackageOptions {
  std::string model;             // a directory holding config.json
  std::string device;
  std::string output;            // the folder to create; must not exist
  int64_t prefillBatch = 2;      // rows of a prefill step
  int64_t tokens = 16;           // prompt tokens a prefill row takes a step
  int64_t decodeBatch = 4;       // rows of a decode step
  int64_t capacity = 256;        // KV positions a sequence may hold
  std::optional<int64_t> poolSlots;  // unset: decodeBatch * capacity
  std::optional<int64_t> mixedTokens;  // the mixed plan's tokens over decodeBatch sequences; 0: none;
                                       // unset: decodeBatch + tokens (none at a decodeBatch of 1)
};

int runPackage(const PackageOptions& opts);

struct InspectOptions {
  std::string plan;   // a plan file, read through the runtime's reader
  bool json = false;  // print JSON instead of the plan text
  bool dot = false;   // print the arena over time as Graphviz text
};

int runInspect(const InspectOptions& opts);

// Writes a graph to `output` (standard output when empty or "-"): the binary
// form when the name ends in .pgb, else the text form; atomically, so a
// failure leaves no file. Returns the exit code.
int emitGraph(const Graph& g, const std::string& output);
int emitBytes(const std::string& bytes, const std::string& output);

}  // namespace poot

// What the poot subcommands do, separated from their command-line parsing
// (main.cpp) so CLI11 stays in one file. Each command returns its exit code:
// 0 ok, 1 a diagnostic about the input, 2 bad usage, 3 a capability refusal
// (which includes a host without the backend's driver).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "diagnostics.h"
#include "engine/sample.h"

namespace poot {

struct RunOptions {
  std::string plan;
  std::string backend = "vulkan";
  std::string device;                // a device index or name piece; empty: the backend's choice
  bool allowOtherDevice = false;     // run a plan built for another device
  std::string weights;               // a checkpoint (file, index or directory), optional
  std::vector<std::string> inputs;   // NAME=FILE.npy (inputs and states)
  std::vector<std::string> slots;    // NAME=VALUE or NAME=FILE.npy
  std::string outputDir = ".";
  std::string saveStates;            // where to write each state's new value; empty: nowhere
  uint64_t seed = 0;
  int64_t iterations = 1;
  bool profile = false;              // then as many steps again, timed dispatch by dispatch
  bool check = false;
  bool noReplay = false;             // cuda: launch in order at every step, no graph
  std::vector<std::string> trust;    // public keys: run only a plan signed by one of them
};

int runRun(const RunOptions& opts);

// What generate and serve take alike: one model's paged plans (pootc trace
// --kv paged), its weights and end ids, the keys its plans must be signed
// by, and the device that runs them.
struct EngineArgs {
  std::vector<std::string> plans;    // a package folder (pootc package), or the prefill and the decode plan
  std::string prefillPlan, decodePlan;  // from plans, by resolveEngineArgs
  std::string mixedPlan;             // a mixed plan (pootc trace --phase mixed), optional
  std::string package;               // the package folder plans named; empty: two plan files
  std::string weights;               // a checkpoint (file, index or directory), optional
  std::string config;                // a config.json or generation_config.json for eos_token_id
  std::vector<int32_t> eos;          // end-of-sequence ids; they win over any config
  std::vector<std::string> trust;    // public keys: run only plans signed by one of them
  bool noPrefixCache = false;
  std::string backend = "vulkan";
  std::string device;
  bool allowOtherDevice = false;
};

// Sets prefillPlan and decodePlan from plans: the two files named, or the
// plans of the package folder named (tools/common/package.h), after its
// manifest is checked: its format and version, every file it lists
// present, the config's hash, and when --weights is a directory with a
// config.json, that it is the packaged one. A package without --eos and
// --config ends generations at the eos_token_id of its generation_config.json,
// else of its config.json.
Status resolveEngineArgs(EngineArgs& a);

struct GenerateOptions {
  EngineArgs engine;
  std::string prompts;                  // one prompt a line, token ids separated by spaces (text with a tokenizer)
  std::string tokenizer;                // a tokenizer.json or its directory: text prompts, text out
  bool chat = false;                    // each prompt a JSON messages array through tokenizer_config.json's chat template
  std::vector<std::string> adapters;    // NAME=DIR: PEFT LoRA adapters prompts name as @NAME
  int64_t maxNew = 16;                  // tokens to generate a prompt
  SampleOptions sampling;               // temperature 0: greedy
  std::string output;                   // FILE.jsonl; empty: none
};

int runGenerate(const GenerateOptions& opts);

struct ChatOptions {
  EngineArgs engine;
  std::string tokenizer;  // a tokenizer.json or its directory, with tokenizer_config.json's chat template beside it
  std::string system;     // a system message that opens every conversation; empty: none
  int64_t maxNew = 256;   // tokens a reply may take
  SampleOptions sampling; // temperature 0: greedy
};

int runChat(const ChatOptions& opts);

struct ServeOptions {
  EngineArgs engine;
  std::string tokenizer;                // a tokenizer.json or its directory (tokenizer_config.json beside it: the chat template)
  std::string model;                    // the name requests give; empty: the tokenizer's directory's name
  std::string host = "127.0.0.1";
  int port = 8000;                      // 0: a free port (the log says which)
};

int runServe(const ServeOptions& opts);

struct ProbeOptions {
  std::string backend = "vulkan";
  std::string device;
  std::string output;  // the profile to write
};

int runProbe(const ProbeOptions& opts);

struct TokenizeOptions {
  std::string model;       // a tokenizer.json or the directory holding it
  bool decode = false;     // lines of ids to text (else lines of text to ids)
  bool noSpecial = false;  // encode: no template tokens; decode: special tokens left out
  std::string chat;        // a JSON messages array to render through the chat template ("-": stdin); empty: none
  bool ids = false;        // chat: print the rendered text's token ids, not the text
  bool noGenerationPrompt = false;  // chat: add_generation_prompt false
};

int runTokenize(const TokenizeOptions& opts);

struct KernelsOptions {
  std::string plan;
  std::string backend = "vulkan";
  std::string device;
  bool allowOtherDevice = false;  // build a plan made for another device of the same target
  std::vector<std::string> trust;  // public keys: build only a plan signed by one of them
};

int runKernels(const KernelsOptions& opts);

}  // namespace poot

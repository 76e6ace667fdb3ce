// pootc: the compiler driver. This file holds the command line (CLI11) and
// nothing else; the commands themselves live beside it.
#include <CLI/CLI.hpp>

#include <new>
#include <stdexcept>

#include "codegen/codegen.h"
#include "command_line.h"
#include "driver.h"
#include "ir/budget.h"
#include "plan/plan_file.h"

int main(int argc, char** argv) {
  CLI::App app{"pootc: ahead-of-time compiler for transformer inference graphs.\n"
               "Reads a traced graph (.pg text or .pgb binary) and a device profile (targets/*.yaml),\n"
               "recognizes attention in the primitive ops, plans kernels for the device and writes a plan.\n"
               "Exit codes: 0 ok, 1 a diagnostic about the input, 2 bad usage, 3 a capability refusal."};
  app.require_subcommand(1);

  poot::CompileOptions copts;
  CLI::App* compile = app.add_subcommand("compile", "compile a graph for a device");
  compile->footer("Examples:\n"
                  "  pootc compile examples/graphs/decode-attention.pg --device targets/lavapipe.yaml --emit=graph\n"
                  "  pootc compile g.pg --device targets/nvidia-h200.yaml --emit=graph -o g.pgb   (binary graph)\n"
                  "  pootc compile g.pg --device targets/lavapipe.yaml --emit=graph --print-after=all\n"
                  "  pootc compile g.pg --device targets/lavapipe.yaml -o g.plan --dump-kernels kernels/\n"
                  "  pootc compile g.pg --device targets/nvidia-h200.yaml --emit=kir   (the kernels before emission)");
  compile->add_option("GRAPH", copts.graph, "graph file, .pg text or .pgb binary (detected by content)")
      ->required();
  compile->add_option("--device", copts.device,
                      "device profile (YAML), e.g. targets/lavapipe.yaml, or a shipped target's name, e.g. lavapipe")
      ->required();
  compile->add_option("-o,--output", copts.output,
                      "output file; for --emit=graph a name ending in .pgb gets the binary form, "
                      "anything else the text form; default: standard output");
  compile->add_option("--emit", copts.emit,
                      "what to write: plan (the default; needs -o), plan-text, graph (the graph after the passes), "
                      "kir (every kernel's KIR, before SPIR-V or LLVM)")
      ->check(CLI::IsMember({"graph", "kir", "plan-text", "plan"}));
  compile->add_option("--print-after", copts.printAfter, "print the graph to stderr after PASS, or after every pass (all)");
  compile->add_option("--stop-after", copts.stopAfter, "stop the pipeline after PASS");
  compile->add_flag("--remarks", copts.remarks,
                    "print, for every candidate chain a pass did not rewrite, the eqn and the check that declined it");
  compile->add_option("--dump-kernels", copts.dumpKernels,
                      "also write each kernel's blob into DIR (created if missing) as ENTRY.spv, ENTRY.ptx or "
                      "ENTRY.hsaco; with --emit=plan or plan-text");
  compile->add_flag("--time-phases", copts.timePhases,
                    "print the wall time of each phase (read, every pass, plan, buffers, kir, emit, write) to stderr");
  compile->add_option("--sign", copts.sign,
                      "a secret key file (pootc keygen): also write the plan's signature as FILE.plan.sig, which "
                      "'poot run --trust KEY.pub' checks");


  CLI::App* inspect = app.add_subcommand("inspect", "print a plan: buffers, arena map, kernels, dispatches");
  poot::InspectOptions iopts;
  inspect->footer("The plan file is read and checked as the runtime reads it; the text is what\n"
                  "'pootc compile --emit=plan-text' prints for the same plan.\n"
                  "Examples:\n"
                  "  pootc inspect llama.plan\n"
                  "  pootc inspect llama.plan --dot | neato -n2 -Tsvg > arena.svg");
  inspect->add_option("PLAN", iopts.plan, "plan file")->required();
  inspect->add_flag("--json", iopts.json, "print JSON");
  inspect->add_flag("--dot", iopts.dot, "print the arena over time as Graphviz text (neato -n2)")->excludes("--json");

  poot::EvalOptions eopts;
  CLI::App* eval = app.add_subcommand("eval", "evaluate a graph on the CPU with the reference interpreter (the oracle)");
  eval->footer("Parameters not named on the command line come from a seeded generator (--seed).\n"
               "Examples:\n"
               "  pootc eval examples/graphs/decode-attention.pg --slot pos=5 --output-dir out/\n"
               "  pootc eval model.pg --weights model.safetensors --input tokens=t.npy --slot pos=0\n"
               "  pootc eval model.pg --weights path/to/Qwen2.5-0.5B/ --input tokens=t.npy --slot pos=0");
  eval->add_option("GRAPH", eopts.graph, "graph file (.pg or .pgb)")->required();
  eval->add_option("--weights", eopts.weights,
                    "a checkpoint: a .safetensors file, a shard index (.json) or a model directory (its "
                    "model.safetensors.index.json, else its one .safetensors file); bound by tensor name");
  eval->add_option("--input", eopts.inputs, "NAME=FILE.npy: bind an input (repeatable)");
  eval->add_option("--slot", eopts.slots, "NAME=VALUE or NAME=FILE.npy: bind a slot (repeatable)");
  eval->add_option("--output-dir", eopts.outputDir, "where to write one NAME.npy per output (default: .)");
  eval->add_option("--seed", eopts.seed, "seed of the generator for unnamed parameters (default: 0)");

  poot::WeightsOptions wopts;
  CLI::App* weights = app.add_subcommand(
      "weights", "write a checkpoint of a graph's weights drawn by the seeded generator (a model with no checkpoint)");
  weights->footer("Every weight the graph declares, drawn as 'poot run' and 'pootc eval' draw the parameters no one\n"
                  "names (the same --seed gives the same values), written as one .safetensors file under the\n"
                  "weights' own names and dtypes. A plan of the graph run with --weights FILE computes what it\n"
                  "computes without --weights at that seed.\n"
                  "Examples:\n"
                  "  pootc trace examples/models/tiny-llama.json --phase decode -o d.pg\n"
                  "  pootc weights d.pg -o tiny-llama.safetensors --seed 5");
  weights->add_option("GRAPH", wopts.graph, "graph file (.pg or .pgb)")->required();
  weights->add_option("-o,--output", wopts.output, "the .safetensors file to write")->required();
  weights->add_option("--seed", wopts.seed, "seed of the generator (default: 0)");

  poot::TraceOptions topts;
  CLI::App* trace = app.add_subcommand("trace", "trace a model config (a Hugging Face config.json) into a graph");
  trace->footer("Examples:\n"
                "  pootc trace examples/models/llama-3-8b.json --phase decode --layers 1 -o llama.pg\n"
                "  pootc trace examples/models/tiny-llama.json --phase prefill --tokens 8 --kv paged -o p.pg\n"
                "  pootc trace examples/models/tiny-llama.json --phase mixed --tokens 32 --batch 4 --kv paged --live -o m.pg\n"
                "  pootc trace examples/models/qwen2.5-0.5b.json --weights-dtype f32 -o q32.pg   (f32 weights and activations)\n"
                "  pootc trace examples/models/llama-3-8b.json --dtype f32 -o l.pg   (its bf16 weights, f32 activations and KV cache)");
  trace->add_option("CONFIG", topts.config, "model config (config.json as published)")->required();
  trace->add_option("--phase", topts.phase,
                    "decode (one token a row), prefill (--tokens a row: the prompt) or mixed (--tokens in all over "
                    "--batch sequences, each token at its own position: prefill chunks beside decodes; --kv paged)")
      ->check(CLI::IsMember({"decode", "prefill", "mixed"}));
  trace->add_option("--kv", topts.kv, "KV cache layout: fixed (capacity per layer) or paged (block pools)")
      ->check(CLI::IsMember({"fixed", "paged"}));
  trace->add_flag("--live", topts.live, "bound attention by the live length (len = pos + tokens), with its guard");
  trace->add_flag("--next-token", topts.nextToken,
                  "also output `next` (i32, a row of logits each): the token each row picks on the device under the "
                  "inputs temperature, top_k, top_p, min_p and uniform (one a row; temperature 0 is the first "
                  "largest logit) after the penalties repetition_penalty, seen and seen_penalty (a list a sequence), "
                  "so a step reads token ids instead of logits (poot generate and serve do)");
  // Set only when given, so that 0 is checked like any other count rather
  // than read as "the default".
  auto given = [](std::optional<int64_t>& to) { return [&to](const int64_t& v) { to = v; }; };
  trace->add_option_function<int64_t>("--layers", given(topts.layers),
                                      "number of layers to trace (default: all of the config's)");
  trace->add_option("--batch", topts.batch, "batch rows, the sequences of a step (default: 1)");
  trace->add_option_function<int64_t>("--tokens", given(topts.tokens),
                                      "tokens a row (default: 1 for decode, 16 for prefill); mixed: in all");
  trace->add_option_function<int64_t>("--capacity", given(topts.capacity), "KV positions held per row (default: 256)");
  trace->add_option_function<int64_t>("--pool-slots", given(topts.poolSlots),
                                      "with --kv paged: slots of each layer's K and V pool, shared by the rows "
                                      "(default: batch * capacity)");
  trace->add_option("--dtype", topts.dtype,
                    "the activations' dtype (default: the weights' dtype, as transformers 5 loads a checkpoint; "
                    "f32 computes a bf16 checkpoint in f32); norm statistics, softmax and RoPE tables stay f32 "
                    "where transformers keeps them f32")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  trace->add_option("--kv-dtype", topts.kvDtype, "the KV cache's dtype (default: --dtype)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  trace->add_option("--weights-dtype", topts.weightsDtype,
                    "the dtype weights are declared in, as the checkpoint stores them (default: the config's "
                    "torch_dtype or dtype, else f32)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  trace->add_option("-o,--output", topts.output, "output graph; .pgb gets the binary form (default: standard output)");

  poot::PackageOptions kopts;
  CLI::App* package = app.add_subcommand(
      "package", "a model as one folder: its paged prefill, decode and mixed plans for a device, its tokenizer, a manifest");
  package->footer(
      "Traces MODEL_DIR/config.json into a paged prefill graph (--prefill-batch rows of --tokens prompt tokens),\n"
      "a live paged decode graph (--batch rows of one token) and a live mixed graph (--mixed-tokens over --batch\n"
      "sequences: generated tokens beside prompt chunks), all of --capacity positions a sequence over one pool\n"
      "of --pool-slots slots, compiles them for --device as 'pootc trace' and 'pootc compile' would, and\n"
      "writes OUT_DIR with:\n"
      "  prefill.plan, decode.plan, mixed.plan   the plans 'poot generate' and 'poot serve' take\n"
      "  config.json                   the model's config, as given\n"
      "  generation_config.json, tokenizer.json, tokenizer_config.json   copied when MODEL_DIR has them\n"
      "  manifest.json                 the plans and their shapes, the profile, the config's hash (FNV-1a 64),\n"
      "                                poot's version and the plan format (docs/runtime.md, 'A model as one folder')\n"
      "OUT_DIR must not exist; it appears only when everything in it is written. Weights are not copied: give\n"
      "them to 'poot serve OUT_DIR --weights MODEL_DIR' (a directory whose config.json differs from the\n"
      "packaged one is refused).\n"
      "Examples:\n"
      "  pootc package models/qwen3-0.6b --device nvidia-h200 -o qwen3-h200\n"
      "  pootc package tiny/ --device lavapipe -o tiny-pkg --batch 8 --capacity 128\n"
      "  poot serve qwen3-h200 --weights models/qwen3-0.6b --backend cuda --port 8000");
  package->add_option("MODEL_DIR", kopts.model, "a model directory holding config.json (tokenizer files optional)")
      ->required();
  package->add_option("--device", kopts.device,
                      "device profile (YAML) or a shipped target's name, e.g. lavapipe or nvidia-h200")
      ->required();
  package->add_option("-o,--output", kopts.output, "the folder to write (must not exist)")->required();
  package->add_option("--prefill-batch", kopts.prefillBatch, "rows of a prefill step (default: 2)");
  package->add_option("--tokens", kopts.tokens, "prompt tokens a prefill row takes a step (default: 16)");
  package->add_option("--batch", kopts.decodeBatch, "rows of a decode step: sequences generating at once (default: 4)");
  package->add_option("--capacity", kopts.capacity, "KV positions a sequence holds, prompt and output (default: 256)");
  package->add_option_function<int64_t>("--mixed-tokens", given(kopts.mixedTokens),
                                        "tokens of a mixed step, over --batch sequences (default: --batch + --tokens; "
                                        "0: no mixed plan, and none at --batch 1)");
  package->add_option_function<int64_t>("--pool-slots", given(kopts.poolSlots),
                                        "slots of each layer's K and V pool, shared by all sequences "
                                        "(default: --batch * --capacity)");

  std::string keyName;
  CLI::App* keygen = app.add_subcommand("keygen", "make a key pair for signing plans (Ed25519)");
  keygen->footer("Writes NAME.key, the secret key (mode 0600: whoever holds it can sign plans your runtimes\n"
                 "trust), and NAME.pub, the public key to give to 'poot run --trust'. Neither file is ever\n"
                 "replaced. docs/plan-file.md says what a signature guarantees.\n"
                 "Examples:\n"
                 "  pootc keygen -o release\n"
                 "  pootc compile g.pg --device targets/lavapipe.yaml -o g.plan --sign release.key\n"
                 "  poot run g.plan --trust release.pub");
  keygen->add_option("-o,--output", keyName, "the key pair's name: writes NAME.key and NAME.pub")->required();

  std::string version = std::string("pootc ") + POOT_VERSION + " (plan format " + std::to_string(poot::kPlanFileVersion) +
                        ", LLVM " + poot::llvmVersion() + ")";
  if (auto code = poot::parseCommandLine(app, argc, argv, version)) return *code;

  // Work past the host memory budget is refused before it allocates
  // (ir/budget.h); an allocation that fails all the same is a diagnostic too.
  auto code = poot::catchingOutOfMemory([&] {
    if (*compile) return poot::runCompile(copts);
    if (*inspect) return poot::runInspect(iopts);
    if (*eval) return poot::runEval(eopts);
    if (*weights) return poot::runWeights(wopts);
    if (*trace) return poot::runTrace(topts);
    if (*package) return poot::runPackage(kopts);
    if (*keygen) return poot::runKeygen(keyName);
    return 2;
  });
  return code ? *code : poot::report(code.error());
}

// poot: the runtime's tool, what a GPU host needs to run compiled plans. This
// file holds the command line (CLI11) and nothing else; the commands live
// beside it.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <new>
#include <stdexcept>

#include "command_line.h"
#include "ir/budget.h"
#include "runtime/plan_reader.h"
#include "tool.h"

namespace {

// The options generate and serve take alike (poot::EngineArgs), after each
// command's own.
// The sampling options of generate and chat (engine/sample.h).
void addSamplingArgs(CLI::App* cmd, poot::SampleOptions& s) {
  cmd->add_option("--temperature", s.temperature, "0 is greedy (default); above 0, seeded sampling")
      ->check(poot::floatIn(0, 1e6));
  cmd->add_option("--top-p", s.topP, "sample from the most likely tokens of this much probability (default: 1)")
      ->check(poot::floatIn(0, 1, /*aboveLo=*/true));
  cmd->add_option("--top-k", s.topK, "sample from the K most likely tokens (default: 0, every token)")
      ->check(CLI::Range(0, 1 << 30));
  cmd->add_option("--min-p", s.minP, "sample from the tokens at least this fraction as likely as the likeliest (default: 0)")
      ->check(poot::floatIn(0, 1));
  cmd->add_option("--repetition-penalty", s.repetitionPenalty,
                  "divide a positive logit of a token the prompt or output holds by this, multiply a negative one "
                  "(default: 1, off)")
      ->check(poot::floatIn(0, 1e6, /*aboveLo=*/true));
  cmd->add_option("--frequency-penalty", s.frequencyPenalty,
                  "take this times its count in the output from a token's logit (-2..2, default: 0)")
      ->check(poot::floatIn(-2, 2));
  cmd->add_option("--presence-penalty", s.presencePenalty,
                  "take this from the logit of a token the output holds (-2..2, default: 0)")
      ->check(poot::floatIn(-2, 2));
  cmd->add_option("--seed", s.seed, "seed of sampling; each request draws from its own generator (default: 0)");
}

void addEngineArgs(CLI::App* cmd, poot::EngineArgs& a) {
  cmd->add_option("PLANS", a.plans,
                  "a package folder (pootc package), or PREFILL_PLAN DECODE_PLAN: the paged prefill plan and the "
                  "paged decode plan (one token a row)")
      ->required()
      ->expected(1, 2);
  cmd->add_option("--mixed", a.mixedPlan,
                  "a mixed plan (pootc trace --phase mixed) of the same model: steps where some sequences generate "
                  "and others have prompt left run both together, prompt chunks in the places the sampled tokens "
                  "leave");
  cmd->add_option("--weights", a.weights, "a checkpoint: a .safetensors file, a shard index (.json) or a model directory");
  cmd->add_option("--config", a.config,
                  "a config.json or generation_config.json whose eos_token_id ends a generation");
  cmd->add_option("--eos", a.eos, "an end-of-sequence id (repeatable; wins over any config)");
  cmd->add_option("--trust", a.trust,
                  "a public key file (pootc keygen): refuse both plans unless each PLAN.sig is its signature by "
                  "this key (repeatable: any of them)");
  cmd->add_flag("--no-prefix-cache", a.noPrefixCache, "compute every prompt's prefill, reuse no cached K/V");
  cmd->add_option("--backend", a.backend, "vulkan (spirv plans) or cuda (ptx plans) (default: vulkan)")
      ->check(CLI::IsMember({"vulkan", "cuda", "hip"}));
  cmd->add_option("--device", a.device, "which device: an index or a piece of its name");
  cmd->add_flag("--allow-other-device", a.allowOtherDevice, "run plans built for another device of the same target");
}

// A command's --tokenizer, by default the package folder's (when PLANS named
// one holding tokenizer.json): what serve and chat take their text through.
poot::Status resolveTokenizer(std::string& tokenizer, const poot::EngineArgs& a, const char* command) {
  if (!tokenizer.empty()) return poot::ok();
  if (a.package.empty() || !std::filesystem::exists(a.package + "/tokenizer.json"))
    return poot::makeError(poot::ErrorKind::Usage, {},
                           "--tokenizer is required: " + (a.package.empty() ? std::string(command) + " takes text"
                                                                            : "the package " + a.package +
                                                                                  " has no tokenizer.json"));
  tokenizer = a.package;
  return poot::ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"poot: runs plans compiled by pootc on a GPU, generates tokens with them, says what the driver made of\n"
               "their kernels, and describes the GPU for pootc.\n"
               "Exit codes: 0 ok, 1 a diagnostic about the input (a bad bind, a failed validation,\n"
               "a --check out of tolerance), 2 bad usage, 3 a capability refusal (no driver, another device)."};
  app.require_subcommand(1);

  poot::RunOptions ropts;
  CLI::App* run = app.add_subcommand("run", "run a plan: bind its parameters, run one step, write its outputs");
  run->footer("Inputs, weights, states and slots not named on the command line come from the same seeded\n"
              "generator as 'pootc eval' (--seed), so both agree on the same seed. With --iterations N the\n"
              "states are reset to their first values before every step, every step computes the same thing,\n"
              "and medians over the steps are printed (docs/runtime.md, 'Timing'):\n"
              "  median step time: T ms over N steps\n"
              "    the host's clock, from the step's first submission to the return of its last wait (the\n"
              "    validation reads between included; binds, uploads and output reads not)\n"
              "  median device time: D ms (the step's launches on the device, by its own timer)\n"
              "    the device's clock over the step's programs: CUDA events, Vulkan timestamps\n"
              "  median host overhead per dispatch: H us ((step time - device time) / K dispatches, replayed)\n"
              "    each step's host time outside the device's span, over the plan's K dispatches ('launched in\n"
              "    order' with --no-replay): on CUDA recording the start event, waking after the stop event and\n"
              "    the validation reads (the launch calls run inside the span); on Vulkan also the submission.\n"
              "    A device waiting for the host's launches counts the wait as device time: the step times with\n"
              "    and without --no-replay tell what replay saves.\n"
              "The last two lines only where the backend times the device. --no-replay (cuda and hip) launches\n"
              "every dispatch in order at every step instead of replaying the program recorded once as a CUDA\n"
              "or HIP graph; the outputs are the same, byte for byte.\n"
              "--check evaluates the plan's source graph with the oracle on the same parameters and compares\n"
              "every element of every output and of every state's new value (read back from the device): PASS when |device - oracle| <= abs + rel * |oracle|, with (abs, rel) =\n"
              "(1e-4, 1e-3) for f32 (room for GPU exp/tanh/rsqrt approximations and another summation\n"
              "order), (1e-2, 1e-2) for f16, (1e-2, 2e-2) for bf16, and exact for integers and bools; NaN\n"
              "matches only NaN. A float output of a graph that computes in f16 or bf16 (an arithmetic eqn\n"
              "or a Convert with such a result) takes that dtype's figures even when it is f32, as logits\n"
              "converted at the end are,\n"
              "and its abs is times the output's largest |oracle| (at least 1).\n"
              "Exit 1 when an output or a state fails or the validations differ.\n"
              "Examples:\n"
              "  poot run llama.plan --slot pos=5 --check\n"
              "  poot run llama.plan --weights model.safetensors --input tokens=t.npy --slot pos=0 --output-dir out/\n"
              "  poot run llama.plan --iterations 20\n"
              "  poot run llama.plan --backend cuda --iterations 20 --no-replay");
  run->add_option("PLAN", ropts.plan, "plan file (pootc compile -o PLAN)")->required();
  run->add_option("--trust", ropts.trust, "a public key file (pootc keygen): refuse the plan unless PLAN.sig is its signature by this key "
                  "(repeatable: any of them); checked before anything in the plan is read");
  run->add_option("--backend", ropts.backend,
                  "where to run it: vulkan (spirv plans) or cuda (ptx plans; the device from --device or "
                  "POOT_CUDA_DEVICE, else device 0) (default: vulkan)")
      ->check(CLI::IsMember({"vulkan", "cuda", "hip"}));
  run->add_option("--device", ropts.device,
                  "which device: an index or a piece of its name (default: POOT_VULKAN_DEVICE, else the first "
                  "discrete GPU)");
  run->add_flag("--allow-other-device", ropts.allowOtherDevice,
                "run a plan built for another device of the same target (it runs correctly, not as planned)");
  run->add_option("--weights", ropts.weights,
                 "a checkpoint: a .safetensors file, a shard index (.json) or a model directory (its "
                 "model.safetensors.index.json, else its one .safetensors file); bound by tensor name");
  run->add_option("--input", ropts.inputs, "NAME=FILE.npy: bind an input or a state's first value (repeatable)");
  run->add_option("--slot", ropts.slots, "NAME=VALUE or NAME=FILE.npy: bind a slot (repeatable)");
  run->add_option("--output-dir", ropts.outputDir, "where to write one NAME.npy per output (default: .)");
  run->add_option("--save-states", ropts.saveStates,
                  "also write every state's new value (after one step from its first value) into DIR as NAME.npy; "
                  "--input NAME=DIR/NAME.npy binds it as the next step's first value");
  run->add_option("--seed", ropts.seed, "seed of the generator for unnamed parameters (default: 0)");
  run->add_option("--iterations", ropts.iterations,
                  "steps to run; with more than one the medians below are printed (default: 1)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  run->add_flag("--profile", ropts.profile,
                "then run --iterations steps more, each timing every dispatch on the device (in order, no replay), "
                "and print each dispatch's median time and share of the step beside its op, schedule, grid, bytes "
                "and rates (one JSON object a dispatch with --diagnostics json)");
  run->add_flag("--check", ropts.check, "compare every output and state with the oracle (see the tolerances above)");
  run->add_flag("--no-replay", ropts.noReplay,
                "cuda, hip: launch the dispatches in order at every step instead of replaying a CUDA or HIP graph");

  poot::GenerateOptions gopts;
  CLI::App* gen = app.add_subcommand(
      "generate", "generate tokens for a file of prompts over a paged prefill plan and a paged decode plan");
  gen->footer("Both plans come from one model: pootc trace --kv paged, --phase prefill (any --tokens) and\n"
              "--phase decode, the same --capacity and pool, compiled for the device (docs/runtime.md,\n"
              "'Generating tokens'), or both from the folder 'pootc package' writes, named instead. Each prompt line is token ids separated by spaces (text with --tokenizer; a\n"
              "JSON messages array with --chat, rendered through the model's chat template).\n"
              "Prompts run as the plans' batch rows; a new one is admitted as soon as another finishes and the\n"
              "pool can hold it to its last token. The rows of one step share a position, so each step serves the prompts furthest behind.\n"
              "A prompt stops after --max-new tokens or at an end-of-sequence id (kept in its output): --eos, else\n"
              "eos_token_id of --config, else of generation_config.json or config.json in a --weights directory.\n"
              "A line may start with @NAME: that prompt runs on the base weights merged with the adapter\n"
              "--adapter NAME=DIR names (each adapter its own weights, the others' K/V never reused); a step\n"
              "runs prompts of one adapter (or the base model), rebinding the weights an adapter changes.\n"
              "A prompt whose first blocks of 16 tokens were computed before (the same tokens and weights) reuses\n"
              "their K/V and skips their prefill. A progress line goes to stderr as prompts finish (at least every 5 s), then:\n"
              "  prefix cache: H of N prompts hit, S prefill tokens skipped\n"
              "  peak kv blocks in use: B of P\n"
              "  generated T tokens for N prompts in X s: R tokens/s (... prefill and ... decode steps)\n"
              "  adapters: A, weights rebound W times   (with --adapter: changes of the weights' identity)\n"
              "  decode steps used U of D rows on average   (the decode plan's D rows; sequences at other positions wait)\n"
              "  device time: T s of the X s (...)   (where the backend times the device: the rest is the host's)\n"
              "  first steps: prefill F s, decode G s (...); the rest: Q tokens/s   (a driver may build kernels on\n"
              "    their first run, as lavapipe does: the rate without those steps)\n"
              "Weights not in --weights come from the generator with seed 0, as 'poot run' and 'pootc eval' draw them.\n"
              "Bad input (the plans, the prompts file, a prompt too long for the capacity or the pool) is refused\n"
              "before anything runs, and --output is written only when every prompt is done.\n"
              "Examples:\n"
              "  poot generate p.plan d.plan --prompts prompts.txt --max-new 32 --output out.jsonl\n"
              "  poot generate pkg/ --prompts questions.txt --tokenizer pkg/ --weights model/   (pootc package -o pkg)\n"
              "  poot generate p.plan d.plan --prompts prompts.txt --weights model/ --temperature 0.8 --top-p 0.95 --seed 7\n"
              "  poot generate p.plan d.plan --prompts mixed.txt --weights model/ --adapter chat=lora1/ --adapter sql=lora2/\n"
              "    (mixed.txt lines: '@chat 128000 9906 11', '@sql 128000 3110', '128000 791')");
  gen->add_option("--prompts", gopts.prompts,
                  "the prompts: one a line, token ids separated by spaces (text with --tokenizer), optionally after "
                  "@NAME (an --adapter)")
      ->required();
  CLI::Option* tokOpt = gen->add_option("--tokenizer", gopts.tokenizer,
                  "a model directory with tokenizer.json (or the file): the prompts are text, encoded as 'poot "
                  "tokenize' does, and the generated text streams to stdout prompt by prompt (the report then goes to "
                  "stderr); --output's lines gain \"text\"");
  gen->add_flag("--chat", gopts.chat,
                "each prompt line is a conversation, a JSON array of {\"role\", \"content\"} messages, rendered through "
                "the chat template of tokenizer_config.json beside --tokenizer's file with add_generation_prompt, "
                "then encoded without adding special tokens (as 'poot tokenize --chat FILE --ids')")
      ->needs(tokOpt);
  gen->add_option("--adapter", gopts.adapters,
                  "NAME=DIR: a LoRA adapter as PEFT saves it (adapter_config.json, adapter_model.safetensors) that "
                  "prompt lines starting with @NAME run on (repeatable)");
  gen->add_option("--max-new", gopts.maxNew, "tokens to generate a prompt (default: 16)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  addSamplingArgs(gen, gopts.sampling);
  gen->add_option("--output", gopts.output,
                  "FILE.jsonl: one line per prompt, {\"index\": I, \"tokens\": [...]} (with \"adapter\": \"NAME\" "
                  "after the index for an @NAME prompt)");
  addEngineArgs(gen, gopts.engine);

  poot::ProbeOptions popts;
  CLI::App* probe = app.add_subcommand("probe", "write a device profile (docs/device-profile.md) of a live device");
  probe->footer("Examples:\n"
                "  poot probe -o targets/my-gpu.yaml\n"
                "  POOT_VULKAN_DEVICE=1 poot probe -o second.yaml");
  probe->add_option("--backend", popts.backend, "which API to ask: vulkan, cuda or hip (default: vulkan)")
      ->check(CLI::IsMember({"vulkan", "cuda", "hip"}));
  probe->add_option("--device", popts.device, "which device: an index or a piece of its name");
  probe->add_option("-o,--output", popts.output, "the profile to write (YAML)")->required();

  poot::KernelsOptions kopts;
  CLI::App* kernels = app.add_subcommand(
      "kernels", "what the driver made of each kernel of a plan: registers, local memory, workgroups a compute unit");
  kernels->footer("Builds every kernel of the plan on the device, as 'poot run' would (the same checks of the plan\n"
                  "against the device; no parameter is read, no buffer made), and prints a line naming the device,\n"
                  "then one line a kernel, in plan order (docs/runtime.md, 'poot kernels'):\n"
                  "  kernel ENTRY  workgroup N  registers R  local L B  workgroup memory M B  resident W a compute unit\n"
                  "N is the plan's workgroup size; the rest is the driver's, each figure where it gives one:\n"
                  "  R registers a thread, L bytes of local (scratch) memory a thread (spilled registers, arrays),\n"
                  "  M bytes of workgroup memory a workgroup, W workgroups of N threads one compute unit holds at once.\n"
                  "  cuda: cuFuncGetAttribute (NUM_REGS, LOCAL_SIZE_BYTES, SHARED_SIZE_BYTES plus the dynamic shared\n"
                  "  bytes of a kernel past 48 KiB) and cuOccupancyMaxActiveBlocksPerMultiprocessor; hip: the same\n"
                  "  attributes and hipModuleOccupancyMaxActiveBlocksPerMultiprocessor; vulkan: the statistics of\n"
                  "  VK_KHR_pipeline_executable_properties named 'Register Count' and 'Shared Memory Size' (NVIDIA's\n"
                  "  names; no local figure, no occupancy).\n"
                  "Each kernel's line is followed by what else the driver reports, by its own names, '  NAME = VALUE'\n"
                  "(vulkan: every statistic of the kernel's pipeline). A driver that reports nothing of its kernels\n"
                  "(lavapipe: it offers no VK_KHR_pipeline_executable_properties) has every kernel built and named all\n"
                  "the same, then the refusal: exit 3.\n"
                  "Examples:\n"
                  "  poot kernels decode.plan --backend cuda\n"
                  "  poot kernels decode-vulkan.plan --device nvidia");
  kernels->add_option("PLAN", kopts.plan, "plan file (pootc compile -o PLAN)")->required();
  kernels->add_option("--trust", kopts.trust, "a public key file (pootc keygen): refuse the plan unless PLAN.sig is its signature by this key "
                  "(repeatable: any of them); checked before anything in the plan is read");
  kernels->add_option("--backend", kopts.backend,
                      "which API builds the kernels: vulkan (spirv plans), cuda (ptx) or hip (hsaco) (default: vulkan)")
      ->check(CLI::IsMember({"vulkan", "cuda", "hip"}));
  kernels->add_option("--device", kopts.device, "which device: an index or a piece of its name");
  kernels->add_flag("--allow-other-device", kopts.allowOtherDevice,
                    "build a plan made for another device of the same target");

  poot::ServeOptions sopts;
  CLI::App* serve = app.add_subcommand(
      "serve", "serve a model over HTTP with the OpenAI API: chat and text completions, streamed or whole");
  serve->footer(
      "Takes the plans 'poot generate' takes (paged prefill and decode plans of one model, or the folder\n"
      "'pootc package' writes, whose tokenizer is the default) and the model's tokenizer, and answers\n"
      "(docs/runtime.md, 'Serving'):\n"
      "  POST /v1/chat/completions  messages rendered through tokenizer_config.json's chat template\n"
      "                             (add_generation_prompt), the answer in choices[0].message\n"
      "  POST /v1/completions       a prompt string, encoded with the tokenizer's special tokens, or a list\n"
      "                             of token ids, run as they are\n"
      "  GET  /v1/models            the one model, named by --model\n"
      "With \"stream\": true the answer comes as server-sent events, a 'data: {...}' chunk as text comes,\n"
      "then 'data: [DONE]'. Fields: model, messages or prompt, max_tokens (default: as much as the\n"
      "capacity holds), temperature (default 1, as OpenAI; 0 is greedy), top_p, top_k and min_p (as vLLM\n"
      "takes them; top_k -1 or 0 is every token), frequency_penalty and presence_penalty (-2..2),\n"
      "repetition_penalty (vLLM's, above 0), seed (default 0), stop\n"
      "(up to 4 strings, left out of the text), n (1 only), stream_options.include_usage, logprobs (chat:\n"
      "true, with top_logprobs 0..20; completions: 0..5 alternatives; the log-softmax of the model's logits,\n"
      "before temperature and top_p); any other field is refused. A refused request gets status 400 (404\n"
      "for another model) and {\"error\": {\"message\", \"type\", \"param\", \"code\"}} naming the field; bodies\n"
      "over 4 MiB get 413.\n"
      "A generation stops at an end-of-sequence id (as generate finds them: --eos, --config, the --weights\n"
      "directory), a stop string or max_tokens; finish_reason says \"stop\" or \"length\".\n"
      "Requests that come together run together: one thread steps the engine, batching every request\n"
      "queued or running, and stderr gets a line for each step that ran more than one:\n"
      "  poot serve: step N: prefill|decode|mixed, R requests\n"
      "A client that disconnects while its answer streams or waits in the queue (a stream writes ': waiting'\n"
      "every 100 ms while nothing comes) is noticed at the next write, and its request is cancelled:\n"
      "  poot serve: request I cancelled (running|queued, it never ran): the client is gone; N blocks available\n"
      "SIGINT or SIGTERM stops taking connections, lets the running requests finish and exits 0.\n"
      "Examples:\n"
      "  poot serve p.plan d.plan --tokenizer models/qwen3/ --weights models/qwen3/ --port 8000\n"
      "  poot serve qwen3-h200/ --weights models/qwen3/ --backend cuda   (pootc package ... -o qwen3-h200)\n"
      "  curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\\n"
      "    -d '{\"model\": \"qwen3\", \"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 32}'\n"
      "  poot serve p.plan d.plan --tokenizer tok/ --port 0 --model tiny   (a free port: stderr names it)");
  serve->add_option("--tokenizer", sopts.tokenizer,
                    "a model directory with tokenizer.json (or the file); tokenizer_config.json beside it gives "
                    "the chat template (without one, chat completions are refused) (default: the package's)");
  serve->add_option("--model", sopts.model,
                    "the model's name, which requests give as \"model\" (default: the tokenizer's directory's name)");
  serve->add_option("--host", sopts.host, "the address to listen on (default: 127.0.0.1)");
  serve->add_option("--port", sopts.port, "the port to listen on; 0 takes a free one (default: 8000)")
      ->check(CLI::Range(0, 65535));
  addEngineArgs(serve, sopts.engine);

  poot::ChatOptions copts;
  CLI::App* chat = app.add_subcommand("chat", "talk with a model: each line of standard input a message, each reply "
                                              "streamed to standard output");
  chat->footer(
      "Each line read is the user's next message. The conversation so far goes through the chat template of\n"
      "tokenizer_config.json (beside the tokenizer) with the generation prompt, and the reply streams to\n"
      "standard output as it comes, ended by a newline, until an end-of-sequence id (as generate finds them)\n"
      "or --max-new tokens. The prefix cache keeps the full blocks of earlier turns, so a turn computes\n"
      "from where its rendering first differs from what was computed before.\n"
      "'/clear' starts a new conversation; end of input (Ctrl-D) ends. On a terminal, '> ' on stderr asks.\n"
      "A message that would make the conversation pass the plans' capacity or pool is refused on stderr and\n"
      "left out; the conversation goes on.\n"
      "Examples:\n"
      "  poot chat qwen3-h200/ --weights models/qwen3/ --backend cuda   (pootc package ... -o qwen3-h200)\n"
      "  poot chat p.plan d.plan --tokenizer models/qwen3/ --weights models/qwen3/ --system 'Answer briefly.'\n"
      "  printf 'Hi\\nWhat did I say?\\n' | poot chat pkg/ --weights model/ --max-new 64");
  chat->add_option("--tokenizer", copts.tokenizer,
                   "a model directory with tokenizer.json and tokenizer_config.json (its chat template) (default: "
                   "the package's)");
  chat->add_option("--system", copts.system, "a system message that opens the conversation");
  chat->add_option("--max-new", copts.maxNew, "tokens a reply may take (default: 256)")->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  addSamplingArgs(chat, copts.sampling);
  addEngineArgs(chat, copts.engine);

  poot::TokenizeOptions topts;
  CLI::App* tokenize = app.add_subcommand("tokenize", "encode lines of text to token ids, or decode ids to text, with a "
                                                      "model's tokenizer.json");
  tokenize->footer("Reads standard input line by line and writes one line for each: the line's token ids separated by\n"
                   "spaces, or with --decode the text of a line of ids. Encoding follows Hugging Face tokenizers'\n"
                   "encode(text) with add_special_tokens: the post-processor's template tokens (a Llama-3 bos) are\n"
                   "added unless --no-special. Reads byte-level BPE tokenizers (Llama-3, Qwen2/3, DeepSeek) and\n"
                   "SentencePiece-style BPE (Llama-2, Gemma; docs/text.md says which components); others are refused\n"
                   "with exit 3, naming the component.\n"
                   "With --chat FILE, renders the conversation in FILE (a JSON array of {\"role\", \"content\"}\n"
                   "messages; - for standard input) through the chat template of tokenizer_config.json beside the\n"
                   "tokenizer, as transformers' apply_chat_template does, and prints the text as it is (no newline\n"
                   "added), or with --ids its token ids on one line, encoded without adding special tokens (the\n"
                   "template writes them). docs/text.md, 'Chat templates', says which Jinja is read.\n"
                   "Examples:\n"
                   "  echo 'Hello, world' | poot tokenize models/llama-3-8b\n"
                   "  echo '9906 11 1917' | poot tokenize models/llama-3-8b --decode\n"
                   "  poot tokenize models/llama-3-8b --chat chat.json --ids");
  tokenize->add_option("MODEL", topts.model, "a model directory holding tokenizer.json, or the file")->required();
  CLI::Option* decodeOpt = tokenize->add_flag("--decode", topts.decode, "decode lines of token ids to text");
  CLI::Option* noSpecialOpt = tokenize->add_flag("--no-special", topts.noSpecial,
                     "encoding: leave out the template's special tokens; decoding: leave out special tokens");
  CLI::Option* chatOpt = tokenize->add_option("--chat", topts.chat,
                                              "a JSON messages array to render through the model's chat template "
                                              "(- for standard input), instead of reading lines")
                             ->type_name("FILE")
                             ->excludes(decodeOpt)
                             ->excludes(noSpecialOpt);
  tokenize->add_flag("--ids", topts.ids, "with --chat: print the rendered text's token ids")->needs(chatOpt);
  tokenize->add_flag("--no-generation-prompt", topts.noGenerationPrompt,
                     "with --chat: render with add_generation_prompt false (no assistant header at the end)")
      ->needs(chatOpt);

  std::string version = std::string("poot ") + POOT_VERSION + " (plan format " + std::to_string(poot::rt::kPlanVersion) + ")";
  if (auto code = poot::parseCommandLine(app, argc, argv, version)) return *code;
  if (*run && ropts.noReplay && ropts.backend == "vulkan")
    return poot::report(poot::makeError(poot::ErrorKind::Usage, {},
                                        "--no-replay needs --backend cuda or hip: only they can launch a program's "
                                        "dispatches one by one instead of replaying its recording"));
  if (*gen)
    if (auto s = poot::resolveEngineArgs(gopts.engine); !s) return poot::report(s.error());
  if (*serve)
    if (auto s = poot::resolveEngineArgs(sopts.engine); !s) return poot::report(s.error());
  if (*serve)
    if (auto s = resolveTokenizer(sopts.tokenizer, sopts.engine, "serve"); !s) return poot::report(s.error());
  if (*chat) {
    if (auto s = poot::resolveEngineArgs(copts.engine); !s) return poot::report(s.error());
    if (auto s = resolveTokenizer(copts.tokenizer, copts.engine, "chat"); !s) return poot::report(s.error());
  }
  // Work past the host memory budget is refused before it allocates
  // (ir/budget.h); an allocation that fails all the same is a diagnostic too.
  auto code = poot::catchingOutOfMemory([&] {
    if (*run) return poot::runRun(ropts);
    if (*gen) return poot::runGenerate(gopts);
    if (*serve) return poot::runServe(sopts);
    if (*chat) return poot::runChat(copts);
    if (*probe) return poot::runProbe(popts);
    if (*kernels) return poot::runKernels(kopts);
    if (*tokenize) return poot::runTokenize(topts);
    return 2;
  });
  return code ? *code : poot::report(code.error());
}

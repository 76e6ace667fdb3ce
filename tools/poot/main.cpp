// poot: the runtime's tool, what a GPU host needs to run compiled plans. This
// file holds the command line (CLI11) and nothing else; the commands live
// beside it.
#include <CLI/CLI.hpp>

#include "tool.h"

int main(int argc, char** argv) {
  CLI::App app{"poot: runs plans compiled by pootc on a GPU, and describes the GPU for pootc.\n"
               "Exit codes: 0 ok, 1 a diagnostic about the input (a bad bind, a failed validation,\n"
               "a --check out of tolerance), 2 bad usage, 3 a capability refusal (no driver, another device)."};
  app.require_subcommand(1);

  poot::RunOptions ropts;
  CLI::App* run = app.add_subcommand("run", "run a plan: bind its parameters, run one step, write its outputs");
  run->footer("Inputs, weights, states and slots not named on the command line come from the same seeded\n"
              "generator as 'pootc eval' (--seed), so both agree on the same seed. With --iterations N the\n"
              "states are reset to their first values before every step, every step computes the same thing,\n"
              "and the median step time is printed (on CUDA also the median device time, from events on the\n"
              "stream around the step's launches).\n"
              "--check evaluates the plan's source graph with the oracle on the same parameters and compares\n"
              "every element of every output and of every state's new value (read back from the device): PASS when |device - oracle| <= abs + rel * |oracle|, with (abs, rel) =\n"
              "(1e-4, 1e-3) for f32 (room for GPU exp/tanh/rsqrt approximations and another summation\n"
              "order), (1e-2, 1e-2) for f16, (1e-2, 2e-2) for bf16, and exact for integers and bools; NaN\n"
              "matches only NaN. Exit 1 when an output or a state fails or the validations differ.\n"
              "Examples:\n"
              "  poot run llama.plan --slot pos=5 --check\n"
              "  poot run llama.plan --weights model.safetensors --input tokens=t.npy --slot pos=0 --output-dir out/\n"
              "  poot run llama.plan --iterations 20");
  run->add_option("PLAN", ropts.plan, "plan file (pootc compile -o PLAN)")->required();
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
  run->add_option("--seed", ropts.seed, "seed of the generator for unnamed parameters (default: 0)");
  run->add_option("--iterations", ropts.iterations, "steps to run, printing the median step time (default: 1)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  run->add_flag("--check", ropts.check, "compare every output and state with the oracle (see the tolerances above)");

  poot::ProbeOptions popts;
  CLI::App* probe = app.add_subcommand("probe", "write a device profile (docs/device-profile.md) of a live device");
  probe->footer("Examples:\n"
                "  poot probe -o targets/my-gpu.yaml\n"
                "  POOT_VULKAN_DEVICE=1 poot probe -o second.yaml");
  probe->add_option("--backend", popts.backend, "which API to ask (default: vulkan)")
      ->check(CLI::IsMember({"vulkan", "cuda"}));
  probe->add_option("--device", popts.device, "which device: an index or a piece of its name");
  probe->add_option("-o,--output", popts.output, "the profile to write (YAML)")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (*run) return poot::runRun(ropts);
  if (*probe) return poot::runProbe(popts);
  return 2;
}

#!/usr/bin/env bash
# The main job on the embedded default: trace a tiny Llama decode step from
# its config, compile it for lavapipe (the passes form Rope and Attention; the
# planner picks kernels and the arena; codegen writes SPIR-V), run the plan on
# lavapipe with `poot run --check` (random weights and inputs from a seeded
# generator), and compare every output with the oracle on the same inputs.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/build.sh build > /dev/null
pootc=build/tools/pootc/pootc
poot=build/tools/poot/poot
out=build/demo
rm -rf "$out" && mkdir -p "$out"
export MESA_SHADER_CACHE_DIR=$PWD/build/mesa-shader-cache

echo "== trace: examples/models/tiny-llama.json, one decode step, fixed KV cache =="
$pootc trace examples/models/tiny-llama.json --phase decode --capacity 64 -o "$out/tiny-llama.pg"
echo "$(grep -c ' = ' "$out/tiny-llama.pg") primitive eqns traced"

echo "== compile for targets/lavapipe.yaml =="
$pootc compile "$out/tiny-llama.pg" --device targets/lavapipe.yaml --remarks -o "$out/tiny-llama.plan" \
  --dump-kernels "$out/kernels"
$pootc inspect "$out/tiny-llama.plan" | sed -n '1,12p'
echo "  ... $(stat -c %s "$out/tiny-llama.plan") bytes, $(ls "$out/kernels" | wc -l) SPIR-V kernels in $out/kernels"

echo "== run on lavapipe at pos=7 and check against the oracle =="
$poot run "$out/tiny-llama.plan" --slot pos=7 --check --output-dir "$out"

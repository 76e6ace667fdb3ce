#!/usr/bin/env bash
# The main job on the embedded default, as far as the project goes today:
# trace a tiny Llama decode step from its config, compile it for lavapipe
# (passes print what they formed and, with --remarks, what they declined),
# plan it (kernels, schedules, the arena) and evaluate it with the oracle. It
# grows with the project: next it generates the kernels, runs the plan on
# lavapipe and checks it against the oracle.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/build.sh build > /dev/null
pootc=build/tools/pootc/pootc
out=build/demo
rm -rf "$out" && mkdir -p "$out"

echo "== trace: examples/models/tiny-llama.json, one decode step, fixed KV cache =="
$pootc trace examples/models/tiny-llama.json --phase decode --capacity 64 -o "$out/tiny-llama.pg"
echo "$(grep -c ' = ' "$out/tiny-llama.pg") primitive eqns traced"

echo "== compile for targets/lavapipe.yaml =="
$pootc compile "$out/tiny-llama.pg" --device targets/lavapipe.yaml --emit=graph --remarks -o "$out/compiled.pg"
grep -E ' = (Attention|Rope|BlockTopK|SelectedAttention)\(' "$out/compiled.pg" || true
echo "$(grep -c ' = ' "$out/compiled.pg") eqns after the passes"

echo "== plan for lavapipe: kernels, split-KV decisions, the arena (pootc inspect) =="
$pootc compile "$out/tiny-llama.pg" --device targets/lavapipe.yaml -o "$out/tiny-llama.plan"
$pootc inspect "$out/tiny-llama.plan" | sed -n '1,12p'
echo "  ... ($(stat -c %s "$out/tiny-llama.plan") bytes; kernel blobs are empty until code generation lands)"

echo "== eval the compiled graph with the oracle at pos=7 =="
$pootc eval "$out/compiled.pg" --slot pos=7 --output-dir "$out"
echo "wrote $out/logits.npy: $(head -c 128 "$out/logits.npy" | tr -d '\0' | grep -ao "'shape': ([0-9, ]*)")"

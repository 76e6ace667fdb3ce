#!/usr/bin/env bash
# Here: everything test/device/gpu_suite.sh runs on the GPU host, into
# OUT_DIR: the plans of make_plans.sh for targets/nvidia-h200.yaml (OUT_DIR/
# cuda) and for targets/nvidia-h200-vulkan.yaml (OUT_DIR/vulkan), the
# one-MatMul graphs left out of both when DEVICE_MATMUL=0; every Hugging
# Face fixture of test/hf/fixtures traced for prefill as test/unit/hf_test.cpp
# traces it (its tokens, capacity the next multiple of 16, weights in its config's dtype) and
# compiled for both profiles (OUT_DIR/hf/NAME.plan and NAME.vk.plan, where
# the profile takes it), beside a copy of the fixture (OUT_DIR/hf/NAME/);
# and the poot binary as bench/carry_poot.sh carries it (its libraries
# beside it; `poot run` takes plans of the H200 profile on an H100 too).
# Usage: test/device/make_suite.sh BUILD_DIR OUT_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR OUT_DIR" >&2; exit 2; }
mkdir -p "$2/hf"
build=$(realpath "$1") out=$(realpath "$2")
cd "$(dirname "$0")/../.."
pootc=$build/tools/pootc/pootc
test/device/make_plans.sh "$build" "$out/cuda" > "$out/cuda.txt"
test/device/make_plans.sh "$build" "$out/vulkan" targets/nvidia-h200-vulkan.yaml > "$out/vulkan.txt"
echo "cuda: $(ls "$out"/cuda/*.plan | wc -l) plans; vulkan: $(ls "$out"/vulkan/*.plan | wc -l) plans"
grep -h 'refused' "$out/cuda.txt" "$out/vulkan.txt" || true
for fixture in test/hf/fixtures/*/; do
  name=$(basename "$fixture")
  # L of the [1, L] token ids, from the .npy header's shape.
  tokens=$(head -c 128 "$fixture/tokens.npy" | grep -ao "'shape': (1, [0-9]*)" | grep -o '[0-9]*)$' | tr -d ')')
  "$pootc" trace "$fixture/config.json" --phase prefill --tokens "$tokens" --capacity $(((tokens + 15) / 16 * 16)) \
    --dtype f32 -o "$out/hf/$name.pg"
  for profile in nvidia-h200:plan nvidia-h200-vulkan:vk.plan; do
    rc=0
    "$pootc" compile "$out/hf/$name.pg" --device "targets/${profile%%:*}.yaml" -o "$out/hf/$name.${profile#*:}" \
      2>"$out/hf/$name.err" || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { cat "$out/hf/$name.err" >&2; exit 1; }
    [ "$rc" -eq 0 ] || echo "hf $name: refused by ${profile%%:*}: $(head -n1 "$out/hf/$name.err")"
  done
  rm -f "$out/hf/$name.pg" "$out/hf/$name.err"
  cp -r "$fixture" "$out/hf/$name"
done
echo "hf: $(ls "$out"/hf/*.plan | wc -l) plans of $(ls -d "$out"/hf/*/ | wc -l) fixtures"
bench/carry_poot.sh "$build" "$out"

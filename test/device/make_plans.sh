#!/usr/bin/env bash
# Compiles, here, the plans that test/device/cuda_check.sh runs on a CUDA
# host: every tiny model config x {decode, prefill} x {fixed, paged KV} x
# {live length or not}, traced as test/e2e/matrix.sh traces them, and
# examples/graphs/decode-attention.pg, and the one-MatMul graphs of
# test/device/matmul_graphs.sh (odd sizes, every schedule), each compiled for
# targets/nvidia-h200.yaml (PTX for sm_90) into OUT_DIR/NAME.plan.
# Usage: test/device/make_plans.sh BUILD_DIR OUT_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_DIR OUT_DIR" >&2; exit 2; }
mkdir -p "$2"
build=$(realpath "$1") out=$(realpath "$2")
cd "$(dirname "$0")/../.."
pootc=$build/tools/pootc/pootc
target=targets/nvidia-h200.yaml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for config in examples/models/tiny-*.json; do
  for phase in decode prefill; do
    for kv in fixed paged; do
      for live in "" --live; do
        name=$(basename "$config" .json)-$phase-$kv${live:+-live}
        $pootc trace "$config" --phase "$phase" --kv "$kv" $live -o "$work/$name.pg"
        $pootc compile "$work/$name.pg" --device "$target" -o "$out/$name.plan"
        echo "$out/$name.plan"
      done
    done
  done
done
$pootc compile examples/graphs/decode-attention.pg --device "$target" -o "$out/decode-attention.plan"
echo "$out/decode-attention.plan"
bash test/device/matmul_graphs.sh "$work/matmul"
for g in "$work"/matmul/*.pg; do
  $pootc compile "$g" --device "$target" -o "$out/$(basename "$g" .pg).plan"
done
echo "$out/matmul-*.plan: $(ls "$work"/matmul/*.pg | wc -l) one-MatMul plans (test/device/matmul_graphs.sh)"

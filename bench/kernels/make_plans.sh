#!/usr/bin/env bash
# Here: compiles the kernel benchmark graphs (bench/kernels/*.pg) for
# targets/nvidia-h200.yaml into OUT_DIR, beside a copy of the poot binary, for
# run_h200.sh to run on the GPU host. Usage: bench/kernels/make_plans.sh BUILD OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$1 out=$2
mkdir -p "$out"
for g in bench/kernels/*.pg; do
  "$build/tools/pootc/pootc" compile "$g" --device targets/nvidia-h200.yaml -o "$out/$(basename "$g" .pg).plan"
done
bench/carry_poot.sh "$build" "$out"

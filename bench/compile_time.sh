#!/usr/bin/env bash
# Compile-time benchmark: Llama-3-8B decode traced with 1, 8, 32 and 80
# layers (f32 weights, as the figures in compile_time.md were measured),
# compiled to a plan for every profile in targets/, with
# `pootc compile --time-phases`. Prints one row per (target, layers): the
# seconds of each phase (the passes summed) and the total, the best of
# REPEATS runs (a plan the device cannot hold shows its refusal). Usage: bench/compile_time.sh [BUILD_DIR] [REPEATS]
# Notes and measured figures: bench/compile_time.md.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
repeats=${2:-3}
pootc=$build/tools/pootc/pootc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The 80-layer graph is Llama-3-8B's layer stacked 80 deep (the depth of
# Llama-3-70B), from a copy of the config with num_hidden_layers = 80.
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = 80; json.dump(c, open(sys.argv[2], "w"))' \
  examples/models/llama-3-8b.json "$work/llama-80.json"
for layers in 1 8 32 80; do
  $pootc trace "$work/llama-80.json" --phase decode --layers "$layers" --capacity 4096 --weights-dtype f32 -o "$work/l$layers.pg"
done

printf "%-22s %6s %8s %8s %8s %8s %8s %8s %8s\n" target layers read passes plan buffers kir emit total
for profile in targets/*.yaml; do
  name=$(basename "$profile" .yaml)
  for layers in 1 8 32 80; do
    best=""
    for _ in $(seq "$repeats"); do
      if ! $pootc compile "$work/l$layers.pg" --device "$profile" -o "$work/out.plan" --time-phases 2> "$work/t.txt"; then
        best="refused: $(grep -m1 error "$work/t.txt" | sed 's/.*error: //' | cut -c1-60)"
        break
      fi
      row=$(awk '
        /^time / { v[$2] = $3 }
        END {
          passes = v["canonicalize"] + v["rope"] + v["ranges"] + v["attention-rewrite"] + v["selection"] + v["cleanup"] + v["guards-first"]
          printf "%.4f %.4f %.4f %.4f %.4f %.4f %.4f", v["read"], passes, v["plan"], v["buffers"], v["kir"], v["emit"], v["total"]
        }' "$work/t.txt")
      total=${row##* }
      if [ -z "$best" ] || awk -v a="$total" -v b="${best##* }" 'BEGIN { exit !(a < b) }'; then best=$row; fi
    done
    if [[ $best == refused* ]]; then printf "%-22s %6s %s\n" "$name" "$layers" "$best"; continue; fi
    printf "%-22s %6s %8s %8s %8s %8s %8s %8s %8s\n" "$name" "$layers" $best
  done
done

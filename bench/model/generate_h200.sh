#!/usr/bin/env bash
# On the GPU host: generation throughput of the 4-layer Llama-3-8B cut, poot
# against transformers on the same weights and prompts, in one run. PLANS is
# the folder of `make_plans.sh BUILD PLANS 4 generate` (paged prefill and
# decode plans for B = 1, 8 and 32 rows, the cut config, a stripped poot).
# hf_generate.py prepare saves transformers' seeded random f32 weights (as
# hf_side.py builds them) and B prompts of 128 random tokens for each B;
# then, for each B, `poot generate --backend cuda` runs the B prompts as B
# concurrent sequences to 128 new tokens each (greedy; no end-of-sequence
# id, so every prompt runs its 128), and hf_generate.py run times
# transformers' `generate` on the same prompts as one batch of B and counts
# the greedy tokens both agree on. Prints every figure as `name value`.
# poot's tokens/s is its own summary's (first step to last: the prefill, the
# pools' one move from the prefill session to the decode one, the decode
# steps; the plans' loading and the weights' upload not included); wall_s
# is the whole command.
# Usage: bench/model/generate_h200.sh PLANS WORK
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PLANS WORK" >&2; exit 2; }
plans=$1 work=$2
here=$(dirname "$0")
mkdir -p "$work"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 "$here/hf_generate.py" prepare "$plans" "$work"
for b in 1 8 32; do
  name=poot.generate-b$b
  s=$(date +%s.%N)
  "$plans/poot" generate "$plans/generate-prefill-b$b.plan" "$plans/generate-decode-b$b.plan" --backend cuda \
    --prompts "$work/prompts-$b.txt" --weights "$work/model.safetensors" --max-new 128 \
    --output "$work/poot-b$b.jsonl" > "$work/$name.log" 2>&1 ||
    { echo "$name.failed"; sed 's/^/  /' "$work/$name.log"; continue; }
  echo "$name.wall_s $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"
  sed -n 's/^generated \([0-9]*\) tokens for .* in \([0-9.]*\) s: \([0-9.]*\) tokens\/s (\([0-9]*\) prefill and \([0-9]*\) decode steps)$/\1 \2 \3 \4 \5/p' \
    "$work/$name.log" | while read -r tokens secs rate prefill decode; do
    echo "$name.tokens $tokens"
    echo "$name.s $secs"
    echo "$name.tokens_per_s $rate"
    echo "$name.steps $prefill prefill, $decode decode"
  done
  grep -v '^generate:' "$work/$name.log" | sed 's/^/  /'
done
python3 "$here/hf_generate.py" run "$plans" "$work"

#!/usr/bin/env bash
# On the GPU host: the bf16 model benchmark over the plans of
# `make_plans.sh BUILD PLANS 32 bf16` (carried with their poot binary).
# bf16_side.py prepare saves the seeded model's weights in bf16 as
# transformers publishes them; poot runs each plan on CUDA with those
# weights (20 decode steps or 3 prefills, `--iterations`, median step and
# device time) at pos 0 with the same token ids, then the bf16 and f32act
# B = 1 decodes again at pos 511 and 4095 and the B = 32 ones at 511 (these
# time the step over the drawn cache and check nothing); bf16_side.py check
# compares the bf16 plans' logits with transformers in f32 and in bf16 and
# times transformers bf16 eager and torch.compile in the same run. Prints
# every figure as `name value` lines. With CASES set (labels, space
# separated) only those poot runs, and the transformers check only with
# CHECK=1 (TORCH_COMPILE=0 leaves torch.compile out of it).
# Usage: [CASES="LABEL ..."] bench/model/run_bf16_h200.sh PLANS WORK
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PLANS WORK" >&2; exit 2; }
mkdir -p "$2"
plans=$(cd "$1" && pwd) work=$(cd "$2" && pwd)
here=$(dirname "$0")
chmod +x "$plans/poot"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$(date +%s.%N)
(cd "$here" && python3 bf16_side.py prepare "$plans" "$work")
echo "prepare.s $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"
run() {  # LABEL PLAN TOKENS POS ITERATIONS
  local name=$1 plan=$2 tok=$3 pos=$4 iters=$5
  [ -z "${CASES:-}" ] || [[ " $CASES " == *" $name "* ]] || return 0
  "$plans/poot" run "$plans/$plan.plan" --backend cuda --weights "$work/bf16" \
    --input tokens="$work/tokens-$tok.npy" --slot pos="$pos" --iterations "$iters" --output-dir "$work/out-$name" \
    > "$work/$name.log" 2>&1 || { echo "$name.failed"; sed 's/^/  /' "$work/$name.log"; return 0; }
  sed -n 's/^median step time: \([0-9.]*\) ms.*/\1/p' "$work/$name.log" | sed "s/^/$name.step_ms /"
  sed -n 's/^median device time: \([0-9.]*\) ms.*/\1/p' "$work/$name.log" | sed "s/^/$name.device_ms /"
}
for b in 1 8 32; do run bf16-decode-b$b bf16-decode-b$b $b 0 20; done
run bf16-prefill-512 bf16-prefill-512 512 0 3
run bf16-prefill-2048 bf16-prefill-2048 2048 0 3
run f32act-decode-b1 f32act-decode-b1 1 0 20
run f32act-decode-b32 f32act-decode-b32 32 0 20
run f32act-prefill-2048 f32act-prefill-2048 2048 0 3
for p in bf16 f32act; do
  run $p-decode-b1-ctx512 $p-decode-b1 1 511 20
  run $p-decode-b1-ctx4096 $p-decode-b1 1 4095 20
  run $p-decode-b32-ctx512 $p-decode-b32 32 511 20
done
[ -n "${CASES:-}" ] && [ "${CHECK:-0}" != 1 ] || (cd "$here" && python3 bf16_side.py check "$plans" "$work")

#!/usr/bin/env bash
# On the GPU host: the model benchmark over the plans of make_plans.sh (its
# OUT_DIR, carried with its poot binary). transformers builds the model from
# the cut config with seeded random weights and saves them (hf_side.py
# prepare); poot runs each plan on CUDA with those weights and token ids,
# 20 decode steps or 5 prefills (`--iterations`, median step and device
# time), at pos 0 so its logits compare with transformers on the same
# tokens (decode B = 1 once more without CUDA graph replay, --no-replay,
# and once with the bf16 weights, from the sharded directory WORK/bf16);
# then hf_side.py check compares the logits and times transformers eager in
# the same run. Prints every figure as `name value` lines.
# Usage: bench/model/run_h200.sh PLANS WORK
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 PLANS WORK" >&2; exit 2; }
plans=$1 work=$2
here=$(dirname "$0")
mkdir -p "$work"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
s=$(date +%s.%N)
python3 "$here/hf_side.py" prepare "$plans" "$work"
echo "prepare.s $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"
run() {  # LABEL PLAN WEIGHTS TOKENS ITERATIONS [POOT RUN OPTIONS...]
  local name=$1 plan=$2 weights=$3 tok=$4 iters=$5 s
  shift 5
  s=$(date +%s.%N)
  "$plans/poot" run "$plans/$plan.plan" --backend cuda --weights "$weights" \
    --input tokens="$work/tokens-$tok.npy" --slot pos=0 --iterations "$iters" --output-dir "$work/out-$name" "$@" \
    > "$work/$name.log" 2>&1 || { echo "$name.failed"; sed 's/^/  /' "$work/$name.log"; return 0; }
  echo "$name.wall_s $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"
  sed -n 's/^median step time: \([0-9.]*\) ms.*/\1/p' "$work/$name.log" | sed "s/^/$name.step_ms /"
  sed -n 's/^median device time: \([0-9.]*\) ms.*/\1/p' "$work/$name.log" | sed "s/^/$name.device_ms /"
  sed -n 's/^loaded .* (\([0-9.e+-]*\) GB\/s)$/\1/p' "$work/$name.log" | sed "s/^/$name.load_gbps /"
  sed -n 's/^median host overhead per dispatch: \([0-9.]*\) us.*/\1/p' "$work/$name.log" | sed "s/^/$name.overhead_us /"
  grep -v '^median' "$work/$name.log" | sed 's/^/  /' | head -5 || true
}
f32=$work/model.safetensors
run decode-b1 decode-b1 "$f32" 1 20
run decode-b1-no-replay decode-b1 "$f32" 1 20 --no-replay
run decode-b1-bf16 decode-b1-bf16 "$work/bf16" 1 20
run decode-b8 decode-b8 "$f32" 8 20
run prefill-512 prefill-512 "$f32" 512 5
run prefill-2048 prefill-2048 "$f32" 2048 3
python3 "$here/hf_side.py" check "$plans" "$work"

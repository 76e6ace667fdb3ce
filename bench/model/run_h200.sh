#!/usr/bin/env bash
# On the GPU host: the model benchmark over the plans of make_plans.sh (its
# OUT_DIR, carried with its poot binary). transformers builds the model from
# the cut config with seeded random weights and saves them (hf_side.py
# prepare); poot runs each plan on CUDA with those weights and token ids,
# 20 decode steps or 5 prefills (`--iterations`, median step and device
# time), at pos 0 so its logits compare with transformers on the same
# tokens (decode B = 1 once more without CUDA graph replay, --no-replay,
# and once with the bf16 weights, from the sharded directory WORK/bf16);
# the decodes again at pos 511 and 4095 (512 and 4096 tokens of context, B = 8
# at 4096 only:
# the live attention reads that many keys of the drawn cache, so these time
# the step and check nothing); then hf_side.py check compares the logits
# and times transformers eager in the same run, and hf_side.py compiled
# times `torch.compile` of the decode step with a static cache. Prints every
# figure as `name value` lines.
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
run() {  # LABEL PLAN WEIGHTS TOKENS POS ITERATIONS [POOT RUN OPTIONS...]
  local name=$1 plan=$2 weights=$3 tok=$4 pos=$5 iters=$6 s
  shift 6
  s=$(date +%s.%N)
  "$plans/poot" run "$plans/$plan.plan" --backend cuda --weights "$weights" \
    --input tokens="$work/tokens-$tok.npy" --slot pos="$pos" --iterations "$iters" --output-dir "$work/out-$name" "$@" \
    > "$work/$name.log" 2>&1 || { echo "$name.failed"; sed 's/^/  /' "$work/$name.log"; return 0; }
  echo "$name.wall_s $(awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')"
  sed -n 's/^median step time: \([0-9.]*\) ms.*/\1/p' "$work/$name.log" | sed "s/^/$name.step_ms /"
  sed -n 's/^median device time: \([0-9.]*\) ms.*/\1/p' "$work/$name.log" | sed "s/^/$name.device_ms /"
  sed -n 's/^loaded .* (\([0-9.e+-]*\) GB\/s)$/\1/p' "$work/$name.log" | sed "s/^/$name.load_gbps /"
  sed -n 's/^median host overhead per dispatch: \([0-9.]*\) us.*/\1/p' "$work/$name.log" | sed "s/^/$name.overhead_us /"
  grep -v '^median' "$work/$name.log" | sed 's/^/  /' | head -5 || true
}
f32=$work/model.safetensors
run decode-b1 decode-b1 "$f32" 1 0 20
run decode-b1-no-replay decode-b1 "$f32" 1 0 20 --no-replay
run decode-b1-bf16 decode-b1-bf16 "$work/bf16" 1 0 20
run decode-b8 decode-b8 "$f32" 8 0 20
for ctx in 512 4096; do
  run decode-b1-ctx$ctx decode-b1 "$f32" 1 $((ctx - 1)) 20
  run decode-b1-bf16-ctx$ctx decode-b1-bf16 "$work/bf16" 1 $((ctx - 1)) 20
done
run decode-b8-ctx4096 decode-b8 "$f32" 8 4095 20  # drawing its cache takes a minute: one context only
run prefill-512 prefill-512 "$f32" 512 0 5
run prefill-2048 prefill-2048 "$f32" 2048 0 3
python3 "$here/hf_side.py" check "$plans" "$work"
python3 "$here/hf_side.py" compiled "$plans" "$work"

#!/usr/bin/env bash
# The CUDA backend on a GPU host (or BACKEND: vulkan for the same checks
# through Vulkan on the NVIDIA driver): runs every PLAN_DIR/*.plan (made
# elsewhere by test/device/make_plans.sh) with `poot run --check`, which
# compares every output and state with the oracle on the same seeded inputs
# and weights, and prints one line per plan (ok or FAIL, then its max abs
# error lines, or its whole log on a failure); then times one plan
# (TIME_PLAN, default decode-attention.plan) over 20 steps.
# Usage, from the repository root: test/device/cuda_check.sh POOT PLAN_DIR [SEED [BACKEND]]
# Exit 1 when a plan failed, 2 on bad usage.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 POOT PLAN_DIR [SEED [BACKEND]]" >&2; exit 2; }
poot=$1 dir=$2 seed=${3:-1} backend=${4:-cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ls "$dir"/*.plan > /dev/null 2>&1 || { echo "no plans in $dir" >&2; exit 2; }
echo "seed $seed"

failed=0 ran=0
for plan in "$dir"/*.plan; do
  name=$(basename "$plan" .plan)
  "$poot" run "$plan" --backend "$backend" --check --seed "$seed" --output-dir "$work/out" > "$work/log" 2>&1
  rc=$?
  ran=$((ran + 1))
  if [ "$rc" -eq 0 ]; then
    echo "ok   $name"
    grep -E 'max abs' "$work/log" | sed 's/^/  /'
  else
    echo "FAIL $name (exit $rc)"
    sed 's/^/  /' "$work/log"
    failed=$((failed + 1))
  fi
done
echo "$((ran - failed)) of $ran passed"

timed=${TIME_PLAN:-$dir/decode-attention.plan}
[ -e "$timed" ] || timed=$(ls "$dir"/*.plan | head -n1)
echo "timing $(basename "$timed" .plan):"
"$poot" run "$timed" --backend "$backend" --iterations 20 --seed "$seed" --output-dir "$work/out" 2>&1 |
  grep -E 'median step time|error' | sed 's/^/  /'
[ "$failed" -eq 0 ]

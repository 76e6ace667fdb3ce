#!/usr/bin/env bash
# CUDA graph replay on a GPU host: runs a few plans of PLAN_DIR (made
# elsewhere by test/device/make_plans.sh) twice with `poot run --backend
# cuda --iterations N`, once replaying each program's CUDA graph (with
# --check, so the replayed outputs and states are held to the oracle) and
# once with --no-replay (every dispatch launched in order), checks that
# both runs wrote the same outputs byte for byte, that each says how it ran
# ("replayed", "launched in order"), and prints both runs' timing lines and
# what replay saves per dispatch: (step time in order - step time replayed)
# / dispatches. poot's note that graph replay is not available on this
# driver is printed and fails the plan (its note of the parameters drawn
# from the seed does not).
# Usage, from the repository root:
#   test/device/replay_check.sh POOT PLAN_DIR [ITERATIONS [NAME...]]
# NAME is a plan's file name without .plan (default: decode-attention and
# four tiny-llama plans); ITERATIONS defaults to 50. Exit 1 when a plan
# failed, 2 on bad usage.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 POOT PLAN_DIR [ITERATIONS [NAME...]]" >&2; exit 2; }
poot=$1 dir=$2 iters=${3:-50}
shift $(($# >= 3 ? 3 : 2))
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(decode-attention tiny-llama-decode-fixed tiny-llama-decode-paged-live
                                  tiny-llama-prefill-fixed tiny-llama-prefill-paged)
[[ $iters =~ ^[0-9]+$ && $iters -ge 2 ]] || { echo "ITERATIONS must be 2 or more, not '$iters'" >&2; exit 2; }
seed=7
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "seed $seed, $iters iterations"

failed=0
for name in "${names[@]}"; do
  plan=$dir/$name.plan
  if [ ! -e "$plan" ]; then
    echo "FAIL $name (no $plan)"
    failed=$((failed + 1))
    continue
  fi
  bad=
  mkdir -p "$work/$name"
  for mode in replayed in-order; do
    flags=(--check)
    [ "$mode" = in-order ] && flags=(--no-replay)
    "$poot" run "$plan" --backend cuda --seed "$seed" --iterations "$iters" --output-dir "$work/$name/$mode" \
      "${flags[@]}" > "$work/$name/$mode.log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || bad+=" $mode run exit $rc;"
    grep -q '^note: cuda graph replay' "$work/$name/$mode.log" &&
      bad+=" $mode run: $(grep '^note: cuda graph replay' "$work/$name/$mode.log");"
  done
  grep -q 'dispatches, replayed)$' "$work/$name/replayed.log" || bad+=" the replayed run does not say replayed;"
  grep -q 'dispatches, launched in order)$' "$work/$name/in-order.log" ||
    bad+=" the --no-replay run does not say launched in order;"
  if [ -z "$bad" ]; then
    a=$(cd "$work/$name/replayed" && ls *.npy) b=$(cd "$work/$name/in-order" && ls *.npy)
    if [ "$a" != "$b" ] || [ -z "$a" ]; then
      bad+=" the runs wrote different outputs ($a | $b);"
    else
      for f in $a; do
        cmp -s "$work/$name/replayed/$f" "$work/$name/in-order/$f" || bad+=" $f differs;"
      done
    fi
  fi
  if [ -n "$bad" ]; then
    echo "FAIL $name:$bad"
    for mode in replayed in-order; do
      echo "  -- $mode"
      sed 's/^/  /' "$work/$name/$mode.log"
    done
    failed=$((failed + 1))
    continue
  fi
  echo "ok   $name (outputs byte-identical: $(echo $a))"
  for mode in replayed in-order; do
    grep '^median' "$work/$name/$mode.log" | sed "s/^/  $mode: /"
  done
  step() { sed -n 's/^median step time: \([0-9.]*\) ms.*$/\1/p' "$work/$name/$1.log"; }
  k=$(sed -n 's/^median host overhead per dispatch: .* \/ \([0-9]*\) dispatches.*$/\1/p' "$work/$name/replayed.log")
  awk -v r="$(step replayed)" -v o="$(step in-order)" -v k="$k" \
    'BEGIN { printf "  replay saves %.3f us per dispatch ((%.3f - %.3f) ms / %d dispatches)\n", (o - r) * 1000 / k, o, r, k }'
done
echo "$((${#names[@]} - failed)) of ${#names[@]} passed"
[ "$failed" -eq 0 ]

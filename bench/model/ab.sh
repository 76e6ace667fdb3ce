#!/usr/bin/env bash
# On the GPU host: the same model plans from several plan folders (each made
# by make_plans.sh, say by two builds of pootc), run on the same weights and
# token ids, so that what differs between them is the compiler. The weights
# are prepared as run_h200.sh prepares them (hf_side.py prepare into WORK,
# from the first folder's config.json); each folder's plans run with the
# first folder's poot binary, at the positions of AB_POS, `poot run --backend cuda --iterations
# AB_ITERS`, and the folders take turns, twice over, so that a drift of the
# GPU's clocks falls on all of them alike. Prints one line a run:
# `NAME FOLDER round R: step S ms, device D ms`.
# Usage: bench/model/ab.sh WORK DIR...
# AB_PLANS: the plan names (default: decode-b1 decode-b1-bf16 decode-b8
# prefill-512); AB_ITERS: steps a run (default 50); AB_POS: the positions,
# one run of every plan at each (default 0; a decode at pos P reads P + 1
# keys of a drawn cache); the lines then also name the position. AB_SIDE=bf16
# takes the bf16 set instead (make_plans.sh ... bf16): weights prepared by
# bf16_side.py and read as stored by every plan, plans named as that set
# names them (bf16-decode-b32 reads 32 tokens).
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 WORK DIR..." >&2; exit 2; }
work=$1
shift
here=$(dirname "$0")
poot=$1/poot
mkdir -p "$work"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
side=${AB_SIDE:-f32}
case $side in
  f32) python3 "$here/hf_side.py" prepare "$1" "$work" ;;
  bf16) first=$(cd "$1" && pwd) at=$(cd "$work" && pwd) && (cd "$here" && python3 bf16_side.py prepare "$first" "$at") ;;
  *) echo "$0: AB_SIDE is f32 or bf16, not $side" >&2; exit 2 ;;
esac
for pos in ${AB_POS:-0}; do
for name in ${AB_PLANS:-decode-b1 decode-b1-bf16 decode-b8 prefill-512}; do
  case $side:$name in
    bf16:* | *-bf16) weights=$work/bf16 ;;
    *) weights=$work/model.safetensors ;;
  esac
  case $name in
    *decode-b8) tok=8 ;;
    *decode-b32) tok=32 ;;
    *prefill-*) tok=${name##*prefill-} ;;
    *) tok=1 ;;
  esac
  for round in 1 2; do
    for dir in "$@"; do
      log=$work/ab.log
      if ! "$poot" run "$dir/$name.plan" --backend cuda --weights "$weights" --input tokens="$work/tokens-$tok.npy" \
        --slot pos="$pos" --iterations "${AB_ITERS:-50}" --output-dir "$work/out" >"$log" 2>&1; then
        echo "$name pos $pos $dir round $round: failed"
        sed 's/^/  /' "$log"
        continue
      fi
      step=$(sed -n 's/^median step time: \([0-9.]*\) ms.*/\1/p' "$log")
      device=$(sed -n 's/^median device time: \([0-9.]*\) ms.*/\1/p' "$log")
      echo "$name pos $pos $dir round $round: step $step ms, device $device ms"
    done
  done
done
done

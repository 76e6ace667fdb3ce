#!/usr/bin/env bash
# On the GPU host: the same MatMul plans from several plan folders (each made
# by make_plans.sh, say by two builds of pootc), so that what differs between
# them is the compiler. Every plan of the first folder's cases.tsv that each
# folder holds runs with the first folder's poot binary (`poot run --backend
# cuda --iterations AB_ITERS`, the weights drawn by poot from its seed, the
# same in every folder), the folders taking turns, twice over, so that a
# drift of the GPU's clocks falls on all of them alike. Prints one line a
# run: `NAME FOLDER round R: device D ms, W TB/s of weight` (W: the weight's
# bytes over the device time). With AB_CHECK=1 each plan of the first folder
# then runs once more with --check (the oracle on the CPU: keep the cases
# small, MATMUL_M of 32 or less). With AB_TORCH=1, PyTorch then times the
# same cases (torch_bench.py, after its copy ceiling) and prints its table
# with the first folder's second-round times as poot's.
# Usage: bench/matmul/ab.sh DIR...
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 DIR..." >&2; exit 2; }
poot=$1/poot
[ -x "$poot" ] || chmod +x "$poot"
iters=${AB_ITERS:-50}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/poot.tsv"
cases=()
while IFS=$'\t' read -r name m n k dt; do
  bytes=$((n * k * 2))
  [ "$dt" = f32 ] && bytes=$((n * k * 4))
  for round in 1 2; do
    for dir in "$@"; do
      [ -f "$dir/$name.plan" ] || continue
      rc=0
      "$poot" run "$dir/$name.plan" --backend cuda --iterations "$iters" --output-dir "$tmp/out" >"$tmp/run.txt" 2>&1 </dev/null || rc=$?
      rm -rf "$tmp/out"
      ms=$(sed -n 's/^median device time: \([0-9.]*\) ms .*$/\1/p' "$tmp/run.txt")
      if [ "$rc" -ne 0 ] || [ -z "$ms" ]; then
        echo "$name $(basename "$dir") round $round: failed (exit $rc)"
        tail -n 3 "$tmp/run.txt"
        continue
      fi
      awk -v n="$name" -v d="$(basename "$dir")" -v r="$round" -v ms="$ms" -v b="$bytes" \
        'BEGIN { printf "%s %s round %d: device %s ms, %.2f TB/s of weight\n", n, d, r, ms, b / (ms * 1e-3) / 1e12 }'
      [ "$dir" = "$1" ] && [ "$round" = 2 ] && printf '%s\tcuda\t%s\t%s\t-\n' "$name" "$ms" "$iters" >>"$tmp/poot.tsv"
    done
  done
  if [ "${AB_CHECK:-0}" = 1 ]; then
    "$poot" run "$1/$name.plan" --backend cuda --check --output-dir "$tmp/out" 2>&1 </dev/null | grep 'max abs' |
      sed "s/^/$name check: /" || echo "$name check: no check line"
    rm -rf "$tmp/out"
  fi
  cases+=("$name:$m:$n:$k:$dt")
done <"$1/cases.tsv"
if [ "${AB_TORCH:-0}" = 1 ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  python3 "$here/torch_bench.py" ceiling "$tmp/ceiling"
  python3 "$here/torch_bench.py" cases --poot "$tmp/poot.tsv" --ceiling "$tmp/ceiling" "${cases[@]}"
fi

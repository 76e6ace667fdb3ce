#!/usr/bin/env bash
# On the GPU host: the same attention cases from several plan folders (each
# made by make_plans.sh, say by two builds of pootc), on the same operands,
# so that what differs between them is the compiler. torch_bench.py prepare
# draws the first folder's cases (its cases.tsv: trim it to the cases of
# interest) into DATA_DIR and times PyTorch on them; then each case runs from
# each folder with the first folder's poot binary, `poot run --backend cuda
# --iterations ATTN_ITERS` (default 50), the folders taking turns twice over
# so that a drift of the GPU's clocks falls on all of them alike. Prints one
# line a run: `NAME FOLDER round R: D ms, rel err E` (the median device
# time; max |out - ref| / max |ref| against the float64 reference).
# Usage: bench/attention/ab.sh DATA_DIR DIR...
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DATA_DIR DIR..." >&2; exit 2; }
data=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
poot=$1/poot
chmod +x "$poot"
mkdir -p "$data"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 "$here/torch_bench.py" prepare "$1" "$data"
. "$here/operands.sh"
while IFS=$'\t' read -r name _; do
  operand_args "$data/$name"
  for round in 1 2; do
    for dir in "$@"; do
      out=$data/$name/ab
      if ! "$poot" run "$dir/$name.plan" --backend cuda "${args[@]}" --iterations "${ATTN_ITERS:-50}" \
        --output-dir "$out" >"$data/ab.log" 2>&1 </dev/null; then
        echo "$name $dir round $round: failed"
        tail -n 3 "$data/ab.log"
        continue
      fi
      ms=$(sed -n 's/^median device time: \([0-9.]*\) ms.*$/\1/p' "$data/ab.log")
      err=$(cd "$here" && python3 -c "import numpy as n, torch_bench as t; o = t.load_out('$out/out.npy').astype('f8'); r = n.load('$data/$name/ref.npy'); print('%.2g' % (abs(o - r).max() / abs(r).max()))")
      echo "$name $dir round $round: $ms ms, rel err $err"
    done
  done
done <"$1/cases.tsv"

#!/usr/bin/env bash
# On the GPU host: what limits an attention kernel, from the hardware
# counters. For each NAME of PLAN_DIR (made by make_plans.sh) torch_bench.py
# draws the case's operands (as run_h200.sh does, into DATA_DIR, default
# /tmp/attention-profile), then Nsight Compute profiles the step's first
# kernels (`poot run --backend cuda --no-replay`, clocks left alone) with
# every section (--set full) into OUT/NAME.ncu-rep, and prints them as text:
# OUT/NAME.details.txt (throughputs, pipes, stall reasons, occupancy) and
# OUT/NAME.sass.csv (each SASS instruction with its samples and stalls).
# Usage: bench/attention/profile_h200.sh PLAN_DIR OUT NAME...
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 PLAN_DIR OUT NAME..." >&2; exit 2; }
dir=$(cd "$1" && pwd)
out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/operands.sh"
data=${DATA_DIR:-/tmp/attention-profile}
mkdir -p "$out" "$data/cases"
chmod +x "$dir/poot"
for name in "$@"; do grep -P "^$name\t" "$dir/cases.tsv"; done >"$data/cases/cases.tsv"
python3 "$here/torch_bench.py" prepare "$data/cases" "$data"
for name in "$@"; do
  operand_args "$data/$name"
  # The step's kernels: the attention and, when split, its combine.
  ncu --clock-control none --set full --import-source yes --launch-count "${LAUNCHES:-2}" \
    -f -o "$out/$name" "$dir/poot" run "$dir/$name.plan" --backend cuda "${args[@]}" --iterations 1 \
    --no-replay --output-dir "$data/$name/out" >"$out/$name.log" 2>&1 || { tail -n 5 "$out/$name.log"; continue; }
  ncu --import "$out/$name.ncu-rep" --page details >"$out/$name.details.txt"
  ncu --import "$out/$name.ncu-rep" --page source --print-source sass --csv >"$out/$name.sass.csv" 2>&1 || true
  grep -E "Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput" \
    "$out/$name.details.txt" | sed "s/^/$name: /"
done

#!/usr/bin/env bash
# On the GPU host: Nsight Compute on the first MatMul kernel of each named
# plan of PLAN_DIR (made by make_plans.sh), random operands drawn by `poot
# run`, clocks left to the driver. Writes OUT/NAME.ncu-rep, the details page
# (NAME.details.txt) and the SASS with its stall samples (NAME.sass.csv), and
# prints the headline lines and the warp-state breakdown.
# Usage: bench/matmul/profile_h200.sh PLAN_DIR OUT NAME...
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 PLAN_DIR OUT NAME..." >&2; exit 2; }
dir=$(cd "$1" && pwd)
out=$2
shift 2
mkdir -p "$out"
chmod +x "$dir/poot"
for name in "$@"; do
  ncu --clock-control none --set full --import-source yes -k regex:matmul --launch-count 1 \
    -f -o "$out/$name" "$dir/poot" run "$dir/$name.plan" --backend cuda --iterations 1 --no-replay \
    --output-dir "/tmp/profile-$name" >"$out/$name.log" 2>&1 || { tail -n 5 "$out/$name.log"; continue; }
  ncu --import "$out/$name.ncu-rep" --page details >"$out/$name.details.txt"
  ncu --import "$out/$name.ncu-rep" --page source --print-source sass --csv >"$out/$name.sass.csv" 2>&1 || true
  grep -E "Duration|Registers Per|Achieved Occupancy|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|Shared Memory|Bank|Stall|Warp Cycles Per Issued" \
    "$out/$name.details.txt" | sed "s/^/$name: /" | head -60
done

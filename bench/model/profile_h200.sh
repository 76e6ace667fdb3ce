#!/usr/bin/env bash
# On the GPU host: where a step's device time goes, kernel by kernel, for
# the plans of make_plans.sh (its OUT_DIR, carried with its poot binary).
# Each plan runs on CUDA with drawn weights and inputs (`poot run`, seed 0)
# at POS (default 511: the live attention reads 512 keys); Nsight Systems
# traces 20 replayed steps with the graph's nodes as kernels
# (--cuda-graph-trace=node), so each kernel's time is the one it takes in
# the step, overlaps included; the summary per kernel name goes to
# OUT/NAME.kern.csv, the last step's kernels in order to OUT/NAME.trace.csv.
# Where nsys is missing, Nsight Compute times each kernel alone instead
# (serialized, no cache flush, clocks left alone) into OUT/NAME.ncu.csv.
# Usage: bench/model/profile_h200.sh PLANS OUT [PLAN NAMES...]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 PLANS OUT [NAMES...]" >&2; exit 2; }
plans=$1 out=$2
shift 2
mkdir -p "$out"
pos=${POS:-511}
for name in "${@:-decode-b1 decode-b1-bf16}"; do
  for n in $name; do
    run=("$plans/poot" run "$plans/$n.plan" --backend cuda --slot pos="$pos" --output-dir "$out/o-$n")
    if command -v nsys >/dev/null; then
      nsys profile --trace=cuda --cuda-graph-trace=node --force-overwrite=true -o "$out/$n" \
        "${run[@]}" --iterations 20 > "$out/$n.log" 2>&1
      nsys stats --report cuda_gpu_kern_sum --format csv -o "$out/$n" "$out/$n.nsys-rep" > /dev/null 2>&1 || true
      nsys stats --report cuda_gpu_trace --format csv -o "$out/$n" "$out/$n.nsys-rep" > /dev/null 2>&1 || true
      ls "$out" | grep "^$n" | sed 's/^/  /'
    else
      ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
        "${run[@]}" --iterations 3 --no-replay > "$out/$n.ncu.csv" 2> "$out/$n.log"
    fi
    grep '^median' "$out/$n.log" | sed "s/^/$n: /" || true
  done
done

#!/usr/bin/env bash
# On the GPU host: the attention benchmark over the plans of PLAN_DIR (made by
# make_plans.sh). First torch_bench.py prepare: the copy ceiling, every
# case's operands drawn on the GPU and written as .npy under DATA_DIR (default
# /tmp/attention-data), its float64 reference and PyTorch's timings. Then
# each plan with `poot run --backend cuda --iterations ATTN_ITERS` (default
# 50) on those operands (--input, and --slot for the paged read map): the
# median device time of the step (CUDA events around its launches); for
# NAME.vk.plan the same through Vulkan on the NVIDIA driver (its timestamps
# around the command buffer; the NOTES' tables before session 11 took
# Vulkan's host step time instead), the .deb files of the repository's .gl
# folder unpacked into / for the loader (run as root; without .gl the Vulkan
# runs are skipped). Last, torch_bench.py report: the table, also written to
# $OUT/attention.csv when OUT is set (with every poot run's output in
# $OUT/poot.log). Usage: bench/attention/run_h200.sh PLAN_DIR
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 PLAN_DIR" >&2
  exit 2
fi
dir=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
. "$here/operands.sh"
root=$(cd "$here/../.." && pwd)
data=${DATA_DIR:-/tmp/attention-data}
iters=${ATTN_ITERS:-50}
[ -f "$dir/cases.tsv" ] || { echo "$0: no $dir/cases.tsv: make PLAN_DIR with bench/attention/make_plans.sh" >&2; exit 2; }
chmod +x "$dir/poot"
log=/dev/null
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  log=$OUT/poot.log
  : >"$log"
fi
mkdir -p "$data"
python3 "$here/torch_bench.py" prepare "$dir" "$data"

vk=no
if compgen -G "$root/.gl/*.deb" >/dev/null && (for f in "$root"/.gl/*.deb; do dpkg -x "$f" / || exit 1; done && ldconfig); then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  vk=yes
else
  echo "vulkan: no loader in $root/.gl, the Vulkan runs are skipped"
fi

: >"$data/poot.tsv"
while IFS=$'\t' read -r name _ _ _ _ _ _ _ _ _ _; do
  operand_args "$data/$name"
  for backend in cuda vulkan; do
    plan=$dir/$name.plan out=$data/$name
    if [ "$backend" = vulkan ]; then
      plan=$dir/$name.vk.plan out=$data/$name/vk
      [ -f "$plan" ] || continue
      [ "$vk" = yes ] || { printf '%s\tvulkan\t-\n' "$name" >>"$data/poot.tsv"; continue; }
    fi
    rc=0
    "$dir/poot" run "$plan" --backend "$backend" "${args[@]}" --iterations "$iters" --output-dir "$out" \
      >"$data/run.txt" 2>&1 </dev/null || rc=$?
    { echo "== $name $backend (exit $rc)"; cat "$data/run.txt"; } >>"$log"
    ms=$(sed -n 's/^median device time: \([0-9.]*\) ms.*$/\1/p' "$data/run.txt")
    [ "$rc" -eq 0 ] || { echo "$name $backend: exit $rc"; tail -n 3 "$data/run.txt"; }
    echo "$name $backend: ${ms:-no time} ms"
    printf '%s\t%s\t%s\n' "$name" "$backend" "${ms:--}" >>"$data/poot.tsv"
  done
done <"$dir/cases.tsv"

python3 "$here/torch_bench.py" report "$dir" "$data" "$data/poot.tsv" ${OUT:+"$OUT/attention.csv"}
echo "wall time: ${SECONDS}s"

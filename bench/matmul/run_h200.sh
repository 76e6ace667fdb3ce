#!/usr/bin/env bash
# On the GPU host: the MatMul benchmark over the plans of PLAN_DIR (made by
# make_plans.sh). First the copy ceiling (PyTorch, dst.copy_(src) of 2 GiB
# f32, bytes read + written). Then each plan once with `poot run --backend
# cuda` (vulkan for NAME.vk.plan) and `--iterations STEPS`, which prints the
# median device time (CUDA events or Vulkan timestamps around the step's
# launches: what torch's CUDA events measure too) and step time (the host's,
# adding the launch and the wait; used where no device time is printed), no
# uploads or readback in either, and, for the
# cases small enough, `--check` in the same run. The check runs the CPU
# oracle on the compiled graph (the plan's source: the Transpose folded into
# the MatMul, {transpose_b=true}); it sums about 1e9 multiply-adds a second
# and copies the weight at about 1e8 elements a second, so a case is checked
# when M*N*K/1e9 + N*K/1e8 <= MATMUL_CHECK_S seconds (default 10: every
# shape at M <= 32, but lm_head only at M = 1 and 8; q and kv at M = 512 too;
# close to the M*N*K <= 3e10 rule, less lm_head at M = 32 and kv at M = 4096,
# 22 s and 17 s each). The check lines (they contain "max abs") are printed.
# Then PyTorch on the same shapes (torch_bench.py: f32 F.linear without
# TF32; for bf16 weights F.linear on bf16 activations and the f32-activation
# F.linear(x, w_bf16.float())), and one table of everything, also written as
# $OUT/matmul.csv (with every poot run's output in $OUT/poot.log) when $OUT
# is set. Vulkan runs need the loader: the .deb files of the repository's
# .gl folder are unpacked into / (so run as root); without .gl they are
# skipped, and after one refusal (exit 3: no Vulkan driver) the rest are.
# Usage: bench/matmul/run_h200.sh PLAN_DIR
# Knobs: MATMUL_ITERS (most steps a run, default 50); MATMUL_STEP_BUDGET_S
# (default 3): a case runs min(MATMUL_ITERS, max(3, budget / step)) steps,
# the step estimated pessimistically (2 TFLOP/s, 3 TB/s of weight, x and y
# moved at 4 GB/s), so only the large cases run fewer than 50 (lm_head at
# M = 4096 runs 3, at M = 512 8); MATMUL_CHECK_S (0: no checks); and two
# deadlines in seconds since the start, MATMUL_CHECK_UNTIL_S (default 330:
# no check starts later) and MATMUL_POOT_UNTIL_S (default 450: no poot run
# starts later), so the table prints inside a 10-minute limit whatever the
# kernels cost.
#
# Wall time of the default list (50 cases, 75 plans), estimated: PyTorch's
# import and the ceiling ~10 s; 75 poot processes (start, plan load, device
# init) ~40 s; drawing the weights on the CPU, 663M elements for the five
# shapes at one M, so 10G in all: ~40 s at 0.1 s per 100 MB of f32, ~110 s
# at the 0.25 s that this generator (oracle/random.cpp) suggests (lm_head,
# 525M elements, took 10 s in f32 and 13 s in bf16 on a busy 2-core build
# machine); writing y.npy ~10 s; steps ~25 s if the kernels run near
# PyTorch's speed, ~85 s at the pessimistic estimate; checks ~110 s (36 s
# for each of the cuda f32, vulkan f32 and cuda bf16 plan sets); PyTorch's
# cases ~40 s. In all about 4.5 to 7 minutes; the deadlines bound it at
# about 8.5.
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 PLAN_DIR" >&2
  exit 2
fi
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
poot=$dir/poot
iters_max=${MATMUL_ITERS:-50}
budget=${MATMUL_STEP_BUDGET_S:-3}
check_s=${MATMUL_CHECK_S:-10}
check_until=${MATMUL_CHECK_UNTIL_S:-330}
poot_until=${MATMUL_POOT_UNTIL_S:-450}
[[ $iters_max =~ ^[0-9]+$ && $iters_max -ge 2 ]] || { echo "$0: MATMUL_ITERS must be 2 or more" >&2; exit 2; }
[ -f "$dir/cases.tsv" ] || { echo "$0: no $dir/cases.tsv: make PLAN_DIR with bench/matmul/make_plans.sh" >&2; exit 2; }
[ -f "$poot" ] || { echo "$0: no $poot: make_plans.sh copies it there" >&2; exit 2; }
[ -x "$poot" ] || chmod +x "$poot"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log=/dev/null
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  log=$OUT/poot.log
  : >"$log"
fi

python3 "$here/torch_bench.py" ceiling "$tmp/ceiling"

vk=yes
if ! compgen -G "$dir/*.vk.plan" >/dev/null; then
  vk="no .vk.plan in $dir"
elif ! compgen -G "$root/.gl/*.deb" >/dev/null; then
  vk="no $root/.gl/*.deb (the Vulkan loader: on the build machine, mkdir .gl && cd .gl && apt-get download libvulkan1, then carry .gl)"
elif (for f in "$root"/.gl/*.deb; do dpkg -x "$f" / || exit 1; done && ldconfig); then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  echo "vulkan: loader unpacked from $(cd "$root/.gl" && echo *.deb), VK_DRIVER_FILES=$VK_DRIVER_FILES"
  [ -f "$VK_DRIVER_FILES" ] || echo "vulkan: note: $VK_DRIVER_FILES does not exist; expect the runs to be refused"
else
  vk="unpacking $root/.gl/*.deb into / failed"
fi
[ "$vk" = yes ] || echo "vulkan: every Vulkan run skipped: $vk"

# run_plan NAME BACKEND PLAN M N K WEIGHT_BYTES: one poot run, one line in poot.tsv.
run_plan() {
  local name=$1 backend=$2 plan=$3 m=$4 n=$5 k=$6 wb=$7 steps est check=no rc=0 ms result
  if [ "$SECONDS" -ge "$poot_until" ]; then
    echo "$name $backend: skipped, past MATMUL_POOT_UNTIL_S=$poot_until s"
    printf '%s\t%s\t-\t0\tlate\n' "$name" "$backend" >>"$tmp/poot.tsv"
    return
  fi
  read -r steps est < <(awk -v m="$m" -v n="$n" -v k="$k" -v wb="$wb" -v budget="$budget" -v most="$iters_max" 'BEGIN {
    step = 2 * m * n * k / 2e12 + n * k * wb / 3e12 + (m * n + m * k) * 4 / 4e9 + 1e-4
    s = int(budget / step); if (s < 3) s = 3; if (s > most) s = most
    printf "%d %.1f\n", s, m * n * k / 1e9 + n * k / 1e8 }')
  if awk -v e="$est" -v c="$check_s" 'BEGIN { exit !(e <= c) }'; then
    if [ "$SECONDS" -lt "$check_until" ]; then check=yes; else check=late; fi
  fi
  local args=(run "$plan" --backend "$backend" --iterations "$steps" --output-dir "$tmp/out")
  [ "$check" = yes ] && args+=(--check)
  "$poot" "${args[@]}" >"$tmp/run.txt" 2>&1 </dev/null || rc=$?
  rm -rf "$tmp/out"
  { echo "== $name $backend: poot ${args[*]} (exit $rc)"; cat "$tmp/run.txt"; } >>"$log"
  # The device's own time of the step, as torch's CUDA events are; the
  # host's step time (which adds the launch and the wait) where none.
  ms=$(sed -n 's/^median device time: \([0-9.]*\) ms .*$/\1/p' "$tmp/run.txt")
  [ -n "$ms" ] || ms=$(sed -n 's/^median step time: \([0-9.]*\) ms over [0-9]* steps$/\1/p' "$tmp/run.txt")
  grep 'max abs' "$tmp/run.txt" | sed "s/^/$name $backend check: /" || true
  case $check in
    yes)
      if grep -q 'max abs.*: FAIL$' "$tmp/run.txt"; then result=FAIL
      elif [ "$rc" -eq 0 ] && grep -q 'max abs' "$tmp/run.txt"; then result=PASS
      else result=err; fi ;;
    late) result=late ;;
    *) result=- ;;
  esac
  if [ "$rc" -ne 0 ] && [ "$result" != FAIL ]; then
    sed "s/^/$name $backend: /" "$tmp/run.txt" | tail -n 5
    if [ "$backend" = vulkan ] && [ "$rc" -eq 3 ]; then
      result=refused
      vk="refused (exit 3) by $name: $(head -n 1 "$tmp/run.txt")"
      echo "vulkan: the remaining Vulkan runs skipped"
    fi
  fi
  echo "$name $backend: $([ -n "$ms" ] && echo "$ms ms" || echo "no time"), median of $steps steps, check $result (exit $rc, ${SECONDS}s)"
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$backend" "${ms:--}" "$steps" "$result" >>"$tmp/poot.tsv"
}

: >"$tmp/poot.tsv"
cases=()
while IFS=$'\t' read -r name m n k dt; do
  cases+=("$name:$m:$n:$k:$dt")
  if [ "$dt" = f32 ]; then wb=4; else wb=2; fi
  if [ -f "$dir/$name.plan" ]; then
    run_plan "$name" cuda "$dir/$name.plan" "$m" "$n" "$k" "$wb"
  else
    echo "$name cuda: no $name.plan (refused by pootc?)"
  fi
  if [ -f "$dir/$name.vk.plan" ]; then
    if [ "$vk" = yes ]; then
      run_plan "$name" vulkan "$dir/$name.vk.plan" "$m" "$n" "$k" "$wb"
    else
      printf '%s\t%s\t-\t0\tskipped\n' "$name" vulkan >>"$tmp/poot.tsv"
    fi
  fi
done <"$dir/cases.tsv"

python3 "$here/torch_bench.py" cases --poot "$tmp/poot.tsv" --ceiling "$tmp/ceiling" \
  ${OUT:+--csv "$OUT/matmul.csv"} "${cases[@]}"
echo "wall time: ${SECONDS}s"

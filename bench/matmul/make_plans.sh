#!/usr/bin/env bash
# Here: generates the MatMul benchmark graphs (make_graphs.sh, into a temp
# dir) and compiles each for targets/nvidia-h200.yaml (PTX) into
# OUT_DIR/NAME.plan and, for the f32-weight cases, for
# targets/nvidia-h200-vulkan.yaml (SPIR-V) into OUT_DIR/NAME.vk.plan (that
# profile lists no bf16, so the bf16 cases are not tried there). A capability
# refusal (pootc exit 3) skips that plan with a note; any other error stops.
# Beside each plan goes `pootc inspect` of it (NAME.inspect.txt,
# NAME.vk.inspect.txt: the schedule the planner chose), and beside them
# cases.tsv and a copy of the poot binary, for run_h200.sh to run on the GPU
# host. Prints one line per plan: its kernels and their schedules.
# Usage: bench/matmul/make_plans.sh BUILD OUT_DIR
# (MATMUL_SHAPES, MATMUL_M and MATMUL_DTYPES trim the cases: make_graphs.sh)
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD OUT_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
cd "$(dirname "$0")/../.."
pootc=$build/tools/pootc/pootc
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bench/matmul/make_graphs.sh "$tmp"
cp "$tmp/cases.tsv" "$out/"

# The kernel lines of an inspect text: "  Op(operands) -> result {attrs}
# schedule=... workgroup=... memory=...", printed as "Op schedule=...".
kernels() {
  awk '/^ +[A-Za-z]+\(/ && /schedule=/ { op = $1; sub(/\(.*/, "", op); s = $0; sub(/^.*schedule=/, "schedule=", s)
                                          line = line (line == "" ? "" : "; ") op " " s }
       END { print (line == "" ? "(no kernel lines found)" : line) }' "$1"
}

# compile GRAPH PROFILE PLAN
compile() {
  local rc=0 err
  err=$("$pootc" compile "$1" --device "$2" -o "$3" 2>&1 </dev/null) || rc=$?
  if [ "$rc" -eq 3 ]; then
    rm -f "$3" "${3%.plan}.inspect.txt"
    echo "$(basename "$3"): refused by $(basename "$2" .yaml) (exit 3), skipped: ${err%%$'\n'*}"
    return 0
  fi
  if [ "$rc" -ne 0 ]; then
    printf '%s\n' "$err" >&2
    echo "$0: pootc compile $(basename "$1") --device $2 failed (exit $rc)" >&2
    exit 1
  fi
  "$pootc" inspect "$3" >"${3%.plan}.inspect.txt" </dev/null
  echo "$(basename "$3"): $(kernels "${3%.plan}.inspect.txt")"
}

while IFS=$'\t' read -r name _ _ _ dt; do
  compile "$tmp/$name.pg" targets/nvidia-h200.yaml "$out/$name.plan"
  if [ "$dt" = f32 ]; then
    compile "$tmp/$name.pg" targets/nvidia-h200-vulkan.yaml "$out/$name.vk.plan"
  fi
done <"$tmp/cases.tsv"
bench/carry_poot.sh "$build" "$out"

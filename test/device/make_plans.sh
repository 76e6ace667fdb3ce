#!/usr/bin/env bash
# Compiles, here, the plans that test/device/cuda_check.sh runs on a CUDA
# host: every tiny model config x {decode, prefill} x {fixed, paged KV} x
# {live length or not}, traced as test/e2e/matrix.sh traces them, then again
# with activations, KV cache and weights in bf16 and in f16 (--dtype and
# --weights-dtype; NAME-bf16, NAME-f16), the serving forms in f32 and bf16
# (paged decode rows at their own positions with their greedy tokens, a
# mixed step of prompt chunks and sampled tokens), and
# examples/graphs/decode-attention.pg, and the one-MatMul graphs of
# test/device/matmul_graphs.sh (odd sizes, every schedule; left out when
# DEVICE_MATMUL=0), each compiled for PROFILE (default
# targets/nvidia-h200.yaml: PTX for sm_90) into OUT_DIR/NAME.plan; a graph
# the profile refuses (pootc exit 3: bf16 weights on a Vulkan profile
# without bf16, say) is skipped with a line that says so.
# Usage: test/device/make_plans.sh BUILD_DIR OUT_DIR [PROFILE]
set -euo pipefail
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR OUT_DIR [PROFILE]" >&2; exit 2; }
mkdir -p "$2"
build=$(realpath "$1") out=$(realpath "$2")
target=$(realpath "${3:-$(dirname "$0")/../../targets/nvidia-h200.yaml}")
cd "$(dirname "$0")/../.."
pootc=$build/tools/pootc/pootc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# compile GRAPH NAME: OUT_DIR/NAME.plan, or a line saying the profile refused it.
compile() {
  local rc=0 err
  err=$($pootc compile "$1" --device "$target" -o "$out/$2.plan" 2>&1) || rc=$?
  case $rc in
    0) echo "$out/$2.plan" ;;
    3) echo "$2: refused by $(basename "$target" .yaml), skipped: ${err%%$'\n'*}" ;;
    *) printf '%s\n' "$err" >&2; exit 1 ;;
  esac
}

for config in examples/models/tiny-*.json; do
  for phase in decode prefill; do
    for kv in fixed paged; do
      for live in "" --live; do
        for dtype in f32 bf16 f16; do
          name=$(basename "$config" .json)-$phase-$kv${live:+-live}
          dtypes=()
          [ "$dtype" = f32 ] || { name+=-$dtype; dtypes=(--dtype "$dtype" --weights-dtype "$dtype"); }
          $pootc trace "$config" --phase "$phase" --kv "$kv" $live "${dtypes[@]}" -o "$work/$name.pg"
          compile "$work/$name.pg" "$name"
        done
      done
    done
  done
done
# The serving forms, each in f32 and bf16: a paged decode of 3 rows at
# their own positions that also returns each row's greedy token
# (--next-token), and a mixed step of 13 tokens over 3 sequences.
for config in examples/models/tiny-*.json; do
  for dtype in f32 bf16; do
    base=$(basename "$config" .json)
    dtypes=()
    [ "$dtype" = f32 ] || dtypes=(--dtype "$dtype" --weights-dtype "$dtype")
    $pootc trace "$config" --phase decode --kv paged --live --batch 3 --next-token "${dtypes[@]}" -o "$work/$base-rows-$dtype.pg"
    compile "$work/$base-rows-$dtype.pg" "$base-decode-rows-next-$dtype"
    $pootc trace "$config" --phase mixed --kv paged --live --batch 3 --tokens 13 --capacity 32 "${dtypes[@]}" -o "$work/$base-mixed-$dtype.pg"
    compile "$work/$base-mixed-$dtype.pg" "$base-mixed-$dtype"
  done
done
# Sample at Llama 3's vocabulary, for sample_check.sh: penalty lists of 2048.
r=[32] l=[32,2048]
printf 'graph sample_vocab\ninput %%x : f32[32,128256]\ninput %%t : f32%s\ninput %%k : i32%s\ninput %%p : f32%s\ninput %%m : f32%s\ninput %%u : f32%s\ninput %%rp : f32%s\ninput %%sn : i32%s\ninput %%sa : f32%s\n%%s = Sample(%%x, %%t, %%k, %%p, %%m, %%u, %%rp, %%sn, %%sa) : i32%s\noutput %%s\n' \
  $r $r $r $r $r $r $l $l $r >"$work/sample-vocab.pg"
compile "$work/sample-vocab.pg" sample-vocab
compile examples/graphs/decode-attention.pg decode-attention
[ "${DEVICE_MATMUL:-1}" = 0 ] && exit 0
bash test/device/matmul_graphs.sh "$work/matmul"
for g in "$work"/matmul/*.pg; do
  line=$(compile "$g" "$(basename "$g" .pg)")
  [[ $line == *.plan ]] || echo "$line"
done
echo "$out/matmul-*.plan: $(ls "$out"/matmul-*.plan | wc -l) one-MatMul plans (test/device/matmul_graphs.sh)"

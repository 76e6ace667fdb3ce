#!/usr/bin/env bash
# The end-to-end matrix on lavapipe, through the tools as a user runs them:
# every tiny model config x {decode, prefill} x {fixed, paged KV} x {live
# length or not} is traced (pootc trace), compiled for targets/lavapipe.yaml
# (pootc compile) and run with `poot run --check`, which compares every
# output with the oracle on the same random inputs and weights and exits 1
# when one is out of tolerance. The configs cover every attention form: GQA
# (llama, qwen2, mistral), softcap and sliding window (gemma2), ALiBi (bloom),
# the split MLA key (deepseek_v2) and the block-selected form (sparse).
# The paged forms run 2 batch rows, whose random positions (distinct slot
# values) differ, so each row's RoPE, mask, live length and maps are its own.
# Usage: test/e2e/matrix.sh BUILD_DIR [CONFIG_GLOBS [FORMS]] (CONFIG_GLOBS
# space-separated, default every tiny-* config; FORMS the KV forms to run,
# of fixed, fixed-live, paged and paged-live, default all four). A fresh
# seed each run (printed, so a failure can be replayed with E2E_SEED=N).
set -uo pipefail
cd "$(dirname "$0")/../.."
build=$1
globs=${2:-tiny-*}
forms=${3:-fixed fixed-live paged paged-live}
pootc=$build/tools/pootc/pootc
poot=$build/tools/poot/poot
seed=${E2E_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export MESA_SHADER_CACHE_DIR=${MESA_SHADER_CACHE_DIR:-$build/mesa-shader-cache}
echo "seed $seed"

failed=0 ran=0
for config in $(for g in $globs; do echo examples/models/$g.json; done); do
  name=$(basename "$config" .json)
  for phase in decode prefill; do
    for kv in fixed paged; do
      for live in "" --live; do
        case " $forms " in *" $kv${live:+-live} "*) ;; *) continue ;; esac
        case="$name $phase $kv${live:+ live}"
        graph=$work/g.pg plan=$work/g.plan rows=1
        [ "$kv" = paged ] && rows=2
        if ! $pootc trace "$config" --phase "$phase" --kv "$kv" --batch $rows $live -o "$graph" > "$work/log" 2>&1 ||
           ! $pootc compile "$graph" --device targets/lavapipe.yaml -o "$plan" >> "$work/log" 2>&1 ||
           ! $poot run "$plan" --check --seed "$seed" --output-dir "$work" >> "$work/log" 2>&1; then
          echo "FAIL $case"
          sed 's/^/  /' "$work/log"
          failed=$((failed + 1))
        else
          echo "ok   $case: $(grep -m1 -iE 'max abs' "$work/log" || true)"
        fi
        ran=$((ran + 1))
      done
    done
  done
done
echo "$((ran - failed)) of $ran passed"
[ "$failed" -eq 0 ]

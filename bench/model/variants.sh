#!/usr/bin/env bash
# The fusion experiments of bench/model/NOTES.md ("Session 8"), as run.
# Here: `bench/model/variants.sh make BUILD DIR` writes into DIR
#  - the products of one a as a product group and apart (each reading its own
#    copy of a, so nothing groups them): q, k, v (4096, 1024, 1024 columns of
#    K = 4096) and gate, up (14336 each) at 1 and 512 rows;
#  - a 2-layer Llama-3-8B prefill of 2048 tokens compiled as it is (A), with
#    the product groups' tags taken off its fused graph (B) and with the
#    cache writes' tags taken off (C: k's RoPE and the writes apart again);
#  - token ids for it, and the stripped poot binary.
# On the GPU host: `bench/model/variants.sh run DIR` prints the median device
# time of each plan (`poot run --backend cuda`, random weights and inputs).
set -euo pipefail
case ${1:-} in
  make)
    [ $# -eq 3 ] || { echo "usage: $0 make BUILD DIR" >&2; exit 2; }
    build=$(cd "$2" && pwd)
    mkdir -p "$3"
    out=$(cd "$3" && pwd)
    cd "$(dirname "$0")/../.."
    pootc=$build/tools/pootc/pootc dev=targets/nvidia-h200.yaml
    products() {  # NAME ROWS GROUPED COLS...
      local name=$1 m=$2 grouped=$3 i=0
      shift 3
      {
        echo "graph $name"
        if [ "$grouped" = g ]; then echo "input %a : f32[$m,4096]"; fi
        for n in "$@"; do
          [ "$grouped" = g ] || echo "input %a$i : f32[$m,4096]"
          echo "weight %w$i : f32[$n,4096]"
          i=$((i + 1))
        done
        i=0
        for n in "$@"; do
          local a=%a
          [ "$grouped" = g ] || a=%a$i
          echo "%r$i = MatMul($a, %w$i) {transpose_b=true} : f32[$m,$n]"
          echo "output %r$i"
          i=$((i + 1))
        done
      } >"$out/$name.pg"
      "$pootc" compile "$out/$name.pg" --device $dev -o "$out/$name.plan"
    }
    for m in 1 512; do
      for g in g s; do
        products "qkv-$g-m$m" "$m" "$g" 4096 1024 1024
        products "gateup-$g-m$m" "$m" "$g" 14336 14336
      done
    done
    "$pootc" trace examples/models/llama-3-8b.json --layers 2 --capacity 4096 --weights-dtype f32 --phase prefill \
      --tokens 2048 -o "$out/prefill.pg"
    "$pootc" compile "$out/prefill.pg" --device $dev --emit=graph -o "$out/A.pg"
    untag() { sed -E "/ = $1\(/{s/\{fusion=[0-9]+\} //;s/, fusion=[0-9]+\}/}/}" "$out/A.pg"; }
    untag MatMul >"$out/B.pg"
    untag DynamicUpdateSlice >"$out/C.pg"
    for v in A B C; do "$pootc" compile "$out/$v.pg" --device $dev -o "$out/prefill-$v.plan"; done
    python3 -c "import numpy as np; np.save('$out/tokens.npy', (np.arange(2048) * 7919 % 128000).astype(np.int32).reshape(1, 2048))"
    install -s "$build/tools/poot/poot" "$out/poot" ;;
  run)
    [ $# -eq 2 ] || { echo "usage: $0 run DIR" >&2; exit 2; }
    cd "$2"
    for p in qkv-g-m1 qkv-s-m1 gateup-g-m1 gateup-s-m1 qkv-g-m512 qkv-s-m512 gateup-g-m512 gateup-s-m512; do
      echo "$p $(./poot run $p.plan --backend cuda --iterations 50 2>&1 | sed -n 's/^median device time: \([0-9.]*\) ms.*/\1/p')"
    done
    for v in A B C; do
      echo "prefill-$v $(./poot run prefill-$v.plan --backend cuda --iterations 5 --input tokens=tokens.npy --slot pos=0 2>&1 |
        sed -n 's/^median device time: \([0-9.]*\) ms.*/\1/p')"
    done ;;
  *) echo "usage: $0 make BUILD DIR | run DIR" >&2; exit 2 ;;
esac

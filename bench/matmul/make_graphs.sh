#!/usr/bin/env bash
# Writes the MatMul benchmark graphs into OUT_DIR: one .pg per case, every
# linear layer shape of Llama-3-8B with the weight in the checkpoint layout
# W [N, K] and y = x . W^T written as the traced models write it (a
# Transpose of the weight feeding the MatMul), once with f32 weights and once
# with bf16 weights converted to f32 in the graph (x and y stay f32), and
# once all in bf16 ("bf16c": x, W and y bf16, as `pootc trace --dtype bf16`
# writes a layer; on a profile with a bf16 matrix op, the gemm-mma). The
# shapes (N, K): q (q_proj, and o_proj, which has the same shape) 4096 x
# 4096, kv (k_proj, v_proj) 1024 x 4096, gateup (gate_proj, up_proj)
# 14336 x 4096, down (down_proj) 4096 x 14336, lmhead (lm_head)
# 128256 x 4096. Files are named SHAPE-mM-DTYPE.pg (q-m1-f32.pg,
# lmhead-m4096-bf16.pg); OUT_DIR/cases.tsv lists them, one line each:
# name, M, N, K, weight dtype. The graphs are generated, not committed.
# Usage: bench/matmul/make_graphs.sh OUT_DIR
# Trim the list with MATMUL_SHAPES (default "q kv gateup down lmhead"),
# MATMUL_M (default "1 8 32 512 4096") and MATMUL_DTYPES (default
# "f32 bf16"; "bf16c" is asked for by name), e.g. MATMUL_M="1 512" MATMUL_SHAPES=q bench/matmul/make_graphs.sh /tmp/g
set -euo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
out=$1
shapes=${MATMUL_SHAPES:-q kv gateup down lmhead}
ms=${MATMUL_M:-1 8 32 512 4096}
dtypes=${MATMUL_DTYPES:-f32 bf16}
mkdir -p "$out"
: >"$out/cases.tsv"
for s in $shapes; do
  case $s in
    q) n=4096 k=4096 what="q_proj and o_proj" ;;
    kv) n=1024 k=4096 what="k_proj and v_proj" ;;
    gateup) n=14336 k=4096 what="gate_proj and up_proj" ;;
    down) n=4096 k=14336 what="down_proj" ;;
    lmhead) n=128256 k=4096 what="lm_head" ;;
    *) echo "$0: unknown shape '$s' (known: q kv gateup down lmhead)" >&2; exit 2 ;;
  esac
  for m in $ms; do
    [[ $m =~ ^[1-9][0-9]*$ ]] || { echo "$0: M must be a positive integer, not '$m'" >&2; exit 2; }
    for dt in $dtypes; do
      name=$s-m$m-$dt
      {
        echo "# Llama-3-8B $what, M = $m: y = x . W^T with W [N, K] = [$n, $k] in $dt as stored."
        echo "graph matmul_${s}_m${m}_${dt}"
        if [ "$dt" = bf16c ]; then echo "input %x : bf16[$m,$k]"; else echo "input %x : f32[$m,$k]"; fi
        case $dt in
          f32)
            echo "weight %w : f32[$n,$k]"
            echo "%wt = Transpose(%w) {perm=[1, 0]} : f32[$k,$n]" ;;
          bf16)
            echo "weight %w : bf16[$n,$k]"
            echo "%wf = Convert(%w) : f32[$n,$k]"
            echo "%wt = Transpose(%wf) {perm=[1, 0]} : f32[$k,$n]" ;;
          bf16c)
            echo "weight %w : bf16[$n,$k]"
            echo "%wt = Transpose(%w) {perm=[1, 0]} : bf16[$k,$n]" ;;
          *) echo "$0: unknown weight dtype '$dt' (known: f32 bf16 bf16c)" >&2; exit 2 ;;
        esac
        if [ "$dt" = bf16c ]; then echo "%y = MatMul(%x, %wt) : bf16[$m,$n]"; else echo "%y = MatMul(%x, %wt) : f32[$m,$n]"; fi
        echo "output %y"
      } >"$out/$name.pg"
      printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$m" "$n" "$k" "$dt" >>"$out/cases.tsv"
    done
  done
done

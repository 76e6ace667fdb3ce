#!/usr/bin/env bash
# Writes, into OUT_DIR, one-MatMul graphs at sizes that are multiples of no
# tile or vector width, for the device check (make_plans.sh compiles them,
# cuda_check.sh runs each with --check against the oracle): rows 1, 2, 3, 7,
# 16, 64 (gemv) and 65, 513 (gemm); K 37 (one key a run), 36 (runs of 4),
# 1000 (runs of 4 or 8, whole unrolled steps and a tail); N 19 and 300; the
# weight transposed ([N, K], as checkpoints store it) or plain ([K, N]); f32
# weights and, transposed, bf16 ones read as stored; products all in bf16
# or f16 (x, W [N, K] and y, as `pootc trace --dtype bf16` writes a layer)
# at 2 to 32 rows (the gemv-mma's) and 65, 130 and 513 rows (the gemm-mma's,
# on the warpgroup op where the profile has one), with K 40 (one step,
# partial), 1000 and 4104 (whole steps, a partial one, split chunks), and
# one of 1030 x 1000 x 2070 in bf16, enough workgroups for the 128-row tile
# (two warpgroups); and one batched product whose batch axes broadcast.
# Usage: test/device/matmul_graphs.sh OUT_DIR
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
out=$1
mkdir -p "$out"
for m in 1 2 3 7 16 64 65 513; do
  for k in 37 36 1000; do
    for n in 19 300; do
      for layout in t p; do
        for w in f32 bf16; do
          [ "$layout$w" = pbf16 ] && continue
          name=matmul-m$m-k$k-n$n-$layout-$w
          {
            echo "graph ${name//-/_}"
            echo "input %x : f32[$m,$k]"
            if [ $layout = t ]; then
              echo "weight %w : $w[$n,$k]"
              src=%w
              if [ $w = bf16 ]; then echo "%wf = Convert(%w) : f32[$n,$k]"; src=%wf; fi
              echo "%wt = Transpose($src) {perm=[1, 0]} : f32[$k,$n]"
            else
              echo "weight %wt : f32[$k,$n]"
            fi
            echo "%y = MatMul(%x, %wt) : f32[$m,$n]"
            echo "output %y"
          } > "$out/$name.pg"
        done
      done
    done
  done
done
for t in bf16 f16; do
  for m in 2 7 17 32 65 130 513; do
    for k in 40 1000 4104; do
      for n in 19 300; do
        name=matmul-m$m-k$k-n$n-$t
        {
          echo "graph ${name//-/_}"
          echo "input %x : $t[$m,$k]"
          echo "weight %w : $t[$n,$k]"
          echo "%wt = Transpose(%w) {perm=[1, 0]} : $t[$k,$n]"
          echo "%y = MatMul(%x, %wt) : $t[$m,$n]"
          echo "output %y"
        } > "$out/$name.pg"
      done
    done
  done
done
cat > "$out/matmul-m1030-k1000-n2070-bf16.pg" <<'PG'
graph matmul_m1030_k1000_n2070_bf16
input %x : bf16[1030,1000]
weight %w : bf16[2070,1000]
%wt = Transpose(%w) {perm=[1, 0]} : bf16[1000,2070]
%y = MatMul(%x, %wt) : bf16[1030,2070]
output %y
PG
cat > "$out/matmul-batched.pg" <<'PG'
graph matmul_batched
input %a : f32[2,1,70,36]
input %b : f32[4,19,36]
%bt = Transpose(%b) {perm=[0, 2, 1]} : f32[4,36,19]
%y = MatMul(%a, %bt) : f32[2,4,70,19]
output %y
PG

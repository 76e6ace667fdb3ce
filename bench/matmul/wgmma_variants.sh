#!/usr/bin/env bash
# The warpgroup gemm's next experiments (bench/matmul/NOTES.md, "Session 23:
# planned"), ready to run. They need a pootc built with
# bench/matmul/wgmma-variants.patch applied (`git apply`, never committed):
# with it the step's chain starts before the step's copies are issued and is
# waited for after them (every variant), and the environment picks
#   POOT_XT256=1  the 128 x 256 tile (a warpgroup 64 x 256) first,
#   POOT_XST=N    N stage buffers,
#   POOT_XLAG=1   the chain left running into the next step (copies ST - 2
#                 steps ahead; needs POOT_XST=4).
# Here, with the patched build: `bench/matmul/wgmma_variants.sh make BUILD
# BASE_BUILD DIR` writes, under DIR, the Llama-3-8B q, gate/up and down
# products at M = 2048 and 8192 from BASE_BUILD's pootc (an unpatched build:
# base) and from BUILD's (retire, t256, t256s4, t256lag), and oracle-check
# plans of sizes that are multiples of no tile for retire, t256 and t256lag
# (test/device/matmul_graphs.sh's two-byte products of 65 rows and more,
# and three products big enough for the 128 x 256 tile).
# On the GPU host: `bench/matmul/wgmma_variants.sh run DIR` checks each
# variant against the oracle (cuda_check.sh) and times them all beside
# PyTorch (ab.sh, AB_TORCH=1).
set -euo pipefail
cd "$(dirname "$0")/../.."
case ${1:-} in
  make)
    [ $# -eq 4 ] || { echo "usage: $0 make BUILD BASE_BUILD DIR" >&2; exit 2; }
    build=$(cd "$2" && pwd) base=$(cd "$3" && pwd)
    mkdir -p "$4"
    out=$(cd "$4" && pwd)
    export MATMUL_DTYPES=bf16c MATMUL_SHAPES="q gateup down" MATMUL_M="2048 8192"
    bench/matmul/make_plans.sh "$base" "$out/base"
    variants=("retire:" "t256:POOT_XT256=1" "t256s4:POOT_XT256=1 POOT_XST=4" "t256lag:POOT_XT256=1 POOT_XST=4 POOT_XLAG=1")
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    test/device/matmul_graphs.sh "$tmp/g" >/dev/null
    for mkn in 1030,1000,4100 1030,4104,4100 700,2000,4100; do
      IFS=, read -r m k n <<<"$mkn"
      printf 'graph big_%s_%s_%s\ninput %%x : bf16[%s,%s]\nweight %%w : bf16[%s,%s]\n%%wt = Transpose(%%w) {perm=[1, 0]} : bf16[%s,%s]\n%%y = MatMul(%%x, %%wt) : bf16[%s,%s]\noutput %%y\n' \
        "$m" "$k" "$n" "$m" "$k" "$n" "$k" "$k" "$n" "$m" "$n" >"$tmp/g/big-m$m-k$k-n$n-bf16.pg"
    done
    for v in "${variants[@]}"; do
      name=${v%%:*} vars=${v#*:}
      env $vars bench/matmul/make_plans.sh "$build" "$out/$name" | tail -n 1
      rm -rf "$out/$name/poot" "$out/$name/poot.bin" "$out/$name/lib"
      [ "$name" = t256s4 ] && continue
      mkdir -p "$out/chk-$name"
      for g in "$tmp"/g/matmul-m{65,130,513,1030}-*-{bf16,f16}.pg "$tmp"/g/big-*.pg; do
        [ -f "$g" ] || continue
        case $g in *-t-* | *-p-*) continue ;; esac
        env $vars "$build/tools/pootc/pootc" compile "$g" --device targets/nvidia-h200.yaml -o "$out/chk-$name/$(basename "$g" .pg).plan"
      done
    done
    ;;
  run)
    [ $# -eq 2 ] || { echo "usage: $0 run DIR" >&2; exit 2; }
    dir=$2
    chmod +x "$dir/base/poot"
    for name in retire t256 t256lag; do
      echo "== oracle checks: $name"
      test/device/cuda_check.sh "$dir/base/poot" "$dir/chk-$name" 7 | grep -v '^  ' || true
    done
    echo "== timings"
    AB_TORCH=1 AB_ITERS=50 bench/matmul/ab.sh "$dir"/{base,retire,t256,t256s4,t256lag}
    ;;
  *)
    echo "usage: $0 make BUILD BASE_BUILD DIR | run DIR" >&2
    exit 2
    ;;
esac

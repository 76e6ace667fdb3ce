#!/usr/bin/env bash
# The schedule experiments of bench/matmul/NOTES.md ("Session 9"), as run.
# They need a pootc built with bench/matmul/variants.patch applied (`git
# apply`, never committed): it lets the environment override the gemv's
# columns a thread (POOT_XTN), unroll (POOT_XU) and K lanes (POOT_XG), and
# double-buffer the gemm's staged tiles (POOT_XDB).
# Here: `bench/matmul/variants.sh make BUILD DIR` writes the M = 1 gemv
# graphs of every Llama-3-8B product (and q, k, v and gate, up as one product,
# qkv and gu2), f32 and bf16 weights, each compiled under nine gemv variants
# (v0 the planner's own choice), and the gemm graphs at M = 32, 512 and 4096
# single- (g0) and double-buffered (g1), with cases.tsv and the stripped poot.
# On the GPU host: `bench/matmul/variants.sh run DIR` draws each weight once
# with torch into a safetensors file, measures the copy ceiling and prints,
# for each plan, the median device time of `poot run --backend cuda` (200
# steps, 20 at M = 4096) with the weight bytes' rate (M = 1) or TFLOP/s.
set -euo pipefail
case ${1:-} in
  make)
    [ $# -eq 3 ] || { echo "usage: $0 make BUILD DIR" >&2; exit 2; }
    build=$(cd "$2" && pwd)
    mkdir -p "$3"
    out=$(cd "$3" && pwd)
    cd "$(dirname "$0")/../.."
    pootc=$build/tools/pootc/pootc
    : >"$out/cases.tsv"
    graph() {  # SHAPE N K M DTYPE
      {
        echo "graph g_$1_m$4_$5"
        echo "input %x : f32[$4,$3]"
        echo "weight %w : $5[$2,$3]"
        if [ "$5" = bf16 ]; then echo "%wf = Convert(%w) : f32[$2,$3]"; w=%wf; else w=%w; fi
        echo "%wt = Transpose($w) {perm=[1, 0]} : f32[$3,$2]"
        echo "%y = MatMul(%x, %wt) : f32[$4,$2]"
        echo "output %y"
      } >"$out/$1-m$4-$5.pg"
    }
    plan() {  # SHAPE N K M DTYPE VARIANT ENV...
      local s=$1 n=$2 k=$3 m=$4 dt=$5 name=$1-m$4-$5.$6
      shift 6
      env "$@" "$pootc" compile "$out/$s-m$m-$dt.pg" --device targets/nvidia-h200.yaml -o "$out/$name.plan"
      local sched
      sched=$("$pootc" inspect "$out/$name.plan" | grep -o 'schedule=gem[mv][^}]*' | head -1)
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$s" "$dt" "$n" "$k" "$m" "$sched" >>"$out/cases.tsv"
    }
    for sh in q:4096:4096 kv:1024:4096 gateup:14336:4096 down:4096:14336 qkv:6144:4096 gu2:28672:4096; do
      IFS=: read -r s n k <<<"$sh"
      for dt in f32 bf16; do
        graph "$s" "$n" "$k" 1 "$dt"
        plan "$s" "$n" "$k" 1 "$dt" v0
        plan "$s" "$n" "$k" 1 "$dt" v1 POOT_XTN=2 POOT_XU=2
        plan "$s" "$n" "$k" 1 "$dt" v2 POOT_XTN=4 POOT_XU=1
        plan "$s" "$n" "$k" 1 "$dt" v3 POOT_XTN=4 POOT_XU=2
        plan "$s" "$n" "$k" 1 "$dt" v4 POOT_XTN=2 POOT_XU=4
        plan "$s" "$n" "$k" 1 "$dt" v5 POOT_XTN=1 POOT_XU=8
        plan "$s" "$n" "$k" 1 "$dt" v6 POOT_XTN=4 POOT_XU=1 POOT_XG=64
        plan "$s" "$n" "$k" 1 "$dt" v7 POOT_XTN=2 POOT_XU=2 POOT_XG=64
        plan "$s" "$n" "$k" 1 "$dt" v8 POOT_XTN=4 POOT_XU=2 POOT_XG=32
      done
    done
    for sh in q:4096:4096 gateup:14336:4096 down:4096:14336 kv:1024:4096; do
      IFS=: read -r s n k <<<"$sh"
      for m in 32 512 4096; do
        graph "$s" "$n" "$k" "$m" f32
        plan "$s" "$n" "$k" "$m" f32 g0
        plan "$s" "$n" "$k" "$m" f32 g1 POOT_XDB=1
      done
    done
    install -s "$build/tools/poot/poot" "$out/poot"
    ;;
  run)
    [ $# -eq 2 ] || { echo "usage: $0 run DIR" >&2; exit 2; }
    dir=$2 poot=$2/poot
    python3 - "$dir" <<'PY'
import csv, sys
import torch
from safetensors.torch import save_file
d = sys.argv[1]
seen = set()
for row in csv.reader(open(f"{d}/cases.tsv"), delimiter="\t"):
    name, s, dt, n, k = row[:5]
    if (s, dt) in seen:
        continue
    seen.add((s, dt))
    w = torch.randn(int(n), int(k), device="cuda") * 0.02
    save_file({"w": (w.to(torch.bfloat16) if dt == "bf16" else w).cpu().contiguous()}, f"/tmp/w-{s}-{dt}.safetensors")
x = torch.empty(2**29, device="cuda")
y = torch.empty_like(x)
times = []
for i in range(13):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); y.copy_(x); b.record(); torch.cuda.synchronize()
    if i >= 3:
        times.append(a.elapsed_time(b))
times.sort()
print(f"copy ceiling: {2 * x.numel() * 4 / times[5] / 1e9:.3f} TB/s")
PY
    while IFS=$'\t' read -r name s dt n k m sched; do
      it=200
      [ "$m" -ge 4096 ] && it=20
      r=$("$poot" run "$dir/$name.plan" --backend cuda --weights "/tmp/w-$s-$dt.safetensors" --iterations "$it" \
        --output-dir /tmp/variants-out 2>&1) || true
      ms=$(sed -n 's/^median device time: \([0-9.]*\) ms .*$/\1/p' <<<"$r")
      bytes=$((n * k * (dt == "bf16" ? 2 : 4)))
      rate=$(awk -v b="$bytes" -v ms="${ms:-0}" -v m="$m" -v n="$n" -v k="$k" 'BEGIN {
        if (ms <= 0) print "-"
        else if (m <= 8) printf "%.2f TB/s", b / ms / 1e9
        else printf "%.1f TFLOP/s", 2 * m * n * k / ms / 1e9 }')
      printf '%-22s %9s ms %14s  %s\n' "$name" "${ms:-FAIL}" "$rate" "$sched"
    done <"$dir/cases.tsv"
    ;;
  *)
    echo "usage: $0 make BUILD DIR | run DIR" >&2
    exit 2
    ;;
esac

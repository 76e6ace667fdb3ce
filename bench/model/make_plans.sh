#!/usr/bin/env bash
# Here: traces Llama-3-8B's config cut to LAYERS layers (default 4) and
# compiles, for targets/nvidia-h200.yaml (PTX), the plans the model
# benchmark runs, f32 weights: decode (one token a step, live length, 4096
# positions a row) for B = 1 and 8, and prefill of 512 and 2048 tokens (B =
# 1, into the same 4096-position cache); and the B = 1 decode with bf16
# weights read as stored (decode-b1-bf16), with f32 weights as hf_side.py saves them (the
# config's own torch_dtype is bf16), each beside its `pootc inspect` text;
# also the cut config for transformers (config.json) and a copy of the poot
# binary, for run_h200.sh on the GPU host.
# With SET generate instead (generate_h200.sh's plans): for B = 1, 8 and 32,
# a paged prefill plan of B rows of 128 tokens and a paged decode plan of B
# rows (live length), each pair over one pool of B * 256 slots with a
# capacity of 256 positions (a 128-token prompt and 128 new tokens), for
# `poot generate`; f32 weights.
# With SET bf16 (run_bf16_h200.sh's plans), every plan reads bf16 weights as
# stored: decode (live length, 4096 positions a row; 1024 for B = 32) for B = 1, 8 and 32 and
# prefill of 512 and 2048 tokens with bf16 activations and KV cache
# (--dtype bf16, the bf16-* plans), and beside them the B = 1 and 32 decodes
# and the 2048-token prefill with f32 activations and KV cache (f32act-*).
# Usage: bench/model/make_plans.sh BUILD OUT_DIR [LAYERS] [model|generate|bf16]
set -euo pipefail
case "$#:${4:-model}" in
  [234]:model | 4:generate | 4:bf16) ;;
  *) echo "usage: $0 BUILD OUT_DIR [LAYERS] [model|generate|bf16]" >&2; exit 2 ;;
esac
build=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
layers=${3:-4}
set=${4:-model}
cd "$(dirname "$0")/../.."
pootc=$build/tools/pootc/pootc
config=examples/models/llama-3-8b.json
python3 -c "import json,sys; c=json.load(open('$config')); c['num_hidden_layers']=$layers; json.dump(c, open('$out/config.json','w'), indent=1)"

plan() {  # NAME WEIGHTS-DTYPE CAPACITY TRACE-ARGS...
  local name=$1 dtype=$2 capacity=$3
  shift 3
  "$pootc" trace "$config" --layers "$layers" --capacity "$capacity" --weights-dtype "$dtype" "$@" -o "$out/$name.pg"
  "$pootc" compile "$out/$name.pg" --device targets/nvidia-h200.yaml -o "$out/$name.plan"
  "$pootc" inspect "$out/$name.plan" > "$out/$name.txt"
  echo "$name: $(grep -c '^  d[0-9]' "$out/$name.txt") dispatches"
}
if [ "$set" = model ]; then
  plan decode-b1 f32 4096 --phase decode --live
  plan decode-b1-bf16 bf16 4096 --phase decode --live --dtype f32
  plan decode-b8 f32 4096 --phase decode --live --batch 8
  plan prefill-512 f32 4096 --phase prefill --tokens 512
  plan prefill-2048 f32 4096 --phase prefill --tokens 2048
elif [ "$set" = bf16 ]; then
  plan bf16-decode-b1 bf16 4096 --phase decode --live --dtype bf16
  plan bf16-decode-b8 bf16 4096 --phase decode --live --batch 8 --dtype bf16
  plan bf16-decode-b32 bf16 1024 --phase decode --live --batch 32 --dtype bf16
  plan bf16-prefill-512 bf16 4096 --phase prefill --tokens 512 --dtype bf16
  plan bf16-prefill-2048 bf16 4096 --phase prefill --tokens 2048 --dtype bf16
  plan f32act-decode-b1 bf16 4096 --phase decode --live --dtype f32
  plan f32act-decode-b32 bf16 1024 --phase decode --live --batch 32 --dtype f32
  plan f32act-prefill-2048 bf16 4096 --phase prefill --tokens 2048 --dtype f32
else
  for b in 1 8 32; do
    plan generate-prefill-b$b f32 256 --phase prefill --kv paged --batch $b --tokens 128 --pool-slots $((b * 256))
    plan generate-decode-b$b f32 256 --phase decode --kv paged --live --batch $b --pool-slots $((b * 256))
  done
fi
bench/carry_poot.sh "$build" "$out"

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
# Usage: bench/model/make_plans.sh BUILD OUT_DIR [LAYERS]
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD OUT_DIR [LAYERS]" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
layers=${3:-4}
cd "$(dirname "$0")/../.."
pootc=$build/tools/pootc/pootc
config=examples/models/llama-3-8b.json
python3 -c "import json,sys; c=json.load(open('$config')); c['num_hidden_layers']=$layers; json.dump(c, open('$out/config.json','w'), indent=1)"

plan() {  # NAME WEIGHTS-DTYPE TRACE-ARGS...
  local name=$1 dtype=$2
  shift 2
  "$pootc" trace "$config" --layers "$layers" --capacity 4096 --weights-dtype "$dtype" "$@" -o "$out/$name.pg"
  "$pootc" compile "$out/$name.pg" --device targets/nvidia-h200.yaml -o "$out/$name.plan"
  "$pootc" inspect "$out/$name.plan" > "$out/$name.txt"
  echo "$name: $(grep -c '^  d[0-9]' "$out/$name.txt") dispatches"
}
plan decode-b1 f32 --phase decode --live
plan decode-b1-bf16 bf16 --phase decode --live
plan decode-b8 f32 --phase decode --live --batch 8
plan prefill-512 f32 --phase prefill --tokens 512
plan prefill-2048 f32 --phase prefill --tokens 2048
install -s "$build/tools/poot/poot" "$out/poot"  # stripped: 1.4 MB instead of 33 to carry

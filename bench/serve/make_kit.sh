#!/usr/bin/env bash
# Here: the kit run_gpu.sh takes to the GPU host (NOTES.md, 'The kit').
# OUT_DIR gets
#   pkg/       `pootc package` of the model (config.json and a synthetic
#              tokenizer of its vocabulary, examples/models/byte-tokenizer.py) for DEVICE:
#              prefill, decode and mixed plans, activations and KV cache in
#              the config's torch_dtype (bf16 for Llama-3-8B)
#   poot, poot.bin, lib/   the poot binary with its libraries (carry_poot.sh)
#   traces/rate-R.jsonl    one seeded trace a rate (trace.py); the same
#              requests at every rate, only their arrivals differ
#   traces/warmup.jsonl    8 short requests both sides serve first, unreported
#   kit.env    the settings it was made with, for run_gpu.sh and the record
# BUILD_OR_BIN_DIR is a build tree (tools/pootc/pootc, tools/poot/poot) or a
# folder holding pootc and poot. Knobs (environment; defaults: the H200 run):
#   CONFIG (examples/models/llama-3-8b.json), DEVICE (nvidia-h200),
#   BATCH (32), CAPACITY (4096), TOKENS (512), PREFILL_BATCH (2),
#   MIXED_TOKENS (288: BATCH + 256), RATES ("2 8"), COUNT (64), SEED (33),
#   TRACE_ARGS (trace.py's distribution options; default the issue's, with
#   --context CAPACITY), WARMUP_ARGS (warmup.jsonl's), MODEL_NAME (llama-3-8b).
# Usage: bench/serve/make_kit.sh BUILD_OR_BIN_DIR OUT_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD_OR_BIN_DIR OUT_DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(cd "$1" && pwd)
if [ -x "$bin/tools/pootc/pootc" ]; then
  pootc=$bin/tools/pootc/pootc poot=$bin/tools/poot/poot
else
  pootc=$bin/pootc poot=$bin/poot
fi
[ -x "$pootc" ] && [ -x "$poot" ] || { echo "$0: no pootc and poot in $1" >&2; exit 2; }
config=${CONFIG:-$root/examples/models/llama-3-8b.json}
device=${DEVICE:-nvidia-h200}
batch=${BATCH:-32} capacity=${CAPACITY:-4096} tokens=${TOKENS:-512} prefill_batch=${PREFILL_BATCH:-2}
mixed=${MIXED_TOKENS:-$((batch + 256))}
rates=${RATES:-2 8} count=${COUNT:-64} seed=${SEED:-33}
trace_args=${TRACE_ARGS:---prompt 32 4096 --out-tokens 16 1024 --prefix 512 0.25 --ids 1000 100000}
warmup_args=${WARMUP_ARGS:---prompt 64 1024 --out-tokens 8 32 --prefix 0 0 --ids 1000 100000}
name=${MODEL_NAME:-llama-3-8b}

mkdir -p "$2"
out=$(cd "$2" && pwd)
[ ! -e "$out/pkg" ] || { echo "$0: $out/pkg exists (pootc package writes a new folder)" >&2; exit 2; }
model=$(mktemp -d)
trap 'rm -rf "$model"' EXIT
cp "$config" "$model/config.json"
vocab=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$config")
python3 "$here/../../examples/models/byte-tokenizer.py" "$model" "$vocab"
s=$(date +%s)
"$pootc" package "$model" --device "$device" -o "$out/pkg" --batch "$batch" --capacity "$capacity" \
  --tokens "$tokens" --prefill-batch "$prefill_batch" --mixed-tokens "$mixed"
echo "package.s $(($(date +%s) - s))"

# carry_poot.sh takes a build tree: give it one whose tools/poot/poot is the binary.
tree=$(mktemp -d)
trap 'rm -rf "$model" "$tree"' EXIT
mkdir -p "$tree/tools/poot"
ln -s "$poot" "$tree/tools/poot/poot"
"$root/bench/carry_poot.sh" "$tree" "$out"

mkdir -p "$out/traces"
# A short trace that both sides serve first, unreported: prefill, decode and
# mixed steps (and transformers' first batches) before anything is timed.
# shellcheck disable=SC2086
python3 "$here/trace.py" 1 16 8 "$out/traces/warmup.jsonl" $warmup_args --context "$capacity"
for r in $rates; do
  # shellcheck disable=SC2086  # TRACE_ARGS is a list of options
  python3 "$here/trace.py" "$seed" "$r" "$count" "$out/traces/rate-$r.jsonl" $trace_args --context "$capacity"
  python3 - "$out/traces/rate-$r.jsonl" <<'PY'
import json, sys
t = [json.loads(l) for l in open(sys.argv[1])]
name = sys.argv[1].rsplit("/", 1)[1][: -len(".jsonl")]
print(f"{name}.requests {len(t)}")
print(f"{name}.arrivals_s {t[-1]['arrival']:.1f}")
print(f"{name}.prompt_tokens {sum(len(q['prompt']) for q in t)}")
print(f"{name}.output_tokens {sum(q['max_tokens'] for q in t)}")
print(f"{name}.shared {sum(q['shared'] for q in t)}")
PY
done
cat >"$out/kit.env" <<EOF
model_name=$name
device=$device
batch=$batch
capacity=$capacity
tokens=$tokens
prefill_batch=$prefill_batch
mixed_tokens=$mixed
vocab=$vocab
rates="$rates"
count=$count
seed=$seed
trace_args="$trace_args --context $capacity"
warmup_args="$warmup_args --context $capacity"
poot_version="$("$poot" --version 2>&1 | head -1)"
EOF
du -sh "$out"

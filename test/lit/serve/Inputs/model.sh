#!/usr/bin/env bash
# model.sh POOTC POOT EXAMPLES TARGETS DIR: what a serve test serves, in DIR:
# a tiny Llama's paged plans for lavapipe (prefill: 2 rows of 8 tokens;
# decode: 2 rows; 128 positions, a pool of 32 blocks), a checkpoint from
# make-weights.py (seed 5), tok/ (the byte-level tokenizer of its 256 ids
# and the generate tests' chat template), and poot generate's greedy
# answers: gen-chat.jsonl to the conversation [user: hello] (12 tokens),
# gen-text.jsonl to the prompt "hello" (5 tokens).
set -euo pipefail
pootc=$1 poot=$2 examples=$3 targets=$4 d=$5
here=$(dirname "$0")
mkdir -p "$d"
python3 "$examples/models/byte-tokenizer.py" "$d/tok"
cp "$here/../../generate/Inputs/chat-config.json" "$d/tok/tokenizer_config.json"
"$pootc" trace "$examples/models/tiny-llama.json" --phase prefill --kv paged --batch 2 --tokens 8 --capacity 128 \
  --pool-slots 512 -o "$d/p.pg"
"$pootc" trace "$examples/models/tiny-llama.json" --phase decode --kv paged --live --batch 2 --capacity 128 \
  --pool-slots 512 -o "$d/d.pg"
"$pootc" compile "$d/p.pg" --device "$targets/lavapipe.yaml" -o "$d/p.plan"
"$pootc" compile "$d/d.pg" --device "$targets/lavapipe.yaml" -o "$d/d.plan"
python3 "$here/../../make-weights.py" "$d/p.pg" "$d/w.safetensors" --seed 5
echo '[{"role": "user", "content": "hello"}]' > "$d/chat.jsonl"
"$poot" generate "$d/p.plan" "$d/d.plan" --prompts "$d/chat.jsonl" --tokenizer "$d/tok" --chat \
  --weights "$d/w.safetensors" --max-new 12 --output "$d/gen-chat.jsonl" > /dev/null 2>&1
echo 'hello' > "$d/text.txt"
"$poot" generate "$d/p.plan" "$d/d.plan" --prompts "$d/text.txt" --tokenizer "$d/tok" --weights "$d/w.safetensors" \
  --max-new 5 --output "$d/gen-text.jsonl" > /dev/null 2>&1

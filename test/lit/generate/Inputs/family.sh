#!/usr/bin/env bash
# family.sh POOTC POOT CONFIG TARGET WORK: poot generate over one model
# family's paged plans (prefill: 2 rows of 8 tokens; decode: 2 rows; 32
# positions, a pool of 8 blocks) on three prompts, two sharing a block,
# with a checkpoint from make-weights.py, then oracle-greedy.py against
# `pootc eval` of a fixed-cache prefill graph of the same weights.
set -euo pipefail
pootc=$1 poot=$2 config=$3 target=$4 work=$5
here=$(dirname "$0")
mkdir -p "$work"
printf '%s\n' "$(seq -s ' ' 1 20)" "$(seq -s ' ' 1 16) 30 31" "5 6 7" > "$work/prompts.txt"
"$pootc" trace "$config" --phase prefill --kv paged --batch 2 --tokens 8 --capacity 32 --pool-slots 128 -o "$work/p.pg"
"$pootc" trace "$config" --phase decode --kv paged --batch 2 --capacity 32 --pool-slots 128 -o "$work/d.pg"
"$pootc" trace "$config" --phase prefill --tokens 32 --capacity 32 -o "$work/oracle.pg"
"$pootc" compile "$work/p.pg" --device "$target" -o "$work/p.plan"
"$pootc" compile "$work/d.pg" --device "$target" -o "$work/d.plan"
python3 "$here/../../make-weights.py" "$work/p.pg" "$work/w.safetensors"
"$poot" generate "$work/p.plan" "$work/d.plan" --prompts "$work/prompts.txt" --weights "$work/w.safetensors" \
  --max-new 6 --output "$work/out.jsonl" 2> /dev/null
python3 "$here/oracle-greedy.py" "$pootc" "$work/oracle.pg" "$work/w.safetensors" "$work/prompts.txt" \
  "$work/out.jsonl" "$work" 2> /dev/null

#!/usr/bin/env bash
# Rebuilds the seed corpora under fuzz/corpus/<target>/ from the repository's
# own inputs: small graphs (the decode-attention example, the pass tests, the
# run tests' inputs), their .pgb and compiled plans (pootc from BUILD_DIR), the
# device profiles and the malformed ones of the profile tests, the .npy
# fixtures of the unit tests and the arrays of the bad-input corpus, checkpoints and a shard index written by
# test/lit/make-weights.py, and the example model configs. The corpora are
# committed; this script is the record of how they were made. Usage:
#   fuzz/make-corpus.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
pootc=$1/tools/pootc/pootc
c=fuzz/corpus
rm -rf $c
mkdir -p $c/{graph_text,graph_binary,profile,plan,forged_plan,npy,safetensors,config,chat_template}

small_graphs=(examples/graphs/decode-attention.pg test/lit/run/Inputs/{embed,guarded,scaled,ids}.pg
  test/lit/cli/Inputs/small.pg)
for f in ranges-print fuse-bindings canonicalize-cse attention-decline-grid canonicalize-fold attention-alibi \
  matmul-operands fuse attention-paged attention-softcap rope-half selection-sparse; do
  small_graphs+=(test/lit/passes/$f.pg)
done
for g in "${small_graphs[@]}"; do
  n=$(basename "$g" .pg)
  cp "$g" $c/graph_text/
  "$pootc" compile "$g" --device targets/lavapipe.yaml --emit=graph -o $c/graph_binary/$n.pgb
done
cp test/lit/cli/Inputs/guarded.pg $c/graph_text/guarded-cli.pg

for p in lavapipe nvidia-h200 amd-mi300x; do
  "$pootc" compile examples/graphs/decode-attention.pg --device targets/$p.yaml -o $c/plan/decode-attention-$p.plan
done
"$pootc" compile test/lit/run/Inputs/embed.pg --device targets/lavapipe.yaml -o $c/plan/embed-lavapipe.plan
# forged_plan runs what it reads on lavapipe: small lavapipe plans, so that
# an execution (kernels built, one step) stays well under a second.
for g in test/lit/run/Inputs/{neg,chain,embed,slot-gather}.pg examples/graphs/decode-attention.pg; do
  "$pootc" compile "$g" --device targets/lavapipe.yaml -o $c/forged_plan/$(basename "$g" .pg).plan
done

cp targets/*.yaml $c/profile/
for f in test/lit/errors/profile/*.yaml; do cp "$f" $c/profile/bad-$(basename "$f"); done

cp test/unit/Inputs/*.npy $c/npy/
"$pootc" eval test/bad-inputs/Inputs/arrays.pg --output-dir $c/npy

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 test/lit/make-weights.py test/lit/passes/matmul-operands.pg $c/safetensors/matmul-operands.safetensors
python3 test/lit/make-weights.py test/lit/run/Inputs/embed.pg $c/safetensors/embed.safetensors
python3 test/lit/make-weights.py test/lit/passes/matmul-operands.pg "$tmp/sharded" --shards 2
cp "$tmp/sharded/model.safetensors.index.json" $c/safetensors/matmul-operands.index.json

cp examples/models/*.json $c/config/

# Chat templates: the lit tests' (the published ones stay out: their
# licenses are their authors').
python3 -c 'import json, sys; sys.stdout.write(json.load(open(sys.argv[1]))["chat_template"])' \
  test/lit/generate/Inputs/chat-config.json > $c/chat_template/lit.jinja

#!/usr/bin/env bash
# The main job on the embedded default: compile the example decode-attention
# graph for lavapipe as far as the pipeline goes, and print the result. It grows
# with the project: later it runs the plan on lavapipe and checks the oracle.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/build.sh build > /dev/null
echo "== pootc compile examples/graphs/decode-attention.pg --device targets/lavapipe.yaml --emit=graph =="
build/tools/pootc/pootc compile examples/graphs/decode-attention.pg --device targets/lavapipe.yaml --emit=graph

#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, with ASan and UBSan) and runs each for a
# bounded time from a corpus seeded with the example graphs. Usage:
# scripts/fuzz.sh [SECONDS_PER_TARGET] (default 30). A crash fails the script
# and leaves the input in build-fuzz/crashes/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}

mkdir -p build-fuzz
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPOOT_SANITIZE=ON -DPOOT_FUZZ=ON > build-fuzz/configure.log 2>&1 || { cat build-fuzz/configure.log; exit 1; }
ninja -C build-fuzz fuzz_graph_text fuzz_graph_binary

mkdir -p build-fuzz/corpus/text build-fuzz/corpus/binary build-fuzz/crashes
cp examples/graphs/*.pg build-fuzz/corpus/text/
for g in examples/graphs/*.pg; do
  build/tools/pootc/pootc compile "$g" --device targets/lavapipe.yaml --emit=graph \
    -o "build-fuzz/corpus/binary/$(basename "$g" .pg).pgb" 2>/dev/null || true
done
for t in text binary; do
  echo "== fuzz graph_$t for ${seconds}s =="
  build-fuzz/fuzz/fuzz_graph_$t -max_total_time="$seconds" -max_len=8192 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/crashes/ build-fuzz/corpus/$t 2>&1 | tail -4
done

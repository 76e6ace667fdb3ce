#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, with ASan and UBSan) and runs each for a
# bounded time, starting from its seed corpus in fuzz/corpus/<target>/ (read
# only; what a run adds goes to build-fuzz/corpus/<target>/). Usage:
# scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...] (default 20 s, all nine
# targets); POOT_FUZZ_JOBS sets ninja's -j. A crash fails the script and leaves
# the input in build-fuzz/crashes/. fuzz/README.md says what each target covers.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(graph_text graph_binary profile plan forged_plan npy safetensors config chat_template)

mkdir -p build-fuzz
cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPOOT_SANITIZE=ON -DPOOT_FUZZ=ON > build-fuzz/configure.log 2>&1 || { cat build-fuzz/configure.log; exit 1; }
ninja -C build-fuzz ${POOT_FUZZ_JOBS:+-j "$POOT_FUZZ_JOBS"} "${targets[@]/#/fuzz_}"

# Inputs larger than this are cut by libFuzzer; the plan seeds are the largest.
declare -A max_len=([plan]=65536 [forged_plan]=262144 [safetensors]=16384)
# forged_plan runs what it reads on lavapipe: its kernels compiled once
# (the cache), the driver's own leaks not counted, and a minute allowed for
# an execution (lavapipe's compiler on a busy 2-core machine).
export MESA_SHADER_CACHE_DIR=$PWD/build-fuzz/mesa-shader-cache
export LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan-lavapipe.supp:print_suppressions=0
declare -A timeout=([forged_plan]=60)
mkdir -p build-fuzz/crashes
status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  echo "== fuzz $t for ${seconds}s =="
  if ! build-fuzz/fuzz/fuzz_$t -max_total_time="$seconds" -max_len="${max_len[$t]:-8192}" -timeout="${timeout[$t]:-10}" \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="build-fuzz/crashes/$t-" \
      "build-fuzz/corpus/$t" "fuzz/corpus/$t" > "build-fuzz/$t.log" 2>&1; then
    status=1
    tail -40 "build-fuzz/$t.log"
  fi
  grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "build-fuzz/$t.log" | tail -2 || true
done
exit $status

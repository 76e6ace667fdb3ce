#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test
# (doctest unit tests and the lit suite, through ctest), then builds again
# with AddressSanitizer and UndefinedBehaviorSanitizer and runs them all again.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

echo "== build (RelWithDebInfo) =="
bash scripts/build.sh build
echo "== tests =="
ctest --test-dir build --output-on-failure -j2

echo "== build (address and undefined-behavior sanitizers) =="
bash scripts/build.sh build-asan -DPOOT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
echo "== tests under sanitizers =="
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j2

echo "== fuzzing (bounded) =="
bash scripts/fuzz.sh 30

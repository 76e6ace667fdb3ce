#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test
# (doctest unit tests and the lit suite, through ctest), then builds again
# with AddressSanitizer and UndefinedBehaviorSanitizer and runs them all again,
# compares the two trees' plans, and fuzzes each input reader for 10 s.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# One lavapipe shader cache for both trees' tests (each test that runs
# lavapipe takes MESA_SHADER_CACHE_DIR from the environment when it is set).
# The two trees generate the same SPIR-V, byte for byte (plans-identical,
# below), so the sanitizer run finds compiled what the optimized run
# compiled: it still runs every kernel, but lavapipe's compiles (most of the
# end-to-end matrix's time there, 267 s of its 20 cases with an empty cache
# against 55 s with a filled one, 2026-12-04) happen once.
export MESA_SHADER_CACHE_DIR=$PWD/build/mesa-shader-cache

echo "== build (optimized) =="
bash scripts/build.sh build
echo "== tests =="
# All but plans-identical, which runs once at the end instead, comparing this
# tree's plans with the sanitizer tree's (the same bytes from two builds,
# two processes each, for the same profiles).
ctest --test-dir build --output-on-failure -j2 -E '^plans-identical$'

echo "== build (address and undefined-behavior sanitizers) =="
bash scripts/build.sh build-asan -DPOOT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
echo "== tests under sanitizers =="
# All but the two broadest sweeps, which run above: every kernel of every
# example on every profile through its target's checks, and every tiny
# example graph at three pipeline stages through the primitive generators.
# Their host code (generators, writers, lowering) is the same the other
# tests drive under the sanitizers; their time is mostly lavapipe's, LLVM's
# and the KIR interpreter's, several times slower in this Debug build. (The
# generator tests run their plans on the interpreter alone in this build,
# test/unit/vulkan_plan.h.) plans-identical runs once
# below instead, comparing this tree's plans with the optimized tree's. The
# embed, python and readme tests load libpoot into a program built without
# the sanitizers (the example, python3; the README's quick start imports the
# module), where its ASan runtime cannot come first; they run above. The published tokenizers and chat templates run
# above too (Gemma-3's file takes most of two minutes to load in this
# build), and so do the 400 random templates against jinja2 (one poot run
# each: two minutes here); the tokenizer's and the templates' code runs
# here through their unit tests. Within lit, the tests marked
# `UNSUPPORTED: sanitized` are left out (test/lit/lit.cfg.py says why).
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j2 \
  -E '^(codegen examples: every kernel|gen: tiny graphs on the generated kernels|plans-identical|embed|python|readme|tokenizers-published|chat-templates-published|chat-templates-jinja2)'

echo "== plans identical across build types =="
# Every example graph, compiled by the optimized tree's pootc and by the
# sanitizer tree's (a Debug build), for one profile of each target: the same
# bytes. This replaces both trees' own runs of plans-identical (excluded
# above: every profile twice in the sanitizer build is minutes more, and
# this comparison, two builds in two processes, holds the optimized tree's).
PROFILES="lavapipe nvidia-h200 amd-mi300x" \
  bash scripts/plans-identical.sh build/tools/pootc/pootc build-asan/tools/pootc/pootc

echo "== fuzzing (bounded) =="
bash scripts/fuzz.sh 10

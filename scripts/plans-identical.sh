#!/usr/bin/env bash
# Same inputs, same plan: compiles every example graph for every device
# profile with two pootc binaries (or one binary twice) and compares the plans
# byte for byte; where a compile is refused, both refusals must be the same
# (exit code and diagnostic). Run by ctest with one build's pootc twice, and by
# scripts/test.sh with the Release tree's and the sanitizer tree's, so a plan
# depends on neither the run nor the build type. Usage:
#   scripts/plans-identical.sh POOTC_A [POOTC_B]   (default B: A again)
# PROFILES="lavapipe nvidia-h200" limits the profiles (default: every one in
# targets/).
set -euo pipefail
a=$(realpath "$1")
b=$(realpath "${2:-$1}")
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -n "${PROFILES:-}" ] || PROFILES=$(cd targets && ls *.yaml | sed 's/\.yaml$//')
pairs=0
differ=0
for g in examples/graphs/*.pg; do
  for profile in $PROFILES; do
    p=targets/$profile.yaml
    name="$(basename "$g" .pg)@$profile"
    set +e
    "$a" compile "$g" --device "$p" -o "$tmp/a.plan" > "$tmp/a.log" 2>&1
    ra=$?
    "$b" compile "$g" --device "$p" -o "$tmp/b.plan" > "$tmp/b.log" 2>&1
    rb=$?
    set -e
    pairs=$((pairs + 1))
    if [ $ra -ne $rb ] || ! cmp -s "$tmp/a.log" "$tmp/b.log"; then
      echo "$name: the two compiles differ (exit $ra and $rb)"; diff "$tmp/a.log" "$tmp/b.log" | head -5 || true
      differ=$((differ + 1))
    elif [ $ra -eq 0 ] && ! cmp "$tmp/a.plan" "$tmp/b.plan"; then
      echo "$name: the plans differ"
      differ=$((differ + 1))
    elif [ $ra -ne 0 ] && [ $ra -ne 3 ]; then
      echo "$name: pootc exited $ra:"; cat "$tmp/a.log"
      differ=$((differ + 1))
    fi
    rm -f "$tmp"/a.* "$tmp"/b.*
  done
done
echo "$((pairs - differ)) of $pairs graph and profile pairs compile to identical plans (or identical refusals)"
[ $differ -eq 0 ]

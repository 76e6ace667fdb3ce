#!/bin/sh
# Rewrites examples/graphs/ from the trace commands listed in examples.test
# (the one list of them), after an intended change of the tracer. Usage:
#   test/lit/trace/regen-examples.sh BUILD_DIR
# Run from anywhere; review the diff before committing it.
set -eu
build=${1:?usage: regen-examples.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
pootc="$build/tools/pootc/pootc"
grep '^RUN: %pootc trace' "$here/examples.test" | while read -r line; do
  cmd=${line#RUN: %pootc }
  cmd=${cmd%% | diff*}
  out=${line##*%examples/}
  args=$(printf '%s' "$cmd" | sed "s|%examples|$root/examples|g")
  # shellcheck disable=SC2086
  "$pootc" $args > "$root/examples/$out"
  echo "wrote examples/$out"
done

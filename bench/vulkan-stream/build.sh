#!/bin/sh
# Usage: build.sh OUT. Builds OUT/vkstream: the two shaders to
# SPIR-V with glslangValidator, embedded through xxd -i, then one g++ -O2
# compile that links libvulkan (libvulkan.so.1 at run time) and nothing else
# shared besides libc/libm (libstdc++ and libgcc are linked statically so the
# binary runs on a machine with an older or missing libstdc++).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
out=$1
mkdir -p "$out"
out=$(cd "$out" && pwd)
for s in copy add; do
  glslangValidator -V --target-env vulkan1.1 -o "$out/$s.spv" "$here/$s.comp" >/dev/null
done
(cd "$out" && xxd -i copy.spv && xxd -i add.spv) >"$out/shaders.h"
g++ -std=c++17 -O2 -Wall -Wextra -Wno-missing-field-initializers -I"$out" "$here/vkstream.cpp" -o "$out/vkstream" \
  -static-libstdc++ -static-libgcc -lvulkan
echo "$out/vkstream"

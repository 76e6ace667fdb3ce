#!/usr/bin/env bash
# Here, for the make_plans.sh scripts: a copy of BUILD's poot binary in
# OUT_DIR that runs on the GPU host. The binary (stripped: 1.4 MB instead of
# 33 to carry) goes in as OUT_DIR/poot.bin, beside it OUT_DIR/lib with the
# shared libraries it links beyond the C and C++ runtimes (the tokenizers'
# PCRE2 and utf8proc, which the GPU host lacks), and OUT_DIR/poot is a
# wrapper that runs poot.bin with that folder on LD_LIBRARY_PATH (and
# `poot run` with --allow-other-device: see the wrapper).
# Usage: bench/carry_poot.sh BUILD OUT_DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD OUT_DIR" >&2; exit 2; }
bin=$1/tools/poot/poot out=$2
install -s "$bin" "$out/poot.bin"
mkdir -p "$out/lib"
ldd "$bin" | awk '$3 ~ /^\// { print $3 }' | while read -r lib; do
  case $(basename "$lib") in
    libc.so* | libm.so* | libstdc++.so* | libgcc_s.so* | libdl.so* | libpthread.so* | librt.so*) ;;
    *) cp -L "$lib" "$out/lib/" ;;
  esac
done
cat >"$out/poot" <<'WRAP'
#!/bin/sh
here=$(dirname "$0")
# `poot run` takes the plans (compiled for one profile) on whichever card of
# that target the host has: the device tool lends H100s and H200s alike.
if [ "$1" = run ]; then shift; set -- run --allow-other-device "$@"; fi
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/poot.bin" "$@"
WRAP
chmod +x "$out/poot" "$out/poot.bin"

#!/usr/bin/env bash
# On the GPU host, from the repository root: the whole GPU suite over what
# test/device/make_suite.sh made (OUT_DIR), through CUDA and through Vulkan
# on the NVIDIA driver, every output held to a reference, and one table.
#  - matrix: cuda_check.sh over OUT_DIR/cuda (--backend cuda) and over
#    OUT_DIR/vulkan (--backend vulkan): every tiny config x phase x KV form
#    x live or not, decode-attention and the one-MatMul graphs, each output
#    and state against the oracle (seed 7).
#  - hf: each fixture's prefill plan on its own weights (the fixture folder:
#    one file, or bf16/f16 shards through their index) and tokens at pos 0,
#    its logits against the logits transformers computed (logits.npy) within
#    1e-3 of max(1, max |reference|), as test/unit/hf_test.cpp holds the oracle.
# Vulkan needs the loader and glvnd, which the NVIDIA driver's ICD loads:
# the .deb files of the repository's .gl folder (on the build machine, in
# .gl: apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1
# libglx0 libgles2) are unpacked into / and the NVIDIA ICD is named
# (VK_DRIVER_FILES, and __EGL_VENDOR_LIBRARY_FILENAMES where the host needs
# it); without .gl the Vulkan rows say why not.
# Usage: test/device/gpu_suite.sh OUT_DIR. Exit 1 when anything failed.
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: $0 OUT_DIR" >&2; exit 2; }
dir=$1 poot=$1/poot
here=$(dirname "$0")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
date -u +%Y-%m-%d
rows=() failed=0
# Each row is printed as soon as it is known, and again in the table.
row() {
  echo "$1"
  rows+=("$1")
}

vulkan=yes
if ! compgen -G ".gl/*.deb" >/dev/null; then
  vulkan="no .gl/*.deb (the Vulkan loader) was carried"
elif (for f in .gl/*.deb; do dpkg -x "$f" / || exit 1; done && ldconfig); then
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
  export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json}
else
  vulkan="unpacking .gl/*.deb into / failed"
fi

# The largest "max abs" of a log's check lines.
largest() { grep -o 'max abs [0-9.e+-]*' "$1" | awk '{ if ($3 + 0 > m) m = $3 + 0 } END { printf "%.2g", m }'; }

for backend in cuda vulkan; do
  suffix=plan
  [ "$backend" = vulkan ] && suffix=vk.plan
  if [ "$backend" = vulkan ] && [ "$vulkan" != yes ]; then
    row "| hf | vulkan | skipped: $vulkan | | |"
    continue
  fi
  ran=0 ok=0 worst=0
  for plan in "$dir"/hf/*."$suffix"; do
    [ "$backend" = cuda ] && [[ $plan == *.vk.plan ]] && continue
    name=$(basename "$plan" ".$suffix")
    fixture=$dir/hf/$name
    ran=$((ran + 1))
    if ! "$poot" run "$plan" --backend "$backend" --weights "$fixture" --input tokens="$fixture/tokens.npy" \
      --slot pos=0 --output-dir "$work/hf-$backend-$name" >"$work/hf.log" 2>&1; then
      echo "FAIL hf $name $backend: poot run failed"
      sed 's/^/  /' "$work/hf.log"
      failed=1
      continue
    fi
    verdict=$(python3 - "$work/hf-$backend-$name/logits.npy" "$fixture/logits.npy" <<'PY'
import sys
import numpy as np
got, ref = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
err = np.abs(got.reshape(ref.shape) - ref).max() if got.size == ref.size else float("inf")
bound = 1e-3 * max(1.0, np.abs(ref).max())
print(f"{'ok' if err <= bound else 'FAIL'} {err:.3g} {bound:.3g}")
PY
)
    read -r state err bound <<<"$verdict"
    if [ "$state" = ok ]; then
      ok=$((ok + 1))
    else
      echo "FAIL hf $name $backend: max abs $err, bound $bound"
      failed=1
    fi
    worst=$(awk -v a="$worst" -v b="$err" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
  done
  row "| hf | $backend | $ran | $ok | $worst |"
done

for backend in cuda vulkan; do
  if [ "$backend" = vulkan ] && [ "$vulkan" != yes ]; then
    row "| matrix | vulkan | skipped: $vulkan | | |"
    continue
  fi
  "$here/cuda_check.sh" "$poot" "$dir/$backend" 7 "$backend" >"$work/matrix-$backend.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || failed=1
  grep '^FAIL' "$work/matrix-$backend.log" | head -n 20
  ran=$(grep -c '^ok\|^FAIL' "$work/matrix-$backend.log")
  ok=$(grep -c '^ok' "$work/matrix-$backend.log")
  row "| matrix | $backend | $ran | $ok | $(largest "$work/matrix-$backend.log") |"
done

echo
echo "| suite | backend | plans | passed | largest max abs error |"
echo "|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit "$failed"

#!/usr/bin/env bash
# Installs every Debian 12 package the build and the tests need, when one is
# missing. Needs root (apt-get); does nothing when all are present.
set -euo pipefail

packages=(
  cmake ninja-build g++ python3 clang-14 libclang-rt-14-dev
  libcli11-dev libflatbuffers-dev flatbuffers-compiler
  spirv-tools spirv-headers libyaml-cpp-dev doctest-dev nlohmann-json3-dev
  llvm-19-dev llvm-19-tools lld-19 liblld-19-dev libzstd-dev
  libvulkan-dev mesa-vulkan-drivers vulkan-tools glslang-tools python3-numpy python3-venv
  libpcre2-dev libutf8proc-dev pkg-config python3-jinja2 libsodium-dev libcpp-httplib-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: these packages are missing and installing them needs root: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"

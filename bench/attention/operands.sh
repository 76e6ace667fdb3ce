# Sourced by run_h200.sh and ab.sh: operand_args DIR sets the array `args`
# to the `poot run` options that bind the operands torch_bench.py drew into
# DIR (the keys and values, kv.safetensors, as --weights; NAME.npy as --input
# NAME=..., the paged read map as --slot; the reference and a previous output
# are not operands).
operand_args() {
  args=()
  local f n
  [ -f "$1/kv.safetensors" ] && args+=(--weights "$1/kv.safetensors")
  for f in "$1"/*.npy; do
    n=$(basename "$f" .npy)
    case $n in
      ref | out) ;;
      read) args+=(--slot "read=$f") ;;
      *) args+=(--input "$n=$f") ;;
    esac
  done
}

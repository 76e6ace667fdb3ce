#!/usr/bin/env bash
# Here: writes the attention benchmark graphs (one Attention eqn each, f32 unless ATTN_DTYPE says)
# and compiles each for targets/nvidia-h200.yaml (PTX) into OUT_DIR/NAME.plan
# and, for the cases marked vk (all of them here), for
# targets/nvidia-h200-vulkan.yaml (SPIR-V) into OUT_DIR/NAME.vk.plan. Beside
# them: cases.tsv (one line a case: name, form, B, Hq, Hkv, Lq, Lk, Dk, Dv,
# shared key width, vk, param, dtype), each plan's schedule line
# (NAME.schedule.txt and NAME.vk.schedule.txt, from --remarks) and a copy of
# the poot binary, for run_h200.sh on the GPU host.
#
# The keys and values are weights (bound once, as a KV cache stays on the
# device), the rest inputs re-sent every step. Forms: dense (q [B,Hq,1,Dk],
# k [B,Hkv,Lk,Dk], v [B,Hkv,Lk,Dv]); mla (the
# key split as DeepSeek-V2-Lite's: k [B,H,Lk,Dk-Ds] plus k_shared
# [B,1,Lk,Ds]); paged (k and v pools of B*Lk slots, read [B,Lk]; PARAM is
# the page: 1, every key in a slot of its own drawn at random, or 16, pages
# of 16 consecutive slots drawn at random as a paged KV cache lays them); live
# (dense with len [B]); causal (a prefill of Lq = Lk rows under mask=causal,
# the query positions qpos [B, Lq] = 0 .. Lq - 1, as the attention rewrite
# forms a traced prefill); window (causal with a sliding window of PARAM
# keys, as Mistral's).
# PTX_PROFILE names another PTX profile (the H200's without its
# matrix_multiply line, say, for the SIMT prefill). ATTN_DTYPE=bf16 makes q,
# the keys, the values and the output bf16 (as a bf16 model keeps them; no
# Vulkan plans then: the Vulkan targets refuse bf16 storage); ATTN_FORMS
# (forms, space separated) keeps only those cases.
# Usage: [PTX_PROFILE=FILE] [ATTN_DTYPE=f32|bf16] [ATTN_FORMS="FORM ..."] bench/attention/make_plans.sh BUILD OUT_DIR
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD OUT_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
ptx_profile=$(realpath "${PTX_PROFILE:-$(dirname "$0")/../../targets/nvidia-h200.yaml}")
cd "$(dirname "$0")/../.."
pootc=$build/tools/pootc/pootc
dt=${ATTN_DTYPE:-f32}
case $dt in f32|bf16) ;; *) echo "$0: ATTN_DTYPE is f32 or bf16, not $dt" >&2; exit 2 ;; esac
: >"$out/cases.tsv"

dims() { local IFS=,; echo "[$*]"; }

# case NAME FORM B HQ HKV LQ LK DK DV DS VK [PARAM]
case_() {
  local name=$1 form=$2 B=$3 Hq=$4 Hkv=$5 Lq=$6 Lk=$7 Dk=$8 Dv=$9 Ds=${10} vk=${11} param=${12:-0}
  [ -z "${ATTN_FORMS:-}" ] || [[ " $ATTN_FORMS " == *" $form "* ]] || return 0
  [ "$dt" = f32 ] || vk=-
  local nrep=$((Hq / Hkv)) key=dense mask=none bound=capacity ops="%q, %k" g=$out/$name.pg
  local scale
  scale=$(awk -v d="$Dk" 'BEGIN { printf "%.17g", 1 / sqrt(d) }')
  {
    echo "graph attention_$name"
    echo "input %q : $dt$(dims "$B" "$Hq" "$Lq" "$Dk")"
    case $form in
      paged)
        echo "weight %k : $dt$(dims $((B * Lk)) "$Hkv" "$Dk")"
        echo "weight %v : $dt$(dims $((B * Lk)) "$Hkv" "$Dv")"
        echo "slot %read : i32$(dims "$B" "$Lk") range [0, $((B * Lk - 1))]"
        key=paged ;;
      mla)
        echo "weight %k : $dt$(dims "$B" "$Hkv" "$Lk" $((Dk - Ds)))"
        echo "weight %k_shared : $dt$(dims "$B" 1 "$Lk" "$Ds")"
        echo "weight %v : $dt$(dims "$B" "$Hkv" "$Lk" "$Dv")"
        ops+=", %k_shared"
        key=split ;;
      *)
        echo "weight %k : $dt$(dims "$B" "$Hkv" "$Lk" "$Dk")"
        echo "weight %v : $dt$(dims "$B" "$Hkv" "$Lk" "$Dv")" ;;
    esac
    ops+=", %v"
    [ "$form" = paged ] && ops+=", %read"
    if [ "$form" = causal ] || [ "$form" = window ]; then
      echo "input %qpos : i32$(dims "$B" "$Lq")"
      ops+=", %qpos"
      mask=causal
      [ "$form" = window ] && mask+=", window=$param"
    fi
    if [ "$form" = live ]; then
      echo "input %len : i32$(dims "$B")"
      ops+=", %len"
      bound=live
    fi
    echo "%out = Attention($ops) {scale=$scale, n_rep=$nrep, key=$key, mask=$mask, bound=$bound} : $dt$(dims "$B" "$Hq" "$Lq" "$Dv")"
    echo "output %out"
  } >"$g"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$form" "$B" "$Hq" "$Hkv" "$Lq" "$Lk" "$Dk" "$Dv" "$Ds" "$vk" \
    "$param" "$dt" >>"$out/cases.tsv"
  "$pootc" compile "$g" --device "$ptx_profile" -o "$out/$name.plan" --remarks 2>&1 </dev/null |
    sed -n 's/^.*remark: \[planner\] %out: //p' >"$out/$name.schedule.txt"
  echo "$name: $(cut -c1-150 "$out/$name.schedule.txt" | head -n 1)"
  if [ "$vk" = vk ]; then
    "$pootc" compile "$g" --device targets/nvidia-h200-vulkan.yaml -o "$out/$name.vk.plan" --remarks 2>&1 </dev/null |
      sed -n 's/^.*remark: \[planner\] %out: //p' >"$out/$name.vk.schedule.txt"
  fi
}

# Llama-3-8B's heads: 32 query heads over 8 KV heads of 128.
for B in 1 8 32; do
  for L in 1024 4096 16384 65536; do
    # 2^31 elements of K: past 32-bit kernel indices, pootc refuses it [IndexWidth].
    [ "$B" = 32 ] && [ "$L" = 65536 ] && continue
    case_ "d128-b$B-l$L" dense "$B" 32 8 1 "$L" 128 128 0 vk
  done
done
# Other head widths at B = 1, 16k keys: 64 (32 over 8 heads), 256 (Gemma-2's
# 16 over 8) and 512 (8 over 1); one KV head of 256 for 8 query heads (as
# Gemma-2B's); and one query head a KV head (n_rep 1, as Llama-2-7B's 32
# heads of 128) at B = 8, 4096 keys.
case_ d64-b1-l16384 dense 1 32 8 1 16384 64 64 0 vk
case_ d256-b1-l16384 dense 1 16 8 1 16384 256 256 0 vk
case_ d512-b1-l16384 dense 1 8 1 1 16384 512 512 0 vk
case_ mqa-b1-l16384 dense 1 8 1 1 16384 256 256 0 vk
case_ mha-b8-l4096 dense 8 32 32 1 4096 128 128 0 vk
# DeepSeek-V2-Lite's multi-head latent attention as traced: 16 heads, keys
# of 128 + 64 shared, values of 128.
case_ mla-b1-l16384 mla 1 16 16 1 16384 192 128 64 vk
# The paged and live forms of the Llama shape at B = 8, 16k keys (paged: a
# slot a key or pages of 16; live: the lengths are drawn in [L/2, L]).
case_ paged-b8-l16384 paged 8 32 8 1 16384 128 128 0 vk 1
case_ paged16-b8-l16384 paged 8 32 8 1 16384 128 128 0 vk 16
case_ live-b8-l16384 live 8 32 8 1 16384 128 128 0 vk
# Causal prefill, GQA 4, D 128; 1000 rows and keys are no multiple of any
# tile.
for L in 512 1000 2048 4096 8192; do
  case_ "causal-l$L" causal 1 32 8 "$L" "$L" 128 128 0 vk
done
# Sliding-window prefill: Mistral-7B's heads (the Llama ones) and window.
case_ window-l8192-w4096 window 1 32 8 8192 8192 128 128 0 vk 4096
bench/carry_poot.sh "$build" "$out"

#!/usr/bin/env bash
# On the GPU host, from the repository root: the serving benchmark over a
# kit of make_kit.sh (NOTES.md, 'The kit'). Steps, each under `timeout`:
#   prepare   bench/model/bf16_side.py prepare KIT/pkg WORK: the seeded random
#             model in bf16 as WORK/bf16, whose config.json then becomes the
#             packaged one byte for byte (poot serve refuses any other);
#             skipped when WORK/bf16 holds a shard index already, or WEIGHTS is set
#   poot      `poot serve KIT/pkg` on those weights (end-of-sequence: the
#             vocabulary's size, an id no step can sample, so each request
#             makes exactly its max_tokens), polled on /v1/models until it
#             answers; replay.py of traces/warmup.jsonl (unreported), then of
#             each traces/rate-*.jsonl; SIGTERM, and always on exit
#   hf        hf_serve.py on the same weights and traces (skipped with SKIP_HF=1)
# Prints `name value` lines (phase.*_s: each step's seconds) and keeps in
# WORK each replay's per-request JSONL and its summary, and serve.log.
# Environment: WEIGHTS (a checkpoint; no prepare), SKIP_HF=1, BACKEND (cuda),
# PORT (8531), PREPARE_TIMEOUT (150), LOAD_TIMEOUT (150), REPLAY_TIMEOUT
# (120, each trace), HF_TIMEOUT (330), POOT_ARGS (more poot serve options).
# Usage: bench/serve/run_gpu.sh KIT WORK
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 KIT WORK" >&2; exit 2; }
kit=$(cd "$1" && pwd) || exit 2
mkdir -p "$2" && work=$(cd "$2" && pwd) || exit 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# shellcheck disable=SC1091
. "$kit/kit.env"
backend=${BACKEND:-cuda} port=${PORT:-8531}
url=http://127.0.0.1:$port
begin=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
phase() { echo "phase.$1_s $(elapsed "$2")"; }

echo "run.date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/ /_/g; s/^/run.gpu /'
echo "run.poot_version ${poot_version// /_}"
# poot serve's handler threads (docs/runtime.md, 'Batching'): twice the decode rows, and eight.
echo "run.nproc $(nproc)"
echo "poot.http_threads $((2 * batch + 8))"
for k in device batch capacity tokens prefill_batch mixed_tokens count seed; do echo "kit.$k ${!k}"; done
chmod +x "$kit/poot" "$kit/poot.bin"

# Prepare the weights.
weights=${WEIGHTS:-$work/bf16}
if [ -z "${WEIGHTS:-}" ] && [ ! -f "$work/bf16/model.safetensors.index.json" ]; then
  t=$(date +%s.%N)
  (cd "$root/bench/model" && timeout "${PREPARE_TIMEOUT:-150}" python3 bf16_side.py prepare "$kit/pkg" "$work") \
    >"$work/prepare.log" 2>&1 || { echo "prepare.failed $?"; tail -20 "$work/prepare.log"; }
  phase prepare "$t"
fi
if [ -z "${WEIGHTS:-}" ]; then
  cp "$kit/pkg/config.json" "$work/bf16/config.json" || echo "prepare.config_copy_failed"
  echo "weights.bytes $(du -sb "$work/bf16" | cut -f1)"
fi

# poot serve.
server=
stop_server() {
  [ -n "$server" ] || return 0
  kill -TERM "$server" 2>/dev/null
  for _ in $(seq 60); do kill -0 "$server" 2>/dev/null || break; sleep 1; done
  kill -0 "$server" 2>/dev/null && { echo "poot.stop_killed 1"; kill -KILL "$server" 2>/dev/null; }
  wait "$server" 2>/dev/null
  echo "poot.exit $?"
  server=
}
trap stop_server EXIT
trap 'stop_server; exit 130' INT TERM

t=$(date +%s.%N)
# shellcheck disable=SC2086  # POOT_ARGS is a list of options
"$kit/poot" serve "$kit/pkg" --weights "$weights" --backend "$backend" --allow-other-device --port "$port" \
  --model "$model_name" --eos "$vocab" ${POOT_ARGS:-} >"$work/serve.log" 2>&1 &
server=$!
up=0
for _ in $(seq "${LOAD_TIMEOUT:-150}"); do
  kill -0 "$server" 2>/dev/null || break
  if python3 -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1] + '/v1/models', timeout=2).read()" \
    "$url" 2>/dev/null; then up=1; break; fi
  sleep 1
done
phase poot_load "$t"
if [ "$up" = 1 ]; then
  replay() {  # NAME TRACE
    local name=$1 trace=$2 from t
    from=$(($(wc -l <"$work/serve.log") + 1))
    t=$(date +%s.%N)
    timeout "${REPLAY_TIMEOUT:-120}" python3 "$here/replay.py" "$url" "$model_name" "$trace" "$work/poot.$name.jsonl" \
      >"$work/poot.$name.txt" 2>&1 || echo "poot.$name.replay_rc $?"
    phase "poot.$name" "$t"
    [ "$name" = warmup ] && return 0
    if [ -f "$work/poot.$name.jsonl" ]; then
      python3 "$here/summarize.py" "poot.$name" "$work/poot.$name.jsonl" --trace "$trace" \
        --log "$work/serve.log" --from "$from"
    else
      echo "poot.$name.failed no results"; tail -5 "$work/poot.$name.txt"
    fi
  }
  replay warmup "$kit/traces/warmup.jsonl"
  for trace in $(ls "$kit"/traces/rate-*.jsonl | sort -V); do
    replay "$(basename "$trace" .jsonl)" "$trace"
  done
else
  echo "poot.failed the server did not answer /v1/models"
  tail -20 "$work/serve.log"
fi
t=$(date +%s.%N)
stop_server
phase poot_stop "$t"
grep -m3 -i "error\|fail" "$work/serve.log" | sed 's/^/poot.log_note /'

# transformers.
if [ "${SKIP_HF:-0}" != 1 ]; then
  t=$(date +%s.%N)
  # shellcheck disable=SC2046
  PYTHONUNBUFFERED=1 timeout "${HF_TIMEOUT:-330}" python3 "$here/hf_serve.py" "$weights" "$work" \
    "$kit/traces/warmup.jsonl" $(ls "$kit"/traces/rate-*.jsonl | sort -V) 2>"$work/hf.log" ||
    { echo "hf.rc $?"; tail -20 "$work/hf.log"; }
  phase hf "$t"
fi
phase run "$begin"

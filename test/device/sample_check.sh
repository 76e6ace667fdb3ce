#!/usr/bin/env bash
# On a GPU host: the Sample kernel at Llama 3's vocabulary, with the
# parameters a server sends (test/device/make_plans.sh compiles
# sample-vocab.plan: 32 rows of 128256 logits). Writes the inputs as .npy
# (seeded, no numpy needed): logits drawn as a model's are (normal, scale 3), every
# mix of temperature (0 greedy, 0.3 .. 1.3), top_k (0, 7, 50), top_p (1,
# 0.9, 0.5), min_p (0, 0.05) and draws in [0, 1), every other row
# penalized (a list of 2048 holding 300 to 1800 ascending tokens, repetition
# 1.3, amounts up to 2) and the rest without; then `poot run --check`
# compares the tokens with the oracle's and times 50 steps.
# Usage, from the repository root: test/device/sample_check.sh POOT PLAN_DIR [BACKEND]
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 POOT PLAN_DIR [BACKEND]" >&2; exit 2; }
poot=$1 dir=$2 backend=${3:-cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY'
import array, random, sys
w, rows, n = sys.argv[1], 32, 128256
rng = random.Random(7)
def save(name, code, values):  # a C-order .npy of one row per line of `rows`
    data = array.array(code, values)
    shape = f"({rows}, {len(values) // rows})" if len(values) > rows else f"({rows},)"
    head = "{'descr': '<%s4', 'fortran_order': False, 'shape': %s, }" % ("f" if code == "f" else "i", shape)
    head += " " * (63 - (len(head) + 10) % 64) + "\n"
    with open(f"{w}/{name}.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode() + data.tobytes())
save("x", "f", [rng.gauss(0, 3) for _ in range(rows * n)])
save("t", "f", [0.0 if r % 8 == 7 else 0.3 + 0.2 * (r % 6) for r in range(rows)])
save("k", "i", [(0, 7, 50)[r % 3] for r in range(rows)])
save("p", "f", [(1.0, 0.9, 0.5, 0.9)[r % 4] for r in range(rows)])
save("m", "f", [0.05 if r % 5 == 0 else 0.0 for r in range(rows)])
save("u", "f", [rng.random() for _ in range(rows)])
width, seen, amounts = 2048, [], []
for r in range(rows):
    ids = sorted(rng.sample(range(n), 300 + 100 * (r % 16))) if r % 2 == 0 else []
    seen += ids + [-1] * (width - len(ids))
    amounts += [rng.choice((0.0, 0.4, 2.0)) for _ in ids] + [0.0] * (width - len(ids))
save("rp", "f", [1.3 if r % 2 == 0 else 1.0 for r in range(rows)])
save("sn", "i", seen)
save("sa", "f", amounts)
PY
args=()
for v in x t k p m u rp sn sa; do args+=(--input "$v=$work/$v.npy"); done
"$poot" run "$dir/sample-vocab.plan" --backend "$backend" "${args[@]}" --check --output-dir "$work/out"
"$poot" run "$dir/sample-vocab.plan" --backend "$backend" "${args[@]}" --iterations 50 --output-dir "$work/out" |
  grep -E 'median'

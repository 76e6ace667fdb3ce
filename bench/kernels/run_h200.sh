#!/usr/bin/env bash
# On the GPU host: each plan of PLAN_DIR (made by make_plans.sh) checked
# against the oracle once, then timed by `poot run --backend cuda
# --iterations 100` (the median step: launches and kernels, no uploads), and
# the same computation timed in PyTorch (CUDA events, median of 100 after
# warm-up): scaled_dot_product_attention with the K/V heads repeated for
# GQA, and x @ w. Usage: bench/kernels/run_h200.sh PLAN_DIR
set -euo pipefail
dir=$1
for plan in "$dir"/*.plan; do
  name=$(basename "$plan" .plan)
  "$dir/poot" run "$plan" --backend cuda --check --output-dir "$dir/out" | sed "s/^/$name check: /"
  "$dir/poot" run "$plan" --backend cuda --iterations 100 --output-dir "$dir/out" | sed "s/^/$name poot: /"
done
python3 - <<'PY'
import torch, torch.nn.functional as F

def median_ms(fn, iters=100):
    for _ in range(10):
        fn()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]

q = torch.randn(1, 32, 1, 128, device="cuda")
k = torch.randn(1, 8, 4096, 128, device="cuda")
v = torch.randn(1, 8, 4096, 128, device="cuda")
sdpa = lambda: F.scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1))
print(f"attention-decode torch sdpa (with the GQA repeat): {median_ms(sdpa):.3f} ms")
kr, vr = k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)
print(f"attention-decode torch sdpa (K/V already repeated): {median_ms(lambda: F.scaled_dot_product_attention(q, kr, vr)):.3f} ms")
x = torch.randn(1, 4096, device="cuda")
w = torch.randn(4096, 4096, device="cuda")
print(f"gemv torch x @ w: {median_ms(lambda: x @ w):.3f} ms")
print(torch.__version__, torch.cuda.get_device_name())
PY

#!/usr/bin/env python3
"""The PyTorch half of the MatMul benchmark (run_h200.sh calls it on the GPU host).

`torch_bench.py ceiling FILE`: the copy ceiling, dst.copy_(src) of a 2 GiB f32
tensor on the device, median of 20 (CUDA events, after 3 warm-up copies),
printed and written to FILE as TB/s counting the bytes read plus the bytes
written.

`torch_bench.py cases --poot TSV --ceiling FILE [--csv CSV] CASE...`: times
every case in PyTorch, then prints one table of the poot timings (TSV, as
run_h200.sh writes them: name, backend, ms or -, steps, check) beside
PyTorch's, and writes it as CSV when --csv is given. A CASE is
NAME:M:N:K:DTYPE, DTYPE the weight's (f32 or bf16; bf16c: x and y bf16 too), as in make_graphs.sh's
cases.tsv. x is [M, K] f32 and w [N, K] (the checkpoint layout); each case is
timed with CUDA events, median of 50 after 10 warm-up calls, the calls queued
back to back (so the time includes what PyTorch spends launching when the
kernel is shorter than that), rotating among enough distinct copies of the
weight that they span at least twice the L2 (at most 16 copies), so no call
finds its weight in L2:
  - f32 weights: F.linear(x, w), TF32 off (fp32_precision "ieee").
  - bf16 weights, two ways: what a bf16 PyTorch model runs, F.linear(x_bf16,
    w_bf16) (x converted to bf16 once, outside the timing: bf16 activations),
    and the f32-activation path of the poot graph, F.linear(x,
    w_bf16.float()) (the conversion of the weight inside the timing).
  - bf16c (poot all in bf16): F.linear(x_bf16, w_bf16), the same product.
Every case's tensors are freed before the next (the largest, lm_head in f32,
is 2.1 GB a copy; no case holds more than a few GB).

Derived figures: for M <= 32 the weight's bytes over the time (TB/s) and that
as % of the copy ceiling; above, 2*M*N*K over the time (TFLOP/s).
"""
import argparse
import csv
import math
import sys

WARMUP, ITERS = 10, 50
MAX_COPIES = 16


def median_ms(fn, iters=ITERS, warmup=WARMUP):
    """fn(i) for i = 0.., timed by CUDA events around each call; the middle time in ms."""
    import torch

    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for i, (a, b) in enumerate(events):
        a.record()
        fn(warmup + i)
        b.record()
    torch.cuda.synchronize()
    times = sorted(a.elapsed_time(b) for a, b in events)
    return times[len(times) // 2]


def run_ceiling(path):
    import torch

    nbytes = 2 << 30
    src = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda i: dst.copy_(src), iters=20, warmup=3)
    tbps = 2 * nbytes / (ms * 1e-3) / 1e12
    print(f"copy ceiling: {tbps:.3f} TB/s (dst.copy_(src) of 2 GiB f32, bytes read + written, median of 20: "
          f"{ms:.3f} ms) on {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    with open(path, "w") as f:
        f.write(f"{tbps}\n")


def parse_case(text):
    try:
        name, m, n, k, dt = text.split(":")
        case = {"name": name, "M": int(m), "N": int(n), "K": int(k), "dtype": dt}
    except ValueError:
        sys.exit(f"torch_bench.py: a case is NAME:M:N:K:DTYPE, not {text!r}")
    if dt not in ("f32", "bf16", "bf16c"):
        sys.exit(f"torch_bench.py: case {name}: weight dtype {dt!r} is not f32, bf16 or bf16c")
    return case


def time_torch(cases):
    """{name: {"torch": ms, "torch_f32act": ms}}, None for what did not run."""
    import torch
    import torch.nn.functional as F

    mm = torch.backends.cuda.matmul
    if hasattr(mm, "fp32_precision"):  # the API since 2.9; do not also touch allow_tf32 (mixing them is an error)
        mm.fp32_precision = "ieee"
        tf32 = f'fp32_precision = "{mm.fp32_precision}"'
    else:
        mm.allow_tf32 = False
        tf32 = f"allow_tf32 = {mm.allow_tf32}"
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: matmul {tf32}, L2 {l2 / 2**20:.0f} MiB",
          flush=True)
    out = {}
    for c in cases:
        name, m, n, k, dt = c["name"], c["M"], c["N"], c["K"], c["dtype"]
        wdtype, wb = (torch.float32, 4) if dt == "f32" else (torch.bfloat16, 2)
        copies = max(1, min(MAX_COPIES, math.ceil(2 * l2 / (n * k * wb))))
        res = {"torch": None, "torch_f32act": None, "copies": copies}
        try:
            torch.manual_seed(0)
            x = torch.randn(m, k, device="cuda")
            ws = [torch.randn(n, k, device="cuda", dtype=wdtype) for _ in range(copies)]
            if dt == "f32":
                res["torch"] = median_ms(lambda i: F.linear(x, ws[i % copies]))
                print(f"{name} torch F.linear(x, w) f32: {res['torch']:.4f} ms ({copies} weight copies)", flush=True)
            else:
                xb = x.bfloat16()
                res["torch"] = median_ms(lambda i: F.linear(xb, ws[i % copies]))
                print(f"{name} torch F.linear(x_bf16, w_bf16): {res['torch']:.4f} ms ({copies} weight copies)",
                      flush=True)
                del xb
                if dt == "bf16":  # bf16c: poot computes in bf16 too, F.linear(x_bf16, w_bf16) is the same product
                    res["torch_f32act"] = median_ms(lambda i: F.linear(x, ws[i % copies].float()))
                    print(f"{name} torch F.linear(x, w_bf16.float()): {res['torch_f32act']:.4f} ms", flush=True)
        except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
            print(f"{name} torch: failed: {str(e).splitlines()[0]}", flush=True)
        finally:
            x = ws = None
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        out[name] = res
    return out


def read_poot(path):
    """{(name, backend): (ms or None, steps, check)} from run_h200.sh's TSV."""
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 5:
                continue
            name, backend, ms, steps, check = parts
            out[(name, backend)] = (None if ms == "-" else float(ms), steps, check)
    return out


def derived(c, ms, ceiling):
    """(weight TB/s, % of the copy ceiling, TFLOP/s) for a time in ms, or Nones."""
    if ms is None or ms <= 0:
        return None, None, None
    wbytes = c["N"] * c["K"] * (4 if c["dtype"] == "f32" else 2)
    tbps = wbytes / (ms * 1e-3) / 1e12
    pct = 100 * tbps / ceiling if ceiling else None
    tflops = 2 * c["M"] * c["N"] * c["K"] / (ms * 1e-3) / 1e12
    return tbps, pct, tflops


def rate_cell(c, ms, ceiling):
    tbps, pct, tflops = derived(c, ms, ceiling)
    if tbps is None:
        return "-"
    if c["M"] <= 32:
        return f"{tbps:.2f} TB/s" + (f" {pct:.0f}%" if pct is not None else "")
    return f"{tflops:.1f} TFLOP/s"


def fmt_ms(ms):
    return "-" if ms is None else f"{ms:.4f}" if ms < 1 else f"{ms:.3f}"


def print_table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(v).rjust(w) if i else str(v).ljust(w) for i, (v, w) in enumerate(zip(r, widths))))


def run_cases(args):
    cases = [parse_case(t) for t in args.case]
    with open(args.ceiling) as f:
        ceiling = float(f.read().strip() or 0) or None
    poot = read_poot(args.poot)
    torch_ms = time_torch(cases)

    series = ("poot_cuda", "poot_vulkan", "torch", "torch_f32act")
    header = ["case", "M", "N", "K", "w", "cuda ms", "check", "vulkan ms", "check", "torch ms", "f32-act ms",
              "cuda", "vulkan", "torch", "f32-act"]
    rows, records = [], []
    for c in cases:
        name = c["name"]
        cu = poot.get((name, "cuda"), (None, "", "-"))
        vk = poot.get((name, "vulkan"), (None, "", "-"))
        t = torch_ms.get(name, {})
        times = {"poot_cuda": cu[0], "poot_vulkan": vk[0], "torch": t.get("torch"), "torch_f32act": t.get("torch_f32act")}
        rows.append([name, c["M"], c["N"], c["K"], c["dtype"], fmt_ms(cu[0]), cu[2], fmt_ms(vk[0]), vk[2],
                     fmt_ms(times["torch"]), fmt_ms(times["torch_f32act"])] +
                    [rate_cell(c, times[s], ceiling) for s in series])
        rec = {"name": name, "M": c["M"], "N": c["N"], "K": c["K"], "weight_dtype": c["dtype"],
               "weight_bytes": c["N"] * c["K"] * (4 if c["dtype"] == "f32" else 2),
               "copy_ceiling_tbps": ceiling, "poot_cuda_steps": cu[1], "poot_cuda_check": cu[2],
               "poot_vulkan_steps": vk[1], "poot_vulkan_check": vk[2], "torch_weight_copies": t.get("copies")}
        for s in series:
            tbps, pct, tflops = derived(c, times[s], ceiling)
            rec.update({f"{s}_ms": times[s], f"{s}_weight_tbps": tbps, f"{s}_pct_copy": pct, f"{s}_tflops": tflops})
        records.append(rec)

    print()
    print_table(header, rows)
    print(f"ms: poot, the median device time of `poot run --iterations` (CUDA events or Vulkan timestamps around "
          f"the step's launches; the host's step time where the backend gives none; check: PASS/FAIL against the "
          f"oracle, - not checked); torch, CUDA events, median of {ITERS} after "
          f"{WARMUP} warm-up calls. f32 rows: torch = F.linear(x, w), no TF32. bf16 rows: torch = F.linear(x_bf16, "
          f"w_bf16), f32-act = F.linear(x, w_bf16.float()).")
    print(f"rates: M <= 32, weight bytes / time in TB/s and % of the copy ceiling "
          f"({'%.3f TB/s' % ceiling if ceiling else 'not measured'}); M > 32, 2*M*N*K / time in TFLOP/s.")
    print("poot reads the same weight every step (torch rotates copies): the kv weights (16.8 MB f32, 8.4 MB bf16) "
          "fit in L2, so poot's small-M kv rates may come from L2.")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(records[0].keys()) if records else ["name"])
            w.writeheader()
            for r in records:
                w.writerow({k: ("" if v is None else f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
        print(f"wrote {args.csv}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("ceiling", help="measure the device-to-device copy ceiling")
    c.add_argument("file", help="where to write the ceiling (TB/s)")
    t = sub.add_parser("cases", help="time the cases in PyTorch and print the table")
    t.add_argument("--poot", required=True, help="poot timings: name, backend, ms, steps, check (TSV)")
    t.add_argument("--ceiling", required=True, help="the file `ceiling` wrote")
    t.add_argument("--csv", help="write the table as CSV here")
    t.add_argument("case", nargs="+", help="NAME:M:N:K:DTYPE")
    args = p.parse_args()
    if args.cmd == "ceiling":
        run_ceiling(args.file)
    else:
        run_cases(args)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The PyTorch half of the attention benchmark (run_h200.sh calls it on the GPU host).

`torch_bench.py prepare PLAN_DIR DATA_DIR`: for every case of PLAN_DIR/cases.tsv
(make_plans.sh writes it) draws the operands on the GPU (torch.randn, seeded by
the case's index; the paged read map in pages of `param` consecutive slots,
the pages a random permutation of the pool; live lengths in [Lk/2, Lk]; the
causal prefill's query positions 0 .. Lq - 1, its reference mask 0 on and
below the diagonal, -inf above; a sliding window's also -inf at and past
`param` keys below the diagonal), writes the keys and values as
DATA_DIR/NAME/kv.safetensors for `poot run --weights` and the rest as
DATA_DIR/NAME/OPERAND.npy for `poot run --input`,
computes the reference output in float64, and times PyTorch on the same case
(a bf16 case, ATTN_DTYPE=bf16 in make_plans.sh, draws the same way and rounds
to bf16, writes its floats as bf16 and counts its K/V bytes as 2 each):
scaled_dot_product_attention in f32 with the math backend (enable_gqa) and the
memory-efficient backend (K/V repeated to every query head beforehand), and in
bf16 with the flash and cuDNN backends (K/V repeated likewise), each a median
of 50 CUDA-event timings after 10 warm-up calls. The copy ceiling (a 2 GiB f32
dst.copy_(src), bytes read + written) is measured first. It writes
DATA_DIR/torch.json.

`torch_bench.py report PLAN_DIR DATA_DIR POOT_TSV [CSV]`: compares each poot
output (DATA_DIR/NAME/out.npy, DATA_DIR/NAME/vk/out.npy) with the float64
reference (max |poot - ref| / max |ref|), and prints one table: poot's median
device time (CUDA events around the step's launches; for Vulkan its
timestamps around the command buffer), PyTorch's times, TB/s of the K/V bytes read and % of the copy
ceiling for the decodes, TFLOP/s for the prefills (4 * Hq * D * L^2 / 2 for
causal, 4 * Hq * D times the band's pairs for a sliding window), and the
schedule poot chose.
"""
import csv
import json
import math
import os
import sys

WARMUP, ITERS = 10, 50


def cases(plan_dir):
    out = []
    with open(os.path.join(plan_dir, "cases.tsv")) as f:
        for line in f:
            n, form, B, Hq, Hkv, Lq, Lk, Dk, Dv, Ds, vk, param, dtype = line.rstrip("\n").split("\t")
            out.append(dict(name=n, form=form, B=int(B), Hq=int(Hq), Hkv=int(Hkv), Lq=int(Lq), Lk=int(Lk),
                            Dk=int(Dk), Dv=int(Dv), Ds=int(Ds), vk=vk == "vk", param=int(param), dtype=dtype))
    return out


def median_ms(fn):
    import torch

    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(ITERS)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    t = sorted(a.elapsed_time(b) for a, b in ev)
    return t[len(t) // 2]


def ceiling():
    import torch

    src = torch.empty(2**29, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    del src, dst
    return 2 * 2**31 / (ms * 1e-3) / 1e12


def operands(c, seed):
    """The case's operands (f32 / i32 on the GPU; for a bf16 case the f32
    values rounded to bf16, so every side computes on the same values) and
    the dense views torch uses."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    B, Hq, Hkv, Lq, Lk, Dk, Dv, Ds = (c[k] for k in ("B", "Hq", "Hkv", "Lq", "Lk", "Dk", "Dv", "Ds"))
    rounded = (lambda t: t.bfloat16().float()) if c["dtype"] == "bf16" else (lambda t: t)
    rnd = lambda *s: rounded(torch.randn(*s, device="cuda", generator=g))
    ops = {"q": rnd(B, Hq, Lq, Dk)}
    mask = None
    if c["form"] == "paged":
        S = B * Lk
        ops["k"], ops["v"] = rnd(S, Hkv, Dk), rnd(S, Hkv, Dv)
        P = c["param"]  # a page's slots: pages drawn at random, slots in order within one
        pages = torch.randperm(S // P, device="cuda", generator=g)
        ops["read"] = (pages[:, None] * P + torch.arange(P, device="cuda")).reshape(B, Lk).to(torch.int32)
        idx = ops["read"].long()
        k = ops["k"][idx].permute(0, 2, 1, 3)  # [B, Hkv, Lk, Dk]
        v = ops["v"][idx].permute(0, 2, 1, 3)
    elif c["form"] == "mla":
        ops["k"], ops["k_shared"], ops["v"] = rnd(B, Hkv, Lk, Dk - Ds), rnd(B, 1, Lk, Ds), rnd(B, Hkv, Lk, Dv)
        k = torch.cat([ops["k"], ops["k_shared"].expand(B, Hkv, Lk, Ds)], dim=-1)
        v = ops["v"]
    else:
        ops["k"], ops["v"] = rnd(B, Hkv, Lk, Dk), rnd(B, Hkv, Lk, Dv)
        k, v = ops["k"], ops["v"]
    if c["form"] in ("causal", "window"):
        keep = torch.ones(Lq, Lk, device="cuda", dtype=torch.bool).tril(Lk - Lq)
        if c["form"] == "window":  # query i (at position Lk - Lq + i) sees key t when pos - t < window
            keep &= torch.ones(Lq, Lk, device="cuda", dtype=torch.bool).triu(Lk - Lq - c["param"] + 1)
        mask = torch.zeros(1, 1, Lq, Lk, device="cuda").masked_fill(~keep, -math.inf)
        ops["qpos"] = (torch.arange(Lq, device="cuda", dtype=torch.int32) + (Lk - Lq)).expand(B, Lq).contiguous()
    if c["form"] == "live":
        ops["len"] = torch.randint(Lk // 2, Lk + 1, (B,), device="cuda", generator=g, dtype=torch.int32)
        pos = torch.arange(Lk, device="cuda")
        mask = torch.zeros(B, 1, 1, Lk, device="cuda").masked_fill(pos[None, None, None, :] >= ops["len"].long()[:, None, None, None], -math.inf)
    return ops, k, v, mask


def reference(c, q, k, v, mask):
    """float64 softmax(q k^T * scale + mask) v, K/V heads shared by n_rep query heads."""
    import torch

    rep = c["Hq"] // c["Hkv"]
    q64, k64, v64 = q.double(), k.double().repeat_interleave(rep, 1), v.double().repeat_interleave(rep, 1)
    s = q64 @ k64.transpose(-1, -2) / math.sqrt(c["Dk"])
    if mask is not None:
        s = s + mask.double()
    return (torch.softmax(s, dim=-1) @ v64).float()


def time_torch(c, q, k, v, mask):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rep = c["Hq"] // c["Hkv"]
    causal = c["form"] == "causal"
    scale = 1 / math.sqrt(c["Dk"])
    times = {}
    kr, vr = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    # The live form's mask stands for its lengths; the causal one is is_causal.
    am = None if causal else mask

    def run(name, backend, qq, kk, vv, m, gqa=False):
        try:
            with sdpa_kernel(backend):
                fn = lambda: F.scaled_dot_product_attention(qq, kk, vv, attn_mask=m, is_causal=causal and m is None,
                                                             scale=scale, enable_gqa=gqa)
                fn()
                times[name] = median_ms(fn)
        except RuntimeError as e:
            times[name] = None
            print(f"{c['name']} torch {name}: not run ({str(e).splitlines()[0][:100]})")

    run("math_f32", SDPBackend.MATH, q, k, v, am, gqa=rep > 1)
    run("efficient_f32", SDPBackend.EFFICIENT_ATTENTION, q, kr, vr, am)
    qb, kb, vb = q.bfloat16(), kr.bfloat16(), vr.bfloat16()
    mb = None if am is None else am.bfloat16()
    run("flash_bf16", SDPBackend.FLASH_ATTENTION, qb, kb, vb, mb)
    run("cudnn_bf16", SDPBackend.CUDNN_ATTENTION, qb, kb, vb, mb)
    return times


def prepare(plan_dir, data_dir):
    import numpy as np
    import torch
    from safetensors.torch import save_file

    torch.backends.cuda.matmul.fp32_precision = "ieee"
    result = {"ceiling_tbs": ceiling(), "torch": torch.__version__, "gpu": torch.cuda.get_device_name(), "cases": {}}
    print(f"copy ceiling: {result['ceiling_tbs']:.2f} TB/s ({result['gpu']}, torch {result['torch']})")
    for i, c in enumerate(cases(plan_dir)):
        ops, k, v, mask = operands(c, 1000 + i)
        d = os.path.join(data_dir, c["name"])
        os.makedirs(d, exist_ok=True)
        # The keys and values as the weights of kv.safetensors (the plans
        # declare them so: bound once, not sent again every step), the rest
        # as NAME.npy.
        # A bf16 case's floats go as bf16: the safetensors dtype BF16, and
        # the .npy as 2-byte voids ('|V2', which poot reads as bf16).
        stored = (lambda t: t.bfloat16() if t.is_floating_point() else t) if c["dtype"] == "bf16" else (lambda t: t)
        kv = {n: stored(t).cpu().contiguous() for n, t in ops.items() if n in ("k", "k_shared", "v")}
        save_file(kv, os.path.join(d, "kv.safetensors"))
        for n, t in ops.items():
            if n not in kv:
                t = stored(t)
                a = t.view(torch.int16).cpu().numpy().view("V2") if t.dtype == torch.bfloat16 else t.cpu().numpy()
                np.save(os.path.join(d, n + ".npy"), a)
        del kv
        ref = reference(c, ops["q"], k, v, mask)
        np.save(os.path.join(d, "ref.npy"), ref.cpu().numpy())
        times = time_torch(c, ops["q"], k, v, mask)
        # torch's own f32 math error against the float64 reference.
        rep = c["Hq"] // c["Hkv"]
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import torch.nn.functional as F

        with sdpa_kernel(SDPBackend.MATH):
            mine = F.scaled_dot_product_attention(ops["q"], k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                                  attn_mask=mask, scale=1 / math.sqrt(c["Dk"]))
        times["math_f32_err"] = float((mine - ref).abs().max() / ref.abs().max())
        result["cases"][c["name"]] = times
        print(f"{c['name']}: torch " + ", ".join(f"{n} {t:.4f}" if isinstance(t, float) else f"{n} -" for n, t in times.items()))
        del ops, k, v, mask, ref, mine
        torch.cuda.empty_cache()
    with open(os.path.join(data_dir, "torch.json"), "w") as f:
        json.dump(result, f, indent=1)


def elem_bytes(c):
    """Bytes of one K/V element as the case stores it."""
    return 2 if c["dtype"] == "bf16" else 4


def kv_bytes(c):
    keys = c["B"] * c["Lk"]
    if c["form"] == "live":
        keys = c["B"] * c["Lk"] * 3 // 4  # the lengths' expectation; the exact sum is printed
    width = c["Hkv"] * (c["Dk"] - c["Ds"] + c["Dv"]) + c["Ds"]
    return keys * width * elem_bytes(c)


def load_out(path):
    """poot's output as f32: a bf16 .npy ('|V2') widened."""
    import numpy as np

    a = np.load(path)
    if a.dtype.kind == "V":
        a = (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return a


def pairs(c):
    """The (query, key) pairs a case's FLOPs count: L^2 / 2 for causal (as the
    earlier tables), the band's exact count for a window (Lq = Lk)."""
    if c["form"] == "causal":
        return c["Lq"] * c["Lk"] / 2
    if c["form"] == "window":
        W, L = c["param"], c["Lq"]
        return sum(min(i + 1, W) for i in range(L))
    return c["Lq"] * c["Lk"]


def report(plan_dir, data_dir, poot_tsv, csv_path=None):
    import numpy as np

    with open(os.path.join(data_dir, "torch.json")) as f:
        tj = json.load(f)
    ceil = tj["ceiling_tbs"]
    poot = {}
    with open(poot_tsv) as f:
        for line in f:
            name, backend, ms = line.rstrip("\n").split("\t")
            poot[(name, backend)] = None if ms == "-" else float(ms)
    rows = []
    for c in cases(plan_dir):
        d = os.path.join(data_dir, c["name"])
        ref = np.load(os.path.join(d, "ref.npy"))
        bytes_ = kv_bytes(c)
        if c["form"] == "live":
            lens = np.load(os.path.join(d, "len.npy"))
            bytes_ = int(lens.sum()) * c["Hkv"] * (c["Dk"] + c["Dv"]) * elem_bytes(c)
        flops = 4 * c["B"] * c["Hq"] * c["Dk"] * pairs(c)
        t = tj["cases"][c["name"]]
        for backend, sub in (("cuda", ""), ("vulkan", "vk")):
            if backend == "vulkan" and not c["vk"]:
                continue
            with open(os.path.join(plan_dir, c["name"] + (".vk" if sub else "") + ".schedule.txt")) as f:
                sched = f.read().split(":")[0].strip()
            ms = poot.get((c["name"], backend))
            out = os.path.join(d, sub, "out.npy")
            err = float(np.abs(load_out(out) - ref).max() / np.abs(ref).max()) if os.path.exists(out) and ms else None
            rows.append(dict(case=c["name"], dtype=c["dtype"], backend=backend, poot_ms=ms, err=err, sched=sched, bytes=bytes_,
                             flops=flops, decode=c["Lq"] == 1, **{k: t.get(k) for k in
                                                               ("math_f32", "efficient_f32", "flash_bf16", "cudnn_bf16",
                                                                "math_f32_err")}))
    rate = lambda r, ms: None if not ms else (r["bytes"] / (ms * 1e-3) / 1e12 if r["decode"] else r["flops"] / (ms * 1e-3) / 1e12)
    fmt = lambda x, p=3: "-" if x is None else f"{x:.{p}f}"
    print(f"\ncopy ceiling {ceil:.2f} TB/s; decode figures are TB/s of K/V read, prefill TFLOP/s")
    print("| case | backend | poot ms | poot rate | % copy | torch math f32 | efficient f32 | flash bf16 | cuDNN bf16 | poot rel err | torch math rel err | poot schedule |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        pr = rate(r, r["poot_ms"])
        pct = f"{100 * pr / ceil:.0f}%" if pr and r["decode"] else "-"
        tor = [f"{fmt(r[k], 4)} ms ({fmt(rate(r, r[k]), 2)})" if r[k] else "-" for k in
               ("math_f32", "efficient_f32", "flash_bf16", "cudnn_bf16")]
        err = "-" if r["err"] is None else "%.1e" % r["err"]
        terr = "-" if r["math_f32_err"] is None else "%.1e" % r["math_f32_err"]
        name = r["case"] + (" (bf16)" if r["dtype"] == "bf16" else "")
        print(f"| {name} | {r['backend']} | {fmt(r['poot_ms'], 4)} | {fmt(pr, 2)} | {pct} | " + " | ".join(tor) +
              f" | {err} | {terr} | {r['sched']} |")
    if csv_path:
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "prepare":
        prepare(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 5 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
    else:
        sys.exit("usage: torch_bench.py prepare PLAN_DIR DATA_DIR | report PLAN_DIR DATA_DIR POOT_TSV [CSV]")

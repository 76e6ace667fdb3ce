#!/usr/bin/env python3
"""Prints a replay's figures as `name value` lines, each name after PREFIX:
from RESULTS.jsonl (one line a request, as replay.py and hf_serve.py write
them) the fields replay.py's summary gives (requests completed, wall time,
output tokens a second, time to first token and time per output token after
the first, p50 and p99), and how many requests got exactly the max_tokens
asked (the line's own max_tokens, else its trace line's, --trace); with --log, from `poot serve`'s stderr, the
steps that ran more than one request (the only ones it logs): how many of
each plan, the requests they ran (mean and most), their mean time and the
host's share of it,
and the step numbers they span.

usage: summarize.py PREFIX RESULTS.jsonl [--trace TRACE.jsonl] [--log SERVE.log [--from LINE]]
--from: read the log from that line on (1-based), the replay's own steps.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from replay import quantile  # noqa: E402  the same quantiles as replay.py's summary

STEP = re.compile(r"step (\d+): (prefill|decode|mixed), (\d+) requests, ([0-9.]+) ms, host (\d+)%")


def results(prefix, path, trace):
    with open(path) as f:
        rs = [json.loads(line) for line in f if line.strip()]
    ok = [r for r in rs if r["error"] is None and r["first"] is not None]
    wall = max((r["end"] for r in rs), default=float("nan"))
    out = sum(r["completion_tokens"] for r in ok)
    ttft = [r["first"] - r["start"] for r in ok]
    tpot = [(r["end"] - r["first"]) / (r["completion_tokens"] - 1) for r in ok if r["completion_tokens"] > 1]
    print(f"{prefix}.requests {len(rs)}")
    print(f"{prefix}.completed {len(ok)}")
    print(f"{prefix}.failed {len(rs) - len(ok)}")
    print(f"{prefix}.wall_s {wall:.2f}")
    print(f"{prefix}.output_tokens {out}")
    print(f"{prefix}.output_tok_s {out / wall:.1f}" if wall > 0 else f"{prefix}.output_tok_s nan")
    print(f"{prefix}.ttft_p50_ms {quantile(ttft, 0.5) * 1e3:.1f}")
    print(f"{prefix}.ttft_p99_ms {quantile(ttft, 0.99) * 1e3:.1f}")
    print(f"{prefix}.tpot_p50_ms {quantile(tpot, 0.5) * 1e3:.2f}")
    print(f"{prefix}.tpot_p99_ms {quantile(tpot, 0.99) * 1e3:.2f}")
    want = {}
    if trace:
        with open(trace) as f:
            want = {round(q["arrival"], 6): q["max_tokens"] for q in (json.loads(line) for line in f if line.strip())}
    if trace or any("max_tokens" in r for r in rs):
        exact = sum(1 for r in ok if r.get("max_tokens", want.get(round(r["arrival"], 6))) == r["completion_tokens"])
        print(f"{prefix}.exact_length {exact}")
    for r in rs:
        if r["error"] is not None:
            print(f"{prefix}.error {r['arrival']:.3f} {str(r['error'])[:200]!r}")


def steps(prefix, path, first_line):
    kinds, numbers = {}, []
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            if n < first_line:
                continue
            m = STEP.search(line)
            if not m:
                continue
            numbers.append(int(m.group(1)))
            k = kinds.setdefault(m.group(2), [0, 0, 0.0, 0.0, 0])
            k[0] += 1
            k[1] += int(m.group(3))
            k[2] += float(m.group(4))
            k[3] += float(m.group(4)) * int(m.group(5)) / 100
            k[4] = max(k[4], int(m.group(3)))
    if numbers:
        print(f"{prefix}.steps_spanned {numbers[-1] - numbers[0] + 1}")
    for kind, (count, reqs, ms, host_ms, most) in sorted(kinds.items()):
        print(f"{prefix}.{kind}_steps {count}")
        print(f"{prefix}.{kind}_requests_per_step {reqs / count:.2f}")
        print(f"{prefix}.{kind}_requests_max {most}")
        print(f"{prefix}.{kind}_step_ms {ms / count:.3f}")
        print(f"{prefix}.{kind}_host_share {host_ms / ms if ms else 0:.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("prefix")
    p.add_argument("results")
    p.add_argument("--trace")
    p.add_argument("--log")
    p.add_argument("--from", dest="first", type=int, default=1)
    a = p.parse_args()
    results(a.prefix, a.results, a.trace)
    if a.log:
        steps(a.prefix, a.log, a.first)


if __name__ == "__main__":
    main()

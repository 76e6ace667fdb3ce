#!/usr/bin/env python3
"""Writes a seeded request trace for the serving benchmark (NOTES.md), one
JSON object a line: arrival (seconds from the start), prompt (token ids),
max_tokens. Arrivals are a Poisson process at RATE requests a second;
prompt lengths are drawn log-uniformly from PROMPT_MIN..PROMPT_MAX tokens
and output lengths from OUT_MIN..OUT_MAX; a SHARE of the requests begins
with one common prefix of PREFIX tokens (a system prompt), the rest of
their prompt their own. Token ids are drawn from LOW..HIGH - 1 (keep them
clear of the model's special ids). The same arguments give the same file.

usage: trace.py SEED RATE COUNT OUT.jsonl [--prompt MIN MAX] [--out-tokens MIN MAX]
       [--prefix TOKENS SHARE] [--ids LOW HIGH] [--context N]
--context caps prompt + max_tokens at the served model's context.
"""
import argparse
import json
import math
import random


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("seed", type=int)
    p.add_argument("rate", type=float, help="requests a second (Poisson arrivals)")
    p.add_argument("count", type=int)
    p.add_argument("out")
    p.add_argument("--prompt", type=int, nargs=2, default=[32, 4096], metavar=("MIN", "MAX"))
    p.add_argument("--out-tokens", type=int, nargs=2, default=[16, 1024], metavar=("MIN", "MAX"))
    p.add_argument("--prefix", type=float, nargs=2, default=[512, 0.25], metavar=("TOKENS", "SHARE"))
    p.add_argument("--ids", type=int, nargs=2, default=[1000, 100000], metavar=("LOW", "HIGH"))
    p.add_argument("--context", type=int, default=0, help="cap prompt + max_tokens (0: no cap)")
    a = p.parse_args()
    if a.rate <= 0 or a.count < 1:
        p.error("RATE must be positive and COUNT at least 1")
    for lo, hi, what in ((*a.prompt, "--prompt"), (*a.out_tokens, "--out-tokens")):
        if lo < 1 or hi < lo:
            p.error(f"{what} needs 1 <= MIN <= MAX, got {lo} {hi}")
    if a.ids[0] < 0 or a.ids[1] <= a.ids[0]:
        p.error(f"--ids needs 0 <= LOW < HIGH, got {a.ids[0]} {a.ids[1]}")
    prefix_len, share = int(a.prefix[0]), a.prefix[1]
    if prefix_len < 0 or not 0 <= share <= 1:
        p.error("--prefix needs TOKENS >= 0 and SHARE in [0, 1]")
    rng = random.Random(a.seed)
    prefix = [rng.randrange(a.ids[0], a.ids[1]) for _ in range(prefix_len)]

    def log_uniform(lo, hi):
        return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))

    t = 0.0
    with open(a.out, "w") as f:
        for _ in range(a.count):
            t += rng.expovariate(a.rate)
            length, out = log_uniform(*a.prompt), log_uniform(*a.out_tokens)
            shared = prefix_len > 0 and rng.random() < share
            head = prefix[: min(prefix_len, length - 1)] if shared else []
            prompt = head + [rng.randrange(a.ids[0], a.ids[1]) for _ in range(length - len(head))]
            if a.context:
                prompt = prompt[: max(1, a.context - 1)]
                out = max(1, min(out, a.context - len(prompt)))
            f.write(json.dumps({"arrival": round(t, 6), "prompt": prompt, "max_tokens": out, "shared": shared}) + "\n")


if __name__ == "__main__":
    main()

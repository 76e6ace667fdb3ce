#!/usr/bin/env python3
"""Replays a request trace (trace.py) against an OpenAI-compatible server:
each request goes to /v1/completions at its arrival time (one thread a
request), its prompt as token ids, max_tokens as drawn, greedy
(temperature 0), streamed with stream_options.include_usage, so the
time to the first token and the generated token count come from the
server's own answer. Writes one JSON line a request to OUT (arrival,
start, first token, end, prompt and completion tokens, error) and prints
the summary: completed requests, wall time, output tokens a second, time
to first token and time per output token (after the first) at p50 and
p99, and the requests that failed.

usage: replay.py URL MODEL TRACE.jsonl OUT.jsonl [--limit N]
URL: the server's root (http://127.0.0.1:8000); MODEL: the name it serves.
"""
import argparse
import http.client
import json
import threading
import time
import urllib.parse


def one(url, model, req, t0, record):
    u = urllib.parse.urlsplit(url)
    body = json.dumps({"model": model, "prompt": req["prompt"], "max_tokens": req["max_tokens"], "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}})
    delay = t0 + req["arrival"] - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    r = {"arrival": req["arrival"], "start": time.monotonic() - t0, "first": None, "end": None,
         "prompt_tokens": len(req["prompt"]), "completion_tokens": 0, "error": None}
    try:
        c = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=3600)
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        resp = c.getresponse()
        if resp.status != 200:
            r["error"] = f"{resp.status}: {resp.read().decode(errors='replace')[:300]}"
        else:
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                if chunk.get("choices") and chunk["choices"][0].get("text") and r["first"] is None:
                    r["first"] = time.monotonic() - t0
                if chunk.get("usage"):
                    r["completion_tokens"] = chunk["usage"]["completion_tokens"]
        c.close()
    except (OSError, http.client.HTTPException, ValueError) as e:
        r["error"] = f"{type(e).__name__}: {e}"
    r["end"] = time.monotonic() - t0
    record(r)


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url")
    p.add_argument("model")
    p.add_argument("trace")
    p.add_argument("out")
    p.add_argument("--limit", type=int, default=0, help="replay only the first N requests")
    a = p.parse_args()
    with open(a.trace) as f:
        reqs = [json.loads(line) for line in f if line.strip()]
    if a.limit:
        reqs = reqs[: a.limit]
    results, lock = [], threading.Lock()

    def record(r):
        with lock:
            results.append(r)

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(a.url, a.model, q, t0, record)) for q in reqs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    results.sort(key=lambda r: r["arrival"])
    with open(a.out, "w") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")
    ok = [r for r in results if r["error"] is None and r["first"] is not None]
    out_tokens = sum(r["completion_tokens"] for r in ok)
    ttft = [r["first"] - r["start"] for r in ok]
    tpot = [(r["end"] - r["first"]) / (r["completion_tokens"] - 1) for r in ok if r["completion_tokens"] > 1]
    print(f"requests {len(ok)} of {len(results)} completed, wall {wall:.2f} s, "
          f"{out_tokens / wall:.1f} output tokens/s")
    print(f"time to first token: p50 {quantile(ttft, 0.5) * 1e3:.1f} ms, p99 {quantile(ttft, 0.99) * 1e3:.1f} ms")
    print(f"time per output token: p50 {quantile(tpot, 0.5) * 1e3:.2f} ms, p99 {quantile(tpot, 0.99) * 1e3:.2f} ms")
    for r in results:
        if r["error"] is not None:
            print(f"failed (arrival {r['arrival']:.3f} s): {r['error']}")
    return 0 if len(ok) == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())

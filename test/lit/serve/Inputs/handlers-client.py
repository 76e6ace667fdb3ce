"""Starts `poot serve` on DIR's model (p.plan, d.plan of ROWS decode rows,
m.plan the mixed step, w.safetensors, tok/) and sends ROWS streamed
completions at once; each must
finish whole, and some step must run all ROWS of them together (the
log's "step N: decode, ROWS requests", or mixed): the handler threads let every row's
request through to the engine, whatever the cores. Prints the largest step.
Usage: handlers-client.py POOT DIR ROWS."""
import os
import re
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from client import expect, stream, use  # noqa: E402
from server import start_server  # noqa: E402

poot, d, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
log_path = os.path.join(d, "serve.log")
model = [f"{d}/p.plan", f"{d}/d.plan", "--mixed", f"{d}/m.plan", "--tokenizer", f"{d}/tok",
         "--weights", f"{d}/w.safetensors"]
server, port = start_server(poot, d, log_path, model)
use(port, log_path)

results = [None] * rows
start = threading.Barrier(rows)


def run(i):
    start.wait()
    results[i] = stream("/v1/completions", {"model": "tiny", "prompt": "hello", "max_tokens": 48, "temperature": 0})


threads = [threading.Thread(target=run, args=(i,)) for i in range(rows)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for r in results:
    expect(r is not None and r[-1]["choices"][0]["finish_reason"] == "length", "every stream runs to its 48 tokens", r)
steps = [int(n) for n in re.findall(r"step \d+: (?:decode|mixed), (\d+) requests", open(log_path).read())]
expect(steps and max(steps) == rows, f"a step of all {rows} requests", steps)
print(f"largest step: {max(steps)} requests")

# oracle-greedy.py POOTC GRAPH WEIGHTS PROMPTS OUTPUT.jsonl WORKDIR: checks
# `poot generate`'s greedy tokens against the oracle. GRAPH is a fixed-KV
# prefill graph of one row whose --tokens T holds each prompt and its
# generated tokens; for every prompt, `pootc eval` runs it on the prompt
# followed by the generated tokens (zeros after them: the causal mask keeps
# them from every earlier position), and the k-th generated token must be
# the arg max of the oracle's logits at the position before it. Since
# greedy decoding is that arg max at every step, this is the oracle's own
# generation, step by step. Prints one line a prompt and exits 1 on a
# mismatch. Reads and writes .npy without numpy (npy.py).
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from npy import read_f32, write_i32  # noqa: E402

pootc, graph, weights, prompts_path, output, work = sys.argv[1:7]


def tokens_capacity(path):
    with open(path) as f:
        for line in f:
            if line.startswith("input %tokens"):
                return int(line.split("[")[1].split("]")[0].split(",")[1])
    raise SystemExit("no input %tokens in " + path)


T = tokens_capacity(graph)
prompts = [[int(w) for w in line.split()] for line in open(prompts_path)]
results = {}
for line in open(output):
    r = json.loads(line)
    results[r["index"]] = r["tokens"]
failed = 0
for i, prompt in enumerate(prompts):
    generated = results[i]
    seq = prompt + generated[:-1]
    assert len(seq) <= T, (len(seq), T)
    tok = os.path.join(work, "tokens%d.npy" % i)
    out = os.path.join(work, "eval%d" % i)
    write_i32(tok, (1, T), seq + [0] * (T - len(seq)))
    subprocess.run([pootc, "eval", graph, "--weights", weights, "--input", "tokens=" + tok, "--slot", "pos=0",
                    "--output-dir", out], check=True, stdout=subprocess.DEVNULL)
    shape, logits = read_f32(os.path.join(out, "logits.npy"))
    vocab = shape[2]
    want, margin = [], None
    for k in range(len(generated)):
        at = len(prompt) - 1 + k
        row = logits[at * vocab:(at + 1) * vocab]
        best = max(range(vocab), key=lambda v: (row[v], -v))
        second = max(row[v] for v in range(vocab) if v != best)
        margin = row[best] - second if margin is None else min(margin, row[best] - second)
        want.append(best)
    ok = want == generated
    failed += not ok
    print("prompt %d: %d tokens %s the oracle's (smallest margin %.3g)" % (i, len(generated), "equal" if ok else "DIFFER from", margin))
    if not ok:
        print("  generate: %s\n  oracle:   %s" % (generated, want))
sys.exit(1 if failed else 0)

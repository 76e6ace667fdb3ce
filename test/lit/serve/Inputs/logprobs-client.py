"""logprobs-client.py POOTC POOT DIR ORACLE.pg: the logprobs `poot serve`
gives, checked against the oracle. DIR is model.sh's; ORACLE.pg a fixed-KV
prefill graph of the same model, one row, room for a prompt and its answer.
For a text completion (a prompt of token ids, logprobs 3) and a chat
completion (logprobs true, top_logprobs 4), greedy, whole and streamed:
`pootc eval` runs the oracle on the prompt and the answer's tokens, and
each token's logprob and its top alternatives (ids and values) must be the
log-softmax of the oracle's logits at the position before it, within 1e-3.
The model's tokenizer gives id i the byte i, so a token's bytes (or its
text: the byte, or "bytes:\\xNN" where it is not UTF-8) name its id. Then the refusals of logprobs fields. Prints one line a check."""
import json
import math
import os
import subprocess
import sys

here = os.path.dirname(__file__)
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "generate", "Inputs"))
from client import expect, post, stream, use  # noqa: E402
from npy import read_f32, write_i32  # noqa: E402
from server import start_server  # noqa: E402

pootc, poot, d, oracle = sys.argv[1:5]
log_path = os.path.join(d, "serve.log")
server, port = start_server(poot, d, log_path)
use(port, log_path)
TOLERANCE = 1e-3


def oracle_logprobs(ids):
    """log-softmax of the oracle's logits at each position of ids, one list a position."""
    T = 64
    tok, out = os.path.join(d, "oracle-tokens.npy"), os.path.join(d, "oracle-out")
    write_i32(tok, (1, T), ids + [0] * (T - len(ids)))
    subprocess.run([pootc, "eval", oracle, "--weights", f"{d}/w.safetensors", "--input", "tokens=" + tok,
                    "--slot", "pos=0", "--output-dir", out], check=True, stdout=subprocess.DEVNULL)
    shape, logits = read_f32(os.path.join(out, "logits.npy"))
    vocab = shape[2]
    rows = []
    for p in range(len(ids)):
        row = logits[p * vocab:(p + 1) * vocab]
        top = max(row)
        shift = top + math.log(sum(math.exp(x - top) for x in row))
        rows.append([x - shift for x in row])
    return rows


def check(what, prompt, answer, k):
    """answer: (id, logprob, [(id, logprob)] likeliest first) for each generated token."""
    ids = prompt + [a[0] for a in answer]
    rows = oracle_logprobs(ids[:-1])
    worst = 0
    for i, (token, logprob, top) in enumerate(answer):
        row = rows[len(prompt) - 1 + i]
        want_top = sorted(range(len(row)), key=lambda v: (-row[v], v))[:k]
        expect([t for t, _ in top] == want_top,
               f"{what}: token {i}'s top {k} are the oracle's", (top, want_top))
        for got, want in [(logprob, row[token])] + [(lp, row[w]) for (_, lp), w in zip(top, want_top)]:
            worst = max(worst, abs(got - want))
    expect(worst < TOLERANCE, f"{what}: the logprobs are the oracle's", worst)
    print(f"{what}: {len(answer)} tokens, each and its top {k} the oracle's log-softmax")


def tokenize(*args, text=None):
    return [int(w) for w in subprocess.run([poot, "tokenize", f"{d}/tok", *args], input=text, capture_output=True,
                                           text=True, check=True).stdout.split()]


def byte_id(b):
    expect(len(b) == 1, "a token of the byte tokenizer is one byte", b)
    return b[0]


def text_id(t):
    """The id of a token's text: its one character, or "bytes:\\xNN" (not UTF-8)."""
    return int(t[len("bytes:\\x"):], 16) if t.startswith("bytes:") else byte_id(t.encode())


# Text completions: logprobs 3, a prompt of ids.
prompt = tokenize(text="hello\n")
body = {"model": "tiny", "prompt": prompt, "max_tokens": 5, "temperature": 0, "logprobs": 3}


status, whole = post("/v1/completions", body)
expect(status == 200, "a completion with logprobs answers 200", whole)
lp = whole["choices"][0]["logprobs"]
expect(len(lp["tokens"]) == 5 and lp["text_offset"] == list(range(5)), "5 tokens, their text's offsets", lp)
tokens = [text_id(t) for t in lp["tokens"]]
expect(tokens == json.loads(open(f"{d}/gen-text.jsonl").readline())["tokens"], "the tokens are poot generate's", lp)
check("completion", prompt, [(i, v, sorted(((text_id(t), w) for t, w in top.items()), key=lambda a: (-a[1], a[0])))
                             for i, v, top in zip(tokens, lp["token_logprobs"], lp["top_logprobs"])], 3)
chunks = stream("/v1/completions", body)
streamed = {k: sum((c["choices"][0]["logprobs"][k] for c in chunks if c["choices"][0]["logprobs"]), [])
            for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset")}
expect(streamed == {k: lp[k] for k in streamed}, "a stream's logprobs are the whole answer's", (streamed, lp))
print("completion stream: the same logprobs")

# Chat: logprobs true, top_logprobs 4.
chat = {"model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 6, "temperature": 0,
        "logprobs": True, "top_logprobs": 4}
messages = os.path.join(d, "chat.jsonl")
prompt = tokenize("--chat", messages, "--ids")
status, whole = post("/v1/chat/completions", chat)
expect(status == 200 and whole["usage"]["prompt_tokens"] == len(prompt), "a chat with logprobs answers 200", whole)
content = whole["choices"][0]["logprobs"]["content"]
answer = [(byte_id(c["bytes"]), c["logprob"], [(byte_id(a["bytes"]), a["logprob"]) for a in c["top_logprobs"]])
          for c in content]
expect([a[0] for a in answer] == json.loads(open(f"{d}/gen-chat.jsonl").readline())["tokens"][:6],
       "the chat's tokens are poot generate's", answer)
check("chat", prompt, answer, 4)
chunks = stream("/v1/chat/completions", chat)
streamed = sum((c["choices"][0]["logprobs"]["content"] for c in chunks if c["choices"][0]["logprobs"]), [])
expect(streamed == content, "a stream's logprobs are the whole answer's", (streamed, content))
print("chat stream: the same logprobs")

# Refusals, each naming its field.
for path, bad, param in [("/v1/chat/completions", dict(chat, top_logprobs=21), "top_logprobs"),
                         ("/v1/chat/completions", dict(chat, logprobs=False), "top_logprobs"),
                         ("/v1/chat/completions", dict(chat, logprobs=1), "logprobs"),
                         ("/v1/completions", dict(body, logprobs=6), "logprobs"),
                         ("/v1/completions", dict(body, logprobs=True), "logprobs")]:
    status, err = post(path, bad)
    expect(status == 400 and err["error"]["param"] == param, f"{param} refused", (bad, err))
print("refusals:", err["error"]["message"])

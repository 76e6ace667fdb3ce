"""Starts `poot serve` on a free port and talks to it with http.client, as
an OpenAI client would; every check that fails raises (exit 1) saying
what it got. Usage: serve-client.py POOT DIR, where DIR holds p.plan,
d.plan, w.safetensors, tok/ (the model's tokenizer and chat template) and
gen-chat.jsonl / gen-text.jsonl: poot generate's greedy answers to the
conversation and the prompt below (12 and 5 tokens). Prints one line a
check for FileCheck; the server's log is DIR/serve.log."""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from client import expect, next_chunk, open_stream, post, read_stream, request, stream, use  # noqa: E402
from server import start_server  # noqa: E402

poot, d = sys.argv[1], sys.argv[2]
MESSAGES = [{"role": "user", "content": "hello"}]
PROMPT = "hello"
log_path = os.path.join(d, "serve.log")


def generated(name):
    with open(os.path.join(d, name)) as f:
        return json.loads(f.readline())


server, port = start_server(poot, d, log_path)
use(port, log_path)

chat = {"model": "tiny", "messages": MESSAGES, "max_tokens": 12, "temperature": 0}
want = generated("gen-chat.jsonl")

# Whole: the text poot generate gives for the same conversation, greedy.
status, whole = post("/v1/chat/completions", chat)
expect(status == 200, "a chat completion answers 200", whole)
expect(whole["object"] == "chat.completion" and whole["model"] == "tiny" and whole["id"].startswith("chatcmpl-"),
       "a chat completion's id, object and model", whole)
choice = whole["choices"][0]
expect(choice["message"] == {"role": "assistant", "content": want["text"]}, "the greedy text is poot generate's",
       (choice, want))
expect(choice["finish_reason"] == "length", "12 tokens asked, 12 made: finish_reason length", choice)
expect(whole["usage"]["completion_tokens"] == 12 and
       whole["usage"]["total_tokens"] == whole["usage"]["prompt_tokens"] + 12, "the usage", whole["usage"])
print("chat: 200, poot generate's text, length, 12 tokens")

# Streamed: the same text, a piece a chunk, the role first, the reason last.
chunks = stream("/v1/chat/completions", dict(chat, stream_options={"include_usage": True}))
expect(chunks[0]["choices"][0]["delta"].get("role") == "assistant", "the first chunk gives the role", chunks[0])
expect(all(c["id"] == chunks[0]["id"] and c["object"] == "chat.completion.chunk" for c in chunks),
       "every chunk has the stream's id and object", chunks)
text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
expect(text == want["text"], "the streamed text is the whole answer's", (text, want["text"]))
expect(chunks[-2]["choices"][0]["finish_reason"] == "length" and chunks[-2]["choices"][0]["delta"] == {},
       "the last choice chunk says why it ended", chunks[-2])
expect(chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12,
       "include_usage: a last chunk with the usage", chunks[-1])
print(f"chat stream: {len(chunks)} chunks, the same text")

# Completions: the prompt string, as poot generate --tokenizer encodes it.
want_text = generated("gen-text.jsonl")
body = {"model": "tiny", "prompt": PROMPT, "max_tokens": 5, "temperature": 0}
status, whole = post("/v1/completions", body)
expect(status == 200 and whole["object"] == "text_completion" and whole["choices"][0]["text"] == want_text["text"],
       "a completion's text is poot generate's", (whole, want_text))
chunks = stream("/v1/completions", body)
expect("".join(c["choices"][0]["text"] for c in chunks) == want_text["text"], "the streamed completion", chunks)
print("completion: whole and streamed, poot generate's text")

# A prompt of token ids is taken as it is: the ids poot tokenize gives
# "hello" make poot generate's text; a list that is not token ids is
# refused naming prompt.
ids = [int(w) for w in subprocess.run([poot, "tokenize", f"{d}/tok"], input=PROMPT + "\n", capture_output=True,
                                      text=True, check=True).stdout.split()]
status, whole = post("/v1/completions", dict(body, prompt=ids))
expect(status == 200 and whole["choices"][0]["text"] == want_text["text"] and
       whole["usage"]["prompt_tokens"] == len(ids), "a prompt of ids gives the text of its string", (ids, whole))
chunks = stream("/v1/completions", dict(body, prompt=ids))
expect("".join(c["choices"][0]["text"] for c in chunks) == want_text["text"], "a prompt of ids, streamed", chunks)
for bad in ([], [256], [-1], [1.5], [[104, 105]], ["hello"], [104, True], {"ids": [1]}):
    status, err = post("/v1/completions", dict(body, prompt=bad))
    expect(status == 400 and err["error"]["param"] == "prompt" and err["error"]["type"] == "invalid_request_error",
           f"prompt {bad!r} is refused naming prompt", err)
print("prompt ids:", err["error"]["message"])
print("prompt ids:", post("/v1/completions", dict(body, prompt=[104, 256]))[1]["error"]["message"])

# A stop string: the text up to its first occurrence, finish_reason stop.
at = next(i for i in range(1, len(want["text"]) - 1) if "\ufffd" not in want["text"][i:i + 2])
stop = want["text"][at:at + 2]
status, whole = post("/v1/chat/completions", dict(chat, stop=[stop, "never there"]))
cut = want["text"][:want["text"].index(stop)]
expect(whole["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": cut}, "finish_reason": "stop",
                               "logprobs": None}, f"stop {stop!r} cuts the text", whole)
chunks = stream("/v1/chat/completions", dict(chat, stop=stop))
expect("".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == cut and
       chunks[-1]["choices"][0]["finish_reason"] == "stop", "a stop string in a stream", chunks)
print("stop: cut before the stop string, finish_reason stop")

# Seeded sampling gives the same text twice.
sampled = dict(chat, temperature=0.9, top_p=0.9, seed=11)
first, second = post("/v1/chat/completions", sampled)[1], post("/v1/chat/completions", sampled)[1]
expect(first["choices"][0]["message"] == second["choices"][0]["message"], "a seed repeats", (first, second))
print("seeded: the same text twice")
# Penalties change the greedy text (a repetition penalty of a million
# leaves no token of the conversation or the answer its positive logit).
got = post("/v1/chat/completions", dict(chat, temperature=0, repetition_penalty=1e6, presence_penalty=2))[1]
expect(got["choices"][0]["message"]["content"] != want["text"], "penalties change the greedy text", got)
# top_k 1 and min_p 1 keep the likeliest token alone: greedy at any temperature.
for narrow in ({"top_k": 1}, {"min_p": 1}):
    got = post("/v1/chat/completions", dict(chat, temperature=1.5, seed=4, **narrow))[1]
    expect(got["choices"][0]["message"]["content"] == want["text"], f"{narrow} is greedy", got)
print("top_k 1, min_p 1: the greedy text; penalties another")

# Two streams at once run in the same steps: the log says so.
results = [None, None]
start = threading.Barrier(2)


def run(i):
    start.wait()
    results[i] = stream("/v1/chat/completions", dict(chat, max_tokens=40))


threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
texts = ["".join(c["choices"][0]["delta"].get("content", "") for c in r) for r in results]
expect(texts[0] == texts[1] and texts[0].startswith(want["text"]), "two greedy streams of one conversation agree", texts)
batched = re.findall(r"step \d+: (?:prefill|decode|mixed), 2 requests, [0-9.]+ ms, host [0-9]+%", open(log_path).read())
expect(batched, "the log shows steps of two requests, their time and the host's share", None)
print("concurrent: two streams, batched steps in the log")

# Refusals: OpenAI error bodies naming the field.
def refused(path, body, status, param, raw=None):
    got, ctype, data = request("POST", path, body, raw)
    err = json.loads(data)["error"]
    expect(got == status and ctype == "application/json" and err["param"] == param and
           err["type"] == "invalid_request_error" and isinstance(err["message"], str) and "code" in err,
           f"status {status} naming {param}", (got, data))
    return data.decode()


print("400:", refused("/v1/chat/completions", {"model": "tiny", "messages": "hello"}, 400, "messages"))
refused("/v1/chat/completions", dict(chat, temperature=3), 400, "temperature")
refused("/v1/chat/completions", dict(chat, top_k=-2), 400, "top_k")
refused("/v1/chat/completions", dict(chat, min_p=1.5), 400, "min_p")
refused("/v1/chat/completions", dict(chat, frequency_penalty=2.5), 400, "frequency_penalty")
refused("/v1/chat/completions", dict(chat, repetition_penalty=0), 400, "repetition_penalty")
refused("/v1/chat/completions", dict(chat, top_a=5), 400, "top_a")
refused("/v1/chat/completions", dict(chat, n=2), 400, "n")
refused("/v1/chat/completions", dict(chat, max_tokens=0), 400, "max_tokens")
refused("/v1/chat/completions", dict(chat, max_tokens=500), 400, "max_tokens")
refused("/v1/chat/completions", dict(chat, messages=[{"role": "user", "content": [1]}]), 400, "messages[0].content")
refused("/v1/completions", {"model": "tiny", "prompt": ["a"]}, 400, "prompt")
refused("/v1/chat/completions", dict(chat, model="other"), 404, "model")
refused("/v1/chat/completions", None, 400, None, raw="{not json")
refused("/v1/chat/completions", None, 400, None, raw="[" * 200000 + "]" * 200000)
refused("/v1/chat/completions", None, 413, None, raw=" " * (5 << 20))
got, ctype, data = request("GET", "/v1/nowhere")
expect(got == 404 and json.loads(data)["error"]["code"] == "not_found", "an unknown path is 404", (got, data))
print("refusals: 400 naming the field, 404, 413")

status, _, data = request("GET", "/v1/models")
expect(status == 200 and [m["id"] for m in json.loads(data)["data"]] == ["tiny"], "/v1/models", data)
print("models: tiny")

# A client gone mid-stream: its request is cancelled, the server goes on.
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
conn.request("POST", "/v1/chat/completions", body=json.dumps(dict(chat, max_tokens=100, stream=True)))
resp = conn.getresponse()
resp.readline()
resp.close()
conn.close()
deadline = time.time() + 30
gone = re.compile(r"cancelled \(running\): the client is gone; (\d+) blocks available")
while not gone.search(open(log_path).read()) and time.time() < deadline:
    time.sleep(0.05)
freed = gone.search(open(log_path).read())
# Nothing else runs: every block of the pool is available again.
expect(freed and freed.group(1) == "32", "a client gone cancels its request and frees its blocks", freed)
status, whole = post("/v1/chat/completions", chat)
expect(status == 200 and whole["choices"][0]["message"]["content"] == want["text"], "the server goes on", whole)
print("disconnect: cancelled, the server goes on")

# A client gone while its request waits in the queue: two long streams
# hold the plans' two rows, a third waits behind them; its client leaves
# at once, and the request is cancelled without ever running (the log
# says so) while the two go on to their end.
runners = [open_stream("/v1/chat/completions", dict(chat, max_tokens=100)) for _ in range(2)]
firsts = [[next_chunk(resp), next_chunk(resp)] for conn, resp in runners]  # the role, then text: both run
conn, resp = open_stream("/v1/chat/completions", chat)
resp.close()
conn.close()
deadline = time.time() + 30
while "cancelled (queued, it never ran): the client is gone" not in open(log_path).read() and time.time() < deadline:
    time.sleep(0.02)
expect("cancelled (queued, it never ran): the client is gone" in open(log_path).read(),
       "a client gone while queued cancels its request before it runs", None)
for (conn, resp), first in zip(runners, firsts):
    chunks = read_stream(conn, resp, first)
    expect(chunks[-1]["choices"][0]["finish_reason"] == "length", "the running streams end as asked", chunks[-1])
print("disconnect while queued: cancelled before it ran, the others go on")

server.send_signal(signal.SIGTERM)
code = server.wait(timeout=30)
expect(code == 0, "SIGTERM: exit 0", code)
expect(open(log_path).read().rstrip().endswith("poot serve: stopped"), "the log ends 'stopped'", None)
print("shutdown: exit 0")

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
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from server import start_server  # noqa: E402

poot, d = sys.argv[1], sys.argv[2]
MESSAGES = [{"role": "user", "content": "hello"}]
PROMPT = "hello"
log_path = os.path.join(d, "serve.log")


def expect(cond, what, got):
    if not cond:
        raise SystemExit(f"FAIL: {what}; got {got!r}\nserver log:\n{open(log_path).read()}")


def generated(name):
    with open(os.path.join(d, name)) as f:
        return json.loads(f.readline())


server, port = start_server(poot, d, log_path)


def request(method, path, body=None, raw=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    out = resp.status, resp.getheader("Content-Type"), resp.read()
    conn.close()
    return out


def post(path, body):
    status, ctype, data = request("POST", path, body)
    return status, json.loads(data)


def stream(path, body):
    """The stream's chunks, parsed, up to data: [DONE]."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    # As browsers and Node's fetch do, the client accepts compressed answers:
    # a stream must come uncompressed, or it would come all at the end.
    conn.request("POST", path, body=json.dumps(dict(body, stream=True)),
                 headers={"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate, br"})
    resp = conn.getresponse()
    expect(resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream") and
           resp.getheader("Content-Encoding") is None, "a stream answers 200 with text/event-stream, uncompressed",
           (resp.status, resp.getheaders()))
    chunks = []
    while True:
        line = resp.readline().decode()
        expect(line != "", "a stream ends with data: [DONE]", chunks)
        if line == "\n":
            continue
        expect(line.startswith("data: "), "each event is a data: line", line)
        if line == "data: [DONE]\n":
            break
        chunks.append(json.loads(line[len("data: "):]))
    conn.close()
    return chunks


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
batched = re.findall(r"step \d+: (?:prefill|decode), 2 requests", open(log_path).read())
expect(batched, "the log shows steps of two requests", None)
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
refused("/v1/chat/completions", dict(chat, top_k=5), 400, "top_k")
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
while "cancelled: the client is gone" not in open(log_path).read() and time.time() < deadline:
    time.sleep(0.05)
expect("cancelled: the client is gone" in open(log_path).read(), "a client gone cancels its request", None)
status, whole = post("/v1/chat/completions", chat)
expect(status == 200 and whole["choices"][0]["message"]["content"] == want["text"], "the server goes on", whole)
print("disconnect: cancelled, the server goes on")

server.send_signal(signal.SIGTERM)
code = server.wait(timeout=30)
expect(code == 0, "SIGTERM: exit 0", code)
expect(open(log_path).read().rstrip().endswith("poot serve: stopped"), "the log ends 'stopped'", None)
print("shutdown: exit 0")

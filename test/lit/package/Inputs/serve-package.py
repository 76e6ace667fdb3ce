"""serve-package.py POOT PKG MODEL_DIR OUT: `poot serve PKG --weights
MODEL_DIR` (the package's own tokenizer and chat template), asked for a
greedy text completion of "hello" (5 tokens) and a chat completion of
[user: hello] (12 tokens); prints each answer's text as one JSON string a
line, then stops the server with SIGTERM, which must exit 0."""
import http.client
import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "serve", "Inputs"))
from server import start_server  # noqa: E402

poot, pkg, model, out = sys.argv[1:]
server, port = start_server(poot, out, os.path.join(out, "serve.log"), [pkg, "--weights", model])


def post(path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    answer = json.loads(r.read())
    assert r.status == 200, answer
    return answer["choices"][0]


print(json.dumps(post("/v1/completions", {"model": "tiny", "prompt": "hello", "max_tokens": 5, "temperature": 0})["text"]))
chat = post("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "hello"}],
                                     "max_tokens": 12, "temperature": 0})
print(json.dumps(chat["message"]["content"]))
server.send_signal(signal.SIGTERM)
sys.exit(server.wait(timeout=30))

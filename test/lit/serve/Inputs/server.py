"""Starts `poot serve` for a test: the model DIR holds (p.plan, d.plan,
w.safetensors, tok/), named "tiny", on a free port; its stderr goes to
log_path. `model` replaces what names the plans, tokenizer and weights (a
package: [PKG, "--weights", DIR]). Returns the process and the port the log
names. Whatever fails later, the server is killed when the test's Python
exits."""
import atexit
import re
import subprocess
import time


def start_server(poot, d, log_path, model=None):
    log = open(log_path, "w")
    model = model or [f"{d}/p.plan", f"{d}/d.plan", "--tokenizer", f"{d}/tok", "--weights", f"{d}/w.safetensors"]
    server = subprocess.Popen([poot, "serve", *model, "--port", "0", "--model", "tiny"],
                              stdout=subprocess.DEVNULL, stderr=log)
    atexit.register(lambda: server.poll() is None and server.kill())
    deadline = time.time() + 60
    while time.time() < deadline and server.poll() is None:
        m = re.search(r"serving 'tiny' on http://127\.0\.0\.1:(\d+)/v1", open(log_path).read())
        if m:
            return server, int(m.group(1))
        time.sleep(0.05)
    raise SystemExit("FAIL: the server never said where it listens; its log:\n" + open(log_path).read())

"""with-server.py POOT DIR CMD...: runs CMD (each "{url}" in it replaced by
the server's base URL, http://127.0.0.1:PORT/v1) while `poot serve` serves
the model in DIR (server.py); then stops the server with SIGTERM, which
must exit 0. Exits with CMD's status; the server's log is DIR/serve.log."""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from server import start_server  # noqa: E402

poot, d, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
log_path = os.path.join(d, "serve.log")
server, port = start_server(poot, d, log_path)
code = subprocess.call([word.replace("{url}", f"http://127.0.0.1:{port}/v1") for word in cmd])
server.send_signal(signal.SIGTERM)
if server.wait(timeout=30) != 0:
    raise SystemExit("FAIL: SIGTERM: the server exits " + str(server.returncode) + "; its log:\n" + open(log_path).read())
sys.exit(code)

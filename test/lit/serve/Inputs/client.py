"""What the serve tests' clients share: a check that fails with the
server's log, and requests to the server as an OpenAI client makes them
(http.client). use(PORT, LOG_PATH) first."""
import http.client
import json

port = None
log_path = None


def use(server_port, server_log):
    global port, log_path
    port, log_path = server_port, server_log


def expect(cond, what, got):
    if not cond:
        raise SystemExit(f"FAIL: {what}; got {got!r}\nserver log:\n{open(log_path).read()}")


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


def open_stream(path, body):
    """A stream's connection and its answer, whose events are still to read."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    # As browsers and Node's fetch do, the client accepts compressed answers:
    # a stream must come uncompressed, or it would come all at the end.
    conn.request("POST", path, body=json.dumps(dict(body, stream=True)),
                 headers={"Content-Type": "application/json", "Accept-Encoding": "gzip, deflate, br"})
    resp = conn.getresponse()
    expect(resp.status == 200 and resp.getheader("Content-Type").startswith("text/event-stream") and
           resp.getheader("Content-Encoding") is None, "a stream answers 200 with text/event-stream, uncompressed",
           (resp.status, resp.getheaders()))
    return conn, resp


def next_chunk(resp):
    """A stream's next chunk, parsed; None at data: [DONE]."""
    while True:
        line = resp.readline().decode()
        expect(line != "", "a stream ends with data: [DONE]", line)
        if line == "\n" or line.startswith(":"):  # a comment: the server waits
            continue
        expect(line.startswith("data: "), "each event is a data: line", line)
        return None if line == "data: [DONE]\n" else json.loads(line[len("data: "):])


def read_stream(conn, resp, chunks=()):
    """The rest of a stream's chunks, after `chunks`, up to data: [DONE]."""
    chunks = list(chunks)
    while (chunk := next_chunk(resp)) is not None:
        chunks.append(chunk)
    conn.close()
    return chunks


def stream(path, body):
    """The stream's chunks, parsed, up to data: [DONE]."""
    return read_stream(*open_stream(path, body))

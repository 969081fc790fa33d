#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""E2B's code interpreter API on agentix-server (e2b-code-interpreter.c), spoken by hand over
HTTP/1.1 against a real server with the host's python3 kernel: the token, NDJSON lines as the
run goes (a line arrives while the run still waits for this test), contexts, the errors E2B
clients expect, a client that goes away mid-run (its run is interrupted, the context goes on),
a large output read slowly, and keep-alive across requests."""

import http.client
import json
import os
import socket
import tempfile
import time

from harness import RpcClient, Server, main, test, wait_until

TOKEN = "e2b-code-token"


def server():
    if not hasattr(server, "s") or server.s.proc.poll() is not None:
        server.s = Server(env={"AGENTIX_TOKEN": TOKEN})
    return server.s


def conn():
    return http.client.HTTPConnection("127.0.0.1", server().port, timeout=60)


def request(method, path, body=None, token=TOKEN, c=None, headers=None):
    c = c or conn()
    h = dict(headers or {})
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
        h["Content-Type"] = "application/json"
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    return r, r.read()


def execute(payload, c=None, token=TOKEN):
    """POST /execute: the status and the NDJSON lines, parsed."""
    r, data = request("POST", "/execute", payload, token=token, c=c)
    if r.status != 200:
        return r.status, json.loads(data)
    assert r.getheader("Content-Type") == "application/x-ndjson", r.getheaders()
    return r.status, [json.loads(line) for line in data.decode().splitlines()]


@test
def execute_gives_e2b_lines():
    status, lines = execute({"code": "x = 41\nprint('hello')\nimport sys; print('oops', file=sys.stderr)\nx + 1"})
    assert status == 200, lines
    kinds = [l["type"] for l in lines]
    assert kinds[0] == "number_of_executions" and kinds[-1] == "end_of_execution", kinds
    assert {"type": "result", "text": "42", "is_main_result": True} in lines, lines
    out = [l for l in lines if l["type"] == "stdout"]
    assert [l["text"] for l in out] == ["hello\n"] and isinstance(out[0]["timestamp"], int), out
    assert [l["text"] for l in lines if l["type"] == "stderr"] == ["oops\n"], lines
    # State stays; an exception is a line, not a failed request.
    status, lines = execute({"code": "x / 0"})
    errors = [l for l in lines if l["type"] == "error"]
    assert status == 200 and errors[0]["name"] == "ZeroDivisionError" and "traceback" in errors[0], lines
    # Rich results: HTML beside text, JSON as a value, other types in extra.
    status, lines = execute({"code": "from IPython.display import display, JSON, HTML\n"
                                     "display(HTML('<b>hi</b>'))\n"
                                     "display({'application/json': {'a': [1, 2]}, 'text/csv': 'a\\n1'}, raw=True)"})
    results = [l for l in lines if l["type"] == "result"]
    assert results[0]["html"] == "<b>hi</b>" and results[0]["is_main_result"] is False, results
    assert results[1]["json"] == {"a": [1, 2]} and results[1]["extra"] == {"text/csv": "a\n1"}, results
    # env_vars for this run only.
    status, lines = execute({"code": "import os; os.environ.get('AGX_E2B')", "env_vars": {"AGX_E2B": "yes"}})
    assert {"type": "result", "text": "'yes'", "is_main_result": True} in lines, lines
    status, lines = execute({"code": "import os; repr(os.environ.get('AGX_E2B'))"})
    assert {"type": "result", "text": "'None'", "is_main_result": True} in lines, lines


@test
def lines_come_as_the_run_goes():
    """The first line is read while the run waits for a file this test makes only then."""
    with tempfile.TemporaryDirectory() as d:
        flag = os.path.join(d, "go")
        c = conn()
        c.request("POST", "/execute", body=json.dumps({
            "code": f"import os, time\nprint('first', flush=True)\nwhile not os.path.exists({flag!r}): time.sleep(0.02)\n"
                    "print('second')"}), headers={"X-Access-Token": TOKEN})
        r = c.getresponse()
        assert r.status == 200 and r.getheader("Transfer-Encoding") == "chunked", r.getheaders()
        seen = []
        while not any(l.get("text") == "first\n" for l in seen):
            seen.append(json.loads(r.readline()))
        open(flag, "w").close()
        rest = [json.loads(line) for line in r.read().decode().splitlines()]
        assert [l["text"] for l in rest if l["type"] == "stdout"] == ["second\n"], rest
        assert rest[-1] == {"type": "end_of_execution"}, rest


@test
def contexts_made_listed_restarted_deleted():
    r, data = request("POST", "/contexts", {"language": "python", "cwd": "/tmp"})
    ctx = json.loads(data)
    assert r.status == 200 and ctx["language"] == "python" and ctx["cwd"] == "/tmp" and ctx["id"], (r.status, ctx)
    status, lines = execute({"code": "import os; y = 7; os.getcwd()", "context_id": ctx["id"]})
    assert {"type": "result", "text": "'/tmp'", "is_main_result": True} in lines, lines
    status, lines = execute({"code": "y"})  # the default context has no y
    assert [l["name"] for l in lines if l["type"] == "error"] == ["NameError"], lines
    r, data = request("GET", "/contexts")
    listed = json.loads(data)
    assert r.status == 200 and ctx in listed, listed
    r, _ = request("POST", f"/contexts/{ctx['id']}/restart", {})  # a body it needs not, ignored
    assert r.status == 204, r.status
    status, lines = execute({"code": "y", "context_id": ctx["id"]})
    assert [l["name"] for l in lines if l["type"] == "error"] == ["NameError"], lines
    r, _ = request("DELETE", f"/contexts/{ctx['id']}")
    assert r.status == 204, r.status
    r, data = request("DELETE", f"/contexts/{ctx['id']}")
    assert r.status == 404 and "ContextNotFound" in json.loads(data)["message"], data
    status, body = execute({"code": "1", "context_id": ctx["id"]})
    assert status == 404 and "ContextNotFound" in body["message"], body


@test
def errors_e2b_clients_expect():
    status, body = execute({"code": "1"}, token=None)
    assert status == 401, body
    status, body = execute({"code": "1"}, token="wrong")
    assert status == 401, body
    # E2B's SDK names a user with Basic beside its X-Access-Token, in either order.
    for headers in ({"Authorization": "Basic dXNlcjo=", "X-Access-Token": TOKEN},
                    {"X-Access-Token": TOKEN, "Authorization": "Basic dXNlcjo="}):
        r, data = request("POST", "/execute", {"code": "3 * 3"}, token=None, headers=headers)
        assert r.status == 200 and b'"text":"9"' in data, (headers, r.status, data)
    r, data = request("POST", "/execute", {"code": "1"}, token=None,
                      headers={"Authorization": "Basic dXNlcjo=", "X-Access-Token": "wrong"})
    assert r.status == 401, data
    status, body = execute({"code": 1})
    assert status == 400 and "'code'" in body["message"], body
    status, body = execute({"code": "1", "context_id": "a", "language": "python"})
    assert status == 400, body
    status, body = execute({"code": "1", "language": "cobol"})
    assert status == 404 and "KernelNotFound" in body["message"] and "python3" in body["message"], body
    status, body = execute({"code": "1", "env_vars": {"A": 1}})
    assert status == 400 and "env_vars" in body["message"], body
    r, data = request("POST", "/execute", b"{not json")
    assert r.status == 400, data
    r, data = request("GET", "/execute")
    assert r.status == 405, data
    r, data = request("PUT", "/contexts")
    assert r.status == 405, data
    r, data = request("POST", "/contexts/x/other")
    assert r.status == 404, data
    r, data = request("POST", "/execute", b'{"code": "' + b"x" * (9 << 20) + b'"}')
    assert r.status == 413, data
    # After all that the server still answers, on one kept-alive connection.
    c = conn()
    for n in range(3):
        status, lines = execute({"code": f"{n} * 2"}, c=c)
        assert {"type": "result", "text": str(n * 2), "is_main_result": True} in lines, lines


@test
def a_client_that_leaves_interrupts_its_run():
    r, data = request("POST", "/contexts", {})
    ctx = json.loads(data)["id"]
    s = socket.create_connection(("127.0.0.1", server().port))
    body = json.dumps({"code": "import time\nprint('looping', flush=True)\nwhile True: time.sleep(0.05)",
                       "context_id": ctx}).encode()
    s.sendall(b"POST /execute HTTP/1.1\r\nHost: x\r\nX-Access-Token: " + TOKEN.encode() +
              b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = b""
    while b"looping" not in got:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    s.close()
    rpc = RpcClient(server().url, TOKEN)
    try:
        def idle():
            return not next(c for c in rpc.call("code::contexts") if c["id"] == ctx)["running"]
        wait_until(idle, 30, what="the abandoned run to end")
    finally:
        rpc.close()
    status, lines = execute({"code": "'still here'", "context_id": ctx})
    assert {"type": "result", "text": "'still here'", "is_main_result": True} in lines, lines
    request("DELETE", f"/contexts/{ctx}")


@test
def a_large_output_read_slowly_arrives_whole():
    """8 MiB of output through the worker's output window: the worker waits for the reader."""
    c = conn()
    c.request("POST", "/execute", body=json.dumps({"code": "import sys\nfor i in range(128):\n"
                                                           "    sys.stdout.write(str(i % 10) * 65536)"}),
              headers={"X-Access-Token": TOKEN})
    r = c.getresponse()
    total = 0
    lines = 0
    while True:
        line = r.readline()
        if not line:
            break
        m = json.loads(line)
        lines += 1
        if m["type"] == "stdout":
            total += len(m["text"])
        if lines % 16 == 0:
            time.sleep(0.01)
    assert total == 128 * 65536 and m == {"type": "end_of_execution"}, (total, m)


@test
def the_server_exits_cleanly():
    """Last: SIGTERM ends it with status 0 (under ASan, with no leak)."""
    rc = server().stop()
    assert rc == 0, (rc, server().read_log()[-3000:])


if __name__ == "__main__":
    try:
        main()
    finally:
        if hasattr(server, "s") and server.s.proc.poll() is None:
            server.s.stop()

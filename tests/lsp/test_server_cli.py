"""`torchdoctor server` over TCP, and its argument errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

SERVER = [sys.executable, "-m", "torchdoctor", "server"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _read_message(sock: socket.socket) -> dict:
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += sock.recv(4096)
    return json.loads(body[:length])


def test_tcp_server_answers_initialize() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [*SERVER, "--tcp", f"127.0.0.1:{port}", "--log-level", "warning"],
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                assert time.monotonic() < deadline, "server did not listen"
                time.sleep(0.1)
        with sock:
            body = json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}
            ).encode()
            sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            reply = _read_message(sock)
        caps = reply["result"]["capabilities"]
        assert caps["textDocumentSync"]["change"] == 2  # incremental
        assert caps["codeActionProvider"]["resolveProvider"] is True
        assert "torchdoctor.applyFixes" in caps["executeCommandProvider"]["commands"]
        assert reply["result"]["serverInfo"]["name"] == "torchdoctor"
    finally:
        proc.kill()
        proc.wait()


def test_bad_tcp_address_is_a_clear_error() -> None:
    done = subprocess.run(
        [*SERVER, "--tcp", "localhost"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "HOST:PORT" in done.stderr

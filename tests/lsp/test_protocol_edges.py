"""The language server at the edges of the protocol, over stdio as an editor speaks it: the exit
code after ``shutdown``/``exit``, a message larger than the limit, ``torchdoctor.openGuide``
with a client that answers ``null`` and with a string that is not a rule code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from queue import Empty, Queue
from typing import Any

SERVER = [str(Path(sys.executable).with_name("torchdoctor")), "server"]
TIMEOUT_S = 60


def frame(message: dict[str, Any], declared: int | None = None) -> bytes:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    return b"Content-Length: %d\r\n\r\n" % (len(body) if declared is None else declared) + body


INITIALIZE = frame(
    {
        "id": 1,
        "method": "initialize",
        "params": {
            "processId": None,
            "rootUri": None,
            "capabilities": {"window": {"showDocument": {"support": True}}},
        },
    }
) + frame({"method": "initialized", "params": {}})


def run_all(data: bytes, env: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    """Send ``data`` and the end of input; the exit code and every message the server wrote."""
    done = subprocess.run(
        SERVER,
        input=data,
        capture_output=True,
        timeout=TIMEOUT_S,
        env={**os.environ, **(env or {})},
    )
    return done.returncode, parse(done.stdout)


def parse(out: bytes) -> list[dict[str, Any]]:
    messages = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
        messages.append(json.loads(rest[:length]))
        out = rest[length:]
    return messages


def test_exit_after_shutdown_is_0_and_exit_alone_is_1() -> None:
    shutdown = frame({"id": 2, "method": "shutdown"})
    code, messages = run_all(INITIALIZE + shutdown + frame({"method": "exit"}))
    assert code == 0
    assert {"id": 2, "jsonrpc": "2.0", "result": None} in messages
    code, _ = run_all(INITIALIZE + frame({"method": "exit"}))
    assert code == 1


def test_an_oversized_message_is_rejected_and_the_server_goes_on() -> None:
    text = "import torch\nstate = torch.load('x.pt')\n" * 200
    big = {
        "method": "textDocument/didOpen",
        "params": {
            "textDocument": {
                "uri": "file:///w/a.py",
                "languageId": "python",
                "version": 1,
                "text": text,
            }
        },
    }
    code, messages = run_all(
        INITIALIZE
        + frame(big)
        + frame({"id": 2, "method": "shutdown"})
        + frame({"method": "exit"}),
        env={"TORCHDOCTOR_MAX_MESSAGE_BYTES": "4096"},
    )
    assert code == 0
    shown = [m for m in messages if m.get("method") == "window/showMessage"]
    assert len(shown) == 1 and shown[0]["params"]["type"] == 1  # an error
    assert "rejected" in shown[0]["params"]["message"] and "4096" in shown[0]["params"]["message"]
    # The document was never opened, and the request after it was answered.
    assert not [m for m in messages if m.get("method") == "textDocument/publishDiagnostics"]
    assert {"id": 2, "jsonrpc": "2.0", "result": None} in messages


def test_a_huge_declared_length_is_no_memory_error() -> None:
    code, _messages = run_all(INITIALIZE + b"Content-Length: 99999999999\r\n\r\n{}")
    assert code == 1  # the input ended inside the message: no shutdown, no traceback


class Client:
    """A client that reads the server's messages in a thread, answering as it is told."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.messages: Queue[dict[str, Any]] = Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.send_raw(INITIALIZE)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                byte = self.proc.stdout.read(1)
                if not byte:
                    return
                head += byte
            length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
            self.messages.put(json.loads(self.proc.stdout.read(length)))

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def answer_of(self, request_id: int, on_request: Any = None) -> dict[str, Any]:
        while True:
            try:
                message = self.messages.get(timeout=TIMEOUT_S)
            except Empty:
                raise AssertionError(f"no answer to request {request_id}") from None
            if "method" in message and "id" in message:
                self.send_raw(frame({"id": message["id"], "result": on_request(message)}))
            elif message.get("id") == request_id:
                return message

    def close(self) -> None:
        self.send_raw(frame({"id": 99, "method": "shutdown"}) + frame({"method": "exit"}))
        assert self.proc.wait(timeout=TIMEOUT_S) == 0


def open_guide(client: Client, request_id: int, code: str, reply: Any) -> tuple[dict, list]:
    asked: list[dict[str, Any]] = []

    def on_request(message: dict[str, Any]) -> Any:
        if message["method"] == "window/showDocument":
            asked.append(message["params"])
            return reply
        return None

    client.send_raw(
        frame(
            {
                "id": request_id,
                "method": "workspace/executeCommand",
                "params": {"command": "torchdoctor.openGuide", "arguments": [code]},
            }
        )
    )
    return client.answer_of(request_id, on_request), asked


def test_open_guide_answers_whatever_the_client_replies() -> None:
    client = Client()
    try:
        answer, asked = open_guide(client, 10, "TDR105", None)  # a client that answers null
        assert answer["result"]["shown"] is False
        assert len(asked) == 1 and "/rules/TDR105/" in asked[0]["uri"]
        answer, asked = open_guide(client, 11, "tdr602", {"success": True})
        assert answer["result"]["shown"] is True
        assert "TDR602" in asked[0]["uri"]
    finally:
        client.close()


def test_open_guide_takes_rule_codes_only() -> None:
    client = Client()
    try:
        for i, code in enumerate(["../../etc/passwd", "TDR999", "", "TDR105/../../x"]):
            answer, asked = open_guide(client, 20 + i, code, {"success": True})
            assert answer["result"]["shown"] is False
            assert "not a rule code" in answer["result"]["error"]
            assert asked == []
    finally:
        client.close()

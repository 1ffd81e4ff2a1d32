"""torchdoctor inside a real Jupyter server through jupyter-lsp, found by its entry point alone.

A ``jupyter server`` subprocess runs with empty, isolated Jupyter directories (so no
``jupyter_server_config.json`` names torchdoctor); the test reads ``/lsp/status`` and then speaks
LSP through ``/lsp/ws/torchdoctor`` the way jupyterlab-lsp does: one bare JSON-RPC message per
websocket frame.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tornado.websocket import WebSocketClientConnection, websocket_connect

# Generous: a cold start of the Jupyter server and of the language server on a busy 2-core machine.
START_TIMEOUT_S = 90.0
MESSAGE_TIMEOUT_S = 60.0

SOURCE = 'import torch\nstate = torch.load("x.pt", weights_only=True)\n'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class JupyterServer:
    url: str
    ws_url: str
    root: Path
    config_dir: Path
    log: Path

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(self.url + path, timeout=30) as response:
            return json.loads(response.read())


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server and everything it started (the language server runs in its group)."""
    if proc.poll() is not None:
        return
    if hasattr(os, "killpg"):
        os.killpg(proc.pid, signal.SIGTERM)
    else:  # pragma: no cover - Windows
        proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
        proc.wait(timeout=15)


@pytest.fixture
def jupyter_server(tmp_path: Path) -> Iterator[JupyterServer]:
    root = tmp_path / "work"
    root.mkdir()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for var, name in [
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTER_DATA_DIR", "data"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
        ("IPYTHONDIR", "ipython"),
    ]:
        (tmp_path / name).mkdir()
        env[var] = str(tmp_path / name)
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)

    port = _free_port()
    argv = [
        sys.executable,
        "-m",
        "jupyter_server",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")

    log = tmp_path / "jupyter-server.log"
    with log.open("wb") as log_file:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=root,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = JupyterServer(
        url=f"http://127.0.0.1:{port}",
        ws_url=f"ws://127.0.0.1:{port}",
        root=root,
        config_dir=tmp_path / "config",
        log=log,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter server exited with {proc.returncode}:\n{log.read_text()}")
            try:
                server.get_json("/api/status")
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    pytest.fail(f"jupyter server did not answer:\n{log.read_text()}")
                time.sleep(0.1)
        yield server
    finally:
        _stop(proc)


class LspOverWebsocket:
    """A minimal LSP client over jupyter-lsp's websocket: one JSON-RPC message per frame."""

    def __init__(self, conn: WebSocketClientConnection) -> None:
        self.conn = conn
        self.next_id = 0
        self.seen: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        await self.conn.write_message(json.dumps({"jsonrpc": "2.0", **message}))

    async def notify(self, method: str, params: Any = None) -> None:
        await self.send({"method": method, "params": params})

    async def receive(self) -> dict[str, Any]:
        """The next message from the server; answers its requests (none is needed) with null."""
        while True:
            raw = await asyncio.wait_for(self.conn.read_message(), MESSAGE_TIMEOUT_S)
            if raw is None:
                raise AssertionError(f"the websocket closed; messages so far: {self.seen}")
            message = json.loads(raw)
            self.seen.append(message)
            if "method" in message and "id" in message:
                await self.send({"id": message["id"], "result": None})
                continue
            return message

    async def request(self, method: str, params: Any = None) -> Any:
        self.next_id += 1
        request_id = self.next_id
        await self.send({"id": request_id, "method": method, "params": params})
        while True:
            message = await self.receive()
            if message.get("id") == request_id and "method" not in message:
                assert "error" not in message, message
                return message.get("result")

    async def diagnostics_for(self, uri: str, code: str) -> list[dict[str, Any]]:
        """Wait for a publishDiagnostics of ``uri`` that contains ``code``."""
        while True:
            message = await self.receive()
            if message.get("method") != "textDocument/publishDiagnostics":
                continue
            params = message["params"]
            if params["uri"] == uri and any(d.get("code") == code for d in params["diagnostics"]):
                return list(params["diagnostics"])


def test_jupyter_lsp_finds_torchdoctor_by_entry_point(jupyter_server: JupyterServer) -> None:
    status = jupyter_server.get_json("/lsp/status")
    assert "torchdoctor" in status["sessions"], status
    spec = status["sessions"]["torchdoctor"]["spec"]
    # jupyter-lsp hides argv and env in its status; the rest of the spec is reported as given.
    assert spec["display_name"] == "torchdoctor"
    assert spec["languages"] == ["python"]
    assert spec["requires_documents_on_disk"] is False
    assert "text/x-ipython" in spec["mime_types"]
    # No configuration file names the server: the user config directory holds none at all.
    configs = [p for p in jupyter_server.config_dir.rglob("*") if p.suffix in (".json", ".py")]
    assert configs == []

    asyncio.run(_lint_through_websocket(jupyter_server))


async def _lint_through_websocket(server: JupyterServer) -> None:
    conn = await asyncio.wait_for(
        websocket_connect(server.ws_url + "/lsp/ws/torchdoctor"), START_TIMEOUT_S
    )
    try:
        client = LspOverWebsocket(conn)
        result = await client.request(
            "initialize",
            {
                "processId": None,
                "rootUri": server.root.as_uri(),
                "capabilities": {"textDocument": {"publishDiagnostics": {}}},
            },
        )
        assert "capabilities" in result
        await client.notify("initialized", {})

        uri = (server.root / "train.py").as_uri()
        await client.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": SOURCE}},
        )
        diagnostics = await client.diagnostics_for(uri, "TDR602")
        found = next(d for d in diagnostics if d["code"] == "TDR602")
        assert found["range"]["start"]["line"] == 1
        assert "map_location" in found["message"]

        assert await client.request("shutdown") is None
        await client.notify("exit")
    finally:
        conn.close()

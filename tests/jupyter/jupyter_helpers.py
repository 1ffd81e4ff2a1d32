"""Shared helpers: start a real Jupyter server (or JupyterLab) with isolated, empty Jupyter
directories, so that only what the installed packages declare (entry points, prebuilt
extensions) is found, and stop it with everything it started."""

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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tornado.websocket import WebSocketClientConnection, websocket_connect

# Generous: a cold start of the Jupyter server and of the language server on a busy 2-core machine.
START_TIMEOUT_S = 90.0
MESSAGE_TIMEOUT_S = 60.0

DIRECTORIES = [
    ("JUPYTER_CONFIG_DIR", "config"),
    ("JUPYTER_DATA_DIR", "data"),
    ("JUPYTER_RUNTIME_DIR", "runtime"),
    ("IPYTHONDIR", "ipython"),
    ("JUPYTERLAB_SETTINGS_DIR", "lab-settings"),
    ("JUPYTERLAB_WORKSPACES_DIR", "lab-workspaces"),
]


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def write_lab_settings(settings_dir: Path, settings: dict[str, dict[str, Any]]) -> None:
    """JupyterLab user settings, by plugin id (``package:plugin``), into ``settings_dir``."""
    for plugin_id, values in settings.items():
        package, _, plugin = plugin_id.partition(":")
        folder = settings_dir / package
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{plugin}.jupyterlab-settings").write_text(json.dumps(values))


@contextmanager
def running_jupyter(
    tmp_path: Path,
    module: str = "jupyter_server",
    lab_settings: dict[str, dict[str, Any]] | None = None,
    console_script: bool = False,
    env_extra: dict[str, str] | None = None,
) -> Iterator[JupyterServer]:
    """``python -m <module>`` (``jupyter_server`` or ``jupyterlab``) serving ``tmp_path/work``,
    with ``lab_settings`` as the user's JupyterLab settings. ``console_script`` starts it as a
    user does (``jupyter-server``, ``jupyter-lab``: the working folder is not on its own
    ``sys.path``); ``env_extra`` is added to its environment. ``tmp_path/work`` may exist."""
    root = tmp_path / "work"
    root.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env_extra or {}))
    for var, name in DIRECTORIES:
        (tmp_path / name).mkdir(exist_ok=True)
        env[var] = str(tmp_path / name)
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)
    write_lab_settings(tmp_path / "lab-settings", lab_settings or {})

    port = free_port()
    scripts = {"jupyter_server": "jupyter-server", "jupyterlab": "jupyter-lab"}
    start = (
        [str(Path(sys.executable).with_name(scripts[module]))]
        if console_script
        else [sys.executable, "-m", module]
    )
    argv = [
        *start,
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        # A free port, and the next ones if another test's server took it meanwhile: the
        # server writes the port it listens on to its runtime file, read below.
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=50",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        f"--ServerApp.root_dir={root}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")

    log = tmp_path / f"{module}.log"
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
    runtime_file = tmp_path / "runtime" / f"jpserver-{proc.pid}.json"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        server: JupyterServer | None = None
        while True:
            if proc.poll() is not None:
                pytest.fail(f"{module} exited with {proc.returncode}:\n{log.read_text()}")
            if server is None:
                try:
                    port = int(json.loads(runtime_file.read_text(encoding="utf-8"))["port"])
                except (OSError, ValueError, KeyError):
                    port = 0
                if port:
                    server = JupyterServer(
                        url=f"http://127.0.0.1:{port}",
                        ws_url=f"ws://127.0.0.1:{port}",
                        root=root,
                        config_dir=tmp_path / "config",
                        log=log,
                    )
            try:
                if server is not None:
                    server.get_json("/api/status")
                    break
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{module} did not answer:\n{log.read_text()}")
            time.sleep(0.1)
        assert server is not None
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


LINTED_SOURCE = 'import torch\nstate = torch.load("x.pt", weights_only=True)\n'


async def lint_over_websocket(server: JupyterServer, path: str) -> list[dict[str, Any]]:
    """Speak LSP through the websocket at ``path`` as an editor does: initialize, open
    ``train.py`` holding ``LINTED_SOURCE``, wait for its TDR602 diagnostics, shut down and exit;
    the diagnostics."""
    conn = await asyncio.wait_for(websocket_connect(server.ws_url + path), START_TIMEOUT_S)
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
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": "python",
                    "version": 1,
                    "text": LINTED_SOURCE,
                }
            },
        )
        diagnostics = await client.diagnostics_for(uri, "TDR602")
        assert await client.request("shutdown") is None
        await client.notify("exit")
        return diagnostics
    finally:
        conn.close()

"""The server extension of jupyterlab-torchdoctor (jupyterlab-ext/): the LSP framing of its
websocket relay, its command line, and its registration with Jupyter (no browser needed)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

import pytest

EXT = Path(__file__).resolve().parents[2] / "jupyterlab-ext"
sys.path.insert(0, str(EXT))

import jupyterlab_torchdoctor  # noqa: E402
from jupyterlab_torchdoctor import handlers  # noqa: E402

from torchdoctor import launch  # noqa: E402


def test_frame_and_read_back() -> None:
    body = json.dumps({"jsonrpc": "2.0", "method": "x", "params": {"text": "张量 🔥"}})

    async def roundtrip() -> list[str | None]:
        reader = asyncio.StreamReader()
        reader.feed_data(handlers.frame(body) + handlers.frame("{}"))
        reader.feed_eof()
        return [await handlers.read_message(reader) for _ in range(3)]

    assert asyncio.run(roundtrip()) == [body, "{}", None]


def test_reads_other_headers() -> None:
    async def read() -> str | None:
        reader = asyncio.StreamReader()
        data = b'{"a": 1}'
        reader.feed_data(
            b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
            + b"content-length: %d\r\n\r\n" % len(data)
            + data
        )
        reader.feed_eof()
        return await handlers.read_message(reader)

    assert asyncio.run(read()) == '{"a": 1}'


def test_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(handlers.COMMAND_ENV, raising=False)
    assert handlers.server_command() == launch.server_command()
    monkeypatch.setenv(handlers.COMMAND_ENV, "/opt/td/bin/torchdoctor server --log-level debug")
    assert handlers.server_command() == [
        "/opt/td/bin/torchdoctor",
        "server",
        "--log-level",
        "debug",
    ]


def test_registration() -> None:
    assert jupyterlab_torchdoctor._jupyter_server_extension_points() == [
        {"module": "jupyterlab_torchdoctor"}
    ]
    assert jupyterlab_torchdoctor._jupyter_labextension_paths()[0]["dest"] == (
        "jupyterlab-torchdoctor"
    )
    config = EXT / "jupyter-config" / "jupyter_server_config.d" / "jupyterlab_torchdoctor.json"
    enabled = json.loads(config.read_text())["ServerApp"]["jpserver_extensions"]
    assert enabled == {"jupyterlab_torchdoctor": True}
    package = json.loads((EXT / "package.json").read_text())
    assert package["name"] == "jupyterlab-torchdoctor"
    assert package["version"] == jupyterlab_torchdoctor.__version__


def test_routes_and_the_probe_helper() -> None:
    """The server extension serves the relay, its info and the kernel bridge's helper (which
    the panel's "Live tensors" runs through the notebook's own kernel connection)."""
    from torchdoctor.bridge import client

    added: list[tuple[str, type]] = []

    class WebApp:
        def __init__(self) -> None:
            self.settings = {"base_url": "/base/"}

        def add_handlers(self, host: str, routes: list[tuple[str, type]]) -> None:
            added.extend(routes)

    class Log:
        def info(self, *args: object) -> None:
            pass

    class App:
        def __init__(self) -> None:
            self.web_app = WebApp()
            self.log = Log()

    handlers.setup_handlers(App())
    assert {path: h.__name__ for path, h in added} == {
        "/base/torchdoctor/info": "InfoHandler",
        "/base/torchdoctor/probe": "ProbeHandler",
        "/base/torchdoctor/lsp": "LanguageServerHandler",
    }
    install = client.install_expression()
    assert client.PROBE_MODULE in install and "exec(compile(" in install


def _exit_codes(log: Path) -> list[str]:
    marker = "language server exited with "
    return [
        line.split(marker, 1)[1].strip() for line in log.read_text().splitlines() if marker in line
    ]


def test_a_closed_websocket_shuts_the_language_server_down(tmp_path: Path) -> None:
    """Closing the websocket (a tab closed, a reload) without the protocol's ``shutdown``: the
    relay sends ``shutdown`` then ``exit``, and the language server ends with status 0."""
    from jupyter_helpers import START_TIMEOUT_S, LspOverWebsocket, running_jupyter
    from tornado.websocket import websocket_connect

    config = tmp_path / "config" / "jupyter_server_config.json"
    config.parent.mkdir()
    config.write_text('{"ServerApp": {"jpserver_extensions": {"jupyterlab_torchdoctor": true}}}')
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(EXT), os.environ.get("PYTHONPATH")]))}

    async def open_and_close(ws_url: str, root: Path) -> None:
        conn = await asyncio.wait_for(
            websocket_connect(ws_url + "/torchdoctor/lsp"), START_TIMEOUT_S
        )
        client = LspOverWebsocket(conn)
        params = {"processId": None, "rootUri": root.as_uri(), "capabilities": {}}
        assert "capabilities" in await client.request("initialize", params)
        await client.notify("initialized", {})
        conn.close()

    with running_jupyter(tmp_path, console_script=True, env_extra=env) as server:
        asyncio.run(open_and_close(server.ws_url, server.root))
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _exit_codes(server.log) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _exit_codes(server.log) == ["0"], server.log.read_text()

"""The relay between the browser and ``torchdoctor server``.

``GET /torchdoctor/info`` tells the frontend where the server's root folder is (notebook URIs
are ``file:`` URIs under it, so the language server finds ``pyproject.toml`` and the notebook's
kernel) and which command runs the language server. ``GET /torchdoctor/probe`` gives the
kernel bridge's helper (its private module name and the user expression that installs it),
which the panel's "Live tensors" section runs through the notebook's own kernel connection as
silent ``user_expressions``. ``/torchdoctor/lsp`` is a websocket: each
text message is one JSON-RPC message; the handler adds and strips the ``Content-Length``
framing of the language server's stdio. Each connection has its own language server, stopped
when the connection closes: the relay asks it to ``shutdown`` (waiting briefly for the answer),
then sends ``exit``, as the protocol wants, so that it ends with status 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
from pathlib import Path
from typing import Any

from jupyter_core.utils import ensure_async
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from jupyter_server.base.websocket import WebSocketMixin
from jupyter_server.utils import url_path_join
from torchdoctor import launch
from tornado import web
from tornado.websocket import WebSocketClosedError, WebSocketHandler

from . import __version__

AUTH_RESOURCE = "torchdoctor"
COMMAND_ENV = "TORCHDOCTOR_SERVER_COMMAND"
STOP_TIMEOUT_S = 5.0
SHUTDOWN_TIMEOUT_S = 3.0  # how long the relay waits for the answer to its ``shutdown``
SHUTDOWN_ID = "jupyterlab-torchdoctor-relay-shutdown"
_STOPPING: set[asyncio.Future[None]] = set()  # keeps the stop tasks alive until they end


def server_command() -> list[str]:
    """The language server's command line: ``$TORCHDOCTOR_SERVER_COMMAND`` (shell words) or
    ``torchdoctor server`` run by this Python, with the working folder (the Jupyter root) off
    ``sys.path`` so that no module of the workspace can be imported in its place."""
    given = os.environ.get(COMMAND_ENV, "").strip()
    if given:
        return shlex.split(given)
    return launch.server_command()


def frame(body: str) -> bytes:
    """One LSP message with its header, as the language server reads it from stdin."""
    data = body.encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


async def read_message(stream: asyncio.StreamReader) -> str | None:
    """The next message the language server writes (None at the end of its output)."""
    length = None
    while True:
        line = await stream.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            if length is None:
                continue
            break
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    data = await stream.readexactly(length)
    return data.decode("utf-8")


class InfoHandler(APIHandler):
    @web.authenticated
    def get(self) -> None:
        root = Path(self.settings["server_root_dir"]).expanduser().resolve()
        self.finish(
            json.dumps(
                {
                    "version": __version__,
                    "rootUri": root.as_uri(),
                    "command": server_command(),
                }
            )
        )


class ProbeHandler(APIHandler):
    """The kernel-side helper of torchdoctor's kernel bridge, for the frontend's own probes."""

    @web.authenticated
    def get(self) -> None:
        try:
            from torchdoctor.bridge import client
        except ImportError as exc:  # pragma: no cover - torchdoctor is a dependency
            raise web.HTTPError(503, f"torchdoctor is not importable: {exc}") from None
        self.finish(
            json.dumps({"module": client.PROBE_MODULE, "install": client.install_expression()})
        )


class LanguageServerHandler(WebSocketMixin, WebSocketHandler, JupyterHandler):  # type: ignore[misc]
    """One websocket, one ``torchdoctor server`` process."""

    auth_resource = AUTH_RESOURCE
    process: asyncio.subprocess.Process | None = None
    tasks: list[asyncio.Task[None]]
    closed = False  # the websocket closed: the server's output is read, no longer relayed
    shutdown_answered: asyncio.Event | None = None

    async def pre_get(self) -> None:
        user = self.current_user
        if user is None:
            self.log.warning("torchdoctor: could not authenticate the websocket")
            raise web.HTTPError(403)
        authorizer = getattr(self, "authorizer", None)
        if authorizer is not None:
            allowed = await ensure_async(
                authorizer.is_authorized(self, user, "execute", AUTH_RESOURCE)
            )
            if not allowed:
                raise web.HTTPError(403)

    async def get(self, *args: Any, **kwargs: Any) -> None:
        await self.pre_get()
        res = super().get(*args, **kwargs)
        if res is not None:
            await res

    async def open(self, *args: Any, **kwargs: Any) -> None:
        self.tasks = []
        root = Path(self.settings["server_root_dir"]).expanduser()
        argv = server_command()
        try:
            self.process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=str(root),
            )
        except OSError as exc:
            self.log.error("torchdoctor: cannot start %s: %s", argv, exc)
            self.close(1011, "cannot start torchdoctor server")
            return
        self.log.info("torchdoctor: started %s (pid %s)", argv, self.process.pid)
        self.tasks.append(asyncio.ensure_future(self._relay_stdout()))
        self.tasks.append(asyncio.ensure_future(self._relay_stderr()))

    async def _relay_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while True:
            body = await read_message(self.process.stdout)
            if body is None:
                break
            if self.closed:
                # The relay's own shutdown: its answer ends the wait; the rest is dropped.
                if self.shutdown_answered is not None and _answers_shutdown(body):
                    self.shutdown_answered.set()
                continue
            try:
                await self.write_message(body)
            except WebSocketClosedError:
                continue  # keep reading until the server ends, so that it never blocks
        code = await self.process.wait()
        self.log.info("torchdoctor: language server exited with %s", code)
        with contextlib.suppress(Exception):
            self.close(1011 if code else 1000, "torchdoctor server exited")

    async def _relay_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        while True:
            line = await self.process.stderr.readline()
            if not line:
                break
            self.log.debug("torchdoctor server: %s", line.decode("utf-8", "replace").rstrip())

    async def on_message(self, message: str | bytes) -> None:
        process = self.process
        if process is None or process.stdin is None or process.returncode is not None:
            return
        body = message if isinstance(message, str) else message.decode("utf-8")
        try:
            process.stdin.write(frame(body))
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            self.log.warning("torchdoctor: the language server is gone")

    def on_close(self) -> None:
        self.closed = True
        task = asyncio.ensure_future(self._stop())
        _STOPPING.add(task)
        task.add_done_callback(_STOPPING.discard)

    async def _stop(self) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        if process.stdin is not None:
            # `shutdown` first (the server stops its work and its kernel connections), then
            # `exit`: the server ends with 0. `exit` alone would end it with 1.
            self.shutdown_answered = asyncio.Event()
            shutdown = {"jsonrpc": "2.0", "id": SHUTDOWN_ID, "method": "shutdown"}
            with contextlib.suppress(Exception):
                process.stdin.write(frame(json.dumps(shutdown)))
                await process.stdin.drain()
                # its answer, or its end (the editor had sent `shutdown` and `exit` itself)
                waits = [
                    asyncio.ensure_future(self.shutdown_answered.wait()),
                    asyncio.ensure_future(process.wait()),
                ]
                await asyncio.wait(
                    waits, timeout=SHUTDOWN_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
                )
                for waiting in waits:
                    waiting.cancel()
            with contextlib.suppress(Exception):
                process.stdin.write(frame(json.dumps({"jsonrpc": "2.0", "method": "exit"})))
                await process.stdin.drain()
            with contextlib.suppress(Exception):
                process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
        for task in getattr(self, "tasks", []):
            task.cancel()


def _answers_shutdown(body: str) -> bool:
    try:
        message = json.loads(body)
    except ValueError:
        return False
    return (
        isinstance(message, dict) and message.get("id") == SHUTDOWN_ID and "method" not in message
    )


def setup_handlers(server_app: Any) -> None:
    web_app = server_app.web_app
    base = web_app.settings["base_url"]
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, "torchdoctor", "info"), InfoHandler),
            (url_path_join(base, "torchdoctor", "probe"), ProbeHandler),
            (url_path_join(base, "torchdoctor", "lsp"), LanguageServerHandler),
        ],
    )
    server_app.log.info("torchdoctor: relaying the language server at %storchdoctor/lsp", base)

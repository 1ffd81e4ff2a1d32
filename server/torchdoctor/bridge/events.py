"""Watch a kernel's IOPub channel and report "the kernel went idle after the user ran a cell",
so the language server knows when to probe again.

Probes are silent: the kernel publishes no ``execute_input`` for them, so only the user's own
executions (from any frontend) are reported.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BridgeError, missing_jupyter_client


@dataclass(frozen=True)
class ExecutionDone:
    """A user's execute request finished and the kernel is idle again."""

    msg_id: str
    execution_count: int | None


class IdleWatcher:
    """Subscribes to a kernel's IOPub channel.

    Call :meth:`poll` from your own loop, or :meth:`start` to get a callback from a daemon thread.
    """

    def __init__(self, connection_file: str) -> None:
        try:
            from jupyter_client.blocking.client import BlockingKernelClient
        except ImportError:
            raise missing_jupyter_client() from None
        path = Path(connection_file)
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise BridgeError(f"cannot read connection file {connection_file}") from None
        self._client: Any = BlockingKernelClient()
        self._client.load_connection_info(info)
        self._client.start_channels(shell=False, iopub=True, stdin=False, hb=False, control=False)
        self._running: dict[str, int | None] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def _handle(self, msg: dict[str, Any]) -> ExecutionDone | None:
        parent = msg.get("parent_header") or {}
        parent_id = parent.get("msg_id")
        msg_type = msg.get("header", {}).get("msg_type")
        content = msg.get("content") or {}
        if msg_type == "execute_input" and parent_id:
            count = content.get("execution_count")
            self._running[parent_id] = count if isinstance(count, int) else None
            if len(self._running) > 1000:
                self._running.pop(next(iter(self._running)))
        elif (
            msg_type == "status"
            and content.get("execution_state") == "idle"
            and parent_id in self._running
        ):
            return ExecutionDone(parent_id, self._running.pop(parent_id))
        return None

    def poll(self, timeout: float = 0.0) -> list[ExecutionDone]:
        """Executions that finished since the last call (waits up to ``timeout`` for the first
        IOPub message)."""
        done: list[ExecutionDone] = []
        wait: float | None = timeout
        while True:
            try:
                msg = self._client.iopub_channel.get_msg(timeout=wait)
            except Exception:
                break
            wait = 0
            event = self._handle(msg)
            if event is not None:
                done.append(event)
        return done

    def start(self, callback: Callable[[ExecutionDone], None], interval: float = 0.2) -> None:
        """Call ``callback`` from a daemon thread for every finished execution."""
        if self._thread is not None:
            return

        def run() -> None:
            while not self._stop.is_set():
                for event in self.poll(interval):
                    with contextlib.suppress(Exception):
                        callback(event)

        self._thread = threading.Thread(target=run, name="torchdoctor-iopub", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        with contextlib.suppress(Exception):
            self._client.stop_channels()

    def __enter__(self) -> IdleWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""Client side of the kernel bridge, on ``jupyter_client`` (imported lazily).

One :class:`KernelBridge` holds one connection to one kernel. A probe is a silent
``execute_request`` (``code=""``, ``store_history=False``) whose only work is one
``user_expressions`` entry calling the private helper module installed in the kernel's
``sys.modules``: the user's execution count, ``In``/``Out``/``_``, history and namespace stay as
they were. Probes go through a kernel subshell when the kernel offers one (they answer while a
cell runs); a probe that does not answer within the timeout reports "kernel busy" and no second
probe is queued behind it. The probe bounds its own work in the kernel to a share of the
timeout (``BUDGET_SHARE``), so it answers, in part if need be, before the client gives up.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from ..core.live_facts import LiveFacts, ProbeRequest
from .errors import BridgeError, missing_jupyter_client

_PROBE_SOURCE = (Path(__file__).with_name("_kernel_probe.py")).read_text(encoding="utf-8")
PROBE_MODULE = "_torchdoctor_probe_" + hashlib.sha256(_PROBE_SOURCE.encode()).hexdigest()[:12]

DEFAULT_TIMEOUT = 2.0
CONTROL_CHECK = 0.3  # seconds to tell a busy kernel from a dead one after a probe timed out
PENDING_EXPIRY = 60.0  # after this, a probe still unanswered is given up
BUDGET_SHARE = 0.6  # of the timeout, for the probe's own work in the kernel
CLOSE_WAIT = 0.2  # seconds close() waits for a probe still running in the subshell
POLL = 0.05  # seconds between two looks at "is the bridge closing?" while waiting for a reply
SUBSHELL_FEATURE = "kernel subshells"


class KernelBusy(BridgeError):
    """The kernel is running a cell and has no subshell: try again when it is idle."""


class KernelDead(BridgeError):
    """The kernel does not answer at all."""


def _probe_expression(request: ProbeRequest, budget: float | None = None) -> str:
    # The request travels as a string literal (``repr`` of a ``str``): data, never code.
    payload = request.to_json()
    if budget is not None:
        data = json.loads(payload)
        data["budget"] = round(budget, 3)
        payload = json.dumps(data, separators=(",", ":"))
    return f'__import__("sys").modules[{PROBE_MODULE!r}].probe({payload!r})'


def _install_expression() -> str:
    # Builds the module with ``exec`` inside lambdas: no name lands in the user's namespace.
    return (
        f"(lambda sys, types: sys.modules.get({PROBE_MODULE!r}) is not None or "
        f'(lambda m: (exec(compile({_PROBE_SOURCE!r}, "<torchdoctor-probe>", "exec"), m.__dict__), '
        f"sys.modules.__setitem__({PROBE_MODULE!r}, m), True)[-1])(types.ModuleType({PROBE_MODULE!r})))"
        '(__import__("sys"), __import__("types"))'
    )


def install_expression() -> str:
    """The user expression that installs the kernel-side helper as ``PROBE_MODULE`` (for a
    frontend that probes through its own kernel connection, as the JupyterLab panel does)."""
    return _install_expression()


def parse_expression_reply(entry: dict[str, Any]) -> Any:
    """Decode one ``user_expressions`` result: ``repr`` of a JSON string, read with
    ``ast.literal_eval`` then ``json.loads`` (never ``eval``)."""
    if entry.get("status") != "ok":
        raise BridgeError(
            f"probe failed in the kernel: {entry.get('ename', '?')}: {entry.get('evalue', '')}"
        )
    text = entry.get("data", {}).get("text/plain")
    if not isinstance(text, str):
        raise BridgeError("probe answered without text")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise BridgeError(f"probe answered with unreadable text ({type(exc).__name__})") from None
    if isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise BridgeError("probe answered with something other than a string")
    return json.loads(value)


class KernelBridge:
    """A connection to one running kernel, for probes.

    ``KernelBridge(connection_file)`` reads the file (it holds the HMAC key: never logged) and
    connects; :meth:`probe` returns :class:`LiveFacts`. Thread-safe: one probe at a time;
    :meth:`close` from another thread stops a probe that is waiting (it raises "bridge is
    closed") and closes the sockets once that probe has let go of them.
    """

    def __init__(
        self,
        connection_file: str | os.PathLike[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        use_subshell: bool = True,
    ) -> None:
        self.connection_file = str(connection_file)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._pending: str | None = None  # a probe still queued (or running) in the kernel
        self._pending_since = 0.0
        self._installed = False
        self.subshell_id: str | None = None
        self.kernel_info: dict[str, Any] = {}
        self._client = self._connect()
        try:
            self._handshake(use_subshell)
        except BaseException:
            self.close()
            raise

    # -- connection --------------------------------------------------------------------
    def _connect(self) -> Any:
        try:
            from jupyter_client.blocking.client import BlockingKernelClient
        except ImportError:
            raise missing_jupyter_client() from None
        path = Path(self.connection_file)
        if not path.is_file():
            raise BridgeError(f"connection file not found: {self.connection_file}")
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise BridgeError(
                f"cannot read connection file {self.connection_file}: {getattr(exc, 'strerror', None) or type(exc).__name__}"
            ) from None
        except json.JSONDecodeError:
            raise BridgeError(f"connection file is not JSON: {self.connection_file}") from None
        needed = ("shell_port", "control_port", "ip", "key")
        if not isinstance(info, dict) or any(k not in info for k in needed):
            raise BridgeError(f"not a Jupyter connection file: {self.connection_file}")
        client = BlockingKernelClient()
        try:
            client.load_connection_info(info)  # type: ignore[arg-type]
        except Exception as exc:
            raise BridgeError(
                f"bad connection file {self.connection_file}: {type(exc).__name__}"
            ) from None
        client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=True)
        return client

    def _live_client(self) -> Any:
        """The client, for a caller that holds the lock (or is connecting)."""
        client = self._client
        if client is None or self._closing.is_set():
            raise BridgeError("bridge is closed")
        return client

    def _wait_reply(self, channel: Any, left: float) -> Any:
        """One reply from ``channel`` within ``left`` seconds (None if none came); raises
        "bridge is closed" as soon as :meth:`close` is called."""
        if self._closing.is_set():
            raise BridgeError("bridge is closed")
        try:
            return channel.get_msg(timeout=min(left, POLL))
        except Exception:
            return None

    def _control(
        self, msg_type: str, content: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        client = self._live_client()
        msg = client.session.msg(msg_type, content or {})
        client.control_channel.send(msg)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KernelDead(
                    f"kernel does not answer (no {msg_type.replace('_request', '_reply')} within "
                    f"{self.timeout if timeout is None else timeout:g} s): is it running?"
                )
            reply = self._wait_reply(client.control_channel, left)
            if reply is None:
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg["header"]["msg_id"]:
                return dict(reply["content"])

    def _handshake(self, use_subshell: bool) -> None:
        self.kernel_info = self._control("kernel_info_request")
        features = self.kernel_info.get("supported_features") or []
        if use_subshell and SUBSHELL_FEATURE in features:
            self._create_subshell()

    def _create_subshell(self) -> None:
        reply = self._control("create_subshell_request")
        sid = reply.get("subshell_id")
        self.subshell_id = sid if isinstance(sid, str) else None

    @property
    def uses_subshell(self) -> bool:
        return self.subshell_id is not None

    def close(self) -> None:
        """Disconnect. Safe from any thread, also while a probe runs: that probe stops waiting
        (it raises "bridge is closed") and the sockets are closed after it let go of them."""
        closing = getattr(self, "_closing", None)
        if closing is None:
            return
        closing.set()
        with self._lock:
            client = self._client
            if client is None:
                return
            self._client = None
            self._release(client)

    def _release(self, client: Any) -> None:
        if self._pending is not None:
            self._drain_late(client, CLOSE_WAIT)
        if self.subshell_id is not None and self._pending is None:
            # Deleting a subshell joins its thread, and the kernel's control channel waits for
            # that: never while a probe is still running there (it would block interrupts).
            try:
                msg = client.session.msg(
                    "delete_subshell_request", {"subshell_id": self.subshell_id}
                )
                client.control_channel.send(msg)
                client.control_channel.get_msg(timeout=0.5)
            except Exception:
                pass
        self.subshell_id = None
        with contextlib.suppress(Exception):
            client.stop_channels()

    def __enter__(self) -> KernelBridge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- probes ------------------------------------------------------------------------
    def probe(
        self, request: ProbeRequest | list[str] | tuple[str, ...], timeout: float | None = None
    ) -> LiveFacts:
        """Facts for the request's names. Raises :class:`KernelBusy` when the kernel cannot
        answer within the timeout, :class:`KernelDead` when it does not answer at all."""
        if not isinstance(request, ProbeRequest):
            request = ProbeRequest.of(request)
        if self._client is None or self._closing.is_set():
            raise BridgeError("bridge is closed")
        wait = self.timeout if timeout is None else timeout
        if not self._lock.acquire(timeout=wait):
            raise KernelBusy("kernel busy: another probe is running")
        try:
            self._live_client()
            return self._probe_locked(request, wait)
        finally:
            self._lock.release()

    def _probe_locked(self, request: ProbeRequest, wait: float) -> LiveFacts:
        expr = _probe_expression(request, max(wait * BUDGET_SHARE, 0.01))
        for attempt in range(3):
            expressions = {"r": expr}
            if not self._installed or attempt:
                expressions = {"i": _install_expression(), "r": expr}
            content = self._execute(expressions, wait)
            if (
                content.get("status") == "error"
                and "subshell" in str(content.get("ename", "")).lower()
            ):
                # The kernel restarted and forgot our subshell: make a new one.
                self._create_subshell()
                continue
            results = content.get("user_expressions") or {}
            entry = results.get("r") or {}
            if "i" in results:
                parse_expression_reply(results["i"])
                self._installed = True
            if (
                entry.get("status") == "error"
                and entry.get("ename") == "KeyError"
                and PROBE_MODULE in str(entry.get("evalue", ""))
            ):
                # The helper is gone: the kernel restarted. Install it again.
                self._installed = False
                continue
            data = parse_expression_reply(entry)
            count = content.get("execution_count")
            return LiveFacts(
                names=data.get("facts", {}),
                execution_count=count if isinstance(count, int) else None,
                kernel=data.get("kernel", {}),
            )
        raise BridgeError("probe could not be installed in the kernel")

    def _execute(self, expressions: dict[str, str], wait: float) -> dict[str, Any]:
        client = self._live_client()
        self._drain(wait if self._pending is not None else 0.0)
        if self._pending is not None and self._pending_lost():
            self._pending = None  # the kernel restarted: that probe will never answer
        if self._pending is not None:
            if time.monotonic() - self._pending_since < PENDING_EXPIRY:
                raise KernelBusy(
                    "kernel busy: the previous probe is still running in the kernel"
                    if self.subshell_id is not None
                    else "kernel busy: the previous probe is still waiting behind a running cell"
                )
            self._pending = None  # lost (the kernel restarted, say): stop waiting for it
        content = {
            "code": "",
            "silent": True,
            "store_history": False,
            "user_expressions": expressions,
            "allow_stdin": False,
            "stop_on_error": False,
        }
        msg = client.session.msg("execute_request", content)
        if self.subshell_id is not None:
            msg["header"]["subshell_id"] = self.subshell_id
        msg_id = msg["header"]["msg_id"]
        client.shell_channel.send(msg)
        # Until it answers, it is pending: if close() stops the wait, it still runs there.
        self._pending, self._pending_since = msg_id, time.monotonic()
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                # Busy, or gone? The control channel answers even while a cell runs.
                try:
                    self._control("kernel_info_request", timeout=CONTROL_CHECK)
                except KernelDead:
                    self._pending = None  # nothing left to wait for
                    raise
                # Not queued behind it: the next probe waits for this one's late answer first.
                if self.subshell_id is None:
                    raise KernelBusy(f"kernel busy: no answer within {wait:g} s")
                raise KernelBusy(f"kernel busy: the probe did not answer within {wait:g} s")
            reply = self._wait_reply(client.shell_channel, left)
            if reply is None:
                continue
            if reply.get("parent_header", {}).get("msg_id") == msg_id:
                self._pending = None
                return dict(reply["content"])

    def _pending_lost(self) -> bool:
        """Whether the probe still pending in our subshell can no longer answer: the kernel
        restarted and forgot the subshell."""
        if self.subshell_id is None:
            return False
        try:
            reply = self._control("list_subshell_request", timeout=CONTROL_CHECK)
        except BridgeError:
            return False
        ids = reply.get("subshell_id")
        return isinstance(ids, list) and self.subshell_id not in ids

    def _drain(self, wait: float = 0.0) -> None:
        """Drop late replies to probes that timed out; clear ``_pending`` once it answered
        (waiting up to ``wait`` seconds for it, and no longer once :meth:`close` is called)."""
        client = self._live_client()
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if self._pending is not None and left > 0:
                reply = self._wait_reply(client.shell_channel, left)
                if reply is None:
                    continue
            else:
                reply = self._late_reply(client)
                if reply is None:
                    return
            if reply.get("parent_header", {}).get("msg_id") == self._pending:
                self._pending = None

    def _drain_late(self, client: Any, wait: float) -> None:
        """While closing: wait up to ``wait`` seconds for the pending probe's late answer."""
        deadline = time.monotonic() + wait
        while self._pending is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            try:
                reply = client.shell_channel.get_msg(timeout=left)
            except Exception:
                continue
            if reply.get("parent_header", {}).get("msg_id") == self._pending:
                self._pending = None

    @staticmethod
    def _late_reply(client: Any) -> Any:
        try:
            return client.shell_channel.get_msg(timeout=0)
        except Exception:
            return None

    def is_alive(self, timeout: float = 1.0) -> bool:
        """Whether the kernel answers on its control channel (works while a cell runs)."""
        try:
            with self._lock:
                self._control("kernel_info_request", timeout=timeout)
            return True
        except BridgeError:
            return False


def probe_once(
    connection_file: str, request: ProbeRequest, timeout: float = DEFAULT_TIMEOUT
) -> LiveFacts:
    """Connect, probe, disconnect."""
    with KernelBridge(connection_file, timeout=timeout) as bridge:
        return bridge.probe(request)

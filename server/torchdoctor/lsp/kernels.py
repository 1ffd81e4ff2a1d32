"""Live facts for open notebooks: the language server's side of the kernel bridge.

For each open notebook the :class:`LiveManager` finds the running kernel (an explicit
``kernelConnectionFile`` setting, or the kernel in Jupyter's runtime dir whose
``__vsc_ipynb_file__`` / ``JPY_SESSION_NAME`` names the notebook), keeps one
:class:`~torchdoctor.bridge.client.KernelBridge` and one
:class:`~torchdoctor.bridge.events.IdleWatcher` per kernel, probes what the live rules need
and asks the server to analyse again when new facts arrive or the user ran a cell.

All kernel I/O runs in this module's own thread pool under short timeouts: a busy kernel never
blocks the event loop, an analysis or a hover. The live findings themselves are computed in the
analysis worker from the last facts, in the same check as the static ones
(``check_cells(..., live=facts, probe=True)``). The bridge is off when the editor says the
workspace is untrusted (``initializationOptions.trusted: false``) or the ``bridge`` setting is
false.

An editor that knows the notebook's kernel (the JupyterLab extension) tells the server what
became of it with the ``torchdoctor/kernelStatus`` notification (:func:`kernel_status`): after a
restart the facts read before it are dropped at once (a tensor of the old namespace no longer
underlines anything) and read again when the kernel is ready. An answer of a probe that was under
way, or of the process the restart replaces (it answers until it exits), is not taken. After a
shutdown, or when the notebook changed kernels, the notebook's kernel is looked up again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import keyword
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..bridge.errors import BridgeError
from ..core.live_facts import LiveFacts, ProbeRequest, is_valid_name
from ..core.model import is_chinese

if TYPE_CHECKING:
    from .settings import ClientSettings
    from .state import Doctor

PROBE_TIMEOUT = 1.0  # seconds a document probe may wait for the kernel
HOVER_TIMEOUT = 0.5  # seconds a hover may wait for the kernel
CONNECT_TIMEOUT = 1.0  # seconds to connect to (or identify) one kernel
CONTROL_MARGIN = 0.5  # the bridge's own "busy or dead?" check, plus thread start-up
DISCOVERY_BUDGET = 5.0  # seconds one look-up may spend asking kernels who they belong to
RETRY_S = 5.0  # after a failed look-up or probe, wait this long before trying again
PROBE_RETRIES = 6  # a probe that failed (kernel busy or slow) is tried again this many times
LOOK_AGAIN_S = 10.0  # a notebook without a kernel: look for one this often
UNNAMED_RETRY_S = 20.0  # ask a kernel that names no notebook again after this long
SETTLE_S = 1.0  # IOPub subscriptions take a moment to receive messages
SHUTDOWN_TIMEOUT = 3.0
LIVE_KINDS = ("tensor", "module")
KERNEL_STATUS = "torchdoctor/kernelStatus"  # the editor's notification of the kernel's state
RESTARTING = frozenset({"restarting", "autorestarting", "starting"})
READY = frozenset({"ready", "idle"})
GONE = frozenset({"dead", "shutdown", "none", "changed"})

T = TypeVar("T")


def workspace_trusted(options: Any) -> bool:
    """Whether ``initializationOptions`` leave the workspace trusted.

    Only an explicit ``"trusted": true`` or a missing key counts as trusted; any other value
    (``false``, a string...) turns the kernel bridge off. The key is read from the options
    themselves or from a ``{"torchdoctor": {...}}`` wrapper; it is never taken from
    ``workspace/configuration`` (a workspace cannot vouch for itself).
    """
    if not isinstance(options, dict):
        return True
    for scope in (options, options.get("torchdoctor")):
        if isinstance(scope, dict) and "trusted" in scope and scope["trusted"] is not True:
            return False
    return True


# ---- pure part (no kernel I/O) ----------------------------------------------------------------
@dataclass(frozen=True)
class LiveInput:
    """What an analysis needs of the kernel: the last facts read (None: none yet)."""

    facts: LiveFacts | None


def covers(asked: ProbeRequest | None, wanted: ProbeRequest) -> bool:
    """Whether facts read for ``asked`` answer everything ``wanted`` asks."""
    if asked is None:
        return False
    return set(wanted.names) <= set(asked.names) and set(wanted.views) <= set(asked.views)


def name_at(line: str, col: int) -> str | None:
    """The dotted name under column ``col`` (code points) of ``line``, up to the part under the
    cursor: ``model.fc.weight`` with the cursor on ``fc`` gives ``model.fc``; indices after the
    first part are kept, as ``state_dict()`` spells names (``model.0.weight``). None where the
    word is no name (a keyword, a number) or hangs off a call or subscript (``f().x``)."""

    def ident(ch: str) -> bool:
        return ch == "_" or ch.isalnum()

    if not 0 <= col <= len(line):
        return None
    start = col
    while start > 0 and ident(line[start - 1]):
        start -= 1
    end = col
    while end < len(line) and ident(line[end]):
        end += 1
    if start == end:
        return None
    parts = [line[start:end]]
    while start > 0 and line[start - 1] == ".":
        left = start - 1
        begin = left
        while begin > 0 and ident(line[begin - 1]):
            begin -= 1
        if begin == left:
            return None  # `f().x`, `a[0].x`, `"s".x`: not a plain dotted name
        parts.insert(0, line[begin:left])
        start = begin
    if start > 0 and (line[start - 1] in "'\"" or ident(line[start - 1])):
        return None
    name = ".".join(parts)
    # Indices after the first part: ``model.0.weight``, as ``state_dict()`` spells names.
    if any(
        keyword.iskeyword(p) or not (p.isidentifier() or (i and p.isdigit()))
        for i, p in enumerate(parts)
    ):
        return None
    return name if is_valid_name(name) else None


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def busy_markdown(name: str, locale: str | None, dead: bool) -> str:
    zh = is_chinese(locale)
    if zh:
        state = "内核忙或无响应" if dead else "内核忙"
        return f"**`{name}` 实时**\n\n{state}：当前单元运行结束后再显示事实"
    state = "kernel busy or not answering" if dead else "kernel busy"
    return f"**`{name}` live**\n\n{state}: facts appear once the running cell finishes"


# ---- the kernels (event loop side; I/O in the pool) --------------------------------------------
class Kernel:
    """One running kernel: a bridge for probes and a watcher for finished executions."""

    def __init__(self, connection_file: str, bridge: Any, watcher: Any) -> None:
        self.connection_file = connection_file
        self.bridge = bridge
        self.watcher = watcher
        self.generation = 0  # bumped for every execution the user finished
        self.restarts = 0  # bumped when the editor says the kernel is restarting
        self.gone: set[object] = set()  # the pids of the processes restarts replaced
        self.units: set[str] = set()

    def close(self) -> None:  # blocking: call it in the pool
        with contextlib.suppress(Exception):
            self.watcher.close()
        with contextlib.suppress(Exception):
            self.bridge.close()


@dataclass
class UnitLive:
    """The live state of one open notebook."""

    source: str | None = None  # the kernelConnectionFile setting the kernel was found with
    kernel: Kernel | None = None
    facts: LiveFacts | None = None
    asked: ProbeRequest | None = None  # what ``facts`` answer
    generation: int = -1  # the kernel's generation ``facts`` were read at
    wanted: ProbeRequest | None = None  # what the last analysis asked for
    task: asyncio.Task[None] | None = None
    retry_at: float = 0.0
    failures: int = 0  # probes failed in a row (each is tried again, up to PROBE_RETRIES)
    kinds: dict[str, str] = field(default_factory=dict)  # name -> last kind the kernel reported


class LiveManager:
    """Finds, probes and watches the kernels of open notebooks for the server.

    ``schedule(unit_key)`` is the server's "analyse this notebook again" (called on the event
    loop); ``log(level, text)`` logs once.
    """

    def __init__(
        self,
        schedule: Callable[[str], None],
        log: Callable[[str, str], None],
    ) -> None:
        self.schedule = schedule
        self.log = log
        self.trusted = True
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="torchdoctor-kernel")
        self.kernels: dict[str, Kernel] = {}
        self.units: dict[str, UnitLive] = {}
        self._seen: dict[str, tuple[float, dict[str, Any] | None, float]] = {}
        self.closed = False

    def enabled(self, client: ClientSettings) -> bool:
        return self.trusted and client.enable and client.bridge and not self.closed

    async def _io(self, timeout: float, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(loop.run_in_executor(self.executor, fn, *args), timeout)

    # -- the analysis' view -------------------------------------------------------------------
    def input_for(self, key: str, client: ClientSettings) -> LiveInput | None:
        """What an analysis of a notebook gets: None when it has no kernel (no live findings)."""
        state = self.units.get(key)
        if not self.enabled(client) or state is None or state.kernel is None:
            return None
        return LiveInput(state.facts)

    def after_analysis(
        self,
        key: str,
        notebook: bool,
        path: str,
        client: ClientSettings,
        wanted: ProbeRequest | None,
    ) -> None:
        """Find the kernel or probe it again when the analysis' facts are missing or stale."""
        if not notebook or not self.enabled(client):
            self.forget(key)
            return
        state = self.units.setdefault(key, UnitLive())
        if state.kernel is not None and state.source != client.kernel_connection_file:
            self.forget(key)  # the setting changed: look again
            state = self.units.setdefault(key, UnitLive())
        if wanted is not None:
            state.wanted = wanted
        if state.task is not None and not state.task.done():
            return
        if time.monotonic() < state.retry_at:
            return
        if state.kernel is None:
            state.task = asyncio.ensure_future(self._attach(key, path, client))
        elif self._stale(state):
            state.task = asyncio.ensure_future(self._probe(key))

    @staticmethod
    def _stale(state: UnitLive) -> bool:
        if state.kernel is None or state.wanted is None:
            return False
        return (
            state.facts is None
            or state.generation != state.kernel.generation
            or not covers(state.asked, state.wanted)
        )

    # -- finding the kernel -------------------------------------------------------------------
    def _find(self, notebook: str, explicit: str | None) -> str | None:
        """The connection file of the notebook's kernel (blocking: runs in the pool)."""
        from ..bridge.client import KernelBridge
        from ..bridge.discovery import connection_files, notebook_matches, resolve_connection_file

        if explicit:
            return resolve_connection_file(explicit)
        now = time.monotonic()
        deadline = now + DISCOVERY_BUDGET
        for path in connection_files():
            name = str(path)
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            seen = self._seen.get(name)
            facts: dict[str, Any] | None
            # A kernel that named no notebook may learn one (VS Code sets its variable after
            # start-up); one that did not answer may have been starting: ask again later.
            named = (
                seen is not None
                and seen[1] is not None
                and bool(seen[1].get("vscode_notebook") or seen[1].get("session_name"))
            )
            again = RETRY_S if seen is None or seen[1] is None else UNNAMED_RETRY_S
            if seen is not None and seen[0] == mtime and (named or now - seen[2] < again):
                facts = seen[1]
            elif time.monotonic() > deadline:
                break  # the rest next time
            else:
                try:
                    with KernelBridge(path, timeout=CONNECT_TIMEOUT) as bridge:
                        facts = dict(bridge.probe(ProbeRequest.of([], kernel=True)).kernel)
                except BridgeError:
                    facts = None
                self._seen[name] = (mtime, facts, now)
            if facts is not None and notebook_matches(facts, notebook):
                return name
        return None

    def _connect(self, connection_file: str, on_done: Callable[[Any], None]) -> Kernel:
        from ..bridge.client import KernelBridge
        from ..bridge.events import IdleWatcher

        bridge = KernelBridge(connection_file, timeout=PROBE_TIMEOUT)
        try:
            watcher = IdleWatcher(connection_file)
        except BaseException:
            bridge.close()
            raise
        # Let the IOPub subscription settle before the first probe, so that an execution that
        # ends after that probe is reported.
        watcher.poll(SETTLE_S / 2)
        watcher.start(on_done)
        return Kernel(connection_file, bridge, watcher)

    async def _attach(self, key: str, path: str, client: ClientSettings) -> None:
        state = self.units.get(key)
        if state is None:
            return
        explicit = client.kernel_connection_file
        limit = CONNECT_TIMEOUT + CONTROL_MARGIN
        try:
            found = await self._io(DISCOVERY_BUDGET + 3 * limit, self._find, path, explicit)
            if found is None:
                state.retry_at = time.monotonic() + RETRY_S
                # The user may start the kernel without touching the notebook: look again.
                asyncio.get_running_loop().call_later(
                    LOOK_AGAIN_S, self._look_again, key, state, path, client
                )
                return
            kernel = self.kernels.get(found)
            if kernel is None:
                loop = asyncio.get_running_loop()

                def on_done(event: Any, file: str = found) -> None:
                    loop.call_soon_threadsafe(self._executed, file)

                kernel = await self._io(limit * 2, self._connect, found, on_done)
                if self.closed or found in self.kernels:
                    await self._io(SHUTDOWN_TIMEOUT, kernel.close)
                    kernel = self.kernels.get(found)
                    if kernel is None:
                        return
                else:
                    self.kernels[found] = kernel
                    self.log("info", f"kernel bridge: {Path(found).name} for {path}")
                    # A cell that ended while the watcher was still subscribing is not
                    # reported: probe once more when the subscription has surely settled.
                    loop.call_later(SETTLE_S, self._executed, found)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # jupyter_client and zmq raise more than BridgeError
            state.retry_at = time.monotonic() + RETRY_S
            self.log("warning", f"kernel bridge: no kernel for {path}: {_reason(exc)}")
            return
        if self.units.get(key) is not state:
            self._release(kernel)
            return
        state.kernel, state.source = kernel, explicit
        kernel.units.add(key)
        self.schedule(key)  # the next analysis says what to probe

    def _look_again(self, key: str, state: UnitLive, path: str, client: ClientSettings) -> None:
        if self.closed or self.units.get(key) is not state or state.kernel is not None:
            return
        if state.task is None or state.task.done():
            state.task = asyncio.ensure_future(self._attach(key, path, client))

    # -- probing ------------------------------------------------------------------------------
    async def _probe(self, key: str) -> None:
        state = self.units.get(key)
        if state is None or state.kernel is None or state.wanted is None:
            return
        kernel, wanted = state.kernel, state.wanted
        generation, restarts = kernel.generation, kernel.restarts
        try:
            facts = await self._io(
                PROBE_TIMEOUT + CONTROL_MARGIN, kernel.bridge.probe, wanted, PROBE_TIMEOUT
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Busy: the watcher reports when the cell finished. Gone: look again later.
            self.log("debug", f"kernel bridge: probe failed: {_reason(exc)}")
            if not Path(kernel.connection_file).exists():  # the kernel was shut down
                self.forget(key)
                state = self.units.setdefault(key, UnitLive())
            state.retry_at = time.monotonic() + RETRY_S
            if state.kernel is kernel:
                # A slow or loaded kernel may not report a finished cell again: try once more
                # later rather than wait for the next edit.
                state.failures += 1
                if state.failures <= PROBE_RETRIES:
                    asyncio.get_running_loop().call_later(RETRY_S, self._reprobe, key)
            return
        if self.units.get(key) is not state or state.kernel is not kernel:
            return
        if kernel.restarts != restarts:
            # The kernel restarted while the probe ran: what it read may be the namespace that
            # is gone. "ready" probes again.
            return
        pid = facts.kernel.get("pid")
        if pid in kernel.gone:
            # The process a restart replaces answers until it exits: ask the new one.
            state.failures += 1
            if state.failures <= PROBE_RETRIES:
                asyncio.get_running_loop().call_later(SETTLE_S, self._reprobe, key)
                return
            kernel.gone.discard(pid)  # still there: the editor's "restarting" was not one
        state.facts, state.asked, state.generation = facts, wanted, generation
        state.retry_at, state.failures = 0.0, 0
        for name, value in facts.names.items():
            if isinstance(value, dict):
                state.kinds[name] = str(value.get("kind"))
        self.schedule(key)

    def _executed(self, connection_file: str) -> None:
        """The user ran a cell in this kernel and it finished: probe again."""
        kernel = self.kernels.get(connection_file)
        if kernel is None or self.closed:
            return
        kernel.generation += 1
        for key in list(kernel.units):
            state = self.units.get(key)
            if state is None:
                continue
            state.retry_at = 0.0
            if state.task is None or state.task.done():
                state.task = asyncio.ensure_future(self._probe(key))
            else:
                state.task.add_done_callback(functools.partial(self._reprobe, key))

    def _reprobe(self, key: str, _task: object = None) -> None:
        state = self.units.get(key)
        if self.closed:
            return
        if state is not None and self._stale(state) and (state.task is None or state.task.done()):
            state.task = asyncio.ensure_future(self._probe(key))

    # -- what the editor says of the kernel --------------------------------------------------
    def kernel_status(self, key: str, status: str) -> list[str]:
        """The editor says the notebook's kernel is ``status``; the notebooks to analyse again.

        ``restarting`` (and ``starting``, ``autorestarting``): the namespace the facts were read
        from is gone: they are dropped for every notebook of that kernel, whose live findings go
        with the next analysis. ``ready`` (or ``idle``) after that: read them again. ``dead``,
        ``shutdown``, ``none``, ``changed``: let go of the kernel; the next analysis looks for the
        notebook's kernel again (a new one is found; none: no live findings)."""
        state = self.units.get(key)
        if self.closed or state is None:
            return []
        if status in GONE:
            had = state.kernel is not None or state.facts is not None
            self.forget(key)
            self.units[key] = UnitLive()
            return [key] if had else []
        kernel = state.kernel
        if kernel is None:
            return []
        if status in RESTARTING:
            kernel.generation += 1
            kernel.restarts += 1
            keys = sorted(kernel.units)
            for other in keys:
                dropped = self.units.get(other)
                if dropped is None:
                    continue
                if dropped.facts is not None and dropped.facts.kernel.get("pid") is not None:
                    kernel.gone.add(dropped.facts.kernel["pid"])
                dropped.facts, dropped.asked = None, None
                dropped.kinds.clear()
                dropped.retry_at, dropped.failures = 0.0, 0
            return keys
        if status in READY and state.facts is None:
            self._executed(kernel.connection_file)
        return []

    # -- hovers -------------------------------------------------------------------------------
    async def hover(
        self,
        key: str,
        notebook: bool,
        client: ClientSettings,
        line: str,
        col: int,
        locale: str | None,
    ) -> str | None:
        """Markdown for the live tensor or module under ``col`` of ``line`` (None: nothing to
        say); "kernel busy" rather than waiting for a kernel that does not answer."""
        from ..bridge.client import KernelBusy, KernelDead
        from ..bridge.markdown import hover_markdown

        state = self.units.get(key)
        if not notebook or not self.enabled(client) or state is None or state.kernel is None:
            return None
        name = name_at(line, col)
        if name is None:
            return None
        try:
            facts = await self._io(
                HOVER_TIMEOUT + CONTROL_MARGIN,
                state.kernel.bridge.probe,
                ProbeRequest.of([name], kernel=False),
                HOVER_TIMEOUT,
            )
        except (KernelBusy, KernelDead, asyncio.TimeoutError) as exc:
            if state.kinds.get(name) in LIVE_KINDS:
                return busy_markdown(name, locale, dead=not isinstance(exc, KernelBusy))
            return None
        except Exception:
            return None
        value = facts.get(name)
        if not isinstance(value, dict):
            return None
        state.kinds[name] = str(value.get("kind"))
        if value.get("kind") not in LIVE_KINDS:
            return None
        return hover_markdown(value, locale, name=name, execution_count=facts.execution_count)

    # -- closing ------------------------------------------------------------------------------
    def forget(self, key: str) -> None:
        """The notebook closed (or its bridge was turned off): let go of its kernel."""
        state = self.units.pop(key, None)
        if state is None:
            return
        if state.task is not None:
            state.task.cancel()
        if state.kernel is not None:
            state.kernel.units.discard(key)
            self._release(state.kernel)

    def _release(self, kernel: Kernel) -> None:
        if kernel.units or self.kernels.get(kernel.connection_file) is not kernel:
            return
        del self.kernels[kernel.connection_file]
        with contextlib.suppress(RuntimeError):  # the pool is already shut down
            self.executor.submit(kernel.close)

    async def shutdown(self) -> None:
        """Close every bridge and watcher (deleting the kernel subshells) before exiting."""
        self.closed = True
        for state in self.units.values():
            if state.task is not None:
                state.task.cancel()
        self.units.clear()
        kernels = list(self.kernels.values())
        self.kernels.clear()
        if kernels:
            loop = asyncio.get_running_loop()
            futures = [loop.run_in_executor(self.executor, k.close) for k in kernels]
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*futures), SHUTDOWN_TIMEOUT)
        self.executor.shutdown(wait=False, cancel_futures=True)

    def info(self) -> dict[str, Any]:
        return {
            "trusted": self.trusted,
            "kernels": len(self.kernels),
            "notebooksWithKernel": sum(1 for s in self.units.values() if s.kernel is not None),
        }


def kernel_status(doctor: Doctor, params: Any) -> None:
    """``torchdoctor/kernelStatus``: ``{"notebook": {"uri": ...}, "status": ...}``."""
    from .state import norm_uri

    def get(value: Any, name: str) -> Any:
        return value.get(name) if isinstance(value, dict) else getattr(value, name, None)

    uri = get(get(params, "notebook"), "uri")
    status = get(params, "status")
    if not isinstance(uri, str) or not isinstance(status, str):
        doctor.log("warning", f"{KERNEL_STATUS}: expected a notebook uri and a status: {params!r}")
        return
    for key in doctor.live.kernel_status(norm_uri(uri), status):
        doctor.schedule_key(key)

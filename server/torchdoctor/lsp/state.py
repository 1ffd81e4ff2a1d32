"""The language server's state: the open documents and notebooks (:class:`Unit`), the editor's
settings, the scheduling of analyses and the publishing of their diagnostics (:class:`Doctor`),
and the pygls server that carries it (:class:`TorchDoctorServer`).

Analysis runs off the event loop in the state's own thread pool, debounced per document;
superseded work is cancelled and results for stale versions are dropped. The handlers are plain
functions over a ``Doctor`` in their own modules; ``Doctor.guard`` turns one into what pygls
registers.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import dataclasses
import functools
import gc
import inspect
import logging
import os
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import attrs
from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.protocol import default_converter
from pygls.uris import to_fs_path, uri_scheme

from .. import __version__
from ..core.config import Settings
from ..core.incremental import IncrementalParser
from ..linter.projects import Projects
from . import convert
from .diagnostics import Analysis, Job, SettingsResolver, analyse, compute_fix_all, compute_fixes
from .kernels import LiveManager
from .measured import Reports
from .notebook_sync import CellDoc
from .settings import ClientSettings, parse_settings

logger = logging.getLogger("torchdoctor.lsp")

PYTHON_LANGUAGES = (None, "", "python")
WAIT_TIMEOUT_S = 10.0
KEPT_PARSES = 4  # documents whose last parse is kept for incremental re-parsing
# Edits kept to move fixes built on request to the text the editor holds; past that many since
# the last analysis (code that has not parsed for that long), the fixes wait for the next one.
KEPT_CHANGES = 1000
# The cycle collector runs when the server is idle, not in the middle of typing: after this many
# seconds without a check, or after this many checks without a pause.
COLLECT_AFTER_IDLE_S = 1.0
COLLECT_EVERY_CHECKS = 50

_MESSAGE_TYPE = {
    "error": types.MessageType.Error,
    "warning": types.MessageType.Warning,
    "info": types.MessageType.Info,
    "debug": types.MessageType.Log,
}
_LEVEL_ORDER = {"error": 0, "warning": 1, "info": 2, "debug": 3}


def norm_uri(uri: str) -> str:
    """The key a URI is kept under: unquoted (clients quote a URI's characters differently)."""
    return unquote(uri)


@dataclass
class Unit:
    """An open text document or notebook: what was published for it, and its pending work."""

    key: str  # unquoted URI of the document or notebook
    uri: str  # as the client spells it
    notebook: bool
    diagnostics: dict[str, list[types.Diagnostic]] = field(default_factory=dict)  # by cell/doc
    # the version each cell's diagnostics were last published with, and the cells' order then
    # (notebooks)
    published: dict[str, int | None] = field(default_factory=dict)
    published_order: tuple[str, ...] = ()
    analysed: Any = None  # the version the diagnostics belong to
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    refresh: bool = False  # ask a pull client to pull again after the next analysis
    stop: threading.Event = field(default_factory=threading.Event)  # stops the running check
    # Fixes built on request (text documents): the job the diagnostics were computed from, the
    # edits made since (uri, the partial changes, the version they made), and the diagnostics
    # of each rule built with their fixes on that job's text, for that version.
    fix_job: Job | None = None
    fix_changes: list[tuple[str, list[types.TextDocumentContentChangeEvent], int | None]] = field(
        default_factory=list
    )
    fix_cache: dict[str, list[types.Diagnostic]] = field(default_factory=dict)

    @property
    def in_kernel(self) -> bool:
        """Whether the code runs in a Jupyter kernel: a notebook synced cell by cell, or one
        sent as a single Python text document under its ``.ipynb`` path (jupyterlab-lsp joins
        the code cells that way). Both are checked as notebooks and get live facts."""
        return self.notebook or self.key.endswith(".ipynb")

    def spelled(self, uri: str) -> str | None:
        """The key under which ``uri`` (however the client spells it) has diagnostics."""
        if uri in self.diagnostics:
            return uri
        norm = norm_uri(uri)
        return next((u for u in self.diagnostics if norm_uri(u) == norm), None)

    def items(self, uri: str) -> list[types.Diagnostic]:
        key = self.spelled(uri)
        return self.diagnostics[key] if key is not None else []


def _trim_heap() -> None:
    """Return the C heap's free memory to the system (glibc's ``malloc_trim``; elsewhere
    nothing)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def _converter() -> Any:
    """pygls' converter, reading a ``null`` answer to ``window/showDocument`` (some clients send
    it) as "not shown": as it stands the answer cannot be read and the request never ends."""
    converter = default_converter()

    def show_document_response(obj: dict[str, Any], _type: Any) -> types.ShowDocumentResponse:
        result = obj.get("result")
        success = isinstance(result, dict) and result.get("success") is True
        return types.ShowDocumentResponse(
            id=obj["id"], result=types.ShowDocumentResult(success=success)
        )

    converter.register_structure_hook(types.ShowDocumentResponse, show_document_response)
    return converter


class TorchDoctorServer(LanguageServer):
    """pygls server that logs, never pops up, errors in handlers."""

    def __init__(self) -> None:
        super().__init__(
            "torchdoctor",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        cells=[types.NotebookCellLanguage(language="python")]
                    )
                ],
                save=False,
            ),
            converter_factory=_converter,
        )
        self.doctor = Doctor(self)

    def report_server_error(self, error: Exception, source: Any) -> None:
        try:
            self.doctor.log(
                "error", f"internal error ({getattr(source, '__name__', source)}): {error!r}"
            )
        except Exception:  # never let reporting fail the loop
            logger.exception("failed to report an error")


class Doctor:
    """The server's state and behaviour, kept apart from pygls' own attributes."""

    def __init__(self, server: TorchDoctorServer) -> None:
        self.server = server
        self.locale: str | None = None
        self.shut_down = False  # `shutdown` answered: `exit` then ends the process with 0
        self.log_level = "info"
        self.client_logs = False  # set at initialize: messages go to window/logMessage
        self.base_settings = ClientSettings()  # from the command line
        self.init_settings = ClientSettings()
        self.global_settings = ClientSettings()
        self.folder_settings: dict[str, ClientSettings] = {}
        self.resolver = SettingsResolver()
        self.units: dict[str, Unit] = {}
        # The last parse of the documents edited most recently (a tree takes about 2 MB per
        # 1,000 lines: kept for a few documents only).
        self.parsers: OrderedDict[str, IncrementalParser] = OrderedDict()
        self.cell_owner: dict[str, str] = {}  # unquoted cell URI -> unquoted notebook URI
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="torchdoctor")
        self.reported: set[str] = set()
        self.pull = False
        self.resolve_support = False
        # Whether text documents' fixes go in their diagnostics' ``data`` (for a client that reads
        # them there) rather than being built when a code action or a hover asks.
        self.fixes_in_data = False
        self.document_changes = False
        self.refresh_support = False
        self.config_ready = asyncio.Event()  # set once the editor's settings have been read
        self.live = LiveManager(self.schedule_key, self.log_once)
        self.collect_timer: asyncio.TimerHandle | None = None
        self.checks_since_collect = 0
        self.closed_since_collect = False
        # The projects of the open files: names imported from their other modules resolve
        # there, reading open documents as the editor has them.
        self.projects = Projects(overlay=self.open_text)
        # The reports of ``torchdoctor run``, looked at each time a document is analysed.
        self.measured = Reports()

    # -- logging ------------------------------------------------------------------------------
    def log(self, level: str, message: str) -> None:
        """Send a message to the client's log (``window/logMessage``), or, where it does not go
        there (no client yet, or below the client's log level), to stderr. Not both: editors
        show the server's stderr in the same output channel."""
        if self.client_logs and _LEVEL_ORDER[level] <= _LEVEL_ORDER.get(self.log_level, 2):
            try:
                self.server.window_log_message(
                    types.LogMessageParams(type=_MESSAGE_TYPE[level], message=message)
                )
                return
            except Exception:  # the pipe is gone
                pass
        logger.log(logging.getLevelName(level.upper()), message)

    def log_once(self, level: str, message: str) -> None:
        if message in self.reported:
            return
        self.reported.add(message)
        self.log(level, message)

    def guard(self, handler: Callable[..., Any], default: Any = None) -> Callable[..., Any]:
        """``handler(self, *args)``, as pygls registers it: any exception is logged and
        answered with ``default``, and the server goes on. An async handler stays async.

        The wrapper takes the handler's name, not its signature (no ``__wrapped__``, no
        ``functools.partial``): pygls reads a command's parameters from the signature it finds
        and would take this state for the client's first argument.
        """
        name = handler.__name__

        async def run_async(*args: Any) -> Any:
            try:
                return await handler(self, *args)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.log("error", f"{name} failed:\n{traceback.format_exc()}")
                return default

        def run(*args: Any) -> Any:
            try:
                return handler(self, *args)
            except Exception:
                self.log("error", f"{name} failed:\n{traceback.format_exc()}")
                return default

        wrapper = run_async if inspect.iscoroutinefunction(handler) else run
        wrapper.__name__ = wrapper.__qualname__ = name  # what report_server_error names
        return wrapper

    # -- settings -------------------------------------------------------------------------------
    @property
    def encoding(self) -> str:
        enc = self.server.workspace.position_encoding
        return str(getattr(enc, "value", enc) or convert.UTF16)

    def set_settings(self, target: str | None, raw: Any, origin: str) -> None:
        """Take the editor's settings: those of ``initializationOptions`` (``target`` None),
        the global ones (``""``) or those of a workspace folder (its path)."""
        parsed, problems = parse_settings(raw, origin)
        for problem in problems:
            self.log_once("warning", problem)
        if target is None:
            self.init_settings = parsed
        elif target == "":
            self.global_settings = parsed
        else:
            self.folder_settings[target] = parsed
        self.log_level = self.client_settings(None).log_level

    def client_settings(self, path: str | None) -> ClientSettings:
        settings = self.base_settings.overlay(self.init_settings).overlay(self.global_settings)
        if path and self.folder_settings:
            folders = [f for f in self.folder_settings if path.startswith(f.rstrip("/") + "/")]
            if folders:
                settings = settings.overlay(self.folder_settings[max(folders, key=len)])
        return settings

    def path_of(self, uri: str) -> str:
        path = to_fs_path(uri) if uri_scheme(uri) in ("file", "") else None
        if path:
            return path
        # untitled: and similar: configuration of the workspace root
        root = self.server.workspace.root_path
        name = unquote(uri.rsplit("/", 1)[-1].split(":")[-1]) or "untitled.py"
        return str(Path(root) / name) if root else name

    async def settings_for(self, path: str) -> tuple[Settings, list[str]]:
        """The engine settings of ``path`` (the nearest ``[tool.torchdoctor]`` under the
        editor's) and the problems met, read off the event loop: finding and reading a
        ``pyproject.toml`` touches the disk."""
        return await asyncio.to_thread(self.resolver.resolve, path, self.client_settings(path))

    async def docs_base(self, uri: str) -> str | None:
        settings, _ = await self.settings_for(self.path_of(uri))
        return settings.docs_base_url

    # -- the project ------------------------------------------------------------------------
    def open_text(self, path: str) -> str | None:
        """The editor's text of an open ``.py`` file (read from worker threads)."""
        while True:
            try:  # the event loop may open or close a document meanwhile
                units = list(self.units.values())
                break
            except RuntimeError:
                continue
        for unit in units:
            if unit.notebook or unit.closed or not unit.key.endswith(".py"):
                continue
            if os.path.abspath(self.path_of(unit.uri)) == path:
                doc = self.server.workspace.text_documents.get(unit.key)
                return doc.source if doc is not None else None
        return None

    def project_changed(self, path: str | None, *, delay_ms: int | None = None) -> None:
        """A project file changed (None: files were added or removed): check again the open
        documents whose findings read facts of it (all of them when files came or went)."""
        self.projects.changed(path)
        if path is None:
            targets = [u for u in self.units.values() if not u.closed]
        else:
            wanted = self.projects.dependents(path)
            targets = [
                u
                for u in self.units.values()
                if not u.closed and os.path.abspath(self.path_of(u.uri)) in wanted
            ]
        for unit in targets:
            unit.refresh = self.pull and self.refresh_support
            self.schedule(unit, delay_ms)

    def reports_changed(self) -> None:
        """A report of ``torchdoctor run`` came, changed or went: check the open documents
        again (they read the reports as they are now); a pull client is told to pull once each
        check is done."""
        for unit in [u for u in self.units.values() if not u.closed]:
            unit.refresh = self.pull and self.refresh_support
            self.schedule(unit, 0)

    # -- units ----------------------------------------------------------------------------------
    def unit_for(self, uri: str) -> Unit | None:
        key = norm_uri(uri)
        owner = self.cell_owner.get(key)
        return self.units.get(owner if owner else key)

    def current_version(self, unit: Unit) -> Any:
        ws = self.server.workspace
        if unit.notebook:
            nb = ws.get_notebook_document(notebook_uri=unit.uri)
            if nb is None:
                return None
            # Cell versions too: some clients change cells through textDocument/didChange.
            cells = ws.text_documents
            return nb.version, tuple(
                (c.document, getattr(cells.get(norm_uri(c.document)), "version", None))
                for c in nb.cells
            )
        doc = ws.text_documents.get(unit.key)
        return doc.version if doc else None

    def notebook_cells(self, unit: Unit) -> list[CellDoc]:
        ws = self.server.workspace
        nb = ws.get_notebook_document(notebook_uri=unit.uri)
        if nb is None:
            return []
        cells = []
        for cell in nb.cells:
            if cell.kind != types.NotebookCellKind.Code:
                continue
            doc = ws.text_documents.get(norm_uri(cell.document))
            if doc is None or doc.language_id not in PYTHON_LANGUAGES:
                continue
            cells.append(CellDoc(cell.document, doc.source, doc.version))
        return cells

    def job(self, unit: Unit) -> Job | None:
        path = self.path_of(unit.uri)
        client = self.client_settings(path)
        if unit.notebook:
            return Job(
                self.current_version(unit),
                path,
                client,
                self.locale,
                self.encoding,
                cells=self.notebook_cells(unit),
                live=self.live.input_for(unit.key, client),
                parser=self.parser_for(unit.key),
                stop=unit.stop,
                projects=self.projects,
                measured=self.measured,
            )
        doc = self.server.workspace.text_documents.get(unit.key)
        if doc is None:
            return None
        joined = unit.in_kernel  # a notebook's code cells as one text document: one cell
        return Job(
            doc.version,
            path,
            client,
            self.locale,
            self.encoding,
            uri=unit.uri,
            text=doc.source,
            cells=[CellDoc(unit.uri, doc.source, doc.version)] if joined else None,
            live=self.live.input_for(unit.key, client) if joined else None,
            parser=self.parser_for(unit.key),
            stop=unit.stop,
            projects=self.projects,
            fixes_in_data=self.fixes_in_data,
            measured=self.measured,
        )

    def parser_for(self, key: str) -> IncrementalParser:
        parser = self.parsers.pop(key, None) or IncrementalParser()
        self.parsers[key] = parser
        while len(self.parsers) > KEPT_PARSES:
            self.parsers.popitem(last=False)
        return parser

    def open_unit(self, uri: str, notebook: bool) -> Unit:
        key = norm_uri(uri)
        old = self.units.get(key)
        if old is not None:
            self.stop_work(old)
        unit = Unit(key, uri, notebook)
        self.units[key] = unit
        return unit

    def close_unit(self, unit: Unit) -> None:
        unit.closed = True
        unit.done.set()
        self.stop_work(unit)
        self.units.pop(unit.key, None)
        self.parsers.pop(unit.key, None)
        self.live.forget(unit.key)
        uris = set(unit.diagnostics) | ({unit.uri} if not unit.notebook else set())
        for uri in uris:
            self.cell_owner.pop(norm_uri(uri), None)
            self.publish(uri, [], None)
        unit.diagnostics = {}
        self.closed_since_collect = True
        with contextlib.suppress(RuntimeError):  # no event loop: nothing to schedule on
            self.collect_when_idle()

    # -- scheduling ------------------------------------------------------------------------------
    def collect_when_idle(self) -> None:
        """Schedule the cycle collector for the next pause (``main`` turns its automatic runs
        off: a full collection over every kept parse takes as long as a check of a large file,
        and landing in the middle of one doubled its latency)."""
        if gc.isenabled():
            return
        if self.collect_timer is not None:
            self.collect_timer.cancel()
        self.checks_since_collect += 1
        if self.checks_since_collect >= COLLECT_EVERY_CHECKS:
            self.collect()
        else:
            loop = asyncio.get_running_loop()
            self.collect_timer = loop.call_later(COLLECT_AFTER_IDLE_S, self.collect)

    def collect(self) -> None:
        self.collect_timer = None
        self.checks_since_collect = 0
        start = time.perf_counter()
        found = gc.collect()
        if self.closed_since_collect:
            # Closed documents freed memory the C allocator keeps for itself: hand it back.
            self.closed_since_collect = False
            _trim_heap()
        spent = (time.perf_counter() - start) * 1000
        self.log("debug", f"cycle collector: {found} objects freed in {spent:.0f} ms")

    def schedule_key(self, key: str) -> None:
        """Analyse again because the kernel's facts changed (the text did not)."""
        unit = self.units.get(key)
        if unit is not None and not unit.closed:
            unit.refresh = self.pull and self.refresh_support  # pull clients must be told
            self.schedule(unit, 0)

    def stop_work(self, unit: Unit) -> None:
        """Cancel the unit's pending analysis, and stop its check if one is running (at the next
        rule: a thread cannot be interrupted)."""
        if unit.task is not None:
            unit.task.cancel()
        unit.stop.set()
        unit.stop = threading.Event()

    def when_stopped(self, work: Future[Analysis | None], uri: str, version: Any) -> None:
        """Log (at debug level) when a superseded check that was already running stops."""
        loop = asyncio.get_running_loop()

        def done(finished: Future[Analysis | None]) -> None:
            if not finished.cancelled() and finished.exception() is None:
                if finished.result() is None:
                    message = f"check of {uri} version {version} stopped: superseded"
                    with contextlib.suppress(RuntimeError):  # the loop has closed
                        loop.call_soon_threadsafe(self.log, "debug", message)

        work.add_done_callback(done)

    def schedule(self, unit: Unit, delay_ms: int | None = None) -> None:
        self.stop_work(unit)
        unit.done.clear()
        if delay_ms is None:
            delay_ms = self.client_settings(self.path_of(unit.uri)).debounce_ms
        unit.task = asyncio.ensure_future(self.run(unit, delay_ms / 1000.0))

    async def run(self, unit: Unit, delay: float) -> None:
        try:
            if delay > 0:
                await asyncio.sleep(delay)
            if not self.config_ready.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.config_ready.wait(), WAIT_TIMEOUT_S)
            job = self.job(unit)
            if job is None or unit.closed:
                unit.done.set()
                return
            if not job.client.enable:
                self.live.forget(unit.key)
                self.apply(unit, Analysis(job.version, False, {u: [] for u in job.uris}))
                return
            work = self.executor.submit(analyse, job, self.resolver)
            try:
                analysis = await asyncio.wrap_future(work)
            except asyncio.CancelledError:
                self.when_stopped(work, unit.uri, job.version)
                raise
            if analysis is None:
                return
            if unit.closed or self.units.get(unit.key) is not unit:
                return
            if analysis.version != self.current_version(unit):
                return  # stale: a newer version is on its way
            for problem in analysis.problems:
                self.log_once("warning", problem)
            for error in analysis.errors:
                self.log_once("error", error)
            if not analysis.broken or unit.analysed is None:
                # The diagnostics published now are this job's: their fixes, on request, too.
                self.forget_fixes(unit, job if analysis.fixes_on_request else None)
            self.apply(unit, analysis)
            self.collect_when_idle()
            if unit.refresh:
                unit.refresh = False
                self.server.workspace_diagnostic_refresh(None)
            self.live.after_analysis(
                unit.key, unit.in_kernel, job.path, job.client, analysis.live_request
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log_once("error", f"analysis failed:\n{traceback.format_exc()}")

    def apply(self, unit: Unit, analysis: Analysis) -> None:
        """Take an analysis' diagnostics (or keep the last good ones, moved with the edits,
        when the code does not parse) and publish them."""
        if analysis.broken and unit.analysed is not None:
            new = {uri: unit.diagnostics.get(uri, []) for uri in analysis.diagnostics}
        else:
            new = analysis.diagnostics
        gone = [uri for uri in unit.diagnostics if uri not in new]
        old = unit.diagnostics
        unit.diagnostics = new
        unit.analysed = analysis.version
        if unit.notebook:
            for uri in new:
                self.cell_owner[norm_uri(uri)] = unit.key
        for uri in gone:
            self.publish(uri, [], None)
            unit.published.pop(uri, None)
        # A notebook's cell whose text and findings are as last published is not sent again
        # while the cells stay in place: a keystroke in one cell of a long notebook publishes
        # that cell (and the cells whose findings changed), not every cell.
        order = tuple(new)
        same_cells = unit.notebook and order == unit.published_order
        unit.published_order = order if unit.notebook else ()
        for uri, diagnostics in new.items():
            version = self.doc_version(uri)
            if (
                same_cells
                and uri in unit.published
                and unit.published[uri] == version
                and old.get(uri) == diagnostics
            ):
                continue
            self.publish(uri, diagnostics, version)
            if unit.notebook:
                unit.published[uri] = version
        unit.done.set()

    def doc_version(self, uri: str) -> int | None:
        doc = self.server.workspace.text_documents.get(norm_uri(uri))
        return doc.version if doc else None

    def publish(self, uri: str, diagnostics: list[types.Diagnostic], version: int | None) -> None:
        if self.pull and diagnostics:
            return
        self.server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=version)
        )

    async def wait_current(self, unit: Unit) -> None:
        """Wait until the unit's diagnostics belong to its current version."""
        deadline = asyncio.get_running_loop().time() + WAIT_TIMEOUT_S
        while not unit.closed and unit.analysed != self.current_version(unit):
            if unit.task is None or unit.task.done():
                self.schedule(unit, 0)
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            try:
                await asyncio.wait_for(unit.done.wait(), remaining)
            except asyncio.TimeoutError:
                return
            if unit.analysed != self.current_version(unit):
                unit.done.clear()

    def reanalyse_all(self) -> None:
        for unit in list(self.units.values()):
            self.schedule(unit, 0)
        if self.pull and self.refresh_support:
            self.server.workspace_diagnostic_refresh(None)

    # -- fixes ----------------------------------------------------------------------------------
    def forget_fixes(self, unit: Unit, job: Job | None) -> None:
        """Start over the fixes built on request: for diagnostics computed from ``job``. What
        is kept of it is its text and settings, not the document's parse (kept for a few
        documents only, ``KEPT_PARSES``): building fixes uses the parse when it is still kept."""
        if job is not None:
            job = dataclasses.replace(job, parser=None, stop=None, live=None)
        unit.fix_job = job
        unit.fix_changes = []
        unit.fix_cache = {}

    def note_changes(
        self,
        unit: Unit,
        uri: str,
        changes: list[types.TextDocumentContentChangeEvent] | None,
        version: int | None,
    ) -> None:
        """Edits the diagnostics were moved through (None: they were dropped): fixes built
        later on the analysed text are moved through them too."""
        if unit.fix_job is None:
            return
        if changes is None or len(unit.fix_changes) >= KEPT_CHANGES:
            self.forget_fixes(unit, None)
            return
        unit.fix_changes.append((uri, changes, version))

    async def with_fixes(
        self, unit: Unit, codes: set[str] | None = None
    ) -> dict[str, list[types.Diagnostic]]:
        """The unit's diagnostics, those of ``codes`` (None: all) with their fixes in ``data``:
        fixes left to be built on request are built (for each rule once per analysed version, in
        the worker threads) on the text the diagnostics were computed on, and moved through the
        edits made since, as the diagnostics were."""
        for _attempt in range(2):
            current = unit.diagnostics
            wanted = {
                str(d.code)
                for items in current.values()
                for d in items
                if convert.fixes_on_request(d) and (codes is None or d.code in codes)
            }
            job = unit.fix_job
            if not wanted or job is None:
                return current
            missing = frozenset(wanted - unit.fix_cache.keys())
            if missing:
                task = dataclasses.replace(job, parser=self.parsers.get(unit.key))
                built = await asyncio.get_running_loop().run_in_executor(
                    self.executor, compute_fixes, task, self.resolver, missing
                )
                if unit.fix_job is not job:
                    continue  # a newer analysis came meanwhile: build for it instead
                for code in missing:
                    unit.fix_cache[code] = [d for d in built if d.code == code]
            return self._fill_fixes(unit, current, wanted)
        return unit.diagnostics

    def _fill_fixes(
        self, unit: Unit, current: dict[str, list[types.Diagnostic]], codes: set[str]
    ) -> dict[str, list[types.Diagnostic]]:
        """``current`` with the built fixes of ``codes`` in the data of the diagnostics that
        leave them to be built (matched by rule, range and message once moved through the edits
        since); a diagnostic that none matches has no fix."""
        job = unit.fix_job
        assert job is not None
        moved = [d for code in codes for d in unit.fix_cache.get(code, ())]
        for uri, changes, version in unit.fix_changes:
            if norm_uri(uri) == unit.key:
                moved = convert.shift_diagnostics(moved, job.uri, changes, version, self.encoding)
        found = {(d.code, convert.range_key(d.range), d.message): d for d in moved}
        out = {}
        for uri, items in current.items():
            filled = []
            for d in items:
                if convert.fixes_on_request(d) and d.code in codes and isinstance(d.data, dict):
                    match = found.get((d.code, convert.range_key(d.range), d.message))
                    fixes = convert.diagnostic_fixes(match) if match is not None else []
                    data = {k: v for k, v in d.data.items() if k != "fixesOnRequest"}
                    d = attrs.evolve(d, data={**data, "fixes": fixes})
                filled.append(d)
            out[uri] = filled
        return out

    def workspace_edit(
        self,
        edits: dict[str, list[types.TextEdit]],
        versions: dict[str, int | None] | None = None,
    ) -> types.WorkspaceEdit:
        """The edits as a workspace edit; with ``documentChanges`` each document's edits name
        the version they were computed on (``versions``; by default the current one)."""
        if self.document_changes:
            versions = versions or {}
            return types.WorkspaceEdit(
                document_changes=[
                    types.TextDocumentEdit(
                        types.OptionalVersionedTextDocumentIdentifier(
                            uri=uri,
                            version=versions[uri] if uri in versions else self.doc_version(uri),
                        ),
                        list(items),
                    )
                    for uri, items in edits.items()
                ]
            )
        return types.WorkspaceEdit(changes={uri: list(items) for uri, items in edits.items()})

    async def fix_all(
        self, unit: Unit, *, unsafe: bool | None, codes: frozenset[str] | None
    ) -> tuple[dict[str, list[types.TextEdit]], dict[str, int], dict[str, int | None]]:
        """The unit's bulk fixes as edits per document, how many of each rule were fixed, and
        the version of each document they were computed on; none when the document changed
        meanwhile."""
        job = self.job(unit)
        if job is None:
            return {}, {}, {}
        loop = asyncio.get_running_loop()
        edits, applied, error = await loop.run_in_executor(
            self.executor,
            functools.partial(compute_fix_all, job, self.resolver, unsafe=unsafe, codes=codes),
        )
        if error:
            self.log("warning", error)
        if job.version != self.current_version(unit):
            return {}, {}, {}
        if job.cells is not None:
            versions = {c.uri: c.version for c in job.cells}
        else:
            versions = {job.uri: job.version}
        return edits, applied, versions

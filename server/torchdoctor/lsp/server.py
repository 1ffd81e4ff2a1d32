"""The torchdoctor language server (pygls): thin handlers over the engine.

Analysis runs off the event loop in the server's own thread pool, debounced per document;
superseded work is cancelled and results for stale versions are dropped. Conversions live in
``convert.py``, editor settings in ``settings.py``, notebook handling in ``notebook.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import importlib.metadata
import inspect
import logging
import platform
import sys
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

import attrs
from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path, uri_scheme

from .. import __version__
from ..core.config import ConfigError, Settings
from ..core.incremental import IncrementalParser
from ..core.model import Finding, is_chinese
from ..linter.configuration import ConfigFinder
from ..linter.runner import Superseded, check_text, fix_any
from ..linter.selection import enabled_codes
from ..rules.docs import rule_url
from . import convert
from .kernels import LiveInput, LiveManager, workspace_trusted
from .notebook_sync import CellDoc, NotebookLocator, check_cells, fix_cells
from .settings import ClientSettings, parse_settings

logger = logging.getLogger("torchdoctor.lsp")

FIX_ALL_KIND = "source.fixAll.torchdoctor"
NOTEBOOK_FIX_ALL_KIND = "notebook.source.fixAll.torchdoctor"
CMD_APPLY_FIXES = "torchdoctor.applyFixes"
CMD_DEBUG_INFO = "torchdoctor.debugInfo"
CMD_OPEN_GUIDE = "torchdoctor.openGuide"
PYTHON_LANGUAGES = (None, "", "python")
WAIT_TIMEOUT_S = 10.0
KEPT_PARSES = 4  # documents whose last parse is kept for incremental re-parsing
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

F = TypeVar("F", bound=Callable[..., Any])


# ---- analysis (runs in worker threads; touches no server state) ----------------------------
@dataclass
class Job:
    """A snapshot of one document (or notebook) to analyse."""

    key: str
    version: Any
    path: str
    client: ClientSettings
    locale: str | None
    encoding: str
    uri: str = ""
    text: str = ""
    cells: list[CellDoc] | None = None
    live: LiveInput | None = None  # the kernel's last facts, for a notebook with a kernel
    parser: IncrementalParser | None = None  # the document's last parse
    stop: threading.Event | None = None  # set when a newer version makes this job pointless


@dataclass
class Analysis:
    version: Any
    broken: bool  # the code does not parse: keep the last good findings
    diagnostics: dict[str, list[types.Diagnostic]]
    problems: list[str] = field(default_factory=list)  # configuration problems
    errors: list[str] = field(default_factory=list)  # rule errors (not syntax errors)
    live_request: Any = None  # what to probe the kernel for (a ProbeRequest), when it has one


class SettingsResolver:
    """Engine settings for a path: the nearest ``[tool.torchdoctor]`` under the editor's."""

    def __init__(self) -> None:
        self.finder = ConfigFinder()

    def reset(self) -> None:
        self.finder = ConfigFinder()

    def resolve(self, path: str | None, client: ClientSettings) -> tuple[Settings, list[str]]:
        problems: list[str] = []
        base = Settings()
        if path:
            try:
                base = self.finder.for_path(Path(path))
            except ConfigError as exc:
                problems.append(f"{exc}; using the default settings")
            except OSError as exc:
                problems.append(f"cannot read the configuration for {path}: {exc}")
        return client.apply(base), problems


def analyse(job: Job, resolver: SettingsResolver) -> Analysis | None:
    """The diagnostics of one job; None when a newer version stopped it."""
    try:
        return _analyse(job, resolver)
    except Superseded:
        return None


def _analyse(job: Job, resolver: SettingsResolver) -> Analysis:
    settings, problems = resolver.resolve(job.path, job.client)
    stop = job.stop.is_set if job.stop is not None else None
    docs_base = settings.docs_base_url
    out: dict[str, list[types.Diagnostic]] = {}
    if settings.exclude and settings.is_excluded(Path(job.path)):
        # `exclude` in [tool.torchdoctor]: the file is not checked, as on the command line.
        uris = [c.uri for c in job.cells] if job.cells is not None else [job.uri]
        return Analysis(job.version, False, {u: [] for u in uris}, problems)
    if job.cells is not None:
        for cell in job.cells:
            out[cell.uri] = []
        result, notebook = check_cells(
            job.cells,
            job.path,
            settings,
            job.parser,
            stop,
            live=job.live.facts if job.live is not None else None,
            probe=job.live is not None,
        )
        findings: list[Finding] = result.findings
        live_request = result.probe if notebook is not None else None
        versions = {c.uri: c.version for c in job.cells}
        locator: convert.Locator | None = (
            NotebookLocator(notebook, job.cells, job.encoding) if notebook else None
        )
    else:
        out[job.uri] = []
        result = check_text(job.text, job.path, settings, parser=job.parser, stop=stop)
        findings, live_request = result.findings, None
        versions = {job.uri: job.version}
        locator = convert.TextLocator(job.uri, job.text, job.encoding)
    broken = any(e.unparsable for e in result.errors)
    errors = [e.format() for e in result.errors if not e.unparsable]
    if locator is not None:
        for finding in findings:
            uri, _ = locator.locate(finding.range)
            _uri, diagnostic = convert.to_diagnostic(
                finding,
                locator,
                version=versions.get(uri),
                locale=job.locale,
                docs_base=docs_base,
            )
            out.setdefault(uri, []).append(diagnostic)
    return Analysis(job.version, broken, out, problems, errors, live_request)


def compute_fix_all(
    job: Job, resolver: SettingsResolver, *, unsafe: bool | None, codes: frozenset[str] | None
) -> tuple[dict[str, list[types.TextEdit]], dict[str, int], str | None]:
    """Bulk fixes through the engine's fix loop, as text edits per document."""
    settings, _problems = resolver.resolve(job.path, job.client)
    if settings.exclude and settings.is_excluded(Path(job.path)):
        return {}, {}, None
    allow_unsafe = settings.unsafe_fixes if unsafe is None else unsafe
    if job.cells is not None:
        changed, applied, error = fix_cells(
            job.cells, job.path, settings, unsafe=allow_unsafe, codes=codes
        )
        old = {c.uri: c.text for c in job.cells}
        edits = {
            uri: convert.diff_edits(old[uri], text, job.encoding) for uri, text in changed.items()
        }
    else:
        outcome = fix_any(job.text, job.path, settings, unsafe=allow_unsafe, codes=codes)
        applied, error = outcome.applied, outcome.error
        new_edits = convert.diff_edits(job.text, outcome.text, job.encoding)
        edits = {job.uri: new_edits} if new_edits else {}
    return edits, applied, error.format() if error else None


# ---- per-document state ---------------------------------------------------------------------
@dataclass
class Unit:
    """An open text document or notebook: what was published for it, and its pending work."""

    key: str  # unquoted URI of the document or notebook
    uri: str  # as the client spells it
    notebook: bool
    diagnostics: dict[str, list[types.Diagnostic]] = field(default_factory=dict)  # by cell/doc
    analysed: Any = None  # the version the diagnostics belong to
    task: asyncio.Task[None] | None = None
    done: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False
    refresh: bool = False  # ask a pull client to pull again after the next analysis
    stop: threading.Event = field(default_factory=threading.Event)  # stops the running check

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
        norm = _norm(uri)
        return next((u for u in self.diagnostics if _norm(u) == norm), None)

    def items(self, uri: str) -> list[types.Diagnostic]:
        key = self.spelled(uri)
        return self.diagnostics[key] if key is not None else []


def _norm(uri: str) -> str:
    return unquote(uri)


def _kind_matches(kind: str, only: Sequence[str] | None) -> bool:
    if only is None:
        return True
    return any(kind == k or kind.startswith(k + ".") or not k for k in only)


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
        self.log_level = "info"
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
        self.document_changes = False
        self.refresh_support = False
        self.config_ready = asyncio.Event()  # set once the editor's settings have been read
        self.live = LiveManager(self.schedule_key, self.log_once)
        self.collect_timer: asyncio.TimerHandle | None = None
        self.checks_since_collect = 0

    # -- logging ------------------------------------------------------------------------------
    def log(self, level: str, message: str) -> None:
        logger.log(logging.getLevelName(level.upper()), message)
        if _LEVEL_ORDER[level] > _LEVEL_ORDER.get(self.log_level, 2):
            return
        with contextlib.suppress(Exception):  # no client yet, or the pipe is gone
            self.server.window_log_message(
                types.LogMessageParams(type=_MESSAGE_TYPE[level], message=message)
            )

    def log_once(self, level: str, message: str) -> None:
        if message in self.reported:
            return
        self.reported.add(message)
        self.log(level, message)

    def guard(self, default: Any = None) -> Callable[[F], F]:
        """Log any exception of a handler and answer ``default``: the server goes on."""

        def decorate(fn: F) -> F:
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def run_async(*args: Any, **kwargs: Any) -> Any:
                    try:
                        return await fn(*args, **kwargs)
                    except asyncio.CancelledError:
                        raise
                    except Exception:
                        self.log("error", f"{fn.__name__} failed:\n{traceback.format_exc()}")
                        return default

                return run_async  # type: ignore[return-value]

            @functools.wraps(fn)
            def run(*args: Any, **kwargs: Any) -> Any:
                try:
                    return fn(*args, **kwargs)
                except Exception:
                    self.log("error", f"{fn.__name__} failed:\n{traceback.format_exc()}")
                    return default

            return run  # type: ignore[return-value]

        return decorate

    # -- settings -------------------------------------------------------------------------------
    @property
    def encoding(self) -> str:
        enc = self.server.workspace.position_encoding
        return str(getattr(enc, "value", enc) or convert.UTF16)

    def set_settings(self, target: str | None, raw: Any, origin: str) -> ClientSettings:
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
        return parsed

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

    # -- units ----------------------------------------------------------------------------------
    def schedule_key(self, key: str) -> None:
        """Analyse again because the kernel's facts changed (the text did not)."""
        unit = self.units.get(key)
        if unit is not None and not unit.closed:
            unit.refresh = self.pull and self.refresh_support  # pull clients must be told
            self.schedule(unit, 0)

    def unit_for(self, uri: str) -> Unit | None:
        key = _norm(uri)
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
                (c.document, getattr(cells.get(_norm(c.document)), "version", None))
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
            doc = ws.text_documents.get(_norm(cell.document))
            if doc is None or doc.language_id not in PYTHON_LANGUAGES:
                continue
            cells.append(CellDoc(cell.document, doc.source, doc.version))
        return cells

    def job(self, unit: Unit) -> Job | None:
        path = self.path_of(unit.uri)
        client = self.client_settings(path)
        if unit.notebook:
            return Job(
                unit.key,
                self.current_version(unit),
                path,
                client,
                self.locale,
                self.encoding,
                cells=self.notebook_cells(unit),
                live=self.live.input_for(unit.key, True, client),
                parser=self.parser_for(unit.key),
                stop=unit.stop,
            )
        doc = self.server.workspace.text_documents.get(unit.key)
        if doc is None:
            return None
        joined = unit.in_kernel  # a notebook's code cells as one text document: one cell
        return Job(
            unit.key,
            doc.version,
            path,
            client,
            self.locale,
            self.encoding,
            uri=unit.uri,
            text=doc.source,
            cells=[CellDoc(unit.uri, doc.source, doc.version)] if joined else None,
            live=self.live.input_for(unit.key, True, client) if joined else None,
            parser=self.parser_for(unit.key),
            stop=unit.stop,
        )

    def parser_for(self, key: str) -> IncrementalParser:
        parser = self.parsers.pop(key, None) or IncrementalParser()
        self.parsers[key] = parser
        while len(self.parsers) > KEPT_PARSES:
            self.parsers.popitem(last=False)
        return parser

    def open_unit(self, uri: str, notebook: bool) -> Unit:
        key = _norm(uri)
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
            self.cell_owner.pop(_norm(uri), None)
            self.publish(uri, [], None)
        unit.diagnostics = {}

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
        spent = (time.perf_counter() - start) * 1000
        self.log("debug", f"cycle collector: {found} objects freed in {spent:.0f} ms")

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
                uris = [c.uri for c in job.cells] if job.cells is not None else [job.uri]
                self.apply(unit, Analysis(job.version, False, {u: [] for u in uris}))
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
        unit.diagnostics = new
        unit.analysed = analysis.version
        if unit.notebook:
            for uri in new:
                self.cell_owner[_norm(uri)] = unit.key
        for uri in gone:
            self.publish(uri, [], None)
        for uri, diagnostics in new.items():
            self.publish(uri, diagnostics, self.doc_version(uri))
        unit.done.set()

    def doc_version(self, uri: str) -> int | None:
        doc = self.server.workspace.text_documents.get(_norm(uri))
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

    # -- edits ----------------------------------------------------------------------------------
    def workspace_edit(self, edits: dict[str, list[types.TextEdit]]) -> types.WorkspaceEdit:
        if self.document_changes:
            return types.WorkspaceEdit(
                document_changes=[
                    types.TextDocumentEdit(
                        types.OptionalVersionedTextDocumentIdentifier(
                            uri=uri, version=self.doc_version(uri)
                        ),
                        list(items),
                    )
                    for uri, items in edits.items()
                ]
            )
        return types.WorkspaceEdit(changes={uri: list(items) for uri, items in edits.items()})

    async def fix_all(
        self, unit: Unit, *, unsafe: bool | None, codes: frozenset[str] | None
    ) -> tuple[dict[str, list[types.TextEdit]], dict[str, int]]:
        job = self.job(unit)
        if job is None:
            return {}, {}
        loop = asyncio.get_running_loop()
        edits, applied, error = await loop.run_in_executor(
            self.executor,
            functools.partial(compute_fix_all, job, self.resolver, unsafe=unsafe, codes=codes),
        )
        if error:
            self.log("warning", error)
        if job.version != self.current_version(unit):
            return {}, {}
        return edits, applied

    def fresh_data(self, uri: str, diagnostic: types.Diagnostic) -> dict[str, Any] | None:
        """The current ``data`` of a diagnostic the client sent back (None: out of date)."""
        unit = self.unit_for(uri)
        if unit is not None:
            for d in unit.items(uri):
                if d.code == diagnostic.code and d.range == diagnostic.range:
                    return d.data if isinstance(d.data, dict) else None
        data = diagnostic.data
        if isinstance(data, dict) and data.get("version") in (None, self.doc_version(uri)):
            return data
        return None

    def unit_diagnostics(self, unit: Unit) -> list[tuple[str, types.Diagnostic]]:
        return [(uri, d) for uri, items in unit.diagnostics.items() for d in items]

    def docs_base(self, uri: str) -> str | None:
        path = self.path_of(uri)
        settings, _ = self.resolver.resolve(path, self.client_settings(path))
        return settings.docs_base_url


# ---- the server -----------------------------------------------------------------------------
def create_server() -> TorchDoctorServer:
    server = TorchDoctorServer()
    doctor = server.doctor
    guard = doctor.guard

    @server.feature(types.INITIALIZE)
    @guard()
    def initialize(params: types.InitializeParams) -> None:
        doctor.locale = params.locale
        doctor.set_settings(None, params.initialization_options, "initializationOptions")
        doctor.live.trusted = workspace_trusted(params.initialization_options)
        caps = params.capabilities
        text = caps.text_document
        doctor.pull = bool(text and text.diagnostic)
        action = text.code_action if text else None
        props = action.resolve_support.properties if action and action.resolve_support else []
        doctor.resolve_support = "edit" in props
        ws = caps.workspace
        doctor.document_changes = bool(
            ws and ws.workspace_edit and ws.workspace_edit.document_changes
        )
        doctor.refresh_support = bool(ws and ws.diagnostics and ws.diagnostics.refresh_support)
        if not (ws and ws.configuration):
            doctor.config_ready.set()

    @server.feature(types.INITIALIZED)
    @guard()
    async def initialized(params: types.InitializedParams) -> None:
        caps = server.client_capabilities
        ws = caps.workspace
        try:
            # Settings first: documents opened meanwhile wait for them (no flash of findings
            # under the wrong settings).
            if await fetch_configuration():
                doctor.reanalyse_all()
        finally:
            doctor.config_ready.set()
        registrations = []
        if ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration:
            registrations.append(
                types.Registration(
                    id="torchdoctor-pyproject",
                    method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                    register_options=types.DidChangeWatchedFilesRegistrationOptions(
                        watchers=[types.FileSystemWatcher(glob_pattern="**/pyproject.toml")]
                    ),
                )
            )
        if ws and ws.did_change_configuration and ws.did_change_configuration.dynamic_registration:
            registrations.append(
                types.Registration(
                    id="torchdoctor-configuration",
                    method=types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                    register_options=types.DidChangeConfigurationRegistrationOptions(
                        section="torchdoctor"
                    ),
                )
            )
        if registrations:
            try:
                await asyncio.wait_for(
                    server.client_register_capability_async(
                        types.RegistrationParams(registrations=registrations)
                    ),
                    WAIT_TIMEOUT_S,
                )
            except Exception as exc:
                doctor.log("warning", f"could not register file watchers: {exc!r}")
        doctor.log("info", f"torchdoctor {__version__} ready")

    async def fetch_configuration() -> bool:
        """Ask the client for ``torchdoctor`` settings (global and per folder); True on change."""
        ws = server.client_capabilities.workspace
        if not (ws and ws.configuration):
            return False
        folders = list(server.workspace.folders.values())
        items = [types.ConfigurationItem(section="torchdoctor")]
        items += [types.ConfigurationItem(scope_uri=f.uri, section="torchdoctor") for f in folders]
        try:
            values = await asyncio.wait_for(
                server.workspace_configuration_async(types.ConfigurationParams(items=items)),
                WAIT_TIMEOUT_S,
            )
        except Exception as exc:
            doctor.log("warning", f"could not read the editor settings: {exc!r}")
            return False

        def state() -> tuple[ClientSettings, dict[str, ClientSettings]]:
            # A folder with nothing set is the same as no folder entry at all.
            return doctor.global_settings, {
                k: v for k, v in doctor.folder_settings.items() if v.given
            }

        before = state()
        doctor.set_settings("", values[0] if values else None, "workspace/configuration")
        doctor.folder_settings = {}
        for folder, value in zip(folders, list(values)[1:], strict=False):
            path = to_fs_path(folder.uri) or folder.uri
            doctor.set_settings(path, value, f"workspace/configuration ({folder.name})")
        return state() != before

    # -- text documents -------------------------------------------------------------------------
    def is_python(doc: types.TextDocumentItem) -> bool:
        return doc.language_id in PYTHON_LANGUAGES or doc.uri.endswith((".py", ".pyi"))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    @guard()
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        doc = params.text_document
        if _norm(doc.uri) in doctor.cell_owner or not is_python(doc):
            return
        doctor.schedule(doctor.open_unit(doc.uri, notebook=False), 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    @guard()
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        unit = doctor.unit_for(uri)
        if unit is None:
            return
        target = unit.spelled(uri)
        if target is not None:
            unit.diagnostics[target] = convert.shift_diagnostics(
                unit.diagnostics[target],
                target,
                params.content_changes,
                params.text_document.version,
                doctor.encoding,
            )
        doctor.schedule(unit)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    @guard()
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        unit = doctor.units.get(_norm(uri))
        if unit is not None and not unit.notebook:
            doctor.close_unit(unit)
        elif unit is None and _norm(uri) not in doctor.cell_owner:
            doctor.publish(uri, [], None)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    @guard()
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        if params.text_document.uri.endswith("pyproject.toml"):
            reload_configuration()

    # -- notebooks ------------------------------------------------------------------------------
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    @guard()
    def notebook_did_open(params: types.DidOpenNotebookDocumentParams) -> None:
        unit = doctor.open_unit(params.notebook_document.uri, notebook=True)
        for cell in params.notebook_document.cells:
            doctor.cell_owner[_norm(cell.document)] = unit.key
        doctor.schedule(unit, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    @guard()
    def notebook_did_change(params: types.DidChangeNotebookDocumentParams) -> None:
        unit = doctor.units.get(_norm(params.notebook_document.uri))
        if unit is None:
            return
        cells = params.change.cells
        if cells is not None:
            structure = cells.structure
            if structure is not None:
                for item in structure.did_open or []:
                    doctor.cell_owner[_norm(item.uri)] = unit.key
                for cell in structure.array.cells or []:
                    doctor.cell_owner[_norm(cell.document)] = unit.key
                for closed in structure.did_close or []:
                    spelled = unit.spelled(closed.uri) or closed.uri
                    unit.diagnostics.pop(spelled, None)
                    doctor.cell_owner.pop(_norm(closed.uri), None)
                    doctor.publish(spelled, [], None)
            for content in cells.text_content or []:
                target = unit.spelled(content.document.uri)
                if target is not None:
                    unit.diagnostics[target] = convert.shift_diagnostics(
                        unit.diagnostics[target],
                        target,
                        content.changes,
                        content.document.version,
                        doctor.encoding,
                    )
        doctor.schedule(unit)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    @guard()
    def notebook_did_close(params: types.DidCloseNotebookDocumentParams) -> None:
        unit = doctor.units.get(_norm(params.notebook_document.uri))
        if unit is not None:
            for cell in params.cell_text_documents:
                unit.diagnostics.setdefault(cell.uri, [])
            doctor.close_unit(unit)

    # -- pull diagnostics -----------------------------------------------------------------------
    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(
            identifier="torchdoctor", inter_file_dependencies=False, workspace_diagnostics=False
        ),
    )
    @guard(types.RelatedFullDocumentDiagnosticReport(items=[]))
    async def diagnostic(
        params: types.DocumentDiagnosticParams,
    ) -> types.DocumentDiagnosticReport:
        uri = params.text_document.uri
        unit = doctor.unit_for(uri)
        if unit is None:
            return types.RelatedFullDocumentDiagnosticReport(items=[], result_id="none")
        await doctor.wait_current(unit)
        items = unit.items(uri)
        rid = convert.result_id(items)
        if params.previous_result_id == rid:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=rid)
        return types.RelatedFullDocumentDiagnosticReport(items=items, result_id=rid)

    # -- configuration --------------------------------------------------------------------------
    def reload_configuration() -> None:
        doctor.resolver.reset()
        doctor.reported.clear()
        doctor.log("info", "configuration reloaded")
        doctor.reanalyse_all()

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    @guard()
    async def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        if not await fetch_configuration():
            settings = params.settings
            if isinstance(settings, dict) and isinstance(settings.get("torchdoctor"), dict):
                doctor.set_settings("", settings["torchdoctor"], "didChangeConfiguration")
        reload_configuration()

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    @guard()
    async def did_change_workspace_folders(
        params: types.DidChangeWorkspaceFoldersParams,
    ) -> None:
        await fetch_configuration()
        reload_configuration()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    @guard()
    def did_change_watched_files(params: types.DidChangeWatchedFilesParams) -> None:
        if any(change.uri.endswith("pyproject.toml") for change in params.changes):
            reload_configuration()

    # -- code actions ---------------------------------------------------------------------------
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.SourceFixAll,
                FIX_ALL_KIND,
                NOTEBOOK_FIX_ALL_KIND,
            ],
            resolve_provider=True,
        ),
    )
    @guard([])
    async def code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        unit = doctor.unit_for(uri)
        if unit is None:
            return []
        path = doctor.path_of(unit.uri)
        client = doctor.client_settings(path)
        if not client.enable:
            return []
        only = params.context.only
        zh = is_chinese(doctor.locale)
        actions: list[types.CodeAction] = []
        everything = doctor.unit_diagnostics(unit)
        if _kind_matches(types.CodeActionKind.QuickFix, only):
            seen: set[tuple[Any, ...]] = set()
            for diagnostic in params.context.diagnostics:
                if diagnostic.source != convert.SOURCE or not isinstance(diagnostic.code, str):
                    continue
                code = diagnostic.code
                data = doctor.fresh_data(uri, diagnostic)
                fixes = (data.get("fixes") or []) if data is not None else []
                for i, fix in enumerate(fixes):
                    actions.append(
                        types.CodeAction(
                            title=str(fix.get("title")),
                            kind=types.CodeActionKind.QuickFix,
                            diagnostics=[diagnostic],
                            is_preferred=i == 0 and fix.get("applicability") == "safe",
                            edit=doctor.workspace_edit(convert.fix_edits(fix, uri)),
                        )
                    )
                fixable = [
                    d for _u, d in everything if d.code == code and convert.is_bulk_fixable(d, True)
                ]
                if len(fixable) >= 2 and ("rule", code) not in seen:
                    seen.add(("rule", code))
                    unsafe = not all(convert.is_bulk_fixable(d, False) for d in fixable)
                    title = f"修复此文件中所有 {code}" if zh else f"Fix all {code} in this file"
                    if unsafe:
                        title += "（不安全）" if zh else " (unsafe)"
                    actions.append(
                        types.CodeAction(
                            title=title,
                            kind=types.CodeActionKind.QuickFix,
                            diagnostics=[d for _u, d in everything if d.code == code],
                            data={"action": "fixRule", "uri": uri, "code": code, "unsafe": unsafe},
                        )
                    )
                if data is not None and ("noqa", code, data.get("noqaLine")) not in seen:
                    seen.add(("noqa", code, data.get("noqaLine")))
                    edit = noqa_action_edit(uri, code, data)
                    if edit is not None:
                        actions.append(
                            types.CodeAction(
                                title=f"在此行禁用 {code}"
                                if zh
                                else f"Disable {code} for this line",
                                kind=types.CodeActionKind.QuickFix,
                                diagnostics=[diagnostic],
                                edit=doctor.workspace_edit({uri: [edit]}),
                            )
                        )
                if ("guide", code) not in seen:
                    seen.add(("guide", code))
                    actions.append(
                        types.CodeAction(
                            title=f"查看 {code} 的指南" if zh else f"Open the guide for {code}",
                            kind=types.CodeActionKind.QuickFix,
                            diagnostics=[diagnostic],
                            command=types.Command(
                                title=f"Open the guide for {code}",
                                command=CMD_OPEN_GUIDE,
                                arguments=[code, uri],
                            ),
                        )
                    )
        unsafe = bool(doctor.resolver.resolve(path, client)[0].unsafe_fixes)
        any_fixable = any(convert.is_bulk_fixable(d, unsafe) for _u, d in everything)
        kinds = [FIX_ALL_KIND] + ([NOTEBOOK_FIX_ALL_KIND] if unit.notebook else [])
        for kind in kinds:
            explicit = only is not None and any(
                kind == k or kind.startswith(k + ".") for k in only if k
            )
            if explicit or (only is None and any_fixable and kind == FIX_ALL_KIND):
                actions.append(
                    types.CodeAction(
                        title="torchdoctor: 修复所有可自动修复的问题"
                        if zh
                        else "torchdoctor: Fix all auto-fixable problems",
                        kind=kind,
                        data={"action": "fixAll", "uri": uri},
                    )
                )
        if not doctor.resolve_support:
            actions = [await resolve(a) for a in actions]
        return actions

    def noqa_action_edit(uri: str, code: str, data: dict[str, Any]) -> types.TextEdit | None:
        doc = server.workspace.text_documents.get(_norm(uri))
        if doc is None:
            return None
        line_no = int(data.get("noqaLine", 0))
        lines = doc.lines
        line = lines[line_no] if 0 <= line_no < len(lines) else ""
        return convert.noqa_edit(line, line_no, code, doctor.encoding)

    async def resolve(action: types.CodeAction) -> types.CodeAction:
        data = action.data
        if action.edit is not None or not isinstance(data, dict) or "action" not in data:
            return action
        unit = doctor.unit_for(str(data.get("uri", "")))
        if unit is None:
            return action
        if data["action"] == "fixRule":
            edits, _applied = await doctor.fix_all(
                unit, unsafe=bool(data.get("unsafe")), codes=frozenset({str(data.get("code"))})
            )
        else:
            edits, _applied = await doctor.fix_all(unit, unsafe=None, codes=None)
        return attrs.evolve(action, edit=doctor.workspace_edit(edits))

    @server.feature(types.CODE_ACTION_RESOLVE)
    @guard()
    async def code_action_resolve(params: types.CodeAction) -> types.CodeAction:
        return await resolve(params)

    # -- hover ----------------------------------------------------------------------------------
    @server.feature(types.SHUTDOWN)
    @guard()
    async def shutdown(params: None) -> None:
        for unit in list(doctor.units.values()):
            doctor.stop_work(unit)
        await doctor.live.shutdown()

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @guard()
    async def hover(params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        unit = doctor.unit_for(uri)
        if unit is None:
            return None
        pos = params.position
        docs_base = doctor.docs_base(uri)
        parts = []
        hit: types.Range | None = None
        for d in unit.items(uri):
            if not convert.contains(d.range, pos) or not isinstance(d.code, str):
                continue
            fixes = convert.diagnostic_fixes(d)
            text = convert.rule_hover(
                d.code,
                doctor.locale,
                docs_base,
                message=d.message,
                fix=str(fixes[0].get("title")) if fixes else None,
            )
            if text:
                parts.append(text)
                hit = hit or d.range
        if not parts:
            doc = server.workspace.text_documents.get(_norm(uri))
            lines = doc.lines if doc else []
            if pos.line < len(lines):
                line = lines[pos.line]
                col = convert.from_client_col(line, pos.character, doctor.encoding)
                found = convert.noqa_code_at(line, col)
                if found:
                    code, start, end = found
                    text = convert.rule_hover(code, doctor.locale, docs_base)
                    if text:
                        parts.append(text)
                        hit = types.Range(
                            types.Position(
                                pos.line, convert.to_client_col(line, start, doctor.encoding)
                            ),
                            types.Position(
                                pos.line, convert.to_client_col(line, end, doctor.encoding)
                            ),
                        )
        live = await live_hover(unit, uri, pos)
        if live:
            parts.append(live)
        if not parts:
            return None
        return types.Hover(
            contents=types.MarkupContent(types.MarkupKind.Markdown, "\n\n---\n\n".join(parts)),
            range=hit,
        )

    async def live_hover(unit: Unit, uri: str, pos: types.Position) -> str | None:
        """Facts about the live tensor or module under the cursor (notebooks with a kernel)."""
        doc = server.workspace.text_documents.get(_norm(uri))
        if doc is None or pos.line >= len(doc.lines):
            return None
        line = doc.lines[pos.line].rstrip("\r\n")
        col = convert.from_client_col(line, pos.character, doctor.encoding)
        client = doctor.client_settings(doctor.path_of(unit.uri))
        return await doctor.live.hover(unit.key, unit.in_kernel, client, line, col, doctor.locale)

    # -- commands -------------------------------------------------------------------------------
    @server.command(CMD_APPLY_FIXES)
    @guard({"applied": False})
    async def apply_fixes(*args: Any) -> dict[str, Any]:
        """Arguments: a document URI, or ``{"uri": ..., "unsafe": bool, "code": "TDR602"}``."""
        options: dict[str, Any] = {}
        if args and isinstance(args[0], dict):
            options = args[0]
        elif args:
            options = {"uri": args[0]}
        uri = str(options.get("uri", ""))
        unit = doctor.unit_for(uri)
        if unit is None:
            return {"applied": False, "reason": f"not an open document: {uri}"}
        code = options.get("code")
        unsafe = options.get("unsafe")
        edits, applied = await doctor.fix_all(
            unit,
            unsafe=bool(unsafe) if unsafe is not None else None,
            codes=frozenset({str(code).upper()}) if code else None,
        )
        if not edits:
            return {"applied": True, "fixed": {}}
        result = await server.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(
                edit=doctor.workspace_edit(edits), label="torchdoctor: fix all"
            )
        )
        return {"applied": bool(result.applied), "fixed": applied if result.applied else {}}

    @server.command(CMD_DEBUG_INFO)
    @guard({})
    def debug_info(*args: Any) -> dict[str, Any]:
        uri = str(args[0]) if args and isinstance(args[0], str) else None
        info: dict[str, Any] = {
            "torchdoctor": __version__,
            "python": platform.python_version(),
            "executable": sys.executable,
            "pygls": _dist_version("pygls"),
            "lsprotocol": _dist_version("lsprotocol"),
            "torch": _dist_version("torch"),
            "torchImported": "torch" in sys.modules,  # the server never imports it
            "locale": doctor.locale,
            "positionEncoding": doctor.encoding,
            "diagnostics": "pull" if doctor.pull else "push",
            "openDocuments": len(doctor.units),
            "clientSettings": doctor.client_settings(None).as_dict(),
            "kernelBridge": doctor.live.info(),
        }
        if uri:
            path = doctor.path_of(uri)
            settings, problems = doctor.resolver.resolve(path, doctor.client_settings(path))
            info["document"] = {
                "uri": uri,
                "path": path,
                "root": str(settings.root) if settings.root else None,
                "enabled": sorted(enabled_codes(settings, path)),
                "unsafeFixes": settings.unsafe_fixes,
                "problems": problems,
            }
        doctor.log("info", f"debug info: {info}")
        return info

    @server.command(CMD_OPEN_GUIDE)
    @guard({"shown": False})
    async def open_guide(*args: Any) -> dict[str, Any]:
        code = str(args[0]).upper() if args else ""
        uri = str(args[1]) if len(args) > 1 else ""
        url = rule_url(code, doctor.docs_base(uri) if uri else None, doctor.locale)
        result = await server.window_show_document_async(
            types.ShowDocumentParams(uri=url, external=True)
        )
        return {"shown": bool(result and result.success), "uri": url}

    return server


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


# ---- entry point ----------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchdoctor server", description="Run the torchdoctor language server."
    )
    parser.add_argument("--stdio", action="store_true", help="Talk over stdin/stdout (default).")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="Listen on a TCP socket instead.")
    parser.add_argument(
        "--log-level",
        choices=("error", "warning", "info", "debug"),
        default=None,
        help="What the server logs to stderr and to the editor (default: info).",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = args.log_level or "info"
    logging.basicConfig(
        stream=sys.stderr, level=level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("pygls").setLevel(logging.WARNING)
    server = create_server()
    if args.log_level:
        server.doctor.base_settings = ClientSettings(
            log_level=args.log_level, given=frozenset({"log_level"})
        )
        server.doctor.log_level = args.log_level
    from ..linter.registry import all_rules

    try:
        all_rules()  # import every rule once, before the first keystroke
    except Exception as exc:  # a broken rule module: each analysis reports it in the log
        logger.error("cannot load the rules: %r", exc)
    gc.freeze()  # keep the long-lived objects out of every collection
    gc.disable()  # collections run when the server is idle (Doctor.collect_when_idle)
    if args.tcp:
        host, _, port = args.tcp.rpartition(":")
        try:
            server.start_tcp(host or "127.0.0.1", int(port))
        except ValueError:
            print(f"torchdoctor server: --tcp expects HOST:PORT, got {args.tcp!r}", file=sys.stderr)
            return 2
        return 0
    server.start_io()
    return 0

"""Diagnostics: the analysis of one document or notebook, and the pull-diagnostics handler.

A :class:`Job` is a snapshot of a document (or of a notebook's code cells) taken on the event
loop; :func:`analyse` (its diagnostics), :func:`compute_fixes` (the fixes of some of them) and
:func:`compute_fix_all` (its bulk fixes) run in the server's worker threads and touch no server
state. Scheduling analyses and publishing their diagnostics is the server state's part
(``state.Doctor``).

A text document is analysed without building fixes (the rules build them on request): its
diagnostics' ``data`` says ``fixesOnRequest``, and a code action or a hover that needs the fixes
of a rule gets them from :func:`compute_fixes` on the version the diagnostics were computed on.
Notebooks are analysed with their fixes in ``data`` (the JupyterLab extension reads them there).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from ..core.config import ConfigError, Settings
from ..core.incremental import IncrementalParser
from ..core.model import Finding
from ..linter.configuration import ConfigFinder
from ..linter.projects import Projects
from ..linter.runner import Superseded, broken_cell, check_text, fix_any
from . import convert
from .kernels import LiveInput
from .measured import Reports, cell_measurements, merge
from .notebook_sync import CellDoc, NotebookLocator, check_cells, fix_cells
from .settings import ClientSettings

if TYPE_CHECKING:
    from .state import Doctor

OPTIONS = types.DiagnosticOptions(
    identifier="torchdoctor", inter_file_dependencies=False, workspace_diagnostics=False
)


@dataclass
class Job:
    """A snapshot of one document (or notebook) to analyse."""

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
    projects: Projects | None = None  # resolves names imported from the project's other files
    # Build a text document's fixes with its diagnostics, in their ``data``, for a client that
    # reads them there (torchdoctor's JupyterLab extension); else they are built on request.
    fixes_in_data: bool = False
    # What ``torchdoctor run`` measured (its reports): shown with the findings of the document.
    measured: Reports | None = None

    @property
    def uris(self) -> list[str]:
        """The documents the job's diagnostics go to: its cells, or the document itself."""
        return [c.uri for c in self.cells] if self.cells is not None else [self.uri]


@dataclass
class Analysis:
    version: Any
    broken: bool  # the code does not parse: keep the last good findings
    diagnostics: dict[str, list[types.Diagnostic]]
    problems: list[str] = field(default_factory=list)  # configuration problems
    errors: list[str] = field(default_factory=list)  # rule errors (not syntax errors)
    live_request: Any = None  # what to probe the kernel for (a ProbeRequest), when it has one
    fixes_on_request: bool = False  # fixes left unbuilt: ``compute_fixes`` builds them


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


def _encodable(job: Job) -> Job:
    """The job with the lone surrogates of its text replaced (``convert.encodable``)."""
    cells = job.cells
    if cells is not None:
        cells = [dataclasses.replace(c, text=convert.encodable(c.text)) for c in cells]
    return dataclasses.replace(job, text=convert.encodable(job.text), cells=cells)


def analyse(job: Job, resolver: SettingsResolver) -> Analysis | None:
    """The diagnostics of one job; None when a newer version stopped it."""
    try:
        return _analyse(_encodable(job), resolver)
    except Superseded:
        return None


def _analyse(job: Job, resolver: SettingsResolver) -> Analysis:
    settings, problems = resolver.resolve(job.path, job.client)
    stop = job.stop.is_set if job.stop is not None else None
    out: dict[str, list[types.Diagnostic]] = {}
    if settings.is_excluded(Path(job.path)):
        # `exclude` in [tool.torchdoctor]: the file is not checked, as on the command line.
        return Analysis(job.version, False, {u: [] for u in job.uris}, problems)
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
            projects=job.projects,
        )
        findings: list[Finding] = result.findings
        live_request = result.probe if notebook is not None else None
        versions = {c.uri: c.version for c in job.cells}
        locator: convert.Locator | None = (
            NotebookLocator(notebook, job.cells, job.encoding) if notebook else None
        )
    else:
        out[job.uri] = []
        result = check_text(
            job.text,
            job.path,
            settings,
            parser=job.parser,
            stop=stop,
            projects=job.projects,
            fixes=job.fixes_in_data,
        )
        findings, live_request = result.findings, None
        versions = {job.uri: job.version}
        locator = convert.TextLocator(job.uri, job.text, job.encoding)
    # The code does not parse: keep the last good findings. A notebook cell that does not parse
    # is not that: the other cells were checked.
    broken = any(e.unparsable and not broken_cell(e) for e in result.errors)
    errors = [e.format() for e in result.errors if not e.unparsable]
    if locator is not None:
        for finding in findings:
            uri, _ = locator.locate(finding.range)
            _uri, diagnostic = convert.to_diagnostic(
                finding,
                locator,
                version=versions.get(uri),
                locale=job.locale,
                docs_base=settings.docs_base_url,
            )
            out.setdefault(uri, []).append(diagnostic)
    if job.measured is not None:
        _add_measured(job, job.measured, out, settings.docs_base_url)
    deferred = any(f.fixes_deferred for f in findings)
    return Analysis(job.version, broken, out, problems, errors, live_request, deferred)


def _add_measured(
    job: Job, reports: Reports, out: dict[str, list[types.Diagnostic]], docs_base: str | None
) -> None:
    """What ``torchdoctor run`` measured in the job's document (or in its notebook's cells,
    matched by their code), merged into its diagnostics."""
    found = reports.for_path(job.path)
    if not found:
        return
    if job.cells is None:
        lines = convert.split_lines(job.text)
        out[job.uri] = merge(
            out[job.uri], found, lines, job.encoding, job.locale, job.version, docs_base
        )
        return
    for cell in job.cells:
        mine = cell_measurements(found, cell.text)
        if mine:
            lines = convert.split_lines(cell.text)
            out[cell.uri] = merge(
                out.get(cell.uri, []),
                mine,
                lines,
                job.encoding,
                job.locale,
                cell.version,
                docs_base,
            )


def compute_fixes(
    job: Job, resolver: SettingsResolver, codes: frozenset[str]
) -> list[types.Diagnostic]:
    """The diagnostics of the rules ``codes`` on the text of a job (a text document), with
    their fixes: the rules run again on the same text, alone and building their fixes (the
    parse and the facts of the text are reused when ``job.parser`` holds them)."""
    job = _encodable(job)
    settings, _problems = resolver.resolve(job.path, job.client)
    result = check_text(
        job.text, job.path, settings, codes=codes, parser=job.parser, projects=job.projects
    )
    locator = convert.TextLocator(job.uri, job.text, job.encoding)
    return [
        convert.to_diagnostic(
            finding,
            locator,
            version=job.version,
            locale=job.locale,
            docs_base=settings.docs_base_url,
        )[1]
        for finding in result.findings
    ]


def compute_fix_all(
    job: Job, resolver: SettingsResolver, *, unsafe: bool | None, codes: frozenset[str] | None
) -> tuple[dict[str, list[types.TextEdit]], dict[str, int], str | None]:
    """Bulk fixes through the engine's fix loop, as text edits per document."""
    job = _encodable(job)
    settings, _problems = resolver.resolve(job.path, job.client)
    if settings.is_excluded(Path(job.path)):
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


# ---- pull diagnostics ---------------------------------------------------------------------
async def diagnostic(
    doctor: Doctor, params: types.DocumentDiagnosticParams
) -> types.DocumentDiagnosticReport:
    """``textDocument/diagnostic``: the document's diagnostics once they match its version."""
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

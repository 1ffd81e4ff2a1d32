"""What ``torchdoctor run`` measured: its reports, read for the documents the editor shows.

``torchdoctor run script.py`` (and ``%%torchdoctor run`` in a notebook) writes a report to
``<project root>/.torchdoctor_cache/runs/<key>.json`` (version 1 of the format; see
``docs/lsp.md``). This module only *reads* those files: for a document, the reports in the
``.torchdoctor_cache/runs`` folders of the folders above it (and of the workspace folders) are
looked at; a file that cannot be read, is not JSON or has another version is skipped. Of the
reports of one script, the newest wins. Each file is read again only when its modification time
or size changed, so looking costs a few ``stat`` calls: the server looks each time it computes a
document's diagnostics, and when the editor tells it a report changed.

Nothing here imports torch or the rules; the lookups are thread-safe (analyses run in worker
threads).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import attrs
from lsprotocol import types as lsp

from ..core.model import is_chinese
from .convert import doc_link, to_client_col

CACHE_DIR = ".torchdoctor_cache"
RUNS_DIR = "runs"
VERSION = 1
SOURCE = "torchdoctor run"
WATCH_GLOB = f"**/{CACHE_DIR}/{RUNS_DIR}/*.json"


def is_report(uri: str) -> bool:
    """Whether a file URI (or path) names a report of ``torchdoctor run``."""
    parts = uri.replace("\\", "/").rsplit("/", 3)
    return len(parts) == 4 and parts[1:3] == [CACHE_DIR, RUNS_DIR] and parts[3].endswith(".json")


def norm_path(path: str) -> str:
    """A path as findings are indexed: absolute, symbolic links resolved, case folded where
    the file system folds it."""
    return os.path.normcase(os.path.realpath(os.path.abspath(path)))


@dataclass(frozen=True)
class Measurement:
    """One measured finding of a report."""

    code: str
    path: str  # normalized (``norm_path``)
    row: int  # 1-based
    col: int  # 0-based code points (the report's column is 1-based)
    end_row: int | None
    end_col: int | None  # 0-based, exclusive
    message: str
    message_zh: str
    summary: str
    summary_zh: str
    values: dict[str, Any]  # the report's "measured" object, as it is
    script: str
    started: str
    report: str  # the report file
    cell: str = ""  # a notebook's measurement: the key of the cell's code (rows are the cell's)

    def text(self, locale: str | None) -> str:
        """The finding's sentence in the locale (English when there is no Chinese one)."""
        if is_chinese(locale) and self.message_zh:
            return self.message_zh
        return self.message or self.summary

    def short(self, locale: str | None) -> str:
        """The short summary in the locale, for hovers and the JupyterLab panel."""
        if is_chinese(locale) and self.summary_zh:
            return self.summary_zh
        return self.summary or self.message

    def data(self, locale: str | None) -> dict[str, Any]:
        """What ``Diagnostic.data["measured"]`` holds."""
        return {
            "summary": self.short(locale),
            "values": self.values,
            "script": self.script,
            "started": self.started,
            "report": self.report,
        }


def hover_line(measured: dict[str, Any], locale: str | None) -> str:
    """The hover's line for ``Diagnostic.data["measured"]``."""
    summary = str(measured.get("summary", ""))
    script = os.path.basename(str(measured.get("script") or ""))
    started = str(measured.get("started") or "")
    if is_chinese(locale):
        where = f"（`torchdoctor run {script}`，{started}）" if script else ""
        return f"实测：{summary}{where}"
    where = f" (`torchdoctor run {script}`, {started})" if script else ""
    return f"measured: {summary}{where}"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_report(data: Any, report: str) -> tuple[str, str, list[Measurement]] | None:
    """(script, started, findings) of a report's JSON; None when it is not a version 1 report.
    A finding without a code, a path or a row is left out."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return None
    script = _str(data.get("script"))
    started = _str(data.get("started"))
    findings = data.get("findings")
    if not script or not isinstance(findings, list):
        return None
    out = []
    for item in findings:
        if not isinstance(item, dict):
            continue
        code, path, row = _str(item.get("code")), _str(item.get("path")), _int(item.get("row"))
        if not code or not path or row is None or row < 1:
            continue
        col = _int(item.get("col"))
        end_col = _int(item.get("end_col"))
        values = item.get("measured")
        out.append(
            Measurement(
                code=code,
                path=norm_path(path),
                row=row,
                col=max((col or 1) - 1, 0),
                end_row=_int(item.get("end_row")),
                end_col=max(end_col - 1, 0) if end_col is not None else None,
                message=_str(item.get("message")),
                message_zh=_str(item.get("message_zh")),
                summary=_str(item.get("summary")),
                summary_zh=_str(item.get("summary_zh")),
                values=values if isinstance(values, dict) else {},
                script=script,
                started=started,
                report=report,
                cell=_str(item.get("cell")),
            )
        )
    return script, started, out


@dataclass
class _File:
    stamp: tuple[int, int]  # (mtime_ns, size)
    script: str = ""
    started: str = ""
    findings: list[Measurement] = field(default_factory=list)
    ok: bool = False


class Reports:
    """The reports of the ``.torchdoctor_cache/runs`` folders seen so far, read again when
    their files change."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, _File] = {}  # report file -> what it held
        self.roots: tuple[str, ...] = ()  # the workspace folders

    def forget(self) -> None:
        """Read every report again at the next lookup."""
        with self._lock:
            self._files.clear()

    def folders_for(self, path: str) -> list[str]:
        """The ``runs`` folders that may hold reports about ``path``: those of the folders
        above it, and of the workspace folders."""
        folders = []
        here = os.path.dirname(os.path.abspath(path))
        while True:
            folders.append(os.path.join(here, CACHE_DIR, RUNS_DIR))
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
        for root in self.roots:
            folder = os.path.join(root, CACHE_DIR, RUNS_DIR)
            if folder not in folders:
                folders.append(folder)
        return folders

    def for_path(self, path: str) -> list[Measurement]:
        """The measured findings about the file ``path``, from the newest report of each script
        (sorted by position); each report file is read again when it changed."""
        if not path or "://" in path:
            return []
        target = norm_path(path)
        newest: dict[str, _File] = {}
        with self._lock:
            for report in self._scan(self.folders_for(path)):
                if not report.ok:
                    continue
                key = norm_path(report.script)
                kept = newest.get(key)
                if kept is None or (report.started, report.stamp) > (kept.started, kept.stamp):
                    newest[key] = report
        seen: dict[tuple[str, int, int], Measurement] = {}
        for report in sorted(newest.values(), key=lambda r: (r.started, r.stamp)):
            for m in report.findings:
                if m.path == target:
                    seen[(m.code, m.row, m.col)] = m  # a newer script's measurement wins
        return sorted(seen.values(), key=lambda m: (m.row, m.col, m.code))

    def _scan(self, folders: Iterable[str]) -> list[_File]:
        """The reports in ``folders``, read again where their stamp changed (lock held)."""
        found = []
        for folder in folders:
            try:
                entries = list(os.scandir(folder))
            except OSError:
                for name in [n for n in self._files if os.path.dirname(n) == folder]:
                    del self._files[name]
                continue
            present = set()
            for entry in entries:
                if not entry.name.endswith(".json"):
                    continue
                try:
                    st = entry.stat()
                except OSError:
                    continue
                name = entry.path
                present.add(name)
                stamp = (st.st_mtime_ns, st.st_size)
                cached = self._files.get(name)
                if cached is None or cached.stamp != stamp:
                    cached = self._read(name, stamp)
                    self._files[name] = cached
                found.append(cached)
            for name in [n for n in self._files if os.path.dirname(n) == folder]:
                if name not in present:
                    del self._files[name]
        return found

    @staticmethod
    def _read(name: str, stamp: tuple[int, int]) -> _File:
        try:
            with open(name, encoding="utf-8") as f:
                parsed = parse_report(json.load(f), name)
        except (OSError, ValueError, RecursionError):
            return _File(stamp)
        if parsed is None:
            return _File(stamp)
        script, started, findings = parsed
        return _File(stamp, script, started, findings, ok=True)


def cell_key(code: str) -> str:
    """The key of a cell's code, as ``%%torchdoctor run`` writes it in its findings' ``"cell"``."""
    text = code.replace("\r\n", "\n").replace("\r", "\n").strip()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cell_measurements(measurements: Iterable[Measurement], text: str) -> list[Measurement]:
    """The measurements of a notebook that were made running the cell ``text`` (as it is, or
    the body of its ``%%torchdoctor run``), with their rows moved to the cell's rows."""
    keys = {cell_key(text): 0}
    first, _, body = text.partition("\n")
    if first.lstrip().startswith("%%torchdoctor"):
        keys[cell_key(body)] = 1
    out = []
    for m in measurements:
        shift = keys.get(m.cell) if m.cell else None
        if shift is not None:
            end_row = m.end_row + shift if m.end_row is not None else None
            out.append(dataclasses.replace(m, row=m.row + shift, end_row=end_row))
    return out


# ---- diagnostics ------------------------------------------------------------------------------
def merge(
    diagnostics: list[lsp.Diagnostic],
    measurements: Iterable[Measurement],
    lines: list[str],
    encoding: str,
    locale: str | None,
    version: int | None,
    docs_base: str | None = None,
) -> list[lsp.Diagnostic]:
    """``diagnostics`` of a document (``lines``: its text, with line endings) with what was
    measured in it: a static diagnostic of the same rule whose range holds the measured
    position (or, failing that, starts on its row) gets the measurement in ``data["measured"]``
    (its hover shows it); a measurement that no such diagnostic takes is a diagnostic of its own
    (source ``torchdoctor run``, severity Information). A measurement past the document's end
    (the file changed since the run) is left out."""
    out = list(diagnostics)
    for m in measurements:
        if m.row > len(lines):
            continue
        start = _position(lines, m.row, m.col, encoding)
        best = None
        for i, d in enumerate(out):
            if d.code != m.code or d.source == SOURCE:
                continue
            if _key(d.range.start) <= _key(start) <= _key(d.range.end):
                best = i
                break
            if best is None and d.range.start.line == start.line:
                best = i
        if best is not None:
            d = out[best]
            data = d.data if isinstance(d.data, dict) else {}
            out[best] = attrs.evolve(d, data={**data, "measured": m.data(locale)})
            continue
        end_row = m.end_row if m.end_row is not None and m.row <= m.end_row <= len(lines) else m.row
        end_col = m.end_col if m.end_row == end_row and m.end_col is not None else None
        if end_col is None:
            end_col = len(lines[end_row - 1].rstrip("\r\n"))
        end = _position(lines, end_row, end_col, encoding)
        if _key(end) < _key(start):
            end = start
        out.append(
            lsp.Diagnostic(
                range=lsp.Range(start, end),
                message=m.text(locale),
                severity=lsp.DiagnosticSeverity.Information,
                code=m.code,
                source=SOURCE,
                code_description=_link(m.code, docs_base, locale),
                data={"code": m.code, "version": version, "measured": m.data(locale)},
            )
        )
    return out


def _key(p: lsp.Position) -> tuple[int, int]:
    return p.line, p.character


def _link(code: str, docs_base: str | None, locale: str | None) -> lsp.CodeDescription | None:
    """The guide of the rule a measurement is about (none for a code no rule has)."""
    from ..linter.registry import get_rule

    if get_rule(code) is None:
        return None
    return lsp.CodeDescription(doc_link(code, docs_base, locale))


def _position(lines: list[str], row: int, col: int, encoding: str) -> lsp.Position:
    line = lines[row - 1].rstrip("\r\n")
    return lsp.Position(row - 1, to_client_col(line, min(col, len(line)), encoding))

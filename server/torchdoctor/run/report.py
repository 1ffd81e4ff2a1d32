"""The report of a ``torchdoctor run``: its JSON (version 1), where it is kept, how it is read.

Every run writes ``<root>/.torchdoctor_cache/runs/<key>.json``: ``<root>`` is the project root of
the script (the nearest folder above it holding ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or
``.git``; the script's folder when none), ``<key>`` the first 16 hex digits of the SHA-256 of the
script's resolved absolute path. A newer run of the same script replaces the file (written to a
temporary file, then renamed). Readers ignore keys they do not know.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..core.project import project_roots

VERSION = 1
CACHE_DIR = ".torchdoctor_cache"


@dataclass
class MeasuredFinding:
    """One measured finding: the rule code, where, what was measured, in English and Chinese."""

    code: str
    path: str
    row: int
    col: int
    message: str
    message_zh: str
    summary: str
    summary_zh: str
    measured: dict[str, Any] = field(default_factory=dict)
    end_row: int | None = None
    end_col: int | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: v for k, v in data.items() if v is not None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MeasuredFinding:
        return cls(
            code=str(data["code"]),
            path=str(data["path"]),
            row=int(data["row"]),
            col=int(data.get("col", 1)),
            message=str(data.get("message", "")),
            message_zh=str(data.get("message_zh", data.get("message", ""))),
            summary=str(data.get("summary", "")),
            summary_zh=str(data.get("summary_zh", data.get("summary", ""))),
            measured=dict(data.get("measured") or {}),
            end_row=data.get("end_row"),
            end_col=data.get("end_col"),
        )


@dataclass
class Report:
    script: str
    argv: list[str]
    started: str
    duration_s: float
    torch: str | None
    device: str
    steps: int
    stopped: str  # steps | seconds | exit | error | interrupted
    exit_code: int
    findings: list[MeasuredFinding] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    peak_memory: dict[str, Any] = field(default_factory=dict)
    #: ``--profile`` only: {"status": ok | unavailable | too-few-steps, "detail", "steps",
    #: "patterns"}
    profile: dict[str, Any] | None = None
    version: int = VERSION
    torchdoctor: str = __version__

    def to_json(self) -> dict[str, Any]:
        data = {
            "version": self.version,
            "torchdoctor": self.torchdoctor,
            "script": self.script,
            "argv": list(self.argv),
            "started": self.started,
            "duration_s": self.duration_s,
            "torch": self.torch,
            "device": self.device,
            "steps": self.steps,
            "stopped": self.stopped,
            "exit_code": self.exit_code,
            "findings": [f.to_json() for f in self.findings],
            "timeline": self.timeline,
            "peak_memory": self.peak_memory,
        }
        if self.profile is not None:
            data["profile"] = self.profile
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        return cls(
            script=str(data["script"]),
            argv=[str(a) for a in data.get("argv") or []],
            started=str(data.get("started", "")),
            duration_s=float(data.get("duration_s") or 0.0),
            torch=data.get("torch"),
            device=str(data.get("device") or "cpu"),
            steps=int(data.get("steps") or 0),
            stopped=str(data.get("stopped") or "exit"),
            exit_code=int(data.get("exit_code") or 0),
            findings=[MeasuredFinding.from_json(f) for f in data.get("findings") or []],
            timeline=list(data.get("timeline") or []),
            peak_memory=dict(data.get("peak_memory") or {}),
            profile=dict(data["profile"]) if isinstance(data.get("profile"), dict) else None,
            version=int(data.get("version") or VERSION),
            torchdoctor=str(data.get("torchdoctor") or ""),
        )


def project_root(script: str | Path) -> Path:
    """The folder whose ``.torchdoctor_cache`` holds the script's reports."""
    return Path(project_roots(os.path.realpath(script))[0])


def report_key(script: str | Path) -> str:
    resolved = os.path.realpath(os.path.abspath(script))
    return hashlib.sha256(resolved.encode("utf-8")).hexdigest()[:16]


def reports_dir(root: str | Path) -> Path:
    return Path(root) / CACHE_DIR / "runs"


def report_path(script: str | Path) -> Path:
    return reports_dir(project_root(script)) / f"{report_key(script)}.json"


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # as `open` would have made it, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_report(report: Report, path: Path | None = None) -> Path:
    """Write ``report`` to its place in the cache (or to ``path``); returns where."""
    target = path or report_path(report.script)
    write_json_atomic(target, report.to_json())
    return target


def read_report(path: str | Path) -> Report | None:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or int(data.get("version", 0)) != VERSION:
            return None
        return Report.from_json(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_reports(root: str | Path) -> list[Report]:
    """Every readable report under ``root``'s cache, newest first."""
    folder = reports_dir(root)
    try:
        paths = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return []
    reports = [read_report(p) for p in paths]
    return [r for r in reports if r is not None]

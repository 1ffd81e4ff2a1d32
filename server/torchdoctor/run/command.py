"""``torchdoctor run``: run a training script, bounded, under instrumentation, and report what was
measured in the linter's output formats.

The script runs in its own process: ``python -c LOADER script.py ARGS`` (the interpreter given by
``--python``, else this one) in a process group of its own. The loader takes the working folder off
``sys.path``, executes :mod:`torchdoctor.run._bootstrap` from its file (torchdoctor itself need not
be importable there) and that runs the script as ``__main__`` with the script's folder first on
``sys.path``, as ``python script.py ARGS`` would. Nothing is uploaded; the report is written to
the project's cache (and to ``--report DIR``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..cli.output import first_sentence, public_url, sarif_log
from ..core.model import is_chinese
from ..linter.registry import get_rule
from ..rules.docs import DEFAULT_DOCS_URL
from . import _bootstrap, findings
from .report import MeasuredFinding, Report, write_json_atomic, write_report

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
#: How long after ``--seconds`` the script gets to stop on its own before SIGTERM, and after
#: SIGTERM before SIGKILL.
GRACE_S, KILL_AFTER_S = 30.0, 5.0
#: ``--profile``: optimizer steps under torch.profiler (bounded: its traces grow with each step).
PROFILE_STEPS, MAX_PROFILE_STEPS = 3, 20

# Only builtins until the working folder is off sys.path; the bootstrap's own imports follow.
LOADER = (
    "import sys\n"
    "p = sys.argv.pop(1)\n"
    "sys.path.pop(0)\n"
    "m = type(sys)('_torchdoctor_run')\n"
    "m.__file__ = p\n"
    "sys.modules[m.__name__] = m\n"
    "with open(p, 'rb') as f:\n"
    "    exec(compile(f.read(), p, 'exec', dont_inherit=True), m.__dict__)\n"
    "m.main()\n"
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="torchdoctor run",
        description="Run a training script for a few steps under instrumentation and report "
        "the pitfalls measured (bytes, seconds, counts) at the lines that caused them.",
    )
    p.add_argument("--steps", type=int, default=None, help="Stop after N optimizer steps.")
    p.add_argument("--seconds", type=float, default=None, help="Stop after S seconds.")
    p.add_argument(
        "--profile",
        action="store_true",
        help="Also run a few steps (after 2 warm-up steps) under torch.profiler and report "
        "what PyTorch's anti-pattern matcher finds there.",
    )
    p.add_argument(
        "--profile-steps",
        type=int,
        default=PROFILE_STEPS,
        metavar="N",
        help=f"Steps under the profiler with --profile (1 to {MAX_PROFILE_STEPS}, "
        f"default {PROFILE_STEPS}).",
    )
    p.add_argument("--output-format", choices=("text", "json", "sarif"), default="text")
    p.add_argument("--report", metavar="DIR", help="Also write report.json and index.html here.")
    p.add_argument("--python", metavar="PYTHON", help="The interpreter (default: this one).")
    p.add_argument("--locale", help="en or zh (default: $TORCHDOCTOR_LOCALE, else en).")
    p.add_argument("--exit-zero", action="store_true", help="Exit 0 even when findings remain.")
    p.add_argument("script", help="The script to run, as `python script.py` would.")
    p.add_argument("args", nargs=argparse.REMAINDER, help="Its arguments.")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return EXIT_CLEAN if exc.code == 0 else EXIT_ERROR
    locale = args.locale or os.environ.get("TORCHDOCTOR_LOCALE") or "en"
    script = Path(args.script)
    if not script.is_file():
        print(f"torchdoctor run: error: {args.script}: no such file", file=sys.stderr)
        return EXIT_ERROR
    if (args.steps is not None and args.steps < 1) or (
        args.seconds is not None and args.seconds <= 0
    ):
        print("torchdoctor run: error: --steps and --seconds must be positive", file=sys.stderr)
        return EXIT_ERROR
    if not 1 <= args.profile_steps <= MAX_PROFILE_STEPS:
        print(
            f"torchdoctor run: error: --profile-steps must be 1 to {MAX_PROFILE_STEPS}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    python = args.python or sys.executable
    report = execute(
        python,
        str(script),
        list(args.args),
        steps=args.steps,
        seconds=args.seconds,
        script_stdout_to_stderr=args.output_format != "text",
        profile_steps=args.profile_steps if args.profile else 0,
    )
    if report is None:
        print(f"torchdoctor run: error: cannot start {python}", file=sys.stderr)
        return EXIT_ERROR
    write_report(report)
    if args.report:
        from .html import render

        folder = Path(args.report)
        folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(folder / "report.json", report.to_json())
        (folder / "index.html").write_text(render(report, locale), encoding="utf-8")
    emit(report, args.output_format, locale)
    if report.stopped == "interrupted":
        print("torchdoctor run: interrupted; the report holds what was measured", file=sys.stderr)
        return EXIT_ERROR
    if report.exit_code != 0 and report.stopped not in ("steps", "seconds"):
        print(
            f"torchdoctor run: {args.script} exited with status {report.exit_code}",
            file=sys.stderr,
        )
        return EXIT_FINDINGS
    if report.findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def execute(
    python: str,
    script: str,
    argv: list[str],
    *,
    steps: int | None = None,
    seconds: float | None = None,
    script_stdout_to_stderr: bool = False,
    profile_steps: int = 0,
) -> Report | None:
    """Run ``script`` with ``argv`` under instrumentation; None when the interpreter cannot
    start."""
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="torchdoctor-run-") as tmp:
        out = os.path.join(tmp, "measured.json")
        env = dict(os.environ)
        env[_bootstrap.OUT_ENV] = out
        env[_bootstrap.STEPS_ENV] = str(steps or "")
        env[_bootstrap.SECONDS_ENV] = str(seconds or "")
        env[_bootstrap.PROFILE_ENV] = str(profile_steps or "")
        command = [python, "-c", LOADER, _bootstrap.__file__, script, *argv]
        popen_kw: dict[str, Any] = {"env": env}
        if script_stdout_to_stderr:
            popen_kw["stdout"] = sys.stderr.fileno()
        if os.name == "posix":
            popen_kw["start_new_session"] = True
        else:  # pragma: no cover - Windows
            popen_kw["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        try:
            child = subprocess.Popen(command, **popen_kw)
        except OSError:
            return None
        interrupted = _wait(child, seconds)
        _stop_group(child)
        raw = _read(out)
    duration = time.monotonic() - t0
    code = child.returncode if child.returncode is not None else -1
    stopped = str(raw.get("stopped") or ("interrupted" if interrupted else "error"))
    if not raw:
        stopped = "interrupted" if interrupted else ("exit" if code == 0 else "error")
        if seconds and not interrupted and code < 0:
            stopped = "seconds"
    exit_code = int(raw.get("exit_code") or 0) if raw else code
    if stopped in ("steps", "seconds"):
        exit_code = 0 if code in (0, -signal.SIGTERM) or raw else code
    return Report(
        script=str(Path(script).resolve()),
        argv=argv,
        started=started,
        duration_s=round(float(raw.get("duration_s") or duration), 3),
        torch=raw.get("torch"),
        device=str(raw.get("device") or "cpu"),
        steps=int(raw.get("steps") or 0),
        stopped=stopped,
        exit_code=exit_code,
        findings=findings.build(raw),
        timeline=list(raw.get("timeline") or []),
        peak_memory=dict(raw.get("peak_memory") or {}),
        profile=_profile_of(raw, profile_steps),
    )


def _profile_of(raw: dict[str, Any], profile_steps: int) -> dict[str, Any] | None:
    if not profile_steps:
        return None
    got = raw.get("profile")
    if not isinstance(got, dict):
        return {"status": "too-few-steps", "detail": "", "steps": 0, "patterns": []}
    return {k: got.get(k) for k in ("status", "detail", "steps", "patterns") if k in got}


def _wait(child: subprocess.Popen[bytes], seconds: float | None) -> bool:
    """Wait for the script; past ``--seconds`` plus a grace period, stop it. True when the
    user interrupted."""
    deadline = None if not seconds else seconds + GRACE_S
    try:
        try:
            child.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            _signal_group(child, signal.SIGTERM)
            try:
                child.wait(timeout=KILL_AFTER_S)
            except subprocess.TimeoutExpired:
                _signal_group(child, getattr(signal, "SIGKILL", signal.SIGTERM))
                child.wait()
        return False
    except KeyboardInterrupt:
        _signal_group(child, signal.SIGTERM)
        try:
            child.wait(timeout=KILL_AFTER_S)
        except subprocess.TimeoutExpired:
            _signal_group(child, getattr(signal, "SIGKILL", signal.SIGTERM))
            child.wait()
        return True


def _signal_group(child: subprocess.Popen[bytes], sig: int) -> None:
    try:
        if os.name == "posix":
            os.killpg(child.pid, sig)
        else:  # pragma: no cover - Windows
            child.send_signal(sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _stop_group(child: subprocess.Popen[bytes]) -> None:
    """The script is done: stop whatever it started and left running (loader workers...)."""
    if os.name == "posix":
        _signal_group(child, signal.SIGKILL)


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


# ---------------------------------------------------------------------------------------------
# Output


def _shown_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def _name(code: str) -> str:
    rule = get_rule(code)
    if rule is not None:
        return rule.name
    return findings.MEASURED_ONLY.get(code, ("",))[0]


def url_of(code: str, locale: str) -> str:
    """A rule's page; for a measured-only code (no rule), the page of ``torchdoctor run``."""
    if get_rule(code) is not None:
        return public_url(code, None, locale)
    base = os.environ.get("TORCHDOCTOR_DOCS_URL") or DEFAULT_DOCS_URL
    anchor = "#profile" if code == findings.PROFILER_CODE else ""
    if is_chinese(locale):
        return base.rstrip("/") + "/zh/run/" + anchor
    return base.rstrip("/") + "/run/" + (anchor or "#what-is-measured")


def _severity(code: str) -> str:
    rule = get_rule(code)
    return rule.severity.value if rule is not None else "warning"


def message_of(f: MeasuredFinding, locale: str) -> str:
    return f.message_zh if is_chinese(locale) else f.message


def summary_of(f: MeasuredFinding, locale: str) -> str:
    return f.summary_zh if is_chinese(locale) else f.summary


def emit(report: Report, fmt: str, locale: str) -> None:
    if fmt == "json":
        print(json.dumps([ruff_like(f, locale) for f in report.findings], indent=2))
    elif fmt == "sarif":
        print(json.dumps(sarif(report, locale), indent=2))
    else:
        for line in text_lines(report, locale):
            print(line)


def text_lines(report: Report, locale: str) -> list[str]:
    lines = [
        f"{_shown_path(f.path)}:{f.row}:{f.col}: {f.code} {message_of(f, locale)}"
        for f in report.findings
    ]
    n = len(report.findings)
    stop = {
        "steps": ("the step limit", "达到步数上限"),
        "seconds": ("the time limit", "达到时间上限"),
        "exit": ("the script's end", "脚本结束"),
        "error": ("an error", "出错"),
        "interrupted": ("an interruption", "被中断"),
    }.get(report.stopped, (report.stopped, report.stopped))
    if is_chinese(locale):
        found = f"发现 {n} 个实测问题。" if n else "未测得问题。"
        lines.append(
            f"运行 {report.duration_s:.1f} 秒，{report.steps} 个优化器步，停止原因：{stop[1]}。{found}"
        )
    else:
        found = (
            f"Found {n} measured {'finding' if n == 1 else 'findings'}."
            if n
            else ("Nothing measured.")
        )
        steps = f"{report.steps} optimizer {'step' if report.steps == 1 else 'steps'}"
        lines.append(f"Ran {report.duration_s:.1f} s, {steps}, stopped at {stop[0]}. {found}")
    note = findings.profile_note(report, locale)
    if note:
        lines.append(note)
    return lines


def ruff_like(f: MeasuredFinding, locale: str) -> dict[str, Any]:
    return {
        "code": f.code,
        "name": _name(f.code),
        "message": message_of(f, locale),
        "summary": summary_of(f, locale),
        "filename": f.path,
        "location": {"row": f.row, "column": f.col},
        "end_location": {"row": f.end_row or f.row, "column": f.end_col or f.col},
        "url": url_of(f.code, locale),
        "severity": _severity(f.code),
        "measured": f.measured,
        "fix": None,
        "cell": None,
        "noqa_row": f.row,
    }


def sarif(report: Report, locale: str) -> dict[str, Any]:
    level = {"error": "error", "warning": "warning", "info": "note", "hint": "note"}
    rules = []
    for code in sorted({f.code for f in report.findings}):
        rule = get_rule(code)
        if rule is not None:
            text = rule.summary(locale)
            name = rule.name
        else:
            name, en, zh = findings.MEASURED_ONLY.get(code, (code, code, code))
            text = zh if is_chinese(locale) else en
        rules.append(
            {
                "id": code,
                "name": name,
                "shortDescription": {"text": first_sentence(text)},
                "fullDescription": {"text": text},
                "helpUri": url_of(code, locale),
            }
        )
    results = []
    for f in report.findings:
        region: dict[str, int] = {"startLine": f.row, "startColumn": f.col}
        if f.end_row:
            region["endLine"] = f.end_row
        if f.end_col:
            region["endColumn"] = f.end_col
        results.append(
            {
                "ruleId": f.code,
                "level": level.get(_severity(f.code), "warning"),
                "message": {"text": message_of(f, locale)},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": Path(f.path).as_uri()},
                            "region": region,
                        }
                    }
                ],
                "properties": {"measured": f.measured, "summary": summary_of(f, locale)},
            }
        )
    return sarif_log(
        rules,
        results,
        {
            "executionSuccessful": report.exit_code == 0 or report.stopped in ("steps", "seconds"),
            "exitCode": report.exit_code,
            "properties": {
                "steps": report.steps,
                "stopped": report.stopped,
                "durationSeconds": report.duration_s,
                "device": report.device,
                "peakMemory": report.peak_memory,
                **({"profile": report.profile} if report.profile is not None else {}),
            },
        },
    )


def main_run(argv: Sequence[str] | None = None) -> int:
    return main(argv)

"""Behaviour tests for fixes: a small program (CPU torch) runs before and after a fix, and what
it prints is compared.

A program prints ``key: value`` lines. The harness writes it to a temporary folder, runs it,
applies the fix with the real CLI (``python -m torchdoctor check --fix [--unsafe-fixes]
--select TDRxxx``), checks that the file changed, runs it again and compares the two outputs.
A safe fix must print the same lines; the lines a case names in ``changes`` must go from the
stated old value to the stated new one (``ANY`` matches any value, but old and new must
differ; ``ABSENT``: the line is not printed on that side): that is the difference the rule's
docs describe, and nothing else may change.

A case may also run as a one-cell-per-``# %%`` notebook (the fix is applied to the
``.ipynb`` file, then its code cells run as one script), or apply an alternative fix (a code
action the CLI does not apply in bulk) through the checking API.

Every case also checks the fix's safety: the CLI applies it with ``--fix`` alone exactly when
the case is not ``unsafe``.

Programs run in a child forked from a server that has imported torch once, so each run costs
milliseconds rather than the second an import of torch takes (a child may still start others:
DataLoader workers, ``spawn`` included). Without ``fork`` each run is ``python prog.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from torchdoctor.core.fixes import apply_edits
from torchdoctor.core.model import Applicability
from torchdoctor.linter.runner import check_any

ANY = "<any>"  # in ``changes``: any value, as long as it differs before and after
ABSENT = "<absent>"  # in ``changes``: the line is not printed on that side
TIMEOUT = 60  # seconds for one program run or one CLI run


@dataclass(frozen=True)
class Case:
    """One fix, exercised by one program."""

    id: str
    rule: str
    program: str  # the file the fix edits; ``# %%`` lines split it into notebook cells
    changes: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    unsafe: bool = False  # apply with ``--unsafe-fixes``
    notebook: bool = False  # fix and run it as a notebook
    files: Mapping[str, str] = field(default_factory=dict)  # other files in the folder
    entry: str | None = None  # the file to run (default: the program itself)
    alternative: int = 0  # apply the fix at this index (> 0: through the API)

    @property
    def param_id(self) -> str:
        return f"{self.rule}-{self.id}" + ("-nb" if self.notebook else "")


# ----------------------------------------------------------------------- running programs

_SERVER = r"""
import json, os, runpy, signal, sys, traceback, warnings
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
import torch  # once; every program runs in a child forked from here
import torch._dynamo  # what an optimizer's first step imports (a second and a half)

for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(req["timeout"])
            os.chdir(req["cwd"])
            null = os.open(os.devnull, os.O_RDONLY)
            out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(err, 2)
            sys.stdin = open(0, closefd=False)
            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False)
            sys.argv = [req["path"]]
            sys.path[0] = req["cwd"]
            runpy.run_path(req["path"], run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)
"""


@dataclass
class Ran:
    rc: int
    out: str
    err: str


class Programs:
    """Runs programs with the installed torch."""

    def __init__(self) -> None:
        self._server: subprocess.Popen[str] | None = None
        # The server's folder: nothing there shadows a module of torch's.
        self._home = tempfile.TemporaryDirectory(prefix="behaviour-")

    def close(self) -> None:
        if self._server is not None:
            self._server.kill()  # its shutdown (torch's) would take seconds and is not tested
            self._server.communicate(timeout=TIMEOUT)
            self._server = None
        self._home.cleanup()

    def run(self, path: Path) -> Ran:
        out, err = path.with_suffix(".out"), path.with_suffix(".err")
        if not hasattr(os, "fork"):
            proc = subprocess.run(
                [sys.executable, path.name],
                cwd=path.parent,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                stdin=subprocess.DEVNULL,
            )
            return Ran(proc.returncode, proc.stdout, proc.stderr)
        if self._server is None:
            self._server = subprocess.Popen(
                [sys.executable, "-c", _SERVER],
                cwd=self._home.name,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        request = {
            "path": str(path),
            "cwd": str(path.parent),
            "stdout": str(out),
            "stderr": str(err),
            "timeout": TIMEOUT,
        }
        assert self._server.stdin is not None and self._server.stdout is not None
        self._server.stdin.write(json.dumps(request) + "\n")
        self._server.stdin.flush()
        line = self._server.stdout.readline()
        if not line:
            self._server = None
            raise AssertionError(f"the program server died running {path}")
        return Ran(json.loads(line)["rc"], out.read_text(), err.read_text())


# ----------------------------------------------------------------------- notebooks


def _cells(program: str) -> list[str]:
    cells: list[str] = []
    current: list[str] = []
    for line in program.splitlines(keepends=True):
        if line.strip() == "# %%":
            cells.append("".join(current))
            current = []
        else:
            current.append(line)
    cells.append("".join(current))
    return [c for c in cells if c.strip()]


def notebook_json(program: str) -> str:
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": cell.splitlines(keepends=True),
        }
        for cell in _cells(program)
    ]
    meta = {"language_info": {"name": "python"}}
    return json.dumps({"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5})


def notebook_script(text: str) -> str:
    """The code cells of a notebook, as one script."""
    parts = []
    for cell in json.loads(text)["cells"]:
        if cell["cell_type"] == "code":
            src = cell["source"]
            parts.append("".join(src) if isinstance(src, list) else src)
    return "\n".join(p if p.endswith("\n") else p + "\n" for p in parts)


# ----------------------------------------------------------------------- fixing


def cli_fix(path: Path, rule: str, unsafe: bool) -> subprocess.CompletedProcess[str]:
    args = ["check", "--no-cache", "--fix", "--select", rule, path.name]
    if unsafe:
        args.insert(2, "--unsafe-fixes")
    env = {**os.environ, "TORCHDOCTOR_LOCALE": ""}
    env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-m", "torchdoctor", *args],
        cwd=path.parent,
        capture_output=True,
        text=True,
        env=env,
        timeout=TIMEOUT,
    )


def api_fix(path: Path, case: Case) -> None:
    """Apply the fix at ``case.alternative`` of the rule's first finding (a code action)."""
    text = path.read_text()
    result = check_any(text, path.name, codes=frozenset({case.rule}))
    findings = [f for f in result.findings if f.code == case.rule]
    assert findings, f"{case.rule} did not report:\n{text}"
    fixes = findings[0].fixes
    assert len(fixes) > case.alternative, f"{case.rule} offers {len(fixes)} fixes"
    fix = fixes[case.alternative]
    want = Applicability.UNSAFE if case.unsafe else Applicability.SAFE
    assert fix.applicability is want, f"the fix is {fix.applicability.value}"
    edits = list(fix.edits)
    if result.notebook is not None:
        path.write_text(result.notebook.apply(edits))
    else:
        path.write_text(apply_edits(text, edits))


# ----------------------------------------------------------------------- comparing


def parse(out: str) -> dict[str, str]:
    lines: dict[str, str] = {}
    for line in out.splitlines():
        key, sep, value = line.partition(":")
        assert sep, f"a program prints `key: value` lines, not {line!r}"
        assert key.strip() not in lines, f"{key.strip()} is printed twice"
        lines[key.strip()] = value.strip()
    return lines


def compare(before: str, after: str, changes: Mapping[str, tuple[str, str]]) -> None:
    old, new = parse(before), parse(after)
    assert old, "the program printed nothing"
    for key, (want_old, want_new) in changes.items():
        a, b = old.pop(key, ABSENT), new.pop(key, ABSENT)
        assert (a, b) != (ABSENT, ABSENT), f"the program never printed {key}"
        if ANY in (want_old, want_new):
            assert a != b, f"{key}: the fix should change {a!r}"
        if want_old != ANY:
            assert a == want_old, f"{key} before the fix: {a!r}, expected {want_old!r}"
        if want_new != ANY:
            assert b == want_new, f"{key} after the fix: {b!r}, expected {want_new!r}"
    for key in {**old, **new}:
        a, b = old.get(key, ABSENT), new.get(key, ABSENT)
        assert a == b, f"{key}: {a!r} became {b!r}, which the fix must not change"
    assert list(old) == list(new), f"the lines come in another order: {list(old)}, {list(new)}"


def declared(path: Path, case: Case) -> None:
    """The fix the CLI applies is as safe as the case says: ``--fix`` alone applies a safe one
    and leaves an unsafe one."""
    result = check_any(path.read_text(), path.name, codes=frozenset({case.rule}))
    findings = [f for f in result.findings if f.code == case.rule]
    assert findings, f"{case.rule} did not report the program"
    if case.unsafe:
        assert all(f.bulk_fix(False) is None for f in findings), "the fix is safe"
        assert any(f.bulk_fix(True) is not None for f in findings), "no unsafe fix"
    else:
        assert any(f.bulk_fix(False) is not None for f in findings), "the fix is not safe"


def exercise(case: Case, folder: Path, programs: Programs) -> tuple[str, str]:
    """Run, fix, run again; returns the program's text before and after the fix."""
    program = textwrap.dedent(case.program)
    for name, text in case.files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(textwrap.dedent(text))
    target = folder / ("prog.ipynb" if case.notebook else "prog.py")
    target.write_text(notebook_json(program) if case.notebook else program)
    script = folder / "prog.py"
    entry = folder / (case.entry or "prog.py")
    if case.notebook:
        script.write_text(notebook_script(target.read_text()))
    before = programs.run(entry)
    assert before.rc == 0, f"the program fails before the fix:\n{before.err}"
    original = target.read_text()
    said = ""
    if case.alternative:
        api_fix(target, case)
    else:
        declared(target, case)
        proc = cli_fix(target, case.rule, case.unsafe)
        said = proc.stdout + proc.stderr
        assert proc.returncode in (0, 1), said
    fixed = target.read_text()
    assert fixed != original, f"the fix did not change the file:\n{said}"
    if case.notebook:
        script.write_text(notebook_script(fixed))
    after = programs.run(entry)
    assert after.rc == 0, f"the program fails after the fix:\n{fixed}\n{after.err}"
    compare(before.out, after.out, case.changes)
    return original, fixed

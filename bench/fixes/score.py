"""Score torchdoctor's recall on real fixes: the cases of ``bench/fixes/cases/*.tsv``.

    python3 bench/fixes/score.py [--cases FILE ...] [--torchdoctor EXE] [--mirrors DIR]
                                 [--work DIR] [--markdown | --json] [TORCHDOCTOR ARGS ...]

A case is a commit of a public project that fixes one pitfall a torchdoctor rule covers. Case
files are tab-separated, UTF-8, with the header row

    repo  commit  path  rule  rows  what

``repo`` is ``owner/name`` on GitHub, ``commit`` the 40-hex SHA of the fixing commit (its first
parent is the code before the fix), ``path`` the file in both commits, ``rule`` the TDR code,
``rows`` where the finding belongs in the file before the fix (``start-end``, 1-based and
inclusive; in a notebook ``c<cell>:<start>-<end>``, the cell counted 1-based among all cells and
the rows relative to it), ``what`` one line on the pitfall and the fix.

For each commit and its first parent the script writes the project's tree (its ``.py`` files,
``pyproject.toml``/``setup.cfg`` files and the cases' files) to
``<work>/trees/<owner>__<name>/<sha>/`` (default work folder: ``bench/fixes/work/``,
git-ignored; fetched code is never committed), once: later runs reuse it. Sources:

* ``--mirrors DIR``: a bare git directory for ``owner/name`` under DIR, in a folder named
  ``owner+name`` (as ``bench/real/fetch.py`` finds them);
* otherwise a ``git clone --bare --filter=blob:none`` of the public repository, kept under
  ``<work>/clones/``; the blobs of a tree are fetched in one batch.

Then ``EXE check --no-cache --output-format json --exit-zero`` runs on every case's file before
and after the fix, with an empty configuration file (``--config``, so no ``pyproject.toml`` of
the project changes the rules) and ``--target-version 2.13`` unless the extra arguments give
them: once with the default selection, once with ``--select`` of the cases' rules. Each tree is
its own project root (it holds a ``.git`` folder), so facts from the project's other modules
count as they would in a checkout; the files of all trees go on one command line (in chunks).

A case is *caught* when a finding of its rule in the file before the fix overlaps its rows
(same cell for a notebook), and *quiet after* when torchdoctor checked the fixed file (for a
notebook: the case's cell) and found nothing of its rule in it.
Printed: per rule and overall, the cases caught and quiet after with both selections, the
misses and the cases not quiet after the fix, and files torchdoctor could not check.
``--markdown`` prints the table for ``docs/precision.md``, ``--json`` everything. Arguments the
script does not know go to ``torchdoctor check``. Python 3.10+ standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

# The corpus script's git helpers (bench/real/fetch.py), shared rather than copied.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "real"))
from fetch import find_mirror, git, read_blobs

HERE = Path(__file__).resolve().parent
DEFAULT_CASES_DIR = HERE / "cases"
DEFAULT_WORK = HERE / "work"
REMOTE = "https://github.com/{repo}.git"
COLUMNS = ("repo", "commit", "path", "rule", "rows", "what")
TARGET = "2.13"  # the torch version users run today, and the one CI installs
MARKERS = ("pyproject.toml", "setup.cfg")  # project-root markers kept besides the .py files
MAX_BYTES = 4 * 1024 * 1024
CHUNK = 400  # files per torchdoctor command line
STAMP = ".torchdoctor-fixes-tree"
_SHA = re.compile(r"[0-9a-f]{40}")
_REPO = re.compile(r"[\w.-]+/[\w.-]+")
_RULE = re.compile(r"TDR\d{3}")
_ROWS = re.compile(r"(?:c(?P<cell>[1-9]\d*):)?(?P<start>[1-9]\d*)-(?P<end>[1-9]\d*)")
_ERROR = re.compile(r"^(?:cell (?P<cell>\d+):)?(?:(?P<row>\d+):)?(?P<reason>.*)$")
_LINES = re.compile(r"\r\n|\r|\n")


class CaseError(Exception):
    """A case file that is not right: the message says where and why."""


@dataclass
class Case:
    source: str  # "<file>:<line>"
    repo: str
    commit: str
    path: str
    rule: str
    cell: int | None
    start: int
    end: int
    what: str
    parent: str = ""
    result: dict = field(default_factory=dict)

    @property
    def folder(self) -> str:
        owner, name = self.repo.split("/")
        return f"{owner}__{name}"

    @property
    def rows(self) -> str:
        span = f"{self.start}-{self.end}"
        return f"c{self.cell}:{span}" if self.cell is not None else span

    @property
    def where(self) -> str:
        return f"{self.repo}@{self.commit[:10]} {self.path}:{self.rows}"


# --- case files ----------------------------------------------------------------------------


def read_cases(files: list[Path]) -> list[Case]:
    cases: list[Case] = []
    problems: list[str] = []
    seen: dict[tuple, str] = {}
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"{file}: cannot read: {exc}")
            continue
        lines = text.splitlines()
        if not lines or tuple(lines[0].split("\t")) != COLUMNS:
            problems.append(f"{file}:1: the header must be: {' '.join(COLUMNS)} (tab-separated)")
            continue
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            where = f"{file}:{number}"
            parts = line.split("\t")
            if len(parts) != len(COLUMNS):
                problems.append(f"{where}: {len(parts)} columns, expected {len(COLUMNS)}")
                continue
            repo, commit, path, rule, rows, what = (p.strip() for p in parts)
            bad = []
            if not _REPO.fullmatch(repo):
                bad.append(f"repo `{repo}` is not owner/name")
            if not _SHA.fullmatch(commit):
                bad.append(f"commit `{commit}` is not 40 lowercase hex digits")
            if not path or path.startswith("/") or not path.endswith((".py", ".ipynb")):
                bad.append(f"path `{path}` is not a relative .py or .ipynb path")
            if not _RULE.fullmatch(rule):
                bad.append(f"rule `{rule}` is not a TDR code")
            m = _ROWS.fullmatch(rows)
            if m is None:
                bad.append(f"rows `{rows}` is not start-end (or c<cell>:start-end)")
            elif int(m.group("start")) > int(m.group("end")):
                bad.append(f"rows `{rows}` end before they start")
            elif (m.group("cell") is not None) != path.endswith(".ipynb"):
                bad.append(
                    "rows need a cell (c<cell>:start-end) exactly when the path is a notebook"
                )
            if not what:
                bad.append("`what` is empty")
            if bad:
                problems.append(f"{where}: {'; '.join(bad)}")
                continue
            assert m is not None
            key = (repo.lower(), commit, path, rule, rows)
            if key in seen:
                problems.append(f"{where}: the same case as {seen[key]}")
                continue
            seen[key] = where
            cell = m.group("cell")
            cases.append(
                Case(
                    where,
                    repo,
                    commit,
                    path,
                    rule,
                    int(cell) if cell else None,
                    int(m.group("start")),
                    int(m.group("end")),
                    what,
                )
            )
    if problems:
        raise CaseError("\n".join(problems))
    return cases


def known_rules(exe: str) -> dict[str, str]:
    """code -> name of every rule the executable knows."""
    try:
        proc = subprocess.run(
            [exe, "rule", "--all", "--output-format", "json"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as exc:
        raise SystemExit(f"cannot run {exe}: {exc}") from exc
    try:
        return {r["code"]: r.get("name", "") for r in json.loads(proc.stdout)}
    except (ValueError, TypeError, KeyError):
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"`{exe} rule --all --output-format json` gave no rule list") from None


# --- git sources ---------------------------------------------------------------------------


class Source:
    """Where one project's commits are read from: a mirror, or a partial clone."""

    def __init__(self, repo: str, mirrors: Path | None, work: Path, remote: str) -> None:
        self.repo = repo
        self.partial = False
        git_dir = find_mirror(mirrors, repo) if mirrors else None
        if git_dir is None:
            if mirrors:
                print(f"{repo}: no mirror under {mirrors}; cloning", file=sys.stderr)
            owner, name = repo.split("/")
            git_dir = work / "clones" / f"{owner}__{name}.git"
            if not (git_dir / "HEAD").is_file():
                url = remote.format(repo=repo)
                shutil.rmtree(git_dir, ignore_errors=True)
                git_dir.parent.mkdir(parents=True, exist_ok=True)
                r = subprocess.run(
                    ["git", "clone", "--quiet", "--bare", "--filter=blob:none", url, str(git_dir)],
                    capture_output=True,
                    check=False,
                )
                if r.returncode != 0:
                    shutil.rmtree(git_dir, ignore_errors=True)
                    err = r.stderr.decode(errors="replace").strip()
                    raise RuntimeError(f"git clone {url} failed: {err}")
            self.partial = True
        self.git_dir = git_dir

    def has(self, commit: str) -> bool:
        try:
            git(self.git_dir, "cat-file", "-e", f"{commit}^{{commit}}")
            return True
        except RuntimeError:
            return False

    def parent(self, commit: str) -> str:
        if not self.has(commit) and self.partial:
            git(self.git_dir, "fetch", "--quiet", "--filter=blob:none", "origin", commit)
        if not self.has(commit):
            raise RuntimeError(f"commit {commit} is not in {self.git_dir}")
        out = git(self.git_dir, "rev-list", "--parents", "-n", "1", commit).split()
        if len(out) < 2:
            raise RuntimeError(f"commit {commit} has no parent")
        return out[1].decode()

    def tree(self, commit: str) -> dict[str, str]:
        """path -> blob id of every file of the commit (no symlinks, no submodules)."""
        out = git(self.git_dir, "ls-tree", "-r", "-z", "--full-tree", commit)
        paths = {}
        for entry in out.split(b"\0"):
            if not entry:
                continue
            meta, _, name = entry.partition(b"\t")
            mode, kind, oid = meta.split()
            if kind == b"blob" and mode != b"120000":
                paths[name.decode("utf-8", "surrogateescape")] = oid.decode()
        return paths

    def blobs(self, oids: list[str]) -> list[bytes | None]:
        """Contents of the blobs, in order; None for one the git directory lacks (mirrors
        leave out their largest files)."""
        if not oids:
            return []
        if self.partial:  # one fetch for all the blobs, not one per blob
            subprocess.run(
                [
                    "git",
                    f"--git-dir={self.git_dir}",
                    "-c",
                    "fetch.negotiationAlgorithm=noop",
                    "fetch",
                    "--quiet",
                    "--no-tags",
                    "--no-write-fetch-head",
                    "--recurse-submodules=no",
                    "--filter=blob:none",
                    "--stdin",
                    "origin",
                ],
                input="".join(f"{o}\n" for o in sorted(set(oids))).encode(),
                capture_output=True,
                check=False,
            )
        return read_blobs(self.git_dir, oids)


def materialise(source: Source, commit: str, root: Path, wanted: set[str]) -> None:
    """Write the commit's .py files, root markers and ``wanted`` paths under ``root`` (once)."""
    if (root / STAMP).is_file():
        return
    shutil.rmtree(root, ignore_errors=True)
    tree = source.tree(commit)
    chosen = sorted(
        p for p in tree if p.endswith(".py") or p.rsplit("/", 1)[-1] in MARKERS or p in wanted
    )
    part = root.with_name(root.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    for path, data in zip(chosen, source.blobs([tree[p] for p in chosen]), strict=True):
        if data is None or (len(data) >= MAX_BYTES and path not in wanted):
            continue
        target = part / path
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError:  # a path that cannot be a file here (a folder of the same name, ...)
            continue
    (part / ".git").mkdir(parents=True, exist_ok=True)  # the project root, as in a checkout
    (part / STAMP).write_text(f"{source.repo} {commit}\n", encoding="utf-8")
    part.rename(root)


# --- running torchdoctor --------------------------------------------------------------------


def run_check(exe: str, files: list[Path], extra: list[str]) -> tuple[list[dict], list[dict]]:
    """Findings and unchecked files (``{"file", "cell", "row", "reason"}``)."""
    findings: list[dict] = []
    errors: list[dict] = []
    known = sorted((str(f) for f in files), key=len, reverse=True)
    with tempfile.TemporaryDirectory(prefix="torchdoctor-fixes-") as tmp:
        args = [exe, "check", "--no-cache", "--output-format", "json", "--exit-zero"]
        if not any(a == "--config" or a.startswith("--config=") for a in extra):
            empty = Path(tmp) / "torchdoctor.toml"
            empty.write_text("# defaults only\n", encoding="utf-8")
            args += ["--config", str(empty)]
        if not any(a == "--target-version" or a.startswith("--target-version=") for a in extra):
            args += ["--target-version", TARGET]
        args += extra
        for i in range(0, len(files), CHUNK):
            chunk = [str(f) for f in files[i : i + CHUNK]]
            try:
                proc = subprocess.run(
                    [*args, *chunk], capture_output=True, text=True, cwd=tmp, check=False
                )
            except OSError as exc:
                raise SystemExit(f"cannot run {exe}: {exc}") from exc
            try:
                got = json.loads(proc.stdout or "null")
                if not isinstance(got, list):
                    raise ValueError("not a list")
            except ValueError:
                sys.stderr.write(proc.stderr)
                raise SystemExit(
                    f"torchdoctor gave no JSON list of findings (exit status {proc.returncode})"
                ) from None
            findings += got
            for line in proc.stderr.splitlines():
                if not line.startswith("error: "):
                    continue
                body = line[len("error: ") :]
                name = next((t for t in known if body.startswith(t + ":")), None)
                if name is None:
                    errors.append({"file": "", "cell": "", "row": "", "reason": body})
                    continue
                m = _ERROR.match(body[len(name) + 1 :])
                assert m is not None
                errors.append(
                    {
                        "file": name,
                        "cell": m.group("cell") or "",
                        "row": m.group("row") or "",
                        "reason": m.group("reason").strip(),
                    }
                )
    return findings, errors


# --- scoring -------------------------------------------------------------------------------


def file_lines(path: Path, cell: int | None) -> list[str] | None:
    """The rows of a .py file, or of one cell of a notebook (None: no such cell)."""
    text = path.read_bytes().decode("utf-8", "replace")
    if cell is None:
        return _rows(text)
    try:
        cells = json.loads(text).get("cells", [])
        source = cells[cell - 1].get("source", "")
    except (ValueError, AttributeError, IndexError, TypeError):
        return None
    if isinstance(source, list):
        source = "".join(source)
    return _rows(str(source))


def _rows(text: str) -> list[str]:
    lines = _LINES.split(text)
    return lines[:-1] if len(lines) > 1 and lines[-1] == "" else lines


def check_rows(case: Case, before: Path) -> str | None:
    """Why the case's rows do not fit the file before the fix (None: they fit)."""
    lines = file_lines(before, case.cell)
    if lines is None:
        return f"the notebook before the fix has no cell {case.cell}"
    if case.end > len(lines):
        where = f"cell {case.cell} of the file" if case.cell is not None else "the file"
        return f"rows {case.rows} run past the end of {where} before the fix ({len(lines)} rows)"
    if not any(line.strip() for line in lines[case.start - 1 : case.end]):
        return f"rows {case.rows} are blank in the file before the fix"
    return None


def overlaps(f: dict, case: Case) -> bool:
    if (f.get("cell") or None) != case.cell:
        return False
    start = int(f["location"]["row"])
    end = int((f.get("end_location") or f["location"])["row"])
    return start <= case.end and case.start <= end


def score(cases: list[Case], paths: dict[int, tuple[Path, Path]], runs: dict[str, tuple]) -> None:
    for mode, (findings, errors) in runs.items():
        by_file: dict[str, list[dict]] = defaultdict(list)
        for f in findings:
            by_file[str(Path(f["filename"]).resolve())].append(f)
        for i, case in enumerate(cases):
            before, after = paths[i]
            ours_before = [f for f in by_file[str(before.resolve())] if f["code"] == case.rule]
            ours_after = [f for f in by_file[str(after.resolve())] if f["code"] == case.rule]
            hits = [f for f in ours_before if overlaps(f, case)]
            unchecked_after = unchecked(errors, after, case.cell)
            case.result[mode] = {
                "caught": bool(hits),
                # a fixed file torchdoctor could not read proves nothing: not counted as quiet
                "quiet_after": not ours_after and not unchecked_after,
                "before_rows": [_at(f) for f in ours_before],
                "after_rows": [_at(f) for f in ours_after],
                "unchecked_before": unchecked(errors, before, case.cell),
                "unchecked_after": unchecked_after,
            }


def unchecked(errors: list[dict], path: Path, cell: int | None) -> bool:
    """Whether torchdoctor could not check the file (for a notebook case: the case's cell;
    other cells that do not parse, such as shell commands, do not count)."""
    for e in errors:
        if e["file"] != str(path):
            continue
        if cell is None or not e["cell"] or int(e["cell"]) == cell:
            return True
    return False


def _at(f: dict) -> str:
    row = f["location"]["row"]
    return f"c{f['cell']}:{row}" if f.get("cell") else str(row)


def _ratio(n: int, d: int) -> dict:
    return {"n": n, "of": d, "pct": (100.0 * n / d) if d else None}


def summarise(cases: list[Case], names: dict[str, str]) -> dict:
    modes = ("default", "selected")
    per_rule: dict[str, list[Case]] = defaultdict(list)
    for c in cases:
        per_rule[c.rule].append(c)

    def figures(group: list[Case]) -> dict:
        out: dict = {
            "cases": len(group),
            "projects": len({c.repo.lower() for c in group}),
        }
        for mode in modes:
            out[mode] = {
                "caught": _ratio(sum(c.result[mode]["caught"] for c in group), len(group)),
                "quiet_after": _ratio(
                    sum(c.result[mode]["quiet_after"] for c in group), len(group)
                ),
            }
        return out

    rules = [
        {"code": code, "name": names.get(code, ""), **figures(group)}
        for code, group in sorted(per_rule.items())
    ]
    return {
        "rules": rules,
        "overall": {"rules": len(per_rule), **figures(cases)},
        "cases": [
            {
                "case": c.source,
                "repo": c.repo,
                "commit": c.commit,
                "parent": c.parent,
                "path": c.path,
                "rule": c.rule,
                "rows": c.rows,
                "what": c.what,
                **c.result,
            }
            for c in cases
        ],
    }


def _pct(r: dict) -> str:
    return "—" if r["pct"] is None else f"{r['n']}/{r['of']} {r['pct']:.1f}%"


def print_text(
    report: dict, cases: list[Case], errors: dict[str, list[dict]], seconds: float
) -> None:
    out = sys.stdout.write
    head = (
        f"{'rule':<8} {'name':<30} {'cases':>5} {'proj':>4}  "
        f"{'caught (default)':>17} {'quiet after':>17}  {'caught (selected)':>17} {'quiet after':>17}\n"
    )
    out(head)
    out("-" * (len(head) - 1) + "\n")
    for t in [*report["rules"], {"code": "all", "name": "", **report["overall"]}]:
        d, s = t["default"], t["selected"]
        out(
            f"{t['code']:<8} {t['name'][:30]:<30} {t['cases']:>5} {t['projects']:>4}  "
            f"{_pct(d['caught']):>17} {_pct(d['quiet_after']):>17}  "
            f"{_pct(s['caught']):>17} {_pct(s['quiet_after']):>17}\n"
        )
    o = report["overall"]
    out(
        f"\n{o['cases']} cases, {o['projects']} projects, {o['rules']} rules; "
        f"recall {_pct(o['default']['caught'])} with the default rules, "
        f"{_pct(o['selected']['caught'])} with the rule selected; "
        f"quiet after {_pct(o['default']['quiet_after'])} / {_pct(o['selected']['quiet_after'])}\n"
        f"run time: {seconds:.1f}s\n"
    )
    missed = [c for c in cases if not c.result["default"]["caught"]]
    out(f"\n{len(missed)} cases missed with the default rules\n")
    for c in missed:
        sel = c.result["selected"]
        note = "caught when selected" if sel["caught"] else "missed when selected too"
        if sel["before_rows"]:
            note += f"; {c.rule} found on rows {', '.join(sel['before_rows'])}"
        if sel["unchecked_before"]:
            note += "; file not checked"
        out(f"  {c.source}  {c.rule} {c.where}  [{note}]\n")
    noisy = [c for c in cases if not c.result["selected"]["quiet_after"]]
    out(f"\n{len(noisy)} cases not quiet after the fix (rule selected)\n")
    for c in noisy:
        sel = c.result["selected"]
        if sel["unchecked_after"]:
            note = "the fixed file could not be checked"
        else:
            dflt = "" if c.result["default"]["quiet_after"] else ", default too"
            note = f"after: rows {', '.join(sel['after_rows'])}{dflt}"
        out(f"  {c.source}  {c.rule} {c.where}  [{note}]\n")
    seen = set()
    lines = []
    for mode in ("default", "selected"):
        for e in errors[mode]:
            key = (e["file"], e["cell"], e["row"], e["reason"])
            if key not in seen:
                seen.add(key)
                cell = f":cell {e['cell']}" if e["cell"] else ""
                row = f":{e['row']}" if e["row"] else ""
                lines.append(f"  {e['file']}{cell}{row}: {e['reason']}\n")
    out(f"\n{len(lines)} files or cells torchdoctor could not check\n")
    for line in lines:
        out(line)


def print_markdown(report: dict) -> None:
    out = sys.stdout.write
    out(
        "| Rule | Name | Cases | Projects | Caught (default) | Quiet after (default) "
        "| Caught (selected) | Quiet after (selected) |\n"
    )
    out("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
    for t in report["rules"]:
        d, s = t["default"], t["selected"]
        out(
            f"| {t['code']} | `{t['name']}` | {t['cases']} | {t['projects']} | "
            f"{_pct(d['caught'])} | {_pct(d['quiet_after'])} | "
            f"{_pct(s['caught'])} | {_pct(s['quiet_after'])} |\n"
        )
    o = report["overall"]
    d, s = o["default"], o["selected"]
    out(
        f"| **All** | {o['rules']} rules | **{o['cases']}** | **{o['projects']}** | "
        f"**{_pct(d['caught'])}** | **{_pct(d['quiet_after'])}** | "
        f"**{_pct(s['caught'])}** | **{_pct(s['quiet_after'])}** |\n"
    )


def without_select(extra: list[str]) -> list[str]:
    """The extra arguments less any ``--select``: the second run selects the cases' rules."""
    out: list[str] = []
    skip = False
    for a in extra:
        if skip:
            skip = False
        elif a == "--select":
            skip = True
        elif not a.startswith("--select="):
            out.append(a)
    return out


# --- main ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Score torchdoctor's recall on real fixes (bench/fixes/cases/*.tsv).",
        epilog="Other arguments are passed to `torchdoctor check`.",
    )
    parser.add_argument("--cases", type=Path, nargs="+", metavar="FILE", help="case files")
    parser.add_argument("--torchdoctor", default="torchdoctor", help="the executable to run")
    parser.add_argument("--mirrors", type=Path, help="folder of bare git dirs named owner+name")
    parser.add_argument("--remote", default=REMOTE, help="clone URL template (default: GitHub)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="trees and clones")
    parser.add_argument("--validate", action="store_true", help="check the cases, run nothing")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    fmt.add_argument("--json", action="store_true", help="print the report as JSON")
    args, extra = parser.parse_known_args(argv)
    if extra and extra[0] == "--":
        extra = extra[1:]
    files = args.cases or sorted(DEFAULT_CASES_DIR.glob("*.tsv"))
    if not files:
        parser.error(f"no case files in {DEFAULT_CASES_DIR}")
    exe = shutil.which(args.torchdoctor) or args.torchdoctor

    try:
        cases = read_cases(files)
    except CaseError as exc:
        raise SystemExit(f"invalid cases:\n{exc}") from None
    if not cases:
        print(f"no cases in {len(files)} files")
        return 0
    names = known_rules(exe)
    unknown = [
        f"{c.source}: torchdoctor has no rule {c.rule}" for c in cases if c.rule not in names
    ]
    if unknown:
        raise SystemExit("invalid cases:\n" + "\n".join(unknown))

    start = time.monotonic()
    work: Path = args.work.resolve()
    sources: dict[str, Source] = {}
    wanted: dict[tuple[str, str], set[str]] = defaultdict(set)
    problems: list[str] = []
    for c in cases:
        try:
            source = sources.get(c.repo.lower())
            if source is None:
                source = sources[c.repo.lower()] = Source(c.repo, args.mirrors, work, args.remote)
            c.parent = source.parent(c.commit)
        except (RuntimeError, OSError) as exc:
            problems.append(f"{c.source}: {exc}")
            continue
        wanted[(c.repo.lower(), c.parent)].add(c.path)
        wanted[(c.repo.lower(), c.commit)].add(c.path)
    if problems:
        raise SystemExit("cases whose commits cannot be read:\n" + "\n".join(problems))

    roots: dict[tuple[str, str], Path] = {}
    for c in cases:
        for sha in (c.parent, c.commit):
            key = (c.repo.lower(), sha)
            if key in roots:
                continue
            root = work / "trees" / c.folder / sha
            try:
                materialise(sources[c.repo.lower()], sha, root, wanted[key])
            except (RuntimeError, OSError) as exc:
                problems.append(f"{c.repo}@{sha}: {exc}")
            roots[key] = root
    if problems:
        raise SystemExit("trees that cannot be written:\n" + "\n".join(problems))

    paths: dict[int, tuple[Path, Path]] = {}
    for i, c in enumerate(cases):
        before = roots[(c.repo.lower(), c.parent)] / c.path
        after = roots[(c.repo.lower(), c.commit)] / c.path
        if not before.is_file():
            problems.append(f"{c.source}: {c.path} is not in the parent {c.parent}")
        elif not after.is_file():
            problems.append(f"{c.source}: {c.path} is not in the commit (renamed or deleted?)")
        else:
            why = check_rows(c, before)
            if why:
                problems.append(f"{c.source}: {why}")
        paths[i] = (before, after)
    if problems:
        raise SystemExit("invalid cases:\n" + "\n".join(problems))
    if args.validate:
        print(f"{len(cases)} cases in {len(files)} files are valid")
        return 0

    targets = sorted({p for pair in paths.values() for p in pair})
    rules = ",".join(sorted({c.rule for c in cases}))
    runs = {
        "default": run_check(exe, targets, extra),
        "selected": run_check(exe, targets, [*without_select(extra), "--select", rules]),
    }
    score(cases, paths, runs)
    report = summarise(cases, names)
    seconds = time.monotonic() - start
    errors = {mode: run[1] for mode, run in runs.items()}
    if args.json:
        report["unchecked"] = errors
        report["seconds"] = round(seconds, 2)
        print(json.dumps(report, indent=1, ensure_ascii=False))
    elif args.markdown:
        print_markdown(report)
    else:
        print_text(report, cases, errors, seconds)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("GIT_TERMINAL_PROMPT", "0")
    sys.exit(main())

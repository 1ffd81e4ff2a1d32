"""Score torchdoctor's default findings on the real-code corpus against ``ledger.tsv``.

    python3 bench/real/score.py [--torchdoctor EXE] [--corpus DIR] [--ledger FILE]
                                [--update] [--markdown | --json] [TORCHDOCTOR ARGS ...]

Runs ``EXE check --no-cache --output-format json --exit-zero`` on every file of
``<corpus>/MANIFEST.tsv`` (built by ``fetch.py``; without a manifest, on the corpus folder), with
an empty configuration file so that no ``pyproject.toml`` above the corpus changes the rules
(unless ``--config`` is among the extra arguments) and ``--target-version 2.13`` (unless given).
Other unknown arguments go to torchdoctor as they are, e.g. ``--select ALL`` or
``--target-version 2.5``; the ledger holds the default findings at 2.13, so with such arguments
many findings show as new.

The ledger is tab-separated, with a header row:

    project  path  cell  row  code  snippet  n  verdict  reason

``project`` is the corpus folder (``owner__name``), ``path`` the file inside it, ``cell`` the
notebook cell (1-based among all cells, as in torchdoctor's JSON; empty for .py), ``row`` the
1-based row (cell-relative in notebooks; informative only), ``snippet`` the stripped source
line of the finding's first row (tabs as spaces, at most 120 characters), ``n`` the occurrence
among findings with the same project, path, cell, code and snippet (in row, column order).
Findings are matched on (project, path, cell, code, snippet, n), so they survive line shifts.
``verdict`` is ``TP``, ``FP``, ``noise`` or ``?`` (not judged yet); ``reason`` one line.

Printed: per rule the findings, TP, FP, noise, unjudged and precision = TP / (TP + FP + noise)
over the judged ones; the overall figure; findings new since the ledger and gone from it;
duplicate sites (several findings on one span); files that could not be checked and rule
crashes (from torchdoctor's ``error:`` lines on stderr); the run time.

``--update`` rewrites the ledger: new findings are added as ``?``, gone ones removed, existing
verdicts and reasons kept (rows and snippets refreshed). ``--markdown`` prints the per-rule
table as Markdown (for docs/precision.md); ``--json`` prints the whole report as JSON.
Python 3.10+ standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CORPUS = HERE / "corpus"
DEFAULT_LEDGER = HERE / "ledger.tsv"
COLUMNS = ("project", "path", "cell", "row", "code", "snippet", "n", "verdict", "reason")
VERDICTS = ("TP", "FP", "noise", "?")
SNIPPET_MAX = 120
_LINES = re.compile(r"\r\n|\r|\n")
_ERROR = re.compile(r"^(?:cell (?P<cell>\d+):)?(?:(?P<row>\d+):)?(?P<reason>.*)$")

Key = tuple[str, str, str, str, str, int]


@dataclass
class Row:
    project: str
    path: str
    cell: str
    row: int
    code: str
    snippet: str
    n: int
    verdict: str = "?"
    reason: str = ""
    name: str = ""
    message: str = ""
    span: tuple[int, int, int, int] = (0, 0, 0, 0)

    @property
    def key(self) -> Key:
        return (self.project, self.path, self.cell, self.code, self.snippet, self.n)

    @property
    def where(self) -> str:
        cell = f":cell {self.cell}" if self.cell else ""
        return f"{self.project}/{self.path}{cell}:{self.row}"

    def tsv(self) -> str:
        fields = [self.project, self.path, self.cell, str(self.row), self.code, self.snippet]
        fields += [str(self.n), self.verdict, self.reason]
        return "\t".join(_one_line(f) for f in fields)


def _one_line(text: str) -> str:
    return _LINES.sub(" ", text).replace("\t", " ")


def snippet_of(line: str) -> str:
    return line.replace("\t", " ").strip()[:SNIPPET_MAX]


def _sort_key(r: Row) -> tuple:
    return (r.project, r.path, int(r.cell or 0), r.row, r.span, r.code, r.n)


# --- the corpus ---------------------------------------------------------------------------


class Sources:
    """Source lines of corpus files: a .py file's rows, or a notebook cell's rows."""

    def __init__(self) -> None:
        self._cache: dict[tuple[Path, str], list[str]] = {}

    def lines(self, path: Path, cell: str) -> list[str]:
        key = (path, cell)
        if key not in self._cache:
            self._cache[key] = self._read(path, cell)
        return self._cache[key]

    @staticmethod
    def _read(path: Path, cell: str) -> list[str]:
        try:
            raw = path.read_bytes()
        except OSError:
            return []
        text = raw.decode("utf-8-sig", "replace")
        if not cell:
            return _LINES.split(text)
        try:
            cells = json.loads(text)["cells"]
            source = cells[int(cell) - 1].get("source", "")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            return []
        return "".join(source).split("\n") if isinstance(source, list) else str(source).split("\n")


def manifest_files(corpus: Path) -> list[Path] | None:
    manifest = corpus / "MANIFEST.tsv"
    if not manifest.is_file():
        return None
    files = []
    for line in manifest.read_text(encoding="utf-8").splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 2:
            files.append(corpus / parts[0] / parts[1])
    return files


# --- running torchdoctor --------------------------------------------------------------------


@dataclass
class Run:
    findings: list[dict]
    errors: list[dict]  # {"project", "path", "cell", "row", "reason"}
    seconds: float
    command: list[str]
    files: int | None


# The torch version the ledger is judged for (the one users run today, and the one CI installs):
# findings must not depend on what happens to be installed next to torchdoctor.
LEDGER_TARGET = "2.13"


def run_torchdoctor(exe: str, corpus: Path, extra: list[str]) -> Run:
    resolved = shutil.which(exe) or exe
    files = manifest_files(corpus)
    targets = [str(p) for p in files] if files is not None else [str(corpus)]
    with tempfile.TemporaryDirectory(prefix="torchdoctor-score-") as tmp:
        args = [resolved, "check", "--no-cache", "--output-format", "json", "--exit-zero"]
        if not any(a == "--config" or a.startswith("--config=") for a in extra):
            empty = Path(tmp) / "torchdoctor.toml"
            empty.write_text("# defaults only\n", encoding="utf-8")
            args += ["--config", str(empty)]
        if not any(a == "--target-version" or a.startswith("--target-version=") for a in extra):
            args += ["--target-version", LEDGER_TARGET]
        args += extra
        start = time.monotonic()
        try:
            proc = subprocess.run(
                [*args, *targets], capture_output=True, text=True, cwd=tmp, check=False
            )
        except OSError as exc:
            raise SystemExit(f"cannot run {exe}: {exc}") from exc
        seconds = time.monotonic() - start
    try:
        findings = json.loads(proc.stdout or "null")
        if not isinstance(findings, list):
            raise ValueError("not a list")
    except ValueError:
        sys.stderr.write(proc.stderr)
        raise SystemExit(
            f"torchdoctor gave no JSON list of findings (exit status {proc.returncode})"
        ) from None
    root = corpus.resolve()
    errors = []
    known = sorted(targets, key=len, reverse=True)
    for line in proc.stderr.splitlines():
        if not line.startswith("error: "):
            continue
        body = line[len("error: ") :]
        name = next((t for t in known if body.startswith(t + ":")), None)
        if name is None:
            errors.append({"project": "", "path": "", "cell": "", "row": "", "reason": body})
            continue
        m = _ERROR.match(body[len(name) + 1 :])
        assert m is not None
        project, path = _split(Path(name), root)
        errors.append(
            {
                "project": project,
                "path": path,
                "cell": m.group("cell") or "",
                "row": m.group("row") or "",
                "reason": m.group("reason").strip(),
            }
        )
    return Run(findings, errors, seconds, args, len(files) if files is not None else None)


def _split(filename: Path, root: Path) -> tuple[str, str]:
    try:
        rel = filename.resolve().relative_to(root)
    except ValueError:
        return "", filename.as_posix()
    parts = rel.parts
    if len(parts) < 2:
        return "", rel.as_posix()
    return parts[0], Path(*parts[1:]).as_posix()


def to_rows(findings: list[dict], corpus: Path) -> list[Row]:
    root = corpus.resolve()
    sources = Sources()
    rows = []
    for f in findings:
        filename = Path(f["filename"])
        project, path = _split(filename, root)
        cell = "" if f.get("cell") is None else str(f["cell"])
        start, end = f["location"], f.get("end_location") or f["location"]
        row = int(start["row"])
        lines = sources.lines(filename, cell)
        line = lines[row - 1] if 0 < row <= len(lines) else ""
        rows.append(
            Row(
                project,
                path,
                cell,
                row,
                f["code"],
                snippet_of(line),
                0,
                name=f.get("name", ""),
                message=f.get("message", ""),
                span=(row, int(start["column"]), int(end["row"]), int(end["column"])),
            )
        )
    rows.sort(key=_sort_key)
    seen: Counter[tuple] = Counter()
    for r in rows:
        base = (r.project, r.path, r.cell, r.code, r.snippet)
        r.n = seen[base]
        seen[base] += 1
    return rows


# --- the ledger ---------------------------------------------------------------------------


def read_ledger(path: Path) -> list[Row]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or tuple(lines[0].split("\t")) != COLUMNS:
        raise SystemExit(f"{path}: the header must be: {' '.join(COLUMNS)} (tab-separated)")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parts = line.split("\t", len(COLUMNS) - 1)
        if len(parts) < len(COLUMNS) - 1:
            raise SystemExit(f"{path}:{number}: {len(parts)} columns, expected {len(COLUMNS)}")
        parts += [""] * (len(COLUMNS) - len(parts))
        project, fpath, cell, row, code, snippet, n, verdict, reason = parts
        verdict = verdict.strip() or "?"
        if verdict not in VERDICTS:
            raise SystemExit(f"{path}:{number}: verdict `{verdict}` is not one of {VERDICTS}")
        try:
            rows.append(Row(project, fpath, cell, int(row), code, snippet, int(n), verdict, reason))
        except ValueError:
            raise SystemExit(f"{path}:{number}: row and n must be integers") from None
    return rows


def write_ledger(path: Path, rows: list[Row]) -> None:
    with path.open("w", encoding="utf-8", newline="\n") as f:
        f.write("\t".join(COLUMNS) + "\n")
        for r in sorted(rows, key=_sort_key):
            f.write(r.tsv() + "\n")


# --- the report ---------------------------------------------------------------------------


def precision(tp: int, judged: int) -> float | None:
    return tp / judged if judged else None


def build_report(run: Run, current: list[Row], ledger: list[Row]) -> dict:
    by_key = {r.key: r for r in ledger}
    duplicates_in_ledger = len(ledger) - len(by_key)
    for r in current:
        old = by_key.get(r.key)
        if old is not None:
            r.verdict, r.reason = old.verdict, old.reason
    now = {r.key for r in current}
    new = [r for r in current if r.key not in by_key]
    gone = [r for r in ledger if r.key not in now]

    names = {r.code: r.name for r in current if r.name}
    table = []
    per_rule: dict[str, Counter[str]] = defaultdict(Counter)
    for r in current:
        per_rule[r.code][r.verdict] += 1
    total: Counter[str] = Counter()
    for code in sorted(per_rule):
        c = per_rule[code]
        total.update(c)
        judged = c["TP"] + c["FP"] + c["noise"]
        table.append(
            {
                "code": code,
                "name": names.get(code, ""),
                "findings": sum(c.values()),
                "TP": c["TP"],
                "FP": c["FP"],
                "noise": c["noise"],
                "unjudged": c["?"],
                "precision": precision(c["TP"], judged),
            }
        )
    table.sort(key=lambda t: (-t["findings"], t["code"]))
    judged = total["TP"] + total["FP"] + total["noise"]
    overall = {
        "findings": sum(total.values()),
        "TP": total["TP"],
        "FP": total["FP"],
        "noise": total["noise"],
        "unjudged": total["?"],
        "precision": precision(total["TP"], judged),
    }

    spans: dict[tuple, list[Row]] = defaultdict(list)
    for r in current:
        spans[(r.project, r.path, r.cell, r.span)].append(r)
    duplicates = [
        {
            "where": group[0].where,
            "span": list(group[0].span),
            "codes": [r.code for r in group],
            "snippet": group[0].snippet,
        }
        for group in spans.values()
        if len(group) > 1
    ]

    crashes = [e for e in run.errors if "internal error in" in e["reason"]]
    unchecked = [e for e in run.errors if "internal error in" not in e["reason"]]
    reasons = Counter(_reason_kind(e["reason"]) for e in unchecked)
    files_with_findings = {(r.project, r.path) for r in current}
    return {
        "command": run.command,
        "files": run.files,
        "files_with_findings": len(files_with_findings),
        "seconds": round(run.seconds, 2),
        "rules": table,
        "overall": overall,
        "new": [_row_json(r) for r in new],
        "gone": [_row_json(r) for r in gone],
        "duplicate_sites": duplicates,
        "duplicate_ledger_keys": duplicates_in_ledger,
        "unchecked": unchecked,
        "unchecked_by_reason": dict(reasons.most_common()),
        "unchecked_notebooks": sum(1 for e in unchecked if e["path"].endswith(".ipynb")),
        "rule_crashes": crashes,
    }


def _reason_kind(reason: str) -> str:
    return reason.split(":", 1)[0] if ":" in reason else reason


def _row_json(r: Row) -> dict:
    return {
        "project": r.project,
        "path": r.path,
        "cell": r.cell,
        "row": r.row,
        "code": r.code,
        "snippet": r.snippet,
        "n": r.n,
        "verdict": r.verdict,
        "reason": r.reason,
        "message": r.message,
    }


def _pct(p: float | None) -> str:
    return "—" if p is None else f"{100 * p:.1f}%"


def print_text(report: dict, limit: int) -> None:
    out = sys.stdout.write
    head = f"{'rule':<8} {'name':<34} {'found':>6} {'TP':>5} {'FP':>5} {'noise':>6} {'?':>5}  precision\n"
    out(head)
    out("-" * (len(head) - 1) + "\n")
    for t in report["rules"]:
        out(
            f"{t['code']:<8} {t['name'][:34]:<34} {t['findings']:>6} {t['TP']:>5} {t['FP']:>5} "
            f"{t['noise']:>6} {t['unjudged']:>5}  {_pct(t['precision'])}\n"
        )
    o = report["overall"]
    out(
        f"{'all':<8} {'':<34} {o['findings']:>6} {o['TP']:>5} {o['FP']:>5} {o['noise']:>6} "
        f"{o['unjudged']:>5}  {_pct(o['precision'])}\n\n"
    )
    judged = o["TP"] + o["FP"] + o["noise"]
    out(
        f"overall precision: {_pct(o['precision'])} ({o['TP']} TP of {judged} judged; "
        f"{o['unjudged']} of {o['findings']} findings not judged yet)\n"
    )
    files = "" if report["files"] is None else f" on {report['files']} files"
    out(
        f"run time: {report['seconds']:.1f}s{files} "
        f"({report['files_with_findings']} with findings)\n\n"
    )

    for label in ("new", "gone"):
        rows = report[label]
        what = "new since the ledger" if label == "new" else "gone from the ledger (not found now)"
        out(f"{len(rows)} findings {what}\n")
        for r in rows[:limit]:
            cell = f":cell {r['cell']}" if r["cell"] else ""
            verdict = "" if label == "new" else f" [{r['verdict']}]"
            out(
                f"  {r['code']} {r['project']}/{r['path']}{cell}:{r['row']}{verdict}  {r['snippet']}\n"
            )
        if len(rows) > limit:
            out(f"  ... {len(rows) - limit} more (--limit, or --json)\n")
    out("\n")

    dups = report["duplicate_sites"]
    out(f"{len(dups)} duplicate sites (several findings on one span)\n")
    for d in dups[:limit]:
        out(f"  {' '.join(d['codes'])} {d['where']}  {d['snippet']}\n")
    if report["duplicate_ledger_keys"]:
        out(f"  the ledger repeats {report['duplicate_ledger_keys']} keys\n")

    un = report["unchecked"]
    by_reason = ", ".join(f"{k}: {v}" for k, v in report["unchecked_by_reason"].items())
    out(
        f"\n{len(un)} files could not be checked ({report['unchecked_notebooks']} notebooks)"
        + (f" — {by_reason}" if by_reason else "")
        + "\n"
    )
    for e in un:
        cell = f":cell {e['cell']}" if e["cell"] else ""
        row = f":{e['row']}" if e["row"] else ""
        out(f"  {e['project']}/{e['path']}{cell}{row}: {e['reason']}\n")
    crashes = report["rule_crashes"]
    out(f"{len(crashes)} rule crashes\n")
    for e in crashes:
        out(f"  {e['project']}/{e['path']}: {e['reason']}\n")


def print_markdown(report: dict) -> None:
    out = sys.stdout.write
    out("| Rule | Name | Findings | TP | FP | Noise | Unjudged | Precision |\n")
    out("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
    for t in report["rules"]:
        out(
            f"| {t['code']} | `{t['name']}` | {t['findings']} | {t['TP']} | {t['FP']} | "
            f"{t['noise']} | {t['unjudged']} | {_pct(t['precision'])} |\n"
        )
    o = report["overall"]
    out(
        f"| **All** | | **{o['findings']}** | **{o['TP']}** | **{o['FP']}** | **{o['noise']}** | "
        f"**{o['unjudged']}** | **{_pct(o['precision'])}** |\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Score torchdoctor on the real-code corpus against the ledger.",
        epilog="Other arguments are passed to `torchdoctor check`.",
    )
    parser.add_argument("--torchdoctor", default="torchdoctor", help="the executable to run")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--ledger", type=Path, default=DEFAULT_LEDGER)
    parser.add_argument("--update", action="store_true", help="rewrite the ledger")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    fmt.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--limit", type=int, default=50, help="rows listed per section")
    args, extra = parser.parse_known_args(argv)
    if extra and extra[0] == "--":
        extra = extra[1:]
    if not args.corpus.is_dir():
        parser.error(f"no corpus at {args.corpus}: run bench/real/fetch.py first")

    ledger = read_ledger(args.ledger)
    run = run_torchdoctor(args.torchdoctor, args.corpus, extra)
    current = to_rows(run.findings, args.corpus)
    report = build_report(run, current, ledger)

    if args.json:
        print(json.dumps(report, indent=1, ensure_ascii=False))
    elif args.markdown:
        print_markdown(report)
    else:
        print_text(report, args.limit)

    if args.update:
        lost = [r for r in report["gone"] if r["verdict"] != "?"]
        write_ledger(args.ledger, current)
        print(
            f"\nwrote {args.ledger}: {len(current)} rows ({len(report['new'])} added, "
            f"{len(report['gone'])} removed, {len(lost)} of them judged)",
            file=sys.stderr,
        )
        if extra:
            print(
                f"note: the ledger was written from a run with extra arguments: {' '.join(extra)}",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

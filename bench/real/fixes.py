"""Apply torchdoctor's fixes one by one on the real-code corpus, and keep a judged sample.

    python3 bench/real/fixes.py [--torchdoctor EXE] [--corpus DIR] [--sample N] [--update]

Runs ``EXE check --unsafe-fixes --output-format json`` on the corpus (default rules, target
2.13, as ``score.py`` does), then applies each finding's fix on its own to a copy of its file
(notebooks: to its cell) and checks that the result still parses. Printed: per rule the fixes
offered, their applicability, and how many left code that does not parse.

``fixes.tsv`` holds a deterministic sample of the fixes (every rule's first fixes by a hash of
their site, ``--sample`` in all) with the code before and after, and a verdict written by a
reader: ``correct`` (removes the defect, nothing else changes), ``breaks`` (the program fails or
computes something else) or ``wrong`` (runs, but not what the code meant), with a reason.
``--update`` adds newly sampled fixes as ``?`` and keeps existing verdicts. Python 3.10+
standard library only.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
import warnings
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from score import DEFAULT_CORPUS, _split, run_torchdoctor

HERE = Path(__file__).resolve().parent
DEFAULT_FIXES = HERE / "fixes.tsv"
COLUMNS = (
    "project", "path", "cell", "row", "code", "applicability", "title", "parses", "before",
    "after", "verdict", "reason",
)  # fmt: skip
VERDICTS = ("correct", "breaks", "wrong", "?")


def _source(path: Path, cell: int | None) -> str:
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    if cell is None:
        return text
    source = json.loads(text)["cells"][cell - 1].get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _offset(lines: list[str], row: int, col: int) -> int:
    """Offset of 1-based ``row`` and 1-based ``col`` (code points) in the joined ``lines``."""
    return sum(len(line) for line in lines[: row - 1]) + col - 1


def apply_fix(text: str, edits: list[dict]) -> str:
    lines = text.splitlines(keepends=True) or [""]
    spans = []
    for index, edit in enumerate(edits):
        start = _offset(lines, edit["location"]["row"], edit["location"]["column"])
        end = _offset(lines, edit["end_location"]["row"], edit["end_location"]["column"])
        spans.append((start, end, index, edit["content"]))
    # Last first; inserts at one position keep their order (the later one is applied first).
    for start, end, _index, content in sorted(spans, reverse=True):
        text = text[:start] + content + text[end:]
    return text


def _parses(text: str, notebook: bool) -> bool:
    if notebook:  # IPython lines are not Python: mask them as the checker does
        text = "\n".join(
            "pass" if line.lstrip().startswith(("%", "!", "?")) else line
            for line in text.split("\n")
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return True


def _changed(before: str, after: str) -> tuple[str, str]:
    """The lines that differ, as one line each with ``⏎`` for line breaks."""
    a, b = before.splitlines(), after.splitlines()
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a, end_b = end_a - 1, end_b - 1

    def show(lines: list[str]) -> str:
        return " ⏎ ".join(line.strip() for line in lines).replace("\t", " ")[:300]

    return show(a[start:end_a]), show(b[start:end_b])


def _site_hash(fix: dict) -> str:
    site = f"{fix['project']}/{fix['path']}/{fix['cell']}/{fix['row']}/{fix['code']}"
    return hashlib.sha256(site.encode()).hexdigest()


def collect(corpus: Path, exe: str, extra: list[str]) -> list[dict]:
    run = run_torchdoctor(exe, corpus, ["--unsafe-fixes", *extra])
    out = []
    for f in run.findings:
        fix = f.get("fix")
        if not fix or not fix.get("edits"):
            continue
        project, rel = _split(Path(f["filename"]), corpus)
        cell = f.get("cell")
        before = _source(corpus / project / rel, cell)
        after = apply_fix(before, fix["edits"])
        old, new = _changed(before, after)
        out.append({
            "project": project, "path": rel, "cell": str(cell or ""),
            "row": str(f["location"]["row"]), "code": f["code"],
            "applicability": fix.get("applicability", ""), "title": fix.get("message", ""),
            "parses": "yes" if _parses(after, cell is not None) else "NO",
            "before": old, "after": new,
        })  # fmt: skip
    return out


def read_tsv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").rstrip("\n").split("\n")
    head = lines[0].split("\t")
    return [dict(zip(head, line.split("\t"), strict=False)) for line in lines[1:]]


def write_tsv(path: Path, rows: list[dict[str, str]]) -> None:
    body = ["\t".join(COLUMNS)] + ["\t".join(r.get(c, "") for c in COLUMNS) for r in rows]
    path.write_text("\n".join(body) + "\n", encoding="utf-8")


def sample(fixes: list[dict], size: int) -> list[dict]:
    """Round-robin over rules, each rule's fixes in the order of a hash of their site."""
    by_rule: dict[str, list[dict]] = defaultdict(list)
    for fix in sorted(fixes, key=_site_hash):
        by_rule[fix["code"]].append(fix)
    chosen: list[dict] = []
    while len(chosen) < size and any(by_rule.values()):
        for code in sorted(by_rule):
            if by_rule[code] and len(chosen) < size:
                chosen.append(by_rule[code].pop(0))
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchdoctor", default="torchdoctor")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--fixes", type=Path, default=DEFAULT_FIXES)
    parser.add_argument("--sample", type=int, default=60)
    parser.add_argument("--update", action="store_true")
    args, extra = parser.parse_known_args(argv)
    fixes = collect(args.corpus, args.torchdoctor, extra)
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for fix in fixes:
        counts[fix["code"]][fix["applicability"]] += 1
        counts[fix["code"]]["does not parse"] += fix["parses"] == "NO"
    print(f"{'rule':8} {'fixes':>6} {'safe':>5} {'unsafe':>7} {'not parsing':>12}")
    for code in sorted(counts):
        c = counts[code]
        total = c["safe"] + c["unsafe"] + c["display-only"]
        print(f"{code:8} {total:6} {c['safe']:5} {c['unsafe']:7} {c['does not parse']:12}")
    key = ("project", "path", "cell", "code", "before", "after")
    old = {tuple(r[k] for k in key): r for r in read_tsv(args.fixes)}
    judged = Counter(r["verdict"] for r in old.values())
    print(f"\n{args.fixes.name}: {len(old)} sampled fixes: " + ", ".join(
        f"{v} {judged[v]}" for v in VERDICTS if judged[v]
    ))  # fmt: skip
    if args.update:
        rows = []
        for fix in sample(fixes, args.sample):
            k = tuple(str(fix[c]) for c in key)
            row = {c: str(fix.get(c, "")) for c in COLUMNS}
            row["verdict"], row["reason"] = "?", ""
            if k in old:
                row["verdict"], row["reason"] = old[k]["verdict"], old[k]["reason"]
            rows.append(row)
        write_tsv(args.fixes, rows)
        print(f"wrote {len(rows)} sampled fixes to {args.fixes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

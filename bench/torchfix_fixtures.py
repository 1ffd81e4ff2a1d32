"""TorchFix's own checker fixtures, checked by torchdoctor as a TorchFix user switching over would.

    .venv/bin/python bench/torchfix_fixtures.py SOURCE [--target-version 2.5] [--select ALL]

SOURCE is a clone of https://github.com/pytorch-labs/torchfix (a work tree, or a bare git
directory, whose ``HEAD`` is read), or its ``tests/fixtures`` folder. The fixtures are read from
there, never copied into this repository. Each ``tests/fixtures/*/checker/NAME.py`` comes with
``NAME.txt``: the findings TorchFix's own tests expect, one ``row:col TORxxx message`` a line.

The files are checked with the ``torchdoctor check`` command line (``--select ALL`` by default:
every rule, off-by-default ones included; ``--target-version 2.5`` by default), and the script
prints, per TorchFix code, how many expected rows torchdoctor reports with a rule that code maps
to (``linter.registry.resolve_selector``), at the same row or in the same multi-line statement.
TOR9xx codes are internal to the PyTorch repository and are left aside.

Every torchdoctor finding that matches no expected row is listed: those of the API-hygiene rules
(TDR8xx) as *extra hygiene findings*, which TorchFix's fixtures say should not be there; the
others (rules that check more than TorchFix does, e.g. a `torch.load` without `map_location`)
for information.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter, defaultdict
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from torchdoctor.linter.registry import resolve_selector  # noqa: E402

EXPECTED = re.compile(r"^(?P<row>\d+):(?P<col>\d+)\s+(?P<code>TOR\d+)\b")
LEFT_ASIDE = ("TOR9",)


def fixtures_folder(source: Path, scratch: Path) -> Path:
    """The ``tests/fixtures`` folder of SOURCE; a bare git directory is unpacked into
    ``scratch`` first (``git archive HEAD tests/fixtures``)."""
    for candidate in (source, source / "tests" / "fixtures"):
        if candidate.is_dir() and any(candidate.glob("*/checker/*.py")):
            return candidate
    archive = subprocess.run(
        ["git", f"--git-dir={source}", "archive", "HEAD", "tests/fixtures"],
        capture_output=True, check=True,
    )  # fmt: skip
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        for member in tar.getmembers():  # plain files under tests/fixtures only
            name = Path(member.name)
            if (
                member.isfile()
                and name.parts[:2] == ("tests", "fixtures")
                and ".." not in name.parts
            ):
                target = scratch / name
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None
                target.write_bytes(source.read())
    return scratch / "tests" / "fixtures"


def expected_rows(folder: Path) -> list[tuple[Path, int, str]]:
    out: list[tuple[Path, int, str]] = []
    for text_file in sorted(folder.glob("*/checker/*.txt")):
        source = text_file.with_suffix(".py")
        if not source.exists():
            continue
        for line in text_file.read_text(encoding="utf-8").splitlines():
            match = EXPECTED.match(line.strip())
            if match:
                out.append((source, int(match.group("row")), match.group("code")))
    return out


def statement_rows(text: str) -> dict[int, int]:
    """Row -> first row of the innermost simple statement spanning it (multi-line only)."""
    rows: dict[int, int] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):
            end = node.end_lineno or node.lineno
            for row in range(node.lineno, end + 1):
                rows[row] = max(rows.get(row, 0), node.lineno)
    return rows


def run_torchdoctor(files: list[Path], select: str, target: str) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "server")}
    command = [
        sys.executable, "-m", "torchdoctor", "check", "--select", select,
        "--target-version", target, "--output-format", "json", "--no-cache", "--exit-zero",
        "--jobs", "1", *map(str, files),
    ]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="TorchFix clone, bare git dir or fixtures")
    parser.add_argument("--target-version", default="2.5")
    parser.add_argument("--select", default="ALL")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        folder = fixtures_folder(args.source.resolve(), Path(scratch))
        rows = expected_rows(folder)
        files = sorted(folder.glob("*/checker/*.py"))
        findings = run_torchdoctor(files, args.select, args.target_version)
        statements = {f: statement_rows(f.read_text(encoding="utf-8")) for f in files}

        # Where torchdoctor reports: (file, row, code) -> its findings there, a multi-line
        # statement's findings also under the statement's first row.
        ours: dict[tuple[Path, int, str], list[dict]] = defaultdict(list)
        for f in findings:
            path, row = Path(f["filename"]), f["location"]["row"]
            ours[(path, row, f["code"])].append(f)
            first = statements.get(path, {}).get(row, row)
            if first != row:
                ours[(path, first, f["code"])].append(f)

        total: Counter[str] = Counter()
        hit: Counter[str] = Counter()
        used: set[int] = set()
        misses: list[str] = []
        for path, row, code in rows:
            if code.startswith(LEFT_ASIDE):
                continue
            total[code] += 1
            there = [ours[(path, row, c)] for c in sorted(resolve_selector(code))]
            if any(there):
                hit[code] += 1
                # Per rule, one finding per expected row, the first not yet matched (TorchFix
                # reports each imported name of one statement at the statement's row).
                for found in filter(None, there):
                    fresh = [f for f in found if id(f) not in used]
                    used.add(id((fresh or found)[0]))
            else:
                misses.append(f"{code} {path.relative_to(folder)}:{row}")
        aside = sum(1 for *_rest, code in rows if code.startswith(LEFT_ASIDE))

    print(
        f"TorchFix checker fixtures: {len(files)} files, {sum(total.values())} expected rows "
        f"({aside} TOR9xx row(s) left aside); torchdoctor --select {args.select} "
        f"--target-version {args.target_version}"
    )
    print(f"{'TorchFix':<10}{'torchdoctor':<22}{'expected':>9}{'reported':>9}")
    for code in sorted(total):
        mapped = ",".join(sorted(resolve_selector(code))) or "(none)"
        print(f"{code:<10}{mapped:<22}{total[code]:>9}{hit[code]:>9}")
    print(f"{'all':<32}{sum(total.values()):>9}{sum(hit.values()):>9}")
    if misses:
        print("\nExpected rows not reported:")
        for line in misses:
            print("  " + line)
    extra = [f for f in findings if id(f) not in used]
    extra_hygiene = [f for f in extra if f["code"].startswith("TDR8")]
    others = [f for f in extra if not f["code"].startswith("TDR8")]
    print(f"\nExtra hygiene findings (TDR8xx where TorchFix expects nothing): {len(extra_hygiene)}")
    for f in extra_hygiene:
        name = Path(f["filename"]).relative_to(folder)
        print(f"  {f['code']} {name}:{f['location']['row']}  {f['message']}")
    print(f"Other findings (rules beyond TorchFix's checks): {len(others)}")
    for f in others:
        name = Path(f["filename"]).relative_to(folder)
        print(f"  {f['code']} {name}:{f['location']['row']}  {f['message']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Precision corpus: check real PyTorch code with every TDR1xx-TDR7xx rule (off-by-default rules
included) and print, per rule, how many findings each package gets, the internal errors (rule
crashes), the files that are not valid Python 3, and the time taken.

    .venv/bin/python bench/corpus.py [--workdir DIR] [--extra DIR ...] [--findings FILE]
                                     [--only NAME ...] [--select CODES]

The packages are installed as sources into a scratch area: the script creates a virtual
environment under the work folder (default ``~/.cache/torchdoctor-corpus``), runs its pip with
``download --no-deps`` for the pinned wheels of torchvision, transformers, lightning and timm,
and unpacks each wheel into ``src/<name>-<version>/``. Nothing is imported from them, so no
CUDA build of torch is pulled in. torch itself is read from the interpreter running this script
(located, not imported). Later runs reuse the downloaded wheels.

``--extra DIR`` adds a folder of other code (repositories of training scripts, for example);
each is reported as its own column. ``--findings FILE`` writes every finding as one JSON line
(package, path, row, code, message) for review; ``docs/precision.md`` records the review.

A line ``internal error in TDRnnn`` from torchdoctor is a crash; syntax errors of files that are
not valid Python 3 (Python 2 sources, templates) are listed but are not crashes. The exit status
is 1 when any rule crashed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import time
import venv
import zipfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_WORKDIR = Path.home() / ".cache" / "torchdoctor-corpus"
PACKAGES = {
    "torchvision": "0.28.0",
    "transformers": "5.24.0",
    "lightning": "2.6.6",
    "timm": "1.0.31",
}
CHAPTERS = "TDR1,TDR2,TDR3,TDR4,TDR5,TDR6,TDR7"
CRASH = re.compile(r"internal error in (TDR\d+)")
PARSE = re.compile(r"syntax error|cannot parse|nested too deeply|invalid notebook")


def torch_sources() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise SystemExit("torch is not installed in this interpreter")
    return Path(spec.origin).parent


def scratch_venv(workdir: Path) -> Path:
    env = workdir / "venv"
    python = env / "bin" / "python"
    if not python.exists():
        print(f"creating {env}", file=sys.stderr)
        venv.create(env, with_pip=True, clear=True)
    return python


def install_sources(workdir: Path, names: list[str]) -> dict[str, Path]:
    """Download the pinned wheels (no dependencies) and unpack them; returns name -> folder."""
    wheels = workdir / "wheels"
    src = workdir / "src"
    wheels.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    python: Path | None = None
    for name in names:
        version = PACKAGES[name]
        target = src / f"{name}-{version}"
        if not (target / ".complete").exists():
            pattern = f"{name.replace('-', '_')}-{version}-*.whl"
            found = sorted(wheels.glob(pattern))
            if not found:
                python = python or scratch_venv(workdir)
                subprocess.run(
                    [
                        *(str(python), "-m", "pip", "download", "--no-deps"),
                        *("--only-binary=:all:", "--dest", str(wheels), "--quiet"),
                        f"{name}=={version}",
                    ],
                    check=True,
                )
                found = sorted(wheels.glob(pattern))
            if not found:
                raise SystemExit(f"no wheel for {name}=={version} in {wheels}")
            target.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(found[0]) as zf:
                members = [m for m in zf.namelist() if m.endswith(".py")]
                zf.extractall(target, members)
            (target / ".complete").write_text(found[0].name + "\n")
        out[name] = target
    return out


def check(path: Path, select: str, cwd: Path) -> tuple[list[dict], list[str], float]:
    """Run the command-line checker on one folder: (findings, stderr lines, seconds). It runs
    from ``cwd``, never from inside the checked code (torch/types.py would shadow ``types``)."""
    cmd = [sys.executable, "-m", "torchdoctor", "check", "--output-format", "json"]
    cmd += ["--select", select, "--no-cache", "--exit-zero", str(path)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    seconds = time.perf_counter() - start
    findings = json.loads(proc.stdout) if proc.stdout.strip() else []
    return findings, proc.stderr.splitlines(), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--extra", type=Path, action="append", default=[], metavar="DIR")
    parser.add_argument("--findings", type=Path, help="Write every finding as a JSON line.")
    parser.add_argument("--only", action="append", default=[], help="Check only these packages.")
    parser.add_argument("--select", default=CHAPTERS, help=f"Rules (default {CHAPTERS}).")
    args = parser.parse_args(argv)

    names = [n for n in PACKAGES if not args.only or n in args.only]
    targets: dict[str, Path] = {}
    if not args.only or "torch" in args.only:
        targets["torch"] = torch_sources()
    targets.update(install_sources(args.workdir, names))
    for extra in args.extra:
        targets[extra.name] = extra.resolve()

    counts: dict[str, Counter[str]] = {}
    crashes: list[str] = []
    parse_errors: list[str] = []
    other_errors: list[str] = []
    times: dict[str, float] = {}
    files: dict[str, int] = {}
    sink = None
    if args.findings:
        args.findings.parent.mkdir(parents=True, exist_ok=True)
        sink = args.findings.open("w")
    for label, path in targets.items():
        findings, errors, seconds = check(path, args.select, args.workdir)
        times[label] = seconds
        files[label] = sum(1 for _ in path.rglob("*.py")) + sum(1 for _ in path.rglob("*.ipynb"))
        counts[label] = Counter(f["code"] for f in findings)
        for line in errors:
            if CRASH.search(line):
                crashes.append(line)
            elif PARSE.search(line):
                parse_errors.append(line)
            elif line.strip():
                other_errors.append(line)
        if sink is not None:
            for f in findings:
                record = {
                    "package": label,
                    "path": f["filename"],
                    "row": f["location"]["row"],
                    "cell": f.get("cell"),
                    "code": f["code"],
                    "message": f["message"],
                }
                sink.write(json.dumps(record) + "\n")
        print(
            f"{label:<24} {files[label]:>6} files {sum(counts[label].values()):>6} findings "
            f"{seconds:>7.1f} s",
            file=sys.stderr,
        )
    if sink is not None:
        sink.close()

    labels = list(targets)
    codes = sorted({c for counter in counts.values() for c in counter})
    width = max([len(label) for label in labels] + [6])
    print("rule    " + " ".join(f"{label[:width]:>{width}}" for label in labels) + "   total")
    for code in codes:
        row = [counts[label][code] for label in labels]
        print(f"{code:<8}" + " ".join(f"{n:>{width}}" for n in row) + f" {sum(row):>7}")
    print(f"{'files':<8}" + " ".join(f"{files[x]:>{width}}" for x in labels))
    print(f"{'seconds':<8}" + " ".join(f"{times[x]:>{width}.1f}" for x in labels))
    print(
        f"total time {sum(times.values()):.1f} s; crashes {len(crashes)}; "
        f"unparsable files {len(parse_errors)}; other errors {len(other_errors)}"
    )
    for title, lines in (
        ("crashes", crashes),
        ("files that are not valid Python 3", parse_errors),
        ("other errors", other_errors),
    ):
        if lines:
            print(f"\n{title}:")
            for line in lines:
                print("  " + line)
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())

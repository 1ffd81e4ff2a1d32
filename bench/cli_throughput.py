"""Throughput of ``torchdoctor check`` on the installed torch package's own sources.

Prints files/s and lines/s for the CLI (one process and all cores, cache off), next to the floor:
the time ``ast.parse`` alone takes to read and parse the same files in one process.

    python bench/cli_throughput.py [--root DIR]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import gc
import importlib.util
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path


def torch_root() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed in this environment (pip install torch==2.13.0)")
    return Path(next(iter(spec.submodule_search_locations)))


def parse_floor(files: list[Path]) -> tuple[float, int]:
    lines = 0
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for path in files:
            data = path.read_bytes()
            lines += data.count(b"\n")
            with contextlib.suppress(SyntaxError, ValueError):
                ast.parse(data)
    return time.perf_counter() - start, lines


def run_cli(root: Path, jobs: int) -> float:
    cmd = [
        sys.executable,
        "-m",
        "torchdoctor",
        "check",
        str(root),
        "--no-cache",
        "--exit-zero",
        "--select",
        "ALL",
        "--output-format",
        "json",
        "-j",
        str(jobs),
    ]
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"torchdoctor failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=None, help="folder to check (default: torch)")
    args = parser.parse_args()
    root = args.root or torch_root()
    files = sorted(p for p in root.rglob("*.py") if p.is_file())
    gc.collect()
    floor, lines = parse_floor(files)
    print(f"corpus: {root} — {len(files)} files, {lines:,} lines")
    print(
        f"ast.parse alone (1 process): {floor:6.2f} s  {len(files) / floor:8.0f} files/s  "
        f"{lines / floor:10,.0f} lines/s"
    )
    for jobs in (1, os.cpu_count() or 1):
        elapsed = run_cli(root, jobs)
        print(
            f"torchdoctor check -j{jobs}:       {elapsed:6.2f} s  {len(files) / elapsed:8.0f} files/s  "
            f"{lines / elapsed:10,.0f} lines/s  ({elapsed / floor:.2f}x the floor)"
        )


if __name__ == "__main__":
    main()

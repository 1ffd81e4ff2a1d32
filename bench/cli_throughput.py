"""Throughput of ``torchdoctor check`` on the installed torch package's own sources.

Prints files/s and lines/s for the CLI (one process, and the default jobs: all cores; cache off),
next to two floors: the time ``ast.parse`` alone takes to read and parse the same files in one
process, and in worker processes on all cores (a ``multiprocessing`` pool of ``os.cpu_count()``
workers, its start included). The goal (issue #15): the CLI with the default jobs within 1.5x the
all-cores floor.

    python bench/cli_throughput.py [--root DIR] [--select ALL] [--repeat N] [--skip-one-job]

CPU seconds (user + system, all processes) are printed next to each time: on a machine shared
with other work they move less than the wall-clock times do.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import gc
import importlib.util
import multiprocessing
import os
import resource
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


def _parse_one(path: Path) -> int:
    """Read and parse one file; its number of lines."""
    data = path.read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.suppress(SyntaxError, ValueError):
            ast.parse(data)
    return data.count(b"\n")


def parse_floor(files: list[Path]) -> tuple[float, int]:
    """Read and parse every file in this process: seconds, lines."""
    start = time.perf_counter()
    lines = sum(_parse_one(path) for path in files)
    return time.perf_counter() - start, lines


def children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes so far, theirs included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def parallel_parse_floor(files: list[Path], workers: int) -> tuple[float, float]:
    """Read and parse every file in a pool of ``workers`` processes (started and stopped within
    the time, as the CLI's are): seconds, and the CPU seconds of the workers."""
    cpu = children_cpu()
    start = time.perf_counter()
    with multiprocessing.Pool(workers) as pool:
        sum(pool.imap_unordered(_parse_one, files, chunksize=16))
        pool.close()
        pool.join()
    return time.perf_counter() - start, children_cpu() - cpu


def run_cli(root: Path, jobs: int | None, select: str | None) -> tuple[float, float]:
    """Seconds of ``torchdoctor check`` over ``root`` (``jobs`` None: its default), and the CPU
    seconds of its processes."""
    cmd = [
        sys.executable,
        "-m",
        "torchdoctor",
        "check",
        str(root),
        "--no-cache",
        "--exit-zero",
        "--output-format",
        "json",
        *(["--select", select] if select else []),
        *(["-j", str(jobs)] if jobs is not None else []),
    ]
    cpu = children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        sys.exit(f"torchdoctor failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return elapsed, children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=None, help="folder to check (default: torch)")
    parser.add_argument(
        "--select", default=None, help="rules to run (default: the default rules; ALL: every rule)"
    )
    parser.add_argument("--skip-one-job", action="store_true", help="do not time the CLI's -j1")
    parser.add_argument("--repeat", type=int, default=1, help="time each run this many times")
    args = parser.parse_args()
    root = args.root or torch_root()
    files = sorted(p for p in root.rglob("*.py") if p.is_file())
    cores = os.cpu_count() or 1
    gc.collect()

    def row(label: str, seconds: float, cpu: float | None = None) -> str:
        text = (
            f"{label:<34} {seconds:6.2f} s  {len(files) / seconds:6.0f} files/s  "
            f"{lines / seconds:9,.0f} lines/s"
        )
        return text + (f"  CPU {cpu:6.2f} s" if cpu is not None else "")

    # The best of ``--repeat`` runs of each (the least disturbed by other work on the machine).
    floor, lines = min(parse_floor(files) for _ in range(args.repeat))
    pool_floor, pool_cpu = min(parallel_parse_floor(files, cores) for _ in range(args.repeat))
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"corpus: {root} — {len(files)} files, {lines:,} lines; {cores} cores, load {load}")
    print(row("ast.parse, 1 process:", floor))
    print(row(f"ast.parse, {cores} worker processes:", pool_floor, pool_cpu) + "  (the floor)")
    rules = args.select or "default rules"
    runs: list[tuple[str, int | None]] = [] if args.skip_one_job else [("-j1", 1)]
    runs.append((f"default jobs ({cores})", None))
    for label, jobs in runs:
        elapsed, cpu = min(run_cli(root, jobs, args.select) for _ in range(args.repeat))
        print(
            row(f"torchdoctor check {label}:", elapsed, cpu)
            + f"  {elapsed / pool_floor:.2f}x the floor ({cpu / pool_cpu:.2f}x its CPU), "
            + f"{elapsed / floor:.2f}x 1 process  ({rules})"
        )


if __name__ == "__main__":
    main()

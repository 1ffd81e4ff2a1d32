"""Parity with TorchFix: run TorchFix 0.7 and torchdoctor over the same files and count, per
TorchFix code, how many of its findings torchdoctor also reports at the same place.

    .venv/bin/python bench/parity_torchfix.py [--venv /tmp/torchdoctor-torchfix] [--quick]
                                              [--target-version 2.13] [--misses FILE] [PATH ...]

TorchFix (with libcst, flake8) and transformers are installed into a scratch virtual environment
created by this script (no system site packages); transformers is only read, never imported.
The files checked are tests/fixtures/torchfix/ (our own re-written examples of each TorchFix
rule), the installed torch sources and the transformers sources, or the PATHs given.

A TorchFix finding is matched when torchdoctor reports one of the codes its TorchFix code maps
to (``rules.resolve_selector``) on the same line, or in the same statement for findings inside a
multi-line statement (TorchFix reports imports at the statement's first line, torchdoctor at the
imported name). Both tools honour ``# noqa`` comments. TorchFix's default selection is used
(TOR4xx and TOR9xx are off by default in TorchFix; ``--all`` includes them).

torchdoctor checks against ``--target-version`` (its ``target-version`` setting; by default the
installed torch), so the table can be compared across the torch versions a project supports.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import time
import venv
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "server"))

from torchdoctor.core.config import Settings  # noqa: E402
from torchdoctor.core.torch_version import format_version, target_version  # noqa: E402
from torchdoctor.linter.registry import resolve_selector  # noqa: E402
from torchdoctor.linter.runner import check_any  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "torchfix"
DEFAULT_VENV = Path("/tmp/torchdoctor-torchfix")
TORCHFIX = "torchfix==0.7.0"
DEFAULT_OFF = ("TOR3", "TOR4", "TOR9")

# Runs inside the scratch environment: "path<TAB>key" lines on stdin; out, one JSON line per file
# as soon as it is done: {"path", "key", "findings": [{"row", "code"}], "error"?}.
DRIVER = r"""
import json, re, sys
from concurrent.futures import ProcessPoolExecutor
NOQA = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z][0-9]+(?:[,\s]+[A-Z][0-9]+)*))?", re.I)

def run(item):
    path, key = item
    from torchfix.torchfix import TorchChecker
    out = {"path": path, "key": key, "findings": []}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except (OSError, UnicodeDecodeError):
        return out
    try:
        checker = TorchChecker(None, lines)
        found = list(checker.run()) if checker.module is not None else []
    except Exception as exc:
        out["error"] = type(exc).__name__
        return out
    for row, col, message, _ in found:
        code = message.split()[0]
        line = lines[row - 1] if row <= len(lines) else ""
        m = NOQA.search(line)
        if m:
            codes = m.group("codes")
            if codes is None:
                continue
            listed = [c.upper() for c in re.split(r"[,\s]+", codes.strip())]
            if any(code.startswith(c) for c in listed):
                continue
        out["findings"].append({"row": row, "code": code})
    return out

if __name__ == "__main__":
    items = [tuple(line.split("\t")) for line in sys.stdin.read().splitlines() if line]
    with ProcessPoolExecutor(int(sys.argv[1])) as pool:
        for result in pool.map(run, items, chunksize=4):
            print(json.dumps(result), flush=True)
"""


# Every qualified name TorchFix 0.7 reports on (its deprecated/removed table, its other checks).
_SYMBOLS = """
    torch.solve torch.qr torch.symeig torch.chain_matmul torch.cholesky torch.ger torch.lu_solve
    torch.norm torch.range torch.svd torch.triangular_solve torch.lu torch.matrix_rank torch.lstsq
    torch.nn.UpsamplingNearest2d torch.nn.UpsamplingBilinear2d torch.testing.assert_allclose
    torch.nn.utils.weight_norm torch.utils._pytree._register_pytree_node
    torch.backends.cuda.sdp_kernel functorch.vmap functorch.grad functorch.vjp functorch.jvp
    functorch.jacrev functorch.jacfwd functorch.hessian functorch.functionalize
    torch.utils.checkpoint.checkpoint torch.load torch.log torch.exp
    torch.utils.data._utils.collate.default_collate torch.utils.data._utils.collate.default_convert
    torchvision.transforms.v2.ToTensor torch.utils.data.DataLoader torch.library.Library
"""
TORCHFIX_SYMBOLS = frozenset(_SYMBOLS.split())
ROOTS = ("torch", "functorch", "torchvision")


def may_have_torchfix_findings(text: str) -> bool:
    """False only for files on which TorchFix cannot report anything, so that the slow run
    can skip them without changing the counts. TorchFix resolves a call through the imports
    of its root name (libcst's QualifiedNameProvider, which does not follow assignments or
    relative imports); this over-approximates that with every import binding of the name."""
    if "torch" not in text:
        return False
    if "torchvision" in text:  # TOR201-TOR203: any torchvision use
        return True
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True  # let TorchFix decide
    bound: dict[str, set[str]] = defaultdict(set)
    chains: list[ast.Attribute] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ROOTS:
                    if alias.asname:
                        bound[alias.asname].add(alias.name)
                    else:
                        top = alias.name.split(".")[0]
                        bound[top].add(top)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] in ROOTS:
                for alias in node.names:
                    qual = f"{node.module}.{alias.name}"
                    if qual in TORCHFIX_SYMBOLS:
                        return True
                    bound[alias.asname or alias.name].add(qual)
        elif isinstance(node, ast.Attribute):
            if node.attr == "require_grad" and isinstance(node.ctx, ast.Store):
                return True  # TOR002 needs no import
            chains.append(node)
    for node in chains:
        parts = [node.attr]
        base: ast.expr = node.value
        while isinstance(base, ast.Attribute):
            parts.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name) and base.id in bound:
            suffix = ".".join(reversed(parts))
            if any(f"{qual}.{suffix}" in TORCHFIX_SYMBOLS for qual in bound[base.id]):
                return True
    return False


def _prefilter_one(path: Path) -> tuple[str, bool]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return str(path), False
    return str(path), may_have_torchfix_findings(text)


def candidates(files: list[Path], jobs: int) -> list[Path]:
    from multiprocessing import Pool

    with Pool(jobs) as pool:
        keep = dict(pool.map(_prefilter_one, files, chunksize=16))
    return [f for f in files if keep[str(f)]]


def ensure_venv(path: Path) -> Path:
    python = path / "bin" / "python"
    marker = path / ".torchdoctor-parity"
    if marker.exists():
        return python
    print(f"creating {path} (TorchFix 0.7.0, transformers sources)...", file=sys.stderr)
    venv.EnvBuilder(with_pip=True, system_site_packages=False, clear=True).create(path)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, TORCHFIX], check=True)
    subprocess.run([*pip, "--no-deps", "transformers"], check=True)
    marker.write_text("ok\n")
    return python


def site_packages(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return Path(out.stdout.strip())


def torch_sources() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("torch")  # locates the package; does not import it
    assert spec is not None and spec.origin is not None, "torch is not installed"
    return Path(spec.origin).parent


def python_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_file():
            out.append(p)
        else:
            out.extend(sorted(q for q in p.rglob("*.py") if q.is_file()))
    return out


def _key(path: Path) -> str:
    st = path.stat()
    return f"{st.st_mtime_ns}:{st.st_size}"


def run_torchfix(python: Path, files: list[Path], jobs: int, cache_path: Path) -> list[dict]:
    """TorchFix's findings, one dict per finding; results are cached per file (path, mtime,
    size) in ``cache_path``, so a rerun only checks changed files."""
    cache: dict[str, dict] = {}
    if cache_path.exists():
        for line in cache_path.read_text().splitlines():
            item = json.loads(line)
            cache[item["path"]] = item
    todo = [f for f in files if cache.get(str(f), {}).get("key") != _key(f)]
    if todo:
        print(f"TorchFix: {len(todo)} files to check ({len(files) - len(todo)} cached)",
              file=sys.stderr)  # fmt: skip
        proc = subprocess.Popen(
            [str(python), "-c", DRIVER, str(jobs)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n".join(f"{f}\t{_key(f)}" for f in todo))
        proc.stdin.close()
        with cache_path.open("a") as sink:
            for done, line in enumerate(proc.stdout, start=1):
                item = json.loads(line)
                cache[item["path"]] = item
                sink.write(line)
                sink.flush()
                if done % 250 == 0:
                    print(f"  {done}/{len(todo)}", file=sys.stderr)
        if proc.wait() != 0:
            raise SystemExit("TorchFix driver failed")
    out: list[dict] = []
    for f in files:
        item = cache[str(f)]
        if "error" in item:
            out.append({"path": str(f), "error": item["error"]})
        out.extend({"path": str(f), **finding} for finding in item["findings"])
    return out


def statement_rows(text: str) -> dict[int, int]:
    """Row -> first row of the innermost simple statement spanning it (multi-line only)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    rows: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not hasattr(node, "body"):
            end = node.end_lineno or node.lineno
            if end > node.lineno:
                for row in range(node.lineno, end + 1):
                    rows[row] = max(rows.get(row, 0), node.lineno)
    return rows


def _check_one(
    args: tuple[Path, frozenset[str], str | None],
) -> tuple[str, set[tuple[int, str]]]:
    path, codes, target = args
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return str(path), set()
    result = check_any(text, str(path), Settings(target_version=target), codes=codes)
    places: set[tuple[int, str]] = set()
    if result.findings:
        stmt = statement_rows(text)
        for f in result.findings:
            places.add((f.range.start.row, f.code))
            if f.range.start.row in stmt:
                places.add((stmt[f.range.start.row], f.code))
    return str(path), places


def run_torchdoctor(
    files: list[Path], codes: frozenset[str], jobs: int, target: str | None = None
) -> dict[str, set[tuple[int, str]]]:
    from multiprocessing import Pool

    with Pool(jobs) as pool:
        results = pool.map(_check_one, [(f, codes, target) for f in files], chunksize=8)
    return {path: places for path, places in results if places}


def explain(code: str, path: str, row: int) -> str:
    """Why a finding is missed on purpose, from the call at that line (see the migration page)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return "unexplained"
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.lineno == row]
    kwargs = {k.arg for c in calls for k in c.keywords}
    if code == "TOR102":
        if None in kwargs or any(isinstance(a, ast.Starred) for c in calls for a in c.args):
            return "TOR102: *args/**kwargs may hold map_location (TDR602 stays quiet)"
    if code == "TOR003" and None in kwargs:
        return (
            "TOR003: the ** dictionary visibly holds use_reentrant "
            "(TorchFix's fix would repeat the keyword: TypeError)"
        )
    if code == "TOR002":
        if re.search(r"\.require_grad\b(?!\s*=[^=])", text):
            return "TOR002: the file reads `.require_grad` back: its own attribute"
    return "unexplained"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--all", action="store_true", help="Also TorchFix's off-by-default codes.")
    parser.add_argument("--misses", type=Path, help="Write every miss to this file.")
    parser.add_argument("--quick", action="store_true", help="Only the fixtures.")
    parser.add_argument(
        "--target-version",
        help="torchdoctor's `target-version` setting (default: the installed torch).",
    )
    parser.add_argument(
        "--no-prefilter",
        action="store_true",
        help="Run TorchFix on every file, not only candidates.",
    )
    args = parser.parse_args(argv)

    python = ensure_venv(args.venv)
    if args.paths:
        roots = args.paths
    elif args.quick:
        roots = [FIXTURES]
    else:
        roots = [FIXTURES, torch_sources(), site_packages(python) / "transformers"]
    all_files = python_files(roots)
    files = all_files if args.no_prefilter else candidates(all_files, args.jobs)
    print(
        f"{len(all_files)} files under {', '.join(str(r) for r in roots)}; "
        f"{len(files)} where TorchFix can report anything",
        file=sys.stderr,
    )

    start = time.perf_counter()
    theirs = run_torchfix(python, files, args.jobs, args.venv / "torchfix-cache.jsonl")
    tf_seconds = time.perf_counter() - start
    errors = [t for t in theirs if "error" in t]
    theirs = [t for t in theirs if "error" not in t]
    if not args.all:
        theirs = [t for t in theirs if not t["code"].startswith(DEFAULT_OFF)]

    mapped = {code: resolve_selector(code) for code in sorted({t["code"] for t in theirs})}
    codes = frozenset().union(*mapped.values()) if mapped else frozenset()
    target = format_version(target_version(Settings(target_version=args.target_version)))
    start = time.perf_counter()
    ours = run_torchdoctor(files, codes, args.jobs, args.target_version)
    td_seconds = time.perf_counter() - start

    total: Counter[str] = Counter()
    hit: Counter[str] = Counter()
    misses: list[tuple[str, str, int, str]] = []
    matched_places: set[tuple[str, int, str]] = set()
    for t in theirs:
        code, path, row = t["code"], t["path"], t["row"]
        total[code] += 1
        places = ours.get(path, set())
        found = [c for c in mapped[code] if (row, c) in places]
        if found:
            hit[code] += 1
            matched_places.update((path, row, c) for c in found)
        else:
            misses.append((code, path, row, explain(code, path, row)))

    print(
        f"\n{len(all_files)} files, {len(files)} where TorchFix can report anything; "
        f"TorchFix {tf_seconds:.0f} s, torchdoctor {td_seconds:.0f} s on those; "
        f"torchdoctor target {target}"
    )
    print(f"{'TorchFix':<9}{'torchdoctor':<16}{'findings':>9}{'matched':>9}{'share':>8}")
    for code in sorted(total):
        targets = ",".join(sorted(mapped[code])) or "(none)"
        share = 100.0 * hit[code] / total[code]
        print(f"{code:<9}{targets:<16}{total[code]:>9}{hit[code]:>9}{share:>7.1f}%")
    all_total, all_hit = sum(total.values()), sum(hit.values())
    if all_total:
        print(f"{'all':<25}{all_total:>9}{all_hit:>9}{100.0 * all_hit / all_total:>7.1f}%")
    reasons = Counter(reason for *_rest, reason in misses)
    print("\nMisses by reason:")
    for reason, n in reasons.most_common():
        print(f"  {n:>6}  {reason}")
    print("\nEvery miss:")
    lines = [f"{code} {path}:{row}  [{reason}]" for code, path, row, reason in misses]
    for line in lines:
        print("  " + line)
    if args.misses:
        args.misses.write_text("\n".join(lines) + "\n")
    by_code: dict[str, int] = defaultdict(int)
    for path, places in ours.items():
        for row, code in places:
            if (path, row, code) not in matched_places:
                by_code[code] += 1
    print("\ntorchdoctor findings without a TorchFix counterpart (places):")
    for code in sorted(by_code):
        print(f"  {code}: {by_code[code]}")
    if errors:
        print(f"\nTorchFix failed on {len(errors)} files ({Counter(e['error'] for e in errors)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

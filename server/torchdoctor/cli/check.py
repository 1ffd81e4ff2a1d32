"""``torchdoctor check`` / ``fix`` / ``rule``: files in, findings out, exit code."""

from __future__ import annotations

import argparse
import difflib
import functools
import hashlib
import json
import os
import pickle
import signal
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..core.config import ConfigError, Settings
from ..core.model import ErrorKind, FileError, Finding, is_chinese
from ..core.reading import decode, read_encoded, source_encoding
from ..core.torch_version import format_version, installed_version, target_version
from ..linter.configuration import ConfigFinder, check_target_version, load_file
from ..linter.files import discover
from ..linter.projects import DEFAULT as DEFAULT_PROJECTS
from ..linter.runner import broken_cell, check_any, fix_any
from ..linter.selection import enabled_codes
from . import output

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
CACHE_DIR = ".torchdoctor_cache"


@dataclass
class Options:
    """What a worker needs to check one file (picklable)."""

    overrides: dict[str, object]
    config_file: str | None
    fix: bool
    unsafe: bool | None
    diff: bool
    cache: Path | None


@dataclass
class Record:
    """The outcome for one file, small enough to send back from a worker process."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    cell_rows: dict[int, int] | None = None
    fixed: int = 0
    diff: str = ""
    unsafe: bool = False
    docs_base: str | None = None
    # Code read from stdin: its encoding, and its bytes (given back by `fix -` when they cannot
    # be decoded, or the fixed text cannot be encoded like them).
    encoding: str = "utf-8"
    raw: bytes | None = None
    # The project files and folders the findings also rest on (modules read through imports),
    # with their (mtime_ns, size) when checked: a cached record is stale when one changed.
    depends: dict[str, tuple[int, int]] = field(default_factory=dict)


_FINDERS: dict[str | None, ConfigFinder] = {}


@functools.cache
def code_fingerprint() -> str:
    """The version plus the size and mtime of every module of the package, so that the cache
    never serves results computed by other rule code (an upgrade or an editable install)."""
    root = Path(__file__).resolve().parents[1]
    parts = [__version__]
    for path in sorted(root.rglob("*.py")):
        try:
            stat = path.stat()
        except OSError:
            continue
        parts.append(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _settings_for(path: Path, opts: Options) -> Settings:
    key = opts.config_file
    finder = _FINDERS.get(key)
    if finder is None:
        base = load_file(Path(opts.config_file)) if opts.config_file else Settings()
        finder = ConfigFinder(base)
        _FINDERS[key] = finder
    base_settings = finder.default if opts.config_file else finder.for_path(path)
    # The files of one folder share their settings object: merge the overrides once for it.
    merged_key = (id(base_settings), repr(sorted(opts.overrides.items())))
    known = _MERGED.get(merged_key)
    if known is not None and known[0] is base_settings:
        return known[1]
    merged = base_settings.merged(**opts.overrides)
    _MERGED[merged_key] = (base_settings, merged)
    return merged


_MERGED: dict[tuple[int, str], tuple[Settings, Settings]] = {}
# The rules of files under settings without per-file ignores (the same for all of them).
_CODES: dict[int, tuple[Settings, frozenset[str]]] = {}


def _codes_for(settings: Settings, name: str) -> frozenset[str]:
    if settings.per_file_ignores:
        return enabled_codes(settings, name)
    known = _CODES.get(id(settings))
    if known is not None and known[0] is settings:
        return known[1]
    codes = enabled_codes(settings, name)
    _CODES[id(settings)] = (settings, codes)
    return codes


def check_file(path: Path, opts: Options, stdin_text: str | None = None) -> Record:
    name = str(path)
    record = Record(name)
    try:
        settings = _settings_for(path, opts)
    except ConfigError as exc:
        record.errors.append(FileError(name, str(exc), kind=ErrorKind.CONFIG))
        return record
    unsafe = settings.unsafe_fixes if opts.unsafe is None else opts.unsafe
    record.unsafe = unsafe
    record.docs_base = settings.docs_base_url
    text: str | None
    error: FileError | None
    encoding = "utf-8"
    if stdin_text is not None:
        text, error = stdin_text, None
    else:
        text, error, encoding = read_encoded(path)
    if text is None:
        record.errors.append(error or FileError(name, "cannot read"))
        return record
    codes = _codes_for(settings, name)
    cache_file = None
    if opts.cache is not None and not opts.fix and not opts.diff and stdin_text is None:
        digest = hashlib.sha256(
            "\0".join(
                [
                    code_fingerprint(),
                    settings.fingerprint(),
                    # the installed torch when no target is set: an upgrade changes findings
                    format_version(target_version(settings)),
                    ",".join(sorted(codes)),
                    name,
                ]
            ).encode()
            + b"\0"
            + text.encode("utf-8", "surrogatepass")
        ).hexdigest()
        cache_file = opts.cache / digest[:2] / f"{digest}.pickle"
        try:
            cached = pickle.loads(cache_file.read_bytes())
            if isinstance(cached, Record) and all(
                _stamp(dep) == stamp for dep, stamp in cached.depends.items()
            ):
                return cached
        except (OSError, pickle.PickleError, EOFError, AttributeError, ImportError, TypeError):
            pass
    if opts.fix or opts.diff:
        outcome = fix_any(text, name, settings, unsafe=unsafe, codes=codes)
        result = outcome.result
        if outcome.error is not None:
            record.errors.append(outcome.error)
        record.fixed = sum(outcome.applied.values())
        if stdin_text is not None and not opts.diff:
            record.diff = outcome.text  # the whole (fixed) text goes to stdout, like Ruff
        elif outcome.text != text:
            if opts.diff:
                record.diff = _diff(name, text, outcome.text)
            elif any(not broken_cell(e) for e in result.errors):
                record.errors.append(
                    FileError(
                        name,
                        "not written: the fixed file could not be fully checked",
                        kind=ErrorKind.FIX,
                    )
                )
            else:
                write_error = _write_atomic(path, outcome.text, encoding)
                if write_error:
                    record.errors.append(write_error)
                    record.fixed = 0
                    result = check_any(text, name, settings, codes)  # what is still there
    else:
        result = check_any(text, name, settings, codes)
    record.findings = result.findings
    record.errors.extend(result.errors)
    if result.notebook is not None:
        record.cell_rows = {c.index: c.start_row for c in result.notebook.cells}
    if cache_file is not None and not record.errors:
        record.depends = {dep: _stamp(dep) for dep in DEFAULT_PROJECTS.reads(name)}
        try:
            cache_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(pickle.dumps(record))
            os.replace(tmp, cache_file)
        except OSError:
            pass
    return record


def _stamp(path: str) -> tuple[int, int]:
    """What tells that a file or folder changed: its mtime and size ((-1, -1) when gone)."""
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)
    return (st.st_mtime_ns, st.st_size)


def _diff(name: str, old: str, new: str) -> str:
    if name.endswith(".ipynb"):
        return _notebook_diff(name, old, new)
    lines = difflib.unified_diff(
        old.splitlines(keepends=True), new.splitlines(keepends=True), name, name
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _notebook_diff(name: str, old: str, new: str) -> str:
    out: list[str] = []
    before, after = json.loads(old)["cells"], json.loads(new)["cells"]
    for i, (a, b) in enumerate(zip(before, after, strict=False), start=1):
        src_a = (
            "".join(a.get("source", ""))
            if isinstance(a.get("source"), list)
            else a.get("source", "")
        )
        src_b = (
            "".join(b.get("source", ""))
            if isinstance(b.get("source"), list)
            else b.get("source", "")
        )
        if src_a != src_b:
            lines = difflib.unified_diff(
                src_a.splitlines(keepends=True),
                src_b.splitlines(keepends=True),
                f"{name}:cell {i}",
                f"{name}:cell {i}",
            )
            out.extend(line if line.endswith("\n") else line + "\n" for line in lines)
    return "".join(out)


def _write_atomic(path: Path, text: str, encoding: str = "utf-8") -> FileError | None:
    """Write through a temporary file and a rename, so a crash never leaves half a file; in the
    file's own encoding (its byte order mark kept), to the file a symlink points to, and never
    over a file its user cannot (or chose not to) write."""
    name = str(path)
    target = Path(os.path.realpath(path))
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        return FileError(
            name, f"not written: the fixed text cannot be encoded as {encoding}", kind=ErrorKind.FIX
        )
    try:
        mode = target.stat().st_mode
        if not mode & 0o222 or not os.access(target, os.W_OK):
            return FileError(name, "not written: the file is read-only", kind=ErrorKind.FIX)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, mode & 0o7777)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        return FileError(
            name, f"cannot write the fixed file: {exc.strerror or exc}", kind=ErrorKind.FIX
        )
    return None


def _worker(args: tuple[list[Path], Options]) -> list[Record]:
    paths, opts = args
    return [check_file(p, opts) for p in paths]


class _Progress:
    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.enabled = sys.stderr.isatty() and total > 20 and not os.environ.get("CI")

    def step(self, n: int) -> None:
        if not self.enabled:
            return
        self.done += n
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        sys.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} files"
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\r" + " " * 60 + "\r")
            sys.stderr.flush()


def choose_locale(explicit: str | None) -> str | None:
    """The language of messages: ``--locale``, else ``$TORCHDOCTOR_LOCALE``, else English. One
    torchdoctor has no messages in is an error when asked for with ``--locale`` (None) and a
    warning when it comes from the environment."""
    value = explicit or os.environ.get("TORCHDOCTOR_LOCALE") or "en"
    if value.lower().replace("_", "-").split("-")[0] in ("en", "zh"):
        return value
    if explicit:
        print(
            f"torchdoctor: error: --locale `{value}`: messages exist in en and zh only",
            file=sys.stderr,
        )
        return None
    print(
        f"torchdoctor: warning: TORCHDOCTOR_LOCALE `{value}`: messages exist in en and zh "
        "only; using en",
        file=sys.stderr,
    )
    return "en"


def run_check(args: argparse.Namespace) -> int:
    locale = choose_locale(args.locale)
    if locale is None:
        return EXIT_ERROR
    if args.diff and args.output_format != "text":
        print(
            f"torchdoctor: error: --diff prints a diff; it cannot be combined with "
            f"--output-format {args.output_format}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    zh = is_chinese(locale)
    overrides: dict[str, object] = {
        "select": args.select,
        "extend_select": args.extend_select,
        "ignore": args.ignore,
        "target_version": args.target_version,
    }
    from ..linter.registry import resolve_selector

    for flag in ("select", "extend_select", "ignore"):
        for sel in getattr(args, flag) or []:
            if not resolve_selector(sel):
                print(
                    f"torchdoctor: error: --{flag.replace('_', '-')} names no rule: `{sel}`",
                    file=sys.stderr,
                )
                return EXIT_ERROR
    if args.target_version is not None:
        try:
            check_target_version(args.target_version, "--target-version")
        except ConfigError as exc:
            _print_errors(exc)
            return EXIT_ERROR
    if args.config:
        try:
            load_file(Path(args.config))
        except ConfigError as exc:
            _print_errors(exc)
            return EXIT_ERROR
    cache = None if args.no_cache else Path.cwd() / CACHE_DIR / __version__
    opts = Options(
        overrides, args.config, bool(args.fix), args.unsafe_fixes, bool(args.diff), cache
    )
    paths = args.paths or ["."]
    records: list[Record] = []
    try:
        finder = ConfigFinder(load_file(Path(args.config)) if args.config else None)
        skipped: list[Path] = []
        files = (
            [Path(args.stdin_filename or "-")]
            if paths == ["-"]
            else list(discover(paths, finder, skipped))
        )
        for path in skipped:
            if zh:
                print(
                    f"torchdoctor：警告：{path} 不是 Python 文件或笔记本，未检查", file=sys.stderr
                )
            else:
                print(
                    f"torchdoctor: warning: {path} is not a Python file or notebook; not checked",
                    file=sys.stderr,
                )
        if not args.config:
            for path in files:  # a configuration that cannot be used is one error, for all
                finder.for_path(path).merged(**overrides)
        if args.target_version is None and installed_version() is None:
            bases = [finder.default if args.config else finder.for_path(p) for p in files]
            if any(not base.target_version for base in bases):
                _note_assumed_version(zh)
        # The workers look up each file's settings again: with what the walk found already
        # (worker processes forked from this one share it).
        _FINDERS[args.config] = finder
    except ConfigError as exc:
        _print_errors(exc)
        return EXIT_ERROR
    if paths == ["-"]:
        data = sys.stdin.buffer.read()
        name = args.stdin_filename or "-"
        text, error = decode(data, name)
        if text is None:
            errors = [error or FileError(name, "cannot read")]
            records.append(Record(name, errors=errors, raw=data))
        else:
            record = check_file(Path(name), opts, stdin_text=text)
            record.encoding, record.raw = source_encoding(data, name), data
            records.append(record)
    else:
        if cache is not None:
            _init_cache(cache.parent)
        try:
            records = _run_all(files, opts, args.jobs)
        except Interrupted as stop:
            return _interrupted(stop, args, zh)
    return _report(records, args, locale, zh)


def _note_assumed_version(zh: bool) -> None:
    """Said once per run: without torch next to torchdoctor and without `target-version`, the
    rules check for the newest torch (what a version-gated rule says may differ on yours)."""
    if zh:
        line = (
            "torchdoctor：提示：torchdoctor 所在的环境中没有安装 torch，也没有设置 `target-version`："
            "按最新的 torch 检查。请在 [tool.torchdoctor] 中设置 `target-version`"
            '（例如 "2.5"）或使用 --target-version 指定你的版本。'
        )
    else:
        line = (
            "torchdoctor: note: no torch is installed next to torchdoctor and no "
            "`target-version` is set: checking for the newest torch. Set `target-version` "
            '(e.g. "2.5") in [tool.torchdoctor], or pass --target-version, to check for yours.'
        )
    print(line, file=sys.stderr)


def _print_errors(exc: Exception) -> None:
    """A configuration error names each problem on a line of its own."""
    for line in str(exc).splitlines():
        print(f"torchdoctor: error: {line}", file=sys.stderr)


def _interrupted(stop: Interrupted, args: argparse.Namespace, zh: bool) -> int:
    """What Ctrl-C left: the files fixed before it, and that the others are as they were."""
    done = len(stop.records)
    if args.fix and not args.diff:
        written = [r for r in stop.records if r.fixed]
        fixes = sum(r.fixed for r in written)
        if zh:
            line = (
                f"torchdoctor：已中断。已修复 {len(written)} 个文件（{fixes} 处修复）；"
                f"其余 {stop.total - len(written)} 个文件未被修改。"
            )
        else:
            line = (
                f"torchdoctor: interrupted. Fixed {len(written)} "
                f"{'file' if len(written) == 1 else 'files'} ({fixes} "
                f"{'fix' if fixes == 1 else 'fixes'}); the other {stop.total - len(written)} "
                f"{'file is' if stop.total - len(written) == 1 else 'files are'} untouched."
            )
    elif zh:
        line = f"torchdoctor：已中断（已检查 {done}/{stop.total} 个文件）；没有修改任何文件。"
    else:
        line = f"torchdoctor: interrupted after checking {done} of {stop.total} files; no file was changed."
    print(line, file=sys.stderr)
    return EXIT_ERROR


def _init_cache(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
        ignore = root / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Automatically created by torchdoctor.\n*\n", encoding="utf-8")
    except OSError:
        pass


class Interrupted(Exception):
    """Ctrl-C during a run: the records of the files finished before it (each file is written
    whole or not at all)."""

    def __init__(self, records: list[Record], total: int) -> None:
        super().__init__("interrupted")
        self.records = records
        self.total = total


def _ignore_interrupts() -> None:
    """Worker processes finish the files they have when Ctrl-C comes; the main process stops
    handing out more and waits for them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_all(files: list[Path], opts: Options, jobs: int | None) -> list[Record]:
    jobs = jobs or os.cpu_count() or 1
    progress = _Progress(len(files))
    records: list[Record] = []
    try:
        if jobs <= 1 or len(files) < 8:
            try:
                for path in files:
                    records.append(check_file(path, opts))
                    progress.step(1)
            except KeyboardInterrupt:
                raise Interrupted(records, len(files)) from None
            return records
        # The largest files first, in small chunks: no worker is left with a long file while
        # the others wait at the end. The records are put back in the files' order.
        by_size = sorted(range(len(files)), key=lambda i: -_size_of(files[i]))
        size = max(1, min(16, len(files) // (jobs * 8) or 1))
        chunks = [by_size[i : i + size] for i in range(0, len(by_size), size)]
        slots: list[Record | None] = [None] * len(files)
        with ProcessPoolExecutor(max_workers=jobs, initializer=_ignore_interrupts) as pool:
            futures = [pool.submit(_worker, ([files[i] for i in c], opts)) for c in chunks]
            try:
                for chunk, future in zip(chunks, futures, strict=True):
                    batch = future.result()
                    for i, record in zip(chunk, batch, strict=True):
                        slots[i] = record
                    progress.step(len(batch))
            except KeyboardInterrupt:
                for future in futures:
                    future.cancel()
                for chunk, future in zip(chunks, futures, strict=True):
                    if future.cancelled():
                        continue
                    try:
                        batch = future.result()
                    except Exception:
                        continue
                    for i, record in zip(chunk, batch, strict=True):
                        slots[i] = record
                raise Interrupted([r for r in slots if r is not None], len(files)) from None
        records = [r for r in slots if r is not None]
        return records
    finally:
        progress.close()


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _report(records: list[Record], args: argparse.Namespace, locale: str, zh: bool) -> int:
    items = [(r, f) for r in records for f in r.findings]
    errors = [e for r in records for e in r.errors]
    fixed = sum(r.fixed for r in records)
    unsafe_any = any(r.unsafe for r in records)
    out = sys.stdout
    if args.paths == ["-"] and args.fix and not args.diff and records:
        # Fixed code goes to stdout, like Ruff, in its own encoding; findings are not printed.
        first = records[0]
        try:
            fixed_code = first.diff.encode(first.encoding) if first.diff else first.raw or b""
        except UnicodeEncodeError:
            fixed_code = first.raw or b""
            errors.append(
                FileError(
                    first.path,
                    f"not fixed: the fixed text cannot be encoded as {first.encoding}",
                    kind=ErrorKind.FIX,
                )
            )
        out.flush()
        out.buffer.write(fixed_code)
        for e in errors:
            print(f"error: {e.format()}", file=sys.stderr)
        return (
            EXIT_ERROR
            if errors
            else (EXIT_FINDINGS if items and not args.exit_zero else EXIT_CLEAN)
        )
    if args.diff:
        for r in records:
            if r.diff:
                out.write(r.diff)
        for e in errors:
            print(f"error: {e.format()}", file=sys.stderr)
        would_fix = sum(r.fixed for r in records)
        if would_fix:
            msg = (
                f"将修复 {would_fix} 处。"
                if zh
                else f"Would fix {would_fix} {'finding' if would_fix == 1 else 'findings'}."
            )
            print(msg, file=sys.stderr)
            return EXIT_CLEAN if args.exit_zero else EXIT_FINDINGS
        return EXIT_ERROR if errors else EXIT_CLEAN
    fmt = args.output_format
    if fmt == "json":
        data = [
            output.ruff_json(f, r.path, locale, r.unsafe, r.docs_base, r.cell_rows)
            for r, f in items
        ]
        out.write(output.dumps(data) + "\n")
    elif fmt == "sarif":
        docs_base = next((r.docs_base for r in records if r.docs_base), None)
        out.write(
            output.dumps(
                output.sarif(
                    [(r.path, f, r.unsafe, r.cell_rows) for r, f in items],
                    errors,
                    locale,
                    docs_base,
                )
            )
            + "\n"
        )
    elif fmt == "github":
        for r, f in items:
            out.write(output.github(r.path, f, locale) + "\n")
        for e in errors:
            out.write(
                f"::error title=torchdoctor,file={e.path}"
                + (f",line={e.row}" if e.row else "")
                + f"::{e.reason}"
                + (f" (cell {e.cell})" if e.cell is not None else "")
                + "\n"
            )
    else:
        if args.statistics:
            for line in output.statistics([f for _r, f in items], unsafe_any, locale):
                out.write(line + "\n")
        else:
            for r, f in items:
                out.write(output.text_line(f, r.path, locale, r.unsafe) + "\n")
        unchecked = len({e.path for e in errors})
        if not records:
            # Nothing was checked: say so, rather than that all checks passed.
            out.write(
                (
                    "没有检查任何文件：给出的路径下没有 Python 文件或笔记本。"
                    if zh
                    else "Checked nothing: no Python file or notebook under the given paths."
                )
                + "\n"
            )
        else:
            out.write(
                output.summary([f for _r, f in items], unsafe_any, fixed, zh, unchecked) + "\n"
            )
    if fmt != "github":
        for e in errors:
            print(f"error: {e.format()}", file=sys.stderr)
    if errors and not items and not args.exit_zero:
        return EXIT_FINDINGS
    if items and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def run_rule(args: argparse.Namespace) -> int:
    from ..linter.registry import alias_targets, all_rules, get_rule
    from ..rules.docs import rule_doc, rule_url

    locale = choose_locale(args.locale)
    if locale is None:
        return EXIT_ERROR
    if args.all or not args.code:
        rules = all_rules()
        if args.output_format == "json":
            data = [
                {
                    "code": r.code,
                    "name": r.name,
                    "summary": rule_doc(r, locale).summary,
                    "default": r.default,
                    "severity": r.severity.value,
                    "fix": r.fix_safety.value if r.fix_safety else None,
                    "aliases": list(r.aliases),
                }
                for r in rules
            ]
            print(output.dumps(data))
            return EXIT_CLEAN
        for r in rules:
            on = "on " if r.default else "off"
            fix = r.fix_safety.value if r.fix_safety else "-"
            print(f"{r.code}  {on}  {fix:<10}  {r.name:<36} {rule_doc(r, locale).summary}")
        return EXIT_CLEAN
    rule = get_rule(args.code)
    if rule is None:
        print(f"torchdoctor: error: unknown rule `{args.code}`", file=sys.stderr)
        return EXIT_ERROR
    # Another tool's code (TorchFix's TOR102) may stand for several rules: each one is explained.
    found = [rule]
    for target in alias_targets(args.code):
        other = get_rule(target)
        if other is not None and other not in found:
            found.append(other)
    if args.output_format == "json":
        explained: list[dict[str, object]] = [
            {
                "code": r.code,
                "name": r.name,
                "summary": rule_doc(r, locale).summary,
                "sections": rule_doc(r, locale).sections,
                "url": rule_url(r.code, None, locale),
            }
            for r in found
        ]
        # One rule: its object; a code that stands for several rules: a list of them.
        print(output.dumps(explained[0] if len(explained) == 1 else explained))
        return EXIT_CLEAN
    if len(found) > 1:
        names = ", ".join(f"{r.code} ({r.name})" for r in found)
        if is_chinese(locale):
            print(f"{args.code.upper()} 对应 {len(found)} 条规则：{names}。\n")
        else:
            print(f"{args.code.upper()} stands for {len(found)} rules: {names}.\n")
    print("\n".join(rule_doc(r, locale).markdown() for r in found), end="")
    return EXIT_CLEAN

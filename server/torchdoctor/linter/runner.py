"""The run over one file or notebook: one parse, one analysis, every enabled rule; and the fix
loop that applies fixes until none is left."""

from __future__ import annotations

import ast
import bisect
import contextlib
import dataclasses
import functools
import gc
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..core.config import Settings
from ..core.context import Context
from ..core.fixes import apply_edits
from ..core.incremental import IncrementalParser, parse_text
from ..core.live_facts import LiveFacts, ProbeRequest
from ..core.model import Applicability, Edit, ErrorKind, FileError, Finding, Fix, Pos, Range
from ..core.noqa import NoqaComment, find_noqa, suppresses
from ..core.notebook import Notebook, NotebookError
from ..core.project import Project
from ..core.semantic import Chunk, Semantic
from ..core.source import Source
from ..rules.base import Rule
from ..rules.live import probe_request
from .projects import DEFAULT as DEFAULT_PROJECTS
from .projects import Projects
from .registry import ALIASES, all_rules
from .selection import enabled_codes

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_FIX_ROUNDS = 10


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    notebook: Notebook | None = None
    text: str = ""  # the checked text (for notebooks: the raw JSON)
    probe: ProbeRequest | None = None  # what to ask the kernel for (when asked for)


class Superseded(Exception):
    """A check was stopped because a newer version of the document is waiting."""


def mentions_torch(text: str) -> bool:
    return "torch" in text


def uses_torch(text: str, path: str, project: Project | None) -> bool:
    """Whether a file is torch code: its text names torch, or it imports a module of its project
    that imports torch, directly or through other project modules (``Project.uses_torch``: a
    trainer that receives its model and batches from the project's torch modules). Files that
    are neither are not analysed."""
    return mentions_torch(text) or (project is not None and project.uses_torch(path, text))


# Where the first finds the same range as the second, only the first is kept: a view that fails
# on the live tensor (TDR901) says more than one that likely fails (TDR101).
SUPERSEDES: dict[str, tuple[str, ...]] = {"TDR901": ("TDR101",)}
NO_PROBE = ProbeRequest((), (), True)


def check_text(
    text: str,
    path: str = "<stdin>",
    settings: Settings | None = None,
    *,
    notebook: Notebook | None = None,
    codes: frozenset[str] | None = None,
    parser: IncrementalParser | None = None,
    stop: Callable[[], bool] | None = None,
    live: LiveFacts | None = None,
    probe: bool = False,
    projects: Projects | None = DEFAULT_PROJECTS,
    fixes: bool = True,
) -> FileResult:
    """Check Python source (for a notebook: its concatenated, masked code cells): one parse,
    one analysis, every enabled rule.

    ``fixes=False`` leaves the fixes that rules build on request unbuilt (their findings are
    ``fixes_deferred``): the language server checks so while the user types, and builds a
    finding's fixes when a code action asks, by checking the same text again with the finding's
    rule alone (``codes``) and fixes on.

    ``live`` holds the kernel's facts for the live rules (TDR9xx; silent without them), and
    ``probe`` asks for what to probe the kernel for next (``FileResult.probe``), both from the
    same analysis. ``projects`` resolves names imported from the file's project (None: the
    file alone). For a caller that re-checks the same document after each edit (the language
    server): ``parser`` keeps the document's last parse, so that only the edited statements are
    parsed again, and ``stop`` is asked between rules whether a newer version has made this
    check pointless; when it says so, ``Superseded`` is raised.
    """
    settings = settings or Settings()
    result = FileResult(path, notebook=notebook, text=notebook.raw if notebook else text)
    project = projects.for_path(path) if projects is not None else None
    if not uses_torch(text, path, project):
        if probe:
            result.probe = NO_PROBE
        return result
    # The tree and the facts die with _check's frame, before the collector comes back on:
    # left alive then, they would all be traversed by the next collection.
    with paused_gc():
        _check(
            text, path, settings, result, notebook, codes, parser, stop, live, probe, project, fixes
        )
    return result


def _check(
    text: str,
    path: str,
    settings: Settings,
    result: FileResult,
    notebook: Notebook | None,
    codes: frozenset[str] | None,
    parser: IncrementalParser | None,
    stop: Callable[[], bool] | None,
    live: LiveFacts | None,
    probe: bool,
    project: Project | None,
    fixes: bool,
) -> None:
    with analysed(
        text,
        path,
        settings,
        notebook=notebook,
        parser=parser,
        live=live,
        project=project,
        build_fixes=fixes,
    ) as (ctx, errors):
        result.errors.extend(errors)
        if ctx is None:
            return
        enabled = codes if codes is not None else enabled_codes(settings, path)
        _run_rules(ctx, enabled, result, stop)
        if probe:
            result.probe = probe_request(ctx)
        result.findings = _kept_findings(ctx, ctx.notebook)


@contextmanager
def analysed(
    text: str,
    path: str,
    settings: Settings,
    *,
    notebook: Notebook | None = None,
    parser: IncrementalParser | None = None,
    live: LiveFacts | None = None,
    project: Project | None = None,
    build_fixes: bool = True,
) -> Iterator[tuple[Context | None, list[FileError]]]:
    """The analysis context of one text (parsed once, analysed once) and the errors met on the
    way; the context is None when an error stopped the analysis. A notebook cell that does not
    parse is an error of that cell, and the other cells are analysed. The facts are released
    when the block ends."""
    with paused_gc(), contextlib.ExitStack() as stack:
        errors: list[FileError] = []
        if parser is None:
            tree, error = parse_text(text, path)
            chunks: Sequence[Chunk] | None = None
        else:
            parsed = stack.enter_context(parser.session(text, path))
            tree, error, chunks = parsed.tree, parsed.error, parsed.chunks
        if tree is None:
            assert error is not None
            if notebook is None:
                errors = [error]
            else:
                tree, notebook, errors = _without_broken_cells(notebook, path, error)
                if tree is not None:
                    text, chunks = notebook.text, None
        if tree is None:
            yield None, errors
            return
        try:
            sem = Semantic(tree) if chunks is None else Semantic.from_chunks(tree, chunks)
        except RecursionError:
            errors.append(
                FileError(path, "expression nested too deeply to analyse", kind=ErrorKind.TOO_DEEP)
            )
            yield None, errors
            return
        if project is not None:
            project.begin(path)
        try:
            if project is not None:
                project.adopt(sem, path, text)
            yield (
                Context(
                    Source(text), sem, path, settings, notebook, live=live, build_fixes=build_fixes
                ),
                errors,
            )
        finally:
            sem.release()
            if project is not None:
                project.end(path)


def _without_broken_cells(
    notebook: Notebook, path: str, error: FileError
) -> tuple[ast.Module | None, Notebook, list[FileError]]:
    """A notebook whose code does not parse: the tree of its other cells, when the fault lies in
    cells that do not parse on their own, with one syntax error per such cell."""
    broken = notebook.unparsable_cells() if error.kind is ErrorKind.SYNTAX else []
    if broken and len(broken) < len(notebook.cells):
        rest = notebook.without({cell.index for cell, _reason, _row in broken})
        tree, _error = parse_text(rest.text, path)
        if tree is not None:
            errors = [
                FileError(path, reason, row, cell.index, ErrorKind.SYNTAX)
                for cell, reason, row in broken
            ]
            return tree, rest, errors
    if error.row is not None:
        index, pos = notebook.to_cell(Pos(error.row, 0))
        error = dataclasses.replace(error, row=pos.row, cell=index)
    return None, notebook, [error]


@functools.lru_cache(maxsize=64)  # the same selection for most files of a run
def _rules_for(enabled: frozenset[str], notebook: bool) -> tuple[type[Rule], ...]:
    """The rules to run, in order, for a selection and a kind of file."""
    return tuple(
        rule
        for rule in all_rules()
        if rule.code in enabled and (rule.notebooks if notebook else rule.scripts)
    )


def _run_rules(
    ctx: Context, enabled: frozenset[str], result: FileResult, stop: Callable[[], bool] | None
) -> None:
    path = ctx.path
    for rule in _rules_for(enabled, ctx.notebook is not None):
        if stop is not None and stop():
            raise Superseded
        ctx.rule = rule
        try:
            rule().check(ctx)
        except RecursionError:
            result.errors.append(
                FileError(
                    path, f"{rule.code}: expression nested too deeply", kind=ErrorKind.INTERNAL
                )
            )
        except Exception as exc:  # a rule bug must not stop the run
            where = traceback.extract_tb(exc.__traceback__)[-1]
            result.errors.append(
                FileError(
                    path,
                    f"internal error in {rule.code} ({type(exc).__name__}: {exc} at "
                    f"{where.name}:{where.lineno}); please report it",
                    kind=ErrorKind.INTERNAL,
                )
            )


def _kept_findings(ctx: Context, notebook: Notebook | None) -> list[Finding]:
    """The findings no noqa comment silences and no surer finding at the same place replaces,
    in order; for notebooks with their cell and the range inside it."""
    if not ctx.findings:
        return []
    noqa = find_noqa(ctx.source.lines)
    findings = [f for f in ctx.findings if not _suppressed(f, noqa, ALIASES)]
    replaced = {(old, f.range) for f in findings for old in SUPERSEDES.get(f.code, ())}
    if replaced:
        findings = [f for f in findings if (f.code, f.range) not in replaced]
    findings.sort(key=lambda f: (f.range.start, f.code))
    if notebook is not None:
        for f in findings:
            index, start = notebook.to_cell(f.range.start)
            _, end = notebook.to_cell(f.range.end)
            f.cell = index
            f.cell_range = Range(start, end)
    return findings


class _Collector:
    lock = threading.Lock()
    pauses = 0  # checks running with the collector paused
    resume = False  # whether it was on before the first of them


@contextmanager
def paused_gc() -> Iterator[None]:
    """Keep the cycle collector out of one check. A check allocates hundreds of thousands of
    short-lived objects (the tree, the facts) and few cycles; left on, the collector runs full
    collections over all of them again and again (a third of the time of a 10,000-line file).
    Cycles made meanwhile are collected after the check. Threads share one collector, so it comes
    back on when the last check running ends."""
    with _Collector.lock:
        if _Collector.pauses == 0:
            _Collector.resume = gc.isenabled()
            gc.disable()
        _Collector.pauses += 1
    try:
        yield
    finally:
        with _Collector.lock:
            _Collector.pauses -= 1
            if _Collector.pauses == 0 and _Collector.resume:
                gc.enable()


def _suppressed(finding: Finding, noqa: dict[int, NoqaComment], aliases: Any) -> bool:
    if suppresses(noqa.get(finding.noqa_row), finding.code, aliases):
        return True
    row = finding.extra.get("statement_row")
    return isinstance(row, int) and suppresses(noqa.get(row), finding.code, aliases)


def check_notebook(
    raw: str,
    path: str,
    settings: Settings | None = None,
    codes: frozenset[str] | None = None,
    *,
    live: LiveFacts | None = None,
) -> FileResult:
    try:
        nb = Notebook(raw)
    except NotebookError as exc:
        return FileResult(
            path, errors=[FileError(path, str(exc), kind=ErrorKind.NOTEBOOK)], text=raw
        )
    if nb.language.lower() != "python" or not nb.cells:
        return FileResult(path, notebook=nb, text=raw)
    result = check_text(nb.text, path, settings, notebook=nb, codes=codes, live=live)
    # A cell whose source is not text was checked as empty: it is reported as unreadable.
    reported = {e.cell for e in result.errors}
    result.errors.extend(
        FileError(path, reason, None, index, ErrorKind.SYNTAX)
        for index, reason in nb.bad_sources.items()
        if index not in reported
    )
    return result


def check_any(
    text: str,
    path: str,
    settings: Settings | None = None,
    codes: frozenset[str] | None = None,
    *,
    live: LiveFacts | None = None,
) -> FileResult:
    if path.endswith(".ipynb"):
        return check_notebook(text, path, settings, codes, live=live)
    return check_text(text, path, settings, codes=codes, live=live)


def select_fixes(findings: list[Finding], unsafe: bool) -> list[tuple[Finding, Fix]]:
    """Non-overlapping bulk fixes, earliest first. The spans taken are kept sorted, so that each
    fix is compared with its neighbours only (a file with 100,000 fixes takes no longer per fix
    than one with ten)."""
    chosen: list[tuple[Finding, Fix]] = []
    taken: list[tuple[Pos, Pos]] = []
    edits: set[Edit] = set()
    for finding in sorted(findings, key=lambda f: f.range.start):
        fix = finding.bulk_fix(unsafe)
        if fix is None or not fix.edits:
            continue
        if edits.issuperset(fix.edits):
            # The same edits as fixes chosen already (two findings, one fix): fixed with them.
            chosen.append((finding, fix))
            continue
        spans = [(e.start, e.end) for e in fix.edits]
        if any(_overlaps_taken(s, taken) for s in spans):
            continue
        chosen.append((finding, fix))
        edits.update(fix.edits)
        for span in spans:
            bisect.insort(taken, span)
    return chosen


def _overlaps_taken(span: tuple[Pos, Pos], taken: list[tuple[Pos, Pos]]) -> bool:
    """Whether ``span`` overlaps one of ``taken`` (sorted, and overlapping none of each other):
    only those that start from just before it up to its end can."""
    start, end = span
    i = bisect.bisect_left(taken, (start, start))
    j = i - 1
    while j >= 0 and (taken[j][1] > start or taken[j][0] == start):
        if _overlaps(span, taken[j]):
            return True
        j -= 1
    if j >= 0 and _overlaps(span, taken[j]):
        return True
    while i < len(taken) and taken[i][0] <= end:
        if _overlaps(span, taken[i]):
            return True
        i += 1
    return False


def _overlaps(a: tuple[Pos, Pos], b: tuple[Pos, Pos]) -> bool:
    if a[0] == a[1] and b[0] == b[1]:
        return a[0] == b[0]
    return (a[0] < b[1] and b[0] < a[1]) or a[0] == b[0]


@dataclass
class FixOutcome:
    text: str
    applied: dict[str, int]
    result: FileResult
    error: FileError | None = None


def fix_any(
    text: str,
    path: str,
    settings: Settings | None = None,
    *,
    unsafe: bool = False,
    codes: frozenset[str] | None = None,
    live: LiveFacts | None = None,
) -> FixOutcome:
    """Apply bulk fixes until none is left (at most ``MAX_FIX_ROUNDS`` rounds)."""
    applied: dict[str, int] = {}
    current = text
    result = check_any(current, path, settings, codes, live=live)
    for _ in range(MAX_FIX_ROUNDS):
        if any(not broken_cell(e) for e in result.errors):
            break
        chosen = select_fixes(result.findings, unsafe)
        if not chosen:
            break
        edits = list(dict.fromkeys(e for _f, fix in chosen for e in fix.edits))
        try:
            if result.notebook is not None:
                new = result.notebook.apply(edits)
            else:
                new = apply_edits(current, edits)
        except ValueError as exc:
            return FixOutcome(
                current,
                applied,
                result,
                FileError(path, f"fix not applied: {exc}", kind=ErrorKind.FIX),
            )
        new_result = check_any(new, path, settings, codes, live=live)
        if any(
            e.kind in (ErrorKind.SYNTAX, ErrorKind.NOTEBOOK) and e not in result.errors
            for e in new_result.errors
        ):
            codes_tried = ", ".join(sorted({f.code for f, _ in chosen}))
            return FixOutcome(
                current,
                applied,
                result,
                FileError(
                    path,
                    f"fix of {codes_tried} produced invalid code; file left unchanged",
                    kind=ErrorKind.FIX,
                ),
            )
        for finding, _fix in chosen:
            applied[finding.code] = applied.get(finding.code, 0) + 1
        current, result = new, new_result
    return FixOutcome(current, applied, result)


def broken_cell(error: FileError) -> bool:
    """A notebook cell that does not parse: the other cells are checked and fixed."""
    return error.kind is ErrorKind.SYNTAX and error.cell is not None


def is_display_only(fix: Fix) -> bool:
    return fix.applicability is Applicability.SUGGESTION

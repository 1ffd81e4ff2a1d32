"""``torchdoctor run --profile``: a few steps under ``torch.profiler.profile(with_stack=True)``,
then PyTorch's own anti-pattern matcher (``torch.profiler._pattern_matcher``) over them.

Runs inside the user's process (standard library and torch only); the bootstrap executes this
file when ``--profile`` is given. The matcher is private to PyTorch: every use of it is guarded,
and when it is missing or has changed the result says so instead of failing the run.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from collections.abc import Callable
from typing import Any

#: The patterns run, the devices they apply to, and the code each match is reported under.
#: SynchronizedDataLoaderPattern is left out: it fires for any loader without workers, fast or
#: not; the run's own data-stall measurement (TDR310) reports a loader only when waiting for it
#: costs.
PATTERNS: tuple[tuple[str, bool, str], ...] = (
    # (class name, CUDA only, code)
    ("GradNotSetToNonePattern", False, "TDR111"),
    ("ForLoopIndexingPattern", False, "TDR409"),
    ("Conv2dBiasFollowedByBatchNorm2dPattern", False, "TDR409"),
    ("OptimizerSingleTensorPattern", True, "TDR409"),
    ("FP32MatMulPattern", True, "TDR409"),
    ("ExtraCUDACopyPattern", True, "TDR409"),
    ("MatMulDimInFP16Pattern", True, "TDR409"),
)
_NAME = re.compile(r"^(.*)\((\d+)\): (.*)$")
_MAX_MATCHES = 10000


def start(torch: Any) -> Any:
    """Start the profiler; its object (stopped with :func:`stop`)."""
    enabled = getattr(torch.autograd, "_profiler_enabled", None)
    if enabled is not None and enabled():
        raise RuntimeError("a profiler is already running (the script's own)")
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    prof = torch.profiler.profile(activities=activities, with_stack=True, record_shapes=True)
    prof.__enter__()
    return prof


def stop(prof: Any) -> None:
    prof.__exit__(None, None, None)


def analyse(
    prof: Any, torch: Any, is_user: Callable[[str], bool], cuda: bool, steps: int
) -> dict[str, Any]:
    """Run the matcher's patterns over the profiled steps: ``{"status", "detail", "steps",
    "patterns", "findings"}``; status ``ok``, or ``unavailable`` (the private module is missing
    or changed)."""
    result: dict[str, Any] = {
        "status": "ok",
        "detail": "",
        "steps": steps,
        "patterns": [],
        "findings": [],
    }
    try:
        import importlib

        matcher = importlib.import_module("torch.profiler._pattern_matcher")
    except Exception as exc:  # ImportError, or anything the module raises while loading
        result.update(status="unavailable", detail=f"{type(exc).__name__}: {exc}"[:300])
        return result
    resolve = _Resolver(is_user)
    missing: list[str] = []
    failed: list[str] = []
    sites: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for name, cuda_only, code in PATTERNS:
        if cuda_only and not cuda:
            continue
        cls = getattr(matcher, name, None)
        if not isinstance(cls, type):
            missing.append(name)
            continue
        try:
            pattern = cls(prof)
            events = list(pattern.matched_events())[:_MAX_MATCHES]
        except Exception as exc:
            failed.append(f"{name} ({type(exc).__name__})")
            continue
        result["patterns"].append(name)
        ids = {id(e) for e in events}
        for event in events:
            if _has_matched_ancestor(event, ids):  # a wrapper around the same call
                continue
            where = _locate(event, name, resolve)
            if where is None:
                continue
            key = (name, where[0], where[1], where[2])
            entry = sites.get(key)
            if entry is None:
                entry = sites[key] = {
                    "kind": "profiler-pattern",
                    "pattern": name,
                    "code": code,
                    "title": str(getattr(pattern, "name", name)),
                    "url": str(getattr(pattern, "url", "") or ""),
                    "path": where[0],
                    "row": where[1],
                    "col": where[2],
                    "end_row": where[1],
                    "end_col": where[3],
                    "measured": {"count": 0, "steps": steps},
                }
            entry["measured"]["count"] += 1
    if missing or failed:
        detail = []
        if missing:
            detail.append("missing: " + ", ".join(missing))
        if failed:
            detail.append("failed: " + ", ".join(failed))
        result["detail"] = "; ".join(detail)
        if not result["patterns"]:
            result["status"] = "unavailable"
    result["findings"] = list(sites.values())
    return result


def _has_matched_ancestor(event: Any, ids: set[int]) -> bool:
    parent = getattr(event, "parent", None)
    while parent is not None:
        if id(parent) in ids:
            return True
        parent = getattr(parent, "parent", None)
    return False


class _Resolver:
    """The profiler shortens file names (relative to an entry of ``sys.path``): the absolute
    path of one, and whether it is the user's code."""

    def __init__(self, is_user: Callable[[str], bool]) -> None:
        self.is_user = is_user
        self.cache: dict[str, str | None] = {}

    def user_path(self, name: str) -> str | None:
        if name in self.cache:
            return self.cache[name]
        found: str | None = None
        if name and not name.startswith("<"):
            if os.path.isabs(name):
                candidates = [name]
            else:
                candidates = [os.path.join(p or os.getcwd(), name) for p in sys.path]
            for candidate in candidates:
                if os.path.isfile(candidate):
                    absolute = os.path.abspath(candidate)
                    found = absolute if self.is_user(absolute) else None
                    break
        self.cache[name] = found
        return found


def _locate(event: Any, pattern: str, resolve: _Resolver) -> tuple[str, int, int, int] | None:
    """The user's line a match comes from: the call in the user's code that led to it (path,
    row, col, end col); for a loop's indexing, the loop in the user's function that runs it."""
    if pattern == "ForLoopIndexingPattern":
        return _indexing_loop(event, resolve)
    node = event
    while node is not None:
        caller = getattr(getattr(node, "extra_fields", None), "caller", None)
        if caller is not None:
            path = resolve.user_path(str(getattr(caller, "file_name", "")))
            if path is not None:
                return _call_at(path, int(caller.line_number))
        node = getattr(node, "parent", None)
    return None


def _call_at(path: str, row: int) -> tuple[str, int, int, int]:
    """The line's first non-blank column and its end."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        text = lines[row - 1]
        stripped = text.strip()
        col = len(text) - len(text.lstrip()) + 1
        return path, row, col, col + len(stripped)
    except (OSError, IndexError, UnicodeDecodeError):
        return path, row, 1, 1


def _indexing_loop(event: Any, resolve: _Resolver) -> tuple[str, int, int, int] | None:
    """The op runs in the innermost user function on the stack (its frame's event is named
    ``file(line): function``): the loop there that indexes with its own variable."""
    node = getattr(event, "parent", None)
    while node is not None:
        match = _NAME.match(str(getattr(node, "name", "")))
        if match is not None:
            path = resolve.user_path(match.group(1))
            if path is not None:
                return _loop_in(path, int(match.group(2)), match.group(3))
            return None
        node = getattr(node, "parent", None)
    return None


def _loop_in(path: str, first: int, function: str) -> tuple[str, int, int, int]:
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return path, first, 1, 1
    scope: ast.AST = tree
    if function != "<module>":
        for node in ast.walk(tree):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name == function
                and min([node.lineno, *(d.lineno for d in node.decorator_list)]) == first
            ):
                scope = node
                break
        else:
            return path, first, 1, 1
    for loop in _loops(scope):
        targets = {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}
        for node in ast.walk(loop):
            if isinstance(node, ast.Subscript) and any(
                isinstance(n, ast.Name) and n.id in targets for n in ast.walk(node.slice)
            ):
                end = loop.iter.end_col_offset or loop.col_offset
                return path, loop.lineno, loop.col_offset + 1, end + 2  # through the colon
    row = getattr(scope, "lineno", first)
    return path, row, getattr(scope, "col_offset", 0) + 1, getattr(scope, "col_offset", 0) + 1


def _loops(scope: ast.AST) -> list[ast.For]:
    """The ``for`` loops of the scope, not of the functions or classes it defines."""
    out: list[ast.For] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.For):
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out

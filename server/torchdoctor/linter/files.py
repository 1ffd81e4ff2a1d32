"""Finding the files to check: folders walked with ``.gitignore`` and ``exclude`` honoured."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pathspec

from ..core.reading import real_path
from .configuration import ConfigFinder

SUFFIXES = (".py", ".ipynb")
# Folders no user wants linted (as in Ruff's defaults).
DEFAULT_EXCLUDES = frozenset(
    {
        ".bzr",
        ".direnv",
        ".eggs",
        ".git",
        ".git-rewrite",
        ".hg",
        ".ipynb_checkpoints",
        ".mypy_cache",
        ".nox",
        ".pants.d",
        ".pyenv",
        ".pytest_cache",
        ".pytype",
        ".ruff_cache",
        ".svn",
        ".tox",
        ".venv",
        ".vscode",
        "__pypackages__",
        "_build",
        "buck-out",
        "dist",
        "node_modules",
        "site-packages",
        "venv",
        ".torchdoctor_cache",
    }
)


def _gitignore(directory: Path) -> pathspec.PathSpec | None:
    path = directory / ".gitignore"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.PathSpec.from_lines("gitwildmatch", lines)


def is_python_file(path: Path) -> bool:
    """A Python file or notebook: by its suffix, or a script without one whose first line is a
    ``#!`` line that runs Python (``bin/train``)."""
    if path.name.endswith(SUFFIXES):
        return True
    if path.suffix:
        return False
    try:
        with path.open("rb") as handle:
            first = handle.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def discover(
    paths: list[str], finder: ConfigFinder, skipped: list[Path] | None = None
) -> Iterator[Path]:
    """Files to check. Files named explicitly are always checked when they are Python files or
    notebooks (``is_python_file``); others (``notes.txt``) are added to ``skipped``. Symlinks
    are followed, and each real file and folder is visited once: a link loop ends, and a file
    reached by two routes is checked (and reported) once, under the first."""
    seen: set[Path] = set()  # real paths of the files yielded
    visited: set[Path] = set()  # real paths of the folders walked
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            if not is_python_file(path):
                if skipped is not None:
                    skipped.append(path)
                continue
            if _first(path, seen):
                yield path
            continue
        if not path.is_dir():
            yield path  # reported as unreadable by the caller
            continue
        specs: list[tuple[Path, pathspec.PathSpec]] = []
        # .gitignore files above the starting folder, up to the repository root.
        for parent in reversed(real_path(path).parents):
            spec = _gitignore(parent)
            if spec is not None:
                specs.append((parent, spec))
            if (parent / ".git").exists():
                specs = [(p, s) for p, s in specs if p == parent or parent in p.parents]
        if _ignored(path, True, specs):
            specs = []  # a folder named explicitly is checked even when an outer .gitignore hides it
        yield from _walk(path, specs, finder, seen, visited)


def _ignored(
    path: Path,
    is_dir: bool,
    specs: list[tuple[Path, pathspec.PathSpec]],
    resolved: Path | None = None,
) -> bool:
    """Whether a ``.gitignore`` of ``specs`` hides ``path`` (``resolved``: its real path, when
    the caller knows it)."""
    if not specs:
        return False
    if resolved is None:
        resolved = real_path(path)
    for base, spec in specs:
        try:
            rel = resolved.relative_to(base).as_posix()
        except ValueError:
            continue
        if spec.match_file(rel + ("/" if is_dir else "")):
            return True
    return False


def _walk(
    root: Path,
    specs: list[tuple[Path, pathspec.PathSpec]],
    finder: ConfigFinder,
    seen: set[Path],
    visited: set[Path],
) -> Iterator[Path]:
    try:
        real = root.resolve()
    except (OSError, RuntimeError):
        return
    if real in visited:
        return
    visited.add(real)
    spec = _gitignore(root)
    local = [*specs, (real, spec)] if spec is not None else specs
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        try:
            is_dir = entry.is_dir()
        except OSError:
            continue
        if not is_dir and not entry.name.endswith(SUFFIXES):
            continue  # headers, stubs, binaries: not even a path object for them
        path = Path(entry.path)
        try:
            # The real path of an entry that is not a link is the real folder's path joined
            # with its name: no system call (``resolve`` makes one per part of the path).
            entry_real = None if entry.is_symlink() else real / entry.name
        except OSError:
            continue
        if is_dir:
            if entry.name in DEFAULT_EXCLUDES or _ignored(path, True, local, entry_real):
                continue
            if finder.for_path(path, entry_real, is_dir=True).is_excluded(path):
                continue
            yield from _walk(path, local, finder, seen, visited)
        elif entry.name.endswith(SUFFIXES):
            if _ignored(path, False, local, entry_real):
                continue
            if finder.for_path(path, entry_real, is_dir=False).is_excluded(path):
                continue
            if _first(path, seen, entry_real):
                yield path


def _first(path: Path, seen: set[Path], real: Path | None = None) -> bool:
    """Whether this is the first time the file ``path`` leads to is met (and note it);
    ``real``: its real path, when the caller knows it."""
    if real is None:
        try:
            real = path.resolve()
        except (OSError, RuntimeError):
            real = path
    if real in seen:
        return False
    seen.add(real)
    return True

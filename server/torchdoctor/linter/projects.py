"""The projects files are checked in: one ``core.project.Project`` per project root, kept for the
life of the process, so that the modules a check reads from other files are parsed once and the
names it resolves are resolved once."""

from __future__ import annotations

import os
import threading

from ..core.project import KeptModules, Overlay, Project, project_roots

_INSTALLED = frozenset({"site-packages", "dist-packages"})


class Projects:
    """The projects of the files checked in this process (the CLI's workers, a language server:
    one each); ``overlay`` gives the text of files open in an editor."""

    def __init__(
        self, overlay: Overlay | None = None, *, query_seconds: float | None = None
    ) -> None:
        self._overlay = overlay
        self._query_seconds = query_seconds
        self._by_roots: dict[tuple[str, ...], Project] = {}
        self._root_of: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()
        self._kept = KeptModules()  # one bound for the modules of all the projects

    def for_path(self, path: str) -> Project | None:
        """The project of a file; None for text that is not a file (``<stdin>``, untitled) and
        for a file of an installed package (under ``site-packages``): its imports are that
        library's own, resolved as the engine resolves any installed name."""
        if not path or path.startswith("<"):
            return None
        folder = os.path.dirname(os.path.abspath(path))
        if _INSTALLED.intersection(folder.split(os.sep)):
            return None
        if not os.path.isdir(folder):
            return None
        with self._lock:
            roots = self._root_of.get(folder)
            if roots is None:
                roots = self._root_of[folder] = tuple(project_roots(folder))
            project = self._by_roots.get(roots)
            if project is None:
                limit = (
                    {} if self._query_seconds is None else {"query_seconds": self._query_seconds}
                )
                project = self._by_roots[roots] = Project(
                    roots, overlay=self._overlay, kept=self._kept, **limit
                )
            return project

    def changed(self, path: str | None = None) -> None:
        """A file changed (None: files were added or removed)."""
        with self._lock:
            projects = list(self._by_roots.values())
            if path is None:
                self._root_of.clear()
        for project in projects:
            project.changed(path)

    def dependents(self, path: str) -> set[str]:
        """Files whose last check read facts of ``path``."""
        with self._lock:
            projects = list(self._by_roots.values())
        out: set[str] = set()
        for project in projects:
            out |= project.dependents(path)
        return out

    def reads(self, path: str) -> list[str]:
        """The project files and folders the last check of ``path`` depended on."""
        project = self.for_path(path)
        return project.reads(path) if project is not None else []

    def close(self) -> None:
        with self._lock:
            projects = list(self._by_roots.values())
            self._by_roots.clear()
        for project in projects:
            project.close()


# The CLI's projects (each worker process has its own).
DEFAULT = Projects()

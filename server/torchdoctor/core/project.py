"""The user's project: its own modules, and what a name imported from one of them refers to.

Training code is spread over files: the sampler is built in ``data.py``, the epoch loop is in
``train.py``, saving goes through a helper in ``utils.py``. ``Project`` resolves a name imported
from the project's own code (the checked file's folder and the project's roots, packages,
relative imports, re-exports in ``__init__.py``) to its definition, and hands out the parsed
facts (``Semantic``) of the module that defines it, so that the subject modules (kinds,
training, data, checkpoints) read a helper in another file as they read one in the same file.
Where the files say it plainly (a module file on the search path, a ``def``, ``class`` or
assignment of the name there, re-exports by import) the answer is read from them; otherwise (a
star import, a name the module does not bind at its top level, a namespace package) jedi is
asked.

Names from torch, the standard library and other installed packages are never resolved here:
only a module found as a ``.py`` file or package folder in the project's folders (the file's
folder and those above it up to the project root) is asked about, and jedi's search path holds
only those folders. jedi runs in this process (no virtual environment needed), never imports a
module to inspect it (a compiled extension would run code), and each query has a time limit.
Parsed modules are cached by file content; answers are cached until a file they depend on
changes.
"""

from __future__ import annotations

import ast
import concurrent.futures
import os
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .incremental import parse_text
from .reading import read_source
from .semantic import Binding, Semantic

# How long one jedi query may take, and how many may time out before jedi is left alone for the
# rest of the run (a project too large or too dynamic to resolve in time).
QUERY_SECONDS = 2.0
MAX_TIMEOUTS = 3
MAX_MODULE_BYTES = 2 * 1024 * 1024
# How much module text the parsed modules kept between checks may hold (about 40 bytes of tree
# and facts per byte of text, and as much again of facts derived from them): past it, the modules
# used least recently are dropped (parsed again when asked) before the next check starts, down to
# half of it, so that a large project is checked in bounded memory.
MAX_KEPT_TEXT = 6 * 1024 * 1024
_TEXT = "project-text"  # the checked text, in ``sem.memo``
_NOT_PROJECT = frozenset(sys.stdlib_module_names) | {"torch", "torchvision", "numpy"}
# How many project modules the import graph is followed through to find one that imports torch.
MAX_IMPORTED_MODULES = 400
# An import of torch or of a package built on it (``torchvision``, ``torchaudio``): a statement
# of its own line, at any depth (a function's lazy import counts).
_TORCH_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+torch\w*[ \t.]|import[ \t]+(?:[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*,[ \t]*)*"
    r"torch\w*\b)",
    re.M,
)
# The import statements of a module, read without parsing it: ``from (dots)(module) import
# (names)`` and ``import (modules)``.
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)"
    r"|import[ \t]+([^\n#;]*))",
    re.M,
)


class KeptModules:
    """The parsed modules kept between checks, across the projects that share it, bounded by
    their text (:data:`MAX_KEPT_TEXT`): when a check starts and none is under way, the modules
    used least recently are dropped, down to half the bound, and the facts derived from the
    others released."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = MAX_KEPT_TEXT if limit is None else limit
        self._recent: OrderedDict[tuple[Project, str], int] = OrderedDict()  # oldest first
        self._text = 0
        self._checks = 0  # checks under way
        self._lock = threading.RLock()

    def used(self, project: Project, path: str) -> None:
        with self._lock:
            if (project, path) in self._recent:
                self._recent.move_to_end((project, path))

    def stored(self, project: Project, path: str, size: int) -> None:
        with self._lock:
            self._text += size - self._recent.pop((project, path), 0)
            self._recent[(project, path)] = size

    def begin(self) -> None:
        with self._lock:
            if self._text > self.limit and not self._checks:
                self._shrink()
            self._checks += 1

    def end(self) -> None:
        with self._lock:
            self._checks = max(0, self._checks - 1)

    def _shrink(self) -> None:
        while self._recent and self._text > self.limit // 2:
            (project, path), size = self._recent.popitem(last=False)
            project._drop(path)
            self._text -= size
        for project in {project for project, _path in self._recent}:
            project._release_derived()


class _QueryStopped(BaseException):
    """Raised inside a jedi query past its time limit (a BaseException: jedi's own ``except
    Exception`` handlers let it through)."""


def _bounded(deadline: float, stop: threading.Event, query: Callable[[], Any]) -> Any:
    """``query()`` in this thread, stopped at the first Python call after ``deadline`` or after
    ``stop`` is set: a query past its limit ends and uses no more CPU, instead of running on in
    a thread nobody waits for (which also kept the command line from exiting)."""

    def tracer(_frame: Any, event: str, _arg: Any) -> None:
        if event == "call" and (stop.is_set() or time.monotonic() > deadline):
            raise _QueryStopped
        return None  # no line events: only calls are watched

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        return query()
    except _QueryStopped:
        return None
    finally:
        sys.settrace(previous)


@dataclass(frozen=True)
class Module:
    """One parsed module of the project."""

    path: str
    text: str
    sem: Semantic


@dataclass(frozen=True)
class Target:
    """Where jedi says an imported name is defined."""

    path: str
    name: str
    type: str  # function | class | module | statement | ...
    line: int


# How many files of a project are searched for the callers of a function, and how many of
# those that call it are read (``calling``).
MAX_SCANNED_FILES = 2000
MAX_CALLING_MODULES = 32
_NOT_SCANNED = frozenset(
    {"site-packages", "dist-packages", "node_modules", "__pycache__", "venv", "build", "dist"}
)
Overlay = Callable[[str], "str | None"]
# The files do not say plainly where an import leads: jedi is asked.
_ASK_JEDI = Target("", "", "", 0)
_NAMESPACE = "<namespace package>"


class Project:
    """The modules of one project and the definitions of names imported across them."""

    def __init__(
        self,
        roots: Iterable[str | Path] = (),
        *,
        overlay: Overlay | None = None,
        query_seconds: float = QUERY_SECONDS,
        kept: KeptModules | None = None,
    ) -> None:
        self.roots: tuple[str, ...] = tuple(dict.fromkeys(os.path.abspath(r) for r in roots))
        self._overlay = overlay  # the text of files open in an editor, by path
        self._query_seconds = query_seconds
        self._modules: dict[str, tuple[object, Module | None]] = {}
        self._kept = kept if kept is not None else KeptModules()
        self._targets: dict[tuple[str, str, int, str], Target | None] = {}
        self._used: dict[str, set[str]] = {}  # importer path -> module paths its checks read
        self._searched: set[str] = set()  # importers whose checks looked for project modules
        self._last_owner: Semantic | None = None
        self._lock = threading.RLock()
        self._timeouts = 0
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._jedi: Any = None
        self._env: Any = None
        self._jedi_projects: dict[tuple[str, ...], Any] = {}
        self._paths: dict[str, tuple[str, ...]] = {}
        self._starring: set[str] = set()  # modules whose star imports are being bound
        # path -> (stamp, imports torch, project modules it imports): the import graph
        self._imports: dict[str, tuple[object, bool, tuple[str, ...]]] = {}
        self._gate_reads: dict[str, set[str]] = {}  # modules ``uses_torch`` read, by importer
        self._files: list[str] | None = None  # the .py files under the roots (``files``)
        self._calling: dict[str, list[str]] = {}  # (folder, name) -> files calling it

    # ------------------------------------------------------------------ modules ----------
    def module(self, path: str) -> Module | None:
        """The parsed facts of a project file (from the editor's text when it is open there),
        cached by content; None when it cannot be read or parsed."""
        path = os.path.abspath(path)
        text = self._overlay(path) if self._overlay is not None else None
        stamp = _version_stamp(path, text)
        if stamp is None:
            return None
        with self._lock:
            cached = self._modules.get(path)
        if cached is not None and cached[0] == stamp:
            self._kept.used(self, path)  # (outside the lock: KeptModules takes it after its own)
            return cached[1]
        if text is None:
            text, _error = read_source(Path(path))
        found: Module | None = None
        if text is not None:
            tree, _error = parse_text(text, path)
            if tree is not None:
                try:
                    sem = Semantic(tree)
                except RecursionError:
                    sem = None
                if sem is not None:
                    self.adopt(sem, path, text)
                    found = Module(path, text, sem)
        with self._lock:
            self._modules[path] = (stamp, found)
        self._kept.stored(self, path, len(text or ""))
        return found

    def _drop(self, path: str) -> None:
        """Forget the parsed module at ``path`` (``KeptModules`` bounds what is kept)."""
        with self._lock:
            self._modules.pop(path, None)
            self._last_owner = None

    def _release_derived(self) -> None:
        """Drop the facts derived from the modules kept (none then refers to a dropped one)."""
        with self._lock:
            modules = [m for _s, m in self._modules.values() if m is not None]
            self._last_owner = None
        for module in modules:
            module.sem.release()

    def adopt(self, sem: Semantic, path: str, text: str | None = None) -> None:
        """Let ``sem`` (the facts of ``text``, the file at ``path``) resolve names through this
        project."""
        sem.project = self
        sem.path = os.path.abspath(path)
        if text is not None:
            sem.memo[_TEXT] = text
        if sem.star_imports:
            self._bind_stars(sem)

    # -- star imports ----------------------------------------------------------------------
    def _bind_stars(self, sem: Semantic) -> None:
        """Bind the names each ``from m import *`` of a project module ``m`` brings into
        ``sem`` (``torch``, ``nn``, ``DataLoader`` that ``m`` imports, its functions and
        classes), so that they resolve as if imported one by one."""
        path = sem.path
        assert path is not None
        with self._lock:
            if path in self._starring:
                return  # modules that star-import each other
            self._starring.add(path)
        try:
            for stmt in sem.star_imports:
                module = self._star_module(sem, stmt)
                if module is not None:
                    sem.bind_star_import(stmt, self._exports(module))
        finally:
            with self._lock:
                self._starring.discard(path)

    def _star_module(self, sem: Semantic, stmt: ast.ImportFrom) -> Module | None:
        """The project module a ``from m import *`` of ``sem`` reads, if it is one."""
        path = sem.path
        if path is None or not self._in_project(path, stmt, stmt.names[0]):
            return None
        parts = [p for p in (stmt.module or "").split(".") if p]
        base = self._module_file(path, stmt.level, parts)
        if base is None or base is _NAMESPACE:
            return None
        module = self.module(base)
        if module is not None:
            with self._lock:
                self._used.setdefault(path, set()).add(module.path)
        return module

    def _exports(self, module: Module) -> dict[str, str | None]:
        """The names ``from module import *`` binds (``__all__`` when it lists them, else the
        public module-level names), each with its qualified name when the module imports it
        from an installed package, else None."""
        sem = module.sem
        public = _listed_names(sem.tree)
        out: dict[str, str | None] = {}
        for name, bindings in sem.scopes[sem.tree].bindings.items():
            if (name not in public) if public is not None else name.startswith("_"):
                continue
            last = bindings[-1]
            qual = None
            if last.how == "import" and isinstance(last.node, ast.alias):
                stmt = sem.parent(last.node)
                if last.node.name == "*" or (
                    isinstance(stmt, ast.Import | ast.ImportFrom)
                    and not self._in_project(module.path, stmt, last.node)
                ):
                    qual = last.qualname
            out[name] = qual
        return out

    def _star_definition(self, sem: Semantic, binding: Binding) -> tuple[Semantic, ast.AST] | None:
        """What a name bound by ``from m import *`` stands for in the project module ``m``."""
        stmt = sem.parent(binding.node)
        if not isinstance(stmt, ast.ImportFrom):
            return None
        module = self._star_module(sem, stmt)
        if module is None:
            return None
        bindings = module.sem.scopes[module.sem.tree].bindings.get(binding.name)
        if not bindings:
            return None
        last = bindings[-1]
        if last.how == "assign":
            return _top_level(module.sem, binding.name, getattr(last.node, "lineno", 0))
        return module.sem.binding_definition(last)

    def scripts_beside(self, path: str, limit: int) -> list[Module]:
        """The other ``.py`` files of the folder holding ``path`` (at most ``limit``, by name),
        parsed: the scripts of a project that write files another one reads (``train.py``
        saves the checkpoint ``test.py`` loads). None for a file of a package (a folder with
        ``__init__.py``)."""
        path = os.path.abspath(path)
        folder = os.path.dirname(path)
        if os.path.isfile(os.path.join(folder, "__init__.py")):
            return []  # a package holds modules that import each other, not separate scripts
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))
        except OSError:
            return []
        out: list[Module] = []
        for name in names[:limit]:
            other = os.path.join(folder, name)
            if other == path:
                continue
            found = self.module(other)
            if found is not None:
                out.append(found)
        with self._lock:
            self._used.setdefault(path, set()).update(m.path for m in out)
            self._searched.add(path)
        return out

    def files(self) -> list[str]:
        """The ``.py`` files under the project's roots, by path (hidden folders, virtual
        environments and installed packages left out; at most ``MAX_SCANNED_FILES``)."""
        with self._lock:
            if self._files is not None:
                return self._files
        found: dict[str, None] = {}
        for root in self.roots:
            for folder, dirs, names in os.walk(root):
                dirs[:] = sorted(
                    d
                    for d in dirs
                    if not d.startswith(".")
                    and d not in _NOT_SCANNED
                    and not os.path.isfile(os.path.join(folder, d, "pyvenv.cfg"))
                )
                found.update(
                    (os.path.join(folder, n), None) for n in sorted(names) if n.endswith(".py")
                )
                if len(found) >= MAX_SCANNED_FILES:
                    break
        files = list(found)[:MAX_SCANNED_FILES]
        with self._lock:
            self._files = files
        return files

    def calling(self, path: str, name: str) -> list[Module]:
        """The project's modules other than ``path`` whose text calls ``name(...)`` (or
        ``x.name(...)``), parsed (the first ``MAX_CALLING_MODULES`` by path); read by the
        check of ``path`` (``reads``). Where a helper's
        values come from when its callers are in other modules (``train.py`` seeds, then
        calls ``create_dataloader(..., shuffle=True)`` of ``utils/dataloaders.py``)."""
        path = os.path.abspath(path)
        # Only the files under the folder that holds the module's top-level package (or the
        # module, outside a package) have it on their search path.
        base = os.path.dirname(path)
        while os.path.isfile(os.path.join(base, "__init__.py")):
            base = os.path.dirname(base)
        base = os.path.join(base, "")
        key = f"{base}\0{name}"
        with self._lock:
            hits = self._calling.get(key)
        if hits is None:
            pattern = re.compile(rf"\b{re.escape(name)}\s*\(")
            hits = []
            for other in self.files():
                if not other.startswith(base):
                    continue
                text = self._raw_text(other)
                if text is not None and name in text and pattern.search(text):
                    hits.append(other)
                    if len(hits) > MAX_CALLING_MODULES:
                        break
            with self._lock:
                self._calling[key] = hits
        # An importer names the module, or a package it is re-exported from: read only those.
        marks = {os.path.splitext(os.path.basename(path))[0]} - {"__init__"}
        folder = os.path.dirname(path)
        while os.path.join(folder, "") != base and len(folder) > len(base):
            marks.add(os.path.basename(folder))
            folder = os.path.dirname(folder)
        named = [
            h
            for h in hits
            if h != path and any(mark in (self._raw_text(h) or "") for mark in marks)
        ]
        out = [m for m in (self.module(h) for h in named) if m is not None]
        out = out[:MAX_CALLING_MODULES]
        with self._lock:
            self._used.setdefault(path, set()).update(m.path for m in out)
            self._searched.add(path)
        return out

    def containing(self, path: str, needle: str, limit: int) -> list[Module]:
        """The project's modules other than ``path`` whose text holds ``needle``, parsed (the
        first ``limit`` by path, under the folder that holds the module's top-level package);
        read by the check of ``path`` (``reads``). The modules that write the checkpoints a
        script reads from a path it is given (``CheckpointSaver`` of ``utils/`` saves what
        ``average.py`` loads)."""
        path = os.path.abspath(path)
        base = os.path.dirname(path)
        while os.path.isfile(os.path.join(base, "__init__.py")):
            base = os.path.dirname(base)
        base = os.path.join(base, "")
        key = f"\1{base}\0{needle}"
        with self._lock:
            hits = self._calling.get(key)
        if hits is None:
            hits = []
            for other in self.files():
                if other.startswith(base) and needle in (self._raw_text(other) or ""):
                    hits.append(other)
                    if len(hits) > limit:
                        break
            with self._lock:
                self._calling[key] = hits
        out = [m for m in (self.module(h) for h in hits if h != path) if m is not None][:limit]
        with self._lock:
            self._used.setdefault(path, set()).update(m.path for m in out)
            self._searched.add(path)
        return out

    def _raw_text(self, path: str) -> str | None:
        """A file's text as it is searched for names (the editor's, or read from disk)."""
        text = self._overlay(path) if self._overlay is not None else None
        if text is not None:
            return text
        try:
            if os.path.getsize(path) > MAX_MODULE_BYTES:
                return None
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return None

    def owner(self, node: ast.AST) -> Semantic | None:
        """The facts of the project module a node belongs to (for nodes of another module)."""
        last = self._last_owner
        if last is not None and (node is last.tree or node in last.parents):
            return last  # nodes are mostly asked about many times over, module by module
        with self._lock:
            modules = [m for _s, m in self._modules.values() if m is not None]
        for module in modules:
            sem = module.sem
            if node is sem.tree or node in sem.parents:
                self._last_owner = sem
                return sem
        return None

    def changed(self, path: str | None = None) -> None:
        """A file of the project changed on disk or in the editor (None: files were added or
        removed): answers that may depend on it are dropped."""
        with self._lock:
            self._calling.clear()
            if path is None:
                self._files = None
            if path is None or os.path.basename(path) == "__init__.py":
                self._targets.clear()
                return
            path = os.path.abspath(path)
            for key, target in list(self._targets.items()):
                if target is not None and target.path == path:
                    del self._targets[key]

    def dependents(self, path: str) -> set[str]:
        """The files whose last check read facts of the module at ``path``."""
        path = os.path.abspath(path)
        with self._lock:
            return {who for who, used in self._used.items() if path in used and who != path}

    def begin(self, path: str) -> None:
        """A check of ``path`` starts: what it reads from other modules is recorded anew
        (with the modules ``uses_torch`` read for it, when it asked just before)."""
        path = os.path.abspath(path)
        self._kept.begin()
        with self._lock:
            self._used[path] = self._gate_reads.pop(path, set())
            self._searched.discard(path)

    # ------------------------------------------------------------------ torch reach ------
    def uses_torch(self, path: str, text: str) -> bool:
        """Whether the file at ``path`` (whose text is ``text``) imports a module of the
        project that imports torch (or ``torchvision``...), directly or through other project
        modules it imports (``import onmt.inputters`` whose ``__init__.py`` imports
        ``onmt.inputters.inputter``, which imports torch): the objects it handles then come
        from torch code, though its own text never names torch. The imports are read from the
        modules' text without parsing them (a file of a project without torch costs one scan of
        its text and of the project modules it imports, each read once per version).

        What the answer was read from is recorded as what the file's check depends on: when it
        is False, as the whole of it; when it is True, for the check that follows."""
        path = os.path.abspath(path)
        seen = {path}
        queue = list(self._imported_modules(path, text))
        read: set[str] = set()
        found = False
        while queue and len(seen) <= MAX_IMPORTED_MODULES:
            module = queue.pop(0)
            if module in seen:
                continue
            seen.add(module)
            facts = self._import_facts(module)
            if facts is None:
                continue
            read.add(module)
            if facts[0]:
                found = True
                break
            queue.extend(facts[1])
        with self._lock:
            if found:
                self._gate_reads[path] = read
            else:
                self._gate_reads.pop(path, None)
                self._used[path] = read
                self._searched.add(path)
        return found

    def _import_facts(self, path: str) -> tuple[bool, tuple[str, ...]] | None:
        """Whether a project module imports torch, and the project modules it imports
        (cached by version); None when it cannot be read."""
        text = self._overlay(path) if self._overlay is not None else None
        stamp = _version_stamp(path, text)
        if stamp is None:
            return None
        with self._lock:
            known = self._imports.get(path)
        if known is not None and known[0] == stamp:
            return known[1], known[2]
        if text is None:
            text, _error = read_source(Path(path))
            if text is None:
                return None
        torch = _TORCH_IMPORT.search(text) is not None
        imported = () if torch else self._imported_modules(path, text)
        with self._lock:
            self._imports[path] = (stamp, torch, imported)
        return torch, imported

    def _imported_modules(self, importer: str, text: str) -> tuple[str, ...]:
        """The files of the project modules ``text`` (the file at ``importer``) imports: for
        ``import a.b``, ``a`` and ``a.b``; for ``from a import b``, ``a`` and ``a.b`` when it is
        a module."""
        out: dict[str, None] = {}

        def add(level: int, parts: list[str]) -> str | None:
            if not level and (not parts or parts[0] in _NOT_PROJECT):
                return None
            if not level and not self._top_in_project(importer, parts[0]):
                return None
            found = self._module_file(importer, level, parts)
            if found is None or found is _NAMESPACE:
                return None
            out[os.path.abspath(found)] = None
            return found

        for match in _IMPORT.finditer(text):
            dots, module, names, plain = match.groups()
            if plain is not None:
                for item in plain.split(","):
                    parts = item.split()[0].split(".") if item.split() else []
                    for end in range(1, len(parts) + 1):
                        if add(0, parts[:end]) is None:
                            break
                continue
            level = len(dots or "")
            parts = [p for p in (module or "").split(".") if p]
            base = add(level, parts) if parts or level else None
            if base is None and parts and not level:
                continue
            for item in (names or "").strip("() \t").split(","):
                words = item.split()
                if words and words[0] != "*" and words[0].isidentifier():
                    add(level, [*parts, words[0]])
        return tuple(out)

    def _top_in_project(self, importer: str, top: str) -> bool:
        for folder in self._search_path(importer):
            base = os.path.join(folder, top)
            if os.path.isfile(base + ".py") or os.path.isdir(base):
                return True
        return False

    def end(self, path: str) -> None:
        """The check of ``path`` that ``begin`` started is over."""
        self._kept.end()

    def reads(self, path: str) -> list[str]:
        """What the last check of ``path`` depended on besides its own text: the project
        modules it read, and (when it looked for any) the folders it looked for modules in,
        whose listing decides what an import resolves to. A result kept for ``path`` is stale
        when one of them changed."""
        path = os.path.abspath(path)
        with self._lock:
            used = sorted(self._used.get(path, ()))
            searched = path in self._searched
        folders = {os.path.dirname(u) for u in used}
        if searched:
            folders.update(self._search_path(path))
        # The packages a module was reached through may re-export it: their __init__.py too.
        inits = set()
        for folder in folders:
            while os.path.isfile(os.path.join(folder, "__init__.py")):
                inits.add(os.path.join(folder, "__init__.py"))
                folder = os.path.dirname(folder)
        return sorted({*used, *inits}) + sorted(folders)

    # ------------------------------------------------------------------ resolution -------
    def resolve(self, sem: Semantic, binding: Binding) -> tuple[Semantic, ast.AST] | None:
        """The definition an import binding of ``sem`` refers to, in a project module: a
        function, a class, a module, or the statement that assigns a module-level name."""
        if binding.how != "import" or sem.path is None:
            return None
        alias = binding.node
        stmt = sem.parent(alias)
        if not isinstance(alias, ast.alias) or not isinstance(stmt, ast.Import | ast.ImportFrom):
            return None
        if alias.name == "*":
            return self._star_definition(sem, binding)
        module = stmt.module or "" if isinstance(stmt, ast.ImportFrom) else ""
        level = stmt.level if isinstance(stmt, ast.ImportFrom) else 0
        key = (sem.path, module, level, alias.name)
        with self._lock:
            known = key in self._targets
            target = self._targets.get(key)
        if self._may_be_project(stmt, alias):
            with self._lock:
                self._searched.add(sem.path)
        if not known:
            if not self._in_project(sem.path, stmt, alias):
                with self._lock:
                    self._targets[key] = None
                return None
            target = self._direct(sem.path, stmt, alias)
            if target is _ASK_JEDI:
                line, column = _name_position(stmt, alias)
                target = self._query(sem, line, column)
            with self._lock:
                self._targets[key] = target
        if target is None:
            return None
        found = self.module(target.path)
        if found is None:
            return None
        with self._lock:
            self._used.setdefault(sem.path, set()).add(found.path)
        if target.type == "module":
            return found.sem, found.sem.tree
        return _top_level(found.sem, target.name, target.line)

    def imported_from_project(self, sem: Semantic, binding: Binding) -> bool:
        """Whether an import binding of ``sem`` may name something of the project's own
        modules (a cheap test: the top-level module is a file or folder of the project)."""
        alias = binding.node
        stmt = sem.parent(alias)
        if sem.path is None or not isinstance(alias, ast.alias):
            return False
        if not isinstance(stmt, ast.Import | ast.ImportFrom):
            return False
        return self._in_project(sem.path, stmt, alias)

    def imported_module(self, sem: Semantic, name: str) -> Semantic | None:
        """The facts of the project module a dotted name (``onmt.model_builder``) imported by
        ``sem``'s file stands for."""
        parts = name.split(".")
        if sem.path is None or parts[0] in _NOT_PROJECT:
            return None
        if not self._top_in_project(sem.path, parts[0]):
            return None
        found = self._module_file(sem.path, 0, parts)
        if found is None or found is _NAMESPACE:
            return None
        module = self.module(found)
        if module is None:
            return None
        with self._lock:
            self._used.setdefault(sem.path, set()).add(module.path)
        return module.sem

    # -- the plain cases, read from the files ----------------------------------------------
    def _direct(
        self, importer: str, stmt: ast.Import | ast.ImportFrom, alias: ast.alias, depth: int = 0
    ) -> Target | None:
        """Where an import leads when the files say it plainly: a module file found on the
        search path, and a ``def``, ``class`` or assignment of the name in it, following
        re-exports (``from .data import build_loader`` in ``__init__.py``). ``_ASK_JEDI`` when
        they do not (a star import, a name the module does not bind, a namespace package)."""
        if depth > 6:
            return _ASK_JEDI
        if isinstance(stmt, ast.Import):
            parts = alias.name.split(".")
            if alias.asname is None:
                parts = parts[:1]  # `import a.b` binds `a`
            found = self._module_file(importer, 0, parts)
            if found is None or found is _NAMESPACE:
                return None if found is None else _ASK_JEDI
            return Target(found, parts[-1], "module", 1)
        parts = [p for p in (stmt.module or "").split(".") if p]
        base = self._module_file(importer, stmt.level, parts)
        if base is None or base is _NAMESPACE:
            return None if base is None else _ASK_JEDI  # no such file: jedi finds none either
        target = self._binding_target(base, alias.name, depth)
        if target is not _ASK_JEDI:
            return target
        if os.path.basename(base) == "__init__.py":  # `from pkg import submodule`
            sub = self._module_file(base, 1, [alias.name])
            if sub is not None and sub is not _NAMESPACE:
                return Target(sub, alias.name, "module", 1)
        return _ASK_JEDI

    def _binding_target(self, path: str, name: str, depth: int) -> Target | None:
        module = self.module(path)
        if module is None:
            return _ASK_JEDI
        tree = module.sem.tree
        if any(
            isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names) for s in tree.body
        ):
            return _ASK_JEDI
        bindings = module.sem.scopes[tree].bindings.get(name)
        if not bindings:
            return _ASK_JEDI
        last = bindings[-1]
        if last.how in ("def", "class"):
            kind = "class" if last.how == "class" else "function"
            return Target(path, name, kind, getattr(last.node, "lineno", 1))
        if last.how == "assign":
            return Target(path, name, "statement", getattr(last.node, "lineno", 1))
        if last.how == "import" and isinstance(last.node, ast.alias):
            inner = module.sem.parent(last.node)
            if isinstance(inner, ast.Import | ast.ImportFrom):
                if not self._in_project(path, inner, last.node):
                    return None  # re-exported from torch or another installed package
                return self._direct(path, inner, last.node, depth + 1)
        return _ASK_JEDI

    def _module_file(self, importer: str, level: int, parts: list[str]) -> str | None:
        """The ``.py`` file of a module (a package's ``__init__.py``), searched as the import
        statement of ``importer`` would; None when there is none, ``_NAMESPACE`` for a folder
        without ``__init__.py`` (a namespace package, or compiled modules)."""
        if level:
            folder = os.path.dirname(importer)
            for _ in range(level - 1):
                folder = os.path.dirname(folder)
            folders: Sequence[str] = (folder,)
        else:
            folders = self._search_path(importer)
        for folder in folders:
            path = os.path.join(folder, *parts)
            if parts and os.path.isfile(path + ".py"):
                return path + ".py"
            if os.path.isfile(os.path.join(path, "__init__.py")):
                return os.path.join(path, "__init__.py")
            if parts and os.path.isdir(path):
                return _NAMESPACE  # a namespace package, or a package of compiled modules
        return None

    @staticmethod
    def _may_be_project(stmt: ast.Import | ast.ImportFrom, alias: ast.alias) -> bool:
        """Whether the import could name a project module (not torch, not the standard
        library), wherever the project's files are."""
        if isinstance(stmt, ast.ImportFrom) and stmt.level:
            return True
        name = stmt.module if isinstance(stmt, ast.ImportFrom) else alias.name
        top = (name or "").split(".")[0]
        return bool(top) and top not in _NOT_PROJECT

    def _in_project(
        self, importer: str, stmt: ast.Import | ast.ImportFrom, alias: ast.alias
    ) -> bool:
        if isinstance(stmt, ast.ImportFrom) and stmt.level:
            return True
        if not self._may_be_project(stmt, alias):
            return False
        name = stmt.module if isinstance(stmt, ast.ImportFrom) else alias.name
        top = (name or "").split(".")[0]
        for folder in self._search_path(importer):
            base = os.path.join(folder, top)
            if os.path.isfile(base + ".py") or os.path.isdir(base):
                return True
        return False

    def _search_path(self, importer: str) -> tuple[str, ...]:
        """Where a file's imports are looked for: its folder and the folders above it up to the
        project's root (scripts in ``tools/`` import the root's packages, often after adding
        the root to ``sys.path`` themselves), then the project's roots."""
        known = self._paths.get(importer)
        if known is not None:
            return known
        folders = [os.path.dirname(importer)]
        if any(self._under_roots(importer, [root]) for root in self.roots):
            while folders[-1] not in self.roots:
                parent = os.path.dirname(folders[-1])
                if parent == folders[-1]:
                    break
                folders.append(parent)
        found = tuple(dict.fromkeys((*folders, *self.roots)))
        self._paths[importer] = found
        return found

    def _query(self, sem: Semantic, line: int, column: int) -> Target | None:
        """Ask jedi where the name at (line, column) of ``sem``'s file is defined, within the time
        limit; None when jedi cannot say or takes too long."""
        assert sem.path is not None
        if self._timeouts >= MAX_TIMEOUTS:
            return None
        text = self._text_of(sem)
        if text is None:
            return None
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    1, thread_name_prefix="torchdoctor-jedi"
                )
            executor = self._executor
        path = sem.path
        stop = threading.Event()
        deadline = time.monotonic() + self._query_seconds
        future = executor.submit(
            _bounded, deadline, stop, lambda: self._goto(text, path, line, column)
        )
        try:
            # The query stops itself at its deadline; the wait allows for a query queued behind
            # one that is stopping.
            result = future.result(timeout=self._query_seconds + 5.0)
        except concurrent.futures.TimeoutError:
            stop.set()
            result = None
        except Exception:  # jedi failing on odd code must not fail the check
            return None
        # An answer that came after the limit is not used either (the wait can return an answer
        # that came just too late): whether a name is known never depends on who was scheduled
        # first, only on how long the query took.
        if time.monotonic() > deadline:
            self._timeouts += 1
            return None
        return result if isinstance(result, Target) else None

    def _text_of(self, sem: Semantic) -> str | None:
        assert sem.path is not None
        own = sem.memo.get(_TEXT)
        if isinstance(own, str):
            return own
        with self._lock:
            cached = self._modules.get(sem.path)
        if cached is not None and cached[1] is not None and cached[1].sem is sem:
            return cached[1].text
        return None

    def _goto(self, text: str, path: str, line: int, column: int) -> Target | None:
        jedi = self._load_jedi()
        if jedi is None:
            return None
        search = self._search_path(path)
        project = self._jedi_projects.get(search)
        if project is None:
            project = jedi.Project(
                self.roots[0] if self.roots else search[0],
                sys_path=list(search),
                load_unsafe_extensions=False,
                smart_sys_path=False,
            )
            self._jedi_projects[search] = project
        script = jedi.Script(text, path=path, project=project, environment=self._environment())
        for name in script.goto(line, column, follow_imports=True):
            where = name.module_path
            if where is None or name.line is None:
                continue
            where = str(where)
            if not where.endswith(".py") or not self._under_roots(where, search):
                continue
            return Target(os.path.abspath(where), name.name, name.type, name.line)
        return None

    @staticmethod
    def _under_roots(path: str, roots: Sequence[str]) -> bool:
        path = os.path.abspath(path)
        return any(path.startswith(os.path.join(root, "")) for root in roots)

    def _load_jedi(self) -> Any:
        if self._jedi is None:
            try:
                import jedi
            except ImportError:  # pragma: no cover - jedi is a dependency
                self._jedi = False
            else:
                self._jedi = jedi
        return self._jedi or None

    def _environment(self) -> Any:
        """jedi's view of the interpreter: this process (no virtual environment needed), where
        a module that is not imported yet is never imported to be inspected. (jedi would import
        a compiled extension it meets — ``from . import _C`` — and with it the package around
        it, running its code.)"""
        if self._env is None:
            from jedi.api.environment import InterpreterEnvironment
            from jedi.inference.compiled.subprocess import InferenceStateSameProcess

            class NoImports(InferenceStateSameProcess):
                def __getattr__(self, name: str) -> Any:
                    found = super().__getattr__(name)
                    if name != "load_module":
                        return found

                    def load_module(**kwargs: Any) -> Any:
                        dotted = kwargs.get("dotted_name") or ""
                        if dotted in sys.modules or dotted in sys.builtin_module_names:
                            return found(**kwargs)  # already there: importing runs nothing
                        return None

                    return load_module

            class Environment(InterpreterEnvironment):
                def get_inference_state_subprocess(self, inference_state: Any) -> Any:
                    return NoImports(inference_state)

            self._env = Environment()
        return self._env

    def close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


def _name_position(stmt: ast.Import | ast.ImportFrom, alias: ast.alias) -> tuple[int, int]:
    """Where jedi should look: the imported name itself (the last part of a dotted module)."""
    line, column = alias.lineno, alias.col_offset
    if isinstance(stmt, ast.Import) and "." in alias.name:
        column += alias.name.rindex(".") + 1
    return line, column


def _listed_names(tree: ast.Module) -> set[str] | None:
    """The names a module's ``__all__`` lists (a literal list or tuple of strings), else None."""
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets)
            and isinstance(stmt.value, ast.List | ast.Tuple)
        ):
            return {
                e.value
                for e in stmt.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
    return None


def _top_level(sem: Semantic, name: str, line: int) -> tuple[Semantic, ast.AST] | None:
    """The module-level definition of ``name`` that jedi placed at ``line``."""
    scope = sem.scopes.get(sem.tree)
    if scope is None:
        return None
    bindings = scope.bindings.get(name, [])
    for binding in bindings:
        node = binding.node
        first = min(
            [getattr(node, "lineno", 0)] + [d.lineno for d in getattr(node, "decorator_list", ())]
        )
        if first <= line <= getattr(node, "end_lineno", first) and binding.how in ("def", "class"):
            return sem, node
    for binding in reversed(bindings):
        if binding.how in ("def", "class"):
            return sem, binding.node
        if binding.how == "assign":
            return sem, binding.node
    return None


def project_roots(path: str | Path) -> list[str]:
    """The roots a file's imports are searched from: the nearest folder above it holding
    ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git`` (the project root), and a
    ``src/`` folder there."""
    here = Path(os.path.abspath(path))
    folder = here if here.is_dir() else here.parent
    for candidate in (folder, *folder.parents):
        if any(
            (candidate / marker).exists()
            for marker in ("pyproject.toml", "setup.py", "setup.cfg", ".git")
        ):
            roots = [str(candidate)]
            if (candidate / "src").is_dir():
                roots.append(str(candidate / "src"))
            return roots
    return [str(folder)]


def _version_stamp(path: str, text: str | None) -> object | None:
    """What identifies this version of a module: the editor's text when it is open there,
    else its size and time on disk; None when it cannot be read or is too large."""
    if text is not None:
        return ("text", hash(text), len(text))
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_size > MAX_MODULE_BYTES:
        return None
    return ("disk", st.st_mtime_ns, st.st_size)

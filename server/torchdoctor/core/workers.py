"""Which code starts worker processes, and which of a script's module-level code does.

A worker process starts when a ``DataLoader`` whose ``num_workers`` is not 0 is iterated, or
when ``multiprocessing`` / ``torch.multiprocessing`` starts one (``Process(...).start()``,
``Pool(...)``, ``spawn(...)``). ``num_workers`` is read where the call gives it: as an argument,
or in a dict that ``**kwargs`` spreads (``kwargs = {"num_workers": 1} if cuda else {}``: either
branch may be the one that runs).

A function starts workers when it (or a function it calls) starts processes, or builds a
worker loader and does more with it than hand it back. Callees are followed across the project:
functions of this file and of the project's other modules, constructors and methods of project
classes called through an instance (``exp = Exp(args); exp.train(s)``, with ``Exp`` bound in any
branch of an ``if``) or through ``self``.

``offense`` answers for one call of module-level code: what to report and what starts the
workers; ``running_calls`` lists the calls a module-level statement runs on import. The fix
that moves a script under a main guard is in ``main_guard``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from . import arguments
from .data import loader_values, sources
from .semantic import FUNCTION_NODES, Semantic, is_main_guard

Func = ast.FunctionDef | ast.AsyncFunctionDef

# Calls that start worker processes as soon as they run.
PROCESS_STARTERS = frozenset(
    {
        "multiprocessing.Pool",
        "multiprocessing.pool.Pool",
        "torch.multiprocessing.Pool",
        "torch.multiprocessing.spawn",
        "torch.multiprocessing.start_processes",
    }
)
PROCESS_CLASSES = frozenset({"multiprocessing.Process", "torch.multiprocessing.Process"})
MAX_DEPTH = 8
# Words without which no code of the file itself can start a worker process (a cheap filter).
_STARTER_NAMES = frozenset({"DataLoader", "Process", "Pool", "spawn", "start_processes"})
# Builtins that read a loader without iterating it (``len(loader)`` starts no worker).
_READERS = frozenset({"len", "print", "repr", "str", "id", "type", "isinstance", "hasattr"})


def may_start_workers(sem: Semantic) -> bool:
    """Whether the file may start worker processes itself (it calls one of the starters by
    name, or imports one under another name) or through a module of its project."""
    return (
        not _STARTER_NAMES.isdisjoint(sem.calls_by_name)
        or not _STARTER_NAMES.isdisjoint(sem.calls_by_attr)
        or any(alias.name.rsplit(".", 1)[-1] in _STARTER_NAMES for _n, alias, _q in sem.imports)
        or (sem.project is not None and bool(sem.imports))
    )


def running_calls(sem: Semantic, top: ast.stmt) -> list[ast.Call]:
    """Calls in a module-level statement that run on import, in source order: not inside
    nested defs, lambdas or classes, nor under a nested ``if __name__ == "__main__":``."""
    calls: list[ast.Call] = []
    guards: list[ast.If] = []
    for node in sem.walk(top):  # nested defs, lambdas and classes are not entered
        kind = type(node)
        if kind is ast.Call:
            calls.append(node)  # type: ignore[arg-type]
        elif kind is ast.If and is_main_guard(node):
            guards.append(node)  # type: ignore[arg-type]
    if guards:
        calls = [
            call
            for call in calls
            if not any(sem.is_inside(call, stmt) for guard in guards for stmt in guard.body)
        ]
    return sorted(calls, key=lambda n: (n.lineno, n.col_offset))


def reachable_functions(sem: Semantic, calls: Iterable[ast.Call]) -> set[ast.AST]:
    """Local functions called (directly or through each other) by ``calls``."""
    seen: set[ast.AST] = set()
    todo: list[ast.AST] = _called_functions(sem, calls)
    while todo:
        func = todo.pop()
        if func in seen:
            continue
        seen.add(func)
        todo.extend(_called_functions(sem, sem.walk(func)))
    return seen


def offense(
    sem: Semantic, node: ast.AST, reachable: set[ast.AST]
) -> tuple[ast.AST, ast.AST | None] | None:
    """(where to report, what starts the workers) for a call of module-level code that starts
    worker processes; None for any other node."""
    if not isinstance(node, ast.Call):
        return None
    if starts_processes(sem, node):
        return node, None
    if is_worker_loader(sem, node):
        return (node, None) if used_here(sem, node, reachable) else None
    for owner, func in callees(sem, node):
        cause = function_starts(owner, func, set())
        if cause is not None:
            return node, cause
        returned = returned_loader(owner, func)
        if returned is not None and used_here(sem, node, reachable):
            return node, returned
    return None


# ---- what a call starts ------------------------------------------------------------------
def is_worker_loader(sem: Semantic, call: ast.Call) -> bool:
    """A ``DataLoader(...)`` whose ``num_workers`` is set and not literally 0: as an argument,
    or in a dict spread by ``**kwargs`` (``data.loader_values``)."""
    if sem.qualname(call.func) != arguments.DATALOADER:
        return False
    return any(not _is_zero(sem, v) for v in loader_values(sem, call, "num_workers"))


def starts_processes(sem: Semantic, call: ast.Call) -> bool:
    """A ``multiprocessing`` start: a pool, ``spawn``, or ``Process(...).start()``."""
    return sem.qualname(call.func) in PROCESS_STARTERS or _process_start(sem, call)


def function_starts(sem: Semantic, func: Func, seen: set[ast.AST]) -> ast.AST | None:
    """The call inside ``func`` (or a function it calls, in this module or another of the
    project) that starts worker processes; ``sem``: the facts of ``func``'s module."""
    if func in seen or len(seen) > MAX_DEPTH:
        return None
    seen.add(func)
    found: ast.AST | None = None
    for node in sem.walk(func):
        if isinstance(node, ast.Attribute):
            found = _self_loader_used(sem, node)
        elif not isinstance(node, ast.Call):
            continue
        elif starts_processes(sem, node) or (
            is_worker_loader(sem, node) and not _handed_on(sem, node, func)
        ):
            found = node
        else:
            for owner, callee in callees(sem, node):
                found = function_starts(owner, callee, seen)
                if found is not None:
                    break
                returned = returned_loader(owner, callee)
                if returned is not None and not _handed_on(sem, node, func):
                    found = returned
                    break
        if found is not None:
            break
    return found


def _handed_on(sem: Semantic, value: ast.expr, func: Func) -> bool:
    """Whether a loader made in ``func`` is only returned, or kept on ``self`` for a method to
    iterate later (that method starts the workers, when it runs)."""
    if only_returned(sem, value, func):
        return True
    parent = sem.parent(value)
    return (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and _self_attribute(parent.targets[0]) is not None
    )


def _self_loader_used(sem: Semantic, node: ast.Attribute) -> ast.AST | None:
    """The worker loader a method iterates or passes on as ``self.attr``: one its class keeps
    there (built in place, or returned by a helper)."""
    attr = _self_attribute(node)
    if attr is None or not isinstance(node.ctx, ast.Load) or _only_read(sem, node):
        return None
    cls = sem.enclosing_class(node)
    if cls is None:
        return None
    for value in sem.self_attr_values.get((cls, attr), ()):
        if not isinstance(value, ast.Call):
            continue
        if is_worker_loader(sem, value):
            return value
        for owner, callee in callees(sem, value):
            returned = returned_loader(owner, callee)
            if returned is not None:
                return returned
    return None


def _self_attribute(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "self" else None
    return None


def returned_loader(sem: Semantic, func: Func, _depth: int = 0) -> ast.Call | None:
    """The worker ``DataLoader(...)`` a function returns, if any: built there, or returned by
    a function whose result it returns in turn."""
    for node in sem.walk(func):
        if not isinstance(node, ast.Call) or not only_returned(sem, node, func):
            continue
        if is_worker_loader(sem, node):
            return node
        if _depth < MAX_DEPTH:
            for owner, callee in callees(sem, node):
                if callee is not func:
                    found = returned_loader(owner, callee, _depth + 1)
                    if found is not None:
                        return found
    return None


def only_returned(sem: Semantic, value: ast.expr, func: Func) -> bool:
    """Whether ``value`` is returned by ``func`` without being used there."""
    parent = sem.parent(value)
    if isinstance(parent, ast.Return):
        return True
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        target = parent.targets[0]
        if isinstance(target, ast.Name):
            loads = [
                n
                for n in sem.walk(func)
                if isinstance(n, ast.Name) and n.id == target.id and isinstance(n.ctx, ast.Load)
            ]
            return bool(loads) and all(isinstance(sem.parent(n), ast.Return) for n in loads)
    return False


def callees(sem: Semantic, call: ast.Call) -> list[tuple[Semantic, Func]]:
    """The functions a call may run, with the facts of their modules: a function of this file
    or of another project module, a project class's ``__init__``, or a method called through
    ``self`` or through an instance of a project class."""
    local = sem.local_function(call.func)
    if local is not None:
        return [(sem, local)]
    func = call.func
    if isinstance(func, ast.Name) and sem.lookup(func.id, func) is None:
        return []  # a builtin
    defined = sem.function_def(func)
    if defined is not None:
        return [defined]
    found = sem.class_def(func)
    if found is not None:
        return _method(found[0], found[1], "__init__")
    if not isinstance(func, ast.Attribute):
        return []
    owner = func.value
    if isinstance(owner, ast.Name) and owner.id == "self":
        enclosing = sem.enclosing_class(call)
        return _method(sem, enclosing, func.attr) if enclosing is not None else []
    if not isinstance(owner, ast.Name):
        return []
    out: list[tuple[Semantic, Func]] = []
    for made in sources(sem, owner)[0]:
        if not isinstance(made, ast.Call):
            continue
        for defining, cls in _classes(sem, made.func):
            for method in _method(defining, cls, func.attr):
                if all(method[1] is not f for _s, f in out):
                    out.append(method)
    return out


def _classes(sem: Semantic, expr: ast.expr, _depth: int = 0) -> list[tuple[Semantic, ast.ClassDef]]:
    """The project classes ``expr`` may name: a class, or a name assigned classes (every
    assignment of its scope, as in ``if task == "a": Exp = A`` / ``else: Exp = B``)."""
    found = sem.class_def(expr)
    if found is not None:
        return [found]
    if not isinstance(expr, ast.Name) or _depth > 3:
        return []
    binding = sem.lookup(expr.id, expr)
    if binding is None or binding.how != "assign":
        return []
    out: list[tuple[Semantic, ast.ClassDef]] = []
    for other in sem.scopes[binding.scope].bindings.get(expr.id, []):
        if other.how == "assign" and other.index is None and isinstance(other.value, ast.Name):
            out += _classes(sem, other.value, _depth + 1)
    return out


def _method(
    sem: Semantic, cls: ast.ClassDef, name: str, _depth: int = 0
) -> list[tuple[Semantic, Func]]:
    """The method ``name`` of a class, looked up in the class and its project bases."""
    for stmt in cls.body:
        if isinstance(stmt, FUNCTION_NODES) and stmt.name == name:
            return [(sem, stmt)]
    if _depth > 4:
        return []
    for base in cls.bases:
        found = sem.class_def(base) if isinstance(base, ast.Name | ast.Attribute) else None
        if found is not None and found[1] is not cls:
            method = _method(found[0], found[1], name, _depth + 1)
            if method:
                return method
    return []


# ---- how module-level code uses a loader --------------------------------------------------
def used_here(sem: Semantic, value: ast.expr, reachable: set[ast.AST]) -> bool:
    """Whether a loader made at module level is used by code that runs on import: iterated or
    passed on right there, or bound to a name that running code (or a function it calls)
    iterates or passes on. Reading it (``len(loader)``, ``loader.dataset``) starts no worker."""
    parent = sem.parent(value)
    if isinstance(parent, ast.For | ast.Call | ast.keyword | ast.comprehension):
        return True
    if not (
        isinstance(parent, ast.Assign)
        and len(parent.targets) == 1
        and isinstance(parent.targets[0], ast.Name)
    ):
        return False
    name = parent.targets[0].id
    start = (parent.lineno, parent.col_offset)
    for load in sem.names.get(name, ()):
        binding = sem.lookup(name, load)
        if binding is None or binding.node is not parent.targets[0] or _only_read(sem, load):
            continue
        if sem.runs_on_import(load) and (load.lineno, load.col_offset) > start:
            return True
        func = sem.enclosing_function(load)
        if func is not None and func in reachable:
            return True
    return False


def _only_read(sem: Semantic, load: ast.expr) -> bool:
    """A use of a loader that does not iterate it: an attribute read, or an argument of a
    builtin such as ``len``."""
    parent = sem.parent(load)
    if isinstance(parent, ast.Attribute):
        return parent.attr not in ("__iter__", "__next__")
    if isinstance(parent, ast.Call) and load in parent.args:
        func = parent.func
        return (
            isinstance(func, ast.Name) and func.id in _READERS and sem.lookup(func.id, func) is None
        )
    return False


# ---- small facts -----------------------------------------------------------------------
def _called_functions(sem: Semantic, nodes: Iterable[ast.AST]) -> list[ast.AST]:
    out: list[ast.AST] = []
    for node in nodes:
        if isinstance(node, ast.Call):
            func = sem.local_function(node.func)
            if func is not None:
                out.append(func)
    return out


def _is_zero(sem: Semantic, expr: ast.expr) -> bool:
    if isinstance(expr, ast.Constant):
        return bool(expr.value == 0)
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return False
        bindings = sem.scopes[binding.scope].bindings.get(expr.id, [])
        if len(bindings) == 1 and binding.value is not None:
            return isinstance(binding.value, ast.Constant) and binding.value.value == 0
    return False


def _process_start(sem: Semantic, call: ast.Call) -> bool:
    """``Process(...).start()`` or ``p.start()`` with ``p = Process(...)``."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr != "start":
        return False
    owner = func.value
    if isinstance(owner, ast.Name):
        binding = sem.lookup(owner.id, owner)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return False
        owner = binding.value  # type: ignore[assignment]
    return isinstance(owner, ast.Call) and sem.qualname(owner.func) in PROCESS_CLASSES

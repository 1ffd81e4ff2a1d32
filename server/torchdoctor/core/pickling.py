"""What pickling a value for a worker process would meet that cannot be pickled.

Under the ``spawn`` and ``forkserver`` start methods a DataLoader pickles its dataset,
``collate_fn`` and ``worker_init_fn`` to send them to each worker. A ``lambda`` and a function
defined inside another function cannot be pickled ("Can't pickle local object"). They hide:

- in a transform pipeline (``Compose([Lambda(lambda x: ...)])``, the arguments of torchvision's
  and torchaudio's transforms), through names and what functions of the project return;
- as what a helper returns: ``Lambda(expand(3))`` where ``expand`` returns its nested ``inner``;
- on the dataset itself: an attribute its class sets on ``self`` (``self.prep = lambda t: ...``,
  ``self.transform = Compose([...])``), for a class of this file or of the project.

``unpicklable`` finds them in a value; ``held_by_instance`` in the attributes of the object a
constructor call makes. Each is given as (where it is when in another module, else "", node).
"""

from __future__ import annotations

import ast

from .semantic import FUNCTION_NODES, Semantic

# Callables whose arguments the object they build keeps (a transform, a webdataset stage).
_TRANSFORM_MODULES = (
    "torchvision.transforms.",
    "torchaudio.transforms.",
    "torchvision.transforms",
    "webdataset.",
)
_TRANSFORM_PACKAGES = ("torchvision", "torchaudio", "webdataset")
# Loaders that pickle their dataset for each worker, besides torch's DataLoader.
LOADERS = frozenset({"webdataset.WebLoader", "webdataset.compat.WebLoader"})
_LIST_ADDITIONS = ("append", "extend", "insert")
_MAX_DEPTH = 10
_CUSTOM_PICKLING = frozenset({"__getstate__", "__reduce__", "__reduce_ex__"})
Found = list[tuple[Semantic, ast.AST]]
Func = ast.FunctionDef | ast.AsyncFunctionDef


def is_local_callable(sem: Semantic, value: ast.AST) -> bool:
    """A lambda, or a name of a function defined inside another function."""
    if isinstance(value, ast.Lambda):
        return True
    if isinstance(value, ast.Name):
        binding = sem.lookup(value.id, value)
        if (
            binding is not None
            and binding.how == "def"
            and isinstance(binding.node, FUNCTION_NODES)
        ):
            return any(
                isinstance(a, (*FUNCTION_NODES, ast.Lambda)) for a in sem.ancestors(binding.node)
            )
    return False


def unpicklable(sem: Semantic, value: ast.AST, pipeline_only: bool = False) -> Found:
    """The lambdas and nested functions that pickling ``value`` (a transform pipeline, a
    callable, what a helper returns) would meet, with the facts of the module each is in;
    ``value`` itself when it is one. A nested function that a helper returns is given as the
    helper's call (``expand(3)`` in ``Lambda(expand(3))``): the place that puts it into the
    pipeline. ``pipeline_only``: only those inside a transform's arguments."""
    found: Found = []
    seen: set[ast.AST] = set()
    # depth first, in source order; the call that brought the value, when it came from a helper
    todo: list[tuple[ast.AST | None, int, ast.Call | None, bool]] = [(value, 0, None, False)]
    while todo:
        expr, depth, via, piped = todo.pop()
        if expr is None or depth > _MAX_DEPTH or expr in seen:
            continue
        seen.add(expr)
        owner = sem.owner(expr)
        inner: list[ast.AST | None] = []
        if is_local_callable(owner, expr):
            if pipeline_only and not piped:
                continue
            # A lambda is its own place; a nested function is put in by the call that returns it.
            node = via if via is not None and isinstance(expr, ast.Name) else expr
            if all(node is not n for _s, n in found):
                found.append((sem.owner(node), node))
        elif isinstance(expr, ast.List | ast.Tuple):
            inner = list(expr.elts)
        elif isinstance(expr, ast.Starred):
            inner = [expr.value]
        elif isinstance(expr, ast.Name):
            binding = owner.lookup(expr.id, expr)
            if binding is not None and binding.how == "assign" and binding.index is None:
                inner = [binding.value]
                if binding.value is not None and owner.is_inside(expr, binding.value):
                    # ``ds = ds.with_epoch(n)``: the values ``ds`` held before (any branch).
                    inner = [
                        b.value
                        for b in owner.scopes[binding.scope].bindings.get(expr.id, [])
                        if b.pos < binding.pos and b.how == "assign" and b.index is None
                    ]
                elif isinstance(binding.value, ast.List):
                    inner += _added_to_list(owner, expr.id, binding.scope)
        elif isinstance(expr, ast.Call):
            qual = owner.qualname(expr.func) or ""
            if qual.startswith(_TRANSFORM_MODULES):
                inner = [*expr.args, *(k.value for k in expr.keywords)]
                piped = True
            else:
                defined = owner.function_def(expr.func)
                if defined is not None:
                    inner = list(defined[0].returns(defined[1]))
                    via = via if via is not None else expr
                elif isinstance(expr.func, ast.Attribute) and not qual:
                    # A method of a pipeline returns the pipeline (``ds.with_epoch(n)``).
                    inner = [expr.func.value]
        todo.extend((node, depth + 1, via, piped) for node in reversed(inner))
    return found


def _added_to_list(sem: Semantic, name: str, scope: ast.AST) -> list[ast.AST | None]:
    """What ``name.append(x)`` / ``name.extend([...])`` / ``name.insert(i, x)`` add to a list
    that ``name`` holds in ``scope``."""
    out: list[ast.AST | None] = []
    for attr in _LIST_ADDITIONS:
        for call in sem.calls_by_attr.get(attr, ()):
            func = call.func
            if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
                continue
            if func.value.id != name:
                continue
            binding = sem.lookup(name, func.value)
            if binding is not None and binding.scope is scope:
                out += call.args[1:] if attr == "insert" else call.args
    return out


def held_by_instance(sem: Semantic, made: ast.Call) -> Found:
    """The lambdas and nested functions an object keeps on ``self`` (set by any method of its
    class, a class of this file or of the project), for the object ``made`` constructs."""
    defined = sem.class_def(made.func)
    if defined is None:
        return []
    owner, cls = defined
    if any(isinstance(stmt, FUNCTION_NODES) and stmt.name in _CUSTOM_PICKLING for stmt in cls.body):
        return []  # the class decides what is pickled
    found: Found = []
    for (holder, _attr), values in owner.self_attr_values.items():
        if holder is not cls:
            continue
        for value in values:
            for item in unpicklable(owner, value):
                if all(item[1] is not node for _s, node in found):
                    found.append(item)
    return found


def exported_pipelines(sem: Semantic) -> list[tuple[Func, ast.AST]]:
    """The lambdas and nested functions of this module inside the transform pipelines that the
    functions it exports (lists in ``__all__``) return: a library's preprocessing, which its
    users hand to datasets of their DataLoaders. Each with the exported function."""
    names = _exported_names(sem.tree)
    found: list[tuple[Func, ast.AST]] = []
    if sem.project is None and not any(
        (qual or "").startswith(_TRANSFORM_PACKAGES) for _stmt, _alias, qual in sem.imports
    ):
        return found  # on its own, a file that imports no transforms builds no pipeline
    for stmt in sem.tree.body:
        if not isinstance(stmt, FUNCTION_NODES) or stmt.name not in names:
            continue
        for value in sem.returns(stmt):
            for owner, node in unpicklable(sem, value, pipeline_only=True):
                if owner is sem and all(node is not n for _f, n in found):
                    found.append((stmt, node))
    return found


def _exported_names(tree: ast.Module) -> frozenset[str]:
    """The names a module's ``__all__`` lists (a literal list or tuple of strings)."""
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets)
            and isinstance(stmt.value, ast.List | ast.Tuple)
        ):
            return frozenset(
                e.value
                for e in stmt.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return frozenset()

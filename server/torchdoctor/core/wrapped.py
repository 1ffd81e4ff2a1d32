"""Whether a model may hold a ``DataParallel``/``DistributedDataParallel`` wrapper on some run.

``distributed.wrapper_call`` answers "certainly a wrapper here"; this module answers "a wrapper
on some path to here": a name assigned a wrapper in one branch (``if n_gpu > 1: model =
DataParallel(model)``), ``self.model`` assigned such a value in some method of its class, or a
parameter of a function or constructor whose callers (in this module or, through the project,
in another one) pass such a value. The walk is flow-sensitive within each function: an
assignment that unwraps the model again (``model = model.module``, ``model = model.module if
hasattr(model, "module") else model``) before the read ends the path. All of it is read from
``Semantic`` facts.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from .kinds import MODEL_WRAPPERS
from .semantic import FUNCTION_NODES, LOOP_NODES, Semantic, dotted

# Wrappers whose state dict prefixes every key with ``module.`` (apex's DDP keeps the model
# as ``module`` too).
PREFIXING_WRAPPERS = MODEL_WRAPPERS | {"apex.parallel.DistributedDataParallel"}
# Module methods that return the module itself.
_RETURNS_SELF = frozenset(
    {"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "train", "eval", "requires_grad_"}
)
_MAX_DEPTH = 10

Site = tuple[Semantic, ast.Call]


Paths = tuple[Site | None, bool]
_PLAIN: Paths = (None, True)


def may_wrap(sem: Semantic, expr: ast.AST | None) -> Site | None:
    """The wrapper call (with the facts of its module) that ``expr`` holds on some path to its
    read, or None when no path gives it one."""
    return paths(sem, expr)[0]


def conditionally_wrapped(sem: Semantic, expr: ast.AST | None) -> Site | None:
    """The wrapper ``expr`` holds on some path to its read when another path gives it a
    plain model: which of the two reaches it depends on the run."""
    site, plain = paths(sem, expr)
    return site if plain else None


def paths(sem: Semantic, expr: ast.AST | None, _depth: int = 0) -> Paths:
    """What reaches ``expr``: a wrapper call that does on some path (or None), and whether
    some path gives it something else (a plain model, or a value the analysis cannot read)."""
    if expr is None or _depth > _MAX_DEPTH:
        return _PLAIN
    sem = sem.owner(expr)
    if isinstance(expr, ast.Call):
        return _call_paths(sem, expr, _depth)
    if isinstance(expr, ast.IfExp):
        if unwraps(sem, expr):
            return _PLAIN
        return _union(paths(sem, expr.body, _depth + 1), paths(sem, expr.orelse, _depth + 1))
    if isinstance(expr, ast.NamedExpr):
        return paths(sem, expr.value, _depth + 1)
    if isinstance(expr, ast.Name) or (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    ):
        return _read_paths(sem, expr, _depth)
    return _PLAIN


def _union(*parts: Paths) -> Paths:
    site = next((s for s, _ in parts if s is not None), None)
    return site, any(plain for _, plain in parts) or not parts


def _call_paths(sem: Semantic, call: ast.Call, depth: int) -> Paths:
    qual = sem.qualname(call.func)
    if qual in PREFIXING_WRAPPERS:
        return (sem, call), False
    if qual is not None and qual.startswith("torch."):
        return _PLAIN
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in _RETURNS_SELF and qual is None:
        if sem.function_def(func) is None:  # `model.to(device)`: the module itself
            return paths(sem, func.value, depth + 1)
    defined = sem.function_def(func)
    if defined is None:
        return _PLAIN
    owner, target = defined
    params = _params(target)
    found: list[Paths] = []
    for value in owner.returns(target):
        if isinstance(value, ast.Name) and value.id in params and _entry_reaches(owner, value):
            arg = _argument(call, target, owner, value.id)  # `return model`: what it was given
            found.append(paths(sem, arg, depth + 1) if arg is not None else _PLAIN)
        else:
            found.append(paths(owner, value, depth + 1))
    return _union(*found) if found else _PLAIN


def _read_paths(sem: Semantic, expr: ast.Name | ast.Attribute, depth: int) -> Paths:
    values, entry = reaching(sem, expr)
    found = [paths(sem, value, depth + 1) for value in values]
    if not entry:
        return _union(*found) if found else _PLAIN
    func = sem.enclosing_function(expr)
    if isinstance(expr, ast.Attribute):  # `self.model` as another method left it
        cls = sem.enclosing_class(expr)
        assigned = sem.self_attr_values.get((cls, expr.attr), []) if cls is not None else []
        if func is None or not assigned:
            return _union(*found, _PLAIN)
        return _union(*found, *(paths(sem, v, depth + 1) for v in assigned))
    if func is None or expr.id not in _params(func):
        return _union(*found, _PLAIN)
    passed = _passed(sem, func, expr.id)
    if not passed:
        return _union(*found, _PLAIN)
    return _union(*found, *(paths(caller, arg, depth + 1) for caller, arg in passed))


def reaching(sem: Semantic, expr: ast.Name | ast.Attribute) -> tuple[list[ast.expr], bool]:
    """The values assigned to ``expr``'s name (or ``self.x``) that may reach its read, going
    back through the statements of its function, and whether the function's entry may reach
    it unassigned (a parameter, or what other methods left in ``self.x``). An assignment
    later in a loop around the read reaches it in the next iteration; going further back than
    such a loop is not needed for the answer and not done."""
    target = dotted(expr)
    func = sem.enclosing_function(expr)
    if target is None:
        return [], False
    values: list[ast.expr] = []
    try:
        node: ast.AST = sem.statement_of(expr)
    except ValueError:
        return [], False
    while node is not func:
        if not isinstance(node, ast.stmt):
            return values, False
        try:
            block, index = sem.block_of(node)
        except ValueError:
            return values, False
        found, through = _block_values(sem, block[:index], target)
        values += found
        if not through:
            return values, False
        owner = sem.parent(node)
        if owner is None:
            return values, False
        if isinstance(owner, LOOP_NODES) and node in owner.body:
            later, _ = _block_values(sem, block[index + 1 :], target)
            if later or _assigned_in(sem, block[index + 1 :], target):
                return values + later, False
        node = owner
    return values, func is not None


def _block_values(sem: Semantic, block: list[ast.stmt], target: str) -> tuple[list[ast.expr], bool]:
    values: list[ast.expr] = []
    for stmt in reversed(block):
        found, through = _stmt_values(sem, stmt, target)
        values += found
        if not through:
            return values, False
    return values, True


def _stmt_values(sem: Semantic, stmt: ast.stmt, target: str) -> tuple[list[ast.expr], bool]:
    """The values ``stmt`` may assign to ``target``, and whether a path through it leaves
    ``target`` as it was."""
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if any(dotted(t) == target for t in targets):
            return ([stmt.value] if stmt.value is not None else []), False
        if any(_in_target(t, target) for t in targets):
            return [], False  # `model, opt = ...`: not followed
        return [], True
    if isinstance(stmt, ast.If):
        if _assigned_in(sem, [stmt], target) and unwraps(sem, stmt, target):
            return [], False  # `if hasattr(model, "module"): model = model.module`
        body, through_body = _block_values(sem, stmt.body, target)
        orelse, through_else = _block_values(sem, stmt.orelse, target)
        return body + orelse, through_body or through_else
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return _block_values(sem, stmt.body, target)
    if isinstance(stmt, (*FUNCTION_NODES, ast.ClassDef)):
        return [], True
    values: list[ast.expr] = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(dotted(t) == target for t in targets) and node.value is not None:
                values.append(node.value)
    return values, True  # a loop or `try` may not run its assignment


def _assigned_in(sem: Semantic, block: list[ast.stmt], target: str) -> bool:
    for stmt in block:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(_in_target(t, target) for t in targets):
                    return True
    return False


def _in_target(node: ast.expr, target: str) -> bool:
    if isinstance(node, ast.Tuple | ast.List | ast.Starred):
        parts = node.elts if isinstance(node, ast.Tuple | ast.List) else [node.value]
        return any(_in_target(e, target) for e in parts)
    return dotted(node) == target


def unwraps(sem: Semantic, node: ast.If | ast.IfExp, target: str | None = None) -> bool:
    """Whether an ``if`` (or conditional expression) tells a wrapper from a plain model: its
    test asks ``hasattr(x, "module")`` or ``isinstance(x, DataParallel)``, or one branch reads
    ``x.module`` (valid only for a wrapper) where the other uses ``x``. With ``target``, ``x``
    must be that name."""
    if tests_wrapper(sem, node.test, target):
        return True
    body = node.body if isinstance(node.body, list) else [node.body]
    orelse = node.orelse if isinstance(node.orelse, list) else [node.orelse]
    return _reads_module(body, target) or _reads_module(orelse, target)


def tests_wrapper(sem: Semantic, test: ast.expr, target: str | None = None) -> bool:
    """``hasattr(x, "module")``, ``isinstance(x, nn.DataParallel)`` (or a tuple of wrappers)
    in a condition."""
    for node in ast.walk(test):
        if not isinstance(node, ast.Call) or len(node.args) != 2:
            continue
        name = builtin(sem, node.func)
        subject, what = node.args
        if target is not None and dotted(subject) != target:
            continue
        if name == "hasattr" and isinstance(what, ast.Constant) and what.value == "module":
            return True
        if name == "isinstance":
            kinds = what.elts if isinstance(what, ast.Tuple) else [what]
            if any(sem.qualname(k) in PREFIXING_WRAPPERS for k in kinds):
                return True
    return False


def told_apart(sem: Semantic, node: ast.AST, target: str) -> bool:
    """Whether ``node`` sits in a branch of an ``if`` that tells the wrapper from the model
    (``if hasattr(model, "module"): ... else: model.state_dict()``)."""
    child: ast.AST = node
    for anc in sem.ancestors(node):
        if isinstance(anc, ast.If | ast.IfExp) and child is not anc.test:
            if unwraps(sem, anc, target):
                return True
        if isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
            return False
        child = anc
    return False


def reads_alike(sem: Semantic, owner: ast.expr) -> list[ast.expr]:
    """The reads of the same name in the same function, or of ``self.x`` in the same class."""
    if isinstance(owner, ast.Name):
        func = sem.enclosing_function(owner)
        return [
            n
            for n in sem.names.get(owner.id, ())
            if isinstance(n.ctx, ast.Load) and sem.enclosing_function(n) is func
        ]
    if isinstance(owner, ast.Attribute):
        cls = sem.enclosing_class(owner)
        return [
            a
            for a in sem.attributes.get(owner.attr, ())
            if isinstance(a.value, ast.Name)
            and a.value.id == "self"
            and isinstance(a.ctx, ast.Load)
            and sem.enclosing_class(a) is cls
        ]
    return [owner]


def builtin(sem: Semantic, func: ast.expr) -> str | None:
    """The builtin a callee names (``getattr``, ``hasattr``...), unless the module rebinds it."""
    if isinstance(func, ast.Name) and sem.lookup(func.id, func) is None:
        return func.id
    return None


def _reads_module(nodes: Sequence[ast.AST], target: str | None) -> bool:
    for root in nodes:
        for node in ast.walk(root):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "module"
                and isinstance(node.ctx, ast.Load)
                and (target is None or dotted(node.value) == target)
                and dotted(node.value) is not None
            ):
                return True
    return False


def _entry_reaches(sem: Semantic, read: ast.Name) -> bool:
    _, entry = reaching(sem, read)
    return entry


def _params(func: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = func.args
    return [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]


def _is_method(sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return isinstance(sem.parent(func), ast.ClassDef) and not any(
        isinstance(d, ast.Name) and d.id == "staticmethod" for d in func.decorator_list
    )


def _argument(
    call: ast.Call, func: ast.FunctionDef | ast.AsyncFunctionDef, owner: Semantic, name: str
) -> ast.expr | None:
    """The argument ``call`` passes for parameter ``name`` of ``func``."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    positional = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    if _is_method(owner, func):
        positional = positional[1:]
    if name not in positional:
        return None
    index = positional.index(name)
    args = call.args
    if any(isinstance(a, ast.Starred) for a in args[: index + 1]) or index >= len(args):
        return None
    return args[index]


def _passed(
    sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> list[tuple[Semantic, ast.expr]]:
    """What the callers of ``func`` (in this module and, through the project, in the others)
    pass for its parameter ``name``; for ``__init__`` the calls of its class."""
    from .distributed import callers

    calls: list[tuple[Semantic, ast.Call]] = []
    owner = sem.parent(func)
    if isinstance(owner, ast.ClassDef) and func.name == "__init__":
        for call in sem.calls_by_name.get(owner.name, ()):
            if sem.local_class(call.func) is owner:
                calls.append((sem, call))
        for call in sem.calls_by_name.get("cls", ()):
            if sem.enclosing_class(call) is owner:  # `cls(...)` in a classmethod
                calls.append((sem, call))
        calls += sem.calls_from_project(owner)
    else:
        calls += [(sem, c) for c in callers(sem, func) or ()]
        calls += sem.calls_from_project(func)
    out: list[tuple[Semantic, ast.expr]] = []
    for caller, call in calls:
        arg = _argument(call, func, sem, name)
        if arg is not None:
            out.append((caller, arg))
    return out

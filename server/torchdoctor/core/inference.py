"""What becomes of the tensors a region computes with gradients off (a ``with
torch.no_grad():`` block, a function decorated with it): whether they are only read afterwards,
as an inference tensor allows — turned into numbers, printed, concatenated, written to files —
or may reach autograd, be updated in place, or be kept on an object. Read by TDR106 to tell
where ``torch.inference_mode()`` can replace ``torch.no_grad()``.

An inference tensor cannot be saved for backward (given to a module or a loss whose result is
differentiated, combined with a model's output) and cannot be updated in place outside
inference mode. The analysis is conservative: a tensor that escapes (returned, stored on
``self`` or a global, read in a nested function) or reaches a function of the file counts as
used by autograd.
"""

from __future__ import annotations

import ast
import builtins
import sys

from . import kinds, summaries, training
from .kinds import Kind
from .semantic import Semantic

# Calls inside the block that turn gradients back on or differentiate.
AUTOGRAD_CALLS = frozenset(
    {
        "torch.enable_grad",
        "torch.set_grad_enabled",
        "torch.autograd.grad",
        "torch.autograd.backward",
    }
)
AUTOGRAD_METHODS = frozenset({"backward", "requires_grad_", "register_hook", "retain_grad"})
# Methods that store their arguments in the receiver.
STORING_METHODS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "add",
        "update",
        "setdefault",
        "put",
        "put_nowait",
        "__setitem__",
    }
)
# Methods whose result only reads a tensor's data or metadata.
_READ_METHODS = frozenset({"item", "tolist", "numpy", "cpu", "size", "dim", "numel", "format"})


def made_in(sem: Semantic, target: ast.expr, region: ast.AST, depth: int = 0) -> bool:
    """``t[i] = v`` or ``t.x = v`` into a value made in ``region`` (not ``self``, a
    parameter, a global): a name assigned there, or a loop variable over one."""
    root: ast.expr = target
    while isinstance(root, ast.Attribute | ast.Subscript | ast.Call):
        root = root.func if isinstance(root, ast.Call) else root.value
    if not isinstance(root, ast.Name) or depth > 3:
        return False
    binding = sem.lookup(root.id, target)
    if binding is None or not sem.is_inside(binding.node, region):
        return False
    if binding.how == "assign":
        return True
    loop = sem.parent(binding.node)
    while loop is not None and not isinstance(loop, ast.For | ast.comprehension):
        loop = sem.parent(loop)
    if loop is None:
        return False
    iterated = training.iterated_candidates(loop.iter) or [loop.iter]
    return binding.how == "loop" and all(made_in(sem, i, region, depth + 1) for i in iterated)


def callers_only_read(sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether every call of the decorated function in the file uses what it returns only
    as data (there is at least one such call)."""
    cls = sem.enclosing_class(func)
    calls = []
    for node in ast.walk(sem.tree):
        if not isinstance(node, ast.Call) or sem.is_inside(node, func):
            continue
        callee = node.func
        if sem.local_function(callee) is func or (
            cls is not None and isinstance(callee, ast.Attribute) and callee.attr == func.name
        ):
            calls.append(node)
    if not calls:
        return False
    for call in calls:
        stmt = sem.statement_of(call)
        if isinstance(stmt, ast.Expr) and stmt.value is call:
            continue
        if not isinstance(stmt, ast.Assign) or not _plain_path(sem, call, stmt):
            return False
        names = {n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if any(not isinstance(t, ast.Name | ast.Tuple) for t in stmt.targets):
            return False
        kept = {n for n in names if training.read_later(sem, n, stmt)}
        if kept and not only_read_later(sem, kept, stmt):
            return False
    return True


def _plain_path(sem: Semantic, call: ast.Call, stmt: ast.stmt) -> bool:
    """Whether the result of ``call`` reaches the value of ``stmt`` only through calls that
    read it (``list(map(lambda n: f(n), xs))``, ``torch.cat(...)``), not a model or helper."""
    node: ast.AST = call
    for anc in sem.ancestors(call):
        if anc is stmt:
            return True
        if isinstance(anc, ast.Call) and node is not anc.func and _sink_call(sem, anc):
            return False
        node = anc
    return True


def _sink_call(sem: Semantic, call: ast.Call) -> bool:
    """A call that may use a tensor for autograd or keep it: a module or a loss, an autograd
    entry, an optimizer, a function of the project that hands tensors to autograd or keeps
    state (``global``, an attribute or item of something it did not make)."""
    func = call.func
    qual = sem.qualname(func) or ""
    if qual in AUTOGRAD_CALLS or qual.startswith("torch.optim.") or qual == "torch.nn.Parameter":
        return True
    if training.enters_autograd(sem, call) or training.is_loss_call(sem, call):
        return True
    if kinds.kind(sem, func) in (Kind.MODULE, Kind.LOSS):
        return True
    defined = sem.owner(call).function_def(func)
    if defined is None:
        return sem.local_function(func) is not None
    owner, function = defined
    return summaries.of_function(owner, function).autograd or _keeps_state(owner, function)


def _keeps_state(sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a function declares ``global``/``nonlocal``, yields, or assigns to an attribute
    or an item of a value it did not make (a parameter, ``self``, a global)."""
    for node in sem.walk_body(func.body):
        if isinstance(node, ast.Global | ast.Nonlocal | ast.Yield | ast.YieldFrom):
            return True
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute | ast.Subscript) and not made_in(
                    sem, target, func
                ):
                    return True
    return False


def _model_output(sem: Semantic, expr: ast.AST) -> bool:
    """Whether ``expr`` computes something with a call that is neither torch's, a builtin's
    nor the standard library's (a model, a helper): combined with it, an inference tensor
    may be saved for backward."""
    if isinstance(expr, ast.expr) and training.is_python_value(expr):
        return False
    if isinstance(expr, ast.Call):
        func = expr.func
        qual = sem.qualname(func) or ""
        known = qual.split(".")[0] in ("torch", "builtins", *sys.stdlib_module_names)
        if isinstance(func, ast.Name) and sem.lookup(func.id, expr) is None:
            known = func.id in dir(builtins)
        elif isinstance(func, ast.Attribute) and func.attr in _READ_METHODS:
            known = True
        if not known:
            return True
    return any(_model_output(sem, child) for child in ast.iter_child_nodes(expr))


def only_read_later(sem: Semantic, names: set[str], region: ast.AST) -> bool:
    """Whether the tensors that ``names`` may hold after ``region`` are only read there:
    turned into numbers, printed, concatenated, saved to files. Not: differentiated (or
    anything computed from them), combined with a model's output, given to a module, a loss,
    a helper of the file or an optimizer, updated in place, stored on an object, returned."""
    scope = sem.enclosing_function(region) or sem.tree
    end = (getattr(region, "end_lineno", 0) or 0, getattr(region, "end_col_offset", 0) or 0)
    loops = [loop.node for loop in training.enclosing_loops(sem, region)]
    nodes = [
        n
        for n in sem.walk_body(scope.body)
        if not sem.is_inside(n, region)
        and (
            (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)) > end
            or any(sem.is_inside(n, loop) for loop in loops)
        )
    ]
    for name in names:
        binding = sem.lookup(name, region)
        if binding is not None and binding.scope is not scope:
            return False
    tainted = set(names)
    # Names that only ever hold containers the values were put into (a dict, a list): writing
    # an item of one is not an in-place update of a tensor.
    stored: set[str] = set()
    values: set[str] = set(names)
    changed = True
    while changed:
        changed = False
        for node in nodes:
            grown: set[str] = set()
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                if node.value is None or not _carries(node.value, tainted):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    root = target
                    while isinstance(root, ast.Attribute | ast.Subscript | ast.Starred):
                        root = root.value
                    if isinstance(target, ast.Attribute | ast.Subscript):
                        if not isinstance(root, ast.Name) or root.id == "self":
                            return False
                        stored.add(root.id)  # ``results[k] = t``: a container of them
                        grown.add(root.id)
                    else:
                        values |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
                        grown |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                if _carries(node.iter, tainted):
                    grown |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in STORING_METHODS
                and any(_carries(a, tainted) for a in node.args)
            ):
                root = node.func.value
                while isinstance(root, ast.Attribute | ast.Subscript):
                    root = root.value
                if not isinstance(root, ast.Name) or root.id == "self":
                    return False
                stored.add(root.id)
                grown.add(root.id)
            if not grown <= tainted:
                tainted |= grown
                changed = True
    for name in tainted:
        for load in sem.names.get(name, ()):
            owner = sem.enclosing_function(load) or sem.tree
            if owner is scope or not (scope is sem.tree or sem.is_inside(owner, scope)):
                continue
            binding = sem.lookup(name, load)
            if binding is None or binding.scope is scope:
                return False  # read in a nested function: it may run any time
    for node in nodes:
        if isinstance(node, ast.Name) and node.id in tainted and isinstance(node.ctx, ast.Load):
            if not _read_only(sem, node, node.id in stored - values):
                return False
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            if node.target.id in tainted:
                return False  # ``t += x``: in place on an inference tensor
    return True


def _carries(expr: ast.AST, tainted: set[str]) -> bool:
    if training.is_python_value(expr):
        return False
    if isinstance(expr, ast.Name):
        return expr.id in tainted
    return any(_carries(child, tainted) for child in ast.iter_child_nodes(expr))


def _read_only(sem: Semantic, load: ast.Name, container: bool = False) -> bool:
    """Whether one read of a name that may hold an inference tensor only reads it."""
    node: ast.AST = load
    for anc in sem.ancestors(load):
        if isinstance(anc, ast.expr) and training.is_python_value(anc):
            return True
        if isinstance(anc, ast.Subscript | ast.Attribute) and node is anc.value:
            if isinstance(anc.ctx, ast.Store | ast.Del):
                # ``t[i] = v``: in place on an inference tensor (not on a dict of them)
                return container and node is load and isinstance(anc, ast.Subscript)
            if isinstance(anc, ast.Attribute):
                parent = sem.parent(anc)
                if isinstance(parent, ast.Call) and parent.func is anc:
                    attr = anc.attr
                    if attr in AUTOGRAD_METHODS or (attr.endswith("_") and attr != "__"):
                        return False
        elif isinstance(anc, ast.Call) and node is not anc.func:
            if _sink_call(sem, anc):
                return False
            others = [a for a in (*anc.args, *(k.value for k in anc.keywords)) if a is not node]
            if any(_model_output(sem, o) for o in others):
                return False
        elif isinstance(anc, ast.BinOp):
            other = anc.right if node is anc.left else anc.left
            if _model_output(sem, other):
                return False
        elif isinstance(anc, ast.Return | ast.Yield | ast.YieldFrom | ast.Lambda):
            return False
        elif isinstance(anc, ast.stmt):
            return True
        node = anc
    return True


def python_arg(sem: Semantic, arg: ast.expr) -> bool:
    """A value that holds no tensor, also a name last assigned one (``n = x.size(0)``,
    ``out = pred.cpu().numpy()``)."""
    if training.is_python_value(arg):
        return True
    if isinstance(arg, ast.Tuple | ast.List):
        return all(python_arg(sem, e) for e in arg.elts)
    if isinstance(arg, ast.Name):
        binding = sem.lookup(arg.id, arg)
        return (
            binding is not None
            and binding.how == "assign"
            and binding.index is None
            and training.is_python_value(binding.value)
        )
    return False


def local_store(sem: Semantic, call: ast.Call, region: ast.AST) -> str | None:
    """The local container a storing call (``preds.append(p)``) puts a value into: a plain
    name of the function (not ``self``, not a global), whose later reads are then followed."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr in STORING_METHODS):
        return None
    values = [*call.args, *(k.value for k in call.keywords)]
    if all(python_arg(sem, a) for a in values):
        return None  # numbers only: nothing to follow
    receiver = func.value
    while isinstance(receiver, ast.Attribute | ast.Subscript):
        receiver = receiver.value
    if not isinstance(receiver, ast.Name) or receiver.id == "self":
        return None
    binding = sem.lookup(receiver.id, call)
    scope = sem.enclosing_function(call) or sem.tree
    if binding is None or binding.how != "assign" or binding.scope is not scope:
        return None
    return receiver.id


def in_place_outside(sem: Semantic, call: ast.Call, region: ast.AST) -> bool:
    """``p.mul_(d)``, ``p.copy_(q)`` on a tensor not made in ``region`` (a parameter)."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr.endswith("_")
        and not func.attr.startswith("_")
        and not made_in(sem, func.value, region)
    )


def python_result(expr: ast.expr) -> bool:
    """A returned value that holds no tensor: a number, or a tuple of numbers."""
    if isinstance(expr, ast.Tuple | ast.List):
        return all(python_result(e) for e in expr.elts)
    return isinstance(expr, ast.Constant) or training.is_python_value(expr)

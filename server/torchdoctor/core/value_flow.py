"""Where a value goes: every read of a name (and of the values computed from it: arithmetic,
containers, other names assigned from it, the callers of a module-level function returning it),
up to a use that only reads the number (a format, ``print``, ``float()``, a comparison, ``.item()``,
a logger call) or anything else. ``follow`` answers with a ``Flow``: whether some use may notice
that the value became detached from its autograd graph (``unsafe``), whether some use needs a
tensor (``tensor``: a Python float would break it), and whether it is returned (``returned``).

Rules ask it before offering ``.detach()`` or ``.item()`` on a value (TDR103's total of losses).
``is_list`` tells whether the receiver of ``append`` is built as a list in the file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from . import training
from .semantic import Binding, Semantic


def is_list(sem: Semantic, acc: ast.expr) -> bool:
    """The receiver of ``append`` is built as a list (``[]``, ``list()``) in this file."""
    values: list[ast.expr | None] = []
    if isinstance(acc, ast.Name):
        binding = sem.lookup(acc.id, acc)
        if binding is None:
            return False
        owner = sem.scopes.get(binding.scope)
        values = [b.value for b in (owner.bindings.get(acc.id, []) if owner else [])]
    elif isinstance(acc, ast.Attribute) and isinstance(acc.value, ast.Name):
        cls = sem.enclosing_class(acc) if acc.value.id == "self" else None
        if cls is None:
            return False
        values = list(sem.self_attr_values.get((cls, acc.attr), []))
    return bool(values) and all(
        isinstance(v, ast.List | ast.ListComp)
        or (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "list")
        for v in values
    )


# Where a value computed from the accumulator may go, for the fix: `.detach()` cannot be
# noticed where every path ends in a use that only reads the number.
_READ_FUNCTIONS = frozenset({"float", "int", "bool", "len", "print", "str", "repr", "format"})
_PASS_FUNCTIONS = frozenset({"abs", "round", "min", "max", "sum"})  # builtins: a derived value
_READ_METHODS = frozenset({"item", "tolist", "detach"})
_TENSOR_METHODS = frozenset(
    {"cpu", "cuda", "to", "float", "double", "half", "mean", "sum", "squeeze", "unsqueeze"}
    | {"view", "reshape", "flatten", "clone", "abs", "sqrt", "exp", "log", "div", "mul", "add"}
    | {"sub", "pow", "clamp", "round"}
)
_TENSOR_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "data"})
_LIST_METHODS = frozenset({"append", "extend", "insert", "clear"})  # add to it, read nothing
_LOGGERS = frozenset(
    {"add_scalar", "add_scalars", "log", "log_dict", "log_metric", "log_metrics", "info"}
    | {"debug", "warning", "set_postfix"}
)
# torch functions that differentiate, store or trace their argument: not a plain value op.
_NOT_VALUE_OPS = ("torch.autograd.", "torch.func.", "torch.save", "torch.jit.", "torch.onnx.")
_BUDGET = 48  # uses followed before giving up (then: not proven)


@dataclass
class Flow:
    """What the code does with the accumulator (and with the values computed from it)."""

    whole: bool = False  # the file is the whole program (a notebook): no caller elsewhere
    unsafe: bool = False  # a use the analysis cannot prove blind to `.detach()`
    tensor: bool = False  # a use that needs a tensor: `.item()` would break it
    returned: bool = False  # it reaches a `return`/`yield`


def follow(sem: Semantic, acc: ast.expr, *, whole: bool) -> Flow:
    """Follow every read of the accumulator ``acc`` (a plain name) through arithmetic,
    containers, assignments to other names and the calls in the file of the module-level
    function returning it, to where it ends: a format, `print`, `float()`, a comparison,
    `.item()`, a logger (reads the number), or anything else (not proven). ``whole``: the
    file is the whole program (a notebook); a module's function may be called from another."""
    flow = Flow(whole=whole)
    if not isinstance(acc, ast.Name):
        flow.unsafe = True  # an attribute or an item: other code may read it
        return flow
    names: list[ast.Name] = [acc]
    nodes: list[ast.AST] = []
    seen: set[tuple[str, ast.AST]] = set()
    budget = _BUDGET
    while names or nodes:
        budget -= 1
        if budget < 0:
            flow.unsafe = True
            return flow
        if nodes:
            nodes.extend(_follow(sem, nodes.pop(), flow, names))
            continue
        target = names.pop()
        binding = sem.lookup(target.id, target)
        if binding is None or (target.id, binding.scope) in seen:
            continue
        seen.add((target.id, binding.scope))
        for load in sem.names.get(target.id, ()):
            found = sem.lookup(target.id, load)
            if (
                found is not None
                and found.scope is binding.scope
                and not _reads_fresh(sem, found, load)
            ):
                nodes.append(load)
    return flow


def _reads_fresh(sem: Semantic, binding: Binding, load: ast.Name) -> bool:
    """Whether ``load`` can only read the value of ``binding``, a plain assignment of a value
    without a graph (``total = 0``, ``total = x.detach().cpu().numpy()``) that runs before it
    in the same block: the name no longer holds the accumulated tensor there."""
    stmt = sem.parent(binding.node)
    if (
        binding.how != "assign"
        or binding.index is not None
        or not isinstance(stmt, ast.Assign)
        or not training.is_plain_value(binding.value)
    ):
        return False
    block, index = sem.block_of(stmt)
    for anc in sem.ancestors(load):
        if isinstance(anc, ast.stmt) and sem.parent(anc) is sem.parent(stmt):
            return anc in block[index + 1 :]
    return False


def _follow(sem: Semantic, node: ast.AST, flow: Flow, names: list[ast.Name]) -> list[ast.AST]:
    """One step from an expression holding the value: the nodes holding it next (names it is
    assigned to go to ``names``); ``flow`` records what the step shows."""
    parent = sem.parent(node)
    if isinstance(parent, ast.FormattedValue | ast.Compare | ast.Expr):
        return []  # formatted, compared, or shown by a notebook cell
    if isinstance(parent, ast.If | ast.While | ast.Assert | ast.IfExp) and node is parent.test:
        return []
    if isinstance(parent, ast.BinOp | ast.UnaryOp | ast.BoolOp | ast.IfExp | ast.Starred):
        return [parent]
    if isinstance(parent, ast.Tuple | ast.List | ast.Set | ast.keyword) or (
        isinstance(parent, ast.Dict) and node in parent.values
    ):
        return [parent]
    if isinstance(parent, ast.ListComp | ast.SetComp | ast.GeneratorExp) and node is parent.elt:
        return [parent]
    if isinstance(parent, ast.Attribute) and parent.value is node:
        return _attribute_use(sem, parent, flow)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        flow.tensor = True
        return [parent]
    if isinstance(parent, ast.Call) and node is not parent.func:
        return _argument_use(sem, parent, flow)
    if isinstance(parent, ast.Assign | ast.AugAssign | ast.AnnAssign) and node is parent.value:
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        if len(targets) == 1 and isinstance(targets[0], ast.Name):
            names.append(targets[0])
            return []
    if isinstance(parent, ast.Return | ast.Yield | ast.YieldFrom):
        flow.returned = True
        return _callers(sem, parent, flow)
    flow.unsafe = True
    return []


def _attribute_use(sem: Semantic, attr: ast.Attribute, flow: Flow) -> list[ast.AST]:
    flow.tensor = True  # a Python float has none of these
    call = sem.parent(attr)
    if isinstance(call, ast.Call) and call.func is attr:
        if attr.attr in _READ_METHODS:
            return []
        if attr.attr in _TENSOR_METHODS:
            return [call]
        if attr.attr in _LIST_METHODS:
            return []
    elif attr.attr in _TENSOR_ATTRIBUTES:
        return []
    flow.unsafe = True  # `.backward()`, `.numpy()`, `.requires_grad`, `.grad_fn`...
    return []


def _argument_use(sem: Semantic, call: ast.Call, flow: Flow) -> list[ast.AST]:
    func = call.func
    qual = sem.qualname(func)
    if isinstance(func, ast.Name) and sem.lookup(func.id, func) is None:  # a builtin
        if func.id in _READ_FUNCTIONS:
            return []
        if func.id in _PASS_FUNCTIONS:
            return [call]
    elif qual is not None and qual.startswith("torch.") and not qual.startswith(_NOT_VALUE_OPS):
        flow.tensor = True
        return [call]
    elif isinstance(func, ast.Attribute):
        if func.attr in _LOGGERS and not (qual or "").startswith(("torch.", "numpy.")):
            return []
        if func.attr == "format" and isinstance(func.value, ast.Constant):
            return []  # "{:.4f}".format(total)
    flow.unsafe = True
    return []


def _callers(sem: Semantic, ret: ast.AST, flow: Flow) -> list[ast.AST]:
    """The calls of the module-level function that returns the value: where the value goes
    next. Not proven when the function may be called from elsewhere (a method, a name read
    other than by a call, no call in the file, a `.py` file that other modules may import);
    the calls the file shows are still followed, for the uses that need a tensor."""
    func = sem.enclosing_function(ret)
    if (
        func is None
        or isinstance(ret, ast.Yield | ast.YieldFrom)
        or sem.parent(func) is not sem.tree
        or len(sem.scopes[sem.tree].bindings.get(func.name, ())) != 1
    ):
        flow.unsafe = True
        return []
    calls: list[ast.AST] = []
    for load in sem.names.get(func.name, ()):
        parent = sem.parent(load)
        if not (isinstance(parent, ast.Call) and parent.func is load):
            flow.unsafe = True
            return []
        calls.append(parent)
    if not calls or not flow.whole:
        flow.unsafe = True
    return calls

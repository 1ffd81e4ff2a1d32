"""Calls that add what they are handed to state that outlives them: a running meter's
``update(val, n=1)`` that does ``self.sum += val * n``, an ``update(values)`` that adds each
item of a list into ``self._sum[i]``, a method that appends its argument to a list kept on its
instance. Every value such a call is handed stays alive as long as the object: a loss tensor
passed to it keeps its autograd graph (``kept_arguments``).

Read from the called method's body (of the file or of another project module, found as
``summaries.instance_method`` finds it: ``self.losses.update(...)`` after ``self.losses =
AverageMeter(...)``), whatever the method and its parameters are called.
"""

from __future__ import annotations

import ast

from . import arguments
from .semantic import FUNCTION_NODES, Semantic, has_star_kwargs
from .summaries import additive_terms, instance_method

Function = ast.FunctionDef | ast.AsyncFunctionDef


def kept_arguments(sem: Semantic, call: ast.Call) -> list[ast.expr]:
    """The values ``call`` passes that the method it calls adds into (or appends to) an
    attribute of its instance: an argument bound to such a parameter, or the items of a list or
    tuple written in the call when the method adds each item of the parameter. Only method
    calls on an instance (``meter.update(loss)``, ``self.meter.update(...)``)."""
    if not isinstance(call.func, ast.Attribute) or (not call.args and not call.keywords):
        return []
    if any(isinstance(a, ast.Starred) for a in call.args) or has_star_kwargs(call):
        return []
    defined = instance_method(sem, call.func)
    if defined is None:
        return []
    owner, func = defined
    if func.decorator_list:
        return []  # a static or class method
    params = _kept_params(owner, func)
    if not params:
        return []
    bound = arguments.bind(call, arguments.signature_of(func, method=True))
    out: list[ast.expr] = []
    for name, each in params.items():
        value = bound.value(name)
        if value is None:
            continue
        if not each:
            out.append(value)
        elif isinstance(value, ast.List | ast.Tuple):
            out.extend(e for e in value.elts if not isinstance(e, ast.Starred))
    return out


def _kept_params(sem: Semantic, func: Function) -> dict[str, bool]:
    """The parameters of a method (``self`` aside) whose value it adds into (or appends to) an
    attribute of ``self``: name -> whether it is each item of the parameter (``for i, v in
    enumerate(values): self._sum[i] += v``) rather than the parameter itself."""
    key = ("running-totals-kept", func)
    known = sem.memo.get(key)
    if isinstance(known, dict):
        return known
    out: dict[str, bool] = {}
    sem.memo[key] = out
    positional = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
    if not positional:
        return out
    this = positional[0]
    params = {*positional[1:], *(a.arg for a in func.args.kwonlyargs)}
    for node in sem.walk(func):
        target: ast.expr
        added: ast.expr
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            target, added = node.target, node.value
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.value, ast.BinOp)
            and isinstance(node.value.op, ast.Add)
            and ast.dump(node.targets[0]).replace("Store", "Load") == ast.dump(node.value.left)
        ):
            target, added = node.targets[0], node.value.right
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "append"
            and len(node.args) == 1
        ):
            target, added = node.func.value, node.args[0]
        else:
            continue
        if not _on_instance(target, this):
            continue
        for term in (n for t in additive_terms(added) for n in _factors(t)):
            binding = sem.lookup(term.id, term)
            if binding is None or binding.scope is not func:
                continue
            if binding.how == "param" and term.id in params:
                out.setdefault(term.id, False)
            elif binding.how == "loop":
                iterated = _iterated_param(sem, binding.node, params)
                if iterated is not None:
                    out.setdefault(iterated, True)
    return out


def _factors(term: ast.expr) -> list[ast.Name]:
    """The names a term multiplies or divides: ``val`` and ``n`` in ``val * n``."""
    if isinstance(term, ast.BinOp) and isinstance(term.op, ast.Mult | ast.Div):
        return [*_factors(term.left), *_factors(term.right)]
    return [term] if isinstance(term, ast.Name) else []


def _on_instance(target: ast.expr, this: str) -> bool:
    """``self.sum``, ``self._sum[i]``: an attribute (or an item of one) of the instance."""
    while isinstance(target, ast.Subscript):
        target = target.value
    return (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == this
    )


def _iterated_param(sem: Semantic, target: ast.AST, params: set[str]) -> str | None:
    """The parameter a loop variable runs over: ``v`` in ``for v in values`` or ``for i, v in
    enumerate(values)``."""
    parent = sem.parent(target)
    enumerated = False
    if isinstance(parent, ast.Tuple) and len(parent.elts) == 2 and parent.elts[1] is target:
        parent, enumerated = sem.parent(parent), True
    if not isinstance(parent, ast.For):
        return None
    iterated = parent.iter
    if enumerated:
        if not (
            isinstance(iterated, ast.Call)
            and isinstance(iterated.func, ast.Name)
            and sem.lookup(iterated.func.id, iterated.func) is None
        ):
            return None
        name, args = iterated.func.id, iterated.args
        if name == "enumerate" and args:
            iterated = args[0]
        elif name == "zip" and len(args) == 2:
            iterated = args[1]
        else:
            return None
    if isinstance(iterated, ast.Name) and iterated.id in params:
        binding = sem.lookup(iterated.id, iterated)
        if (
            binding is not None
            and binding.how == "param"
            and isinstance(binding.scope, FUNCTION_NODES)
        ):
            return iterated.id
    return None

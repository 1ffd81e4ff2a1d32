"""What calling a function does, as far as the rules ask (``Summary``): computed once per
function, for functions of the checked file and of the project's other modules alike, and
following the functions it calls in turn (a few levels deep).

Rules ask ``summary(sem, call.func)`` instead of walking a helper's body themselves: whether
``train_one_epoch(...)`` calls ``set_epoch``, whether ``evaluate(...)`` already runs under
``torch.no_grad()``, whether ``save_checkpoint(...)`` saves on every rank.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from . import arguments, distributed, training
from .semantic import Semantic

MAX_DEPTH = 3
_SAVES = frozenset({"torch.save"})


@dataclass(frozen=True)
class Summary:
    sem: Semantic  # the facts of the module that defines the function
    func: ast.FunctionDef | ast.AsyncFunctionDef
    methods: frozenset[str]  # names of the methods it calls (``set_epoch``, ``backward``...)
    qualnames: frozenset[str]  # imported functions it calls (``torch.save``...)
    autograd: bool  # hands tensors to autograd (backward, autograd.grad, requires_grad_...)
    grad_off: bool  # runs with gradient tracking off (decorated, or its whole body)
    saves: bool  # calls ``torch.save``
    saves_on_every_rank: bool  # some ``torch.save`` in it runs without a rank check
    saved_params: frozenset[str] = frozenset()  # parameters it passes to ``torch.save`` to write

    def saved_argument(self, call: ast.Call) -> ast.expr | None:
        """What a call of the function hands over to be saved (the argument for a parameter
        in ``saved_params``), if it can be told."""
        args = self.func.args
        first = args.posonlyargs[0] if args.posonlyargs else args.args[0] if args.args else None
        method = first is not None and first.arg in ("self", "cls")
        bound = arguments.bind(call, arguments.signature_of(self.func, method))
        for name in self.saved_params:
            value = bound.value(name)
            if value is not None:
                return value
        return None


def summary(sem: Semantic, callee: ast.AST, _depth: int = 0) -> Summary | None:
    """The summary of the function a callee names (of this file or another project module);
    None when it names no function that can be read."""
    defined = sem.owner(callee).function_def(callee)
    if defined is None:
        return None
    return of_function(*defined, _depth=_depth)


def of_function(
    sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef, _depth: int = 0
) -> Summary:
    key = ("summary", func)
    known = sem.memo.get(key)
    if isinstance(known, Summary):
        return known
    # A recursion guard: a function that calls itself sees an empty summary of itself.
    sem.memo[key] = Summary(sem, func, frozenset(), frozenset(), False, False, False, False)
    params = {a.arg for a in (*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs)}
    saved: set[str] = set()
    methods: set[str] = set()
    qualnames: set[str] = set()
    autograd = saves = every_rank = False
    grad_off = _grad_off(sem, func)
    for node in sem.walk(func):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute):
            methods.add(node.func.attr)
        qual = training.torch_qualname(sem, node.func)
        if qual is not None:
            qualnames.add(qual)
        if training.enters_autograd(sem, node) and not training.grad_disabled(sem, node):
            autograd = True
        if qual in _SAVES:
            saves = True
            obj = arguments.value(node, arguments.SAVE, "obj")
            if isinstance(obj, ast.Name) and obj.id in params:
                saved.add(obj.id)
            if not distributed.rank_guarded(sem, node):
                every_rank = True
        if _depth >= MAX_DEPTH:
            continue
        inner = summary(sem, node.func, _depth + 1)
        if inner is None or inner.func is func:
            continue
        methods |= inner.methods
        qualnames |= inner.qualnames
        if inner.autograd and not inner.grad_off and not training.grad_disabled(sem, node):
            autograd = True
        if inner.saves:
            saves = True
            if inner.saves_on_every_rank and not distributed.rank_guarded(sem, node):
                every_rank = True
    found = Summary(
        sem,
        func,
        frozenset(methods),
        frozenset(qualnames),
        autograd,
        grad_off,
        saves,
        every_rank,
        frozenset(saved),
    )
    sem.memo[key] = found
    return found


def _grad_off(sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Decorated with ``@torch.no_grad()``/``@torch.inference_mode()`` (or a project's own
    such wrapper), or its whole body inside one ``with`` that turns gradients off."""
    if any(training.is_grad_off(sem, d) for d in func.decorator_list):
        return True
    if any(training.named_grad_off(d) for d in func.decorator_list):
        return True
    body = [s for s in func.body if not _docstring(s)]
    return (
        len(body) == 1
        and isinstance(body[0], ast.With | ast.AsyncWith)
        and any(training.is_grad_off(sem, item.context_expr) for item in body[0].items)
    )


def _docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )

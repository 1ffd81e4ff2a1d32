"""What a function does with the models it is handed or hands back, as evaluation code asks it:
summaries computed once per function, for functions of the checked file and of the project's
other modules alike (``Semantic.function_def``), following the functions it calls in turn.

- ``forwarded_params``: the parameters whose value the function runs as a model (``model(x)``,
  ``model.forward(x)``, or handed to another function that does), and whether it does so again
  and again (inside one of its loops). ``helper_forwards`` reads a call through it:
  ``calc_loss_loader(val_loader, model, device)`` runs ``model`` once per batch.
- ``returns_eval_model``: the function hands back a model it switched to evaluation mode
  (yolov7's ``attempt_load``: ``model = attempt_load(weights)`` is a model in evaluation mode).
- ``returns_eval_model_at``: the same for an item of the tuple a function returns (OpenNMT's
  ``fields, model, model_opt = load_test_model(...)``).
- ``trains_argument``: a call hands a model to a function that switches it back to training
  (``train_model(model, ...)`` calls ``model.train()``): evaluation mode ends there.

Facts come from what the bodies do, never from how the functions are named.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from . import arguments, kinds, summaries, training
from .kinds import Kind
from .semantic import FUNCTION_NODES, Semantic

_MAX_DEPTH = 4
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class Forwarded:
    """A parameter a function runs as a model, and whether again and again."""

    param: str
    repeated: bool


def forwarded_params(
    sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef, _depth: int = 0
) -> dict[str, Forwarded]:
    """The parameters of ``func`` whose value it runs as a model, with gradients on: called
    (``model(x)``, ``model.forward(x)``) or handed to a function that does. A forward under
    ``torch.no_grad()`` in the function, or a function that runs with gradients off, does not
    count."""
    key = ("forwarded-params", func)
    known = sem.memo.get(key)
    if isinstance(known, dict):
        return known
    out: dict[str, Forwarded] = {}
    sem.memo[key] = out  # in progress: a recursive call adds nothing
    if _depth > _MAX_DEPTH or summaries.of_function(sem, func).grad_off:
        return out
    params = _params(func)
    for node in sem.walk(func):
        if not isinstance(node, ast.Call) or training.grad_disabled(sem, node):
            continue
        target = node.func
        if isinstance(target, ast.Attribute) and target.attr == "forward":
            target = target.value
        if isinstance(target, ast.Name) and _is_param(sem, target, func, params):
            _add(out, target.id, _in_loop(sem, node, func))
            continue
        inner = helper_forwards(sem, node, _depth + 1)
        for value, repeated in inner:
            if isinstance(value, ast.Name) and _is_param(sem, value, func, params):
                _add(out, value.id, repeated or _in_loop(sem, node, func))
    return out


def helper_forwards(sem: Semantic, call: ast.Call, _depth: int = 0) -> list[tuple[ast.expr, bool]]:
    """The arguments of ``call`` that the function it calls runs as a model, each with whether
    it runs them again and again; empty when the callee is no function the analysis can read."""
    if _depth > _MAX_DEPTH:
        return []
    defined = sem.owner(call.func).function_def(call.func)
    if defined is None:
        return []
    owner, func = defined
    forwarded = forwarded_params(owner, func, _depth)
    if not forwarded:
        return []
    method = _is_method(func)
    bound = arguments.bind(call, arguments.signature_of(func, method))
    out: list[tuple[ast.expr, bool]] = []
    for name, found in forwarded.items():
        value = bound.value(name)
        if value is not None:
            out.append((value, found.repeated))
    return out


def returns_eval_model(sem: Semantic, callee: ast.AST) -> bool:
    """Whether the function ``callee`` names (of this file or another project module) hands
    back a model it switched to evaluation mode: its body calls ``.eval()`` on a value and
    returns a module, and never switches anything back to training."""
    defined = sem.owner(callee).function_def(callee)
    if defined is None:
        return False
    owner, func = defined
    key = ("returns-eval-model", func)
    known = owner.memo.get(key)
    if isinstance(known, bool):
        return known
    evals = trains = False
    for node in owner.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "eval" and not node.args and not node.keywords:
                evals = True
            elif node.func.attr == "train" and not (node.args and _is_false(node.args[0])):
                trains = True
    found = evals and not trains and any(_is_module(owner, value) for value in owner.returns(func))
    owner.memo[key] = found
    return found


def returns_eval_model_at(sem: Semantic, callee: ast.AST, index: int) -> bool:
    """Whether the function ``callee`` names (of this file or another project module) returns
    tuples whose item ``index`` is a name it called ``.eval()`` on (``fields, model, opt =
    load_test_model(...)`` after ``model.eval()`` there), and never switches anything back to
    training."""
    defined = sem.owner(callee).function_def(callee)
    if defined is None:
        return False
    owner, func = defined
    key = ("returns-eval-model-at", func, index)
    known = owner.memo.get(key)
    if isinstance(known, bool):
        return known
    evaluated: set[str] = set()
    trains = False
    for node in owner.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            if node.func.attr == "eval" and not node.args and not node.keywords:
                if isinstance(receiver, ast.Name):
                    evaluated.add(receiver.id)
            elif node.func.attr == "train" and not (node.args and _is_false(node.args[0])):
                trains = True
    returned = owner.returns(func)
    found = (
        bool(evaluated)
        and not trains
        and bool(returned)
        and all(
            isinstance(value, ast.Tuple)
            and index < len(value.elts)
            and isinstance(value.elts[index], ast.Name)
            and value.elts[index].id in evaluated  # type: ignore[attr-defined]
            for value in returned
        )
    )
    owner.memo[key] = found
    return found


def trains_argument(sem: Semantic, call: ast.Call, receiver: str) -> bool:
    """Whether ``call`` hands the model named ``receiver`` to a function (of this file or
    another project module) that calls ``.train()`` on the parameter it lands in."""
    defined = sem.owner(call.func).function_def(call.func)
    if defined is None:
        return False
    owner, func = defined
    trained = _trained_params(owner, func)
    if not trained:
        return False
    bound = arguments.bind(call, arguments.signature_of(func, _is_method(func)))
    for name in trained:
        value = bound.value(name)
        if value is not None and ast.unparse(value) == receiver:
            return True
    return False


def _trained_params(sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    key = ("trained-params", func)
    known = sem.memo.get(key)
    if isinstance(known, set):
        return known
    out: set[str] = set()
    params = _params(func)
    for node in sem.walk(func):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "train"
            and not (node.args and _is_false(node.args[0]))
            and isinstance(node.func.value, ast.Name)
            and _is_param(sem, node.func.value, func, params)
        ):
            out.add(node.func.value.id)
    sem.memo[key] = out
    return out


# ---- helpers ---------------------------------------------------------------------------------
def _params(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    args = func.args
    return {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}


def _is_param(
    sem: Semantic, name: ast.Name, func: ast.FunctionDef | ast.AsyncFunctionDef, params: set[str]
) -> bool:
    """``name`` is a parameter of ``func`` not rebound before this use."""
    if name.id not in params or name.id in ("self", "cls"):
        return False
    binding = sem.lookup(name.id, name)
    return binding is not None and binding.how == "param" and binding.scope is func


def _is_method(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = func.args
    first = args.posonlyargs[0] if args.posonlyargs else args.args[0] if args.args else None
    return first is not None and first.arg in ("self", "cls")


def _add(out: dict[str, Forwarded], name: str, repeated: bool) -> None:
    old = out.get(name)
    out[name] = Forwarded(name, repeated or (old is not None and old.repeated))


def _in_loop(sem: Semantic, node: ast.AST, func: ast.AST) -> bool:
    """Whether ``node`` runs inside a loop of ``func`` (not over a literal list or tuple) or a
    comprehension of it."""
    child: ast.AST = node
    for anc in sem.ancestors(node):
        if anc is func or isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(anc, ast.While) and child is not anc.test:
            return True
        if isinstance(anc, ast.For | ast.AsyncFor) and child is not anc.iter:
            if not isinstance(anc.iter, ast.List | ast.Tuple | ast.Set):
                return True
        if isinstance(anc, _COMPREHENSIONS) and not any(child is g.iter for g in anc.generators):
            return True
        child = anc
    return False


def _is_module(sem: Semantic, value: ast.expr) -> bool:
    """A module, or an element or attribute of one (``return model[-1]``)."""
    while isinstance(value, ast.Subscript | ast.Attribute):
        if kinds.kind(sem, value) is Kind.MODULE:
            return True
        value = value.value
    return kinds.kind(sem, value) is Kind.MODULE


def _is_false(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is False

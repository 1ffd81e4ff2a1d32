"""Where evaluation code is, and which forwards in it run with autograd on for nothing.

An *evaluation region* is a run of statements that evaluates a model: the statements after
``model.eval()`` (up to a later ``model.train()``, a new model bound to the name, or another
``.eval()`` of it), a function whose name starts with ``eval``/``valid``/``test``/``predict``/
``infer``, or a loop over a loader named like an evaluation loader. Places where the caller
decides the grad mode are left out: test files and test functions, Lightning's evaluation hooks,
methods of ``nn.Module`` classes, functions only called with gradients off (or whose result is
backpropagated) and functions only passed around as values.

``unguarded_forwards(ctx)`` answers the question TDR105 asks: in each region that needs no
autograd, the forwards of a model that repeat (``evaluation.repeats``) and run with gradients
on, and the statements that hold them, unless what they compute reaches autograd later
(``evaluation.Flow``). Whether wrapping those statements is safe is ``evaluation.
safe_to_turn_grad_off``. Results are cached per file in ``sem.memo``.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass

from . import arguments, forwards, kinds, training
from .context import Context
from .evaluation import (
    Flow,
    Outcome,
    called_without_grad,
    callee,
    calls_train,
    forward_calls,
    frozen_models,
    grad_off_globally,
    is_model,
    mode_switch,
    referenced_as_value,
    repeats,
    trains,
)
from .kinds import Kind
from .semantic import dotted, terminal_name

_EVAL_FUNCTION = re.compile(r"^_*(eval|valid|test|predict|infer)", re.I)
_EVAL_LOADER = re.compile(r"(^|_)(val|test|eval)", re.I)
# Lightning runs these with gradients already disabled.
_LIGHTNING_STEPS = frozenset({"validation_step", "test_step", "predict_step"})


@dataclass
class Region:
    """A run of statements of one block that evaluates a model."""

    stmts: list[ast.stmt]
    eval_call: ast.Call | None = None  # the ``.eval()`` the region follows
    function: ast.FunctionDef | ast.AsyncFunctionDef | None = None  # a function region
    # Models the region is known to evaluate besides those the analysis finds by kind: the
    # ``self.model`` of a class handed an evaluation-mode model (``_held_eval_models``).
    models: tuple[str, ...] = ()


@dataclass
class Unguarded:
    """Forwards of a region that repeat with gradients on (``calls``, in source order), and
    the shortest run of the region's statements that holds them (``stmts``)."""

    region: Region
    calls: list[ast.Call]
    stmts: list[ast.stmt]
    through: frozenset[ast.Call] = frozenset()  # calls of helpers that run the model


def unguarded_forwards(ctx: Context) -> list[Unguarded]:
    """The forwards of evaluation regions that repeat with gradients on, for nothing: the
    region neither computes gradients nor manages grad mode, the forward is no mode switch of
    a model the analysis cannot see into, and what the statements compute is not
    backpropagated later. A forward is a call of a model, or a call of a function (of the file
    or of another module of the project) that runs a model it is handed
    (``forwards.helper_forwards``). A forward is reported with the first region that holds
    it; a region inside a function whose calls are reported is left to them."""
    key = "eval-regions-unguarded"
    known = ctx.sem.memo.get(key)
    if isinstance(known, list):
        return known
    out: list[Unguarded] = []
    ctx.sem.memo[key] = out
    if is_test_file(ctx) or grad_off_globally(ctx):
        return out
    found = regions(ctx)
    if not found:
        return out
    sem = ctx.sem
    frozen = frozen_models(ctx)
    claimed: set[ast.Call] = set()
    helpers: set[ast.AST] = set()  # functions of the file whose calls are reported
    for region in found:
        if trains(ctx, region.stmts):
            continue
        forwards = forward_calls(ctx, region.stmts, region.models)
        if any(mode_switch(ctx, call) for call in forwards):
            continue  # the forward may run an attack or another gradient computation
        calls = [
            call
            for call in forwards
            if not training.grad_disabled(sem, call)
            and dotted(callee(call)) not in frozen
            and repeats(ctx, call)
        ]
        through = [
            call
            for call in _helper_calls(ctx, region.stmts, set(forwards))
            if not training.grad_disabled(sem, call)
        ]
        calls = sorted([*calls, *through], key=lambda c: (c.lineno, c.col_offset))
        if not calls or any(call in claimed for call in calls):
            continue
        claimed.update(calls)
        stmts = covering(ctx, region.stmts, calls)
        if Flow(ctx, stmts, frozenset(through)).outcome() is Outcome.AUTOGRAD:
            continue  # what the region computes is backpropagated later
        out.append(Unguarded(region, _primary_first(ctx, calls, stmts), stmts, frozenset(through)))
        for call in through:
            local = sem.local_function(call.func)
            if local is not None:
                helpers.add(local)
    out[:] = [u for u in out if not _inside_any(ctx, u.calls[0], helpers)]
    return out


def _helper_calls(ctx: Context, stmts: list[ast.stmt], direct: set[ast.Call]) -> list[ast.Call]:
    """Calls in ``stmts`` of functions that run a model they are handed, again and again:
    inside the function (a loop over batches), or because the call itself repeats."""
    out = []
    sem = ctx.sem
    for node in sem.walk_body(stmts):
        if not isinstance(node, ast.Call) or node in direct:
            continue
        for value, repeated in forwards.helper_forwards(sem, node):
            if is_model(ctx, value) and (repeated or repeats(ctx, node)):
                out.append(node)
                break
    return out


def _primary_first(ctx: Context, calls: list[ast.Call], stmts: list[ast.stmt]) -> list[ast.Call]:
    """``calls`` with the first one that no ``if`` inside ``stmts`` guards first (the forward
    of every batch, not a warm-up under a condition), when the first call is guarded."""

    def guarded(call: ast.Call) -> bool:
        for anc in ctx.sem.ancestors(call):
            if any(anc is s for s in stmts):
                return isinstance(anc, ast.If | ast.Match)
            if isinstance(anc, ast.If | ast.Match | ast.IfExp):
                return True
        return False

    if not calls or not guarded(calls[0]):
        return calls
    for call in calls[1:]:
        if not guarded(call):
            return [call, *(c for c in calls if c is not call)]
    return calls


def _inside_any(ctx: Context, node: ast.AST, funcs: set[ast.AST]) -> bool:
    func = ctx.sem.enclosing_function(node)
    while func is not None:
        if func in funcs:
            return True
        func = ctx.sem.enclosing_function(func)
    return False


def regions(ctx: Context) -> list[Region]:
    """The evaluation regions of the file, in the order they are found: after each
    ``.eval()``, then loops over evaluation loaders, then evaluation functions."""
    found: list[Region] = []
    sem = ctx.sem
    for call, model in _eval_switches(ctx):
        stmt = sem.statement_of(call)
        if not isinstance(stmt, ast.Expr | ast.Assign) or _skipped_place(ctx, stmt):
            continue
        block, index = sem.block_of(stmt)
        following: list[ast.stmt] = []
        receiver = dotted(model)
        for i in range(index + 1, len(block)):  # no copy of the rest of a long block
            item = block[i]
            if (
                _ends_eval_mode(item, receiver)
                or calls_train(ctx, item)
                or _trains_through_helper(ctx, item, receiver)
            ):
                break
            following.append(item)
        if trains(ctx, following):
            continue
        for part in _split_by_cell(ctx, following):
            found.append(Region(part, eval_call=call))
    for loop in training.all_loops(sem):
        if not isinstance(loop.node, ast.For | ast.AsyncFor) or not any(
            _EVAL_LOADER.search(terminal_name(candidate) or "")
            for candidate in training.iterated_candidates(loop.node.iter)
        ):
            continue  # what it iterates is not named like an evaluation loader
        name = terminal_name(loop.loader) if loop.loader is not None else None
        if name and _EVAL_LOADER.search(name) and not _skipped_place(ctx, loop.node):
            found.append(Region([loop.node]))
    for cls, attr in _held_eval_models(ctx):
        for stmt in cls.body:
            if (
                isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
                and stmt.name != "__init__"
                and not _skipped_place(ctx, stmt.body[0])
            ):
                found.append(Region(list(stmt.body), function=stmt, models=(f"self.{attr}",)))
    for func in sem.functions:
        match = _EVAL_FUNCTION.match(func.name)
        if match is None or _skipped_place(ctx, func.body[0]):
            continue
        # `test` also names unit and smoke tests: require a loop over a loader.
        if match.group(1).lower() == "test" and not _has_batch_loop(ctx, func):
            continue
        found.append(Region(list(func.body), function=func))
    return found


def _eval_switches(ctx: Context) -> list[tuple[ast.Call, ast.expr]]:
    """Where a model enters evaluation mode, and the model: ``model.eval()``, and ``model =
    load(...)`` where ``load`` (of the file or of another project module) hands back a model
    it switched to evaluation mode (``forwards.returns_eval_model``)."""
    sem = ctx.sem
    out: list[tuple[ast.Call, ast.expr]] = []
    for call in sem.calls_by_attr.get("eval", ()):
        if call.args or call.keywords:
            continue
        assert isinstance(call.func, ast.Attribute)
        if ctx.kind(call.func.value) is Kind.MODULE:
            out.append((call, call.func.value))
    if sem.project is None and (not sem.functions or not sem.calls_by_attr.get("eval")):
        # On its own, the file's functions are the only ones, and one that hands back a model
        # in evaluation mode calls `.eval()`: there is none.
        return out
    for node in sem.assigns:
        value = node.value
        if not isinstance(value, ast.Call) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name):
            called = target.id in sem.calls_by_name
        elif isinstance(target, ast.Attribute):
            called = target.attr in sem.calls_by_attr
        else:
            continue
        # Only a model that is called somewhere can be evaluated.
        if called and forwards.returns_eval_model(sem, value.func):
            out.append((value, target))
    return sorted(out, key=lambda pair: (pair[0].lineno, pair[0].col_offset))


def _held_eval_models(ctx: Context) -> list[tuple[ast.ClassDef, str]]:
    """``(cls, attr)`` for a class of the file (not a module) that keeps a constructor
    parameter on ``self.attr`` (and nothing else there), where every construction of the class
    in the file (at least one) passes a model in evaluation mode for it (OpenNMT's
    ``Translator(model, ...)`` after ``fields, model, model_opt = load_test_model(...)``, which
    switches the model to evaluation), and no method of the class switches it back to training:
    every method of the class evaluates that model."""
    sem = ctx.sem
    out: list[tuple[ast.ClassDef, str]] = []
    held: dict[ast.AST, list[tuple[str, list[ast.expr]]]] = {}
    for (owner, attr), values in sem.self_attr_values.items():
        held.setdefault(owner, []).append((attr, values))
    for cls in sem.classes:
        if sem.parent(cls) is not sem.tree or kinds.class_kind(sem, cls) is not None:
            continue
        init = next(
            (s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"),
            None,
        )
        calls = [c for c in sem.calls_by_name.get(cls.name, ()) if sem.local_class(c.func) is cls]
        if init is None or not calls or _defines_forward(cls):
            continue
        params = {a.arg for a in (*init.args.args[1:], *init.args.kwonlyargs)}
        signature = arguments.signature_of(init, method=True)
        for attr, values in held.get(cls, ()):
            if len(values) != 1 or not isinstance(values[0], ast.Name):
                continue
            param = values[0].id
            binding = sem.lookup(param, values[0])
            if param not in params or binding is None or binding.how != "param":
                continue
            passed = [arguments.bind(c, signature).value(param) for c in calls]
            if all(
                v is not None and _eval_model_at(ctx, v, c)
                for v, c in zip(passed, calls, strict=True)
            ) and not any(_switches_to_training(ctx, m, attr) for m in cls.body):
                out.append((cls, attr))
    return out


def _eval_model_at(ctx: Context, value: ast.expr, call: ast.Call) -> bool:
    """``value`` (passed by ``call``) holds a model in evaluation mode: a name bound to what a
    function returns after switching it to evaluation (the whole value or a tuple's item), or
    a name ``.eval()`` was called on before ``call`` in the same function."""
    if not isinstance(value, ast.Name):
        return False
    sem = ctx.sem
    binding = sem.lookup(value.id, value)
    if binding is None:
        return False
    if binding.how == "assign" and isinstance(binding.value, ast.Call):
        func = binding.value.func
        if binding.index is None and forwards.returns_eval_model(sem, func):
            return True
        if binding.index is not None and forwards.returns_eval_model_at(sem, func, binding.index):
            return True
    scope = sem.enclosing_function(call)
    return any(
        isinstance(ev.func, ast.Attribute)
        and dotted(ev.func.value) == value.id
        and not ev.args
        and sem.enclosing_function(ev) is scope
        and (ev.lineno, ev.col_offset) < (call.lineno, call.col_offset)
        for ev in sem.calls_by_attr.get("eval", ())
    )


def _switches_to_training(ctx: Context, stmt: ast.stmt, attr: str) -> bool:
    """A method that calls ``self.attr.train()`` (not ``train(False)``) or hands
    ``self.attr`` to a function that does."""
    receiver = f"self.{attr}"
    if not isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
        return False
    for node in ctx.sem.walk_body(stmt.body):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "train"
            and dotted(func.value) == receiver
            and not (
                node.args and isinstance(node.args[0], ast.Constant) and not node.args[0].value
            )
        ):
            return True
        if forwards.trains_argument(ctx.sem, node, receiver):
            return True
    return False


def _trains_through_helper(ctx: Context, stmt: ast.stmt, receiver: str | None) -> bool:
    """``stmt`` hands the model to a function that switches it back to training."""
    if receiver is None:
        return False
    return any(
        isinstance(node, ast.Call) and forwards.trains_argument(ctx.sem, node, receiver)
        for node in ctx.sem.walk_body([stmt])
    )


# ---- helpers ------------------------------------------------------------------------------------
def is_test_file(ctx: Context) -> bool:
    """A file of tests: a ``conftest.py``, a ``tests.py``, a file under a ``tests/`` folder, or
    one named as pytest collects it (``test_*.py``, ``*_test.py``) that holds tests: it
    imports ``pytest`` or ``unittest``, or defines a ``test_*`` function. A script named so
    that holds none (SlowFast's ``tools/test_net.py`` evaluates a model) is evaluation code."""
    path = ctx.path
    base = os.path.basename(path)
    parts = re.split(r"[\\/]", path)[:-1]
    if not base.endswith(".py"):
        return False
    if base in ("conftest.py", "tests.py") or "tests" in parts:
        return True
    if not (base.startswith("test_") or base.endswith("_test.py")):
        return False
    tree = ctx.sem.tree
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name.startswith(
            "test_"
        ):
            return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
            a.name.split(".")[0] in _TEST_FRAMEWORKS for a in node.names
        ):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
            _TEST_FRAMEWORKS
        ):
            return True
    return False


_TEST_FRAMEWORKS = frozenset({"pytest", "unittest"})


def _ends_eval_mode(stmt: ast.stmt, receiver: str | None) -> bool:
    """Whether ``stmt`` ends what a ``receiver.eval()`` before it governs: it binds
    ``receiver`` to another value (a new model starts in training mode), or switches it to
    evaluation again (the region of that call follows from there)."""
    if receiver is None:
        return False
    if isinstance(stmt, ast.Assign | ast.AnnAssign):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if not any(dotted(t) == receiver for t in targets) or stmt.value is None:
            return False
        # `model = model.to(device)`, `model = DDP(model)`: the same model, still evaluating.
        return not any(
            isinstance(n, ast.Name | ast.Attribute) and dotted(n) == receiver
            for n in ast.walk(stmt.value)
        )
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func
        return (
            isinstance(func, ast.Attribute)
            and func.attr == "eval"
            and not stmt.value.args
            and dotted(func.value) == receiver
        )
    return False


def _split_by_cell(ctx: Context, stmts: list[ast.stmt]) -> list[list[ast.stmt]]:
    if not stmts:
        return []
    if not ctx.is_notebook:
        return [stmts]
    parts: list[list[ast.stmt]] = []
    current: int | None = None
    for stmt in stmts:
        cell = ctx.cell_of(stmt)
        if not parts or cell != current:
            parts.append([])
            current = cell
        parts[-1].append(stmt)
    return parts


def _skipped_place(ctx: Context, node: ast.AST) -> bool:
    """Test cases, Lightning hooks, nn.Module methods, functions only called without grad or
    whose result is backpropagated, and functions only passed around as values."""
    sem = ctx.sem
    func = sem.enclosing_function(node)
    while func is not None:
        if any(
            (ctx.qualname(_decorator_target(d)) or "").startswith("pytest.")
            for d in func.decorator_list
        ):
            return True
        if func.name.startswith("test_") and not _has_batch_loop(ctx, func):
            return True  # a pytest-style test, not an evaluation over data
        cls = sem.parent(func)
        if isinstance(cls, ast.ClassDef):
            if func.name in _LIGHTNING_STEPS:
                return True
            bases = sem.class_bases(cls)
            if any(b.rsplit(".", 1)[-1] in ("TestCase", "LightningModule") for b in bases):
                return True
            if kinds.class_kind(sem, cls) is Kind.MODULE or _defines_forward(cls):
                return True
        if called_without_grad(ctx, func) or _only_passed_as_value(ctx, func):
            return True
        func = sem.enclosing_function(func)
    return False


def _has_batch_loop(ctx: Context, func: ast.AST) -> bool:
    return any(
        loop.is_batch_loop and ctx.sem.enclosing_function(loop.node) is func
        for loop in training.all_loops(ctx.sem)
    )


def _only_passed_as_value(ctx: Context, func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Never called in the file but handed to other code (``inference_on_dataset(model,
    ...)`` with ``model = eval_wrapper``, ``return eval_wrapper``): that code decides the grad
    mode, and usually turns gradients off."""
    sem = ctx.sem
    if sem.calls_by_name.get(func.name) or sem.calls_by_attr.get(func.name):
        return False
    return referenced_as_value(sem, func)


def _defines_forward(cls: ast.ClassDef) -> bool:
    """A class with a ``forward`` method is a model whose base the file cannot resolve
    (``class Net(PreTrainedModel)`` with a relative import): its ``predict*`` helpers are part of
    the forward pass, and the caller decides the grad mode."""
    return any(
        isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == "forward"
        for stmt in cls.body
    )


def _decorator_target(decorator: ast.expr) -> ast.expr:
    """``pytest.mark.parametrize`` for ``@pytest.mark.parametrize(...)``."""
    while isinstance(decorator, ast.Call):
        decorator = decorator.func
    return decorator


def earlier_eval(ctx: Context, call: ast.Call) -> ast.Call | None:
    """A ``.eval()`` call on the same model earlier in the same function, if any."""
    want = dotted(callee(call))
    if want is None:
        return None
    func = ctx.sem.enclosing_function(call)
    best = None
    for ev in ctx.sem.calls_by_attr.get("eval", ()):
        assert isinstance(ev.func, ast.Attribute)
        if (
            dotted(ev.func.value) == want
            and ctx.sem.enclosing_function(ev) is func
            and (ev.lineno, ev.col_offset) < (call.lineno, call.col_offset)
        ):
            best = ev
    return best


def covering(ctx: Context, stmts: list[ast.stmt], calls: list[ast.Call]) -> list[ast.stmt]:
    """The shortest run of ``stmts`` that holds every call."""
    indexes = [
        i
        for i, stmt in enumerate(stmts)
        if any(call is stmt or ctx.sem.is_inside(call, stmt) for call in calls)
    ]
    return stmts[indexes[0] : indexes[-1] + 1] if indexes else []

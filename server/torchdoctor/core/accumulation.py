"""Gradient accumulation, read from the shape of the code: several backward passes add into the
gradients that one optimizer step applies (``MicroBatch``).

Three shapes are recognised, whatever the names:

- the step runs under a condition that counts iterations: ``if (i + 1) % k == 0:``, or a name
  that holds such a remainder (``is_accumulating = (i + 1) % k != 0`` ... ``if not
  is_accumulating:``), in the loop of the backward pass, or in a function with no loop that
  runs once per batch (Lightning's ``training_step`` with manual optimization);
- an inner ``for _ in range(k):`` loop runs the backward pass on every iteration, and the step
  comes after that loop, not in it;
- the backward pass is ``x.backward()``, ``torch.autograd.backward(x)``, a launcher's
  ``accelerator.backward(x)`` (``training.is_backward``), or ``self.manual_backward(x)`` in a
  ``LightningModule``.

``loss_unscaled`` tells whether the backpropagated tensor is a loss that nothing divided: a
plain loss (``training.unscaled_loss``), or the output of a module (``model(x, y)``, ``out.loss``,
``loss, logs = self.loss(...)``) that is not handed the number of micro-batches.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from . import graphs, kinds, training
from .kinds import Kind
from .semantic import FUNCTION_NODES, Semantic, dotted

_LIGHTNING = ("lightning.", "pytorch_lightning.")
# What one iteration is: a loop, or a function that runs once per batch, or the module.
Region = ast.For | ast.AsyncFor | ast.While | ast.FunctionDef | ast.AsyncFunctionDef | ast.Module


@dataclass(frozen=True)
class MicroBatch:
    """A backward pass whose gradients one later optimizer step applies together with others."""

    backward: ast.Call
    tensor: ast.expr  # what the backward pass differentiates
    step: ast.Call  # the optimizer step that applies the accumulated gradients
    shape: ast.AST  # the ``if`` around the step, or the inner loop around the backward pass
    count: ast.expr | None  # the number of micro-batches, when the code states it
    region: Region  # one iteration: the loop or function that runs backward and step


def micro_batches(sem: Semantic) -> list[MicroBatch]:
    """Every backward pass of the file that is one of several per optimizer step."""
    key = ("accumulation-micro-batches", sem.tree)
    known = sem.memo.get(key)
    if isinstance(known, list):
        return known
    found: dict[ast.Call, MicroBatch] = {}
    if not training.backward_named(sem) and not sem.calls_by_attr.get("manual_backward"):
        sem.memo[key] = []  # no backward pass (``is_backward``)
        return []
    for item in [*_guarded(sem), *_inner_loops(sem)]:
        known = found.get(item.backward)
        # Prefer the step that follows the backward pass.
        if known is None or (
            training.before(known.step, item.backward) and training.before(item.backward, item.step)
        ):
            found[item.backward] = item
    out = sorted(found.values(), key=lambda m: (m.backward.lineno, m.backward.col_offset))
    sem.memo[key] = out
    return out


def is_backward(sem: Semantic, call: ast.Call) -> bool:
    """A backward pass: ``training.is_backward``, or ``self.manual_backward(loss)`` in a
    class derived from Lightning's ``LightningModule``."""
    if training.is_backward(sem, call):
        return True
    func = call.func
    if not (
        isinstance(func, ast.Attribute)
        and func.attr == "manual_backward"
        and isinstance(func.value, ast.Name)
        and func.value.id == "self"
        and call.args
    ):
        return False
    cls = sem.enclosing_class(call)
    return cls is not None and any(b.startswith(_LIGHTNING) for b in sem.class_bases(cls))


def tensor_of(call: ast.Call, sem: Semantic | None = None) -> ast.expr | None:
    """The tensor a backward pass differentiates (``sem``: for a launcher's backward)."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "manual_backward":
        return call.args[0] if call.args else None
    return training.tensor_of_backward(call, sem)


def _backwards(sem: Semantic, within: ast.AST | list[ast.stmt]) -> Iterator[ast.Call]:
    for call in training.calls_in(sem, within):
        if is_backward(sem, call):
            yield call


def _region(sem: Semantic, node: ast.AST) -> Region | None:
    """The loop whose one run is one iteration for ``node``, else the function around it."""
    loop = training.iteration_loop(sem, node)
    return loop.node if loop is not None else sem.enclosing_function(node)


# ------------------------------------------------------------------ a guarded step ---------
def _remainder(sem: Semantic, test: ast.expr, at: ast.AST, depth: int = 0) -> ast.BinOp | None:
    """The ``a % k`` a condition reads, directly or through a name assigned from it (the
    latest assignment before the condition, in the same function)."""
    for node in ast.walk(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            if not isinstance(node.left, ast.Constant | ast.JoinedStr):
                return node
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and depth < 3:
            binding = sem.lookup(node.id, at)
            if (
                binding is not None
                and binding.how == "assign"
                and binding.index is None
                and binding.value is not None
                and not isinstance(binding.value, ast.Name)
            ):
                found = _remainder(sem, binding.value, binding.node, depth + 1)
                if found is not None:
                    return found
    return None


def _guard(sem: Semantic, step: ast.Call, region: Region) -> tuple[ast.If, ast.expr | None] | None:
    """The ``if`` between ``region`` and ``step`` (with the step in its body) that counts
    micro-batches, and the count; in a function without a loop only a remainder counts."""
    in_loop = not isinstance(region, FUNCTION_NODES)
    child: ast.AST = step
    for anc in sem.ancestors(step):
        if anc is region or isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
            return None
        if isinstance(anc, ast.If) and child in anc.body:
            remainder = _remainder(sem, anc.test, anc)
            if remainder is not None:
                return anc, remainder.right
            if in_loop and training.is_accumulation_test(anc.test):
                return anc, None
        child = anc
    return None


def _all_steps(sem: Semantic) -> Iterator[ast.Call]:
    """The optimizer steps of the file, in functions too."""
    yield from training.all_optimizer_steps(sem)


def _guarded(sem: Semantic) -> Iterator[MicroBatch]:
    # Each step with its region and guard, worked out once (not again for every other step).
    steps = []
    for step in dict.fromkeys(_all_steps(sem)):
        region = _region(sem, step)
        steps.append((step, region, _guard(sem, step, region) if region is not None else None))
    for step, region, guarded in steps:
        if region is None or guarded is None:
            continue
        guard, count = guarded
        body = region.body
        # Steps that run on every iteration apply the gradients of the backward passes before
        # them (a critic stepped every batch, its generator every k-th).
        every = [s for s, r, g in steps if r is region and g is None]
        for call in _backwards(sem, body):
            tensor = tensor_of(call, sem)
            if tensor is None or _region(sem, call) is not region or sem.is_inside(call, guard):
                continue
            if any(training.before(call, s) for s in every):
                continue
            yield MicroBatch(call, tensor, step, guard, count, region)


# ------------------------------------------------------------------ an inner loop ----------
def _inner_loops(sem: Semantic) -> Iterator[MicroBatch]:
    for loop in training.all_loops(sem):
        node = loop.node
        if not (
            isinstance(node, ast.For)
            and isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Name)
            and node.iter.func.id == "range"
            and sem.lookup("range", node) is None
            and node.iter.args
        ):
            continue
        calls = [
            c for c in _backwards(sem, node.body) if training.runs_every_iteration(sem, c, node)
        ]
        if not calls or any(True for _ in _steps_or_zeroing(sem, node)):
            continue
        step = _step_after(sem, node)
        if step is None:
            continue
        args = node.iter.args
        count = args[0] if len(args) == 1 else None
        region = _region(sem, step) or sem.tree
        for call in calls:
            tensor = tensor_of(call, sem)
            if tensor is not None:
                yield MicroBatch(call, tensor, step, node, count, region)


def _steps_or_zeroing(sem: Semantic, loop: ast.For) -> Iterator[ast.Call]:
    """Optimizer steps and ``zero_grad()`` calls in the loop: no accumulation across it."""
    yield from training.optimizer_steps(sem, loop)
    for call in training.calls_in(sem, loop.body):
        if training.is_zero_grad(sem, call):
            yield call


def _step_after(sem: Semantic, loop: ast.For) -> ast.Call | None:
    """The first optimizer step after ``loop`` in the same iteration of what surrounds it
    (same function, same enclosing loop, not in a branch exclusive with the loop)."""
    outer = training.iteration_loop(sem, loop)
    function = sem.enclosing_function(loop)
    scope = outer.node if outer is not None else function if function is not None else sem.tree
    for step in training.optimizer_steps(sem, scope):
        if (
            training.before(loop, step)
            and not sem.is_inside(step, loop)
            and sem.enclosing_function(step) is function
            and training.iteration_loop(sem, step) is outer
            and not sem.exclusive_branches(step, loop)
        ):
            return step
    return None


# ------------------------------------------------------------------ the loss ---------------
def loss_unscaled(sem: Semantic, tensor: ast.expr, count: ast.expr | None) -> bool:
    """Whether ``tensor`` is a loss that nothing divides by the number of micro-batches: a
    plain loss (``training.unscaled_loss``), or a module's output (followed through names,
    tuple unpacking, ``.loss``, ``["loss"]``, ``.mean()``) when the module is not handed the
    count (``model(x, accum_steps)`` may divide it itself)."""
    plain = training.unscaled_loss(sem, tensor)
    if plain is not None:
        return plain
    call = _origin_call(sem, tensor, 0)
    if call is None:
        return False
    defined = sem.owner(call).function_def(call.func)
    if defined is not None:  # a helper of the project: what it returns
        owner, func = defined
        returned = owner.returns(func)
        return bool(returned) and all(loss_unscaled(owner, r, None) for r in returned)
    if not _is_module_call(sem, call):
        return False
    return count is None or not (_references(count) & _references(*call.args, *call.keywords))


def _references(*nodes: ast.AST) -> set[str]:
    """The names and attribute chains read in ``nodes`` (``k``, ``self.cfg.accum``), but not
    ``self`` alone."""
    out = {dotted(n) for node in nodes for n in ast.walk(node)}
    return {d for d in out if d is not None and d != "self"}


def _origin_call(sem: Semantic, expr: ast.expr, depth: int) -> ast.Call | None:
    """The call a tensor comes from, when nothing on the way may rescale it."""
    if depth > 6 or training.unscaled_loss(sem, expr) is False:
        return None
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in ("mean", "sum", "float"):
            return _origin_call(sem, func.value, depth + 1)
        return expr
    if isinstance(expr, ast.Attribute) and expr.attr == "loss":
        return _origin_call(sem, expr.value, depth + 1)
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
        return _origin_call(sem, expr.value, depth + 1)
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None or binding.how != "assign" or binding.value is None:
            return None
        parent = sem.parent(binding.node)
        if isinstance(parent, ast.AugAssign) and parent.target is binding.node:
            return None
        value = binding.value
        if binding.index is not None and isinstance(value, ast.Tuple | ast.List):
            return None  # ``a, b = x, y``: not one call's results
        return _origin_call(sem, value, depth + 1)
    return None


def _is_module_call(sem: Semantic, call: ast.Call) -> bool:
    """A call of a module (``model(x)``, ``self.loss(...)``), by what made it."""
    func = call.func
    if kinds.kind(sem, func) in (Kind.MODULE, Kind.LOSS):
        return True
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)):
        return False
    if func.value.id != "self":
        return False
    cls = sem.enclosing_class(call)
    if cls is None or graphs.class_method(sem, cls, func.attr) is not None:
        return False
    # An attribute the object's own code sets (``self.loss = LPIPS(...)``,
    # ``self.model = model``), not one of its methods: a callable object.
    return any(
        isinstance(target, ast.Attribute)
        and target.attr == func.attr
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
        for node in ast.walk(cls)
        if isinstance(node, ast.Assign)
        for target in node.targets
    )

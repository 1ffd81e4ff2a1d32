"""What calling a function does, as far as the rules ask (``Summary``): computed once per
function, for functions of the checked file and of the project's other modules alike, and
following the functions it calls in turn (a few levels deep).

Rules ask ``summary(sem, call.func)`` instead of walking a helper's body themselves: whether
``train_one_epoch(...)`` calls ``set_epoch``, whether ``evaluate(...)`` already runs under
``torch.no_grad()``, whether ``save_checkpoint(...)`` saves on every rank, whether
``train_step(...)`` steps an optimizer.

Over those: ``step_calls`` (the calls of a loop that step an optimizer, in a helper too),
``trains`` (whether statements run a backward pass, in a helper too), ``kept_on_self`` (the
``self.attr`` a value handed to a class's constructor is kept in).

What a function returns is summarised apart (``returned``, asked less often): whether it hands
back a loss tensor that still carries its autograd graph, itself, in a dict (by key) or in a
tuple (by position), and whether that tensor was backpropagated inside (a training step).
``carried_graph`` reads an expression of the caller through those summaries: ``train_step(b)``,
``out["loss"]`` after ``out = train_step(b)``, ``v`` in ``for k, v in out.items()``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from . import arguments, distributed, graphs, kinds, training
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
    steps_optimizer: bool = False  # calls ``optimizer.step()`` / ``scaler.step(optimizer)``

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


def called_summary(sem: Semantic, callee: ast.AST) -> Summary | None:
    """The summary of the function a call runs (``called_function``: also a method of the
    class around the call, inherited from a base class of another module)."""
    defined = called_function(sem, callee)
    return of_function(*defined) if defined is not None else None


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
    steps = "step" in sem.calls_by_attr and bool(training.optimizer_steps(sem, func))
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
            if not distributed.rank_guarded(sem, node) and not in_memory(sem, node):
                every_rank = True
        if _depth >= MAX_DEPTH:
            continue
        defined = called_function(sem, node.func)
        inner = of_function(*defined, _depth=_depth + 1) if defined is not None else None
        if inner is None or inner.func is func:
            continue
        methods |= inner.methods
        qualnames |= inner.qualnames
        steps = steps or inner.steps_optimizer
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
        steps,
    )
    sem.memo[key] = found
    return found


def in_memory(sem: Semantic, save: ast.Call) -> bool:
    """A ``torch.save`` into an ``io.BytesIO`` buffer: serialising to send or to read back,
    not writing a file."""
    target = arguments.value(save, arguments.SAVE, "f")
    if target is None:
        return False
    call = target if isinstance(target, ast.Call) else kinds.constructor_call(sem, target)
    return call is not None and sem.qualname(call.func) == "io.BytesIO"


def called_function(
    sem: Semantic, callee: ast.AST
) -> tuple[Semantic, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The function a callee names: of this file or another project module
    (``sem.function_def``), a method of the class around the call (``self.train_step``,
    also inherited from a base class of the file), or a method of the one project class whose
    instance a name holds (``trainer.train_step`` after ``trainer = Trainer(...)``, the class
    of this file or of another module)."""
    defined = sem.owner(callee).function_def(callee)
    if defined is not None:
        return defined
    if (
        isinstance(callee, ast.Attribute)
        and isinstance(callee.value, ast.Name)
        and callee.value.id == "self"
    ):
        owner = sem.owner(callee)
        cls = owner.enclosing_class(callee)
        if cls is not None:
            found = _method(owner, cls, callee.attr)
            if found is not None:
                return found
    owner = sem.owner(callee)
    if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name):
        made = instance_class(owner, callee.value)  # trainer.train_step(...)
        if made is not None:
            found = _method(made[0], made[1], callee.attr)
            if found is not None:
                return found
    made = instance_class(owner, callee) if isinstance(callee, ast.expr) else None
    if made is not None:  # self.loss_fn(...): the instance is called
        for name in ("__call__", "forward"):
            found = _method(made[0], made[1], name)
            if found is not None:
                return found
    return None


def instance_method(
    sem: Semantic, callee: ast.expr
) -> tuple[Semantic, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The method a call on an instance of a project class calls: ``meter.update`` after
    ``meter = AverageMeter()``, ``self.losses.update`` after ``self.losses = Meters(2)``
    (its own, or inherited)."""
    if not isinstance(callee, ast.Attribute) or not _name_or_self_attribute(callee.value):
        return None
    owner = sem.owner(callee)
    receiver = callee.value
    if not may_hold_instance(owner, receiver):
        return None
    values: list[ast.expr | None] = []
    key: tuple[object, ...]
    if isinstance(receiver, ast.Name):
        binding = owner.lookup(receiver.id, receiver)
        if binding is None or binding.how != "assign":
            return None
        values, key = [binding.value], ("instance-made", id(binding.node))
    elif isinstance(receiver, ast.Attribute):
        cls = owner.enclosing_class(receiver)
        values = [*owner.self_attr_values.get((cls, receiver.attr), ())] if cls else []
        key = ("instance-made", cls, receiver.attr)
    # A cheap test first (once per binding): some value is a call of a class or function of
    # the project, not a method of a value (``x = x.to(device)``) or a model's forward.
    made_by = owner.memo.get(key)
    if not isinstance(made_by, bool):
        made_by = any(
            isinstance(v, ast.Call) and _made_by_definition(owner, v.func) for v in values
        )
        owner.memo[key] = made_by
    if not made_by:
        return None
    made = instance_class(owner, receiver)
    return None if made is None else _method(made[0], made[1], callee.attr)


def may_hold_instance(sem: Semantic, receiver: ast.expr) -> bool:
    """A quick test ``instance_method`` makes first: a name some assignment binds to a call's
    result, or an attribute of ``self`` some method assigns one to (most receivers are modules,
    parameters and ``self``: no lookup is made for them)."""
    if isinstance(receiver, ast.Name):
        return receiver.id in sem.call_bound
    return isinstance(receiver, ast.Attribute) and receiver.attr in sem.call_kept_attrs


def opaque_project_method(sem: Semantic, callee: ast.expr) -> bool:
    """``backend.distribute`` after ``backend = utils.make_backend(args)``: a method called on
    a name the project's own code made (a call of a class or function of the file or of another
    project module), whose body cannot be read (``instance_method`` finds none): what it
    returns may be what it was handed."""
    if not isinstance(callee, ast.Attribute) or not isinstance(callee.value, ast.Name):
        return False
    receiver = callee.value
    binding = sem.lookup(receiver.id, receiver)
    if binding is None or binding.how != "assign" or not isinstance(binding.value, ast.Call):
        return False
    return _made_by_definition(sem, binding.value.func) and instance_method(sem, callee) is None


def _made_by_definition(sem: Semantic, func: ast.expr) -> bool:
    """``Meter``, ``meters.Meter``, ``build_meter``: a callee that names a class or a function
    of the file, or an import from the project, not a value or an installed package."""
    while isinstance(func, ast.Attribute):
        func = func.value
    if not isinstance(func, ast.Name):
        return False
    binding = sem.lookup(func.id, func)
    if binding is None:
        return False
    if binding.how == "import":
        project = sem.project
        return project is not None and project.imported_from_project(sem, binding)
    return binding.how in ("def", "class")


def _name_or_self_attribute(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Name) or (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    )


def _method(
    sem: Semantic, cls: ast.ClassDef, name: str, _depth: int = 0
) -> tuple[Semantic, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """The method ``name`` of a class: its own, or inherited from a base class of this file or
    of another project module (``class Trainer(BaseTrainer)`` with ``BaseTrainer`` in
    ``base.py``)."""
    method = graphs.class_method(sem, cls, name)
    if method is not None:
        return sem, method
    if _depth > 4 or sem.project is None:
        return None
    for base in cls.bases:
        if sem.local_class(base) is not None:
            continue  # read by ``class_method``
        found = sem.class_def(base)
        if found is not None and found[1] is not cls:
            inherited = _method(found[0], found[1], name, _depth + 1)
            if inherited is not None:
                return inherited
    return None


def instance_class(sem: Semantic, expr: ast.expr) -> tuple[Semantic, ast.ClassDef] | None:
    """The one project class (of this file or another module) whose instances ``expr`` holds:
    a name or ``self.attr`` assigned ``Trainer(...)``, or what a builder function returns."""
    if not isinstance(expr, ast.Name | ast.Attribute):
        return None
    sem = sem.owner(expr)
    # What ``kinds.constructions`` reads is the same for every read of a name in one scope
    # (all its assignments there) and of ``self.attr`` in one class: worked out once for each,
    # not once per read (a name rebound thousands of times in a long script was quadratic).
    key: tuple[object, ...] = ("instance-class", expr)
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is not None:
            key = ("instance-class-name", binding.scope, expr.id)
    elif isinstance(expr.value, ast.Name) and expr.value.id == "self":
        key = ("instance-class-self", sem.enclosing_class(expr), expr.attr)
    if key in sem.memo:
        return sem.memo[key]  # type: ignore[return-value]
    made, other = kinds.constructions(
        sem, expr, lambda c: sem.owner(c).class_def(c.func) is not None
    )
    classes = {id(d[1]): d for c in made if (d := sem.owner(c).class_def(c.func)) is not None}
    found = next(iter(classes.values())) if made and not other and len(classes) == 1 else None
    sem.memo[key] = found
    return found


def step_calls(sem: Semantic, within: ast.AST) -> list[ast.Call]:
    """The calls under ``within`` (not in nested functions) that step an optimizer: its own
    ``optimizer.step()``/``scaler.step(optimizer)``, and the calls of helpers (of this file or
    another module, methods of the class) that do, in source order."""
    out = list(training.optimizer_steps(sem, within))
    for node in sem.walk(within):
        if isinstance(node, ast.Call) and node not in out:
            defined = called_function(sem, node.func)
            if defined is not None and defined[1] is not sem.enclosing_function(node):
                if of_function(*defined).steps_optimizer:
                    out.append(node)
    return sorted(out, key=lambda c: (c.lineno, c.col_offset))


def trains(sem: Semantic, within: list[ast.stmt]) -> bool:
    """Whether statements run a backward pass: their own, or in a helper they call."""
    if not _backward_in_reach(sem):
        return False
    for node in sem.walk_body(within):
        if not isinstance(node, ast.Call):
            continue
        if training.is_backward(sem, node):
            return True
        defined = called_function(sem, node.func)
        if defined is not None and defined[1] is not sem.enclosing_function(node):
            if "backward" in of_function(*defined).methods:
                return True
    return False


def _backward_in_reach(sem: Semantic) -> bool:
    """False when no backward pass can be found from the file (``trains`` is False for all its
    statements): it is checked on its own, so every helper it calls is its own, and nothing in
    it is named ``backward`` (``x.backward()``, a launcher's, ``torch.autograd.backward`` under
    any name it is imported or assigned as)."""
    return sem.project is not None or training.backward_named(sem)


def iteration_loop(sem: Semantic, node: ast.AST) -> training.LoopInfo | None:
    """``training.iteration_loop``, also counting a loop whose body runs a backward pass in a
    helper it calls (``for i, batch in enumerate(gen): losses = trainer.train_step(batch)``)."""
    for loop in training.enclosing_loops(sem, node):
        if training.is_iteration_loop(sem, loop) or _loop_trains(sem, loop.node):
            return loop
    return None


def _loop_trains(sem: Semantic, loop: ast.AST) -> bool:
    """``trains`` of a loop's body, worked out once per loop."""
    key = ("summaries-loop-trains", loop)
    known = sem.memo.get(key)
    if not isinstance(known, bool):
        known = trains(sem, loop.body)  # type: ignore[attr-defined]
        sem.memo[key] = known
    return known


def kept_on_self(sem: Semantic, value: ast.Name) -> list[ast.Attribute]:
    """Where a name passed to the constructor of a class of this file is kept: the
    ``self.attr`` targets that ``__init__`` assigns the parameter to (``Trainer(model,
    train_loader)`` then ``self.train_data = train_data``), for the calls in the scope that binds
    the name."""
    binding = sem.lookup(value.id, value)
    if binding is None:
        return []
    out: list[ast.Attribute] = []
    for load in sem.names.get(value.id, ()):
        call = sem.parent(load)
        position: int | str | None = None
        if isinstance(call, ast.keyword):
            position, call = call.arg, sem.parent(call)
        elif isinstance(call, ast.Call) and load in call.args:
            position = call.args.index(load)
        if not isinstance(call, ast.Call) or position is None:
            continue
        if sem.lookup(value.id, load) is not binding:
            continue
        cls = sem.local_class(call.func)
        init = graphs.class_method(sem, cls, "__init__") if cls is not None else None
        if init is None or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        params = [a.arg for a in (*init.args.posonlyargs, *init.args.args)][1:]
        if isinstance(position, int):
            name = params[position] if position < len(params) else None
        else:
            name = position
        for node in sem.walk(init):
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Name)
                and node.value.id == name
                and sem.lookup(name, node.value) is not None
                and sem.lookup(name, node.value).how == "param"  # type: ignore[union-attr]
            ):
                out.extend(
                    t
                    for t in node.targets
                    if isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "self"
                )
    return out


# ------------------------------------------------------------------ returned graphs -------
@dataclass(frozen=True)
class Returned:
    """What a function returns that still carries an autograd graph."""

    graph: bool = False  # the returned value itself is a loss tensor with its graph
    keys: frozenset[str] = frozenset()  # keys of a returned dict whose values carry one
    plain_keys: bool = False  # a returned dict also has values without one
    items: frozenset[int] = frozenset()  # positions of a returned tuple that carry one
    backpropagated: bool = False  # a returned loss was backpropagated inside
    # An object returned after the backward pass of one of its attributes
    # (``losses.total.backward()``, then ``return losses``): the parts unpacked from it are
    # the losses of that step, with their graph.
    parts: bool = False
    # Positions of a returned tuple: (a dict, an item computed from it), as in
    # ``return loss_sum, loss_dict`` after ``loss_sum = sum(loss_dict.values())``. When the
    # caller backpropagates that item, the dict's values are its terms, with their graph.
    fed: frozenset[tuple[int, int]] = frozenset()
    values: bool = False  # a returned dict whose values are all the terms of such a loss
    # Positions of a returned tuple: (a term, the sum it is added into), as in ``return total,
    # coarse`` after ``total = coarse + fine``. When the caller backpropagates the sum, the
    # term carries its graph.
    summed: frozenset[tuple[int, int]] = frozenset()

    @property
    def carries(self) -> bool:
        return (
            self.graph
            or bool(self.keys)
            or bool(self.items)
            or self.parts
            or bool(self.fed)
            or self.values
        )


_NOTHING = Returned()
# What an expression is when it carries a graph: the tensor itself, or a dict or tuple that
# holds one, or a value that may be one (a value of a dict whose other values are not).
TENSOR, CONTAINER, SOME = "tensor", "container", "some"
TERMS = "terms"  # a dict whose values are the terms of a backpropagated loss


def returned(
    sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef, _depth: int = 0
) -> Returned:
    """What ``func`` (of the module ``sem``) returns that carries a graph; nothing for a
    function that runs with gradients off."""
    key = ("returned-graph", func)
    known = sem.memo.get(key)
    if isinstance(known, Returned):
        return known
    if _depth > MAX_DEPTH:
        # Not remembered: a shallower question reads it whole. What needs no other function
        # (a dict and the loss computed from it) is still read.
        shallow = {f for v in sem.returns(func) if isinstance(v, ast.Tuple) for f in _fed(sem, v)}
        return Returned(fed=frozenset(shallow)) if shallow else _NOTHING
    sem.memo[key] = _NOTHING  # recursion guard
    if _grad_off(sem, func):
        return _NOTHING
    graph = backpropagated = plain = parts = values = False
    keys: set[str] = set()
    items: set[int] = set()
    fed: set[tuple[int, int]] = set()
    summed: set[tuple[int, int]] = set()
    for value in sem.returns(func):
        if training.grad_disabled(sem, value):
            continue
        if isinstance(value, ast.Tuple):
            items |= {
                i for i, e in enumerate(value.elts) if carried_graph(sem, e, _depth + 1) == TENSOR
            }
            fed |= _fed(sem, value)
            summed |= _summed(sem, value, func)
            continue
        entries = _dict_entries(sem, value, func)
        if entries is not None:
            for name, entry in entries:
                if carried_graph(sem, entry, _depth + 1) == TENSOR:
                    keys.add(name)
                    if isinstance(entry, ast.Name) and training.is_backpropagated(sem, entry):
                        backpropagated = True
                else:
                    plain = True
            continue
        if carried_graph(sem, value, _depth + 1) == TENSOR:
            graph = True
            if isinstance(value, ast.Name) and training.is_backpropagated(sem, value):
                backpropagated = True
        elif isinstance(value, ast.Name) and _attribute_backpropagated(sem, value):
            parts = backpropagated = True
        elif carried_graph(sem, value, _depth + 1) == TERMS:
            values = True
    found = Returned(
        graph,
        frozenset(keys),
        plain,
        frozenset(items),
        backpropagated,
        parts,
        frozenset(fed),
        values,
        frozenset(summed),
    )
    sem.memo[key] = found
    return found


def _dict_entries(
    sem: Semantic, value: ast.expr, func: ast.AST
) -> list[tuple[str, ast.expr]] | None:
    """The (key, value) pairs of a returned dict: a literal ``{"loss": loss}``,
    ``dict(loss=loss)``, or a name bound to one in the function, with the items it sets
    (``logs["loss"] = loss``); None when ``value`` is not such a dict."""
    pairs: list[tuple[str, ast.expr]] = []
    name: str | None = None
    if isinstance(value, ast.Name):
        binding = sem.lookup(value.id, value)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return None
        name, value = value.id, binding.value  # type: ignore[assignment]
    if isinstance(value, ast.Dict):
        for k, v in zip(value.keys, value.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                pairs.append((k.value, v))
    elif (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "dict"
        and sem.lookup("dict", value.func) is None
        and not value.args
    ):
        pairs.extend((kw.arg, kw.value) for kw in value.keywords if kw.arg is not None)
    else:
        return None
    if name is not None:
        for node in sem.walk(func):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == name
                    and isinstance(target.slice, ast.Constant)
                    and isinstance(target.slice.value, str)
                ):
                    pairs.append((target.slice.value, node.value))
    return pairs


def carried_graph(sem: Semantic, expr: ast.AST, _depth: int = 0) -> str | None:
    """Whether ``expr`` holds a loss tensor with its autograd graph, also through what the
    functions it calls return: ``TENSOR`` for the tensor (``training.holds_loss``, a helper's
    returned loss, ``out["loss"]`` of a helper's returned dict, ``v`` of its ``.items()``),
    ``CONTAINER`` for a dict or tuple that holds one, ``SOME`` for a value that is one only for
    some keys (``out[k]``, ``.items()`` of a dict with other values); None otherwise."""
    if _depth > 6:
        return None
    if training.holds_loss(sem, expr):
        return TENSOR
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in ("mean", "sum", "float", "clone"):
            return TENSOR if carried_graph(sem, func.value, _depth + 1) == TENSOR else None
        found = _returned_by(sem, expr, _depth)
        if found is None or not found.carries:
            return None
        return TENSOR if found.graph else CONTAINER
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add | ast.Sub | ast.Mult | ast.Div):
        for side in (expr.left, expr.right):
            if carried_graph(sem, side, _depth + 1) == TENSOR:
                return TENSOR
        return None
    if isinstance(expr, ast.Subscript):
        if _item_backpropagated(sem, expr.value, expr.slice):
            return TENSOR  # `out["loss"]` after `out["loss"].backward()`
        found = _held_returned(sem, expr.value, _depth)
        if found is None:
            return None
        index = expr.slice
        if isinstance(index, ast.Constant) and isinstance(index.value, str):
            return TENSOR if index.value in found.keys else None
        if isinstance(index, ast.Constant) and isinstance(index.value, int):
            return TENSOR if index.value in found.items else None
        if found.values and not isinstance(index, ast.Slice):
            return TENSOR
        if found.keys and not isinstance(index, ast.Constant | ast.Slice):
            return SOME if found.plain_keys else TENSOR
        return None
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None:
            return None
        if _item_backpropagated(sem, expr, None):
            return CONTAINER  # `outputs.append(out)` after `out["loss"].backward()`
        if binding.how == "assign" and binding.value is not None:
            if binding.index is None:
                return carried_graph(sem, binding.value, _depth + 1)
            # ``a, b, total = train_step(...)`` or ``= out`` after ``out = train_step(...)``
            found = _held_returned(sem, binding.value, _depth)
            if found is not None and (binding.index in found.items or found.parts):
                return TENSOR
            # ``loss, logs = loss_fn(...)``: ``logs`` holds the terms of the backpropagated loss
            if found is not None and _paired_with_backpropagated(sem, binding.node, found.fed):
                return TERMS
            # ``total, coarse = step(...)``: ``coarse`` was added into the backpropagated total
            if found is not None and _paired_with_backpropagated(sem, binding.node, found.summed):
                return TENSOR
            return None
        if binding.how == "loop":
            return _loop_value(sem, binding.node, _depth)
    return None


def _item_backpropagated(sem: Semantic, holder: ast.expr, key: ast.expr | None) -> bool:
    """Whether an item of the dict (or tuple) a name holds is backpropagated while gradients
    are on: ``out["loss"].backward()`` for the same ``out`` (for ``key``, that item)."""
    if not isinstance(holder, ast.Name):
        return False
    return any(
        (key is None or ast.dump(part.slice) == ast.dump(key))
        and not _item_replaced(sem, part, holder)
        for _call, part in _backpropagated_parts(sem, holder, ast.Subscript)
    )


def _attribute_backpropagated(sem: Semantic, holder: ast.Name) -> bool:
    """Whether an attribute of the object ``holder`` holds is backpropagated while gradients
    are on, before ``holder`` is read: ``losses.total.backward()`` ... ``return losses``."""
    return any(
        training.before(call, holder)
        for call, _part in _backpropagated_parts(sem, holder, ast.Attribute)
    )


def _backpropagated_parts(
    sem: Semantic, holder: ast.Name, kind: type[ast.Subscript] | type[ast.Attribute]
) -> Iterator[tuple[ast.Call, Any]]:
    """The backward calls, run with gradients on, of an item (``kind`` ``ast.Subscript``) or
    an attribute (``ast.Attribute``) of the value ``holder`` holds (the same binding), each
    with that part (``out["loss"]``, ``losses.total``)."""
    backward = sem.calls_by_attr.get("backward")
    if not backward:
        return
    binding = sem.lookup(holder.id, holder)
    if binding is None:
        return
    for call in backward:
        part = training.tensor_of_backward(call, sem)
        if (
            isinstance(part, kind)
            and isinstance(part.value, ast.Name)
            and part.value.id == holder.id
            and sem.lookup(holder.id, part.value) is binding
            and not training.grad_disabled(sem, call)
        ):
            yield call, part


def _fed(sem: Semantic, value: ast.Tuple) -> set[tuple[int, int]]:
    """(i, j) for a returned tuple whose item ``i`` is a name bound to a dict and whose item
    ``j`` is computed from it (inline, or through the one assignment of a name)."""
    out: set[tuple[int, int]] = set()
    for i, elt in enumerate(value.elts):
        if not isinstance(elt, ast.Name):
            continue
        binding = sem.lookup(elt.id, elt)
        if binding is None or binding.how != "assign" or binding.index is not None:
            continue
        if not isinstance(binding.value, ast.Dict):
            continue
        name = elt.id
        for j, other in enumerate(value.elts):
            expr: ast.AST | None = other
            if isinstance(other, ast.Name):
                found = sem.lookup(other.id, other)
                ok = found is not None and found.how == "assign" and found.index is None
                expr = found.value if ok and found is not None else None
            if (
                j != i
                and expr is not None
                and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(expr))
            ):
                out.add((i, j))
    return out


def _paired_with_backpropagated(
    sem: Semantic, target: ast.AST, pairs: frozenset[tuple[int, int]]
) -> bool:
    """``target`` is item ``i`` of a tuple unpacked from a call, and for a pair ``(i, j)`` the
    item ``j`` beside it is a name the caller backpropagates: ``loss, logs = loss_fn(...)``
    (``fed``: ``loss`` computed from the dict ``logs``), ``total, coarse = step(...)``
    (``summed``: ``coarse`` added into ``total``)."""
    unpacked = sem.parent(target)
    if not pairs or not isinstance(unpacked, ast.Tuple) or target not in unpacked.elts:
        return False
    index = unpacked.elts.index(target)
    for i, j in pairs:
        sibling = unpacked.elts[j] if i == index and j < len(unpacked.elts) else None
        if isinstance(sibling, ast.Name) and training.is_backpropagated(sem, sibling):
            return True
    return False


def _summed(sem: Semantic, value: ast.Tuple, func: ast.AST) -> set[tuple[int, int]]:
    """(i, j) for a returned tuple whose item ``i`` is a name added, as a term, into the name
    that is item ``j`` (``total = coarse + fine + 0.1 * penalty``, also ``total += extra``):
    an assignment of ``j`` in the function that sums ``i``, each term perhaps scaled by a
    number; or the same name as item ``j``."""
    named = [(i, e.id) for i, e in enumerate(value.elts) if isinstance(e, ast.Name)]
    # The same name at two positions (``return loss, out, loss``) is the same tensor.
    out = {(i, j) for i, a in named for j, b in named if i != j and a == b}
    names = dict((name, i) for i, name in named)
    if len(names) < 2:
        return out
    for node in sem.walk(func):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, added = node.targets[0], node.value
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            target, added = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name) or target.id not in names:
            continue
        for term in additive_terms(added):
            if isinstance(term, ast.Name) and term.id in names and term.id != target.id:
                out.add((names[term.id], names[target.id]))
    return out


def additive_terms(expr: ast.expr) -> list[ast.expr]:
    """The terms ``expr`` adds up: ``a + b - c + 0.1 * d`` -> ``a, b, c, d`` (a term scaled or
    divided by a number counts as itself)."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add | ast.Sub):
        return [*additive_terms(expr.left), *additive_terms(expr.right)]
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mult | ast.Div):
        if _is_number(expr.right):
            return additive_terms(expr.left)
        if _is_number(expr.left) and isinstance(expr.op, ast.Mult):
            return additive_terms(expr.right)
    return [expr]


def _is_number(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and type(expr.value) in (int, float)


def _item_replaced(sem: Semantic, item: ast.Subscript, use: ast.AST) -> bool:
    """``out["loss"] = out["loss"].detach()`` (a value without a graph) between the backward
    of ``item`` and ``use``, in the same block of code."""
    for node in sem.assigns:
        target = node.targets[0] if len(node.targets) == 1 else None
        if (
            isinstance(target, ast.Subscript)
            and ast.dump(target.value) == ast.dump(item.value)
            and ast.dump(target.slice) == ast.dump(item.slice)
            and training.is_plain_value(node.value)
            and training.before(item, node)
            and training.before(node, use)
            and sem.enclosing_function(node) is sem.enclosing_function(use)
        ):
            return True
    return False


def _returned_by(sem: Semantic, call: ast.Call, depth: int) -> Returned | None:
    """What the function ``call`` calls returns with a graph, when the call runs with
    gradients on."""
    defined = called_function(sem, call.func)
    if defined is None or training.grad_disabled(sem, call):
        return None
    return returned(*defined, _depth=depth + 1)


def _held_returned(sem: Semantic, expr: ast.AST, depth: int) -> Returned | None:
    """``_returned_by`` for the call whose result ``expr`` holds (inline, or a name assigned
    it)."""
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return None
        expr = binding.value  # type: ignore[assignment]
    if isinstance(expr, ast.Call):
        return _returned_by(sem, expr, depth)
    return None


def _loop_value(sem: Semantic, target: ast.AST, depth: int) -> str | None:
    """A loop variable over ``.items()``/``.values()`` of a dict a helper returned: ``v`` in
    ``for k, v in out.items():``."""
    loop = sem.parent(target)
    position = None
    if isinstance(loop, ast.Tuple) and len(loop.elts) == 2:
        position = loop.elts.index(target)  # type: ignore[arg-type]
        loop = sem.parent(loop)
    if not isinstance(loop, ast.For | ast.AsyncFor | ast.comprehension):
        return None
    iterated = loop.iter
    if not (
        isinstance(iterated, ast.Call)
        and isinstance(iterated.func, ast.Attribute)
        and not iterated.args
    ):
        return None
    method = iterated.func.attr
    if not ((method == "items" and position == 1) or (method == "values" and position is None)):
        return None
    found = _held_returned(sem, iterated.func.value, depth)
    if found is not None and found.values:
        return TENSOR
    if found is None or not found.keys:
        return None
    return SOME if found.plain_keys else TENSOR


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

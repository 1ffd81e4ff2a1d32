"""Loaders over a shuffling ``DistributedSampler`` and the epoch loops that iterate them.

A ``DistributedSampler`` (or a subclass with the same contract, such as torchdata's
``StatefulDistributedSampler``) reshuffles only when ``set_epoch`` is called. These facts tell,
from what the code does, where such a loader is kept and which loops over epochs iterate it:

- ``shuffled_loaders``: every ``DataLoader`` (or torchdata's ``StatefulDataLoader``) of the
  file whose ``sampler=`` is built by a ``DistributedSampler(...)`` call that shuffles, wherever
  it lands: a name, ``self.attr``, a dict item, a name bound to what a local builder function
  (or a method, for ``self.attr = self.build(...)``) returns, a builder of another project
  module (``loader, sampler = build_loader(ds)``), the ``self.attr`` a class keeps it in
  when the loader is handed to its constructor, and a name bound to what a method of an object
  the project makes returns when that method was handed the loader and cannot be read
  (``model, dl = backend.distribute(..., data=loader)``) (``SampledLoader``);
- ``epoch_loops``: the outermost loops (with the loops nested in them) that iterate such a
  loader, directly, through ``iter(loader)``, or through a function they call;
- ``functions_setting_epoch`` / ``sets_epoch``: whether statements call ``set_epoch``, also
  through functions of the file or of other modules (``summaries``);
- ``epoch_counter``: the integer counter of a loop (``epoch`` in ``for epoch in range(n)``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from . import arguments, kinds, summaries, training
from .semantic import Binding, Semantic, dotted, terminal_name
from .training import LoopInfo

DISTRIBUTED_SAMPLER = "torch.utils.data.DistributedSampler"
# Classes that keep the contract of torch's (subclasses): same arguments, same ``set_epoch``.
SAMPLERS = (DISTRIBUTED_SAMPLER, "torchdata.stateful_dataloader.sampler.StatefulDistributedSampler")
LOADERS = (
    "torch.utils.data.DataLoader",
    "torchdata.stateful_dataloader.StatefulDataLoader",
    "torchdata.stateful_dataloader.stateful_dataloader.StatefulDataLoader",
)
_COUNTER_WRAPPERS = frozenset({"tqdm", "track", "progress_bar"})
_COUNTERS = frozenset({"tqdm.trange", "tqdm.auto.trange", "itertools.count"})


@dataclass
class SampledLoader:
    """A DataLoader over a shuffling ``DistributedSampler``, where the code keeps it."""

    target: ast.Name | ast.Attribute | ast.Subscript  # where the loader is kept
    binding: Binding | None  # for names; None for ``self.attr``
    cls: ast.ClassDef | None  # for ``self.attr``
    sampler_ref: ast.expr | None  # the sampler name usable next to the loader, if any
    sampler_binding: Binding | None
    creation: ast.Call  # the DistributedSampler(...) call
    inline_with_loader: ast.AST  # the DataLoader call (a fix must not precede it)
    guard_none: bool  # the sampler name may hold None (``... if distributed else None``)
    fixable: bool  # False when the sampler may be something else than a DistributedSampler
    # For a name bound to what a method returns (``_Through``): that call, and the loader's
    # name handed to it.
    through: tuple[ast.Call, ast.Name] | None = None


def shuffled_loaders(sem: Semantic) -> list[SampledLoader]:
    """The file's loaders over a shuffling ``DistributedSampler`` (see the module's doc)."""
    made_here = (loader for call in sem.calls_to(*LOADERS) for loader in _loaders(sem, call))
    return list(_and_kept(sem, (*made_here, *_built_elsewhere(sem))))


def _loaders(sem: Semantic, call: ast.Call) -> list[SampledLoader]:
    sampler = arguments.value(call, arguments.DATALOADER, "sampler")
    if sampler is None:
        return []
    created, other = kinds.constructions(sem, sampler, lambda c: sem.qualname(c.func) in SAMPLERS)
    if not created or any(_no_shuffle(c) for c in created):
        return []
    # When the sampler may be something else (None, another sampler...), a fix is only
    # offered for ``name = DistributedSampler(...) if cond else None``, guarded.
    guard = (
        isinstance(sampler, ast.Name)
        and other
        and _none_or_sampler(sem, sem.lookup(sampler.id, sampler))
    )
    fixable = not other or guard
    ref: ast.expr | None = None
    sampler_binding = None
    if isinstance(sampler, ast.Name):
        ref, sampler_binding = sampler, sem.lookup(sampler.id, sampler)
    elif isinstance(sampler, ast.Attribute) and dotted(sampler) is not None:
        ref = sampler
    out: list[SampledLoader] = []
    for target in _targets(sem, call):
        returned = isinstance(target, _Returned | _Through)
        own = target.target if isinstance(target, _Returned | _Through) else target
        base = _base_name(own)
        binding = sem.lookup(base.id, base) if isinstance(base, ast.Name) else None
        cls = sem.enclosing_class(own) if isinstance(own, ast.Attribute) else None
        if isinstance(own, ast.Attribute) and cls is None:
            continue
        # A sampler name from inside a builder function is not visible at the caller.
        usable = None if returned else ref
        out.append(
            SampledLoader(
                own,
                binding,
                cls,
                usable,
                sampler_binding,
                created[0],
                call,
                guard,
                # An item of a dict may be replaced by another loader, and what a method returns
                # may be another one: no fix.
                fixable
                and not (returned and guard)
                and not isinstance(own, ast.Subscript)
                and not isinstance(target, _Through),
                (target.call, target.loader) if isinstance(target, _Through) else None,
            )
        )
    return out


def _targets(
    sem: Semantic, call: ast.Call
) -> list[ast.Name | ast.Attribute | ast.Subscript | _Returned | _Through]:
    """Where the DataLoader lands: ``loader = DataLoader(...)``, ``self.loader = ...``,
    or a name assigned from a local function that returns it."""
    parent = sem.parent(call)
    if isinstance(parent, ast.Assign | ast.AnnAssign):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        if len(targets) != 1:
            return []
        target = targets[0]
        if isinstance(target, ast.Name):
            function = sem.enclosing_function(call)
            returned = _returned_name(sem, function, target.id) if function else []
            return [target, *returned, *_handed_over(sem, target)]
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            return [target]
        if training.reference(target) is not None and isinstance(target, ast.Subscript):
            return [target]  # loaders["train"] = DataLoader(...)
        return []
    if isinstance(parent, ast.Dict) and call in parent.values:
        return [*_dict_item(sem, parent, parent.keys[parent.values.index(call)])]
    if isinstance(parent, ast.Return):
        function = sem.enclosing_function(call)
        return list(_call_sites(sem, function)) if function else []
    return []


def epoch_loops(sem: Semantic, loader: SampledLoader) -> list[list[LoopInfo]]:
    want = training.reference(loader.target)
    candidates: list[LoopInfo] = []
    for info in training.all_loops(sem):
        if info.is_batch_loop:
            continue
        if loader.binding is not None:
            name = _base_name(loader.target)
            assert isinstance(name, ast.Name)
            if loader.binding not in sem.reaching(name.id, info.node):
                continue  # (a binding in one branch of an `if` before the loop reaches it)
        elif sem.enclosing_class(info.node) is not loader.cls:
            continue
        if training.loop_uses_loader(sem, info, loader.target) and want:
            candidates.append(info)
    chosen = set(map(id, candidates))
    chains: list[list[LoopInfo]] = []
    for info in candidates:
        parent = info.parent
        nested = False
        while parent is not None:
            if id(parent) in chosen:
                nested = True
                break
            parent = parent.parent
        if nested:
            continue
        chain = [info] + [
            c for c in candidates if c is not info and sem.is_inside(c.node, info.node)
        ]
        chains.append(chain)
    return chains


@dataclass
class _Returned:
    """A name bound to the result of a local function that returns the DataLoader."""

    target: ast.Name | ast.Attribute


def _call_sites(
    sem: Semantic, function: ast.FunctionDef | ast.AsyncFunctionDef, index: int | None = None
) -> Iterator[_Returned]:
    """``x = function(...)`` (or ``x, y = ...`` at ``index``) anywhere in the file; for a
    method, ``self.loader = self.build(...)`` in its class too."""
    calls = [
        c
        for c in sem.calls_by_name.get(function.name, ())
        if sem.local_function(c.func) is function
    ]
    owner = sem.parent(function)
    if isinstance(owner, ast.ClassDef):
        calls += [
            c
            for c in sem.calls_by_attr.get(function.name, ())
            if isinstance(c.func, ast.Attribute)
            and isinstance(c.func.value, ast.Name)
            and c.func.value.id == "self"
            and sem.enclosing_class(c) is owner
        ]
    for call in calls:
        parent = sem.parent(call)
        if not isinstance(parent, ast.Assign) or len(parent.targets) != 1:
            continue
        target = parent.targets[0]
        kept = isinstance(target, ast.Attribute) and dotted(target) == f"self.{target.attr}"
        if index is None and (isinstance(target, ast.Name) or kept):
            assert isinstance(target, ast.Name | ast.Attribute)
            yield _Returned(target)
        elif (
            index is not None
            and isinstance(target, ast.Tuple | ast.List)
            and index < len(target.elts)
            and isinstance(target.elts[index], ast.Name)
        ):
            elt = target.elts[index]
            assert isinstance(elt, ast.Name)
            yield _Returned(elt)


@dataclass
class _Through:
    """A name bound to what a method the project's code provides returns, when it was handed
    the DataLoader and its body cannot be read (``summaries.opaque_project_method``)."""

    target: ast.Name
    call: ast.Call  # the method's call
    loader: ast.Name  # the loader's name, where it is bound


def _handed_over(sem: Semantic, loader: ast.Name) -> list[_Through]:
    """``(model, opt, dl2, sched) = backend.distribute(..., training_data=ds if ds_only else
    dl)``: the names bound to what such a method returns that a ``for`` loop of the file
    iterates (through ``enumerate``, ``tqdm``...): the loop may go over the loader handed in, or
    over a wrapper iterating it."""
    binding = sem.lookup(loader.id, loader)
    if binding is None:
        return []
    out: list[_Through] = []
    for use in sem.reads(loader.id).get(binding.node, ()):
        arg: ast.AST = use
        parent = sem.parent(arg)
        if isinstance(parent, ast.IfExp) and arg is not parent.test:
            arg, parent = parent, sem.parent(parent)  # one branch of ``a if c else b``
        if isinstance(parent, ast.keyword):
            arg, parent = parent, sem.parent(parent)
        if not isinstance(parent, ast.Call) or arg is parent.func:
            continue
        if not summaries.opaque_project_method(sem, parent.func):
            continue
        assign = sem.parent(parent)
        if not isinstance(assign, ast.Assign) or len(assign.targets) != 1:
            continue
        dest = assign.targets[0]
        for name in dest.elts if isinstance(dest, ast.Tuple | ast.List) else [dest]:
            if isinstance(name, ast.Name) and _iterated(sem, name):
                out.append(_Through(name, parent, loader))
    return out


def _iterated(sem: Semantic, name: ast.Name) -> bool:
    """Whether a ``for`` loop of the file iterates the value bound at ``name``."""
    binding = sem.lookup(name.id, name)
    for loop in sem.loops:
        if not isinstance(loop, ast.For | ast.AsyncFor):
            continue
        for each in training.iterated_candidates(loop.iter):
            if (
                isinstance(each, ast.Name)
                and each.id == name.id
                and sem.lookup(each.id, each) is binding
            ):
                return True
    return False


def _returned_name(
    sem: Semantic, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> list[_Returned]:
    """Call sites receiving ``name`` when ``function`` returns it (alone or in a tuple)."""
    out: list[_Returned] = []
    for node in sem.walk(function):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Name) and value.id == name:
            out += _call_sites(sem, function)
        elif isinstance(value, ast.Tuple):
            for i, elt in enumerate(value.elts):
                if isinstance(elt, ast.Name) and elt.id == name:
                    out += _call_sites(sem, function, i)
    return out


def _no_shuffle(sampler: ast.Call) -> bool:
    value = arguments.value(sampler, arguments.DISTRIBUTED_SAMPLER, "shuffle")
    return isinstance(value, ast.Constant) and not value.value


def _none_or_sampler(sem: Semantic, binding: Binding | None) -> bool:
    """``sampler = DistributedSampler(ds) if cond else None`` (its only assignment)."""
    if binding is None or binding.how != "assign" or not isinstance(binding.value, ast.IfExp):
        return False
    scope = sem.scopes.get(binding.scope)
    if scope is None or len(scope.bindings.get(binding.name, [])) != 1:
        return False
    branches = (binding.value.body, binding.value.orelse)
    nones = [b for b in branches if isinstance(b, ast.Constant) and b.value is None]
    calls = [b for b in branches if isinstance(b, ast.Call) and sem.qualname(b.func) in SAMPLERS]
    return len(nones) == 1 and len(calls) == 1


def epoch_counter(sem: Semantic, loop: LoopInfo) -> str | None:
    """The loop's integer counter (``epoch`` in ``for epoch in range(n)``), if it has one."""
    node = loop.node
    name = loop.target_name
    if name is None or not isinstance(node, ast.For | ast.AsyncFor):
        return None
    expr: ast.expr = node.iter
    tuple_target = isinstance(node.target, ast.Tuple)
    for _ in range(3):
        if not isinstance(expr, ast.Call):
            return None
        func = expr.func
        callee = terminal_name(func)
        builtin = isinstance(func, ast.Name) and sem.lookup(func.id, func) is None
        if builtin and callee == "range":
            return None if tuple_target else name
        if builtin and callee == "enumerate":
            return name if tuple_target else None
        if sem.qualname(func) in _COUNTERS:
            return None if tuple_target else name
        if callee in _COUNTER_WRAPPERS and expr.args:
            expr = expr.args[0]
            continue
        return None
    return None


def _base_name(target: ast.expr) -> ast.expr:
    """The name a loader is kept under: ``loaders`` for ``loaders["train"]``."""
    return target.value if isinstance(target, ast.Subscript) else target


def _dict_item(sem: Semantic, made: ast.Dict, key: ast.expr | None) -> list[ast.Subscript]:
    """``loaders["train"]`` as the file reads it, for a DataLoader made as the item ``key`` of
    the dict assigned to ``loaders``."""
    stmt = sem.parent(made)
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(key, ast.Constant)
    ):
        return []
    name = stmt.targets[0]
    binding = sem.lookup(name.id, name)
    for load in sem.names.get(name.id, ()):
        item = sem.parent(load)
        if (
            isinstance(item, ast.Subscript)
            and item.value is load
            and isinstance(item.slice, ast.Constant)
            and item.slice.value == key.value
            and sem.lookup(name.id, load) is binding
        ):
            return [item]
    return []


def _and_kept(sem: Semantic, loaders: Iterable[SampledLoader]) -> Iterator[SampledLoader]:
    """The loaders, and for a loader name handed to a class of the file, the ``self.attr`` its
    ``__init__`` keeps it in (iterated by the class's methods)."""
    for loader in loaders:
        yield loader
        if isinstance(loader.target, ast.Name):
            for kept in summaries.kept_on_self(sem, loader.target):
                yield replace(
                    loader,
                    target=kept,
                    binding=None,
                    cls=sem.enclosing_class(kept),
                    sampler_ref=None,
                    sampler_binding=None,
                    # Other modules may make the class with a loader of another sampler.
                    fixable=False,
                )


def functions_setting_epoch(sem: Semantic) -> set[str]:
    """Names of the file's functions that call ``set_epoch`` (directly or through each other)."""
    sem = sem
    found: set[str] = set()
    if not sem.calls_by_attr.get("set_epoch"):
        return found
    changed = True
    while changed:
        changed = False
        for function in sem.functions:
            if function.name not in found and sets_epoch(sem, function.body, found):
                found.add(function.name)
                changed = True
    return found


def sets_epoch(sem: Semantic, body: list[ast.stmt], setters: set[str]) -> bool:
    for node in sem.walk_body(body):
        if isinstance(node, ast.Call):
            callee = terminal_name(node.func)
            if callee == "set_epoch" and isinstance(node.func, ast.Attribute):
                return True
            if callee in setters:
                return True
            called = summaries.summary(sem, node.func)
            if called is not None and "set_epoch" in called.methods:
                return True  # a helper (of another module too) that seeds the sampler
    return False


def _built_elsewhere(sem: Semantic) -> Iterator[SampledLoader]:
    """Loaders that a function of another project module builds with a ``DistributedSampler``
    and returns (alone, or with the sampler in a tuple): ``loader, sampler = build(ds)``."""
    sem = sem
    if sem.project is None:
        return
    for stmt in sem.assigns:
        call = stmt.value
        if len(stmt.targets) != 1 or not isinstance(call, ast.Call):
            continue
        defined = sem.function_def(call.func)
        if defined is None or defined[0] is sem:
            continue
        owner, func = defined
        target = stmt.targets[0]
        for index, creation, sampler_index, other in _returned_loaders(owner, func):
            if index is None:
                own = target if isinstance(target, ast.Name) else None
                sampler_ref = None
            elif isinstance(target, ast.Tuple | ast.List) and index < len(target.elts):
                elt = target.elts[index]
                own = elt if isinstance(elt, ast.Name) else None
                ref = target.elts[sampler_index] if sampler_index is not None else None
                sampler_ref = ref if isinstance(ref, ast.Name) else None
            else:
                continue
            if own is None:
                continue
            sampler_binding = sem.lookup(sampler_ref.id, sampler_ref) if sampler_ref else None
            yield SampledLoader(
                own,
                sem.lookup(own.id, own),
                None,
                sampler_ref,
                sampler_binding,
                creation,
                call,
                False,
                not other,
            )


def _returned_loaders(
    sem: Semantic, func: ast.FunctionDef | ast.AsyncFunctionDef
) -> list[tuple[int | None, ast.Call, int | None, bool]]:
    """What ``func`` returns that is a DataLoader over a shuffling ``DistributedSampler``: the
    position in the returned tuple (None: returned alone), the sampler's creation, the position
    of the sampler itself in the tuple, and whether the sampler may be something else."""
    out: list[tuple[int | None, ast.Call, int | None, bool]] = []

    def is_loader(c: ast.Call) -> bool:
        return sem.qualname(c.func) in LOADERS

    def is_sampler(c: ast.Call) -> bool:
        return sem.qualname(c.func) in SAMPLERS

    for value in sem.returns(func):
        parts = list(enumerate(value.elts)) if isinstance(value, ast.Tuple) else [(None, value)]
        for index, part in parts:
            made, _other = kinds.constructions(sem, part, is_loader)
            for loader in made:
                sampler = arguments.value(loader, arguments.DATALOADER, "sampler")
                created, other = kinds.constructions(sem, sampler, is_sampler)
                if not created or any(_no_shuffle(c) for c in created):
                    continue
                sampler_index = None
                for j, elt in parts:
                    if j is not None and j != index:
                        found, _ = kinds.constructions(sem, elt, is_sampler)
                        if any(c in created for c in found):
                            sampler_index = j
                out.append((index, created[0], sampler_index, other))
    return out

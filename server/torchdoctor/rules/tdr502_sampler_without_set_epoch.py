from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import partial

from ..core import epochs, fixes
from ..core.context import Context
from ..core.epochs import SampledLoader
from ..core.model import Applicability, Fix, Range, Text
from ..core.semantic import terminal_name
from ..core.training import LoopInfo
from .base import Rule
from .examples import tdr502

# Loaders whose order does not matter (evaluation) are left alone.
_EVAL_LOADER = re.compile(r"(^|_)(val|valid|validation|test|eval)", re.I)
_EPOCH_NAME = re.compile(r"epoch|^ep$|^e$", re.I)


class SamplerWithoutSetEpoch(Rule):
    """## What it does
    Checks for a `DistributedSampler` whose `DataLoader` is iterated in a loop over epochs that
    never calls `set_epoch` on the sampler (directly, as `loader.sampler.set_epoch(...)`, or
    inside a function called from the loop, of the file or of another module of the project).
    The loader and its sampler may come from a function of another module
    (`loader, sampler = build_loader(ds)` with `build_loader` in `data.py`); the finding then
    says where the sampler is created. When the loader is handed to a method of an object the
    project's own code makes, whose body cannot be read (a distributed backend's
    `model, dl = backend.distribute(model=net, data=loader)`), a loop over a name that method
    returns counts as a loop over the loader: it goes over the loader or over a wrapper of it.

    ## Why is this bad?
    A `DistributedSampler` shuffles with a generator seeded by `seed + epoch`, and its epoch
    only changes when you call `set_epoch`. Without it every rank gets the same share of the
    data, in the same order, in every epoch: the training silently loses the reshuffling that
    single-process training gets from `shuffle=True`, which often costs accuracy. Nothing warns
    about it. As
    PyTorch's documentation puts it, calling `set_epoch` "at the beginning of each epoch
    before creating the DataLoader iterator is necessary to make shuffling work properly".

    torchdata's `StatefulDataLoader` and `StatefulDistributedSampler` (subclasses with the
    same contract) count as well, and the loader may be read with `iter()` and `next()`.

    Loaders whose name says they are for evaluation (`val`, `test`, `eval`) and samplers created
    with `shuffle=False` are not reported: their order does not matter.

    ## Example
    ```python
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
    for epoch in range(epochs):
        for images, labels in loader:
            train_step(images, labels)
    ```

    ## Use instead
    ```python
    sampler = DistributedSampler(train_set)
    loader = DataLoader(train_set, batch_size=64, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            train_step(images, labels)
    ```

    ## Fix safety
    The fix inserts `sampler.set_epoch(epoch)` (or `loader.sampler.set_epoch(epoch)` when the
    sampler has no name there) as the first statement of the epoch loop, guarded by
    `if sampler is not None:` when the sampler exists only in distributed runs. It is safe: it
    restores the per-epoch shuffling the sampler was created for. No fix is offered when the
    loop has no epoch counter to pass (`for _ in ...`, a `while` loop, a loop over something
    other than `range`/`enumerate`), when the sampler is created inside the loop, or when the
    loop goes over what a method returned (it may be another loader).

    ## References
    - [`DistributedSampler`](https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler)
    - [Getting started with distributed data parallel](https://pytorch.org/tutorials/intermediate/ddp_tutorial.html)
    """

    code = "TDR502"
    name = "sampler-without-set-epoch"
    fix_safety = Applicability.SAFE

    VALID = tdr502.VALID
    INVALID = tdr502.INVALID

    def check(self, ctx: Context) -> None:
        # One finding per epoch loop, naming every loader whose sampler it leaves unseeded.
        by_loop: dict[ast.AST, tuple[LoopInfo, list[SampledLoader]]] = {}
        for loader, loop in self._unseeded(ctx):
            by_loop.setdefault(loop.node, (loop, []))[1].append(loader)
        for loop, loaders in by_loop.values():
            self._report(ctx, loaders, loop)

    def _unseeded(self, ctx: Context) -> Iterator[tuple[SampledLoader, LoopInfo]]:
        setters = epochs.functions_setting_epoch(ctx.sem)
        for loader in epochs.shuffled_loaders(ctx.sem):
            target = loader.target
            name = terminal_name(target) or ""
            if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                name = str(target.slice.value)  # loaders["val"]
            if _EVAL_LOADER.search(name):
                continue
            for chain in epochs.epoch_loops(ctx.sem, loader):
                top = chain[0]
                if epochs.sets_epoch(ctx.sem, top.node.body, setters):
                    continue
                chosen = next((c for c in chain if _EPOCH_NAME.search(c.target_name or "")), top)
                yield loader, chosen

    # -- reporting ------------------------------------------------------------------------
    def _report(self, ctx: Context, loaders: list[SampledLoader], loop: LoopInfo) -> None:
        node = loop.node
        header_end = node.iter if isinstance(node, ast.For | ast.AsyncFor) else node.test
        rng = Range(ctx.source.start(node), ctx.source.end(header_end))
        names = "`, `".join(ctx.segment(loader.target) for loader in loaders)
        # A loader followed through a method: which call returned it for which loader.
        via_en = via_zh = ""
        handed = next((loader.through for loader in loaders if loader.through), None)
        if handed is not None:
            callee, given = ctx.segment(handed[0].func), handed[1].id
            via_en = f" (what `{callee}(...)` returns for `{given}`)"
            via_zh = f"（`{callee}(...)` 对 `{given}` 返回的值）"
        samplers = "`DistributedSampler`" + ("s" if len(loaders) > 1 else "")
        related = []
        origins: list[str] = []
        for loader in loaders:
            where = ctx.elsewhere(loader.creation)
            if where is not None:
                origins.append(where)
            if where is None:
                related.append(
                    ctx.related(
                        loader.creation,
                        Text(
                            "The `DistributedSampler` is created here",
                            "`DistributedSampler` 在此创建",
                        ),
                    )
                )
            else:  # built by a helper of another module: say where, at the call of the helper
                related.append(
                    ctx.related(
                        loader.inline_with_loader,
                        Text(
                            f"`DistributedSampler` created in {where}",
                            f"`DistributedSampler` 创建于 {where}",
                        ),
                    )
                )
        ctx.report(
            rng,
            Text(
                f"This epoch loop never calls `set_epoch` on the {samplers} of "
                f"`{names}`{via_en}: every epoch sees the samples in the same order"
                + (f" (`DistributedSampler` created in {', '.join(origins)})" if origins else ""),
                f"该 epoch 循环从未调用 `{names}`{via_zh or ' '}的 `DistributedSampler` 的 `set_epoch`："
                "每个 epoch 的样本顺序都相同"
                + (f"（`DistributedSampler` 创建于 {'、'.join(origins)}）" if origins else ""),
            ),
            fixes=partial(self._fixes, ctx, loaders, loop),
            related=related,
        )

    def _fixes(self, ctx: Context, loaders: list[SampledLoader], loop: LoopInfo) -> Fix | None:
        """One fix seeding every loader of the loop (those that can be fixed)."""
        found = [f for f in (self._fix(ctx, loader, loop) for loader in loaders) if f is not None]
        if len(found) <= 1:
            return found[0] if found else None
        return Fix(
            Text(
                " ".join(f.title.en.removesuffix(" first in the loop") for f in found[:1])
                + "".join(
                    " and " + f.title.en.removeprefix("Call ").removesuffix(" first in the loop")
                    for f in found[1:]
                )
                + " first in the loop",
                "；".join(f.title.zh for f in found),
            ),
            tuple(edit for f in found for edit in f.edits),
            Applicability.SAFE,
        )

    def _fix(self, ctx: Context, loader: SampledLoader, loop: LoopInfo) -> Fix | None:
        sem = ctx.sem
        epoch = epochs.epoch_counter(ctx.sem, loop)
        if epoch is None or not loader.fixable:
            return None
        for made in (loader.creation, loader.inline_with_loader, loader.target):
            if sem.is_inside(made, loop.node):
                return None
        if isinstance(loader.target, ast.Name) and loader.binding is not None:
            if sem.lookup(loader.target.id, loop.node) is not loader.binding:
                return None  # built in one branch of an `if`: the other's loader may differ
        ref = loader.sampler_ref
        if isinstance(ref, ast.Name) and (
            loader.sampler_binding is None
            or sem.lookup(ref.id, loop.node) is not loader.sampler_binding
        ):
            ref = None
        if ref is not None:
            owner = ctx.segment(ref)
        elif loader.guard_none:
            return None
        else:
            owner = f"{ctx.segment(loader.target)}.sampler"
        code = f"{owner}.set_epoch({epoch})"
        if loader.guard_none and ref is not None:
            code = f"if {owner} is not None:\n    {code}"
        edit = fixes.insert_statement_before(ctx.source, loop.node.body[0], code)
        if edit is None:
            return None
        return Fix(
            Text(
                f"Call `{owner}.set_epoch({epoch})` first in the loop",
                f"在循环开头调用 `{owner}.set_epoch({epoch})`",
            ),
            (edit,),
            Applicability.SAFE,
        )

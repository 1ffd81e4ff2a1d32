from __future__ import annotations

import ast

from ..core import arguments, data, kinds, summaries, training
from ..core.context import Context
from ..core.model import Severity, Text
from ..core.semantic import Semantic
from .base import Invalid, Rule, Valid

_PREFIX = "torch.optim.lr_scheduler."
PER_ITERATION = frozenset({"OneCycleLR", "CyclicLR"})
PER_EPOCH = frozenset({"StepLR", "MultiStepLR", "ExponentialLR", "ReduceLROnPlateau"})
# Above this, a literal step size or milestone is counted in iterations, not epochs.
ITERATION_SCALE = 1000
# A training function of another module that steps the scheduler it is given per batch.
_ENGINE_PY = (
    "def train_one_epoch(model, loader, optimizer, scheduler):\n"
    "    for x, y in loader:\n"
    "        model(x).sum().backward()\n"
    "        optimizer.step()\n"
    "        scheduler.step()\n"
)


class SchedulerWrongGranularity(Rule):
    """## What it does
    Checks for a per-iteration scheduler (`OneCycleLR`, `CyclicLR`) stepped only once per
    epoch, and for an epoch scheduler (`StepLR`, `MultiStepLR`, `ExponentialLR`,
    `ReduceLROnPlateau`) stepped inside the loop over batches.

    A step under a counting test of the batch loop that guards no optimizer step
    (`if global_step % eval_every == 0:`, a periodic evaluation feeding
    `ReduceLROnPlateau`) runs once per evaluation round and is not reported.

    ## Why is this bad?
    `OneCycleLR` and `CyclicLR` describe the learning rate per optimizer step: their
    `total_steps`/`steps_per_epoch` and `step_size_up` count batches. Stepped once per epoch, the
    one-cycle warm-up never finishes and the rate stays near its starting value. Epoch schedulers
    are the opposite: `StepLR(step_size=30)` stepped per batch decays the rate every 30
    *batches*, and `ExponentialLR(gamma=0.95)` drives it to almost zero within the first epoch.
    Nothing fails; the model just trains badly.

    To avoid false positives on iteration-based training, an epoch scheduler in a batch loop is
    reported only when the batch loop sits inside an epoch loop and its literal step sizes or
    milestones are below 1,000 (larger ones are read as iteration counts), or they are not
    literals at all for `ExponentialLR` and `ReduceLROnPlateau`.

    ## Example
    ```python
    scheduler = OneCycleLR(optimizer, max_lr=0.1, epochs=10, steps_per_epoch=len(loader))
    for epoch in range(10):
        for x, y in loader:
            train_step(x, y)
        scheduler.step()
    ```

    ## Use instead
    ```python
    scheduler = OneCycleLR(optimizer, max_lr=0.1, epochs=10, steps_per_epoch=len(loader))
    for epoch in range(10):
        for x, y in loader:
            train_step(x, y)
            scheduler.step()
    ```

    ## Fix safety
    No fix is offered: moving the call also changes which epoch or batch each learning rate
    applies to, and that is a decision about the schedule.

    ## References
    - [`OneCycleLR`](https://pytorch.org/docs/stable/generated/torch.optim.lr_scheduler.OneCycleLR.html)
    - [`StepLR`](https://pytorch.org/docs/stable/generated/torch.optim.lr_scheduler.StepLR.html)
    """

    code = "TDR703"
    name = "scheduler-wrong-granularity"
    severity = Severity.WARNING

    VALID = (
        "from torch.optim.lr_scheduler import OneCycleLR\ns = OneCycleLR(opt, 0.1, total_steps=1000)\n"
        "for epoch in range(10):\n    for x in loader:\n        opt.step()\n        s.step()",
        "from torch.optim.lr_scheduler import StepLR\ns = StepLR(opt, step_size=30)\n"
        "for epoch in range(90):\n    for x in loader:\n        opt.step()\n    s.step()",
        # Iteration-based schedule: milestones count iterations.
        "from torch.optim.lr_scheduler import MultiStepLR\ns = MultiStepLR(opt, [60000, 80000])\n"
        "for epoch in range(90):\n    for x in loader:\n        opt.step()\n        s.step()",
        # No epoch loop around the batch loop: iteration-based training.
        "from torch.optim.lr_scheduler import StepLR\ns = StepLR(opt, 30)\n"
        "for x in loader:\n    opt.step()\n    s.step()",
        # Stepped by a periodic evaluation inside the batch loop.
        "from torch.optim.lr_scheduler import ReduceLROnPlateau\n"
        "sched = ReduceLROnPlateau(opt, 'max', patience=5)\n"
        "for epoch in range(epochs):\n    for i, batch in enumerate(loader):\n"
        "        opt.step()\n        if i % eval_every == 0:\n"
        "            score = evaluate(model, val_loader)\n            sched.step(score)\n",
        # Unknown scheduler class.
        "import torch\ns = make_scheduler(opt)\nfor epoch in range(3):\n    for x in loader:\n"
        "        s.step()",
        # Schedulers passed to train functions that step them at their own granularity.
        "from torch.optim.lr_scheduler import OneCycleLR, StepLR\n"
        "def train_one_epoch(model, loader, opt, sched):\n"
        "    for x in loader:\n        opt.step()\n        sched.step()\n"
        "def train(model, loader, opt, scheduler):\n"
        "    for x in loader:\n        opt.step()\n"
        "    scheduler.step()\n"
        "for epoch in range(10):\n"
        "    train_one_epoch(model, loader, opt, OneCycleLR(opt, 0.1, total_steps=1000))\n"
        "    train(model, loader, opt, StepLR(opt, 30))\n",
        # Across modules: a per-iteration schedule handed to a function that steps it per batch.
        Valid(
            "import torch\nfrom engine import train_one_epoch\n"
            "sched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, total_steps=10000)\n"
            "for epoch in range(10):\n"
            "    train_one_epoch(model, loader, opt, sched)\n",
            files=(("engine.py", _ENGINE_PY),),
        ),
    )
    INVALID = (
        # Under the accumulation test with the optimizer's step: still once per few batches.
        Invalid(
            "from torch.optim.lr_scheduler import StepLR\nsched = StepLR(opt, step_size=30)\n"
            "for epoch in range(90):\n    for i, x in enumerate(loader):\n"
            "        model(x).sum().backward()\n        if (i + 1) % 4 == 0:\n"
            "            opt.step()\n            sched.step()\n",
            fixed=None,
            lines=(8,),
        ),
        Invalid(
            "import torch\nsched = torch.optim.lr_scheduler.OneCycleLR(opt, 0.1, epochs=10, "
            "steps_per_epoch=100)\nfor epoch in range(10):\n    for x in train_loader:\n"
            "        opt.step()\n    sched.step()",
            fixed=None,
            lines=(6,),
        ),
        Invalid(
            "from torch.optim.lr_scheduler import StepLR\nsched = StepLR(opt, step_size=30)\n"
            "for epoch in range(90):\n    for x in loader:\n        opt.step()\n        sched.step()",
            fixed=None,
            lines=(6,),
        ),
        Invalid(
            "from torch.optim import lr_scheduler\n"
            "sched = lr_scheduler.ExponentialLR(opt, gamma=0.95)\n"
            "for epoch in range(90):\n    for x in loader:\n        opt.step()\n        sched.step()",
            fixed=None,
            lines=(6,),
        ),
        # An epoch schedule passed to a function that steps it per batch, called per epoch.
        Invalid(
            "from torch.optim.lr_scheduler import StepLR\n"
            "def train_one_epoch(model, loader, opt, scheduler):\n"
            "    for x, y in loader:\n        opt.step()\n        scheduler.step()\n"
            "sched = StepLR(opt, step_size=30)\n"
            "for epoch in range(90):\n    train_one_epoch(model, loader, opt, sched)\n",
            fixed=None,
            lines=(5,),
        ),
        # A one-cycle schedule passed by keyword, stepped once after the batch loop.
        Invalid(
            "from torch.optim.lr_scheduler import OneCycleLR\n"
            "def train(model, loader, opt, scheduler):\n"
            "    for x, y in loader:\n        opt.step()\n"
            "    scheduler.step()\n"
            "for epoch in range(10):\n"
            "    train(model, loader, opt, scheduler=OneCycleLR(opt, 0.1, total_steps=1000))\n",
            fixed=None,
            lines=(5,),
        ),
        # Across modules: an epoch schedule handed to a function that steps it per batch.
        Invalid(
            "import torch\nfrom engine import train_one_epoch\n"
            "sched = torch.optim.lr_scheduler.StepLR(opt, step_size=30)\n"
            "for epoch in range(90):\n"
            "    train_one_epoch(model, loader, opt, sched)\n",
            fixed=None,
            files=(("engine.py", _ENGINE_PY),),
            lines=(5,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for call in sem.calls_by_attr.get("step", ()):
            assert isinstance(call.func, ast.Attribute)
            found = _construction(sem, call.func.value)
            if found is None:
                continue
            made, sites = found
            kind = _scheduler_class(sem, made)
            if kind is None:
                continue
            # A scheduler received as a parameter: the loops around the calls count too.
            called_in_loop = bool(sites) and all(
                training.repeating_loop(sem, site) is not None for site in sites
            )
            wrong = _wrong_granularity(sem, call, kind, made, bool(sites), called_in_loop)
            if wrong is not None:
                self._report(ctx, call, kind, per_iteration=wrong)
        self._check_passed(ctx)

    def _check_passed(self, ctx: Context) -> None:
        """Schedulers made here and handed to a function of another module that steps them
        (``train_one_epoch(model, loader, optimizer, scheduler)``): reported at the argument."""
        sem = ctx.sem
        if sem.project is None:
            return
        for made in sem.calls_to(*_SCHEDULERS):
            kind = _scheduler_class(sem, made)
            if kind is None:
                continue
            for value, site, param in _handed_over(sem, made):
                defined = summaries.called_function(sem, site.func)
                if defined is None or defined[0] is sem:
                    continue  # a function of this file: reported at its `step()`
                owner, func = defined
                in_loop = training.repeating_loop(sem, site) is not None
                for step in owner.calls_by_attr.get("step", ()):
                    assert isinstance(step.func, ast.Attribute)
                    receiver = step.func.value
                    if not (
                        isinstance(receiver, ast.Name)
                        and receiver.id == param
                        and owner.enclosing_function(step) is func
                        and getattr(owner.lookup(param, receiver), "how", None) == "param"
                    ):
                        continue
                    wrong = _wrong_granularity(owner, step, kind, made, True, in_loop)
                    if wrong is not None:
                        where = ctx.elsewhere(step) or ""
                        self._report(ctx, value, kind, per_iteration=wrong, where=where)
                        break

    @staticmethod
    def _epoch_sized(made: ast.Call, kind: str) -> bool:
        if kind in ("ExponentialLR", "ReduceLROnPlateau"):
            return True
        if kind == "StepLR":
            value = arguments.value(made, "torch.optim.lr_scheduler.StepLR", "step_size")
            return (
                isinstance(value, ast.Constant)
                and isinstance(value.value, int)
                and (value.value < ITERATION_SCALE)
            )
        value = arguments.value(made, "torch.optim.lr_scheduler.MultiStepLR", "milestones")
        if isinstance(value, ast.List | ast.Tuple) and value.elts:
            nums = [e.value for e in value.elts if isinstance(e, ast.Constant)]
            return len(nums) == len(value.elts) and all(
                isinstance(n, int) and n < ITERATION_SCALE for n in nums
            )
        return False

    @staticmethod
    def _report(
        ctx: Context, node: ast.AST, kind: str, *, per_iteration: bool, where: str = ""
    ) -> None:
        at = f" (stepped in {where})" if where else ""
        at_zh = f"（在 {where} 中 step）" if where else ""
        if per_iteration:
            message = Text(
                f"`{kind}` counts optimizer steps but is stepped once per epoch{at}: the "
                "schedule barely moves",
                f"`{kind}` 按优化器步数计数，却每个 epoch 才 step 一次{at_zh}：学习率几乎不变",
            )
        else:
            message = Text(
                f"`{kind}` is an epoch schedule but is stepped for every batch{at}: the "
                "learning rate decays far too fast",
                f"`{kind}` 是按 epoch 的调度器，却在每个 batch 都 step{at_zh}：学习率衰减得太快了",
            )
        ctx.report(node, message)


def _construction(sem: Semantic, expr: ast.expr) -> tuple[ast.Call, list[ast.Call]] | None:
    """The call that made the scheduler ``expr`` holds, with the calls of the function it
    came into as a parameter (every call site of a function of this file passes one made by
    the same class); None when it cannot be told."""
    made = kinds.constructor_call(sem, expr)
    if made is not None:
        return made, []
    binding = sem.lookup(expr.id, expr) if isinstance(expr, ast.Name) else None
    if binding is None or binding.how != "param":
        return None
    values = data.param_values(sem, binding)
    if not values:
        return None
    calls: list[ast.Call] = []
    sites: list[ast.Call] = []
    for value in values:
        call = value if isinstance(value, ast.Call) else kinds.constructor_call(sem, value)
        site = sem.parent(value)
        if isinstance(site, ast.keyword):
            site = sem.parent(site)
        if call is None or not isinstance(site, ast.Call):
            return None
        calls.append(call)
        sites.append(site)
    if len({sem.qualname(c.func) for c in calls}) != 1:
        return None
    return calls[0], sites


def _after_batch_loop(sem: Semantic, call: ast.Call) -> bool:
    """Whether ``call`` runs once per call of its function, after a batch loop of the same
    function (``for x in loader: ...`` then ``scheduler.step()``)."""
    function = sem.enclosing_function(call)
    if function is None:
        return False
    return any(
        loop.is_batch_loop and loop.function is function and training.before(loop.node, call)
        for loop in training.all_loops(sem)
    )


_SCHEDULERS = tuple(_PREFIX + name for name in sorted(PER_ITERATION | PER_EPOCH))


def _scheduler_class(sem: Semantic, made: ast.Call) -> str | None:
    """``StepLR`` for a call of ``torch.optim.lr_scheduler.StepLR``."""
    qual = sem.qualname(made.func)
    if qual is None or not qual.startswith(_PREFIX):
        return None
    return qual[len(_PREFIX) :]


def _wrong_granularity(
    sem: Semantic, call: ast.Call, kind: str, made: ast.Call, passed: bool, called_in_loop: bool
) -> bool | None:
    """True when a per-iteration scheduler's ``step()`` runs once per epoch, False when an
    epoch scheduler's runs for every batch, None when it runs where it should (or it cannot be
    told). ``passed``: the scheduler came in as a parameter; ``called_in_loop``: every call of
    the function runs in a repeating loop."""
    loops = training.enclosing_loops(sem, call)
    if kind in PER_ITERATION and not any(loop.is_batch_loop for loop in loops):
        # Once per epoch: after the batch loop of the loop around it, or (received as a
        # parameter) after the batch loop of its function.
        if loops:
            return True if training.contains_batch_loop(sem, loops[0]) else None
        return True if passed and _after_batch_loop(sem, call) else None
    if kind in PER_EPOCH and loops and loops[0].is_batch_loop:
        if (
            (len(loops) > 1 or called_in_loop)
            and SchedulerWrongGranularity._epoch_sized(made, kind)
            and not _periodic(sem, call, loops[0].node)
        ):
            return False
    return None


def _handed_over(sem: Semantic, made: ast.Call) -> list[tuple[ast.expr, ast.Call, str]]:
    """Where a scheduler made by ``made`` is passed to a function: (the argument, the call, the
    parameter's name), for the call inline and for a name assigned it."""
    values: list[ast.expr] = [made]
    parent = sem.parent(made)
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
        target = parent.targets[0]
        if isinstance(target, ast.Name):
            binding = sem.lookup(target.id, target)
            values += [
                load
                for load in sem.names.get(target.id, ())
                if sem.lookup(target.id, load) is binding
            ]
    out: list[tuple[ast.expr, ast.Call, str]] = []
    for value in values:
        site = sem.parent(value)
        keyword_name = None
        if isinstance(site, ast.keyword):
            keyword_name, site = site.arg, sem.parent(site)
        if not isinstance(site, ast.Call) or site.func is value:
            continue
        defined = summaries.called_function(sem, site.func)
        if defined is None:
            continue
        func = defined[1]
        if keyword_name is None:
            if value not in site.args or any(isinstance(a, ast.Starred) for a in site.args):
                continue
            params = [a.arg for a in (*func.args.posonlyargs, *func.args.args)]
            if params and params[0] in ("self", "cls"):
                params = params[1:]
            index = site.args.index(value)
            if index >= len(params):
                continue
            keyword_name = params[index]
        out.append((value, site, keyword_name))
    return out


def _periodic(sem: Semantic, call: ast.Call, loop: ast.AST) -> bool:
    """The step runs under a counting test of the batch loop (``if step % eval_every == 0:``)
    that guards no optimizer step: once per evaluation round, not per batch. (A counting
    test around the optimizer's own step is gradient accumulation: still per batch.)"""
    for cond in training.conditions_between(sem, call, loop):
        if (
            isinstance(cond, ast.If)
            and training.is_accumulation_test(cond.test)
            and not training.optimizer_steps(sem, cond)
        ):
            return True
    return False

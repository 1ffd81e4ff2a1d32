from __future__ import annotations

import ast

from ..core import arguments, kinds, training
from ..core.context import Context
from ..core.model import Severity, Text
from .base import Invalid, Rule

_PREFIX = "torch.optim.lr_scheduler."
PER_ITERATION = frozenset({"OneCycleLR", "CyclicLR"})
PER_EPOCH = frozenset({"StepLR", "MultiStepLR", "ExponentialLR", "ReduceLROnPlateau"})
# Above this, a literal step size or milestone is counted in iterations, not epochs.
ITERATION_SCALE = 1000


class SchedulerWrongGranularity(Rule):
    """## What it does
    Checks for a per-iteration scheduler (`OneCycleLR`, `CyclicLR`) stepped only once per
    epoch, and for an epoch scheduler (`StepLR`, `MultiStepLR`, `ExponentialLR`,
    `ReduceLROnPlateau`) stepped inside the loop over batches.

    Off by default (`extend-select = ["TDR703"]` turns it on): on real code its finding was a `ReduceLROnPlateau` stepped under a periodic evaluation inside the batch loop, which is right.

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
    default = False
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
        # Unknown scheduler class.
        "import torch\ns = make_scheduler(opt)\nfor epoch in range(3):\n    for x in loader:\n"
        "        s.step()",
    )
    INVALID = (
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
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for call in sem.calls_by_attr.get("step", ()):
            assert isinstance(call.func, ast.Attribute)
            made = kinds.constructor_call(sem, call.func.value)
            qual = sem.qualname(made.func) if made is not None else None
            if made is None or qual is None or not qual.startswith(_PREFIX):
                continue
            kind = qual[len(_PREFIX) :]
            loops = training.enclosing_loops(sem, call)
            if not loops:
                continue
            inner = loops[0]
            if kind in PER_ITERATION and not any(loop.is_batch_loop for loop in loops):
                if training.contains_batch_loop(sem, inner):
                    self._report(ctx, call, kind, per_iteration=True)
            elif kind in PER_EPOCH and inner.is_batch_loop and len(loops) > 1:
                if self._epoch_sized(made, kind):
                    self._report(ctx, call, kind, per_iteration=False)

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
    def _report(ctx: Context, call: ast.Call, kind: str, *, per_iteration: bool) -> None:
        if per_iteration:
            message = Text(
                f"`{kind}` counts optimizer steps but is stepped once per epoch: the schedule "
                "barely moves",
                f"`{kind}` 按优化器步数计数，却每个 epoch 才 step 一次：学习率几乎不变",
            )
        else:
            message = Text(
                f"`{kind}` is an epoch schedule but is stepped for every batch: the learning rate "
                "decays far too fast",
                f"`{kind}` 是按 epoch 的调度器，却在每个 batch 都 step：学习率衰减得太快了",
            )
        ctx.report(call, message)

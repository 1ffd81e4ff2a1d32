from __future__ import annotations

import ast

from ..core import kinds, training
from ..core.context import Context
from ..core.model import Severity, Text
from ..core.semantic import Semantic, argument
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

    zh = """## 功能
    检查每个 epoch 只调用一次 step 的按迭代调度器（`OneCycleLR`、`CyclicLR`），以及在 batch 循环内调用 step 的按
    epoch 调度器（`StepLR`、`MultiStepLR`、`ExponentialLR`、`ReduceLROnPlateau`）。

    位于 batch 循环的计数条件之下、且该条件不包含优化器更新的 step（`if global_step % eval_every == 0:`，
    为 `ReduceLROnPlateau` 提供指标的周期性评估）每轮评估执行一次，不报告。

    ## 为什么不好？
    `OneCycleLR` 和 `CyclicLR` 按优化器的每一步描述学习率：它们的 `total_steps`/`steps_per_epoch` 与
    `step_size_up` 计数的是 batch。若每个 epoch 只 step 一次，one-cycle 的预热永远走不完，学习率一直停留在初始值附近。
    按 epoch 的调度器正相反：每个 batch 都 step 的 `StepLR(step_size=30)` 每 30 个 *batch* 就衰减一次，
    `ExponentialLR(gamma=0.95)` 会在第一个 epoch 内把学习率压到几乎为零。程序不会报错，只是模型训练得很差。

    为避免对按迭代计数的训练产生误报，batch 循环中的按 epoch 调度器只有在以下情况下才会被报告：该 batch 循环位于
    epoch 循环之内，且字面量的 step_size 或 milestones 小于 1,000（更大的值视为迭代数）；对于 `ExponentialLR` 和
    `ReduceLROnPlateau`，则不论参数如何都会报告。

    ## 示例
    ```python
    scheduler = OneCycleLR(optimizer, max_lr=0.1, epochs=10, steps_per_epoch=len(loader))
    for epoch in range(10):
        for x, y in loader:
            train_step(x, y)
        scheduler.step()
    ```

    ## 改为
    ```python
    scheduler = OneCycleLR(optimizer, max_lr=0.1, epochs=10, steps_per_epoch=len(loader))
    for epoch in range(10):
        for x, y in loader:
            train_step(x, y)
            scheduler.step()
    ```

    ## 修复安全性
    不提供修复：移动这一调用还会改变每个学习率对应的 epoch 或 batch，这是关于调度方案的决定。

    ## 参考
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
                if self._epoch_sized(made, kind) and not _periodic(sem, call, inner.node):
                    self._report(ctx, call, kind, per_iteration=False)

    @staticmethod
    def _epoch_sized(made: ast.Call, kind: str) -> bool:
        if kind in ("ExponentialLR", "ReduceLROnPlateau"):
            return True
        if kind == "StepLR":
            value = argument(made, "step_size", 1)
            return (
                isinstance(value, ast.Constant)
                and isinstance(value.value, int)
                and (value.value < ITERATION_SCALE)
            )
        value = argument(made, "milestones", 1)
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

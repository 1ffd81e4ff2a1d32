from __future__ import annotations

import ast
from functools import partial

from ..core import fixes, kinds, summaries, training
from ..core.context import Context
from ..core.model import Applicability, Edit, Fix, Pos, Severity, Text
from ..core.semantic import Semantic
from .base import Invalid, Rule, Valid

_ENGINE_PY = (
    "import torch\nimport torch.nn.functional as F\n"
    "def train_one_epoch(model, loader, optimizer):\n"
    "    for x, y in loader:\n"
    "        optimizer.zero_grad()\n"
    "        F.cross_entropy(model(x), y).backward()\n"
    "        optimizer.step()\n"
    "@torch.no_grad()\n"
    "def evaluate(model, loader):\n"
    "    return [model(x) for x, _ in loader]\n"
)


class SchedulerBeforeOptimizer(Rule):
    """## What it does
    Checks for `scheduler.step()` called before `optimizer.step()` (or
    `scaler.step(optimizer)`) in the same loop. A step in a branch that runs only on some
    torch versions (an `if` on a value computed from `torch.__version__`, also through a
    project helper: `if not is_pytorch_1_1_0_or_later():`) is left alone: before 1.1 that
    order was the right one.

    ## Why is this bad?
    Since PyTorch 1.1 the scheduler must be stepped *after* the optimizer. Stepped before, the
    first value of the schedule is skipped: the first epoch (or iteration) already trains with
    the second learning rate, a warm-up starts one step late, and the whole schedule is shifted.
    PyTorch warns at run time: "Detected call of `lr_scheduler.step()` before
    `optimizer.step()`. In PyTorch 1.1.0 and later, you should call them in the opposite
    order".

    The guide describes the order step by step; this is the same advice.

    ## Example
    ```python
    for epoch in range(epochs):
        scheduler.step()
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    for epoch in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
        scheduler.step()
    ```

    ## Fix safety
    The fix moves `scheduler.step()` after the statement that steps the optimizer. It is unsafe:
    the learning rate used in each step changes (to the intended one).

    ## References
    - [How to adjust the learning rate](https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate)
    """

    code = "TDR702"
    name = "scheduler-before-optimizer"
    severity = Severity.WARNING
    fix_safety = Applicability.UNSAFE

    VALID = (
        "import torch\nfor x in loader:\n    optimizer.step()\n    scheduler.step()",
        # The early step runs only on torch before 1.1, which wanted that order.
        Valid(
            "import torch\nfrom comm import newer_torch\nnew_order = newer_torch()\n"
            "for x in loader:\n    if not new_order:\n        scheduler.step()\n"
            "    loss(x).backward()\n    optimizer.step()\n"
            "    if new_order:\n        scheduler.step()\n",
            files=(
                (
                    "comm.py",
                    "import torch\ndef newer_torch():\n"
                    "    return [int(v) for v in torch.__version__.split('.')[:2]] >= [1, 1]\n",
                ),
            ),
        ),
        "import torch\nfor epoch in range(3):\n    for x in loader:\n        opt.step()\n"
        "    scheduler.step()",
        # The optimizer already stepped earlier in the iteration.
        "import torch\nfor x in loader:\n    optimizer.step()\n    scheduler.step()\n    log(optimizer.step)",
        # Stepping something that is not a scheduler.
        "import torch\nfor x in loader:\n    env.step()\n    optimizer.step()",
        # Different loops.
        "import torch\nfor e in range(3):\n    scheduler.step()\nfor x in loader:\n    optimizer.step()",
        # The helper of another module steps the optimizer before the scheduler is stepped.
        Valid(
            "import torch\nfrom engine import train_one_epoch\n"
            "sched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
            "for epoch in range(90):\n"
            "    train_one_epoch(model, loader, opt)\n"
            "    sched.step()\n",
            files=(("engine.py", _ENGINE_PY),),
        ),
        # A helper that does not step any optimizer (it only evaluates).
        Valid(
            "import torch\nfrom engine import evaluate\n"
            "sched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
            "for epoch in range(90):\n"
            "    sched.step()\n"
            "    evaluate(model, loader)\n",
            files=(("engine.py", _ENGINE_PY),),
        ),
        # ReduceLROnPlateau follows last epoch's metric: no schedule value is skipped.
        Valid(
            "import torch\nfrom engine import train_one_epoch\n"
            "sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt)\n"
            "val_loss = float('inf')\n"
            "for epoch in range(90):\n"
            "    sched.step(val_loss)\n"
            "    train_one_epoch(model, loader, opt)\n"
            "    val_loss = validate(model)\n",
            files=(("engine.py", _ENGINE_PY),),
        ),
    )
    INVALID = (
        # A branch that does not depend on the torch version.
        Invalid(
            "import torch\nfor x in loader:\n    if not args.warm:\n        scheduler.step()\n"
            "    loss(x).backward()\n    optimizer.step()\n",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch\nfor x, y in loader:\n    scheduler.step()\n    loss.backward()\n"
            "    optimizer.step()\n",
            fixed="import torch\nfor x, y in loader:\n    loss.backward()\n    optimizer.step()\n"
            "    scheduler.step()\n",
            lines=(3,),
        ),
        Invalid(
            "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
            "for epoch in range(90):\n    sched.step()\n    for x in loader:\n"
            "        scaler.step(opt)\n        scaler.update()\n",
            fixed="import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
            "for epoch in range(90):\n    for x in loader:\n"
            "        scaler.step(opt)\n        scaler.update()\n    sched.step()\n",
            lines=(4,),
        ),
        # The optimizer steps inside a helper of another module, called after the scheduler.
        Invalid(
            "import torch\nfrom engine import train_one_epoch\n"
            "sched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
            "for epoch in range(90):\n"
            "    sched.step()\n"
            "    train_one_epoch(model, loader, opt)\n",
            fixed="import torch\nfrom engine import train_one_epoch\n"
            "sched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
            "for epoch in range(90):\n"
            "    train_one_epoch(model, loader, opt)\n"
            "    sched.step()\n",
            files=(("engine.py", _ENGINE_PY),),
            lines=(5,),
        ),
        # A method of the trainer steps the optimizer.
        Invalid(
            "import torch\n"
            "class Trainer:\n"
            "    def __init__(self, model, opt):\n"
            "        self.opt = opt\n"
            "        self.sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)\n"
            "    def fit_batch(self, x, y):\n"
            "        torch.nn.functional.mse_loss(self.model(x), y).backward()\n"
            "        self.opt.step()\n"
            "    def fit(self, loader):\n"
            "        for x, y in loader:\n"
            "            self.sched.step()\n"
            "            self.fit_batch(x, y)\n",
            fixed="import torch\n"
            "class Trainer:\n"
            "    def __init__(self, model, opt):\n"
            "        self.opt = opt\n"
            "        self.sched = torch.optim.lr_scheduler.ExponentialLR(opt, 0.9)\n"
            "    def fit_batch(self, x, y):\n"
            "        torch.nn.functional.mse_loss(self.model(x), y).backward()\n"
            "        self.opt.step()\n"
            "    def fit(self, loader):\n"
            "        for x, y in loader:\n"
            "            self.fit_batch(x, y)\n"
            "            self.sched.step()\n",
            lines=(11,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for call in sem.calls_by_attr.get("step", ()):
            assert isinstance(call.func, ast.Attribute)
            if not kinds.is_scheduler(sem, call.func.value):
                continue
            loops = training.enclosing_loops(sem, call)
            if not loops or _plateau(sem, call.func.value) or sem.in_torch_version_branch(call):
                continue  # no loop, a metric-driven scheduler, or code for other torch versions
            # The loop's own optimizer steps, and the calls of helpers that step it (another
            # module's `train_one_epoch(...)`).
            steps = summaries.step_calls(sem, loops[0].node)
            here = (call.lineno, call.col_offset)
            if not steps or any((s.lineno, s.col_offset) < here for s in steps):
                continue
            ctx.report(
                call,
                Text(
                    "`scheduler.step()` runs before `optimizer.step()`: the first value of the "
                    "schedule is skipped",
                    "`scheduler.step()` 在 `optimizer.step()` 之前执行：调度的第一个取值被跳过了",
                ),
                fixes=partial(self._move_after, ctx, call, steps[-1]),
                related=[ctx.related(steps[0], Text("the optimizer steps here", "优化器在此更新"))],
            )

    @staticmethod
    def _move_after(ctx: Context, call: ast.Call, step: ast.Call) -> Fix | None:
        sem, source = ctx.sem, ctx.source
        stmt = sem.parent(call)
        if not isinstance(stmt, ast.Expr):
            return None
        block, index = sem.block_of(stmt)
        target = next(
            (
                s
                for s in block[index + 1 :]
                if s is sem.statement_of(step) or sem.is_inside(step, s)
            ),
            None,
        )
        if (
            target is None
            or not fixes.starts_line(source, stmt)
            or not fixes.ends_line(source, stmt)
        ):
            return None
        if stmt.end_lineno != stmt.lineno:
            return None
        text = source.segment(stmt)
        # Keep a trailing comment with the moved statement.
        line = source.line(stmt.lineno)
        rest = line[source.end(stmt).col :].rstrip("\r\n")
        insert = fixes.insert_statement_after(source, target, (text + rest).strip())
        if insert is None:
            return None
        delete = Edit(Pos(stmt.lineno, 0), Pos(stmt.lineno + 1, 0), "")
        return Fix(
            Text(
                "Move `scheduler.step()` after the optimizer step",
                "把 `scheduler.step()` 移到优化器更新之后",
            ),
            (delete, insert),
            Applicability.UNSAFE,
        )


def _plateau(sem: Semantic, scheduler: ast.expr) -> bool:
    """``ReduceLROnPlateau``: it follows a metric, not a schedule whose first value could be
    skipped."""
    made = kinds.constructor_call(sem, scheduler)
    qual = sem.qualname(made.func) if made is not None else None
    return qual == "torch.optim.lr_scheduler.ReduceLROnPlateau"

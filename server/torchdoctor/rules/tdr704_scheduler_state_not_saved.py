from __future__ import annotations

import ast

from ..core import checkpoints, fixes, kinds
from ..core.context import Context
from ..core.kinds import Kind
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import keyword
from .base import Invalid, Rule, Valid

_SCHEDULERS = "torch.optim.lr_scheduler."


_OPTIM_PY = (
    "import torch\n"
    "def build_optimizer(model, lr):\n"
    "    return torch.optim.AdamW(model.parameters(), lr=lr)\n"
    "def build_scheduler(optimizer):\n"
    "    return torch.optim.lr_scheduler.StepLR(optimizer, 30)\n"
)


def scheduler_names(ctx: Context) -> list[str]:
    """Names (``sched``, ``self.scheduler``) bound to a learning-rate scheduler in this file:
    made here, or by a helper of another project module (``build_scheduler(...)``)."""
    names: list[str] = []
    if ctx.sem.project is not None:
        names += _built_by_helpers(ctx)
    if "lr_scheduler" not in ctx.source.text:
        return names
    for call in ctx.sem.calls:
        qual = ctx.qualname(call.func)
        if (
            not qual
            or not qual.startswith(_SCHEDULERS)
            or not qual.rsplit(".", 1)[-1][:1].isupper()
        ):
            continue
        parent = ctx.sem.parent(call)
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            target = ctx.segment(parent.targets[0])
            if target not in names and isinstance(parent.targets[0], ast.Name | ast.Attribute):
                names.append(target)
        elif "<scheduler>" not in names:
            names.append("<scheduler>")
    return names


def _built_by_helpers(ctx: Context) -> list[str]:
    """Names assigned a scheduler that a function of another module returns (alone or in a
    returned tuple: ``optimizer, scheduler = build(cfg, model)``)."""
    sem = ctx.sem
    names: list[str] = []
    for stmt in sem.assigns:
        if len(stmt.targets) != 1 or not isinstance(stmt.value, ast.Call):
            continue
        defined = sem.function_def(stmt.value.func)
        if defined is None or defined[0] is sem:
            continue
        target = stmt.targets[0]
        parts = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
        for part in parts:
            if (
                isinstance(part, ast.Name | ast.Attribute)
                and kinds.kind(sem, part) is Kind.SCHEDULER
            ):
                name = ctx.segment(part)
                if name not in names:
                    names.append(name)
    return names


def schedule_restored(ctx: Context) -> bool:
    """The file sets a scheduler's position itself, as a resume from the saved epoch does:
    ``scheduler.last_epoch = start_epoch - 1``, or a scheduler built with ``last_epoch=`` of
    something other than a literal."""
    sem = ctx.sem
    for stmt in sem.assigns:
        for target in stmt.targets:
            if (
                isinstance(target, ast.Attribute)
                and target.attr == "last_epoch"
                and kinds.is_scheduler(sem, target.value)
            ):
                return True
    for call in sem.calls:
        given = keyword(call, "last_epoch")
        if given is None or isinstance(given.value, ast.Constant | ast.UnaryOp):
            continue
        qual = ctx.qualname(call.func)
        if qual and qual.startswith(_SCHEDULERS):
            return True
    return False


class SchedulerStateNotSaved(Rule):
    """## What it does
    Checks for a checkpoint dict passed to `torch.save` that holds the optimizer's
    `state_dict()` but not the learning-rate scheduler's, in a file that creates a scheduler
    (or gets one from a helper of another module, `build_scheduler(optimizer, cfg)`). Entries
    that the code adds to the dict by subscript before the save
    (`ckpt["scheduler"] = scheduler.state_dict()`) count as saved. A file that sets the
    scheduler's position itself when it resumes (`scheduler.last_epoch = start_epoch - 1`, or
    a scheduler built with `last_epoch=start_epoch - 1`) is not reported: the schedule is
    rebuilt from the saved epoch.

    ## Why is this bad?
    A scheduler has state of its own: the epoch or step it has reached, and for
    `ReduceLROnPlateau` the best value and patience counters. Resuming from a checkpoint without
    it restarts the schedule from the beginning: a warm-up runs again, a step decay happens late,
    a one-cycle schedule starts over — all without an error.

    ## Example
    ```python
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "epoch": epoch}, "ckpt.pt")
    ```

    ## Use instead
    ```python
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "epoch": epoch}, "ckpt.pt")
    ```
    and `scheduler.load_state_dict(ckpt["scheduler"])` when resuming.

    ## Fix safety
    When the file has exactly one scheduler, the fix adds `"scheduler": <scheduler>.state_dict()`
    to the dict. It is unsafe: the loading side must read the new key too.

    ## References
    - [Saving and loading a general checkpoint](https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html)
    - [`LRScheduler.state_dict`](https://pytorch.org/docs/stable/generated/torch.optim.lr_scheduler.LRScheduler.html)
    """

    code = "TDR704"
    name = "scheduler-state-not-saved"
    severity = Severity.INFO
    fix_safety = Applicability.UNSAFE

    VALID = (
        "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
        "torch.save({'optimizer': opt.state_dict(), 'scheduler': sched.state_dict()}, 'c.pt')",
        # No scheduler in the file.
        "import torch\nopt = torch.optim.SGD(params, lr=0.1)\n"
        "torch.save({'optimizer': opt.state_dict()}, 'c.pt')",
        # Only the model is saved.
        "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
        "torch.save({'model': model.state_dict()}, 'c.pt')",
        # The scheduler's state under another spelling.
        "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
        "torch.save({'opt': opt.state_dict(), 'lr': sched.state_dict()}, 'c.pt')",
        # The scheduler's state is added by subscript before the save.
        "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
        "ckpt = {'model': model.state_dict(), 'optimizer': opt.state_dict()}\n"
        "if sched is not None:\n    ckpt['scheduler'] = sched.state_dict()\n"
        "torch.save(ckpt, 'c.pt')\n",
        # The schedule's position is rebuilt from the saved epoch on resume.
        "import torch\nsched = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: 0.9**e)\n"
        "ckpt = torch.load('c.pt', map_location='cpu')\nstart_epoch = ckpt['epoch'] + 1\n"
        "sched.last_epoch = start_epoch - 1\n"
        "for epoch in range(start_epoch, 10):\n"
        "    sched.step()\n"
        "    torch.save({'optimizer': opt.state_dict(), 'epoch': epoch}, 'c.pt')\n",
        "import torch\nstart = torch.load('c.pt', map_location='cpu')['epoch'] + 1\n"
        "sched = torch.optim.lr_scheduler.StepLR(opt, 30, last_epoch=start - 1)\n"
        "torch.save({'optimizer': opt.state_dict(), 'epoch': start}, 'c.pt')\n",
        # The scheduler from a helper of another module is saved.
        Valid(
            "import torch\nfrom optim import build_optimizer, build_scheduler\n"
            "optimizer = build_optimizer(model, 0.1)\n"
            "scheduler = build_scheduler(optimizer)\n"
            "torch.save({'optimizer': optimizer.state_dict(), "
            "'scheduler': scheduler.state_dict()}, 'c.pt')\n",
            files=(("optim.py", _OPTIM_PY),),
        ),
    )
    INVALID = (
        # The optimizer's state added by subscript, the scheduler's nowhere.
        Invalid(
            "import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
            "ckpt = {'model': model.state_dict()}\nckpt['optimizer'] = opt.state_dict()\n"
            "torch.save(ckpt, 'c.pt')\n",
            fixed="import torch\nsched = torch.optim.lr_scheduler.StepLR(opt, 30)\n"
            "ckpt = {'model': model.state_dict(), \"scheduler\": sched.state_dict()}\n"
            "ckpt['optimizer'] = opt.state_dict()\ntorch.save(ckpt, 'c.pt')\n",
            lines=(3,),
        ),
        Invalid(
            "import torch\nopt = torch.optim.AdamW(params)\n"
            "sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 100)\n"
            "torch.save({'optimizer': opt.state_dict(), 'epoch': 3}, 'c.pt')",
            fixed="import torch\nopt = torch.optim.AdamW(params)\n"
            "sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, 100)\n"
            "torch.save({'optimizer': opt.state_dict(), 'epoch': 3, "
            "\"scheduler\": sched.state_dict()}, 'c.pt')",
            lines=(4,),
        ),
        Invalid(
            "import torch\nfrom torch.optim.lr_scheduler import StepLR\n"
            "def train(model, opt):\n    s1 = StepLR(opt, 10)\n    s2 = StepLR(opt, 20)\n"
            "    ckpt = {'model': model.state_dict(), 'optimizer': opt.state_dict()}\n"
            "    torch.save(ckpt, 'c.pt')",
            fixed=None,
            lines=(6,),
        ),
        # The optimizer and scheduler come from helpers of another module.
        Invalid(
            "import torch\nfrom optim import build_optimizer, build_scheduler\n"
            "optimizer = build_optimizer(model, 0.1)\n"
            "scheduler = build_scheduler(optimizer)\n"
            "torch.save({'optimizer': optimizer.state_dict(), 'epoch': 3}, 'c.pt')\n",
            fixed="import torch\nfrom optim import build_optimizer, build_scheduler\n"
            "optimizer = build_optimizer(model, 0.1)\n"
            "scheduler = build_scheduler(optimizer)\n"
            "torch.save({'optimizer': optimizer.state_dict(), 'epoch': 3, "
            "\"scheduler\": scheduler.state_dict()}, 'c.pt')\n",
            files=(("optim.py", _OPTIM_PY),),
            lines=(5,),
        ),
    )

    def check(self, ctx: Context) -> None:
        saved = checkpoints.saved_dicts(ctx.sem)
        if not saved:
            return
        names = scheduler_names(ctx)
        if not names or schedule_restored(ctx):
            return
        reported: set[int] = set()
        for call, data in saved:
            if id(data) in reported:  # one dict saved to several files
                continue
            added = checkpoints.added_entries(ctx.sem, call)  # ckpt["scheduler"] = ...
            owners = [
                checkpoints.state_dict_owner(v) for v in (*data.values, *(v for _, v in added))
            ]
            if not any(o is not None and kinds.is_optimizer(ctx.sem, o) for o in owners):
                continue
            if any(o is not None and kinds.is_scheduler(ctx.sem, o) for o in owners):
                continue
            keys = [k.value for k in data.keys if isinstance(k, ast.Constant)] + [
                k for k, _ in added
            ]
            if any(isinstance(k, str) and ("sched" in k or "lr" in k.lower()) for k in keys):
                continue
            fix = None
            if len(names) == 1 and names[0] != "<scheduler>" and data.values:
                fix = Fix(
                    Text(
                        f'Add `"scheduler": {names[0]}.state_dict()`',
                        f'添加 `"scheduler": {names[0]}.state_dict()`',
                    ),
                    (
                        fixes.insert(
                            ctx.source.end(data.values[-1]),
                            f', "scheduler": {names[0]}.state_dict()',
                        ),
                    ),
                    Applicability.UNSAFE,
                )
            reported.add(id(data))
            ctx.report(
                data,
                Text(
                    "checkpoint saves the optimizer but not the learning-rate scheduler: resuming "
                    "restarts the schedule",
                    "检查点保存了优化器却没有保存学习率调度器：恢复训练时调度会从头开始",
                ),
                fixes=[fix],
            )

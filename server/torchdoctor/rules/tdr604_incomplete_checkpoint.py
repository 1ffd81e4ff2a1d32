from __future__ import annotations

import ast
import re

from ..core import checkpoints, fixes, kinds, training
from ..core.context import Context
from ..core.kinds import Kind
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import argument
from .base import Invalid, Rule, Valid

_COUNTER_KEY = re.compile(r"epoch|step|iter", re.I)
_COUNTER_NAMES = ("epoch", "global_step", "step", "iteration")


_OPTIM_PY = (
    "import torch\n"
    "def build_optimizer(model, lr):\n"
    "    return torch.optim.AdamW(model.parameters(), lr=lr)\n"
    "def build_scheduler(optimizer):\n"
    "    return torch.optim.lr_scheduler.StepLR(optimizer, 30)\n"
)


class IncompleteCheckpoint(Rule):
    """## What it does
    Checks for a checkpoint dict passed to `torch.save` that holds a model's `state_dict()` but
    misses the optimizer's state (when the same function has an optimizer) or any epoch/step
    counter. (A missing scheduler state is TDR704's.) The optimizer may be held on `self` or
    built by a helper of another module (`build_optimizer(model, cfg)`).

    A dict with only the model's weights and no optimizer in the function is read as an export
    of final weights, not a checkpoint for resuming, and is not reported. A bare
    `torch.save(model.state_dict(), path)` is reported when it is a snapshot taken inside the
    loop that steps the optimizer, and the same function restarts training from such a file
    (`model.load_state_dict(torch.load(args.checkpoint))` before the loop).

    Off by default (`extend-select = ["TDR604"]` turns it on): on real code its findings were inference exports and checkpoints that keep the step in the file name.

    ## Why is this bad?
    A checkpoint is for resuming. With the weights alone, a resumed run starts with a fresh
    optimizer — Adam's moment estimates and momentum buffers are zero again, which gives a loss
    spike and, with a warm-up-free schedule, can diverge — and it does not know where it stopped,
    so it repeats epochs, reshuffles differently and restarts the schedule.

    ## Example
    ```python
    torch.save({"model": model.state_dict()}, "ckpt.pt")
    ```

    ## Use instead
    ```python
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "epoch": epoch}, "ckpt.pt")
    ```

    ## Fix safety
    The fix adds `"optimizer": <optimizer>.state_dict()` and `"epoch": <counter>` when those names
    are in scope. It is unsafe: the loading side must read the new keys too.

    ## References
    - [Saving and loading a general checkpoint](https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html)
    """

    code = "TDR604"
    default = False
    name = "incomplete-checkpoint"
    severity = Severity.INFO
    fix_safety = Applicability.UNSAFE

    VALID = (
        # Weights-only snapshots, but the run never restarts from one: exports for evaluation.
        "import torch\n"
        "def main(args):\n"
        "    model = torch.nn.Linear(4, 2)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
        "    for it in range(args.iters):\n"
        "        model(next(batches)).sum().backward()\n"
        "        optimizer.step()\n"
        "        if it % 1000 == 0:\n"
        "            torch.save(model.state_dict(), f'snap_{it}.pt')\n",
        # Fine-tuning from pretrained weights, saving the final weights after the loop.
        "import torch\n"
        "model = torch.nn.Linear(4, 2)\n"
        "model.load_state_dict(torch.load('pretrained.pt', map_location='cpu'))\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in loader:\n"
        "    model(x).sum().backward()\n"
        "    optimizer.step()\n"
        "torch.save(model.state_dict(), 'final.pt')\n",
        "import torch\ntorch.save({'model': model.state_dict(), 'optimizer': opt.state_dict(), "
        "'epoch': epoch}, 'c.pt')",
        # Exporting final weights is not a checkpoint for resuming: no optimizer, no counter.
        "import torch\nmodel = Net()\nmodel.eval()\ntorch.save({'model': model.state_dict()}, 'final.pt')",
        # Not a model's state.
        "import torch\ntorch.save({'mean': mean, 'std': std}, 'stats.pt')",
        "import torch\ntorch.save({'model': model.state_dict(), 'optimizer': opt.state_dict(), "
        "'global_step': step}, 'c.pt')",
        # The optimizer comes from a helper of another module and is saved.
        Valid(
            "import torch\nfrom optim import build_optimizer\n"
            "def train(model, epochs):\n"
            "    optimizer = build_optimizer(model, 0.1)\n"
            "    for epoch in range(epochs):\n"
            "        torch.save({'model': model.state_dict(), "
            "'optimizer': optimizer.state_dict(), 'epoch': epoch}, 'c.pt')\n",
            files=(("optim.py", _OPTIM_PY),),
        ),
    )
    INVALID = (
        # Weights-only snapshots in the loop of a run that resumes from one.
        Invalid(
            "import torch\n"
            "def main(args):\n"
            "    model = torch.nn.Linear(4, 2)\n"
            "    if args.checkpoint:\n"
            "        model.load_state_dict(torch.load(args.checkpoint, map_location='cpu'))\n"
            "    model = model.cuda()\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
            "    for it in range(args.iters):\n"
            "        model(next(batches)).sum().backward()\n"
            "        optimizer.step()\n"
            "        if it % 1000 == 0:\n"
            "            torch.save(model.state_dict(), 'snapshot.ckpt')\n",
            fixed=None,
            lines=(12,),
        ),
        Invalid(
            "import torch\n"
            "def train(model, loader, epochs):\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    for epoch in range(epochs):\n"
            "        run(loader)\n"
            "        torch.save({'model': model.state_dict()}, 'c.pt')\n",
            fixed="import torch\n"
            "def train(model, loader, epochs):\n"
            "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "    for epoch in range(epochs):\n"
            "        run(loader)\n"
            "        torch.save({'model': model.state_dict(), \"optimizer\": optimizer.state_dict(), "
            "\"epoch\": epoch}, 'c.pt')\n",
            lines=(6,),
        ),
        Invalid(
            "import torch\nnet = Net()\nopt = torch.optim.Adam(net.parameters())\n"
            "torch.save({'net': net.state_dict(), 'opt': opt.state_dict()}, 'c.pt')",
            fixed=None,
            lines=(4,),
        ),
        # An optimizer held on `self`, made by a helper of another module.
        Invalid(
            "import torch\nfrom optim import build_optimizer\n"
            "class Trainer:\n"
            "    def __init__(self):\n"
            "        self.model = torch.nn.Linear(4, 2)\n"
            "        self.optimizer = build_optimizer(self.model, 0.1)\n"
            "    def save(self, epoch):\n"
            "        torch.save({'model': self.model.state_dict(), 'epoch': epoch}, 'c.pt')\n",
            fixed="import torch\nfrom optim import build_optimizer\n"
            "class Trainer:\n"
            "    def __init__(self):\n"
            "        self.model = torch.nn.Linear(4, 2)\n"
            "        self.optimizer = build_optimizer(self.model, 0.1)\n"
            "    def save(self, epoch):\n"
            "        torch.save({'model': self.model.state_dict(), 'epoch': epoch, "
            "\"optimizer\": self.optimizer.state_dict()}, 'c.pt')\n",
            files=(("optim.py", _OPTIM_PY),),
            lines=(8,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for save in sem.calls_to(*checkpoints.SAVES):
            resume = checkpoints.resumed_weights_snapshot(sem, save)
            if resume is None or self._optimizer_in_scope(ctx, save) is None:
                continue
            counted = _counter_in_path(ctx, save)
            ctx.report(
                save,
                Text(
                    "checkpoint saves only the model's weights, inside the training loop of "
                    "a run that resumes from such a file: "
                    + (
                        "the optimizer state is lost on resume"
                        if counted
                        else "the optimizer state and the epoch/step are lost on resume"
                    ),
                    "检查点只保存了模型权重，而它位于一个会从此类文件恢复训练的训练循环中："
                    + (
                        "恢复时优化器状态会丢失"
                        if counted
                        else "恢复时优化器状态和 epoch/step 计数都会丢失"
                    ),
                ),
                related=[ctx.related(resume, Text("the run resumes here", "在此恢复训练"))],
            )
        for call, data in checkpoints.saved_dicts(sem):
            owners = [checkpoints.state_dict_owner(v) for v in data.values]
            if not any(o is not None and ctx.kind(o) is Kind.MODULE for o in owners):
                continue
            optimizer = self._optimizer_in_scope(ctx, call)
            has_opt = any(o is not None and kinds.is_optimizer(sem, o) for o in owners)
            keys = [
                k.value
                for k in data.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
            has_counter = any(_COUNTER_KEY.search(k) for k in keys)
            missing_opt = optimizer is not None and not has_opt
            if not missing_opt and (has_counter or (not has_opt and optimizer is None)):
                continue
            counter = next(
                (n for n in _COUNTER_NAMES if not has_counter and sem.lookup(n, call) is not None),
                None,
            )
            additions = []
            if missing_opt:
                additions.append(f'"optimizer": {optimizer}.state_dict()')
            if counter:
                additions.append(f'"{counter}": {counter}')
            missing = (["optimizer state"] if missing_opt else []) + (
                [] if has_counter else ["epoch/step"]
            )
            missing_zh = (["优化器状态"] if missing_opt else []) + (
                [] if has_counter else ["epoch/step 计数"]
            )
            fix = None
            if additions and data.values:
                fix = Fix(
                    Text(
                        "Add " + ", ".join(f"`{a}`" for a in additions),
                        "添加 " + "、".join(f"`{a}`" for a in additions),
                    ),
                    (fixes.insert(ctx.source.end(data.values[-1]), ", " + ", ".join(additions)),),
                    Applicability.UNSAFE,
                )
            ctx.report(
                data,
                Text(
                    f"checkpoint saves the model but not the {' or the '.join(missing)}: "
                    "training cannot resume where it stopped",
                    f"检查点保存了模型，却没有保存{'和'.join(missing_zh)}：无法从中断处继续训练",
                ),
                fixes=[fix],
            )

    @staticmethod
    def _optimizer_in_scope(ctx: Context, call: ast.Call) -> str | None:
        """The name of an optimizer built in the same function (or module) as the save."""
        func = ctx.sem.enclosing_function(call)
        scope = ctx.sem.scopes[func] if func is not None else ctx.sem.scopes[ctx.tree]
        for name, bindings in scope.bindings.items():
            if any(kinds.binding_kind(ctx.sem, b) is Kind.OPTIMIZER for b in bindings):
                return name
        cls = ctx.sem.enclosing_class(call)
        if cls is not None:  # an optimizer held on ``self`` (made in ``__init__``, or a helper)
            for owner, attr in ctx.sem.self_attr_values:
                if owner is not cls:
                    continue
                values = ctx.sem.self_attr_values[(owner, attr)]
                if values and all(ctx.kind(v) is Kind.OPTIMIZER for v in values):
                    return f"self.{attr}"
        return None


def _counter_in_path(ctx: Context, save: ast.Call) -> bool:
    """The file name holds the counter of a loop around the save (``f"G_{epoch}.pth"``)."""
    path = argument(save, "f", 1)
    if path is None:
        return False
    counters = {
        name.id
        for info in training.enclosing_loops(ctx.sem, save)
        if isinstance(info.node, ast.For | ast.AsyncFor)
        for name in ast.walk(info.node.target)
        if isinstance(name, ast.Name)
    }
    return any(isinstance(n, ast.Name) and n.id in counters for n in ast.walk(path))

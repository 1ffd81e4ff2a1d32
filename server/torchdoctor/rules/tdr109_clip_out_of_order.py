from __future__ import annotations

import ast
from functools import partial

from ..core import fixes, training
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .base import Invalid, Rule, Valid


class ClipOutOfOrder(Rule):
    """## What it does
    Checks for `torch.nn.utils.clip_grad_norm_` / `clip_grad_value_` called in the wrong place
    of a training iteration: after `optimizer.step()` (with no backward pass in between), or
    before the iteration's `.backward()`.

    ## Why is this bad?
    Clipping changes the `.grad` tensors; only the optimizer step reads them. Clipped after the
    step, the update has already used the unclipped gradients — an exploding gradient goes
    straight into the weights — and the clipped values are thrown away by the next
    `zero_grad()`. Clipped before `.backward()`, it acts on the previous iteration's gradients
    (or on `None` after `zero_grad()`), and the gradients the step uses are never clipped.
    Either way the code looks protected and is not.

    As the guide says, clipping belongs after the backward pass and before the update.

    One iteration is the body of the training loop around the call, or the function around
    it (a `train_step(batch)` method). Calls in the other branch of an `if` do not count, and a
    backward pass the rule cannot see (inside a helper) keeps it silent.

    ## Example
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        optimizer.step()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    ```

    ## Fix safety
    The fix moves the clipping statement right before the optimizer step that follows the
    backward pass. It is unsafe: the updates change (they become clipped, as intended). No fix
    is offered when the statement shares its line, spans several lines, or when a name it
    assigns is read between its old and new places.

    ## References
    - [`clip_grad_norm_`](https://pytorch.org/docs/stable/generated/torch.nn.utils.clip_grad_norm_.html)
    - [`clip_grad_value_`](https://pytorch.org/docs/stable/generated/torch.nn.utils.clip_grad_value_.html)
    """

    code = "TDR109"
    name = "clip-out-of-order"
    severity = Severity.ERROR
    fix_safety = Applicability.UNSAFE

    VALID = (
        "import torch\n"
        "for x, y in loader:\n"
        "    optimizer.zero_grad()\n"
        "    crit(model(x), y).backward()\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    optimizer.step()\n",
        # Accumulation: clip under the guard, before the step.
        "import torch\nfrom torch.nn.utils import clip_grad_value_\n"
        "for i, x in enumerate(loader):\n"
        "    model(x).sum().backward()\n"
        "    if (i + 1) % 4 == 0:\n"
        "        clip_grad_value_(model.parameters(), 0.5)\n"
        "        optimizer.step()\n        optimizer.zero_grad()\n",
        # Two optimizers: the generator's backward comes after the discriminator's step.
        "import torch\n"
        "for x in loader:\n"
        "    d_loss(x).backward()\n    opt_d.step()\n"
        "    g_loss(x).backward()\n"
        "    torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)\n"
        "    opt_g.step()\n",
        # The backward pass is in a helper the rule cannot see.
        "import torch\n"
        "for x in loader:\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    optimizer.step()\n",
        # Different branches.
        "import torch\n"
        "for x in loader:\n"
        "    model(x).sum().backward()\n"
        "    if plain:\n        optimizer.step()\n"
        "    else:\n"
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "        optimizer.step()\n",
        # A clip function that is not torch's.
        "import torch\n"
        "def clip_grad_norm_(params, value):\n    pass\n"
        "for x in loader:\n"
        "    model(x).sum().backward()\n    optimizer.step()\n"
        "    clip_grad_norm_(model.parameters(), 1.0)\n",
        # Micro-batches in an inner loop, clip and step after it.
        "import torch\n"
        "def train_step(model, batches, opt):\n"
        "    for b in batches:\n        model(b).sum().backward()\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    opt.step()\n",
        Valid(
            "import torch\nloss.backward()\n"
            "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\noptimizer.step()\n",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\n"
            "for x, y in loader:\n"
            "    optimizer.zero_grad()\n"
            "    crit(model(x), y).backward()\n"
            "    optimizer.step()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
            fixed="import torch\n"
            "for x, y in loader:\n"
            "    optimizer.zero_grad()\n"
            "    crit(model(x), y).backward()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    optimizer.step()\n",
            lines=(6,),
        ),
        # Before the backward pass, through an alias; the result is kept.
        Invalid(
            "import torch.nn as nn\n"
            "def train_step(self, batch):\n"
            "    self.opt.zero_grad()\n"
            "    norm = nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # clip\n"
            "    loss = self.model(batch).mean()\n"
            "    loss.backward()\n"
            "    self.opt.step()\n"
            "    return loss, norm\n",
            fixed="import torch.nn as nn\n"
            "def train_step(self, batch):\n"
            "    self.opt.zero_grad()\n"
            "    loss = self.model(batch).mean()\n"
            "    loss.backward()\n"
            "    norm = nn.utils.clip_grad_norm_(self.model.parameters(), 5.0)  # clip\n"
            "    self.opt.step()\n"
            "    return loss, norm\n",
            lines=(4,),
        ),
        # After the conditional step of an accumulation loop.
        Invalid(
            "import torch\nfrom torch.nn.utils import clip_grad_norm_ as clip\n"
            "for i, x in enumerate(loader):\n"
            "    model(x).sum().backward()\n"
            "    if (i + 1) % 4 == 0:\n"
            "        optimizer.step()\n"
            "        clip(model.parameters(), 1.0)\n"
            "        optimizer.zero_grad()\n",
            fixed="import torch\nfrom torch.nn.utils import clip_grad_norm_ as clip\n"
            "for i, x in enumerate(loader):\n"
            "    model(x).sum().backward()\n"
            "    if (i + 1) % 4 == 0:\n"
            "        clip(model.parameters(), 1.0)\n"
            "        optimizer.step()\n"
            "        optimizer.zero_grad()\n",
            lines=(7,),
        ),
        # The norm is logged right after the clip: moving it would read it too early.
        Invalid(
            "import torch\n"
            "for x in loader:\n"
            "    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    log(norm)\n"
            "    model(x).sum().backward()\n"
            "    optimizer.step()\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\nloss.backward()\noptimizer.step()\n"
            "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
            fixed="import torch\nloss.backward()\n"
            "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\noptimizer.step()\n",
            notebook=True,
            lines=(4,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for clip in training.clip_calls(sem):
            region = training.iteration_region(sem, clip)
            backwards = training.same_iteration(sem, training.backward_calls(sem, region), clip)
            steps = training.same_iteration(sem, training.optimizer_steps(sem, region), clip)
            if not backwards or not steps:
                continue
            earlier = [c for c in [*backwards, *steps] if training.before(c, clip)]
            later_steps = [s for s in steps if training.before(clip, s)]
            if earlier and earlier[-1] in steps and not later_steps:
                step = earlier[-1]
                if not training.directly_in(sem, step, region):
                    continue
                message = Text(
                    "Gradients are clipped after `optimizer.step()`: the update already used "
                    "the unclipped gradients",
                    "在 `optimizer.step()` 之后才裁剪梯度：更新已经使用了未裁剪的梯度",
                )
                target = step
            elif not earlier:
                after = [
                    b
                    for b in backwards
                    if training.before(clip, b) and training.directly_in(sem, b, region)
                ]
                if not after:
                    continue
                target_steps = [s for s in later_steps if training.before(after[0], s)]
                if not target_steps or not training.directly_in(sem, target_steps[0], region):
                    continue
                message = Text(
                    "Gradients are clipped before `.backward()`: the step uses gradients that "
                    "were never clipped",
                    "在 `.backward()` 之前裁剪梯度：更新使用的梯度从未被裁剪",
                )
                target = target_steps[0]
            else:
                continue
            ctx.report(
                clip,
                message,
                fixes=partial(_move_before, ctx, clip, target),
                related=[ctx.related(target, Text("the optimizer step", "优化器更新"))],
            )


def _move_before(ctx: Context, clip: ast.Call, step: ast.Call) -> Fix | None:
    sem, source = ctx.sem, ctx.source
    stmt = sem.statement_of(clip)
    target = sem.statement_of(step)
    if not isinstance(stmt, ast.Expr | ast.Assign) or stmt.value is not clip:
        return None
    if stmt.lineno != stmt.end_lineno or target.lineno != (target.end_lineno or target.lineno):
        return None
    block, _ = sem.block_of(stmt)
    delete = fixes.delete_statement(source, stmt)
    if delete is None or len(block) < 2:
        return None
    first, last = sorted((stmt, target), key=lambda s: s.lineno)
    assigned = {
        n.id for t in getattr(stmt, "targets", []) for n in ast.walk(t) if isinstance(n, ast.Name)
    }
    read = {n.id for n in ast.walk(clip) if isinstance(n, ast.Name)}
    for node in ast.walk(sem.tree):
        row = getattr(node, "lineno", 0)
        if not (first.lineno < row < last.lineno or node is target):
            continue
        if isinstance(node, ast.Name) and (
            (isinstance(node.ctx, ast.Load) and node.id in assigned)
            or (isinstance(node.ctx, ast.Store) and node.id in read)
        ):
            return None
    line = source.line(stmt.lineno)
    text = (source.segment(stmt) + line[source.end(stmt).col :].rstrip("\r\n")).strip()
    insert = fixes.insert_statement_before(source, target, text)
    if insert is None:
        return None
    return Fix(
        Text("Move the clipping before the optimizer step", "把梯度裁剪移到优化器更新之前"),
        (delete, insert),
        Applicability.UNSAFE,
    )

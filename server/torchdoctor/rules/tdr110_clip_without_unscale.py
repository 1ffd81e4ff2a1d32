from __future__ import annotations

import ast
from functools import partial

from ..core import arguments, fixes, kinds, training
from ..core.context import Context
from ..core.kinds import Kind
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import FUNCTION_NODES, is_false
from .base import Invalid, Rule, Valid


class ClipWithoutUnscale(Rule):
    """## What it does
    Checks for `clip_grad_norm_` / `clip_grad_value_` called after
    `scaler.scale(loss).backward()` with no `scaler.unscale_(optimizer)` in between.

    ## Why is this bad?
    `scaler.scale(loss)` multiplies the loss, and so every gradient, by the scale factor
    (65,536 at the start). Until `scaler.unscale_(optimizer)` runs, `.grad` holds these scaled
    values, and clipping compares them with a threshold meant for the real ones (the
    `GradScaler` documentation says to unscale first for exactly this reason). With
    `clip_grad_norm_(params, 1.0)` the measured norm is about 65,536 times too large, so every
    step is clipped and `scaler.step()` then divides the already clipped gradients by the scale:
    the update is thousands of times smaller than intended. With `clip_grad_value_` the real
    gradients are capped at `clip_value / scale`.

    ## Example
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Fix safety
    The fix inserts `scaler.unscale_(optimizer)` before the clipping, naming the optimizer that
    `scaler.step(...)` updates. It is unsafe: the updates change, to the clipped ones the code
    intended (in a CPU run with `init_scale=1024`, an update of norm 1/1024 becomes 1), so
    training differs from earlier runs. Nothing else changes: `scaler.step()` notices that the
    gradients are already unscaled and does not divide them again, and with a disabled scaler
    (`enabled=False`) `unscale_` does nothing. It is offered only when the clipping and
    `scaler.step(...)` run under the same conditions and one optimizer is stepped: a second
    `unscale_` before `update()` raises `RuntimeError`, as it would when clipping runs on every
    micro-batch of an accumulation loop.

    ## References
    - [Working with unscaled gradients](https://pytorch.org/docs/stable/notes/amp_examples.html#working-with-unscaled-gradients)
    - [`GradScaler.unscale_`](https://pytorch.org/docs/stable/amp.html#torch.amp.GradScaler.unscale_)
    """

    code = "TDR110"
    name = "clip-without-unscale"
    severity = Severity.ERROR
    fix_safety = Applicability.UNSAFE

    VALID = (
        "import torch\n"
        "for x, y in loader:\n"
        "    scaler.scale(crit(model(x), y)).backward()\n"
        "    scaler.unscale_(optimizer)\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    scaler.step(optimizer)\n    scaler.update()\n",
        # No scaler: plain backward.
        "import torch\n"
        "for x, y in loader:\n"
        "    crit(model(x), y).backward()\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    optimizer.step()\n",
        # The scaled backward is in the other branch.
        "import torch\n"
        "for x in loader:\n"
        "    if use_amp:\n"
        "        scaler.scale(model(x).sum()).backward()\n"
        "        scaler.unscale_(opt)\n"
        "    else:\n"
        "        model(x).sum().backward()\n"
        "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n",
        # Unscaled in a helper method called in between.
        "import torch\n"
        "class Trainer:\n"
        "    def unscale(self):\n        self.scaler.unscale_(self.opt)\n"
        "    def step(self, loss):\n"
        "        self.scaler.scale(loss).backward()\n"
        "        self.unscale()\n"
        "        torch.nn.utils.clip_grad_norm_(self.params, 1.0)\n"
        "        self.scaler.step(self.opt)\n        self.scaler.update()\n",
        # A disabled scaler.
        "import torch\n"
        "scaler = torch.amp.GradScaler('cuda', enabled=False)\n"
        "for x in loader:\n"
        "    scaler.scale(model(x).sum()).backward()\n"
        "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    scaler.step(opt)\n    scaler.update()\n",
        # `.scale()` of a module that is not a scaler.
        "import torch\nfrom torch import nn\nlayer = nn.Linear(2, 2)\n"
        "for x in loader:\n"
        "    layer.scale(x).backward()\n"
        "    torch.nn.utils.clip_grad_norm_(layer.parameters(), 1.0)\n",
        # A later plain backward is what the clip follows.
        "import torch\n"
        "for x in loader:\n"
        "    scaler.scale(a(x)).backward()\n"
        "    scaler.unscale_(opt_a)\n"
        "    b(x).backward()\n"
        "    torch.nn.utils.clip_grad_norm_(net_b.parameters(), 1.0)\n"
        "    opt_b.step()\n",
        Valid(
            "import torch\nscaler.scale(loss).backward()\nscaler.unscale_(opt)\n"
            "torch.nn.utils.clip_grad_value_(model.parameters(), 0.1)\n",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\n"
            "scaler = torch.amp.GradScaler('cuda')\n"
            "for x, y in loader:\n"
            "    optimizer.zero_grad()\n"
            "    with torch.autocast('cuda'):\n        loss = crit(model(x), y)\n"
            "    scaler.scale(loss).backward()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    scaler.step(optimizer)\n    scaler.update()\n",
            fixed="import torch\n"
            "scaler = torch.amp.GradScaler('cuda')\n"
            "for x, y in loader:\n"
            "    optimizer.zero_grad()\n"
            "    with torch.autocast('cuda'):\n        loss = crit(model(x), y)\n"
            "    scaler.scale(loss).backward()\n"
            "    scaler.unscale_(optimizer)\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    scaler.step(optimizer)\n    scaler.update()\n",
            lines=(8,),
        ),
        # A CPU scaler (tests/behaviour runs this loop): the fix changes the clipped update.
        Invalid(
            "import torch\n"
            "scaler = torch.amp.GradScaler('cpu', init_scale=1024.0)\n"
            "for x in xs:\n"
            "    scaler.scale(model(x).sum()).backward()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    scaler.step(optimizer)\n    scaler.update()\n",
            fixed="import torch\n"
            "scaler = torch.amp.GradScaler('cpu', init_scale=1024.0)\n"
            "for x in xs:\n"
            "    scaler.scale(model(x).sum()).backward()\n"
            "    scaler.unscale_(optimizer)\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    scaler.step(optimizer)\n    scaler.update()\n",
            lines=(5,),
        ),
        # Aliased import, attribute names, clip inside the accumulation guard with the step.
        Invalid(
            "from torch.nn.utils import clip_grad_value_ as clip\n"
            "def fit(self):\n"
            "    for i, x in enumerate(self.loader):\n"
            "        self.scaler.scale(self.model(x).sum() / 4).backward()\n"
            "        if (i + 1) % 4 == 0:\n"
            "            clip(self.model.parameters(), 0.5)\n"
            "            self.scaler.step(self.optim)\n"
            "            self.scaler.update()\n",
            fixed="from torch.nn.utils import clip_grad_value_ as clip\n"
            "def fit(self):\n"
            "    for i, x in enumerate(self.loader):\n"
            "        self.scaler.scale(self.model(x).sum() / 4).backward()\n"
            "        if (i + 1) % 4 == 0:\n"
            "            self.scaler.unscale_(self.optim)\n"
            "            clip(self.model.parameters(), 0.5)\n"
            "            self.scaler.step(self.optim)\n"
            "            self.scaler.update()\n",
            lines=(6,),
        ),
        # Clipping on every micro-batch, stepping every 4th: unscale_ there would raise.
        Invalid(
            "import torch\n"
            "for i, x in enumerate(loader):\n"
            "    scaler.scale(model(x).sum() / 4).backward()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "    if (i + 1) % 4 == 0:\n"
            "        scaler.step(opt)\n        scaler.update()\n",
            fixed=None,
            lines=(4,),
        ),
        # No scaler.step to name the optimizer: reported without a fix.
        Invalid(
            "import torch\n"
            "def backward_and_clip(scaler, loss, params):\n"
            "    scaler.scale(loss).backward()\n"
            "    return torch.nn.utils.clip_grad_norm_(params, 1.0)\n",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch\nscaler.scale(loss).backward()\n"
            "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "scaler.step(opt)\nscaler.update()\n",
            fixed="import torch\nscaler.scale(loss).backward()\nscaler.unscale_(opt)\n"
            "torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
            "scaler.step(opt)\nscaler.update()\n",
            notebook=True,
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for clip in training.clip_calls(sem):
            region = training.iteration_region(sem, clip)
            earlier = [
                b
                for b in training.same_iteration(sem, training.backward_calls(sem, region), clip)
                if training.before(b, clip)
            ]
            if not earlier:
                continue
            backward = earlier[-1]
            scaler = training.scaled_backward_scaler(backward)
            if scaler is None or ctx.kind(scaler) not in (None, Kind.SCALER):
                continue
            if _disabled(ctx, scaler) or _unscaled_between(ctx, region, backward, clip):
                continue
            name = ctx.segment(scaler)
            ctx.report(
                clip,
                Text(
                    f"Gradients are clipped while still scaled by `{name}`: call "
                    f"`{name}.unscale_(optimizer)` before clipping",
                    f"梯度仍处于 `{name}` 的缩放状态就被裁剪了：请在裁剪前调用 "
                    f"`{name}.unscale_(optimizer)`",
                ),
                fixes=partial(_insert_unscale, ctx, region, clip, name),
                related=[ctx.related(backward, Text("scaled backward", "缩放后的反向传播"))],
            )


def _disabled(ctx: Context, scaler: ast.expr) -> bool:
    """A scaler built with a literal ``enabled=False``."""
    made = kinds.constructor_call(ctx.sem, scaler)
    if made is None:
        return False
    enabled = arguments.bind_as(made, ctx.qualname(made.func)).value("enabled")
    return is_false(enabled)


def _unscaled_between(ctx: Context, region: ast.AST, backward: ast.Call, clip: ast.Call) -> bool:
    """An ``unscale_`` call, or a call of a function of this file that makes one, between the
    backward pass and the clipping."""
    sem = ctx.sem
    for call in training.calls_in(sem, region):
        if not (training.before(backward, call) and training.before(call, clip)):
            continue
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "unscale_":
            return True
        target: ast.AST | None = sem.local_function(func)
        if target is None and isinstance(func, ast.Attribute):
            cls = sem.enclosing_class(call)
            target = next(
                (
                    s
                    for s in (cls.body if cls else [])
                    if isinstance(s, FUNCTION_NODES) and s.name == func.attr
                ),
                None,
            )
        if target is not None and any(
            isinstance(c.func, ast.Attribute) and c.func.attr == "unscale_"
            for c in training.calls_in(sem, target)
        ):
            return True
    return False


def _insert_unscale(ctx: Context, region: ast.AST, clip: ast.Call, name: str) -> Fix | None:
    sem = ctx.sem
    steps = [
        s
        for s in training.calls_in(sem, region)
        if isinstance(s.func, ast.Attribute)
        and s.func.attr == "step"
        and ctx.segment(s.func.value) == name
        and len(s.args) == 1
        and training.before(clip, s)
    ]
    optimizers = {ctx.segment(s.args[0]) for s in steps}
    if len(optimizers) != 1:
        return None
    conditions = set(training.conditions_between(sem, clip, region))
    if any(set(training.conditions_between(sem, s, region)) != conditions for s in steps):
        return None
    optimizer = optimizers.pop()
    edit = fixes.insert_statement_before(
        ctx.source, sem.statement_of(clip), f"{name}.unscale_({optimizer})"
    )
    if edit is None:
        return None
    return Fix(
        Text(
            f"Insert `{name}.unscale_({optimizer})` before clipping",
            f"在裁剪前插入 `{name}.unscale_({optimizer})`",
        ),
        (edit,),
        Applicability.UNSAFE,
    )

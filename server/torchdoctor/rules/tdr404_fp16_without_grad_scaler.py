from __future__ import annotations

import ast
from functools import partial

from ..core import arguments, fixes, training
from ..core.context import Context
from ..core.kinds import SCALERS
from ..core.model import Applicability, Edit, Fix, Text
from ..core.training import LoopInfo
from .base import Invalid, Rule, Valid

_LOOP = "import torch\nfor x, y in loader:\n    optimizer.zero_grad()\n"


class Fp16WithoutGradScaler(Rule):
    """## What it does
    Checks for a training loop that runs its forward pass under float16 autocast on CUDA
    (`torch.autocast("cuda")`: float16 is the CUDA default, `torch.get_autocast_dtype("cuda")`)
    and calls `.backward()` in the same loop (or, for a step helper without a loop, in the
    same function) with no `GradScaler` anywhere in the file.

    ## Why is this bad?
    float16 has 5 exponent bits: its smallest positive value is 2**-24 (about 6e-8), and
    values below half of that round to zero. Under fp16 autocast
    the activations' gradients are float16, so small gradients underflow and those weights
    stop learning, without any error or warning. `GradScaler` multiplies the loss (65,536 at
    the start) before `backward()` so the gradients stay representable, and divides them back
    before the optimizer step. Measured on an H200 (3-layer MLP under fp16 autocast, loss
    scaled down to mimic small losses): with the loss times 1e-4, 49.8% of the parameter
    gradient entries are exactly zero without a scaler and 0% with one; with the loss times
    1e-6, 100% are zero without a scaler and 0.06% with one.

    bfloat16 has float32's exponent range and needs no scaler, so `dtype=torch.bfloat16`
    (supported from Ampere GPUs on) is the other way out. Autocast on CPU (bfloat16 by
    default), autocast whose device or dtype is computed at run time, and files that use a
    scaler in any form (a `GradScaler`, `scaler.scale(loss)`, a `loss_scaler` helper,
    `accelerator.backward(loss)`) are not reported.

    The guide introduces the two as `torch.cuda.amp.autocast` and `torch.cuda.amp.GradScaler`;
    since PyTorch 2.4 those spellings are deprecated in favour of `torch.autocast("cuda")` and
    `torch.amp.GradScaler("cuda")` (see TDR401), which the examples here use.

    ## Example
    ```python
    for inputs, targets in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    scaler = torch.amp.GradScaler("cuda")
    for inputs, targets in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = criterion(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Fix safety
    Two suggestions, never applied in bulk. The first (when the loop has one backward pass and
    one `optimizer.step()`, and no gradient clipping) creates `scaler = torch.amp.GradScaler(
    "cuda")` before the loop and routes the backward pass and the step through it. The second
    passes `dtype=torch.bfloat16` to `autocast`, which needs a GPU with bfloat16 support and
    changes the numerics of every autocast op.

    ## References
    - [Automatic Mixed Precision examples](https://pytorch.org/docs/stable/notes/amp_examples.html)
    - [`torch.amp.GradScaler`](https://pytorch.org/docs/stable/amp.html#gradient-scaling)
    - [`torch.autocast`](https://pytorch.org/docs/stable/amp.html#torch.autocast)
    """

    code = "TDR404"
    name = "fp16-without-grad-scaler"
    fix_safety = Applicability.SUGGESTION

    VALID = (
        # A GradScaler.
        "import torch\nscaler = torch.amp.GradScaler('cuda')\n"
        "for x, y in loader:\n"
        "    with torch.autocast('cuda'):\n        loss = crit(model(x), y)\n"
        "    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()\n",
        # bfloat16, CPU autocast, a disabled one, a device chosen at run time.
        _LOOP + "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
        "        loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
        _LOOP + "    with torch.autocast(device_type='cpu'):\n"
        "        loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
        _LOOP + "    with torch.cpu.amp.autocast():\n"
        "        loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
        _LOOP + "    with torch.autocast('cuda', enabled=False):\n"
        "        loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
        _LOOP + "    with torch.autocast(device.type):\n"
        "        loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
        _LOOP + "    with torch.autocast('cuda', dtype=amp_dtype):\n"
        "        loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
        # Evaluation under autocast: no backward pass.
        "import torch\nwith torch.no_grad():\n    for x in loader:\n"
        "        with torch.autocast('cuda'):\n            preds.append(model(x))\n",
        # A scaler passed in, or a helper that scales and steps (timm's NativeScaler).
        "import torch\ndef train(model, loader, opt, scaler):\n    for x, y in loader:\n"
        "        with torch.autocast('cuda'):\n            loss = crit(model(x), y)\n"
        "        scaler.scale(loss).backward()\n        scaler.step(opt)\n        scaler.update()\n",
        "import torch\nfor x, y in loader:\n    with torch.autocast('cuda'):\n"
        "        loss = crit(model(x), y)\n    loss_scaler(loss, optimizer, parameters=params)\n"
        "    loss.backward()\n",
        # Accelerate scales the loss in its own backward.
        "import torch\nfor x, y in loader:\n    with torch.autocast('cuda'):\n"
        "        loss = crit(model(x), y)\n    accelerator.backward(loss)\n    optimizer.step()\n",
        # A local autocast that is not torch's.
        "import torch\nfrom contextlib import nullcontext as autocast\n"
        "for x, y in loader:\n    with autocast('cuda'):\n        loss = crit(model(x), y)\n"
        "    loss.backward()\n",
        Valid(
            _LOOP + "    with torch.autocast('cuda', dtype=torch.bfloat16):\n"
            "        loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
            notebook=True,
        ),
        # Accelerate scales the loss in `accelerator.backward` under fp16 mixed precision.
        "import torch\nfrom accelerate import Accelerator\n"
        "accelerator = Accelerator(mixed_precision='fp16')\n"
        "for x, y in loader:\n"
        "    with accelerator.autocast():\n"
        "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
        "    accelerator.backward(loss)\n"
        "    optimizer.step()\n",
    )
    INVALID = (
        Invalid(
            _LOOP + "    with torch.autocast('cuda'):\n"
            "        loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
            fixed='import torch\nscaler = torch.amp.GradScaler("cuda")\n'
            "for x, y in loader:\n    optimizer.zero_grad()\n"
            "    with torch.autocast('cuda'):\n"
            "        loss = crit(model(x), y)\n    scaler.scale(loss).backward()\n"
            "    scaler.step(optimizer)\n    scaler.update()\n",
            lines=(4,),
        ),
        # An epoch loop around the batch loop; explicit float16 under an alias.
        Invalid(
            "import torch as T\nfrom torch import autocast\n"
            "def train(model, loader, opt):\n"
            "    for epoch in range(10):\n"
            "        for x, y in loader:\n"
            "            with autocast(device_type='cuda', dtype=T.float16):\n"
            "                out = model(x)\n"
            "            loss = crit(out.float(), y)\n"
            "            opt.zero_grad()\n"
            "            loss.backward()\n"
            "            opt.step()\n",
            fixed="import torch as T\nfrom torch import autocast\n"
            "def train(model, loader, opt):\n"
            '    scaler = T.amp.GradScaler("cuda")\n'
            "    for epoch in range(10):\n"
            "        for x, y in loader:\n"
            "            with autocast(device_type='cuda', dtype=T.float16):\n"
            "                out = model(x)\n"
            "            loss = crit(out.float(), y)\n"
            "            opt.zero_grad()\n"
            "            scaler.scale(loss).backward()\n"
            "            scaler.step(opt)\n"
            "            scaler.update()\n",
            lines=(6,),
        ),
        # Deprecated spelling (float16 by default); clipping: only the bfloat16 suggestion.
        Invalid(
            _LOOP + "    with torch.cuda.amp.autocast():\n"
            "        loss = crit(model(x), y)\n    loss.backward()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n    optimizer.step()\n",
            fixed=_LOOP + "    with torch.cuda.amp.autocast(dtype=torch.bfloat16):\n"
            "        loss = crit(model(x), y)\n    loss.backward()\n"
            "    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n    optimizer.step()\n",
            lines=(4,),
        ),
        # A training-step helper without a loop: the dtype suggestion, replacing float16.
        Invalid(
            "import torch\ndef train_step(model, x, y, opt):\n"
            "    with torch.amp.autocast('cuda', torch.half):\n        loss = crit(model(x), y)\n"
            "    loss.backward()\n    opt.step()\n",
            fixed="import torch\ndef train_step(model, x, y, opt):\n"
            "    with torch.amp.autocast('cuda', torch.bfloat16):\n        loss = crit(model(x), y)\n"
            "    loss.backward()\n    opt.step()\n",
            lines=(3,),
        ),
        Invalid(
            _LOOP + "    with torch.autocast('cuda'):\n"
            "        loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
            fixed='import torch\nscaler = torch.amp.GradScaler("cuda")\n'
            "for x, y in loader:\n    optimizer.zero_grad()\n"
            "    with torch.autocast('cuda'):\n"
            "        loss = crit(model(x), y)\n    scaler.scale(loss).backward()\n"
            "    scaler.step(optimizer)\n    scaler.update()\n",
            notebook=True,
            lines=(4,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        scaled: bool | None = None  # whether the file uses a scaler, asked once it matters
        for with_ in sem.withs:
            for item in with_.items:
                expr = item.context_expr
                if not (
                    training.is_autocast(sem, expr)
                    and not training.autocast_disabled(sem, expr)
                    and training.autocast_device(sem, expr) == "cuda"
                    and training.autocast_dtype(sem, expr) == "float16"
                ):
                    continue
                loop = training.repeating_loop(sem, with_)
                region = loop.node if loop else sem.enclosing_function(with_)
                if region is None:
                    continue
                backwards = [
                    c
                    for c in training.backward_calls(sem, region)
                    if training.tensor_of_backward(c, sem) is not None
                    and not training.grad_disabled(sem, c)
                ]
                if not backwards:
                    continue
                if scaled is None:
                    scaled = _uses_a_scaler(ctx)
                if scaled:
                    return
                assert isinstance(expr, ast.Call)
                ctx.report(
                    expr,
                    Text(
                        "float16 `autocast` with `.backward()` and no `GradScaler`: small "
                        "gradients underflow to zero",
                        "使用 float16 `autocast` 并调用 `.backward()`，却没有 `GradScaler`："
                        "较小的梯度会下溢为零",
                    ),
                    fixes=partial(_fixes, ctx, with_, loop, backwards, expr),
                )


def _fixes(
    ctx: Context,
    with_: ast.AST,
    loop: LoopInfo | None,
    backwards: list[ast.Call],
    expr: ast.Call,
) -> list[Fix | None]:
    """Add a GradScaler (where the loop is known), or autocast to bfloat16 instead."""
    return [_scaler_fix(ctx, with_, loop, backwards) if loop else None, _bfloat16_fix(ctx, expr)]


def _uses_a_scaler(ctx: Context) -> bool:
    """A GradScaler, ``x.scale(loss).backward()``, any name about a scaler, apex's
    ``scale_loss``, or a wrapper's ``backward(loss)`` (Accelerate, Fabric, DeepSpeed)."""
    sem = ctx.sem
    if next(sem.calls_to(*SCALERS), None) is not None or "scale_loss" in sem.calls_by_attr:
        return True
    if any("scaler" in n.lower() for n in (*sem.names, *sem.attributes)):
        return True
    return any(
        training.scaled_backward_scaler(c) is not None
        or (
            isinstance(c.func, ast.Attribute)
            and training.tensor_of_backward(c, sem) is not c.func.value
        )
        for c in sem.calls_by_attr.get("backward", ())
    )


def _scaler_fix(
    ctx: Context, with_: ast.AST, loop: LoopInfo, backwards: list[ast.Call]
) -> Fix | None:
    sem = ctx.sem
    steps = training.optimizer_steps(sem, loop.node)
    if len(backwards) != 1 or len(steps) != 1 or training.clip_calls(sem):
        return None
    backward, step = backwards[0], steps[0]
    if not isinstance(backward.func, ast.Attribute) or sem.qualname(backward.func) is not None:
        return None
    if step.args or step.keywords or not isinstance(step.func, ast.Attribute):
        return None
    stmt = sem.statement_of(step)
    if not isinstance(stmt, ast.Expr) or stmt.value is not step:
        return None
    if any("scaler" in scope.bindings for scope in sem.scopes.values()):
        return None
    ref = fixes.module_ref(sem, ctx.source, "torch", ctx.notebook)
    outer = training.enclosing_loops(sem, with_)[-1].node
    if ref is None:
        return None
    torch_name, edits = ref
    receiver, optimizer = backward.func.value, ctx.segment(step.func.value)
    before = fixes.insert_statement_before(
        ctx.source, outer, f'scaler = {torch_name}.amp.GradScaler("cuda")'
    )
    update = fixes.insert_statement_after(ctx.source, stmt, "scaler.update()")
    if before is None or update is None:
        return None
    new: list[Edit] = [
        *edits,
        before,
        fixes.replace(ctx.source, receiver, f"scaler.scale({ctx.segment(receiver)})"),
        fixes.replace(ctx.source, step, f"scaler.step({optimizer})"),
        update,
    ]
    return Fix(
        Text("Add a `GradScaler`", "添加 `GradScaler`"), tuple(new), Applicability.SUGGESTION
    )


def _bfloat16_fix(ctx: Context, call: ast.Call) -> Fix | None:
    ref = fixes.module_ref(ctx.sem, ctx.source, "torch", ctx.notebook)
    if ref is None:
        return None
    torch_name, edits = ref
    dtype = f"{torch_name}.bfloat16"
    given = arguments.bind_as(call, ctx.qualname(call.func)).value("dtype")
    edit = (
        fixes.replace(ctx.source, given, dtype)
        if given is not None
        else fixes.add_keyword(ctx.source, call, f"dtype={dtype}")
    )
    return Fix(
        Text("Use `dtype=torch.bfloat16`", "改用 `dtype=torch.bfloat16`"),
        (*edits, edit),
        Applicability.SUGGESTION,
    )

from __future__ import annotations

import ast
from functools import partial

from ..core import accumulation, fixes, training
from ..core.context import Context
from ..core.kinds import Kind
from ..core.model import Applicability, Edit, Fix, Severity, Text
from ..core.semantic import FUNCTION_NODES
from .base import Invalid, Rule, Valid


class ZeroGradInAccumulation(Rule):
    """## What it does
    Checks gradient-accumulation loops — the optimizer steps only under a counting condition
    such as `if (i + 1) % accum_steps == 0:` — that call `optimizer.zero_grad()` (or
    `model.zero_grad()`) unconditionally on every iteration. A function that runs once per
    batch counts as one iteration too: Lightning's `training_step` with manual optimization
    that zeroes on every call and steps only when `(batch_idx + 1) % k == 0`.

    Only a backward pass that feeds the conditionally stepped optimizer counts: one that
    runs under the same condition as the step accumulates nothing, and one followed by
    another optimizer's step belongs to that optimizer. In a GAN that updates its
    discriminator on every iteration and its generator every k-th, the per-iteration
    `optimizer_G.zero_grad()` is right and is not reported.

    ## Why is this bad?
    Gradient accumulation relies on `.backward()` *adding* each micro-batch's gradients into
    `.grad` until the step. A `zero_grad()` that runs on every iteration wipes them each time,
    so the step sees only the last micro-batch: the effective batch is `accum_steps` times
    smaller than intended, the gradient is noisier, and `accum_steps - 1` of every
    `accum_steps` backward passes are wasted work. Nothing fails; the model just trains worse.

    The guide warns about exactly this. It lists the order after accumulation as
    "zero_grad, then step"; the working order is `step()` first and `zero_grad()` right after
    it, otherwise the step finds no gradients. The guide also says that `zero_grad()` sets the
    gradients to zero; since PyTorch 2.0 it sets them to `None` by default
    (`set_to_none=True`), which frees their memory until the next backward pass.

    Only steps under a test that counts micro-batches (a `%` remainder, or a name about
    accumulation such as `accum_steps`) are considered: a step skipped for another reason
    (`if torch.isfinite(norm):`) next to a per-iteration `zero_grad()` is a normal loop. A
    `zero_grad()` that an earlier `continue` can skip is not reported either.

    ## Example
    ```python
    for i, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
    ```

    ## Use instead
    ```python
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Fix safety
    The fix moves `zero_grad()` into the conditional block, right after the step (after
    `scaler.update()` when it follows the step). It is unsafe: training changes — to the
    accumulation the code intended. No fix is offered when the call shares its line with other
    code or is the only statement of its block.

    ## References
    - [`Optimizer.zero_grad`](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html)
    - [Gradient accumulation with AMP](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation)
    """

    code = "TDR107"
    name = "zero-grad-in-accumulation"
    severity = Severity.ERROR
    fix_safety = Applicability.UNSAFE

    VALID = (
        # A GAN: the critic steps every iteration, the generator every k-th with its own
        # backward under the same condition.
        "import torch\n"
        "for i, (real, _) in enumerate(loader):\n"
        "    opt_d.zero_grad()\n"
        "    loss_d = critic(gen(z)).mean() - critic(real).mean()\n"
        "    loss_d.backward()\n"
        "    opt_d.step()\n"
        "    opt_g.zero_grad()\n"
        "    if i % n_critic == 0:\n"
        "        loss_g = -critic(gen(z)).mean()\n"
        "        loss_g.backward()\n"
        "        opt_g.step()\n",
        # Correct accumulation: zero_grad right after the step.
        "import torch\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    loss = crit(model(x), y) / 4\n"
        "    loss.backward()\n"
        "    if (i + 1) % 4 == 0:\n"
        "        optimizer.step()\n"
        "        optimizer.zero_grad()\n",
        # zero_grad at the start of each accumulation window.
        "import torch\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    if i % accum == 0:\n"
        "        optimizer.zero_grad()\n"
        "    crit(model(x), y).backward()\n"
        "    if (i + 1) % accum == 0:\n"
        "        optimizer.step()\n",
        # A step skipped for another reason is not accumulation.
        "import torch\n"
        "for x, y in loader:\n"
        "    optimizer.zero_grad()\n"
        "    crit(model(x), y).backward()\n"
        "    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "    if torch.isfinite(norm):\n"
        "        optimizer.step()\n",
        # Plain training: step every iteration.
        "import torch\n"
        "for x, y in loader:\n"
        "    optimizer.zero_grad()\n    crit(model(x), y).backward()\n    optimizer.step()\n"
        "    if i % 100 == 0:\n        print(i)\n",
        # The backward also runs only under the condition: nothing accumulates.
        "import torch\n"
        "for i, x in enumerate(loader):\n"
        "    optimizer.zero_grad()\n"
        "    if i % 2 == 0:\n"
        "        model(x).sum().backward()\n"
        "        optimizer.step()\n",
        # Another optimizer is zeroed (GAN: discriminator steps every iteration).
        "import torch\n"
        "for i, x in enumerate(loader):\n"
        "    opt_d.zero_grad()\n"
        "    d_loss(x).backward()\n"
        "    opt_d.step()\n"
        "    g_loss(x).backward()\n"
        "    if (i + 1) % n_critic == 0:\n"
        "        opt_g.step()\n"
        "        opt_g.zero_grad()\n",
        # The step is in an epoch loop; zero_grad in the batch loop is a separate iteration.
        "import torch\n"
        "for epoch in range(10):\n"
        "    for x in loader:\n"
        "        optimizer.zero_grad()\n        model(x).sum().backward()\n"
        "        optimizer.step()\n"
        "    if epoch % 5 == 0:\n        swa_optimizer.step()\n",
        # The iteration ends early unless it steps: the zero_grad runs only after a step.
        "import torch\n"
        "for i, x in enumerate(loader):\n"
        "    model(x).sum().backward()\n"
        "    if (i + 1) % 4 == 0:\n"
        "        optimizer.step()\n"
        "    else:\n"
        "        continue\n"
        "    optimizer.zero_grad()\n",
        # zero_grad once per epoch, before a batch loop over a progress bar.
        "import torch\n"
        "for epoch in range(epochs):\n"
        "    pbar = enumerate(train_loader)\n"
        "    optimizer.zero_grad()\n"
        "    for i, (imgs, targets) in pbar:\n"
        "        scaler.scale(compute_loss(model(imgs), targets)).backward()\n"
        "        if ni - last_opt_step >= accumulate:\n"
        "            scaler.step(optimizer)\n            scaler.update()\n"
        "            optimizer.zero_grad()\n",
        # zero_grad of something that is not an optimizer or a model.
        "import torch\n"
        "for i, x in enumerate(loader):\n"
        "    meter.zero_grad()\n"
        "    model(x).sum().backward()\n"
        "    if (i + 1) % 4 == 0:\n"
        "        optimizer.step()\n        optimizer.zero_grad()\n",
        Valid(
            "import torch\n"
            "for i, x in enumerate(loader):\n"
            "    model(x).sum().backward()\n"
            "    if (i + 1) % 8 == 0:\n"
            "        scaler.step(opt)\n        scaler.update()\n        opt.zero_grad()\n",
            notebook=True,
        ),
        # Accelerate's `accumulate()` skips the step and the zeroing between sync steps.
        "import torch\nfrom accelerate import Accelerator\n"
        "accelerator = Accelerator(gradient_accumulation_steps=4)\n"
        "for batch in loader:\n"
        "    with accelerator.accumulate(model):\n"
        "        accelerator.backward(model(**batch).loss)\n"
        "        optimizer.step()\n"
        "        optimizer.zero_grad()\n",
        # Lightning, manual optimization: zeroed right after the counted step.
        "import torch\nimport lightning.pytorch as pl\n"
        "class M(pl.LightningModule):\n"
        "    def training_step(self, batch, batch_idx):\n"
        "        opt = self.optimizers()\n"
        "        self.manual_backward(self.net(batch).sum())\n"
        "        if (batch_idx + 1) % 4 == 0:\n"
        "            opt.step()\n"
        "            opt.zero_grad()\n",
        # Once per batch, the step on every call and the zeroing once per window.
        "import torch\n"
        "def train_step(model, opt, batch, i):\n"
        "    if i % 4 == 0:\n"
        "        opt.zero_grad()\n"
        "    model(batch).sum().backward()\n"
        "    if (i + 1) % 4 == 0:\n"
        "        opt.step()\n",
    )
    INVALID = (
        # Lightning, manual optimization: `training_step` runs once per batch and zeroes
        # both optimizers each time.
        Invalid(
            "import torch\nimport lightning.pytorch as pl\n"
            "class VAE(pl.LightningModule):\n"
            "    def training_step(self, batch, batch_idx):\n"
            "        g_opt, d_opt = self.optimizers()\n"
            "        g_opt.zero_grad()\n"
            "        self.manual_backward(self.g_loss(batch))\n"
            "        if (batch_idx + 1) % self.accum == 0:\n"
            "            g_opt.step()\n"
            "        d_opt.zero_grad()\n"
            "        self.manual_backward(self.d_loss(batch))\n"
            "        if (batch_idx + 1) % self.accum == 0:\n"
            "            d_opt.step()\n",
            fixed="import torch\nimport lightning.pytorch as pl\n"
            "class VAE(pl.LightningModule):\n"
            "    def training_step(self, batch, batch_idx):\n"
            "        g_opt, d_opt = self.optimizers()\n"
            "        self.manual_backward(self.g_loss(batch))\n"
            "        if (batch_idx + 1) % self.accum == 0:\n"
            "            g_opt.step()\n"
            "            g_opt.zero_grad()\n"
            "        d_opt.zero_grad()\n"
            "        self.manual_backward(self.d_loss(batch))\n"
            "        if (batch_idx + 1) % self.accum == 0:\n"
            "            d_opt.step()\n",
            lines=(6, 10),
        ),
        # Two optimizers: the encoder's steps every iteration, the head's backward runs on
        # every iteration too but its step only every k-th.
        Invalid(
            "import torch\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    opt_enc.zero_grad()\n"
            "    recon(enc(x), x).backward()\n"
            "    opt_enc.step()\n"
            "    opt_head.zero_grad()\n"
            "    crit(head(x), y).backward()\n"
            "    if (i + 1) % 8 == 0:\n"
            "        opt_head.step()\n",
            fixed="import torch\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    opt_enc.zero_grad()\n"
            "    recon(enc(x), x).backward()\n"
            "    opt_enc.step()\n"
            "    crit(head(x), y).backward()\n"
            "    if (i + 1) % 8 == 0:\n"
            "        opt_head.step()\n"
            "        opt_head.zero_grad()\n",
            lines=(6,),
        ),
        Invalid(
            "import torch\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    optimizer.zero_grad()\n"
            "    loss = crit(model(x), y) / accum_steps\n"
            "    loss.backward()\n"
            "    if (i + 1) % accum_steps == 0:\n"
            "        optimizer.step()\n",
            fixed="import torch\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    loss = crit(model(x), y) / accum_steps\n"
            "    loss.backward()\n"
            "    if (i + 1) % accum_steps == 0:\n"
            "        optimizer.step()\n"
            "        optimizer.zero_grad()\n",
            lines=(3,),
        ),
        # zero_grad after the guarded step; scaler step and update; a model's zero_grad.
        Invalid(
            "import torch\nfrom torch import nn\n"
            "net = nn.Linear(4, 2)\n"
            "sgd = torch.optim.SGD(net.parameters(), lr=0.1)\n"
            "step = 0\n"
            "while step < total:\n"
            "    scaler.scale(net(next(it)).sum()).backward()\n"
            "    if step % accumulation == accumulation - 1:\n"
            "        scaler.step(sgd)\n"
            "        scaler.update()\n"
            "        log(step)\n"
            "    net.zero_grad(set_to_none=True)  # reset\n"
            "    step += 1\n",
            fixed="import torch\nfrom torch import nn\n"
            "net = nn.Linear(4, 2)\n"
            "sgd = torch.optim.SGD(net.parameters(), lr=0.1)\n"
            "step = 0\n"
            "while step < total:\n"
            "    scaler.scale(net(next(it)).sum()).backward()\n"
            "    if step % accumulation == accumulation - 1:\n"
            "        scaler.step(sgd)\n"
            "        scaler.update()\n"
            "        net.zero_grad(set_to_none=True)  # reset\n"
            "        log(step)\n"
            "    step += 1\n",
            lines=(12,),
        ),
        # The guard already zeroes after the step: the extra call is removed.
        Invalid(
            "import torch\n"
            "def train(model, loader, opt):\n"
            "    for it, batch in enumerate(loader):\n"
            "        with torch.autocast('cuda'):\n"
            "            opt.zero_grad()\n"
            "            loss = model(batch)\n"
            "        loss.backward()\n"
            "        if it % self_accum_steps == 0 or it == last:\n"
            "            opt.step()\n"
            "            opt.zero_grad()\n",
            fixed="import torch\n"
            "def train(model, loader, opt):\n"
            "    for it, batch in enumerate(loader):\n"
            "        with torch.autocast('cuda'):\n"
            "            loss = model(batch)\n"
            "        loss.backward()\n"
            "        if it % self_accum_steps == 0 or it == last:\n"
            "            opt.step()\n"
            "            opt.zero_grad()\n",
            lines=(5,),
        ),
        # Shares its line: reported without a fix.
        Invalid(
            "import torch\n"
            "for i, x in enumerate(loader):\n"
            "    optimizer.zero_grad(); model(x).sum().backward()\n"
            "    if (i + 1) % 4 == 0:\n"
            "        optimizer.step()\n",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\n"
            "for i, x in enumerate(loader):\n"
            "    optimizer.zero_grad()\n"
            "    model(x).sum().backward()\n"
            "    if (i + 1) % 4 == 0:\n"
            "        optimizer.step()\n",
            fixed="import torch\n"
            "for i, x in enumerate(loader):\n"
            "    model(x).sum().backward()\n"
            "    if (i + 1) % 4 == 0:\n"
            "        optimizer.step()\n"
            "        optimizer.zero_grad()\n",
            notebook=True,
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        if not sem.calls_by_attr.get("zero_grad"):
            return  # every finding is a `zero_grad()` call (`_zeroes`)
        seen: set[ast.Call] = set()
        for loop in training.all_loops(sem):
            if not training.is_iteration_loop(sem, loop):
                continue
            for step, guard in training.accumulated_steps(sem, loop):
                optimizer = ctx.segment(training.step_optimizer(sem, step) or step)
                if not _accumulates(ctx, loop.node, step, guard, optimizer):
                    continue  # the backward pass runs only when stepping: nothing accumulates
                for call in training.calls_in(sem, loop.node.body):
                    if call in seen or not _zeroes(ctx, call, optimizer):
                        continue
                    if training.iteration_loop(sem, call) is not loop:
                        continue
                    if not training.runs_every_iteration(sem, call, loop.node):
                        continue
                    seen.add(call)
                    _report(ctx, call, step, guard)
        # A function that runs once per batch (Lightning's `training_step` with manual
        # optimization): its body is one iteration.
        for micro in accumulation.micro_batches(sem):
            region, shape, step = micro.region, micro.shape, micro.step
            if not isinstance(region, FUNCTION_NODES) or not isinstance(shape, ast.If):
                continue
            guard = shape
            optimizer = ctx.segment(training.step_optimizer(sem, step) or step)
            if not _accumulates(ctx, region, step, guard, optimizer):
                continue
            for call in training.calls_in(sem, region.body):
                if call in seen or not _zeroes(ctx, call, optimizer):
                    continue
                if training.enclosing_loops(sem, call) or training.conditions_between(
                    sem, call, region
                ):
                    continue
                seen.add(call)
                _report(ctx, call, step, guard)


def _zeroes(ctx: Context, call: ast.Call, optimizer: str) -> bool:
    """``zero_grad()`` of the stepped optimizer, or of a model."""
    if not training.is_zero_grad(ctx.sem, call):
        return False
    assert isinstance(call.func, ast.Attribute)
    receiver = call.func.value
    return ctx.segment(receiver) == optimizer or _is_model(ctx, receiver)


def _report(ctx: Context, call: ast.Call, step: ast.Call, guard: ast.If) -> None:
    ctx.report(
        call,
        Text(
            f"`{ctx.segment(call.func)}()` runs on every iteration but "
            f"`{ctx.segment(step.func)}()` only every few: the accumulated "
            "gradients are wiped before each step",
            f"`{ctx.segment(call.func)}()` 每次迭代都会执行，而 "
            f"`{ctx.segment(step.func)}()` 隔几次才执行一次：累积的梯度在每次更新前都被清空了",
        ),
        fixes=partial(_move_into_guard, ctx, call, step, guard),
        related=[ctx.related(step, Text("the conditional step", "条件执行的优化器更新"))],
    )


def _accumulates(
    ctx: Context, region: ast.AST, step: ast.Call, guard: ast.If, optimizer: str
) -> bool:
    """Whether a backward pass outside the step's guard feeds this optimizer: the first
    optimizer step after it (in the order of one iteration of ``region``, a loop or a function
    run once per batch, wrapping around) is this one's. A backward followed by another
    optimizer's step (a GAN's discriminator, updated every iteration while the generator is
    updated every k-th) accumulates nothing for this one."""
    sem = ctx.sem
    steps = sorted(training.optimizer_steps(sem, region), key=lambda c: (c.lineno, c.col_offset))
    body = region.body  # type: ignore[attr-defined]
    backwards = [c for c in training.calls_in(sem, body) if accumulation.is_backward(sem, c)]
    for backward in backwards:
        if sem.is_inside(backward, guard):
            continue
        later = [s for s in steps if training.before(backward, s)] or steps
        owner = later[0] if later else step
        if owner is step or ctx.segment(training.step_optimizer(sem, owner) or owner) == (
            optimizer
        ):
            return True
    return False


def _is_model(ctx: Context, receiver: ast.expr) -> bool:
    return ctx.kind(receiver) is Kind.MODULE


def _move_into_guard(ctx: Context, call: ast.Call, step: ast.Call, guard: ast.If) -> Fix | None:
    sem, source = ctx.sem, ctx.source
    stmt = sem.parent(call)
    if not isinstance(stmt, ast.Expr) or stmt.lineno != stmt.end_lineno:
        return None
    block, _ = sem.block_of(stmt)
    delete = fixes.delete_statement(source, stmt)
    if delete is None or len(block) < 2:
        return None
    title = Text(
        "Move `zero_grad()` after the conditional step", "把 `zero_grad()` 移到条件更新之后"
    )
    step_stmt = sem.statement_of(step)
    target_block, index = sem.block_of(step_stmt)
    receiver = ctx.segment(call.func.value) if isinstance(call.func, ast.Attribute) else ""
    for later in target_block[index + 1 :]:
        if (
            isinstance(later, ast.Expr)
            and isinstance(later.value, ast.Call)
            and isinstance(later.value.func, ast.Attribute)
            and later.value.func.attr == "zero_grad"
            and ctx.segment(later.value.func.value) == receiver
        ):
            title = Text(
                "Remove the per-iteration `zero_grad()`", "删除每次迭代都执行的 `zero_grad()`"
            )
            return Fix(title, (delete,), Applicability.UNSAFE)
    anchor = step_stmt
    nxt = target_block[index + 1] if index + 1 < len(target_block) else None
    if (
        isinstance(nxt, ast.Expr)
        and isinstance(nxt.value, ast.Call)
        and isinstance(nxt.value.func, ast.Attribute)
        and nxt.value.func.attr == "update"
    ):
        anchor = nxt
    if not sem.is_inside(anchor, guard):
        return None
    line = source.line(stmt.lineno)
    text = source.segment(stmt) + line[source.end(stmt).col :].rstrip("\r\n")
    insert: Edit | None = fixes.insert_statement_after(source, anchor, text.strip())
    if insert is None:
        return None
    return Fix(title, (delete, insert), Applicability.UNSAFE)

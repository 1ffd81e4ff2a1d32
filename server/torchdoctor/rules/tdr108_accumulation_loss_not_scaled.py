from __future__ import annotations

import ast
from functools import partial

from ..core import accumulation, fixes, training
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .base import Invalid, Rule, Valid


class AccumulationLossNotScaled(Rule):
    """## What it does
    Checks gradient accumulation — several backward passes add into the gradients of one
    optimizer step — where the loss passed to the backward pass is a plain loss, never divided by
    the number of accumulated micro-batches. Accumulation is read from the shape of the code:
    the step runs under a counting condition (`if (i + 1) % accum_steps == 0:`, or a name that
    holds such a remainder, `is_accumulating = (i + 1) % k != 0` ... `if not is_accumulating:`),
    also in a function without a loop that runs once per batch (Lightning's `training_step`
    with manual optimization); or an inner `for _ in range(k):` loop runs the backward pass and
    the step comes after it. Backward passes are `.backward()`, `scaler.scale(loss).backward()`,
    `accelerator.backward(loss)`/`fabric.backward(loss)` and Lightning's
    `self.manual_backward(loss)`. A plain loss is `criterion(...)`, `F.cross_entropy(...)` and
    the like, what a helper of the project returns when all its returns are one, or the output
    of a module (`logits, loss = model(x, y)`, `out.loss`).

    ## Why is this bad?
    `.backward()` adds each micro-batch's gradient into `.grad`. After `k` micro-batches the
    gradient is the *sum* of `k` mean gradients, `k` times the gradient of one large batch of
    the same size. With SGD this multiplies the learning rate by `k`; a `clip_grad_norm_`
    threshold tuned without accumulation clips much harder; with Adam-like optimizers, which
    divide by the gradient's magnitude, the effect is mostly limited to the `eps` term and to
    clipping, and changing `k` still changes the run. Projects fix it when they find it
    (nanoGPT's and lit-llama's training scripts did), so the rule is on by default.

    The rule stays silent when the loss cannot be followed (a function it cannot read, a
    parameter), when the module or helper that makes it is handed the count (it may divide
    itself), when the loss is rescaled anywhere on its way (`/ k`, `* w`, `.div(k)`,
    `loss /= k`), when the gradients themselves are rescaled (`p.grad /= k`), or when the inner
    loop zeroes the gradients or steps on each pass, or a step that runs on every iteration
    follows the backward pass (a critic stepped on every batch): nothing accumulates.

    ## Example
    ```python
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Use instead
    ```python
    for i, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        loss = loss / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    ```

    ## Fix safety
    The fix, offered when the count can be read from the `%` in the condition or the
    `range(k)` of the inner loop, divides the loss by it before the backward pass. It is a suggestion and never applied in bulk: it changes
    the size of every update, and a learning rate tuned with the summed gradients would need
    retuning. Logged loss values are divided too when they are read after the division.

    ## References
    - [Gradient accumulation with AMP](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation)
    - [`Tensor.backward`](https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html)
    """

    code = "TDR108"
    name = "accumulation-loss-not-scaled"
    severity = Severity.WARNING
    fix_safety = Applicability.SUGGESTION

    VALID = (
        # Divided where it is computed.
        "import torch\nimport torch.nn.functional as F\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    loss = F.cross_entropy(model(x), y) / accum\n"
        "    loss.backward()\n"
        "    if (i + 1) % accum == 0:\n        opt.step()\n        opt.zero_grad()\n",
        # Divided in place, and inside scaler.scale().
        "import torch\nfrom torch import nn\ncrit = nn.CrossEntropyLoss()\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    loss = crit(model(x), y)\n"
        "    loss /= accum\n"
        "    scaler.scale(loss).backward()\n"
        "    if (i + 1) % accum == 0:\n        scaler.step(opt)\n        scaler.update()\n",
        "import torch\nfrom torch import nn\ncrit = nn.CrossEntropyLoss()\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    scaler.scale(crit(model(x), y) / accum).backward()\n"
        "    if (i + 1) % accum == 0:\n        scaler.step(opt)\n        scaler.update()\n",
        # Unknown origin: a helper or a model output.
        "import torch\n"
        "for i, batch in enumerate(loader):\n"
        "    loss = compute_loss(model, batch)\n"
        "    loss.backward()\n"
        "    if (i + 1) % accum == 0:\n        optimizer.step()\n        optimizer.zero_grad()\n",
        "import torch\n"
        "for i, batch in enumerate(loader):\n"
        "    model(**batch).loss.backward()\n"
        "    if (i + 1) % accum == 0:\n        optimizer.step()\n        optimizer.zero_grad()\n",
        # Gradients rescaled by hand.
        "import torch\nimport torch.nn.functional as F\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    F.mse_loss(model(x), y).backward()\n"
        "    if (i + 1) % accum == 0:\n"
        "        for p in model.parameters():\n            p.grad /= accum\n"
        "        opt.step()\n        opt.zero_grad()\n",
        # Not accumulation: the step runs every iteration.
        "import torch\nimport torch.nn.functional as F\n"
        "for x, y in loader:\n"
        "    F.mse_loss(model(x), y).backward()\n    opt.step()\n    opt.zero_grad()\n",
        # A non-torch ``criterion`` with the same name.
        "import torch\n"
        "def criterion(a, b):\n    return ((a - b) ** 2).mean() / 4\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    criterion(model(x), y).backward()\n"
        "    if (i + 1) % 4 == 0:\n        opt.step()\n        opt.zero_grad()\n",
        Valid(
            "import torch\nimport torch.nn.functional as F\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    (F.l1_loss(model(x), y) / 2).backward()\n"
            "    if i % 2:\n        opt.step()\n        opt.zero_grad()\n",
            notebook=True,
        ),
        # Accelerate told the count divides the loss in `accelerator.backward`.
        "import torch\nimport torch.nn.functional as F\nfrom accelerate import Accelerator\n"
        "acc = Accelerator(gradient_accumulation_steps=4)\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    loss = F.cross_entropy(model(x), y)\n"
        "    acc.backward(loss)\n"
        "    if (i + 1) % 4 == 0:\n        opt.step()\n        opt.zero_grad()\n",
        # A helper that divides the loss itself.
        "import torch\n"
        "def loss_fn(logits, targets):\n"
        "    return torch.nn.functional.cross_entropy(logits, targets) / accum_iters\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    loss_fn(model(x), y).backward()\n"
        "    if (i + 1) % accum_iters == 0:\n"
        "        opt.step()\n        opt.zero_grad()\n",
        # Several backward passes per step, but each pass has its own step (inner loop).
        "import torch\nfrom torch import nn\n"
        "class Net(nn.Module):\n    def forward(self, x, y):\n"
        "        return ((self.l(x) - y) ** 2).mean()\n"
        "model = Net()\n"
        "while True:\n"
        "    for _ in range(4):\n"
        "        model(*next(batches)).backward()\n"
        "        opt.step()\n        opt.zero_grad()\n",
        # Gradients zeroed before each backward pass of the inner loop: nothing accumulates.
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 1)\n"
        "for epoch in range(10):\n"
        "    for _ in range(4):\n"
        "        opt.zero_grad()\n        model(next(xs)).sum().backward()\n"
        "    opt.step()\n",
        # The model is handed the count: it may divide the loss itself.
        "import torch\nfrom torch import nn\n"
        "class Net(nn.Module):\n    def forward(self, x, k):\n        return self.l(x).mean() / k\n"
        "model = Net()\n"
        "for i, x in enumerate(loader):\n"
        "    loss = model(x, accum)\n    loss.backward()\n"
        "    if (i + 1) % accum == 0:\n        opt.step()\n        opt.zero_grad()\n",
        # A variable that holds no remainder guards the step, in a function without a loop.
        "import torch\nimport lightning.pytorch as pl\nfrom torch import nn\n"
        "class M(pl.LightningModule):\n"
        "    def __init__(self):\n        super().__init__()\n        self.net = nn.Linear(2, 1)\n"
        "    def training_step(self, batch, batch_idx):\n"
        "        opt = self.optimizers()\n"
        "        self.manual_backward(self.net(batch).mean())\n"
        "        ready = self.trainer.is_last_batch\n"
        "        if ready:\n            opt.step()\n            opt.zero_grad()\n",
        # Alternating GAN steps: each backward pass has its own step under the condition.
        "import torch\nimport lightning.pytorch as pl\nfrom torch import nn\n"
        "class GAN(pl.LightningModule):\n"
        "    def __init__(self):\n        super().__init__()\n        self.g = nn.Linear(2, 2)\n"
        "    def training_step(self, batch, batch_idx):\n"
        "        g_opt, d_opt = self.optimizers()\n"
        "        if batch_idx % 2 == 0:\n"
        "            self.manual_backward(self.g(batch).mean())\n"
        "            g_opt.step()\n            g_opt.zero_grad()\n",
        # A critic stepped on every batch, the generator every k-th: no accumulation for the
        # critic's loss.
        "import torch\nimport torch.nn.functional as F\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    F.mse_loss(critic(x), y).backward()\n"
        "    opt_d.step()\n    opt_d.zero_grad()\n"
        "    if i % n_critic == 0:\n"
        "        F.mse_loss(critic(gen(x)), y).div(2).backward()\n"
        "        opt_g.step()\n        opt_g.zero_grad()\n",
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torch import nn\ncrit = nn.CrossEntropyLoss()\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    loss = crit(model(x), y)\n"
            "    loss.backward()\n"
            "    if (i + 1) % accum_steps == 0:\n"
            "        optimizer.step()\n        optimizer.zero_grad()\n",
            fixed="import torch\nfrom torch import nn\ncrit = nn.CrossEntropyLoss()\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    loss = crit(model(x), y)\n"
            "    loss = loss / accum_steps\n"
            "    loss.backward()\n"
            "    if (i + 1) % accum_steps == 0:\n"
            "        optimizer.step()\n        optimizer.zero_grad()\n",
            lines=(6,),
        ),
        # Inline functional loss under a scaler; the count is an attribute.
        Invalid(
            "import torch\nimport torch.nn.functional as F\n"
            "def fit(self):\n"
            "    for i, (x, y) in enumerate(self.loader):\n"
            "        scaler.scale(F.cross_entropy(self.model(x), y)).backward()\n"
            "        if (i + 1) % self.cfg.accum == 0:\n"
            "            scaler.step(self.optimizer)\n            scaler.update()\n",
            fixed="import torch\nimport torch.nn.functional as F\n"
            "def fit(self):\n"
            "    for i, (x, y) in enumerate(self.loader):\n"
            "        scaler.scale(F.cross_entropy(self.model(x), y) / self.cfg.accum).backward()\n"
            "        if (i + 1) % self.cfg.accum == 0:\n"
            "            scaler.step(self.optimizer)\n            scaler.update()\n",
            lines=(5,),
        ),
        # An inline loss module; the count is an expression.
        Invalid(
            "import torch\nfrom torch import nn\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    nn.MSELoss()(model(x), y).backward()\n"
            "    if (i + 1) % (total // micro) == 0:\n"
            "        opt.step()\n        opt.zero_grad()\n",
            fixed="import torch\nfrom torch import nn\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    (nn.MSELoss()(model(x), y) / (total // micro)).backward()\n"
            "    if (i + 1) % (total // micro) == 0:\n"
            "        opt.step()\n        opt.zero_grad()\n",
            lines=(4,),
        ),
        # A guard without a remainder: reported, no count to divide by.
        Invalid(
            "import torch\nimport torch.nn.functional as F\n"
            "for x, y in loader:\n"
            "    F.nll_loss(model(x), y).backward()\n"
            "    if should_accumulate_done(x):\n"
            "        opt.step()\n        opt.zero_grad()\n",
            fixed=None,
            lines=(4,),
        ),
        # Fabric's backward does not divide the loss.
        Invalid(
            "import torch\nimport torch.nn.functional as F\nfrom lightning.fabric import Fabric\n"
            "runner = Fabric(precision='bf16-mixed')\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    loss = F.cross_entropy(model(x), y)\n"
            "    runner.backward(loss)\n"
            "    if (i + 1) % accum == 0:\n        opt.step()\n        opt.zero_grad()\n",
            fixed="import torch\nimport torch.nn.functional as F\nfrom lightning.fabric import Fabric\n"
            "runner = Fabric(precision='bf16-mixed')\n"
            "for i, (x, y) in enumerate(loader):\n"
            "    loss = F.cross_entropy(model(x), y)\n"
            "    loss = loss / accum\n"
            "    runner.backward(loss)\n"
            "    if (i + 1) % accum == 0:\n        opt.step()\n        opt.zero_grad()\n",
            lines=(7,),
        ),
        # The loss comes from a helper that returns a plain loss; Fabric's backward.
        Invalid(
            "import torch\nimport lightning as L\n"
            "def loss_fn(logits, targets):\n"
            "    loss = torch.nn.functional.cross_entropy(logits, targets)\n"
            "    return loss\n"
            "def train(fabric, model, loader, opt):\n"
            "    for i, (x, y) in enumerate(loader):\n"
            "        loss = loss_fn(model(x), y)\n"
            "        fabric.backward(loss)\n"
            "        if (i + 1) % accum_iters == 0:\n"
            "            opt.step()\n            opt.zero_grad()\n"
            "train(L.Fabric(), model, loader, opt)\n",
            fixed="import torch\nimport lightning as L\n"
            "def loss_fn(logits, targets):\n"
            "    loss = torch.nn.functional.cross_entropy(logits, targets)\n"
            "    return loss\n"
            "def train(fabric, model, loader, opt):\n"
            "    for i, (x, y) in enumerate(loader):\n"
            "        loss = loss_fn(model(x), y)\n"
            "        loss = loss / accum_iters\n"
            "        fabric.backward(loss)\n"
            "        if (i + 1) % accum_iters == 0:\n"
            "            opt.step()\n            opt.zero_grad()\n"
            "train(L.Fabric(), model, loader, opt)\n",
            lines=(9,),
        ),
        # An inner loop of micro-steps, the step after it; the loss is a model output.
        Invalid(
            "import torch\nfrom torch import nn\n"
            "class GPT(nn.Module):\n"
            "    def forward(self, x, y):\n"
            "        logits = self.head(x)\n"
            "        return logits, nn.functional.cross_entropy(logits, y)\n"
            "model = GPT()\n"
            "while step < max_steps:\n"
            "    for micro_step in range(grad_accum):\n"
            "        logits, loss = model(x, y)\n"
            "        scaler.scale(loss).backward()\n"
            "    scaler.step(optimizer)\n    scaler.update()\n"
            "    optimizer.zero_grad(set_to_none=True)\n",
            fixed="import torch\nfrom torch import nn\n"
            "class GPT(nn.Module):\n"
            "    def forward(self, x, y):\n"
            "        logits = self.head(x)\n"
            "        return logits, nn.functional.cross_entropy(logits, y)\n"
            "model = GPT()\n"
            "while step < max_steps:\n"
            "    for micro_step in range(grad_accum):\n"
            "        logits, loss = model(x, y)\n"
            "        loss = loss / grad_accum\n"
            "        scaler.scale(loss).backward()\n"
            "    scaler.step(optimizer)\n    scaler.update()\n"
            "    optimizer.zero_grad(set_to_none=True)\n",
            lines=(11,),
        ),
        # The remainder is kept in a variable; the loss comes from a helper of the file.
        Invalid(
            "import torch\nimport torch.nn.functional as F\n"
            "def loss_fn(logits, targets):\n"
            "    loss = F.cross_entropy(logits[:, :-1], targets[:, 1:])\n"
            "    return loss\n"
            "def train(model, optimizer, data):\n"
            "    for it in range(max_iters):\n"
            "        is_accumulating = (it + 1) % accum_iters != 0\n"
            "        loss = loss_fn(model(data[it]), data[it])\n"
            "        loss.backward()\n"
            "        if not is_accumulating:\n"
            "            optimizer.step()\n            optimizer.zero_grad()\n",
            fixed="import torch\nimport torch.nn.functional as F\n"
            "def loss_fn(logits, targets):\n"
            "    loss = F.cross_entropy(logits[:, :-1], targets[:, 1:])\n"
            "    return loss\n"
            "def train(model, optimizer, data):\n"
            "    for it in range(max_iters):\n"
            "        is_accumulating = (it + 1) % accum_iters != 0\n"
            "        loss = loss_fn(model(data[it]), data[it])\n"
            "        loss = loss / accum_iters\n"
            "        loss.backward()\n"
            "        if not is_accumulating:\n"
            "            optimizer.step()\n            optimizer.zero_grad()\n",
            lines=(10,),
        ),
        # Lightning's manual optimization: one backward per call, the step every k-th batch;
        # the loss is the output of a module kept on the object.
        Invalid(
            "import torch\nimport lightning.pytorch as pl\n"
            "class VAE(pl.LightningModule):\n"
            "    def __init__(self, loss_module, accumulate):\n"
            "        super().__init__()\n"
            "        self.loss = loss_module\n"
            "        self.accumulate = accumulate\n"
            "    def training_step(self, batch, batch_idx):\n"
            "        opt = self.optimizers()\n"
            "        loss, logs = self.loss(self(batch), batch, split='train')\n"
            "        self.manual_backward(loss)\n"
            "        if (batch_idx + 1) % self.accumulate == 0:\n"
            "            opt.step()\n            opt.zero_grad()\n",
            fixed="import torch\nimport lightning.pytorch as pl\n"
            "class VAE(pl.LightningModule):\n"
            "    def __init__(self, loss_module, accumulate):\n"
            "        super().__init__()\n"
            "        self.loss = loss_module\n"
            "        self.accumulate = accumulate\n"
            "    def training_step(self, batch, batch_idx):\n"
            "        opt = self.optimizers()\n"
            "        loss, logs = self.loss(self(batch), batch, split='train')\n"
            "        loss = loss / self.accumulate\n"
            "        self.manual_backward(loss)\n"
            "        if (batch_idx + 1) % self.accumulate == 0:\n"
            "            opt.step()\n            opt.zero_grad()\n",
            lines=(11,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for micro in accumulation.micro_batches(sem):
            if training.rescales_gradients(sem, micro.region.body):
                continue
            if not accumulation.loss_unscaled(sem, micro.tensor, micro.count):
                continue
            if training.backward_scales_loss(sem, micro.backward):
                continue  # Accelerate told the count, or DeepSpeed: it divides the loss
            ctx.report(
                micro.tensor,
                Text(
                    "The loss is not divided by the number of accumulated micro-batches: "
                    "each step applies their summed gradients",
                    "损失没有除以累积的 micro-batch 数量：每次更新使用的是它们梯度之和",
                ),
                fixes=partial(_divide, ctx, micro),
                related=[ctx.related(micro.step, Text("the step after them", "之后的更新"))],
            )


def _divide(ctx: Context, micro: accumulation.MicroBatch) -> Fix | None:
    count = micro.count
    if count is None:
        return None
    call, tensor = micro.backward, micro.tensor
    k = ctx.segment(count)
    if not isinstance(count, ast.Name | ast.Attribute | ast.Constant):
        k = f"({k})"
    title = Text(f"Divide the loss by `{k}`", f"把损失除以 `{k}`")
    if isinstance(tensor, ast.Name):
        stmt = ctx.sem.statement_of(call)
        edit = fixes.insert_statement_before(ctx.source, stmt, f"{tensor.id} = {tensor.id} / {k}")
        return Fix(title, (edit,), Applicability.SUGGESTION) if edit else None
    text = f"{ctx.segment(tensor)} / {k}"
    func = call.func
    if isinstance(func, ast.Attribute) and func.value is tensor:
        text = f"({text})"
    return Fix(title, (fixes.replace(ctx.source, tensor, text),), Applicability.SUGGESTION)

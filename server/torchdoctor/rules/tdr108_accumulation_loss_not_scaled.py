from __future__ import annotations

import ast
from functools import partial

from ..core import fixes, training
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .base import Invalid, Rule, Valid


class AccumulationLossNotScaled(Rule):
    """## What it does
    Checks gradient-accumulation loops (the optimizer steps only under a counting condition
    such as `if (i + 1) % accum_steps == 0:`) where the loss passed to `.backward()` is a plain
    loss — `criterion(...)`, `F.cross_entropy(...)` and the like — never divided by the number
    of accumulated micro-batches.

    ## Why is this bad?
    `.backward()` adds each micro-batch's gradient into `.grad`. After `k` micro-batches the
    gradient is the *sum* of `k` mean gradients, `k` times the gradient of one large batch of
    the same size. With SGD this multiplies the learning rate by `k`; a `clip_grad_norm_`
    threshold tuned without accumulation clips much harder; with Adam-like optimizers, which
    divide by the gradient's magnitude, the effect is mostly limited to the `eps` term. That is
    why the rule is off by default and only informs.

    The rule stays silent when the loss cannot be followed (it comes from a helper function or
    a model output), when it is rescaled anywhere on its way (`/ k`, `* w`, `.div(k)`,
    `loss /= k`), or when the gradients themselves are rescaled (`p.grad /= k`).

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
    The fix, offered when the count can be read from the `%` in the condition, divides the loss
    by it before the backward pass. It is a suggestion and never applied in bulk: it changes
    the size of every update, and a learning rate tuned with the summed gradients would need
    retuning. Logged loss values are divided too when they are read after the division.

    ## References
    - [Gradient accumulation with AMP](https://pytorch.org/docs/stable/notes/amp_examples.html#gradient-accumulation)
    - [`Tensor.backward`](https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html)
    """

    code = "TDR108"
    name = "accumulation-loss-not-scaled"
    severity = Severity.INFO
    default = False
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
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for loop in training.all_loops(sem):
            if not training.is_iteration_loop(sem, loop):
                continue
            steps = training.accumulated_steps(sem, loop)
            if not steps or training.rescales_gradients(sem, loop.node.body):
                continue
            guard = steps[0][1]
            for call in training.backward_calls(sem, loop.node.body):
                if training.iteration_loop(sem, call) is not loop or sem.is_inside(call, guard):
                    continue
                tensor = training.tensor_of_backward(call, sem)
                if tensor is None or training.unscaled_loss(sem, tensor) is not True:
                    continue
                if training.backward_scales_loss(sem, call):
                    continue  # Accelerate told the count, or DeepSpeed: it divides the loss
                ctx.report(
                    tensor,
                    Text(
                        "The loss is not divided by the number of accumulated micro-batches: "
                        "each step applies their summed gradients",
                        "损失没有除以累积的 micro-batch 数量：每次更新使用的是它们梯度之和",
                    ),
                    fixes=partial(_divide, ctx, call, tensor, guard),
                    related=[ctx.related(steps[0][0], Text("the conditional step", "条件更新"))],
                )


def _divide(ctx: Context, call: ast.Call, tensor: ast.expr, guard: ast.If) -> Fix | None:
    count = training.accumulation_count(guard.test)
    if count is None:
        return None
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

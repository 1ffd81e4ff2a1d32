from __future__ import annotations

import ast

from ..core import fixes, training
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .base import Invalid, Rule, Valid


class LossAccumulatedWithGraph(Rule):
    """## What it does
    Checks training loops that accumulate a loss tensor — `total += loss`,
    `total = total + loss`, `losses.append(loss)` — without `.item()` or `.detach()`. A loss
    is the result of `criterion(...)` where `criterion` is an `nn.*Loss`, of
    `F.cross_entropy(...)`/`F.*_loss(...)`, of `nn.MSELoss()(...)`, arithmetic on one, or a
    tensor that is `.backward()`-ed.

    ## Why is this bad?
    A loss tensor carries its autograd graph. Adding it to a running total (or keeping it in a
    list) links every iteration's graph to an object that outlives the iteration, so none of
    them is freed: memory grows with every batch until the epoch ends, or until the process runs
    out of memory. When the loss was never backpropagated (evaluation with gradients on, or a
    logged auxiliary loss) every saved activation stays alive: measured on an H200, summing the
    losses of 50 iterations of an MLP (1024→4096→10, batch 512) peaked at 409 MiB as tensors and
    24 MiB with `.item()`; on a CPU (`bench/cpu_loss_accumulation.py`, torch 2.13) the surviving
    graphs hold 403 MiB after 50 iterations, and 0 MiB with `.item()`. After `.backward()` the
    activations are freed, but the total still requires grad and the chain of autograd nodes
    behind it grows by every operation of every iteration. The PyTorch FAQ shows this exact loop as the first cause of memory
    growth.

    It is a leak even when the total is only printed or logged later. The rule stays silent
    when the accumulation runs under `torch.no_grad()`/`torch.inference_mode()` (or the loss
    was computed there), when the accumulator is reset inside the loop, when the accumulated
    value is itself backpropagated, and when it is returned from a loop that has no backward
    pass of its own (summing the losses of an unrolled sequence for one backward pass by the
    caller is intended). A total returned from a loop that trains is still reported.

    ## Example
    ```python
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    ```

    ## Use instead
    ```python
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    ```

    ## Fix safety
    For `+=` and `total = total + loss` the preferred fix adds `.item()`. It is unsafe: the
    total becomes a Python float instead of a tensor, `.item()` waits for the GPU, and it
    raises on a loss with more than one element (`reduction="none"`). The alternative adds
    `.detach()`, which keeps a tensor and is safe. For `append` the fix adds `.detach()`
    (safe): the list holds the same values without their graphs.

    ## References
    - [PyTorch FAQ: accumulating history across the training loop](https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory)
    - [`Tensor.item`](https://pytorch.org/docs/stable/generated/torch.Tensor.item.html)
    - [`Tensor.detach`](https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html)
    """

    zh = """## 功能
    检查训练循环中不经 `.item()` 或 `.detach()` 就累积损失张量的写法——`total += loss`、
    `total = total + loss`、`losses.append(loss)`。损失指：`criterion(...)`（`criterion` 是 `nn.*Loss`）、
    `F.cross_entropy(...)`/`F.*_loss(...)`、`nn.MSELoss()(...)` 的结果，对它们的算术运算，或被
    `.backward()` 过的张量。

    ## 为什么不好？
    损失张量带着它的自动求导图。把它加到累计值上（或存进列表），就把每次迭代的计算图挂到了一个比迭代活得更久的
    对象上，于是它们都无法释放：内存随每个 batch 增长，直到 epoch 结束，或进程内存耗尽。若损失从未反向传播
    （开着梯度做评估，或记录的辅助损失），所有保存的激活值都会留下：在 H200 上实测，对 MLP（1024→4096→10，
    batch 512）50 次迭代的损失求和，以张量累加时峰值为 409 MiB，使用 `.item()` 时为 24 MiB；在 CPU 上
    （`bench/cpu_loss_accumulation.py`，torch 2.13），50 次迭代后残留的计算图占 403 MiB，使用 `.item()`
    时为 0 MiB。在 `.backward()` 之后激活值已被释放，但累计值仍然需要梯度，
    其背后的自动求导节点链会随每次迭代的每个操作不断增长。PyTorch FAQ 把这个循环列为内存增长的头号原因。

    即使累计值之后只用于打印或记录日志，这仍然是泄漏。以下情况不报告：累加在 `torch.no_grad()`/
    `torch.inference_mode()` 下进行（或损失是在其中计算的）；累加器在循环内被重置；累加的值本身会被反向传播；
    或它从一个自身不做反向传播的循环中被返回（先把展开序列的各步损失相加、交给调用者
    做一次反向传播是有意为之）。从训练循环中返回的累计值仍会被报告。

    ## 示例
    ```python
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    ```

    ## 改为
    ```python
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    ```

    ## 修复安全性
    对 `+=` 和 `total = total + loss`，首选修复是加上 `.item()`。它是不安全的：累计值从张量变为 Python 浮点数，
    `.item()` 会等待 GPU，并且对多于一个元素的损失（`reduction="none"`）会报错。备选修复加上 `.detach()`，
    仍保留张量，是安全的。对 `append`，修复加上 `.detach()`（安全）：列表保存相同的值，但不再带计算图。

    ## 参考
    - [PyTorch FAQ：在训练循环中累积历史](https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory)
    - [`Tensor.item`](https://pytorch.org/docs/stable/generated/torch.Tensor.item.html)
    - [`Tensor.detach`](https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html)
    """

    code = "TDR103"
    name = "loss-accumulated-with-graph"
    severity = Severity.WARNING
    fix_safety = Applicability.UNSAFE

    VALID = (
        # A loss module that sums per-sample losses and returns their mean to be backpropagated.
        "import torch\nimport torch.nn.functional as F\n"
        "def ctc_cost(outputs, targets, n):\n    total = 0\n    for o, t in zip(outputs, targets):\n"
        "        total += F.ctc_loss(o, t, il, tl)\n    cost = total / n\n    return cost\n",
        "import torch\nfrom torch import nn\ncrit = nn.CrossEntropyLoss()\ntotal = 0.0\n"
        "for x, y in loader:\n"
        "    loss = crit(model(x), y)\n    loss.backward()\n    total += loss.item()\n",
        # Under no_grad, or the loss computed there.
        "import torch\nimport torch.nn.functional as F\nloss_sum = 0\n"
        "with torch.no_grad():\n"
        "    for x, y in val_loader:\n"
        "        loss_sum += F.cross_entropy(model(x), y)\n",
        "import torch\nimport torch.nn.functional as F\ntotal = 0\n"
        "for x, y in val_loader:\n"
        "    with torch.inference_mode():\n        loss = F.mse_loss(model(x), y)\n"
        "    total += loss\n",
        "import torch\nimport torch.nn.functional as F\n"
        "@torch.no_grad()\n"
        "def evaluate(model, loader):\n"
        "    losses = []\n"
        "    for x, y in loader:\n        losses.append(F.cross_entropy(model(x), y))\n"
        "    return torch.stack(losses).mean()\n",
        # Summing per-step losses of an unrolled sequence before one backward pass.
        "import torch\nimport torch.nn.functional as F\n"
        "for x, y in loader:\n"
        "    total = 0\n"
        "    for t in range(x.size(1)):\n"
        "        total += F.mse_loss(model(x[:, t]), y[:, t])\n"
        "    total.backward()\n    opt.step()\n",
        "import torch\nimport torch.nn.functional as F\n"
        "def rollout_loss(model, xs, ys):\n"
        "    loss = 0\n"
        "    for t in range(len(xs)):\n"
        "        loss = loss + F.l1_loss(model(xs[t]), ys[t])\n"
        "    return loss\n",
        "import torch\nimport torch.nn.functional as F\n"
        "losses = []\n"
        "for step in range(10):\n"
        "    losses.append(F.mse_loss(model(x), y))\n"
        "torch.stack(losses).sum().backward()\n",
        # Detached or converted.
        "import torch\nfrom torch import nn\ncrit = nn.MSELoss()\nhist = []\n"
        "for x, y in loader:\n"
        "    loss = crit(model(x), y)\n    loss.backward()\n"
        "    hist.append(loss.detach())\n    hist.append(float(loss))\n",
        # A local criterion that is not a torch loss, and a non-loss value.
        "import torch\n"
        "def criterion(a, b):\n    return abs(a - b)\n"
        "total = 0\n"
        "for x, y in loader:\n    total += criterion(x, y)\n",
        "import torch\ntotal = 0\n"
        "for x, y in loader:\n    out = model(x)\n    total += out.sum()\n",
        # Outside any repeating loop (a loop over a fixed collection of heads).
        "import torch\nimport torch.nn.functional as F\n"
        "total = 0\n"
        "for head in heads:\n    total += F.mse_loss(head(x), y)\n",
        Valid(
            "import torch\nimport torch.nn.functional as F\nrunning = 0.0\n"
            "for x, y in loader:\n    running += F.mse_loss(model(x), y).item()\n",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torch import nn\ncrit = nn.CrossEntropyLoss()\ntotal = 0.0\n"
            "for x, y in loader:\n"
            "    loss = crit(model(x), y)\n    loss.backward()\n    opt.step()\n"
            "    total += loss\n"
            "print(total / len(loader))\n",
            fixed="import torch\nfrom torch import nn\ncrit = nn.CrossEntropyLoss()\ntotal = 0.0\n"
            "for x, y in loader:\n"
            "    loss = crit(model(x), y)\n    loss.backward()\n    opt.step()\n"
            "    total += loss.item()\n"
            "print(total / len(loader))\n",
        ),
        # append: detach; functional alias; the loss times the batch size.
        Invalid(
            "import torch.nn.functional as Fn\n"
            "history = []\n"
            "for epoch in range(3):\n"
            "    for x, y in loader:\n"
            "        history.append(Fn.nll_loss(model(x), y) * x.size(0))\n",
            fixed="import torch.nn.functional as Fn\n"
            "history = []\n"
            "for epoch in range(3):\n"
            "    for x, y in loader:\n"
            "        history.append((Fn.nll_loss(model(x), y) * x.size(0)).detach())\n",
        ),
        # total = total + loss with an inline loss module; a backpropagated model output.
        Invalid(
            "import torch\nfrom torch.nn import MSELoss\n"
            "def train(model, loader):\n"
            "    running = torch.zeros(())\n"
            "    for x, y in loader:\n"
            "        running = running + MSELoss()(model(x), y)\n"
            "    print(running)\n",
            fixed="import torch\nfrom torch.nn import MSELoss\n"
            "def train(model, loader):\n"
            "    running = torch.zeros(())\n"
            "    for x, y in loader:\n"
            "        running = running + MSELoss()(model(x), y).item()\n"
            "    print(running)\n",
        ),
        Invalid(
            "import torch\n"
            "class Trainer:\n"
            "    def fit(self):\n"
            "        self.stats = {'loss': 0}\n"
            "        while True:\n"
            "            out = self.model(next(self.it))\n"
            "            loss = out.loss\n"
            "            loss.backward()\n"
            "            self.stats['loss'] += loss\n",
            fixed="import torch\n"
            "class Trainer:\n"
            "    def fit(self):\n"
            "        self.stats = {'loss': 0}\n"
            "        while True:\n"
            "            out = self.model(next(self.it))\n"
            "            loss = out.loss\n"
            "            loss.backward()\n"
            "            self.stats['loss'] += loss.item()\n",
        ),
        # The total is returned for logging from a loop that trains.
        Invalid(
            "import torch\nimport torch.nn.functional as F\n"
            "def train_epoch(model, loader, opt):\n"
            "    total = 0.0\n"
            "    for x, y in loader:\n"
            "        loss = F.cross_entropy(model(x), y)\n"
            "        opt.zero_grad()\n        loss.backward()\n        opt.step()\n"
            "        total += loss\n"
            "    return total / len(loader)\n",
            fixed="import torch\nimport torch.nn.functional as F\n"
            "def train_epoch(model, loader, opt):\n"
            "    total = 0.0\n"
            "    for x, y in loader:\n"
            "        loss = F.cross_entropy(model(x), y)\n"
            "        opt.zero_grad()\n        loss.backward()\n        opt.step()\n"
            "        total += loss.item()\n"
            "    return total / len(loader)\n",
        ),
        Invalid(
            "import torch\nimport torch.nn.functional as F\nrunning = 0.0\n"
            "for x, y in loader:\n    running += F.mse_loss(model(x), y)\n",
            fixed="import torch\nimport torch.nn.functional as F\nrunning = 0.0\n"
            "for x, y in loader:\n    running += F.mse_loss(model(x), y).item()\n",
            notebook=True,
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for node, acc, value in training.accumulations(sem):
            loop = training.iteration_loop(sem, node)
            name = training.accumulator_name(acc)
            if loop is None or name is None or training.grad_disabled(sem, node):
                continue
            if not training.holds_loss(sem, value):
                continue
            scope = sem.enclosing_function(node) or sem.tree
            # A loop that backpropagates each iteration cannot mean to differentiate the total
            # later; one that does not may be summing an unrolled sequence for its caller.
            trains = bool(training.backward_calls(sem, loop.node.body))
            if training.rebound_in(sem, name, loop.node.body, node) or training.escapes(
                sem, name, scope, returns=not trains
            ):
                continue
            if isinstance(node, ast.Call) and not _is_list(ctx, acc, scope):
                continue
            self._report(ctx, node, value)

    @staticmethod
    def _report(ctx: Context, node: ast.AST, value: ast.expr) -> None:
        text = ctx.segment(value)
        if not isinstance(value, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
            text = f"({text})"
        item = Fix(
            Text("Add `.item()`", "加上 `.item()`"),
            (fixes.replace(ctx.source, value, f"{text}.item()"),),
            Applicability.UNSAFE,
        )
        detach = Fix(
            Text("Add `.detach()`", "加上 `.detach()`"),
            (fixes.replace(ctx.source, value, f"{text}.detach()"),),
            Applicability.SAFE,
        )
        if isinstance(node, ast.Call):
            message = Text(
                "The loss is kept in a list with its autograd graph: every iteration's graph "
                "stays in memory; append `loss.detach()`",
                "损失连同其计算图被保存在列表中：每次迭代的计算图都留在内存里；请追加 `loss.detach()`",
            )
            choices = [detach]
        else:
            message = Text(
                "The loss is accumulated with its autograd graph: every iteration's graph "
                "stays in memory; add `loss.item()`",
                "累加损失时带上了它的计算图：每次迭代的计算图都留在内存里；请加上 `loss.item()`",
            )
            choices = [item, detach]
        ctx.report(value, message, fixes=choices)


def _is_list(ctx: Context, acc: ast.expr, scope: ast.AST) -> bool:
    """The receiver of ``append`` is built as a list (``[]``, ``list()``) in this file."""
    values: list[ast.expr | None] = []
    if isinstance(acc, ast.Name):
        binding = ctx.sem.lookup(acc.id, acc)
        if binding is None:
            return False
        owner = ctx.sem.scopes.get(binding.scope)
        values = [b.value for b in (owner.bindings.get(acc.id, []) if owner else [])]
    elif isinstance(acc, ast.Attribute) and isinstance(acc.value, ast.Name):
        cls = ctx.sem.enclosing_class(acc) if acc.value.id == "self" else None
        if cls is None:
            return False
        values = list(ctx.sem.self_attr_values.get((cls, acc.attr), []))
    return bool(values) and all(
        isinstance(v, ast.List | ast.ListComp)
        or (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "list")
        for v in values
    )

from __future__ import annotations

import ast

from ..core import fixes, training
from ..core.context import Context
from ..core.kinds import MODULE_SELF_METHODS
from ..core.model import Applicability, Edit, Fix, Severity, Text
from ..core.semantic import is_false, keyword
from .base import Invalid, Rule, Valid

# Calls inside the block that turn gradients back on or differentiate.
_AUTOGRAD_CALLS = frozenset(
    {
        "torch.enable_grad",
        "torch.set_grad_enabled",
        "torch.autograd.grad",
        "torch.autograd.backward",
    }
)
_AUTOGRAD_METHODS = frozenset({"backward", "requires_grad_", "register_hook", "retain_grad"})
# Methods that store their arguments in the receiver.
_STORING_METHODS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "add",
        "update",
        "setdefault",
        "put",
        "put_nowait",
        "__setitem__",
    }
)
# Module methods that create new parameter tensors (as inference tensors, in inference mode).
_REBUILDING_METHODS = MODULE_SELF_METHODS | {"apply", "register_buffer", "register_parameter"}


class PreferInferenceMode(Rule):
    """## What it does
    Suggests `torch.inference_mode()` for a `with torch.no_grad():` block whose results cannot
    reach autograd: the block has no `.backward()`, `.requires_grad_()`, `requires_grad=True`
    or `torch.enable_grad()`, and nothing it computes is kept after it — no name assigned in it
    is read later (except plain numbers such as `loss.item()`), nothing is stored into an
    attribute, a subscript or an outer container, nothing is returned or yielded from it, and
    no module is converted in it. Blocks that export or trace a model (`torch.onnx.export`,
    `torch.jit.trace`...) are left alone: the TorchScript-based ONNX exporter fails under
    inference mode.

    ## Why is this bad?
    `torch.inference_mode()` is `no_grad()` plus less bookkeeping: tensors created in it skip
    view tracking and version counters, which saves a little time per operation. The guide
    calls it the more efficient choice for inference. The gain is small: measured on an H200,
    a ResNet-50 forward pass at batch 256 took the same peak memory under both (2,548 MiB, 8.2x
    less than with gradients on) and the same time; on a CPU, `bench/cpu_inference_mode.py`
    (tiny MLP, batch 1, where per-operation overhead dominates) showed no difference beyond
    run-to-run noise on a shared machine. That is why the rule is off by default and only a
    hint.

    The risk runs the other way: a tensor created in inference mode can never enter autograd
    later (`RuntimeError: Inference tensors cannot be saved for backward`). The rule therefore
    stays silent whenever a result of the block may outlive it, which is the common case for
    targets computed under `no_grad()` and used in a loss (teacher outputs, target networks).

    ## Example
    ```python
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    ```

    ## Use instead
    ```python
    model.eval()
    correct = 0
    with torch.inference_mode():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    ```

    ## Fix safety
    The fix replaces `torch.no_grad()` with `torch.inference_mode()`. It is unsafe: a tensor
    created in the block that reaches autograd later through a path the rule cannot see (a
    helper that caches it, a module buffer written by a forward hook) raises `RuntimeError`,
    and in-place updates of inference tensors outside inference mode fail.

    ## References
    - [`torch.inference_mode`](https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html)
    - [Inference mode](https://pytorch.org/docs/stable/notes/autograd.html#inference-mode)
    """

    zh = """## 功能
    对于结果无法进入自动求导的 `with torch.no_grad():` 代码块，建议使用 `torch.inference_mode()`：代码块中
    没有 `.backward()`、`.requires_grad_()`、`requires_grad=True` 或 `torch.enable_grad()`，并且它计算的东西
    在块结束后都不会被保留——块内赋值的名字之后不再被读取（`loss.item()` 这类普通数值除外），没有存入属性、
    下标或外部容器，没有从块内返回或 yield，也没有在其中转换模块。导出或追踪模型的块（`torch.onnx.export`、`torch.jit.trace` 等）不报告：
    基于 TorchScript 的 ONNX 导出器在推理模式下会失败。

    ## 为什么不好？
    `torch.inference_mode()` 相当于 `no_grad()` 再减少一些记录工作：在其中创建的张量不做视图跟踪和版本计数，
    每个操作能省一点时间。指南称它在推理场景下效率更高。但收益很小：在 H200 上实测，ResNet-50 在 batch 256 下的
    前向传播在两种模式下峰值显存相同（2,548 MiB，比开启梯度时少 8.2 倍），耗时也相同；在 CPU 上，
    `bench/cpu_inference_mode.py`（极小的 MLP，batch 1，每个操作的开销占主导）在共享机器上测得的差异没有超出
    多次运行之间的噪声。因此本规则默认关闭，只作提示。

    风险却在另一边：在 inference mode 中创建的张量之后永远不能进入自动求导（`RuntimeError: Inference tensors
    cannot be saved for backward`）。因此只要代码块的结果可能在块结束后继续存在，本规则就不报告——这正是在
    `no_grad()` 下计算、随后用于损失的目标值（教师模型输出、目标网络）的常见情形。

    ## 示例
    ```python
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    ```

    ## 改为
    ```python
    model.eval()
    correct = 0
    with torch.inference_mode():
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    ```

    ## 修复安全性
    修复会把 `torch.no_grad()` 替换为 `torch.inference_mode()`。它是不安全的：在块中创建、之后通过本规则看不到的
    途径（缓存它的辅助函数、由 forward hook 写入的模块缓冲区）进入自动求导的张量会引发 `RuntimeError`，
    并且在 inference mode 之外原地修改 inference 张量也会失败。

    ## 参考
    - [`torch.inference_mode`](https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html)
    - [Inference mode](https://pytorch.org/docs/stable/notes/autograd.html#inference-mode)
    """

    code = "TDR106"
    name = "prefer-inference-mode"
    severity = Severity.HINT
    default = False
    fix_safety = Applicability.UNSAFE

    VALID = (
        # Exports and traces (the TorchScript-based ONNX exporter fails under inference mode).
        "import torch\nmodel = torch.nn.Linear(2, 2)\nwith torch.no_grad():\n"
        "    torch.onnx.export(model, torch.randn(1, 2), 'model.onnx')\n",
        "import torch\nfrom torch import onnx\ndef export(model, x):\n    with torch.no_grad():\n"
        "        onnx.export(model, x, 'model.onnx', do_constant_folding=True)\n",
        # A result is used after the block (a target for a loss).
        "import torch\nimport torch.nn.functional as F\n"
        "for x, y in loader:\n"
        "    with torch.no_grad():\n        target = teacher(x)\n"
        "    loss = F.mse_loss(student(x), target)\n    loss.backward()\n",
        # Stored into an outer list, an attribute, a subscript; returned.
        "import torch\npreds = []\n"
        "with torch.no_grad():\n"
        "    for x in loader:\n        preds.append(model(x))\n"
        "print(torch.cat(preds))\n",
        "import torch\n"
        "class EMA:\n"
        "    def update(self, x):\n"
        "        with torch.no_grad():\n            self.shadow = self.model(x)\n",
        "import torch\n"
        "def predict(model, x):\n"
        "    with torch.no_grad():\n        return model(x)\n",
        "import torch\nout = torch.empty(10, 3)\n"
        "with torch.no_grad():\n    for i, x in enumerate(loader):\n        out[i] = model(x)\n",
        # Gradients come back on inside, or a backward pass.
        "import torch\n"
        "with torch.no_grad():\n"
        "    with torch.enable_grad():\n        model(x).sum().backward()\n",
        "import torch\nwith torch.no_grad():\n    w = torch.zeros(3, requires_grad=True)\n",
        # Module conversion inside the block would create inference parameters.
        "import torch\nwith torch.no_grad():\n    model.half()\n",
        # Already inference mode; a no_grad that is not torch's.
        "import torch\nwith torch.inference_mode():\n    model(x)\n",
        "import torch\n"
        "from contextlib import nullcontext as no_grad\n"
        "with no_grad():\n    print(model(x).sum().item())\n",
        # A name assigned in the loop's body and read on the next iteration.
        "import torch\n"
        "for x in loader:\n"
        "    if prev is not None:\n        loss = (model(x) - prev).sum()\n"
        "    with torch.no_grad():\n        prev = model(x)\n",
        # A later notebook cell reads the result.
        Valid(
            "import torch\nwith torch.no_grad():\n    feats = backbone(x)\n"
            "head(feats).sum().backward()\n",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\n"
            "def accuracy(model, loader):\n"
            "    model.eval()\n"
            "    correct = total = 0\n"
            "    with torch.no_grad():\n"
            "        for x, y in loader:\n"
            "            pred = model(x).argmax(1)\n"
            "            correct += (pred == y).sum().item()\n"
            "            total += y.size(0)\n"
            "    return correct / total\n",
            fixed="import torch\n"
            "def accuracy(model, loader):\n"
            "    model.eval()\n"
            "    correct = total = 0\n"
            "    with torch.inference_mode():\n"
            "        for x, y in loader:\n"
            "            pred = model(x).argmax(1)\n"
            "            correct += (pred == y).sum().item()\n"
            "            total += y.size(0)\n"
            "    return correct / total\n",
        ),
        # The loop variables are bound again by a later loop before they are read.
        Invalid(
            "import torch\n"
            "model.eval()\n"
            "with torch.no_grad():\n"
            "    for x, y in val_loader:\n"
            "        print(model(x).argmax(1).eq(y).float().mean().item())\n"
            "model.train()\n"
            "for x, y in train_loader:\n"
            "    loss_fn(model(x), y).backward()\n",
            fixed="import torch\n"
            "model.eval()\n"
            "with torch.inference_mode():\n"
            "    for x, y in val_loader:\n"
            "        print(model(x).argmax(1).eq(y).float().mean().item())\n"
            "model.train()\n"
            "for x, y in train_loader:\n"
            "    loss_fn(model(x), y).backward()\n",
        ),
        # Imported name: the fix spells it through the torch module.
        Invalid(
            "import torch\nfrom torch import no_grad\n"
            "with no_grad():\n    print(model(x).mean().item())\n",
            fixed="import torch\nfrom torch import no_grad\n"
            "with torch.inference_mode():\n    print(model(x).mean().item())\n",
        ),
        Invalid(
            "import torch as T\n"
            "with T.no_grad(), open('log.txt', 'w') as f:\n"
            "    f.write(str(float(model(x).sum())))\n",
            fixed="import torch as T\n"
            "with T.inference_mode(), open('log.txt', 'w') as f:\n"
            "    f.write(str(float(model(x).sum())))\n",
            notebook=True,
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for with_ in sem.withs:
            item = next(
                (
                    i
                    for i in with_.items
                    if isinstance(i.context_expr, ast.Call)
                    and ctx.qualname(i.context_expr.func) == "torch.no_grad"
                    and i.optional_vars is None
                ),
                None,
            )
            if item is None or self._keeps_results(ctx, with_):
                continue
            call = item.context_expr
            assert isinstance(call, ast.Call)
            ctx.report(
                call,
                Text(
                    "Nothing computed under `torch.no_grad()` here reaches autograd: "
                    "`torch.inference_mode()` does the same with less overhead",
                    "此处 `torch.no_grad()` 下计算的结果都不会进入自动求导："
                    "`torch.inference_mode()` 作用相同且开销更小",
                ),
                fixes=[_to_inference_mode(ctx, call)],
            )

    @staticmethod
    def _keeps_results(ctx: Context, with_: ast.With | ast.AsyncWith) -> bool:
        """Whether anything made in the block may outlive it or enter autograd."""
        sem = ctx.sem
        assigned: set[str] = set()
        for node in sem.walk_body(with_.body):
            if isinstance(node, ast.Return | ast.Yield | ast.YieldFrom | ast.Global | ast.Nonlocal):
                return True
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.NamedExpr):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                plain = training.is_plain_value(node.value)
                for target in targets:
                    if isinstance(target, ast.Attribute | ast.Subscript) and not plain:
                        return True
                    if not plain:
                        assigned |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            elif isinstance(node, ast.For | ast.AsyncFor | ast.withitem | ast.comprehension):
                bound = node.optional_vars if isinstance(node, ast.withitem) else node.target
                if bound is not None:
                    assigned |= {n.id for n in ast.walk(bound) if isinstance(n, ast.Name)}
            elif isinstance(node, ast.Call) and _call_keeps(ctx, node, with_):
                return True
        return any(training.read_later(sem, name, with_) for name in assigned)


def _call_keeps(ctx: Context, call: ast.Call, with_: ast.AST) -> bool:
    """Whether a call in the block differentiates, turns gradients on, converts a module or
    stores a tensor into a container read after the block."""
    func = call.func
    qual = ctx.qualname(func)
    if qual in _AUTOGRAD_CALLS or qual == "torch.nn.Parameter":
        return True
    if qual is not None and qual.startswith(("torch.onnx.", "torch.jit.")):
        return True  # the TorchScript-based ONNX exporter fails under inference mode
    requires = keyword(call, "requires_grad")
    if requires is not None and not is_false(requires.value):
        return True
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr in _AUTOGRAD_METHODS:
        return True
    if func.attr in _REBUILDING_METHODS and isinstance(ctx.sem.parent(call), ast.Expr):
        return True  # model.half(), model.to(device): new parameter tensors
    if func.attr in _STORING_METHODS and not all(
        training.is_plain_value(a) for a in [*call.args, *(k.value for k in call.keywords)]
    ):
        receiver = func.value
        while isinstance(receiver, ast.Attribute | ast.Subscript):
            receiver = receiver.value
        return not isinstance(receiver, ast.Name) or training.read_later(
            ctx.sem, receiver.id, with_
        )
    return False


def _to_inference_mode(ctx: Context, call: ast.Call) -> Fix | None:
    func = call.func
    edits: list[Edit] = []
    if isinstance(func, ast.Attribute) and ctx.qualname(func.value) == "torch":
        text = f"{ctx.segment(func.value)}.inference_mode()"
    else:
        ref = fixes.module_ref(ctx.sem, ctx.source, "torch")
        if ref is None:
            return None
        name, edits = ref
        text = f"{name}.inference_mode()"
    return Fix(
        Text("Use `torch.inference_mode()`", "改用 `torch.inference_mode()`"),
        (fixes.replace(ctx.source, call, text), *edits),
        Applicability.UNSAFE,
    )

from __future__ import annotations

import ast

from ..engine import fixes
from ..engine.context import Context
from ..engine.model import Applicability, Fix, Text
from ..engine.semantic import has_star_kwargs, keyword
from .base import Invalid, Rule, Valid

CHECKPOINT = "torch.utils.checkpoint.checkpoint"
CHECKPOINT_SEQUENTIAL = "torch.utils.checkpoint.checkpoint_sequential"


class CheckpointWithoutUseReentrant(Rule):
    """## What it does
    Checks for `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)` calls
    that do not pass `use_reentrant=`.

    ## Why is this bad?
    Without `use_reentrant`, PyTorch 2.13 still falls back to the old reentrant implementation
    and warns on every call: `torch.utils.checkpoint: the use_reentrant parameter should be
    passed explicitly. ... use_reentrant=False is recommended, but if you need to preserve the
    current default behavior, you can pass use_reentrant=True.` The warning announced an
    exception "starting in PyTorch 2.9"; as of 2.13 the call still only warns, so code that
    relies on the default may start failing in a future release.

    The reentrant variant has real limits: it needs at least one input with
    `requires_grad=True` (otherwise the checkpointed layers get no gradients and only a
    warning, `None of the inputs have requires_grad=True. Gradients will be None`, says so: a
    classic trap when checkpointing the first block of a model whose inputs are data), it
    supports only `backward()` without `inputs=` (not `torch.autograd.grad`), and it rejects
    keyword arguments for the wrapped function. `use_reentrant=False` has none of these limits
    and stops recomputation early.

    The guide wraps modules in `torch.utils.checkpoint` without choosing a variant; PyTorch now
    asks for an explicit choice (verified on 2.13: the call warns), and `use_reentrant=False`
    is the one its documentation recommends. The guide's warning about dropout is handled by
    `preserve_rng_state=True`, the default in both variants.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    def forward(self, x):
        return checkpoint(self.block, x)
    ```

    ## Use instead
    ```python
    from torch.utils.checkpoint import checkpoint

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
    ```

    ## Fix safety
    The fix adds `use_reentrant=False`. It is unsafe: the non-reentrant variant records the
    autograd graph differently, so layers that got no gradient before (inputs without
    `requires_grad`) start training, and hooks or custom autograd code inside the block may
    behave differently. Pass `use_reentrant=True` instead if you must keep the old behaviour.
    Calls that pass `**kwargs` are not reported: the dictionary may already hold
    `use_reentrant`.

    ## References
    - [`torch.utils.checkpoint`](https://pytorch.org/docs/stable/checkpoint.html)
    """

    zh = """## 功能
    检查未传入 `use_reentrant=` 的 `torch.utils.checkpoint.checkpoint(...)` 与
    `checkpoint_sequential(...)` 调用。

    ## 为什么不好？
    不传 `use_reentrant` 时，PyTorch 2.13 仍会退回旧的可重入（reentrant）实现，并在每次调用时警告：
    `torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. ...
    use_reentrant=False is recommended, but if you need to preserve the current default
    behavior, you can pass use_reentrant=True.` 该警告曾预告“从 PyTorch 2.9 起”会抛出异常；
    到 2.13 为止仍只是警告，因此依赖默认值的代码可能在将来的版本中报错。

    可重入实现有实际限制：至少要有一个输入 `requires_grad=True`（否则被检查点包住的层得不到梯度，只有一条警告
    `None of the inputs have requires_grad=True. Gradients will be None` 提示；对模型第一块做检查点、
    输入只是数据时这是典型陷阱）；只支持不带 `inputs=` 的 `backward()`（不支持
    `torch.autograd.grad`）；不接受传给被包函数的关键字参数。`use_reentrant=False` 没有这些限制，
    并且会提前停止重计算。

    指南只说用 `torch.utils.checkpoint` 把模块包一层，没有选择实现；如今 PyTorch 要求显式选择
    （已在 2.13 上核实：调用会发出警告），其文档推荐 `use_reentrant=False`。指南提到的 dropout 随机状态问题由 `preserve_rng_state=True`
    处理，这在两种实现中都是默认值。

    ## 示例
    ```python
    from torch.utils.checkpoint import checkpoint

    def forward(self, x):
        return checkpoint(self.block, x)
    ```

    ## 改为
    ```python
    from torch.utils.checkpoint import checkpoint

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
    ```

    ## 修复安全性
    修复会添加 `use_reentrant=False`。它是不安全的：非可重入实现以不同方式记录计算图，之前得不到梯度的层
    （输入不需要梯度时）会开始训练，块内的钩子或自定义 autograd 代码也可能表现不同。若必须保持旧行为，
    请改传 `use_reentrant=True`。传入 `**kwargs` 的调用不会被报告：该字典可能已经包含 `use_reentrant`。

    ## 参考
    - [`torch.utils.checkpoint`](https://pytorch.org/docs/stable/checkpoint.html)
    """

    code = "TDR405"
    name = "checkpoint-without-use-reentrant"
    fix_safety = Applicability.UNSAFE
    aliases = ("TOR003",)

    VALID = (
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(block, x, use_reentrant=False)",
        "import torch.utils.checkpoint\ny = torch.utils.checkpoint.checkpoint(f, x, use_reentrant=True)",
        "import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
        "y = checkpoint_sequential(model, 2, x, use_reentrant=False)",
        # use_reentrant passed positionally to checkpoint_sequential.
        "import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
        "y = checkpoint_sequential(model, 2, x, False)",
        # **kwargs may already hold use_reentrant.
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(block, x, **ckpt_kwargs)",
        # A local function named checkpoint (e.g. saving a training checkpoint).
        "import torch\ndef checkpoint(model, path):\n    torch.save(model.state_dict(), path)\n"
        "checkpoint(model, 'm.pt')",
        # A parameter shadowing the import.
        "from torch.utils.checkpoint import checkpoint\n"
        "def run(checkpoint, x):\n    return checkpoint(x)",
        # Other libraries' checkpoint helpers.
        "import torch\nimport deepspeed\ny = deepspeed.checkpointing.checkpoint(block, x)",
        Valid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(block, x, use_reentrant=False)",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)",
            fixed="import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(block, x, use_reentrant=False)",
        ),
        Invalid(
            "import torch.utils.checkpoint\ny = torch.utils.checkpoint.checkpoint(f, x, y)",
            fixed="import torch.utils.checkpoint\n"
            "y = torch.utils.checkpoint.checkpoint(f, x, y, use_reentrant=False)",
        ),
        Invalid(
            "import torch\nimport torch.utils.checkpoint as cp\n"
            "def forward(self, x):\n    return cp.checkpoint(self.layer, x, preserve_rng_state=False)\n",
            fixed="import torch\nimport torch.utils.checkpoint as cp\n"
            "def forward(self, x):\n"
            "    return cp.checkpoint(self.layer, x, preserve_rng_state=False, use_reentrant=False)\n",
        ),
        Invalid(
            "from torch.utils.checkpoint import checkpoint as ckpt\ny = ckpt(block, *inputs)",
            fixed="from torch.utils.checkpoint import checkpoint as ckpt\n"
            "y = ckpt(block, *inputs, use_reentrant=False)",
        ),
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
            "y = checkpoint_sequential(model.layers, 4, x)",
            fixed="import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
            "y = checkpoint_sequential(model.layers, 4, x, use_reentrant=False)",
        ),
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)",
            fixed="import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(block, x, use_reentrant=False)",
            notebook=True,
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to(CHECKPOINT, CHECKPOINT_SEQUENTIAL):
            if keyword(call, "use_reentrant") or has_star_kwargs(call):
                continue
            sequential = ctx.qualname(call.func) == CHECKPOINT_SEQUENTIAL
            if sequential and (
                len(call.args) >= 4 or any(isinstance(a, ast.Starred) for a in call.args)
            ):
                continue
            fix = Fix(
                Text("Add `use_reentrant=False`", "添加 `use_reentrant=False`"),
                (fixes.add_keyword(ctx.source, call, "use_reentrant=False"),),
                Applicability.UNSAFE,
            )
            name = "checkpoint_sequential" if sequential else "checkpoint"
            ctx.report(
                call,
                Text(
                    f"`{name}` without `use_reentrant=` warns and silently uses the reentrant "
                    "variant; pass `use_reentrant=False` (recommended) or `True` explicitly",
                    f"`{name}` 未指定 `use_reentrant=`：会发出警告并默默使用可重入实现；"
                    "请显式传入 `use_reentrant=False`（推荐）或 `True`",
                ),
                fixes=[fix],
            )

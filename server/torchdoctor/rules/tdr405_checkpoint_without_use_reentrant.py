from __future__ import annotations

import ast

from ..core import arguments, fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import dotted
from .base import Invalid, Rule, Valid

CHECKPOINT = arguments.CHECKPOINT
CHECKPOINT_SEQUENTIAL = arguments.CHECKPOINT_SEQUENTIAL
KEY = "use_reentrant"


class CheckpointWithoutUseReentrant(Rule):
    """## What it does
    Checks for `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)` calls
    that do not pass `use_reentrant=`.

    A call that passes `**kwargs` is reported too, with a lower severity (information), unless
    the code shows that the dictionary holds `use_reentrant`: a dict display or `dict(...)` call
    with that key, or a name that an assignment (`kw = {...}`, `kw["use_reentrant"] = ...`) or an
    update (`kw.setdefault(...)`, `kw.update(use_reentrant=...)`) in its scope gives the key.

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
    Calls that pass `**kwargs` get no fix: if the dictionary already holds `use_reentrant`, an
    added keyword would make the call fail with `got multiple values for keyword argument`. Add
    the key where the dictionary is built instead.

    ## References
    - [`torch.utils.checkpoint`](https://pytorch.org/docs/stable/checkpoint.html)
    """

    zh = """## 功能
    检查未传入 `use_reentrant=` 的 `torch.utils.checkpoint.checkpoint(...)` 与
    `checkpoint_sequential(...)` 调用。

    传入 `**kwargs` 的调用也会被报告，但严重级别较低（信息），除非代码表明该字典包含 `use_reentrant`：
    带有该键的字典字面量或 `dict(...)` 调用，或者某个名字在其作用域内经赋值（`kw = {...}`、
    `kw["use_reentrant"] = ...`）或更新（`kw.setdefault(...)`、`kw.update(use_reentrant=...)`）
    获得了该键。

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
    请改传 `use_reentrant=True`。传入 `**kwargs` 的调用没有修复：若该字典已包含 `use_reentrant`，
    再添加关键字参数会使调用失败（`got multiple values for keyword argument`）。请在构建该字典的地方添加这个键。

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
        # The ** operand visibly holds use_reentrant.
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(block, x, **{'use_reentrant': False})",
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(block, x, **dict(use_reentrant=False, preserve_rng_state=False))",
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "kw = {'use_reentrant': False}\ny = checkpoint(block, x, **kw)",
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "def run(block, x, **kwargs):\n    kwargs['use_reentrant'] = False\n"
        "    return checkpoint(block, x, **kwargs)",
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "def run(block, x, **kwargs):\n    kwargs.setdefault('use_reentrant', False)\n"
        "    return checkpoint(block, x, **kwargs)",
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "def run(block, x, **kwargs):\n    kwargs.update(use_reentrant=False)\n"
        "    return checkpoint(block, x, **kwargs)",
        # Only on versions that have the parameter (a common guard).
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "ckpt_kwargs = {'use_reentrant': False} if new_torch else {}\n"
        "def forward(self, x):\n    return checkpoint(self.block, x, **ckpt_kwargs)",
        # Built in __init__, used in forward.
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.ckpt = {'preserve_rng_state': True}\n"
        "        self.ckpt.update({'use_reentrant': False})\n"
        "    def forward(self, x):\n        return checkpoint(self.block, x, **self.ckpt)",
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
        # `use_reentrant` is checkpoint_sequential's fourth parameter.
        "from torch.utils.checkpoint import checkpoint_sequential\n"
        "y = checkpoint_sequential(fs, 2, x, False)\n",
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)",
            fixed="import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(block, x, use_reentrant=False)",
            lines=(3,),
        ),
        Invalid(
            "import torch.utils.checkpoint\ny = torch.utils.checkpoint.checkpoint(f, x, y)",
            fixed="import torch.utils.checkpoint\n"
            "y = torch.utils.checkpoint.checkpoint(f, x, y, use_reentrant=False)",
            lines=(2,),
        ),
        Invalid(
            "import torch\nimport torch.utils.checkpoint as cp\n"
            "def forward(self, x):\n    return cp.checkpoint(self.layer, x, preserve_rng_state=False)\n",
            fixed="import torch\nimport torch.utils.checkpoint as cp\n"
            "def forward(self, x):\n"
            "    return cp.checkpoint(self.layer, x, preserve_rng_state=False, use_reentrant=False)\n",
            lines=(4,),
        ),
        Invalid(
            "from torch.utils.checkpoint import checkpoint as ckpt\ny = ckpt(block, *inputs)",
            fixed="from torch.utils.checkpoint import checkpoint as ckpt\n"
            "y = ckpt(block, *inputs, use_reentrant=False)",
            lines=(2,),
        ),
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
            "y = checkpoint_sequential(model.layers, 4, x)",
            fixed="import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
            "y = checkpoint_sequential(model.layers, 4, x, use_reentrant=False)",
            lines=(3,),
        ),
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)",
            fixed="import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(block, x, use_reentrant=False)",
            notebook=True,
            lines=(3,),
        ),
        # **kwargs that may lack the key: reported without a fix.
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "def forward(block, x, **kwargs):\n    return checkpoint(block, x, **kwargs)",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch.utils.checkpoint as cp\n"
            "kw = {'preserve_rng_state': False}\ny = cp.checkpoint(block, x, **kw)",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
            "def run(model, x, **kw):\n"
            "    kw['preserve_rng_state'] = False\n"
            "    return checkpoint_sequential(model, 2, x, **kw)",
            fixed=None,
            lines=(5,),
        ),
        # The key is set on another dictionary with the same name in another function.
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "def a(**kw):\n    kw['use_reentrant'] = False\n    return kw\n"
            "def b(block, x, **kw):\n    return checkpoint(block, x, **kw)",
            fixed=None,
            lines=(7,),
        ),
        # checkpoint's extra positional arguments go to the function, not to `use_reentrant`.
        Invalid(
            "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x, False)\n",
            fixed="from torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(f, x, False, use_reentrant=False)\n",
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to(CHECKPOINT, CHECKPOINT_SEQUENTIAL):
            sequential = ctx.qualname(call.func) == CHECKPOINT_SEQUENTIAL
            bound = arguments.bind(call, CHECKPOINT_SEQUENTIAL if sequential else CHECKPOINT)
            if bound.value("use_reentrant") is not None or "use_reentrant" in bound.maybe:
                continue  # given, or a `*args` spread reaches its position
            name = "checkpoint_sequential" if sequential else "checkpoint"
            spread = [kw.value for kw in call.keywords if kw.arg is None]
            if spread:
                if any(_carries(ctx, value, call) for value in spread):
                    continue
                # The dictionary may hold the key after all: no fix (adding the keyword would
                # then raise "got multiple values"), and a lower severity.
                label = dotted(spread[0])
                operand = f"`**{label}`" if label else "the `**` argument"
                operand_zh = f"`**{label}`" if label else "`**` 参数"
                ctx.report(
                    call,
                    Text(
                        f"`{name}` gets no explicit `use_reentrant=`; if {operand} does not carry "
                        "it, PyTorch warns on every call and uses the reentrant variant",
                        f"`{name}` 未显式传入 `use_reentrant=`；若 {operand_zh} 中也没有，"
                        "PyTorch 会在每次调用时警告并使用可重入实现",
                    ),
                    severity=Severity.INFO,
                )
                continue
            fix = Fix(
                Text("Add `use_reentrant=False`", "添加 `use_reentrant=False`"),
                (fixes.add_keyword(ctx.source, call, "use_reentrant=False"),),
                Applicability.UNSAFE,
            )
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


def _carries(ctx: Context, expr: ast.expr, at: ast.AST, depth: int = 0) -> bool:
    """Whether the ``**`` operand ``expr`` can be seen to hold a ``use_reentrant`` key: a dict
    display or ``dict(...)`` call with it, or a name (or ``self.attr``) that an assignment or an
    update in its scope gives it (anywhere in that scope: unsure means "holds it")."""
    if depth > 4:
        return False
    if isinstance(expr, ast.IfExp):
        return _carries(ctx, expr.body, at, depth + 1) or _carries(ctx, expr.orelse, at, depth + 1)
    if isinstance(expr, ast.Dict):
        return any(
            _is_key(k) or (k is None and _carries(ctx, v, at, depth + 1))
            for k, v in zip(expr.keys, expr.values, strict=True)
        )
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Name) and func.id == "dict" and ctx.sem.lookup("dict", at) is None:
            return any(
                kw.arg == KEY or (kw.arg is None and _carries(ctx, kw.value, at, depth + 1))
                for kw in expr.keywords
            ) or any(_carries(ctx, a, at, depth + 1) for a in expr.args)
        return False
    target = dotted(expr)
    if target is None:
        return False
    if isinstance(expr, ast.Name):
        binding = ctx.sem.lookup(expr.id, at)
        scope = binding.scope if binding is not None else ctx.sem.scope_of(at).node
    else:
        scope = ctx.tree
    for node in ctx.sem.walk(scope, into_functions=True):
        if _sets_key(ctx, node, target, at, depth):
            return True
    return False


def _sets_key(ctx: Context, node: ast.AST, target: str, at: ast.AST, depth: int) -> bool:
    """Whether ``node`` gives the dictionary named ``target`` a ``use_reentrant`` key."""
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and dotted(t.value) == target and _is_key(t.slice):
                return True  # kw["use_reentrant"] = ...
            if dotted(t) == target and node.value is not None:
                if _carries(ctx, node.value, at, depth + 1):
                    return True  # kw = {...}, kw |= {...}
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and dotted(node.func.value) == target
    ):
        method, args = node.func.attr, node.args
        if method in ("setdefault", "__setitem__"):
            return bool(args) and _is_key(args[0])
        if method == "update":
            return any(kw.arg == KEY for kw in node.keywords) or any(
                _carries(ctx, a, at, depth + 1) for a in args
            )
    return False


def _is_key(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value == KEY

from __future__ import annotations

import ast

from ..core import arguments, graphs
from ..core.context import Context
from ..core.model import Severity, Text
from .base import Invalid, Rule, Valid


class JitTraceDataDependent(Rule):
    """## What it does
    Checks for `torch.jit.trace(m, ...)` where `m` is an instance of a class defined in the same
    file (or a function of the file) whose `forward` (or body) branches on a tensor value:
    `if x.sum() > 0:`, `while mask.any():`, `a if torch.equal(x, y) else b`,
    `if x.max().item() > 1:`.

    ## Why is this bad?
    Tracing runs the model once with the example input and records the tensor operations it
    executes; Python control flow is not recorded. The branch taken by the example input is
    baked into the traced module, which then silently computes the same path for every input.
    Verified on 2.13: a `forward` returning `x + 1` when `x.sum() > 0` and `x - 1` otherwise,
    traced with `torch.ones(3)`, returns `0.` instead of `-2.` for `-torch.ones(3)`. The only sign
    is a `TracerWarning: Converting a tensor to a Python boolean might cause the trace to be
    incorrect`, easy to miss among other warnings. The guide notes that exporting turns a dynamic
    graph into a static one, so dynamic control flow may not be exported correctly.

    The guide presents TorchScript (scripting or tracing) as one of two export paths; in PyTorch
    2.13 `torch.jit.trace` itself warns "`torch.jit.trace` is deprecated. Please switch to
    `torch.compile` or `torch.export`." `torch.export` with `torch.cond` captures both branches,
    and fails loudly on a data-dependent Python branch instead of picking one.

    Branches on shapes are also frozen by tracing, but they are not reported: models commonly
    branch on shapes that are fixed in deployment. Input checks (`if torch.isnan(x).any():
    raise ...`, or a branch that only warns or logs) are not reported either: the traced path
    is the normal one, only the check is lost. Branches under `if torch.jit.is_tracing():` or in
    training-only code (`if self.training:`; models are traced in eval mode), and classes or
    functions that are never traced are not reported.

    ## Example
    ```python
    class Gate(nn.Module):
        def forward(self, x):
            if x.mean() > 0:
                return self.a(x)
            return self.b(x)

    traced = torch.jit.trace(Gate(), (example,))
    ```

    ## Use instead
    ```python
    class Gate(nn.Module):
        def forward(self, x):
            return torch.cond(x.mean() > 0, self.a, self.b, (x,))

    ep = torch.export.export(Gate(), (example,))
    ```

    ## Fix safety
    No fix is offered: the rewrite depends on what the branches do (`torch.where` for
    element-wise choices, `torch.cond` for different computations).

    ## References
    - [`torch.jit.trace`](https://pytorch.org/docs/stable/generated/torch.jit.trace.html)
    - [`torch.export`](https://pytorch.org/docs/stable/export.html)
    - [`torch.cond`](https://pytorch.org/docs/stable/generated/torch.cond.html)
    """

    code = "TDR204"
    name = "jit-trace-data-dependent"
    severity = Severity.WARNING

    VALID = (
        # No tensor-dependent control flow: shapes, flags, None checks.
        "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x, y=None):\n"
        "        if x.dim() == 3:\n            x = x.unsqueeze(0)\n"
        "        if y is not None and self.training:\n            x = x + y\n"
        "        return torch.where(x.sum() > 0, x, -x)\n"
        "traced = torch.jit.trace(Net(), (torch.randn(2, 3),))\n",
        # The class with the branch is never traced.
        "import torch\nclass Gate(torch.nn.Module):\n    def forward(self, x):\n"
        "        if x.mean() > 0:\n            return x\n        return -x\n"
        "class Plain(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n"
        "gate = Gate()\ntraced = torch.jit.trace(Plain(), (x,))\n",
        # Scripted, not traced; exported with torch.export.
        "import torch\nclass Gate(torch.nn.Module):\n    def forward(self, x):\n"
        "        if x.mean() > 0:\n            return x\n        return -x\n"
        "scripted = torch.jit.script(Gate())\nep = torch.export.export(Gate(), (x,))\n",
        # A trace-aware branch.
        "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        if not torch.jit.is_tracing():\n            if x.isnan().any():\n"
        "                raise ValueError('nan')\n        return x + 1\n"
        "traced = torch.jit.trace(Net(), (x,))\n",
        # An input check: the traced path is the normal one.
        "import torch\nimport warnings\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        if torch.isnan(x).any():\n            raise ValueError('nan input')\n"
        "        if x.abs().max() > 1e4:\n            warnings.warn('large input')\n"
        "        return x + 1\ntraced = torch.jit.trace(Net(), (x,))\n",
        # Training-only code is not traced (models are traced in eval mode).
        "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        if self.training and x.sum() > 0:\n            x = x * 2\n"
        "        if not self.training:\n            return x\n"
        "        else:\n            if x.max() > 1:\n                x = x / 2\n"
        "        return x\ntraced = torch.jit.trace(Net().eval(), (x,))\n",
        # A local function named trace.
        "import torch\nclass Gate(torch.nn.Module):\n    def forward(self, x):\n"
        "        if x.mean() > 0:\n            return x\n        return -x\n"
        "def trace(model, inputs):\n    return model(*inputs)\nout = trace(Gate(), (x,))\n",
        # A model from elsewhere; another library's trace.
        "import torch\nfrom models import Gate\ntraced = torch.jit.trace(Gate(), (x,))\n",
        "import torch\nimport jax\nclass Gate:\n    def forward(self, x):\n"
        "        if x.sum() > 0:\n            return x\n        return -x\n"
        "out = jax.jit(Gate().forward)\n",
        Valid(
            "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x.relu()\ntraced = torch.jit.trace(Net(), (x,))\n",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nimport torch.nn as nn\nclass Gate(nn.Module):\n"
            "    def forward(self, x):\n        if x.mean() > 0:\n            return x * 2\n"
            "        return -x\nmodel = Gate().eval()\ntraced = torch.jit.trace(model, (x,))\n",
            fixed=None,
            lines=(9,),
        ),
        # Alias, inherited forward, .item() in the test.
        Invalid(
            "import torch\nfrom torch.jit import trace\nclass Base(torch.nn.Module):\n"
            "    def forward(self, x):\n        while x.abs().max().item() > 1:\n"
            "            x = x / 2\n        return x\nclass Net(Base):\n    pass\n"
            "t = trace(Net(), example_inputs=(x,))\n",
            fixed=None,
            lines=(10,),
        ),
        # A traced function.
        Invalid(
            "import torch\ndef f(x, y):\n    return x if torch.equal(x, y) else y\n"
            "tf = torch.jit.trace(f, (a, b))\n",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch\nclass Gate(torch.nn.Module):\n    def forward(self, x):\n"
            "        if x.any():\n            return x\n        return -x\n"
            "traced = torch.jit.trace(Gate(), (x,))\n",
            fixed=None,
            notebook=True,
            lines=(7,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for call in sem.calls_to(graphs.JIT_TRACE):
            target = arguments.value(call, arguments.JIT_TRACE, "func")
            funcs: list[tuple[str, graphs.Function]] = []
            local = sem.local_function(target) if isinstance(target, ast.Name) else None
            if local is not None:
                funcs.append((local.name, local))
            else:
                for cls in graphs.instance_classes(sem, target):
                    forward = graphs.class_method(sem, cls, "forward")
                    if forward is not None:
                        funcs.append((f"{cls.name}.forward", forward))
            for name, func in funcs:
                branches = [
                    (test, c)
                    for test, c in graphs.data_dependent_branches(sem, func)
                    if not _validation(sem.parent(test))
                    and not graphs.training_only(sem, test, func)
                ]
                if not branches:
                    continue
                test = branches[0][0]
                ctx.report(
                    call,
                    Text(
                        f"`torch.jit.trace` records only the branch the example input takes: "
                        f"`{name}` branches on a tensor value (`{ctx.segment(test)}`); use "
                        "`torch.export` with `torch.cond`",
                        f"`torch.jit.trace` 只记录示例输入走过的分支：`{name}` 基于张量值分支"
                        f"（`{ctx.segment(test)}`）；请改用 `torch.export` 并配合 `torch.cond`",
                    ),
                    related=[
                        ctx.related(t, Text("branch on a tensor value", "基于张量值的分支"))
                        for t, _call in branches
                    ],
                )
                break


def _validation(node: ast.AST | None) -> bool:
    """``if torch.isnan(x).any(): raise ...`` (or only warns/logs): an input check whose traced
    path is the normal one."""
    if not isinstance(node, ast.If) or node.orelse:
        return False
    return all(
        isinstance(stmt, ast.Raise)
        or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call))
        for stmt in node.body
    ) and any(isinstance(stmt, ast.Raise) or _warns(stmt) for stmt in node.body)


def _warns(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    return name in ("warn", "warning", "error", "print", "info", "debug")

from __future__ import annotations

import ast

from ..core import fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .api_table import spell
from .base import Invalid, Rule, Valid


def is_one(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Constant) and type(expr.value) in (int, float) and expr.value == 1


class LogOnePlus(Rule):
    """## What it does
    Checks for `torch.log(1 + x)` and `torch.log(x + 1)`.

    ## Why is this bad?
    For small `x`, `1 + x` rounds away most of `x`'s digits before the logarithm is taken: in
    float32, `torch.log(1 + 1e-8)` is exactly `0`. `torch.log1p(x)` computes the same value
    without forming `1 + x` and keeps full precision; it is one kernel instead of two.

    ## Example
    ```python
    y = torch.log(1 + x)
    ```

    ## Use instead
    ```python
    y = torch.log1p(x)
    ```

    ## Fix safety
    The fix is unsafe only in the sense that results change in their last bits (they become
    more accurate); check tests that compare exact values.

    ## References
    - [`torch.log1p`](https://pytorch.org/docs/stable/generated/torch.log1p.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR106)
    """

    code = "TDR808"
    name = "log-one-plus"
    severity = Severity.INFO
    fix_safety = Applicability.UNSAFE
    aliases = ("TOR106",)

    VALID = (
        "import torch\ny = torch.log1p(x)",
        "import torch\ny = torch.log(2 + x)",
        "import torch\ny = torch.log(1 - x)",
        "import math\nimport torch\ny = math.log(1 + x)",
        "import numpy as np\nimport torch\ny = np.log(1 + x)",
        Valid("import torch\ny = torch.log1p(x)\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\ny = torch.log(1 + x)",
            fixed="import torch\ny = torch.log1p(x)",
            lines=(2,),
        ),
        Invalid(
            "import torch as T\ny = T.log(x.exp() + 1.0)",
            fixed="import torch as T\ny = T.log1p(x.exp())",
            lines=(2,),
        ),
        Invalid(
            "from torch import log\ny = log(1 + a * b)",
            fixed="import torch\nfrom torch import log\ny = torch.log1p(a * b)",
            lines=(2,),
        ),
        Invalid(
            "import torch\ny = torch.log(1 + x)\n",
            fixed="import torch\ny = torch.log1p(x)\n",
            notebook=True,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to("torch.log"):
            if len(call.args) != 1 or call.keywords:
                continue
            arg = call.args[0]
            if not (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add)):
                continue
            if is_one(arg.left):
                other = arg.right
            elif is_one(arg.right):
                other = arg.left
            else:
                continue
            fix = None
            spelled = spell(ctx, call.func, "torch.log1p")
            if spelled is not None:
                text, edits = spelled
                fix = Fix(
                    Text("Replace with `torch.log1p`", "替换为 `torch.log1p`"),
                    (fixes.replace(ctx.source, call, f"{text}({ctx.segment(other)})"), *edits),
                    Applicability.UNSAFE,
                )
            ctx.report(
                call,
                Text(
                    "`torch.log(1 + x)` loses precision for small `x`: use `torch.log1p(x)`",
                    "`torch.log(1 + x)` 在 `x` 很小时会损失精度：请改用 `torch.log1p(x)`",
                ),
                fixes=[fix],
            )

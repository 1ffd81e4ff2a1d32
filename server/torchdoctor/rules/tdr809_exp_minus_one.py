from __future__ import annotations

import ast

from ..core import fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .api_table import spell
from .base import Invalid, Rule, Valid
from .tdr808_log_one_plus import is_one


class ExpMinusOne(Rule):
    """## What it does
    Checks for `torch.exp(x) - 1`.

    Off by default (`extend-select = ["TDR809"]` turns it on): on real code its finding was an activation where the lost precision (about 1e-7) does not matter.

    ## Why is this bad?
    For small `x`, `exp(x)` is close to `1` and the subtraction cancels most of its digits: in
    float32, `torch.exp(x) - 1` for `x = 1e-8` is exactly `0`. `torch.expm1(x)` (also
    `torch.special.expm1`) computes the same value with full precision, in one kernel.

    ## Example
    ```python
    y = torch.exp(x) - 1
    ```

    ## Use instead
    ```python
    y = torch.expm1(x)
    ```

    ## Fix safety
    Unsafe only in the sense that results change in their last bits (they become more
    accurate).

    ## References
    - [`torch.expm1`](https://pytorch.org/docs/stable/generated/torch.expm1.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR107)
    """

    code = "TDR809"
    default = False
    name = "exp-minus-one"
    severity = Severity.INFO
    fix_safety = Applicability.UNSAFE
    aliases = ("TOR107",)

    VALID = (
        "import torch\ny = torch.expm1(x)",
        "import torch\ny = torch.exp(x) - 2",
        "import torch\ny = 1 - torch.exp(x)",
        "import math\nimport torch\ny = math.exp(x) - 1",
        Valid("import torch\ny = torch.special.expm1(x)\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\ny = torch.exp(x) - 1",
            fixed="import torch\ny = torch.expm1(x)",
            lines=(2,),
        ),
        Invalid(
            "import torch as T\ny = 2 * (T.exp(a + b) - 1.0)",
            fixed="import torch as T\ny = 2 * (T.expm1(a + b))",
            lines=(2,),
        ),
        Invalid("import torch\ny = torch.exp(x, out=o) - 1", fixed=None, lines=(2,)),
        Invalid(
            "import torch\ny = torch.exp(x) - 1\n",
            fixed="import torch\ny = torch.expm1(x)\n",
            notebook=True,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to("torch.exp"):
            node = ctx.sem.parent(call)
            if not (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Sub)
                and node.left is call
                and is_one(node.right)
            ):
                continue
            fix = None
            spelled = spell(ctx, call.func, "torch.expm1")
            if len(call.args) == 1 and not call.keywords and spelled is not None:
                text, edits = spelled
                fix = Fix(
                    Text("Replace with `torch.expm1`", "替换为 `torch.expm1`"),
                    (
                        fixes.replace(ctx.source, node, f"{text}({ctx.segment(call.args[0])})"),
                        *edits,
                    ),
                    Applicability.UNSAFE,
                )
            ctx.report(
                node,
                Text(
                    "`torch.exp(x) - 1` loses precision for small `x`: use `torch.expm1(x)`",
                    "`torch.exp(x) - 1` 在 `x` 很小时会损失精度：请改用 `torch.expm1(x)`",
                ),
                fixes=[fix],
            )

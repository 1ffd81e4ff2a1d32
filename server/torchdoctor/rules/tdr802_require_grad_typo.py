from __future__ import annotations

import ast

from ..core import fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .base import Invalid, Rule, Valid


class RequireGradTypo(Rule):
    """## What it does
    Checks for assignments to an attribute named `require_grad`, a typo of `requires_grad`.

    ## Why is this bad?
    Python lets you set any attribute on a tensor or parameter, so
    `param.require_grad = False` silently creates a new, meaningless attribute: the parameter
    keeps training. Freezing a backbone this way does nothing, and nothing warns.

    Files that also read `.require_grad` somewhere are left alone: there the attribute is
    evidently a deliberate one of the project's own objects.

    ## Example
    ```python
    for p in backbone.parameters():
        p.require_grad = False
    ```

    ## Use instead
    ```python
    for p in backbone.parameters():
        p.requires_grad = False
    ```

    ## Fix safety
    The fix renames the attribute. It is unsafe because it changes behaviour, as intended: the
    flag starts to take effect (parameters are frozen or unfrozen), and setting
    `requires_grad` on a non-leaf tensor raises.

    ## References
    - [`Tensor.requires_grad`](https://pytorch.org/docs/stable/generated/torch.Tensor.requires_grad.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR002)
    """

    code = "TDR802"
    name = "require-grad-typo"
    severity = Severity.ERROR
    fix_safety = Applicability.UNSAFE
    aliases = ("TOR002",)

    VALID = (
        "import torch\nfor p in model.parameters():\n    p.requires_grad = False",
        "import torch\nx.requires_grad_(True)",
        # The project's own attribute: it is read back somewhere.
        "import torch\nclass Cfg:\n    def __init__(self):\n        self.require_grad = True\n"
        "    def use(self):\n        return self.require_grad",
        # A plain variable, a keyword argument.
        "import torch\nrequire_grad = False\nx = torch.zeros(2, requires_grad=require_grad)",
        Valid("import torch\np.requires_grad = False\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\nfor p in model.parameters():\n    p.require_grad = False",
            fixed="import torch\nfor p in model.parameters():\n    p.requires_grad = False",
            lines=(3,),
        ),
        Invalid(
            "import torch\nmodel.fc.weight.require_grad = True",
            fixed="import torch\nmodel.fc.weight.requires_grad = True",
            lines=(2,),
        ),
        Invalid(
            "import torch\na.require_grad = b.require_grad = False",
            fixed="import torch\na.requires_grad = b.require_grad = False",
            lines=(2, 2),
        ),
        Invalid(
            "import torch\nw.require_grad = False\n",
            fixed="import torch\nw.requires_grad = False\n",
            notebook=True,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        attrs = ctx.sem.attributes.get("require_grad", ())
        if any(isinstance(a.ctx, ast.Load) for a in attrs):
            return
        for attr in attrs:
            parent = ctx.sem.parent(attr)
            if not (
                isinstance(attr.ctx, ast.Store)
                and isinstance(parent, ast.Assign)
                and attr in parent.targets
            ):
                continue
            fix = Fix(
                Text("Rename to `requires_grad`", "改名为 `requires_grad`"),
                (fixes.replace(ctx.source, attr, ctx.segment(attr.value) + ".requires_grad"),),
                Applicability.UNSAFE,
            )
            ctx.report(
                attr,
                Text(
                    "`require_grad` is a typo of `requires_grad`: this assignment creates an "
                    "unused attribute and gradient tracking does not change",
                    "`require_grad` 是 `requires_grad` 的笔误：该赋值只会新建一个无用属性，梯度跟踪不会改变",
                ),
                fixes=[fix],
            )

from __future__ import annotations

import ast

from ..core import fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .base import Invalid, Rule, Valid

MODULES = ("models", "datasets", "transforms")


class TorchvisionModuleImport(Rule):
    """## What it does
    Checks for `import torchvision.models as models` (and `datasets`, `transforms`) where the
    alias repeats the module's own name.

    ## Why is this bad?
    It is a roundabout spelling of `from torchvision import models`: both bind the same module
    to the same name, and the `from` form says so directly. This is a style rule, kept for
    parity with TorchFix, and off by default (`extend-select = ["TDR812"]` turns it on).

    ## Example
    ```python
    import torchvision.models as models
    ```

    ## Use instead
    ```python
    from torchvision import models
    ```

    ## Fix safety
    Safe: the same module is bound to the same name. Statements that import several modules at
    once get no fix.

    ## References
    - [The import statement](https://docs.python.org/3/reference/simple_stmts.html#import)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR203)
    """

    code = "TDR812"
    default = False
    name = "torchvision-module-import"
    severity = Severity.HINT
    fix_safety = Applicability.SAFE
    aliases = ("TOR203",)

    VALID = (
        "from torchvision import models",
        "import torchvision.models as tvm",
        "import torchvision.models",
        "import torchvision.ops as ops",
        Valid("from torchvision import transforms\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torchvision.models as models\n",
            fixed="from torchvision import models\n",
            lines=(1,),
        ),
        Invalid(
            "import torchvision.transforms as transforms\n",
            fixed="from torchvision import transforms\n",
            lines=(1,),
        ),
        Invalid("import os, torchvision.datasets as datasets\n", fixed=None, lines=(1,)),
        Invalid(
            "def f():\n    import torchvision.models as models\n    return models\n",
            fixed="def f():\n    from torchvision import models\n    return models\n",
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for node, alias, _qual in ctx.sem.imports:
            if not isinstance(node, ast.Import):
                continue
            parts = alias.name.split(".")
            if len(parts) != 2 or parts[0] != "torchvision" or parts[1] not in MODULES:
                continue
            if alias.asname != parts[1]:
                continue
            fix = None
            if len(node.names) == 1 and "#" not in ctx.segment(node):
                fix = Fix(
                    Text(
                        f"Replace with `from torchvision import {parts[1]}`",
                        f"替换为 `from torchvision import {parts[1]}`",
                    ),
                    (fixes.replace(ctx.source, node, f"from torchvision import {parts[1]}"),),
                    Applicability.SAFE,
                )
            ctx.report(
                alias,
                Text(
                    f"Use `from torchvision import {parts[1]}` instead of "
                    f"`import torchvision.{parts[1]} as {parts[1]}`",
                    f"请用 `from torchvision import {parts[1]}` 代替 "
                    f"`import torchvision.{parts[1]} as {parts[1]}`",
                ),
                fixes=[fix],
            )

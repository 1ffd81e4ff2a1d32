from __future__ import annotations

import ast

from ..core import fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .api_table import spell
from .base import Invalid, Rule, Valid

PRIVATE = {
    "torch.utils.data._utils.collate.default_collate": "torch.utils.data.default_collate",
    "torch.utils.data._utils.collate.default_convert": "torch.utils.data.default_convert",
}


class NonpublicCollateUse(Rule):
    """## What it does
    Checks for uses of the private `torch.utils.data._utils.collate.default_collate` and
    `default_convert` (calls, or the function passed as `collate_fn=`).

    ## Why is this bad?
    `_utils` is private: it can move or change in any release without notice. The same
    functions are public as `torch.utils.data.default_collate` and
    `torch.utils.data.default_convert` (in `torch.utils.data.__all__`, verified on 2.13).

    ## Example
    ```python
    import torch

    batch = torch.utils.data._utils.collate.default_collate(samples)
    ```

    ## Use instead
    ```python
    import torch

    batch = torch.utils.data.default_collate(samples)
    ```

    ## Fix safety
    Safe: the public name is the same function. Uses through a name imported from the private
    module get no fix here; TDR807 fixes the import itself.

    ## References
    - [`torch.utils.data.default_collate`](https://pytorch.org/docs/stable/data.html#torch.utils.data.default_collate)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR104)
    """

    code = "TDR806"
    name = "nonpublic-collate-use"
    severity = Severity.WARNING
    fix_safety = Applicability.SAFE
    aliases = ("TOR104",)

    VALID = (
        "import torch\nb = torch.utils.data.default_collate(samples)",
        "from torch.utils.data import default_collate\nb = default_collate(samples)",
        "import torch\ndef default_collate(x):\n    return x\nb = default_collate(s)",
        Valid("import torch\nb = torch.utils.data.default_convert(s)\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\nb = torch.utils.data._utils.collate.default_collate(samples)",
            fixed="import torch\nb = torch.utils.data.default_collate(samples)",
            lines=(2,),
        ),
        Invalid(
            "import torch.utils.data._utils.collate as C\nb = C.default_convert(s)",
            fixed="import torch\nimport torch.utils.data._utils.collate as C\n"
            "b = torch.utils.data.default_convert(s)",
            lines=(2,),
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n"
            "dl = DataLoader(ds, collate_fn=torch.utils.data._utils.collate.default_collate)",
            fixed="import torch\nfrom torch.utils.data import DataLoader\n"
            "dl = DataLoader(ds, collate_fn=torch.utils.data.default_collate)",
            lines=(3,),
        ),
        Invalid(
            "from torch.utils.data._utils.collate import default_collate\nb = default_collate(s)",
            fixed=None,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for ref in ctx.sem.references_to(*PRIVATE):
            public = PRIVATE[ctx.qualname(ref) or ""]
            fix = None
            if isinstance(ref, ast.Attribute):
                spelled = spell(ctx, ref, public)
                if spelled is not None:
                    text, edits = spelled
                    fix = Fix(
                        Text(f"Use `{public}`", f"改用 `{public}`"),
                        (fixes.replace(ctx.source, ref, text), *edits),
                        Applicability.SAFE,
                    )
            ctx.report(
                ref,
                Text(
                    f"Non-public `{ctx.qualname(ref)}`: use the public `{public}`",
                    f"使用了非公开的 `{ctx.qualname(ref)}`：请改用公开的 `{public}`",
                ),
                fixes=[fix],
            )

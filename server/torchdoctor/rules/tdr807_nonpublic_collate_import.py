from __future__ import annotations

import ast
from functools import partial

from ..core import fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import canonical
from .base import Invalid, Rule
from .tdr806_nonpublic_collate_use import PRIVATE


class NonpublicCollateImport(Rule):
    """## What it does
    Checks for imports of `default_collate` / `default_convert` from the private
    `torch.utils.data._utils.collate` module.

    ## Why is this bad?
    The private module may change in any release; `torch.utils.data` exports the same
    functions publicly (verified on 2.13).

    ## Example
    ```python
    from torch.utils.data._utils.collate import default_collate
    ```

    ## Use instead
    ```python
    from torch.utils.data import default_collate
    ```

    ## Fix safety
    Safe: the same function is bound under the same name. Imports that also take other names
    from the private module get no fix.

    ## References
    - [`torch.utils.data.default_collate`](https://pytorch.org/docs/stable/data.html#torch.utils.data.default_collate)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR105)
    """

    code = "TDR807"
    name = "nonpublic-collate-import"
    severity = Severity.WARNING
    fix_safety = Applicability.SAFE
    aliases = ("TOR105",)

    VALID = (
        "from torch.utils.data import default_collate",
        "from torch.utils.data.dataloader import default_collate",
        "import torch\nfrom torch.utils.data._utils.collate import collate",
    )
    INVALID = (
        Invalid(
            "from torch.utils.data._utils.collate import default_collate\n",
            fixed="from torch.utils.data import default_collate\n",
            lines=(1,),
        ),
        Invalid(
            "from torch.utils.data._utils.collate import default_convert as conv, default_collate\n",
            fixed="from torch.utils.data import default_convert as conv, default_collate\n",
            lines=(1, 1),
        ),
        Invalid(
            "from torch.utils.data._utils.collate import default_collate, collate\n",
            fixed=None,
            lines=(1,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for node, alias, qual in ctx.sem.imports:
            if not isinstance(node, ast.ImportFrom) or not qual or canonical(qual) not in PRIVATE:
                continue
            public = PRIVATE[canonical(qual)]
            ctx.report(
                alias,
                Text(
                    f"Import of non-public `{qual}`: use the public `{public}`",
                    f"导入了非公开的 `{qual}`：请改用公开的 `{public}`",
                ),
                fixes=partial(self._fix, ctx, node),
            )

    @staticmethod
    def _fix(ctx: Context, node: ast.ImportFrom) -> Fix | None:
        if node.level or not node.module:
            return None
        if any(f"{node.module}.{a.name}" not in PRIVATE for a in node.names):
            return None
        segment = ctx.segment(node)
        if "#" in segment or "\\" in segment:
            return None
        names = ", ".join(f"{a.name} as {a.asname}" if a.asname else a.name for a in node.names)
        return Fix(
            Text("Import from `torch.utils.data`", "改为从 `torch.utils.data` 导入"),
            (fixes.replace(ctx.source, node, f"from torch.utils.data import {names}"),),
            Applicability.SAFE,
        )

from __future__ import annotations

import ast
from functools import partial

from ..core import fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import canonical
from .base import Invalid, Rule, Valid

SYMBOL = "torchvision.transforms.v2.ToTensor"
ADVICE = "v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])"


class TorchvisionV2ToTensor(Rule):
    """## What it does
    Checks for `torchvision.transforms.v2.ToTensor`: its import, and uses through the `v2`
    module (`v2.ToTensor()`).

    ## Why is this bad?
    In the v2 transforms API, `ToTensor` is deprecated and will be removed. It mixes two steps
    (conversion to a tensor image, and scaling to `[0, 1]` floats) that v2 keeps separate, so
    that images, boxes and masks are each converted the right way.

    ## Example
    ```python
    from torchvision.transforms import v2

    transform = v2.Compose([v2.RandomResizedCrop(224), v2.ToTensor()])
    ```

    ## Use instead
    ```python
    import torch
    from torchvision.transforms import v2

    transform = v2.Compose([
        v2.RandomResizedCrop(224),
        v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)]),
    ])
    ```

    ## Fix safety
    The fix replaces `v2.ToTensor()` with the composition above and adds `import torch` if
    needed. It is unsafe: the result is a `tv_tensors.Image` (a tensor subclass) rather than a
    plain tensor, which code that checks exact types may notice. Imports get no fix.

    ## References
    - [torchvision transforms v2](https://pytorch.org/vision/stable/transforms.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR202)
    """

    code = "TDR811"
    name = "torchvision-v2-to-tensor"
    severity = Severity.WARNING
    fix_safety = Applicability.UNSAFE
    tags = ("deprecated",)
    aliases = ("TOR202",)

    VALID = (
        # The v1 ToTensor is not deprecated.
        "import torch\nfrom torchvision import transforms\nt = transforms.ToTensor()",
        "from torchvision.transforms import ToTensor\nt = ToTensor()",
        "import torch\nfrom torchvision.transforms import v2\n"
        "t = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])",
        Valid("from torchvision.transforms import v2\nt = v2.ToImage()\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torchvision.transforms import v2\nt = v2.ToTensor()",
            fixed="import torch\nfrom torchvision.transforms import v2\nt = " + ADVICE,
            lines=(3,),
        ),
        Invalid(
            "from torchvision.transforms import v2 as T\nt = T.Compose([T.ToTensor()])",
            fixed="import torch\nfrom torchvision.transforms import v2 as T\n"
            "t = T.Compose([T.Compose([T.ToImage(), T.ToDtype(torch.float32, scale=True)])])",
            lines=(2,),
        ),
        Invalid("from torchvision.transforms.v2 import ToTensor\n", fixed=None, lines=(1,)),
        Invalid(
            "import torchvision\nt = torchvision.transforms.v2.ToTensor\n",
            fixed=None,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        message = Text(
            f"`v2.ToTensor` is deprecated: use `{ADVICE}`",
            f"`v2.ToTensor` 已弃用：请改用 `{ADVICE}`",
        )
        for node, alias, qual in ctx.sem.imports:
            if isinstance(node, ast.ImportFrom) and qual and canonical(qual) == SYMBOL:
                ctx.report(alias, message)
        for ref in ctx.sem.references_to(SYMBOL):
            if isinstance(ref, ast.Attribute):
                ctx.report(ref, message, fixes=partial(self._fix, ctx, ref))

    @staticmethod
    def _fix(ctx: Context, ref: ast.Attribute) -> Fix | None:
        call = ctx.sem.parent(ref)
        if not isinstance(call, ast.Call) or call.func is not ref or call.args or call.keywords:
            return None
        v2 = ctx.segment(ref.value)
        torch_ref = fixes.module_ref(ctx.sem, ctx.source, "torch", ctx.notebook)
        if torch_ref is None:
            return None
        torch_name, edits = torch_ref
        code = f"{v2}.Compose([{v2}.ToImage(), {v2}.ToDtype({torch_name}.float32, scale=True)])"
        return Fix(
            Text("Replace with `ToImage` + `ToDtype`", "替换为 `ToImage` + `ToDtype`"),
            (fixes.replace(ctx.source, call, code), *edits),
            Applicability.UNSAFE,
        )

from __future__ import annotations

from ..core.context import Context
from ..core.model import Applicability, Severity
from . import api_table
from .base import Invalid, Rule


class DeprecatedApiImport(Rule):
    """## What it does
    Checks for `from ... import` statements that import a deprecated PyTorch API, from the same
    table as TDR804 (`from torch import qr`, `from functorch import vmap`,
    `from torch.nn.utils import weight_norm`, ...).

    ## Why is this bad?
    Importing a deprecated name spreads it through the file under a short name that hides where
    it comes from; the import is the one place to change. TDR804 reports each use as well.

    ## Example
    ```python
    from functorch import vmap, grad
    ```

    ## Use instead
    ```python
    from torch.func import vmap, grad
    ```

    ## Fix safety
    The fix rewrites the import only when every imported name has a drop-in replacement of the
    same name in one module (`functorch` → `torch.func`,
    `torch.nn.utils.stateless.functional_call` → `torch.func.functional_call`, ...). It is
    safe: the names bound are the same and behave the same. Other imports get no fix, because
    the calls would have to change too.

    ## References
    - [`torch.func` migration from functorch](https://pytorch.org/docs/stable/func.migrating.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR103)
    """

    code = "TDR805"
    name = "deprecated-api-import"
    severity = Severity.INFO
    fix_safety = Applicability.SAFE
    tags = ("deprecated",)
    aliases = ("TOR103",)

    VALID = (
        "from torch.func import vmap",
        "from torch.linalg import qr",
        "import torch\nfrom numpy.linalg import qr",
        "from torch import solve",  # removed: TDR803's
        "from torch import nn, optim",
        "from torch.onnx import export",  # only `dynamo=False` calls are deprecated
    )
    INVALID = (
        Invalid("from functorch import vmap\n", fixed="from torch.func import vmap\n", lines=(1,)),
        Invalid(
            "from functorch import vmap as v, grad\n",
            fixed="from torch.func import vmap as v, grad\n",
            lines=(1, 1),
        ),
        Invalid(
            "from torch.nn.utils.stateless import functional_call\n",
            fixed="from torch.func import functional_call\n",
            lines=(1,),
        ),
        Invalid("from torch import qr\n", fixed=None, lines=(1,)),
        Invalid("from torch import qr, nn\n", fixed=None, lines=(1,)),
        Invalid("from torch.nn.utils import weight_norm\n", fixed=None, lines=(1,)),
        Invalid("from functorch import vmap, make_fx\n", fixed=None, lines=(1,)),
        Invalid(
            "from functorch import jacrev\n",
            fixed="from torch.func import jacrev\n",
            notebook=True,
            lines=(1,),
        ),
    )

    def check(self, ctx: Context) -> None:
        api_table.report_imports(ctx, "deprecated")

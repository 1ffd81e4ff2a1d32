from __future__ import annotations

from ..core.context import Context
from ..core.model import Severity
from . import api_table
from .base import Invalid, Rule


class RemovedApiImport(Rule):
    """## What it does
    Checks for `from ... import` statements that import a PyTorch function removed for the
    target torch version (`from torch import solve`, ...), from the same table as TDR801.

    ## Why is this bad?
    The import still succeeds in torch 2.13 (the name is a stub), so nothing fails until the
    function is called: then it raises `RuntimeError: This function was deprecated since
    version 1.9 and is now removed.` (verified on 2.13). Flagging the import points at the
    place to change once for the whole file.

    ## Example
    ```python
    from torch import symeig
    ```

    ## Use instead
    ```python
    from torch.linalg import eigh
    ```

    ## Fix safety
    No fix: the replacements take different arguments, so every call has to change too
    (TDR801 reports each call).

    ## References
    - [`torch.linalg`](https://pytorch.org/docs/stable/linalg.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR004)
    """

    code = "TDR803"
    name = "removed-api-import"
    severity = Severity.ERROR
    tags = ("deprecated",)
    aliases = ("TOR004",)

    VALID = (
        "from torch.linalg import solve",
        "import torch\nfrom numpy.linalg import solve",
        "from torch import qr",  # deprecated, not removed: TDR805's
        "import torch.linalg",
    )
    INVALID = (
        Invalid("from torch import solve\n", fixed=None, lines=(1,)),
        Invalid("from torch import symeig as eig_sym, nn\n", fixed=None, lines=(1,)),
        Invalid("from torch import (\n    lstsq,\n    matrix_rank,\n)\n", fixed=None, lines=(2, 3)),
        Invalid("from torch import eig\n", fixed=None, notebook=True, lines=(1,)),
    )

    def check(self, ctx: Context) -> None:
        api_table.report_imports(ctx, "removed")

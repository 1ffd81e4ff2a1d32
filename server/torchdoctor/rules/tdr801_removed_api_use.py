from __future__ import annotations

from ..core.context import Context
from ..core.model import Severity
from . import api_table
from .base import Invalid, Rule, Valid


class RemovedApiUse(Rule):
    """## What it does
    Checks for calls of PyTorch functions that have been removed for the target torch version:
    `torch.solve`, `torch.symeig`, `torch.eig`, `torch.lstsq`, `torch.matrix_rank` (deprecated
    in 1.9, removed by 1.13). The list lives in one data table, `rules/api_table.py`, shared
    with TDR803, TDR804 and TDR805.

    ## Why is this bad?
    The names still exist in torch 2.13, but only as stubs: calling them raises
    `RuntimeError: This function was deprecated since version 1.9 and is now removed.` (verified
    on 2.13). The code fails the first time that line runs, which may be deep into training.

    Only rows that apply to your torch version are reported: set `target-version` in
    `[tool.torchdoctor]`; otherwise the version installed in the environment is used.

    ## Example
    ```python
    import torch

    x = torch.solve(b, A).solution
    ```

    ## Use instead
    ```python
    import torch

    x = torch.linalg.solve(A, b)
    ```

    ## Fix safety
    No fix: every replacement changes the argument order or the result type (the message says
    how).

    ## References
    - [`torch.linalg`](https://pytorch.org/docs/stable/linalg.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR001)
    """

    code = "TDR801"
    name = "removed-api-use"
    severity = Severity.ERROR
    tags = ("deprecated",)
    aliases = ("TOR001",)

    VALID = (
        "import torch\nx = torch.linalg.solve(A, b)",
        # A local function with the same name.
        "import torch\ndef solve(a, b):\n    return a\nx = solve(1, 2)",
        # Another library's solve.
        "import torch\nimport numpy as np\nx = np.linalg.solve(a, b)",
        # Shadowed by a parameter.
        "from torch import solve\ndef f(solve):\n    return solve(1, 2)",
        # A method of some object, not torch.
        "import torch\nx = solver.solve(a, b)",
        # Deprecated (not removed): TDR804's.
        "import torch\nq, r = torch.qr(a)",
        Valid("import torch\ne = torch.linalg.eigh(a)\n", notebook=True),
    )
    INVALID = (
        Invalid("import torch\nx = torch.solve(b, A).solution", fixed=None, lines=(2,)),
        Invalid("import torch as T\ne, v = T.symeig(a, eigenvectors=True)", fixed=None, lines=(2,)),
        Invalid("from torch import lstsq\nx = lstsq(b, A)", fixed=None, lines=(2,)),
        Invalid("import torch\nr = torch.matrix_rank(a)\n", fixed=None, notebook=True, lines=(2,)),
        Invalid("import torch\nw, v = torch.eig(a, True)", fixed=None, lines=(2,)),
    )

    def check(self, ctx: Context) -> None:
        api_table.report_uses(ctx, "removed")

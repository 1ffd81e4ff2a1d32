from __future__ import annotations

from ..core.context import Context
from ..core.model import Applicability, Severity
from . import api_table
from .base import Invalid, Rule, Valid


class LegacyApiUse(Rule):
    """## What it does
    Checks for uses of PyTorch APIs that are deprecated only in the documentation, or legacy
    spellings that behave as they always did, from the same table as TDR804
    (`rules/api_table.py`): `torch.norm`, `torch.svd`, `torch.ger`,
    `nn.UpsamplingNearest2d/Bilinear2d`, `torch.autograd.Variable`, CPU legacy constructors such
    as `torch.FloatTensor(...)` and `torch.LongTensor(...)`, and TorchScript (`torch.jit.script`,
    `trace`, `save`, `load`...).

    Off by default (`extend-select = ["TDR813"]` turns it on): none of these prints a warning in
    a training run or changes a result, so on real code they are style. Deprecations that warn
    or change behaviour are TDR804's.

    ## Why is this bad?
    These spellings still work, but their replacements are where new features and fixes land:
    `torch.linalg.vector_norm`/`matrix_norm` and `torch.linalg.svd` are the maintained linear
    algebra (and `torch.svd` returns `V`, not `Vh`); since PyTorch 0.4 a tensor tracks gradients
    itself and `Variable(x)` is `x`; a legacy constructor called with sizes returns
    uninitialised memory, where `torch.empty` says so in its name; TorchScript gets no new
    features, and `torch.compile`/`torch.export` replace it. Moving is worth it when you touch
    the code anyway.

    ## Example
    ```python
    import torch
    from torch.autograd import Variable

    x = Variable(torch.FloatTensor([1.0, 2.0]))
    n = torch.norm(x)
    ```

    ## Use instead
    ```python
    import torch

    x = torch.tensor([1.0, 2.0])
    n = torch.linalg.vector_norm(x)
    ```

    ## Fix safety
    As for TDR804: fixes are offered only where the replacement is known to behave the same for
    the arguments given (`torch.ger`, upsampling modules, legacy constructors with literal
    sizes or data), and are safe there. `Variable(x)` gets no fix: it also detaches `x` from
    its graph, so dropping it can change gradients.

    ## References
    - [Deprecations in `torch.linalg`](https://pytorch.org/docs/stable/linalg.html)
    - [Tensor creation ops](https://pytorch.org/docs/stable/torch.html#creation-ops)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR101)
    """

    code = "TDR813"
    name = "legacy-api-use"
    severity = Severity.INFO
    default = False
    fix_safety = Applicability.SAFE
    tags = ("deprecated",)
    aliases = ("TOR101",)

    VALID = (
        "import torch\nn = torch.linalg.vector_norm(x)\nx = torch.tensor([1.0])",
        # Deprecations that warn at run time: TDR804's.
        "import torch\nq, r = torch.qr(a)\nx = torch.cuda.FloatTensor(2)",
        # A legacy type used as a type, not called; a method named norm.
        "import torch\ny = x.type(torch.FloatTensor)\nn = x.norm(dim=1)",
        # A local function with a legacy name.
        "import torch\ndef Variable(x):\n    return x\nv = Variable(1)",
        Valid("import torch\nx = torch.zeros(2)\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\ny = torch.ger(u, v)",
            fixed="import torch\ny = torch.outer(u, v)",
            lines=(2,),
        ),
        Invalid("import torch\nn = torch.norm(x, dim=1)", fixed=None, lines=(2,)),
        Invalid(
            "import torch.nn as nn\nup = nn.UpsamplingBilinear2d(scale_factor=2)",
            fixed="import torch.nn as nn\n"
            'up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)',
            lines=(2,),
        ),
        Invalid(
            "import torch\nx = torch.FloatTensor(2, 3)",
            fixed="import torch\nx = torch.empty(2, 3, dtype=torch.float32)",
            lines=(2,),
        ),
        Invalid("import torch\nx = torch.FloatTensor(t)", fixed=None, lines=(2,)),
        Invalid(
            "import torch\nfrom torch.autograd import Variable\nv = Variable(x)",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\n@torch.jit.script\ndef f(x):\n    return x\n", fixed=None, lines=(2,)
        ),
        Invalid("import torch\nts = torch.jit.trace(model, example)", fixed=None, lines=(2,)),
        Invalid("import torch\nn = torch.norm(x)\n", fixed=None, notebook=True, lines=(2,)),
    )

    def check(self, ctx: Context) -> None:
        api_table.report_uses(ctx, "deprecated", opt_in=True)

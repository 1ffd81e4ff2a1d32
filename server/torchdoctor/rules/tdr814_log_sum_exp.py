from __future__ import annotations

import ast

from ..core import arguments, fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import is_none
from .api_table import spell
from .base import Invalid, Rule, Valid


class LogSumExp(Rule):
    """## What it does
    Checks for `torch.log(torch.sum(torch.exp(x), dim))`, which `torch.logsumexp(x, dim)`
    computes in one numerically stable step.

    ## Why is this bad?
    `torch.exp(x)` overflows to `inf` as soon as an element of `x` exceeds about 88 in float32
    (about 11 in float16), and underflows to `0` below about -104: the sum is then `inf` or `0`
    and its logarithm `inf` or `-inf`, although the true result is an ordinary number.
    `torch.logsumexp` subtracts the maximum along `dim` before exponentiating, so it returns the
    right value for any input, and it does not materialise the `exp(x)` tensor.

    A sum over every element (`dim` left out or `None`) is not reported: `torch.logsumexp`
    requires `dim` before PyTorch 2.6 and returns a wrong result for `dim=None` in some
    versions (pytorch/pytorch#144339).

    ## Example
    ```python
    scores = torch.log(torch.sum(torch.exp(logits), dim=1, keepdim=True))
    ```

    ## Use instead
    ```python
    scores = torch.logsumexp(logits, dim=1, keepdim=True)
    ```

    ## Fix safety
    The fix is unsafe: the results are not bit-identical (they differ in their last bits, and
    where the original overflowed to `inf` or underflowed to `-inf` the new code returns the
    finite value), so tests that compare exact values, or code that relies on the `inf`, may
    see a difference. No fix is offered when `torch.sum` is given `dtype=` or `out=`, which
    `torch.logsumexp` does not take in the same way.

    ## References
    - [`torch.logsumexp`](https://pytorch.org/docs/stable/generated/torch.logsumexp.html)
    - [pytorch/pytorch#144339](https://github.com/pytorch/pytorch/issues/144339)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR108)
    """

    code = "TDR814"
    name = "log-sum-exp"
    severity = Severity.INFO
    fix_safety = Applicability.UNSAFE
    aliases = ("TOR108",)

    VALID = (
        "import torch\ny = torch.logsumexp(x, 1)",
        # A sum over every element: dim left out or None (pytorch#144339).
        "import torch\ny = torch.log(torch.sum(torch.exp(x)))",
        "import torch\ny = torch.log(torch.sum(torch.exp(x), None, keepdim=True))",
        "import torch\ny = torch.log(torch.sum(torch.exp(x), dim=None))",
        "import torch\ny = torch.log(torch.sum(torch.exp(x), keepdim=True))",
        # Something between the three calls.
        "import torch\ny = torch.log(torch.sum(torch.exp(x), 1) + 2.5)",
        "import torch\ny = torch.log(torch.sum(torch.exp(x) + 2.5, 1))",
        "import torch\ny = torch.sum(torch.log(torch.exp(x)), 1)",
        "import torch\ny = torch.exp(torch.sum(torch.log(x), 1))",
        # dim may come from the spread.
        "import torch\ny = torch.log(torch.sum(torch.exp(x), *dims))",
        # Other libraries, and a local function shadowing the import.
        "import numpy as np\nimport torch\ny = np.log(np.sum(np.exp(x), 1))",
        "import torch\nfrom mylib import log, sum, exp\ny = log(sum(exp(x), 1))",
        "import torch\ndef f(torch):\n    return torch.log(torch.sum(torch.exp(x), 1))",
        Valid("import torch\ny = torch.logsumexp(x, dim=1)\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\ny = torch.log(torch.sum(torch.exp(x), 1, keepdim=True))",
            fixed="import torch\ny = torch.logsumexp(x, 1, keepdim=True)",
            lines=(2,),
        ),
        Invalid(
            "import torch\ny = torch.log(torch.sum(torch.exp(2.5 + x), dim=1))",
            fixed="import torch\ny = torch.logsumexp(2.5 + x, dim=1)",
            lines=(2,),
        ),
        # Positional keepdim, aliases and from-imports.
        Invalid(
            "import torch as T\ny = T.log(T.sum(T.exp(x), -1, True))",
            fixed="import torch as T\ny = T.logsumexp(x, -1, keepdim=True)",
            lines=(2,),
        ),
        Invalid(
            "from torch import exp, log, sum as tsum\ny = log(tsum(exp(x), dim=(0, 1)))",
            fixed="import torch\nfrom torch import exp, log, sum as tsum\n"
            "y = torch.logsumexp(x, dim=(0, 1))",
            lines=(2,),
        ),
        # A dtype: reported, no fix.
        Invalid(
            "import torch\ny = torch.log(torch.sum(torch.exp(x), 1, dtype=torch.float64))",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\ny = torch.log(torch.sum(torch.exp(x), 1))\n",
            fixed="import torch\ny = torch.logsumexp(x, 1)\n",
            notebook=True,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for log in ctx.sem.calls_to("torch.log"):
            found = _log_sum_exp(ctx, log)
            if found is None:
                continue
            ctx.report(
                log,
                Text(
                    "`torch.log(torch.sum(torch.exp(x), dim))` overflows for large `x`: use "
                    "the numerically stable `torch.logsumexp(x, dim)`",
                    "`torch.log(torch.sum(torch.exp(x), dim))` 在 `x` 较大时会上溢：请改用数值稳定的 "
                    "`torch.logsumexp(x, dim)`",
                ),
                fixes=[_fix(ctx, log, *found)],
            )


def _single_input(call: ast.Call) -> ast.expr | None:
    """The one tensor argument of ``torch.log(x)`` / ``torch.exp(x)`` (no ``out=``)."""
    if len(call.args) == 1 and not call.keywords and not isinstance(call.args[0], ast.Starred):
        return call.args[0]
    if not call.args and len(call.keywords) == 1 and call.keywords[0].arg == "input":
        return call.keywords[0].value
    return None


def _log_sum_exp(ctx: Context, log: ast.Call) -> tuple[ast.Call, ast.expr, arguments.Bound] | None:
    """``(sum call, x, sum's bound arguments)`` for ``torch.log(torch.sum(torch.exp(x), dim))``
    with a ``dim`` that is given and not None."""
    total = _single_input(log)
    if not isinstance(total, ast.Call) or ctx.qualname(total.func) != arguments.SUM:
        return None
    bound = arguments.bind(total, arguments.SUM)
    exp = bound.value("input")
    if not isinstance(exp, ast.Call) or ctx.qualname(exp.func) != "torch.exp":
        return None
    x = _single_input(exp)
    dim = bound.value("dim")
    if x is None or dim is None or is_none(dim) or bound.unknown("dim"):
        return None
    return total, x, bound


def _fix(
    ctx: Context, log: ast.Call, total: ast.Call, x: ast.expr, bound: arguments.Bound
) -> Fix | None:
    if bound.spread_keywords or bound.value("dtype") is not None or bound.value("out") is not None:
        return None
    spelled = spell(ctx, log.func, "torch.logsumexp")
    if spelled is None:
        return None
    text, edits = spelled
    dim = bound.value("dim")
    assert dim is not None
    parts = [ctx.segment(x)]
    parts.append(f"dim={ctx.segment(dim)}" if bound.keyword("dim") else ctx.segment(dim))
    keepdim = bound.value("keepdim")
    if keepdim is not None:
        parts.append(f"keepdim={ctx.segment(keepdim)}")
    return Fix(
        Text("Replace with `torch.logsumexp`", "替换为 `torch.logsumexp`"),
        (fixes.replace(ctx.source, log, f"{text}({', '.join(parts)})"), *edits),
        Applicability.UNSAFE,
    )

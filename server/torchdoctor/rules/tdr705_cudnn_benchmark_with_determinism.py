from __future__ import annotations

import ast

from ..core.context import Context
from ..core.model import Severity, Text
from ..core.semantic import is_true
from .base import Invalid, Rule

_BENCHMARK = "torch.backends.cudnn.benchmark"
_DETERMINISTIC = "torch.backends.cudnn.deterministic"


class CudnnBenchmarkWithDeterminism(Rule):
    """## What it does
    Checks for `torch.backends.cudnn.benchmark = True` in a file that also asks for
    deterministic results (`torch.use_deterministic_algorithms(True)` or
    `torch.backends.cudnn.deterministic = True`).

    ## Why is this bad?
    With `benchmark = True`, cuDNN times several convolution algorithms on the first batch of
    each shape and keeps the fastest. The winner can differ from run to run (timings are noisy),
    and so can the results, which defeats the determinism you asked for. The two settings pull in
    opposite directions: choose speed or reproducibility.

    ## Example
    ```python
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = True
    ```

    ## Use instead
    ```python
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    ```

    ## Fix safety
    No fix is offered: which of the two settings you want is your decision.

    ## References
    - [Reproducibility](https://pytorch.org/docs/stable/notes/randomness.html)
    - [`torch.use_deterministic_algorithms`](https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html)
    """

    code = "TDR705"
    name = "cudnn-benchmark-with-determinism"
    severity = Severity.INFO

    VALID = (
        "import torch\ntorch.backends.cudnn.benchmark = True",
        "import torch\ntorch.use_deterministic_algorithms(True)\n"
        "torch.backends.cudnn.benchmark = False",
        "import torch\ntorch.backends.cudnn.deterministic = False\n"
        "torch.backends.cudnn.benchmark = True",
        # Chosen by a flag: one or the other.
        "import torch\ntorch.backends.cudnn.benchmark = not args.deterministic\n"
        "torch.use_deterministic_algorithms(args.deterministic)",
    )
    INVALID = (
        Invalid(
            "import torch\ntorch.use_deterministic_algorithms(True)\n"
            "torch.backends.cudnn.benchmark = True",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch.backends.cudnn as cudnn\ncudnn.deterministic = True\ncudnn.benchmark = True",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "from torch.backends import cudnn\ndef setup():\n    cudnn.benchmark = True\n"
            "    cudnn.deterministic = True",
            fixed=None,
            lines=(3,),
        ),
    )

    @staticmethod
    def _true_assignments(ctx: Context, attr: str, qualname: str) -> list[ast.Assign]:
        out = []
        for node in ctx.sem.attributes.get(attr, ()):
            parent = ctx.sem.parent(node)
            if (
                isinstance(parent, ast.Assign)
                and node in parent.targets
                and is_true(parent.value)
                and ctx.qualname(node) == qualname
            ):
                out.append(parent)
        return out

    def check(self, ctx: Context) -> None:
        benchmarks = self._true_assignments(ctx, "benchmark", _BENCHMARK)
        found = self._true_assignments(ctx, "deterministic", _DETERMINISTIC)
        determinism: ast.AST | None = found[0] if found else None
        if not benchmarks:
            return
        if determinism is None:
            for call in ctx.sem.calls_to("torch.use_deterministic_algorithms"):
                arg = call.args[0] if call.args else None
                if is_true(arg):
                    determinism = call
                    break
        if determinism is None:
            return
        for node in benchmarks:
            ctx.report(
                node,
                Text(
                    "`cudnn.benchmark = True` picks convolution algorithms by timing, which "
                    "undoes the determinism this file asks for",
                    "`cudnn.benchmark = True` 通过计时挑选卷积算法，会破坏本文件要求的确定性",
                ),
                related=[
                    ctx.related(determinism, Text("determinism requested here", "此处要求了确定性"))
                ],
            )

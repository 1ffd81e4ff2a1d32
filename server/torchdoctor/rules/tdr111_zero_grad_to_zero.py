from __future__ import annotations

import ast

from ..core import arguments, fixes, kinds
from ..core.context import Context
from ..core.kinds import Kind
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import Semantic, is_false
from .base import Invalid, Rule

_GRAD_HOLDERS = (Kind.MODULE, Kind.OPTIMIZER)


class ZeroGradToZero(Rule):
    """## What it does
    Checks for `zero_grad(set_to_none=False)` (or `zero_grad(False)`) on an optimizer or a
    module. Off by default; the same check as TorchFix's TOR402.

    ## Why is this bad?
    With `set_to_none=False`, every step writes zeros into the `.grad` tensor of every
    parameter (one memset per gradient, or a fused one per device), and the next `backward()`
    then adds into those zeros instead of writing the gradient directly: extra memory traffic
    on every iteration, and the gradient memory stays allocated between steps. The default,
    `set_to_none=True` since PyTorch 2.0, drops the gradients instead; PyTorch's profiler
    reports the zeroing pattern as `GradNotSetToNonePattern`.

    Not reported in a file that writes into gradients in place (`p.grad += g`,
    `p.grad.add_(g)`, `p.grad[...] = ...`): such code needs `.grad` to be a tensor after
    `zero_grad`, as a parameter server that sums workers' gradients does.

    ## Example
    ```python
    optimizer.zero_grad(set_to_none=False)
    ```

    ## Use instead
    ```python
    optimizer.zero_grad()
    ```

    ## Fix safety
    The fix (remove `set_to_none=False`) is unsafe: after it, `.grad` is `None` rather than a
    tensor of zeros until the next `backward()`. Code that reads `p.grad` in between (gradient
    norms, logging, `p.grad.add_(...)`) then fails or takes another branch, and optimizers skip
    parameters whose `.grad` is `None`, where with zeros they would still apply momentum and
    weight decay to parameters that got no gradient in that step.

    ## References
    - [`torch.optim.Optimizer.zero_grad`](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html)
    - [Performance tuning guide: use `set_to_none`](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    - [Migrating from TorchFix](../torchfix-migration.md) (TorchFix code TOR402)
    """

    code = "TDR111"
    name = "zero-grad-to-zero"
    severity = Severity.INFO
    default = False
    fix_safety = Applicability.UNSAFE
    aliases = ("TOR402",)

    VALID = (
        "import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nopt.zero_grad()",
        "import torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "opt.zero_grad(set_to_none=True)",
        "import torch.nn as nn\nmodel = nn.Linear(2, 2)\nmodel.zero_grad(True)",
        # The value is computed: the choice is the caller's.
        "import torch\nopt = torch.optim.SGD(ps, lr=0.1)\nopt.zero_grad(set_to_none=keep)",
        "import torch\nopt = torch.optim.SGD(ps, lr=0.1)\nopt.zero_grad(**options)",
        # Not an optimizer or a module: a class of the file, another library's object.
        "import torch\nclass Meter:\n    def zero_grad(self, set_to_none=True):\n        pass\n"
        "meter = Meter()\nmeter.zero_grad(set_to_none=False)",
        "import torch\nfrom mylib import Accumulator\nacc = Accumulator()\n"
        "acc.zero_grad(set_to_none=False)",
        "import torch\nstate = {}\nstate.zero_grad(False)",
        # A file that does not use torch.
        "opt.zero_grad(set_to_none=False)",
        # The file adds into the gradients in place: it needs them to be zero tensors.
        "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "def update(grads):\n    for p, g in zip(model.parameters(), grads):\n"
        "        p.grad += g\n    opt.step()\n    opt.zero_grad(set_to_none=False)\n",
        "import torch\nnet = torch.nn.Linear(2, 2)\nnet.zero_grad(False)\n"
        "for p in net.parameters():\n    p.grad.add_(1.0)\n",
    )
    INVALID = (
        Invalid(
            "import torch\nimport torch.nn as nn\nmodel = nn.Sequential()\n"
            "optimizer = torch.optim.Adam(model.parameters())\n"
            "optimizer.zero_grad(set_to_none=False)\nmodel.zero_grad(set_to_none=False)",
            fixed="import torch\nimport torch.nn as nn\nmodel = nn.Sequential()\n"
            "optimizer = torch.optim.Adam(model.parameters())\n"
            "optimizer.zero_grad()\nmodel.zero_grad(set_to_none=False)",
            lines=(5, 6),
        ),
        # Positional: set_to_none is zero_grad's only parameter.
        Invalid(
            "from torch.optim import SGD as Opt\nopt = Opt(ps, lr=0.1)\nopt.zero_grad(False)",
            fixed="from torch.optim import SGD as Opt\nopt = Opt(ps, lr=0.1)\nopt.zero_grad()",
            lines=(3,),
        ),
        # Through `self`, in a training step.
        Invalid(
            "import torch\nclass Trainer:\n    def __init__(self, net):\n"
            "        self.opt = torch.optim.AdamW(net.parameters())\n"
            "    def step(self):\n        self.opt.zero_grad(set_to_none=False)\n",
            fixed="import torch\nclass Trainer:\n    def __init__(self, net):\n"
            "        self.opt = torch.optim.AdamW(net.parameters())\n"
            "    def step(self):\n        self.opt.zero_grad()\n",
            lines=(6,),
        ),
        Invalid(
            "import torch\nnet = torch.nn.Linear(2, 2)\nnet.zero_grad(set_to_none=False)\n",
            fixed="import torch\nnet = torch.nn.Linear(2, 2)\nnet.zero_grad()\n",
            notebook=True,
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        if _writes_into_grads(sem):
            return
        for call in sem.calls_by_attr.get("zero_grad", ()):
            assert isinstance(call.func, ast.Attribute)
            bound = arguments.bind(call, arguments.ZERO_GRAD)
            if not is_false(bound.value("set_to_none")):
                continue
            if kinds.kind(sem, call.func.value) not in _GRAD_HOLDERS:
                continue
            node = bound.node("set_to_none")
            assert node is not None
            ctx.report(
                node,
                Text(
                    "`zero_grad(set_to_none=False)` writes zeros into every gradient on every "
                    "step: leave `set_to_none` at its default (`True`)",
                    "`zero_grad(set_to_none=False)` 每一步都把所有梯度写成零：请保留 `set_to_none` "
                    "的默认值（`True`）",
                ),
                fixes=[
                    Fix(
                        Text("Remove `set_to_none=False`", "删除 `set_to_none=False`"),
                        (fixes.remove_argument(ctx.source, call, node),),
                        Applicability.UNSAFE,
                    )
                ],
            )


def _writes_into_grads(sem: Semantic) -> bool:
    """The file writes into a ``.grad`` tensor in place (``p.grad += g``, ``p.grad.add_(g)``,
    ``p.grad[i] = v``): it needs gradients to be tensors, not None."""
    for node in sem.attributes.get("grad", ()):
        parent = sem.parent(node)
        if isinstance(parent, ast.AugAssign) and parent.target is node:
            return True
        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store):
            return True
        if (
            isinstance(parent, ast.Attribute)
            and parent.attr.endswith("_")
            and not parent.attr.startswith("_")
        ):
            call = sem.parent(parent)
            if isinstance(call, ast.Call) and call.func is parent:
                return True
    return False

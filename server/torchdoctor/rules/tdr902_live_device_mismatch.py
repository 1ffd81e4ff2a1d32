from __future__ import annotations

import ast

from ..core import fixes
from ..core.context import Context
from ..core.live_facts import FactDict, LiveFacts, module_facts, tensor_facts
from ..core.model import Applicability, Fix, Text
from . import live as L
from .base import Invalid, Rule, Valid

_LIVE = LiveFacts(
    {
        "x": tensor_facts([8, 3], device="cpu"),
        "w": tensor_facts([3, 4], device="cuda:0"),
        "model": module_facts(["cuda:0"], ["torch.float32"]),
        "scale": tensor_facts([], device="cpu"),
    },
    execution_count=12,
)


class LiveDeviceMismatch(Rule):
    """## What it does
    Checks expressions that combine live tensors of the running Jupyter kernel on different
    devices: a binary operator (`x @ w`, `a + b`), a `torch.*` or `torch.nn.functional.*` call
    (`torch.cat([a, b])`), a tensor method (`a.matmul(b)`), or a module call (`model(x)`, the
    module's device being its first parameter's). Runs only while the kernel bridge is
    connected.

    ## Why is this bad?
    The cell fails with `RuntimeError: Expected all tensors to be on the same device`, often after
    minutes of work that came before it in the cell. The devices come from the kernel's live
    objects, read without touching their data and without a GPU sync. A 0-dimensional CPU
    tensor is allowed with tensors on any device and is not reported.

    ## Example
    ```python
    # In [12]: x is on cpu, model is on cuda:0
    y = model(x)
    ```

    ## Use instead
    ```python
    y = model(x.to(next(model.parameters()).device))
    ```

    ## Fix safety
    The fix is a suggestion: it moves the CPU operand to the other operand's device. Moving it
    the other way, or creating it on the right device in the first place, may be what you want.

    ## References
    - [Tensor attributes: `torch.device`](https://pytorch.org/docs/stable/tensor_attributes.html#torch-device)
    - [`torch.Tensor.to`](https://pytorch.org/docs/stable/generated/torch.Tensor.to.html)
    """

    code = "TDR902"
    name = "live-device-mismatch"
    fix_safety = Applicability.SUGGESTION

    VALID = (
        Valid("import torch\ny = model(x)"),  # no kernel facts
        # Same device.
        Valid(
            "import torch\ny = x + w",
            live=LiveFacts({"x": tensor_facts([2]), "w": tensor_facts([2])}),
        ),
        # A 0-dim CPU tensor works with tensors on any device.
        Valid("import torch\ny = w * scale", live=_LIVE),
        # Already moved in the expression itself.
        Valid("import torch\ny = model(x.to('cuda'))", live=_LIVE),
        Valid("import torch\ny = x.cuda() @ w", live=_LIVE),
        # Moved earlier in the same cell: the live value is stale.
        Valid("import torch\nx = x.cuda()\ny = model(x)", live=_LIVE),
        Valid("import torch\nmodel.cpu()\ny = model(x)", live=_LIVE),
        # Inside a function the names may be other objects.
        Valid("import torch\ndef step(model, x):\n    return model(x)", live=_LIVE),
        # `copy_` and `torch.save` take tensors on any device.
        Valid("import torch\nw.copy_(x)\ntorch.save(w, 'w.pt')", live=_LIVE),
        # Identity tests and membership do not compute on the tensors.
        Valid("import torch\nsame = x is w\nfound = x in [w]", live=_LIVE),
        # Names that are not live tensors.
        Valid("import torch\ny = a + b", live=_LIVE),
    )
    INVALID = (
        Invalid(
            "import torch\ny = model(x)",
            fixed="import torch\ny = model(x.to(next(model.parameters()).device))",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "import torch\ny = x @ w",
            fixed="import torch\ny = x.to(w.device) @ w",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "import torch as T\nz = T.cat([w, x], dim=0)",
            fixed="import torch as T\nz = T.cat([w, x.to(w.device)], dim=0)",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "import torch.nn.functional as F\ny = F.linear(x, w)",
            fixed="import torch.nn.functional as F\ny = F.linear(x.to(w.device), w)",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "import torch\ny = x.matmul(w)",
            fixed="import torch\ny = x.to(w.device).matmul(w)",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "import torch\ny = model(x)",
            fixed="import torch\ny = model(x.to(next(model.parameters()).device))",
            notebook=True,
            live=_LIVE,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        judge = L.judge_for(ctx)
        if judge is None:
            return
        live = judge.live
        for node, operands in L.device_operands(ctx, judge):
            found: list[tuple[ast.AST, str, str, FactDict]] = []  # (node, name, device, facts)
            for op in operands:
                hit = judge.tensor(op)
                if hit is not None:
                    device = hit[1].get("device")
                    if isinstance(device, str) and not L.is_zero_dim_cpu(hit[1]):
                        found.append((op, hit[0], device, hit[1]))
                    continue
                mod = judge.module(op)
                if mod is not None and op is operands[0] and isinstance(node, ast.Call):
                    device = L.module_device(mod[1])
                    if device is not None:
                        found.append((op, mod[0], device, mod[1]))
            devices = {d for _o, _n, d, _f in found}
            if len(devices) < 2:
                continue
            target = next((f for f in found if f[2] != "cpu"), found[0])
            _t_node, t_name, t_device, t_facts = target
            if t_facts.get("kind") == "module":
                where = f"next({t_name}.parameters()).device"
            else:
                where = f"{t_name}.device"
            movers = [f for f in found if f[2] != t_device]
            edits = tuple(
                fixes.insert(ctx.source.end(op), f".to({where})") for op, _n, _d, _f in movers
            )
            mover = movers[0]
            fix = Fix(
                Text(f"Move `{mover[1]}` to `{where}`", f"把 `{mover[1]}` 移到 `{where}`"),
                edits,
                Applicability.SUGGESTION,
            )
            ctx.report(
                node,
                L.message(
                    live,
                    f"`{t_name}` is on `{t_device}` but `{mover[1]}` is on `{mover[2]}`; this "
                    "raises `Expected all tensors to be on the same device`",
                    f"`{t_name}` 在 `{t_device}` 上，而 `{mover[1]}` 在 `{mover[2]}` 上；这会引发 "
                    "`Expected all tensors to be on the same device`",
                ),
                fixes=[fix],
                execution_count=live.execution_count,
            )

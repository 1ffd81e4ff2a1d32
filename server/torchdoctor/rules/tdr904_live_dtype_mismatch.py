from __future__ import annotations

import ast

from ..core import fixes
from ..core.context import Context
from ..core.live_facts import LiveFacts, module_facts, tensor_facts
from ..core.model import Applicability, Fix, Text
from . import live as L
from .base import Invalid, Rule, Valid

_LIVE = LiveFacts(
    {
        "x": tensor_facts([8, 16], dtype="torch.float64"),
        "h": tensor_facts([8, 16], dtype="torch.bfloat16"),
        "w": tensor_facts([16, 4], dtype="torch.float32"),
        "ids": tensor_facts([8, 16], dtype="torch.int64"),
        "model": module_facts(["cpu"], ["torch.float32"]),
    },
    execution_count=4,
)


class LiveDtypeMismatch(Rule):
    """## What it does
    Checks matrix products between live tensors of the running Jupyter kernel, or a live module
    called on a live tensor, whose floating dtypes differ, outside `autocast`: `x @ w`,
    `torch.matmul`/`mm`/`bmm`, `F.linear(x, w)`, `a.matmul(b)`, `model(x)`. Runs only while the
    kernel bridge is connected.

    ## Why is this bad?
    Matrix products do not promote dtypes: the cell fails with `RuntimeError: expected m1 and
    m2 to have the same dtype` (or `mat1 and mat2 must have the same dtype`). The usual causes
    are a NumPy array turned into a `float64` tensor, or a model cast to `bfloat16` fed
    `float32` inputs. Element-wise operators promote and are not reported; inside `autocast`
    the product is cast for you and is not reported either.

    ## Example
    ```python
    # In [4]: x = torch.from_numpy(array)   # float64; model is float32
    y = model(x)
    ```

    ## Use instead
    ```python
    y = model(x.to(next(model.parameters()).dtype))
    ```

    ## Fix safety
    The fix is a suggestion: it casts the input to the other operand's dtype. Casting down loses
    precision; creating the tensor with the right dtype (`torch.from_numpy(a).float()`) may be
    the better change.

    ## References
    - [Type promotion](https://pytorch.org/docs/stable/tensor_attributes.html#type-promotion-doc)
    - [`torch.autocast`](https://pytorch.org/docs/stable/amp.html#torch.autocast)
    """

    code = "TDR904"
    name = "live-dtype-mismatch"
    fix_safety = Applicability.SUGGESTION

    VALID = (
        Valid("import torch\ny = model(x)"),  # no kernel facts
        # Element-wise operators promote.
        Valid("import torch\ny = x + h", live=_LIVE),
        # Inside autocast the product is cast.
        Valid(
            "import torch\nwith torch.autocast('cpu', dtype=torch.bfloat16):\n    y = h @ w",
            live=_LIVE,
        ),
        # Integer ids into a model (an embedding) are not a dtype mismatch.
        Valid("import torch\ny = model(ids)", live=_LIVE),
        # Cast in the expression, or earlier in the cell.
        Valid("import torch\ny = model(x.float())", live=_LIVE),
        Valid("import torch\nx = x.float()\ny = model(x)", live=_LIVE),
        Valid("import torch\nmodel.double()\ny = model(x)", live=_LIVE),
        # Same dtype.
        Valid(
            "import torch\ny = a @ b",
            live=LiveFacts({"a": tensor_facts([2, 2]), "b": tensor_facts([2, 2])}),
        ),
        # A module with mixed parameter dtypes is not judged.
        Valid(
            "import torch\ny = m(x)",
            live=LiveFacts(
                {
                    "m": module_facts(["cpu"], ["torch.float32", "torch.bfloat16"]),
                    "x": tensor_facts([2], dtype="torch.float64"),
                }
            ),
        ),
        Valid("import torch\ndef f(x):\n    return model(x)", live=_LIVE),
    )
    INVALID = (
        Invalid(
            "import torch\ny = model(x)",
            fixed="import torch\ny = model(x.to(next(model.parameters()).dtype))",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "import torch\ny = h @ w",
            fixed="import torch\ny = h @ w.to(h.dtype)",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "import torch as T\ny = T.matmul(x, w)",
            fixed="import torch as T\ny = T.matmul(x, w.to(x.dtype))",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "from torch.nn import functional as F\ny = F.linear(x, w)",
            fixed="from torch.nn import functional as F\ny = F.linear(x, w.to(x.dtype))",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "import torch\ny = h.mm(w)",
            fixed="import torch\ny = h.mm(w.to(h.dtype))",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "import torch\ny = model(x)",
            fixed="import torch\ny = model(x.to(next(model.parameters()).dtype))",
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
        for node, operands in L.matmul_operands(ctx):
            if len(operands) != 2 or not L.outside_autocast(ctx, node):
                continue
            left, right = operands
            mod = judge.module(left) if isinstance(node, ast.Call) and left is node.func else None
            lt = None if mod is not None else judge.tensor(left)
            rt = judge.tensor(right)
            if rt is None or (mod is None and lt is None):
                continue
            r_dtype = rt[1].get("dtype")
            if mod is not None:
                l_name, l_dtype = mod[0], L.module_dtype(mod[1])
                where = f"next({l_name}.parameters()).dtype"
                mover, mover_node, target = rt[0], right, l_dtype
            elif lt is not None:
                l_name, l_dtype = lt[0], lt[1].get("dtype")
                where = f"{l_name}.dtype"
                mover, mover_node, target = rt[0], right, l_dtype
            else:
                continue
            if l_dtype not in L.FLOATING or r_dtype not in L.FLOATING or l_dtype == r_dtype:
                continue
            fix = Fix(
                Text(f"Cast `{mover}` to `{where}`", f"把 `{mover}` 转换为 `{where}`"),
                (fixes.insert(ctx.source.end(mover_node), f".to({where})"),),
                Applicability.SUGGESTION,
            )
            ctx.report(
                node,
                L.message(
                    live,
                    f"`{l_name}` is `{L.short(l_dtype)}` but `{rt[0]}` is `{L.short(r_dtype)}`; "
                    "matrix products do not promote dtypes and this raises",
                    f"`{l_name}` 是 `{L.short(l_dtype)}`，而 `{rt[0]}` 是 `{L.short(r_dtype)}`；"
                    "矩阵乘法不做类型提升，这会报错",
                ),
                fixes=[fix],
                execution_count=live.execution_count,
                target_dtype=target,
            )

from __future__ import annotations

import ast

from ..core.context import Context
from ..core.live_facts import LiveFacts, tensor_facts, view_result
from ..core.model import Applicability, Edit, Fix, Pos, Text
from . import live as L
from .base import Invalid, Rule, Valid

_NOT_VIEWABLE = (
    "view size is not compatible with input tensor's size and stride (at least one dimension "
    "spans across two contiguous subspaces). Use .reshape(...) instead."
)
# ``b = a.t()`` in the kernel: shape [6, 4], strides [1, 6].
_B = tensor_facts([6, 4], stride=[1, 6], is_view=True, views=view_result([-1], _NOT_VIEWABLE))
_LIVE = LiveFacts({"b": _B}, execution_count=7)


class LiveViewWillFail(Rule):
    """## What it does
    Checks `x.view(shape)` where `x` is a tensor in the running Jupyter kernel and replaying that
    view on a meta tensor with `x`'s sizes, strides and dtype raises. Reports PyTorch's own
    error text. Runs only while the kernel bridge is connected.

    ## Why is this bad?
    `.view()` never copies: it needs strides that can express the new shape. Whether that holds
    depends on how the tensor was made (a transpose, a channels-last conversion, a slice), which
    the code in front of you often does not show. `is_contiguous()` is the wrong test:
    `torch.randn(10, 10)[:, ::2].view(5, 2, 5)` works on a non-contiguous tensor. The bridge
    answers exactly by replaying `view` on `torch.empty_strided(x.shape, x.stride(),
    dtype=x.dtype, device="meta")`, which touches no data and never syncs a GPU.

    ## Example
    ```python
    # In [7]: b = a.t()
    flat = b.view(-1)
    ```

    ## Use instead
    ```python
    flat = b.reshape(-1)
    ```

    ## Fix safety
    Replacing `.view(` with `.reshape(` is safe: `reshape` returns a view whenever one exists
    and copies otherwise, and the view here cannot exist, so no working code changes meaning.

    ## References
    - [`torch.Tensor.view`](https://pytorch.org/docs/stable/generated/torch.Tensor.view.html)
    - [`torch.reshape`](https://pytorch.org/docs/stable/generated/torch.reshape.html)
    - [Tensor views](https://pytorch.org/docs/stable/tensor_view.html)
    """

    code = "TDR901"
    name = "live-view-will-fail"
    fix_safety = Applicability.SAFE

    VALID = (
        # No kernel facts: the rule never guesses.
        Valid("import torch\nflat = b.view(-1)"),
        # The live replay says the view works (a strided slice that can still be viewed).
        Valid(
            "import torch\nflat = s.view(50)",
            live=LiveFacts(
                {"s": tensor_facts([10, 5], stride=[10, 2], views=view_result([50], None))}
            ),
        ),
        # `b` is rebound in this cell: its live value is not what `.view` sees.
        Valid("import torch\nb = b.contiguous()\nflat = b.view(-1)", live=_LIVE),
        Valid("import torch\nb.t_()\nflat = b.view(-1)", live=_LIVE),
        # Inside a function `b` may be anything.
        Valid("import torch\ndef f(b):\n    return b.view(-1)", live=_LIVE),
        Valid("import torch\ndef f():\n    return b.view(-1)", live=_LIVE),
        # `.view(dtype)` reinterprets bytes; not a shape.
        Valid("import torch\nc = b.view(torch.int32)", live=_LIVE),
        # A shape that was not replayed (not literal) is not judged.
        Valid("import torch\nflat = b.view(n, -1)", live=_LIVE),
        # A name that is not a tensor in the kernel.
        Valid("import torch\nflat = b.view(-1)", live=LiveFacts({"b": {"kind": "missing"}})),
        Valid("import torch\nflat = b.view(-1)", live=LiveFacts({"b": {"kind": "no-torch"}})),
        # An imported module named like a live tensor.
        Valid("import torch\nimport b\nflat = b.view(-1)", live=_LIVE),
    )
    INVALID = (
        Invalid(
            "import torch\nflat = b.view(-1)",
            fixed="import torch\nflat = b.reshape(-1)",
            live=_LIVE,
            lines=(2,),
        ),
        Invalid(
            "flat = b.view(-1)  # torch",
            fixed="flat = b.reshape(-1)  # torch",
            live=_LIVE,
            lines=(1,),
        ),
        Invalid(
            "import torch as T\nflat = b.view((-1,))",
            fixed="import torch as T\nflat = b.reshape((-1,))",
            live=LiveFacts({"b": {**_B, "views": view_result([-1], _NOT_VIEWABLE)}}),
            lines=(2,),
        ),
        Invalid(
            "import torch\nout = c.view(c.size(0), -1)",
            fixed="import torch\nout = c.reshape(c.size(0), -1)",
            live=LiveFacts(
                {
                    "c": tensor_facts(
                        [2, 3, 4, 5],
                        stride=[60, 1, 15, 3],
                        channels_last=True,
                        views=view_result([("c", 0), -1], _NOT_VIEWABLE, [2, -1]),
                    )
                },
                execution_count=3,
            ),
            lines=(2,),
        ),
        # In a notebook (the cell that made `b` ran earlier).
        Invalid(
            "import torch\nflat = b.view(-1)",
            fixed="import torch\nflat = b.reshape(-1)",
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
        for call in L.view_calls(ctx):
            func = call.func
            assert isinstance(func, ast.Attribute)
            target = judge.tensor(func.value)
            args = L.view_args(call)
            if target is None or args is None:
                continue
            name, _facts = target
            spec = L.view_spec(args, judge.name)
            result = live.view(name, spec) if spec is not None else None
            if result is None or result.get("ok") is not False or not result.get("error"):
                continue
            error = str(result["error"])
            end = ctx.source.end(func)
            fix = Fix(
                Text("Replace `.view(` with `.reshape(`", "把 `.view(` 换成 `.reshape(`"),
                (Edit(Pos(end.row, end.col - len("view")), end, "reshape"),),
                Applicability.SAFE,
            )
            shape = ", ".join(ctx.segment(a) for a in args)
            ctx.report(
                call,
                L.message(
                    live,
                    f"`{name}.view({shape})` will fail on the live tensor: {error}",
                    f"`{name}.view({shape})` 在实时张量上会失败：{error}",
                ),
                fixes=[fix],
                execution_count=live.execution_count,
                torch_error=error,
            )

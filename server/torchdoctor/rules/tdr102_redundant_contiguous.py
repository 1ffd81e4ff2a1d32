from __future__ import annotations

import ast

from ..core import fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import has_star_kwargs, keyword
from .base import Invalid, Rule, Valid

# Factories that always return a new tensor in the default (contiguous) layout.
_FACTORIES = frozenset(
    "torch." + n
    for n in (
        "zeros",
        "ones",
        "empty",
        "full",
        "rand",
        "randn",
        "randint",
        "randperm",
        "arange",
        "linspace",
        "logspace",
        "eye",
    )
)
# In-place methods that can change a tensor's strides.
_RESTRIDE = frozenset(
    {
        "t_",
        "transpose_",
        "swapaxes_",
        "swapdims_",
        "squeeze_",
        "unsqueeze_",
        "as_strided_",
        "resize_",
        "resize_as_",
        "set_",
    }
)


class RedundantContiguous(Rule):
    """## What it does
    Checks for `.contiguous()` calls that provably do nothing: on the direct result of a
    tensor factory (`torch.zeros`, `ones`, `empty`, `full`, `rand`, `randn`, `randint`,
    `randperm`, `arange`, `linspace`, `logspace`, `eye`, and `torch.tensor([...])` of a
    literal), on a local name assigned once from one and never re-strided in place, or right
    after another `.contiguous()`.

    ## Why is this bad?
    These tensors are already contiguous, and `.contiguous()` on a contiguous tensor returns
    the tensor itself. The call costs nothing but makes the reader look for a layout problem
    that is not there, and it teaches the habit the guide warns against: calling
    `.contiguous()` everywhere "to be safe". Where the tensor is *not* contiguous the call is a
    full copy — measured on an H200, `t().contiguous()` of an 8192² float32 tensor takes 0.473
    ms against 0.0044 ms for a `view`; on a CPU (`bench/cpu_contiguous.py`, torch 2.13, 4096²
    float32) `t.contiguous()` of a contiguous tensor takes 0.0002 ms and returns the same
    storage, while `t.t().contiguous()` copies 64 MiB.

    The rule reports only calls it can prove redundant. The rule catalogue also lists
    `.contiguous()` whose result feeds `.reshape()`; that call is not reported, because
    removing it can change behaviour: `x.contiguous().reshape(s)` always returns a contiguous
    tensor that does not share memory with a non-contiguous `x`, while `x.reshape(s)` may
    return a non-contiguous view of `x`, and later `.view()` calls or in-place writes then
    behave differently. Factories given a `memory_format` or `layout`, and `torch.tensor(t)`
    of another tensor (which keeps its strides), are not reported either.

    ## Example
    ```python
    mask = torch.zeros(batch, seq_len).contiguous()
    ```

    ## Use instead
    ```python
    mask = torch.zeros(batch, seq_len)
    ```

    ## Fix safety
    The fix removes the `.contiguous()` call. It is safe: on a contiguous tensor the call
    returns its input unchanged.

    ## References
    - [`Tensor.contiguous`](https://pytorch.org/docs/stable/generated/torch.Tensor.contiguous.html)
    - [`Tensor.is_contiguous`](https://pytorch.org/docs/stable/generated/torch.Tensor.is_contiguous.html)
    """

    code = "TDR102"
    name = "redundant-contiguous"
    severity = Severity.HINT
    fix_safety = Applicability.SAFE
    tags = ("unnecessary",)

    VALID = (
        "import torch\ny = x.t().contiguous()\n",
        "import torch\ny = x.transpose(0, 1).contiguous().view(-1)\n",
        # reshape may return a non-contiguous view: not provably redundant.
        "import torch\ny = x.permute(0, 2, 1).contiguous().reshape(8, -1)\n",
        # A factory with a memory format, or a tensor built from another tensor.
        "import torch\ny = torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).contiguous()\n",
        "import torch\ny = torch.tensor(x).contiguous()\n",
        "import torch\ny = torch.zeros(3, 4, **opts).contiguous()\n",
        # A conversion to another memory format.
        "import torch\ny = torch.zeros(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)\n",
        # The name is re-strided in place, or rebound.
        "import torch\nbuf = torch.zeros(3, 4)\nbuf.t_()\ny = buf.contiguous()\n",
        "import torch\nbuf = torch.zeros(3, 4)\nbuf = buf.t()\ny = buf.contiguous()\n",
        "import torch\n"
        "def f(flag):\n"
        "    a = torch.ones(3)\n"
        "    if flag:\n        a = other()\n"
        "    return a.contiguous()\n",
        # Not torch's factory.
        "import numpy as np\nimport torch\ny = np.zeros(3).contiguous()\n",
        "import torch\n"
        "def zeros(*shape):\n    return torch.zeros(*shape).t()\n"
        "y = zeros(3, 4).contiguous()\n",
        # A module-level name used in a function may be changed elsewhere.
        "import torch\nbuf = torch.zeros(3, 4)\ndef f():\n    return buf.contiguous()\n",
        Valid("import torch\ny = x.mT.contiguous()\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\nmask = torch.zeros(4, 8).contiguous()\n",
            fixed="import torch\nmask = torch.zeros(4, 8)\n",
            lines=(2,),
        ),
        Invalid(
            "import torch as T\nidx = T.arange(10).contiguous().view(2, 5)\n",
            fixed="import torch as T\nidx = T.arange(10).view(2, 5)\n",
            lines=(2,),
        ),
        Invalid(
            "from torch import randn\nx = randn(3, 4, device='cuda').contiguous()\n",
            fixed="from torch import randn\nx = randn(3, 4, device='cuda')\n",
            lines=(2,),
        ),
        Invalid(
            "import torch\ny = x.t().contiguous().contiguous()\n",
            fixed="import torch\ny = x.t().contiguous()\n",
            lines=(2,),
        ),
        Invalid(
            "import torch\ntable = torch.tensor([[1, 2], [3, 4]]).contiguous()\n",
            fixed="import torch\ntable = torch.tensor([[1, 2], [3, 4]])\n",
            lines=(2,),
        ),
        # Through a local name assigned once.
        Invalid(
            "import torch\n"
            "def make(n):\n"
            "    buf = torch.empty(n, 16)\n"
            "    buf.zero_()\n"
            "    return buf.contiguous()\n",
            fixed="import torch\n"
            "def make(n):\n"
            "    buf = torch.empty(n, 16)\n"
            "    buf.zero_()\n"
            "    return buf\n",
            lines=(5,),
        ),
        Invalid(
            "import torch\nw = torch.ones(3, 3).contiguous(memory_format=torch.contiguous_format)\n",
            fixed="import torch\nw = torch.ones(3, 3)\n",
            notebook=True,
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_by_attr.get("contiguous", ()):
            if not self._plain(ctx, call):
                continue
            assert isinstance(call.func, ast.Attribute)
            receiver = call.func.value
            if isinstance(receiver, ast.Call) and receiver.func is not None:
                if isinstance(receiver.func, ast.Attribute) and receiver.func.attr == "contiguous":
                    if not self._plain(ctx, receiver):
                        continue
                    why = Text(
                        "`.contiguous()` right after `.contiguous()` does nothing",
                        "紧跟在 `.contiguous()` 之后的 `.contiguous()` 没有任何作用",
                    )
                elif self._factory(ctx, receiver):
                    why = Text(
                        "`.contiguous()` on a freshly created tensor does nothing: it is "
                        "already contiguous",
                        "对新创建的张量调用 `.contiguous()` 没有任何作用：它本来就是连续的",
                    )
                else:
                    continue
            elif isinstance(receiver, ast.Name) and self._factory_name(ctx, receiver):
                why = Text(
                    f"`{receiver.id}` is a freshly created, contiguous tensor: `.contiguous()` "
                    "does nothing",
                    f"`{receiver.id}` 是新创建的连续张量：`.contiguous()` 没有任何作用",
                )
            else:
                continue
            ctx.report(
                call.func,
                why,
                fixes=[
                    Fix(
                        Text("Remove `.contiguous()`", "删除 `.contiguous()`"),
                        (fixes.replace(ctx.source, call, ctx.segment(receiver)),),
                        Applicability.SAFE,
                    )
                ],
            )

    @staticmethod
    def _plain(ctx: Context, call: ast.Call) -> bool:
        """``.contiguous()`` or ``.contiguous(memory_format=torch.contiguous_format)``."""
        if not call.args and not call.keywords:
            return True
        fmt = keyword(call, "memory_format")
        if len(call.keywords) == 1 and not call.args and fmt is not None:
            return ctx.qualname(fmt.value) == "torch.contiguous_format"
        if len(call.args) == 1 and not call.keywords:
            return ctx.qualname(call.args[0]) == "torch.contiguous_format"
        return False

    @staticmethod
    def _factory(ctx: Context, call: ast.Call) -> bool:
        qual = ctx.qualname(call.func)
        if has_star_kwargs(call) or any(isinstance(a, ast.Starred) for a in call.args):
            if qual != "torch.tensor":
                return False
        if keyword(call, "memory_format") is not None or keyword(call, "layout") is not None:
            return False
        if qual == "torch.tensor":
            data = call.args[0] if call.args else None
            return isinstance(data, ast.List | ast.Tuple | ast.Constant | ast.ListComp)
        return qual in _FACTORIES

    @classmethod
    def _factory_name(cls, ctx: Context, name: ast.Name) -> bool:
        """A local name with one assignment in its scope, from a factory, never re-strided."""
        sem = ctx.sem
        binding = sem.lookup(name.id, name)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return False
        if binding.scope is not sem.scope_of(name).node:
            return False
        scope = sem.scopes[binding.scope]
        if len(scope.bindings.get(name.id, [])) != 1 or name.id in scope.global_names:
            return False
        if not isinstance(binding.value, ast.Call) or not cls._factory(ctx, binding.value):
            return False
        for attr in sem.attributes.get("data", ()):
            if isinstance(attr.ctx, ast.Store) and getattr(attr.value, "id", None) == name.id:
                return False
        for method in _RESTRIDE:
            for call in sem.calls_by_attr.get(method, ()):
                func = call.func
                if isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == name.id:
                    return False
        return True

from __future__ import annotations

import ast
import itertools

from ..core import fixes, layout
from ..core.context import Context
from ..core.model import Applicability, Edit, Fix, Pos, Text
from .base import Invalid, Rule, Valid

# Roots that hold something other than a tensor.
_FOREIGN_PACKAGES = ("numpy", "pandas", "jax", "tensorflow", "cupy", "scipy")


class ViewOnTransposed(Rule):
    """## What it does
    Checks for `.view(...)` called on a tensor whose strides come from `.t()`, `.T`, `.mT`,
    `.transpose()`, `.permute()`, `.swapaxes()`, `.swapdims()`, `.movedim()` or `.expand()`,
    when the new shape has too few dimensions to keep the reordered dimensions apart: the view
    has to merge two dimensions that are no longer neighbours in memory. The rule follows the
    tensor through what the code does with it: local names, elementwise methods and operators
    whose first operand it is (`pred.t().eq(target)`, `x.t() > 0`, `2 * x.t()`), `.float()`,
    `.type(...)`, `.to(...)`, `.clone()` and `.detach()` (copies in `preserve_format` keep the
    permuted strides), and basic slices (`correct[:k]`, the top-k accuracy helper). It stops at
    `.contiguous()`, `.reshape()`, reductions, an integer index and a slice of at most one
    element (`correct[:1]` views as one row). Views that only split dimensions, or that merge
    dimensions the transposition left in order (`x.permute(0, 2, 3, 1).view(n, -1, c)`), work
    and are not reported; neither are shapes whose length the code does not show
    (`.view(*size)`). When the view's sizes are the tensor's own dimensions (`b, c, f, h, w =
    x.shape`, then `x.permute(0, 2, 1, 3, 4).view(-1, c, 1, h, w)`), the `-1` must merge the
    dimensions left between them, and the view is reported when those are not neighbours in
    memory. A merge after a permutation that moves a dimension to the end works only when the
    merged dimensions are exactly the ones the permutation kept in order: `view(n, -1, 4)` after
    `permute(0, 2, 3, 1)` on 36 channels must merge the spatial dimensions with 9 of the
    channels, and fails. Such a view with a literal last size is reported, unless a literal
    shape of the tensor in the code shows that the size is the whole moved dimension.

    ## Why is this bad?
    These operations return a tensor that shares memory with its input but walks it with
    different strides, so it is usually not contiguous. `.view()` never copies: when the new
    shape cannot be expressed with the existing strides it raises `RuntimeError: view size is
    not compatible with input tensor's size and stride (at least one dimension spans across two
    contiguous subspaces). Use .reshape(...) instead.` Whether it fails depends on the shape
    and strides (`x.t().view(4, 3, 1)` works, `x.t().view(-1)` does not), so the rule says the
    call is *likely* to fail; the failure shows up only when that line runs.

    The guide says that `.view()` requires a contiguous tensor; in PyTorch 2.13 `.view()`
    accepts any tensor whose strides are compatible with the new shape (`x.t().view(4, 3, 1)`
    works for a 3×4 `x`), which is why some of these calls succeed and the rule cannot be
    certain.

    ## Example
    ```python
    import torch

    x = torch.randn(8, 16, 32)
    y = x.transpose(1, 2).view(8, -1)
    ```

    ## Use instead
    ```python
    import torch

    x = torch.randn(8, 16, 32)
    y = x.transpose(1, 2).reshape(8, -1)
    ```

    ## Fix safety
    Replacing `.view(` with `.reshape(` is safe: `reshape` returns a view when the strides allow
    it and a copy otherwise. The alternative fix inserts `.contiguous()` before `.view(`, which is
    also safe. Either way, the result may be a copy rather than a view of the original, so writes
    to it no longer reach the original tensor; code that fails today cannot rely on that. The
    copy costs time: measured on an H200, `t().contiguous()` of an 8192×8192 float32 tensor
    takes 0.473 ms, against 0.0044 ms for `view(-1)` of a contiguous one.

    ## References
    - [`torch.Tensor.view`](https://pytorch.org/docs/stable/generated/torch.Tensor.view.html)
    - [`torch.reshape`](https://pytorch.org/docs/stable/generated/torch.reshape.html)
    - [Tensor views](https://pytorch.org/docs/stable/tensor_view.html)
    """

    code = "TDR101"
    name = "view-on-transposed"
    fix_safety = Applicability.SAFE

    VALID = (
        "import torch\nx = torch.randn(3, 4)\ny = x.t().reshape(-1)",
        "import torch\nx = torch.randn(3, 4)\ny = x.t().contiguous().view(-1)",
        "import torch\nx = torch.randn(3, 4)\ny = x.view(-1)",
        # numpy: .view takes a dtype, never a shape.
        "import numpy as np\nimport torch\narr = np.zeros((3, 4))\nv = arr.T.view(np.float32)",
        "import numpy as np\nimport torch\nv = np.zeros((3, 4)).transpose().view(np.ndarray)",
        # A tensor reinterpreted as another dtype: a dtype argument, not a shape.
        "import torch\nx = torch.randn(3, 4)\nb = x.t().view(torch.int32)",
        "import torch\nx = torch.randn(3, 4)\nb = x.t().view(dtype=torch.int32)",
        "import torch\nx = torch.randn(3, 4)\nb = x.t().view(y.dtype)",
        "import torch\ndef f(x, dtype):\n    return x.t().view(dtype)",
        # A user class with its own .t() and .view().
        "import torch\n"
        "class Matrix:\n"
        "    def t(self):\n        return self\n"
        "    def view(self, *shape):\n        return shape\n"
        "m = Matrix()\nv = m.t().view(2, 3)",
        "import torch\n"
        "class Grid:\n"
        "    def view(self, *shape):\n        return shape\n"
        "def f(g):\n    return g.transpose(0, 1).view(2, 3)",
        # pandas.
        "import pandas as pd\nimport torch\ndf = pd.DataFrame({'a': [1]})\nv = df.T.view(2)",
        # Permutations that keep the order.
        "import torch\nx = torch.randn(2, 3, 4)\ny = x.permute(0, 1, 2).view(-1)",
        "import torch\nx = torch.randn(2, 3)\ny = x.transpose(1, 1).view(-1)",
        # The name is reassigned from its own view: the view reads the earlier value.
        "import torch\nh = torch.randn(6, 4)\nh = h.view(2, 3, 4).permute(1, 0, 2)",
        # Reassigned to a contiguous tensor before the view.
        "import torch\nx = torch.randn(3, 4)\ny = x.t()\ny = y.contiguous()\nz = y.view(-1)",
        "import torch\nx = torch.randn(3, 4)\ny = x.t()\ny = torch.randn(4, 3)\nz = y.view(-1)",
        # The name assigned from a transpose lives in another function.
        "import torch\ny = torch.randn(3, 4).t()\ndef f(y):\n    return y.view(-1)",
        # The transpose comes after the view.
        "import torch\nx = torch.randn(3, 4)\nz = x.view(-1)\ny = x.t()",
        # Views that split dimensions, or merge dimensions the permutation kept in order: they
        # work (found in transformers, timm).
        "import torch\ndef f(x, b, c, h, w):\n    return x.permute(1, 2, 0).view(b, c, h, w)",
        "import torch\ndef f(x, dim):\n    return x.permute(0, 2, 3, 1).view(1, -1, dim)",
        "import torch\ndef f(x, b, c, h, w):\n    return x.transpose(1, 2).view(b, c, h, w)",
        "import torch\ndef f(t, n, s):\n    return t.permute(1, 0).view(1, n, s, s)",
        "import torch\ndef f(w, k):\n    return w.T.view(4, -1, k)",
        "import torch\ndef f(x):\n    return x.permute(2, 0, 1).view(4, 6)",
        # The literal is the whole moved dimension: 4 channels viewed as (..., 4).
        "import torch\nx = torch.randn(2, 4, 5, 5)\ny = x.permute(0, 2, 3, 1).view(2, -1, 4)",
        # The number of dimensions is not written out.
        "import torch\ndef f(x, b, c, size):\n    return x.transpose(1, 2).view(b, c, *size)",
        "import torch\ndef f(x, shape):\n    return x.transpose(1, 2).view(shape)",
        "import torch\ndef f(x, dims):\n    return x.permute(*dims).view(-1)",
        # A file that does not import torch.
        "import mylib\ny = mylib.torch_like().t().view(-1)",
        Valid(
            "import torch\nx = torch.randn(3, 4)\ny = x.t().reshape(-1)",
            notebook=True,
        ),
        # The `-1` merges dimensions that stay neighbours (`h` and `w`).
        "import torch\ndef f(x):\n    b, c, f, h, w = x.shape\n"
        "    return x.permute(0, 2, 1, 3, 4).view(b, f, c, -1)",
        # The layout followed through the code: a copy in the default format, or a slice of
        # one row along a dimension (``correct[:1]`` views as one row), ends it.
        "import torch\ndef f(pred, t):\n    c = pred.t().eq(t).contiguous()\n    return c[:5].view(-1)",
        "import torch\ndef f(pred, t):\n    c = pred.t().eq(t)\n    return c[:1].view(-1)",
        "import torch\ndef f(pred, t):\n    c = pred.t().eq(t)\n    return c[:, 2:3].view(-1)",
        "import torch\ndef f(pred, t):\n    c = pred.t().eq(t)\n    return c[0].view(-1)",
        "import torch\ndef f(x):\n    return x.t().clone(memory_format=torch.contiguous_format).view(-1)",
        # TensorIterator lays the result out like its first operand: `t` is contiguous here.
        "import torch\ndef f(pred, t):\n    return t.eq(pred.t()).view(-1)",
        "import torch\ndef f(pred, t):\n    return (t == pred.t()).view(-1)",
        # Reductions and softmax return contiguous tensors; so does arithmetic on an expand.
        "import torch\ndef f(x):\n    return x.t().sum(0).view(-1)",
        "import torch\ndef f(x):\n    return x.t().softmax(1).view(-1)",
        "import torch\ndef f(x):\n    return (x.expand(4, 3) + 1).view(12)",
        # The name is rebound before the view, or the slice is taken of another tensor.
        "import torch\n"
        "def f(output, target, ks):\n"
        "    _, pred = output.topk(max(ks), 1, True, True)\n"
        "    pred = pred.t()\n"
        "    correct = pred.eq(target.view(1, -1).expand_as(pred))\n"
        "    correct = correct.contiguous()\n"
        "    return [correct[:k].view(-1).float().sum(0) for k in ks]",
        "import torch\ndef f(x, y):\n    c = x.t().eq(0)\n    c = y.eq(0)\n    return c[:3].view(-1)",
        # numpy: a transposed array compared, then viewed as another dtype.
        "import numpy as np\nimport torch\nm = np.zeros((3, 4)).T\nb = (m > 0).view(np.uint8)",
        # A user class whose .t() and .eq() return its own objects.
        "import torch\n"
        "class Grid:\n"
        "    def t(self):\n        return self\n"
        "    def eq(self, other):\n        return self\n"
        "    def view(self, *shape):\n        return shape\n"
        "g = Grid()\nv = g.t().eq(1).view(-1)",
    )
    INVALID = (
        # A literal size that splits the moved channels (an SSD box head: 9 anchors x 4): the
        # view merges the spatial dimensions with part of the channels.
        Invalid(
            "import torch\ndef boxes(x, n):\n    return x.permute(0, 2, 3, 1).view(n, -1, 4)\n",
            fixed="import torch\ndef boxes(x, n):\n"
            "    return x.permute(0, 2, 3, 1).reshape(n, -1, 4)\n",
            lines=(3,),
        ),
        Invalid(
            "import torch\nx = torch.randn(2, 36, 5, 5)\ny = x.permute(0, 2, 3, 1).view(2, -1, 4)\n",
            fixed="import torch\nx = torch.randn(2, 36, 5, 5)\n"
            "y = x.permute(0, 2, 3, 1).reshape(2, -1, 4)\n",
            lines=(3,),
        ),
        Invalid(
            "import torch\nx = torch.randn(3, 4)\ny = x.t().view(-1)",
            fixed="import torch\nx = torch.randn(3, 4)\ny = x.t().reshape(-1)",
            lines=(3,),
        ),
        Invalid(
            "import torch\ndef f(x):\n    return x.transpose(1, 2).view(x.size(0), -1)",
            fixed="import torch\ndef f(x):\n    return x.transpose(1, 2).reshape(x.size(0), -1)",
            lines=(3,),
        ),
        Invalid(
            "import torch as T\nx = T.zeros(2, 3, 4)\ny = x.permute(2, 0, 1).view(-1)",
            fixed="import torch as T\nx = T.zeros(2, 3, 4)\ny = x.permute(2, 0, 1).reshape(-1)",
            lines=(3,),
        ),
        Invalid(
            "import torch\nx = torch.zeros(2, 3)\ny = x.T.view(6)",
            fixed="import torch\nx = torch.zeros(2, 3)\ny = x.T.reshape(6)",
            lines=(3,),
        ),
        Invalid(
            "import torch\ndef f(x):\n    return x.mT.view(-1)",
            fixed="import torch\ndef f(x):\n    return x.mT.reshape(-1)",
            lines=(3,),
        ),
        Invalid(
            "import torch\ndef f(x):\n    return x.permute([0, 2, 1]).view((x.size(0), -1))",
            fixed="import torch\ndef f(x):\n    return x.permute([0, 2, 1]).reshape((x.size(0), -1))",
            lines=(3,),
        ),
        Invalid(
            "import torch\ndef f(q):\n    return q.transpose(-2, -1).view(-1)",
            fixed="import torch\ndef f(q):\n    return q.transpose(-2, -1).reshape(-1)",
            lines=(3,),
        ),
        Invalid(
            "import torch\ndef f(x):\n    y = x.swapaxes(0, 1)\n    return y.view(-1)",
            fixed="import torch\ndef f(x):\n    y = x.swapaxes(0, 1)\n    return y.reshape(-1)",
            lines=(4,),
        ),
        Invalid(
            "import torch\ndef f(x):\n    return x.expand(4, 3).view(12)",
            fixed="import torch\ndef f(x):\n    return x.expand(4, 3).reshape(12)",
            lines=(3,),
        ),
        Invalid(
            "from torch import transpose\ndef f(x):\n    return transpose(x, 0, 1).view(-1)",
            fixed="from torch import transpose\ndef f(x):\n    return transpose(x, 0, 1).reshape(-1)",
            lines=(3,),
        ),
        Invalid(
            "import torch\nx = torch.randn(3, 4)\ny = (\n    x.movedim(0, 1)\n    .view(-1)\n)",
            fixed="import torch\nx = torch.randn(3, 4)\ny = (\n    x.movedim(0, 1)\n    .reshape(-1)\n)",
            lines=(4,),
        ),
        Invalid(
            "import torch\nx = torch.randn(3, 4)\ny = x.t().view(-1)",
            fixed="import torch\nx = torch.randn(3, 4)\ny = x.t().reshape(-1)",
            notebook=True,
            lines=(3,),
        ),
        # The top-k accuracy helper: `correct` has the strides of `pred.t()` (an elementwise
        # comparison keeps its first operand's layout), and a slice of two or more rows of it
        # cannot be flattened without a copy.
        Invalid(
            "import torch\n"
            "def accuracy(output, target, topk=(1,)):\n"
            "    maxk = max(topk)\n"
            "    _, pred = output.topk(maxk, 1, True, True)\n"
            "    pred = pred.t()\n"
            "    correct = pred.eq(target.view(1, -1).expand_as(pred))\n"
            "    res = []\n"
            "    for k in topk:\n"
            "        correct_k = correct[:k].view(-1).float().sum(0, keepdim=True)\n"
            "        res.append(correct_k)\n"
            "    return res\n",
            fixed="import torch\n"
            "def accuracy(output, target, topk=(1,)):\n"
            "    maxk = max(topk)\n"
            "    _, pred = output.topk(maxk, 1, True, True)\n"
            "    pred = pred.t()\n"
            "    correct = pred.eq(target.view(1, -1).expand_as(pred))\n"
            "    res = []\n"
            "    for k in topk:\n"
            "        correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)\n"
            "        res.append(correct_k)\n"
            "    return res\n",
            lines=(9,),
        ),
        Invalid(
            "import torch\n"
            "def errors(preds, labels, ks):\n"
            "    _, inds = torch.topk(preds, max(ks), dim=1)\n"
            "    inds = inds.t()\n"
            "    correct = inds.eq(labels.view(1, -1).expand_as(inds))\n"
            "    return [correct[:k, :].view(-1).float().sum() for k in ks]\n",
            fixed="import torch\n"
            "def errors(preds, labels, ks):\n"
            "    _, inds = torch.topk(preds, max(ks), dim=1)\n"
            "    inds = inds.t()\n"
            "    correct = inds.eq(labels.view(1, -1).expand_as(inds))\n"
            "    return [correct[:k, :].reshape(-1).float().sum() for k in ks]\n",
            lines=(6,),
        ),
        # The view's sizes name the permuted tensor's dimensions: the `-1` must merge the batch
        # and frame dimensions, which the permutation took apart.
        Invalid(
            "import torch\ndef decode(latents):\n    b, c, f, h, w = latents.shape\n"
            "    latents = latents[:, :, 1:]\n"
            "    return latents.permute(0, 2, 1, 3, 4).view(-1, c, 1, h, w)\n",
            fixed="import torch\ndef decode(latents):\n    b, c, f, h, w = latents.shape\n"
            "    latents = latents[:, :, 1:]\n"
            "    return latents.permute(0, 2, 1, 3, 4).reshape(-1, c, 1, h, w)\n",
            lines=(5,),
        ),
        # Copies in the default `preserve_format` keep the permuted strides: `.clone()` too.
        Invalid(
            "import torch\ndef f(x):\n    return x.t().clone().view(-1)",
            fixed="import torch\ndef f(x):\n    return x.t().clone().reshape(-1)",
            lines=(3,),
        ),
        Invalid(
            "import torch\ndef f(x):\n    y = (2 * x.transpose(0, 1)).float()\n    return y.view(-1)",
            fixed="import torch\ndef f(x):\n"
            "    y = (2 * x.transpose(0, 1)).float()\n    return y.reshape(-1)",
            lines=(4,),
        ),
        Invalid(
            "import torch\ndef f(x):\n    return (x.t() > 0)[..., :2].view(-1)",
            fixed="import torch\ndef f(x):\n    return (x.t() > 0)[..., :2].reshape(-1)",
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        if not ctx.sem.torch_imported():
            return
        user_methods = _user_defined_methods(ctx)
        for call in ctx.sem.calls_by_attr.get("view", ()):
            func = call.func
            assert isinstance(func, ast.Attribute)
            if not call.args or call.keywords or _reinterprets_dtype(ctx, call):
                continue
            found = layout.reordered(ctx.sem, func.value)
            if found is None:
                continue
            source = found.source
            if not (
                _merges_across(source, call)
                or (
                    found.direct
                    and (_splits_trailing(ctx, source, call) or _merges_named(ctx, source, call))
                )
            ):
                continue
            method = layout.method_name(source)
            if ("view" in user_methods or method in user_methods) and not _rooted_in_torch(
                ctx, source
            ):
                continue
            if _foreign_root(ctx, source):
                continue
            end = ctx.source.end(func)
            name_start = Pos(end.row, end.col - len("view"))
            reshape = Fix(
                Text("Replace `.view(` with `.reshape(`", "把 `.view(` 换成 `.reshape(`"),
                (Edit(name_start, end, "reshape"),),
                Applicability.SAFE,
            )
            contiguous = Fix(
                Text(
                    "Insert `.contiguous()` before `.view(`", "在 `.view(` 前插入 `.contiguous()`"
                ),
                # Before the name `view`, not after the receiver: a parenthesised receiver
                # (`(x.t() > 0).view(-1)`) ends inside its parentheses.
                (fixes.insert(name_start, "contiguous()."),),
                Applicability.SAFE,
            )
            shown = f".{method}()" if method not in layout.REORDERING_PROPERTIES else f".{method}"
            ctx.report(
                call,
                Text(
                    f"`.view()` on the result of `{shown}` likely fails because that tensor is "
                    "not contiguous; use `.reshape()`",
                    f"在 `{shown}` 的结果上调用 `.view()` 很可能失败，因为该张量不连续；请使用 "
                    "`.reshape()`",
                ),
                fixes=[reshape, contiguous],
            )


def _merges_across(source: ast.expr, view: ast.Call) -> bool:
    """Whether ``view`` asks for no more dimensions than there are places where neighbouring
    dimensions of the transposed tensor are not neighbours in memory: then it must merge across
    one of them, which fails (for sizes above 1). Views that may only split, or merge runs the
    transposition kept in order, can work."""
    rank = _view_rank(view)
    breaks = layout.breaks(source)
    return rank is not None and breaks is not None and rank <= breaks


def _splits_trailing(ctx: Context, source: ast.expr, view: ast.Call) -> bool:
    """``x.permute(0, 2, 3, 1).view(n, -1, 4)``: the permutation moves a dimension to the
    end, and the view's last size is a literal with a ``-1`` before it. The view works only
    when that literal is the whole moved dimension (36 channels viewed as ``(..., 4)`` must
    merge the spatial dimensions with part of the channels, which are not neighbours in
    memory); it is reported unless the tensor's literal shape shows they are equal."""
    if layout.method_name(source) != "permute" or not isinstance(source, ast.Call):
        return False
    skip = 0 if isinstance(source.func, ast.Attribute) else 1
    order = layout.int_args(list(source.args[skip:]))
    if not order or source.keywords or len(order) < 3:
        return False
    n = len(order)
    order = [d % n for d in order]
    if sorted(order) != list(range(n)) or order[-1] == order[-2] + 1 or order[-1] == n - 1:
        return False
    args: list[ast.expr] = list(view.args)
    if len(args) == 1 and isinstance(args[0], ast.Tuple | ast.List):
        args = list(args[0].elts)
    if len(args) < 2 or any(isinstance(a, ast.Starred) for a in args):
        return False
    last = layout.int_args(args[-1:])
    if last is None or last[0] <= 1 or layout.int_args(args[:-1]) == []:
        return False
    if not any(layout.int_args([a]) == [-1] for a in args[:-1]):
        return False
    shape = _literal_shape(ctx, layout.receiver(source))
    return shape is None or (len(shape) == n and shape[order[-1]] != last[0])


def _merges_named(ctx: Context, source: ast.expr, view: ast.Call) -> bool:
    """``x.permute(0, 2, 1, 3, 4).view(-1, c, 1, h, w)`` after ``b, c, f, h, w = x.shape``:
    every size but the ``-1`` is a dimension of the permuted tensor, matched from both ends
    (size-1 dimensions may be inserted); the ``-1`` then merges the dimensions left between,
    and when those are not neighbours in memory (here ``b`` and ``f``) the view fails."""
    if layout.method_name(source) != "permute" or not isinstance(source, ast.Call):
        return False
    skip = 0 if isinstance(source.func, ast.Attribute) else 1
    order = layout.int_args(list(source.args[skip:]))
    receiver = layout.receiver(source)
    if not order or source.keywords or receiver is None:
        return False
    n = len(order)
    order = [d % n for d in order]
    args: list[ast.expr] = list(view.args)
    if len(args) == 1 and isinstance(args[0], ast.Tuple | ast.List):
        args = list(args[0].elts)
    free = [i for i, a in enumerate(args) if layout.int_args([a]) == [-1]]
    if sorted(order) != list(range(n)) or len(free) != 1:
        return False
    dims = [layout.dim(ctx.sem, receiver, d) for d in order]
    lo, hi = 0, n - 1
    for i in [*range(free[0]), *range(len(args) - 1, free[0], -1)]:
        if layout.int_args([args[i]]) == [1]:
            continue
        k = lo if i < free[0] else hi
        if k > hi or k < lo or dims[k] is None or layout.size_of(ctx.sem, args[i]) != dims[k]:
            return False
        lo, hi = (lo + 1, hi) if i < free[0] else (lo, hi - 1)
    run = order[lo : hi + 1]
    return any(y != x + 1 for x, y in itertools.pairwise(run))


def _literal_shape(ctx: Context, expr: ast.expr | None) -> list[int] | None:
    """The sizes of a tensor made by a factory with literal sizes (``torch.randn(2, 36, 5,
    5)``), directly or through the name bound to it."""
    if isinstance(expr, ast.Name):
        binding = ctx.sem.lookup(expr.id, expr)
        expr = binding.value if binding is not None and binding.how == "assign" else None
    if not isinstance(expr, ast.Call) or (expr.keywords and len(expr.args) == 0):
        return None
    qual = ctx.qualname(expr.func) or ""
    if qual not in ("torch.randn", "torch.rand", "torch.zeros", "torch.ones", "torch.empty"):
        return None
    return layout.int_args(list(expr.args))


def _view_rank(call: ast.Call) -> int | None:
    """The number of dimensions ``.view(...)`` asks for, when the call writes them out."""
    args: list[ast.expr] = list(call.args)
    if len(args) == 1 and isinstance(args[0], ast.Tuple | ast.List):
        args = list(args[0].elts)
    elif len(args) == 1 and not isinstance(args[0], ast.Constant | ast.UnaryOp | ast.BinOp):
        return None  # ``view(shape)``: a name may hold a whole shape
    if any(isinstance(a, ast.Starred) for a in args):
        return None
    return len(args)


def _root(expr: ast.expr | None) -> ast.expr | None:
    """The name or call at the start of a chain: ``np`` for ``np.zeros(3).T``."""
    while expr is not None:
        if isinstance(expr, ast.Attribute | ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        else:
            return expr
    return None


def _origin_qualname(ctx: Context, expr: ast.expr | None, depth: int = 0) -> str | None:
    """The package a chain's value comes from: ``numpy`` for ``arr`` after ``arr = np.ones(3)``."""
    root = _root(expr)
    if root is None or depth > 4:
        return None
    if isinstance(root, ast.Call):
        qual = ctx.qualname(root.func)
        if qual is None and ctx.sem.local_class(root.func) is not None:
            return "<local class>"
        return qual
    if isinstance(root, ast.Name):
        binding = ctx.sem.lookup(root.id, root)
        if binding is None or binding.pos >= (root.lineno, root.col_offset):
            return None
        if binding.how == "import":
            return binding.qualname
        if binding.how == "assign" and binding.value is not None and binding.index is None:
            return _origin_qualname(ctx, binding.value, depth + 1)
    return None


def _foreign_root(ctx: Context, source: ast.expr) -> bool:
    qual = _origin_qualname(ctx, layout.receiver(source))
    if qual is None:
        return False
    return qual == "<local class>" or qual.split(".")[0] in _FOREIGN_PACKAGES


def _rooted_in_torch(ctx: Context, source: ast.expr) -> bool:
    qual = _origin_qualname(ctx, layout.receiver(source)) or ""
    return qual.split(".")[0] == "torch"


def _user_defined_methods(ctx: Context) -> set[str]:
    names: set[str] = set()
    for cls in ctx.sem.classes:
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(stmt.name)
    return names


def _reinterprets_dtype(ctx: Context, call: ast.Call) -> bool:
    """``x.view(torch.int32)`` / ``x.view(y.dtype)`` / ``x.view(dtype)``: not a shape."""
    if len(call.args) != 1:
        return False
    arg = call.args[0]
    if isinstance(arg, ast.Constant):
        return isinstance(arg.value, str)
    if isinstance(arg, ast.Attribute):
        return arg.attr == "dtype" or ctx.qualname(arg) is not None
    if isinstance(arg, ast.Name):
        return "dtype" in arg.id.lower() or ctx.qualname(arg) is not None
    return False

from __future__ import annotations

import ast
import itertools

from ..core import fixes, layout
from ..core.context import Context
from ..core.model import Applicability, Edit, Fix, Pos, Text
from .base import Rule
from .examples import tdr101

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

    An integer index on a middle dimension, with the dimensions before it taken whole and more
    after it (`x[:, c, ...]`, `x[:, :, c, :]`: one channel of a batch; `c` a literal, a name
    assigned one, or the counter of a loop over `range(...)`), is not contiguous either: the
    dropped dimension leaves a gap in memory between its neighbours, so `.view(-1)` of it fails
    (for two or more channels). Such a value is followed to a view of it directly, through
    local names, and into a function of the file that a call passes it to
    (`dice_coeff(input[:, channel, ...], ...)` for `input.view(-1)` in `dice_coeff`); a view
    that keeps the merged dimensions apart (`.view(n, -1)`) works and is not reported.

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

    VALID = tdr101.VALID
    INVALID = tdr101.INVALID

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
            ctx.report(call, _message(ctx, source, call), fixes=[reshape, contiguous])


def _message(ctx: Context, source: ast.expr, view: ast.Call) -> Text:
    method = layout.method_name(source)
    if isinstance(source, ast.Subscript):
        shown = ctx.segment(source)
        shown = shown if len(shown) <= 40 else "x[:, i, ...]"
        where = f" (line {source.lineno})" if source.lineno != view.lineno else ""
        return Text(
            f"`.view()` likely fails on `{shown}`{where}: an integer index on a middle "
            "dimension leaves a gap in memory between its neighbours, so the tensor is not "
            "contiguous; use `.reshape()`",
            f"`.view()` 很可能在 `{shown}`{where} 上失败：对中间维度用整数索引会在相邻维度之间"
            "留下内存间隙，该张量不连续；请使用 `.reshape()`",
        )
    shown = f".{method}()" if method not in layout.REORDERING_PROPERTIES else f".{method}"
    return Text(
        f"`.view()` on the result of `{shown}` likely fails because that tensor is "
        "not contiguous; use `.reshape()`",
        f"在 `{shown}` 的结果上调用 `.view()` 很可能失败，因为该张量不连续；请使用 `.reshape()`",
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

"""How the memory layout of a tensor follows through code: which call reordered the strides a
value walks its memory with (``Reordered``).

A transposition (``.t()``, ``.T``, ``.mT``, ``.transpose()``, ``.permute()``, ``.swapaxes()``,
``.swapdims()``, ``.movedim()``, ``torch.transpose(x, ...)``) or an ``.expand()`` returns a view
with reordered (or zero) strides. What the code then does to that view keeps the layout or ends
it; checked on torch 2.x CPU tensors:

- elementwise methods and operators (``eq``, ``ne``, comparisons, arithmetic, ``.float()``,
  ``.type(dtype)``, ``.to(...)``, ``.bool()``, ``.abs()``, ``.sigmoid()`` ...): TensorIterator
  lays its output out like its first operand when that operand is a permuted dense tensor
  (``pred.t().eq(target)`` is not contiguous, ``target.eq(pred.t())`` is). Only the receiver of
  a method, the left operand of an operator (or the right one after a number: ``2 * x``) and the
  operand of a unary operator carry their layout on;
- ``.clone()``, ``.detach()``, ``.cpu()`` and ``.to()`` use ``preserve_format``: the copy has the
  same permuted strides (``x.t().clone().is_contiguous()`` is False), unless a
  ``memory_format=`` says otherwise;
- basic slicing (``x[:k]``, ``x[:k, :]``, ``x[..., 1:]``) keeps the strides; a slice of at most
  one element along a dimension may make the dimensions mergeable again, and an integer index
  drops a dimension, so neither is followed;
- ``.contiguous()``, ``.reshape()``, reductions and every other call end the trace.

An ``.expand()`` is followed only directly: an elementwise result of an expanded tensor is
contiguous (``x.expand(4, 3) + 1``).

An integer index on a middle dimension with the dimensions before it taken whole and more after
it (``x[:, c, ...]``, ``x[:, :, c, :]``: one channel of a batch) drops that dimension and leaves a
gap in memory between its neighbours: the result cannot be flattened across them without a copy
(``x[:, c, ...].view(-1)`` fails for two or more channels). Such a value is followed only
directly too (an elementwise result of it is contiguous).

A parameter of a function of the file has the layout a call of the function in the file passes
it (``dice_coeff(input[:, channel, ...], ...)`` for ``input.view(-1)`` in ``dice_coeff``).
"""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass

from . import arguments
from .semantic import FUNCTION_NODES, Semantic, has_star_kwargs

REORDERING_METHODS = frozenset(
    {"t", "transpose", "permute", "swapaxes", "swapdims", "movedim", "expand"}
)
REORDERING_PROPERTIES = frozenset({"T", "mT"})
REORDERING_FUNCTIONS = frozenset(
    f"torch.{name}" for name in ("t", "transpose", "permute", "swapaxes", "swapdims", "movedim")
)

# Methods whose result has the receiver's (permuted, dense) strides: elementwise operations
# through TensorIterator, and copies in ``preserve_format``.
LAYOUT_KEEPING_METHODS = frozenset(
    {
        # comparisons
        "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or",
        "isnan", "isinf", "isfinite",
        # arithmetic
        "add", "sub", "mul", "div", "true_divide", "floor_divide", "remainder", "fmod", "pow",
        "neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "reciprocal",
        "sigmoid", "tanh", "relu", "clamp", "clamp_min", "clamp_max", "clip", "round",
        "floor", "ceil", "trunc", "square",
        # dtype and device conversions, copies (preserve_format)
        "float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte", "char",
        "type", "to", "cpu", "cuda", "clone", "detach",
    }
)  # fmt: skip
# Copies that take a ``memory_format=`` (a contiguous one ends the permuted layout).
_FORMAT_METHODS = frozenset({"to", "clone", "cpu", "cuda", "float", "double", "half", "type"})
_LAYOUT_KEEPING_OPS = (
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow,
    ast.BitAnd, ast.BitOr, ast.BitXor,
)  # fmt: skip
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class Reordered:
    """A value whose strides come from ``source``, a transposing call or property, through
    layout-keeping steps; ``sliced``: a basic slice was taken on the way."""

    source: ast.expr
    sliced: bool = False
    direct: bool = True  # ``source`` itself (or a name bound to it), with no step between


def reorders(sem: Semantic, expr: ast.expr) -> bool:
    """Whether ``expr`` is a transposition (or ``.expand()``) that changes the order of the
    dimensions: ``x.permute(0, 1, 2)`` and ``x.transpose(1, 1)`` do not."""
    if isinstance(expr, ast.Attribute):
        return expr.attr in REORDERING_PROPERTIES and sem.qualname(expr) is None
    if isinstance(expr, ast.Call):
        func = expr.func
        qual = sem.qualname(func)
        if qual is not None:
            return qual in REORDERING_FUNCTIONS and bool(expr.args) and not keeps_order(expr, 1)
        return (
            isinstance(func, ast.Attribute)
            and func.attr in REORDERING_METHODS
            and not keeps_order(expr, 0)
        )
    return False


def reordered(sem: Semantic, expr: ast.expr, _depth: int = 0) -> Reordered | None:
    """The transposition whose layout ``expr`` has, followed through local names of the same
    function, elementwise operations, copies that preserve the format, and basic slices."""
    if _depth > 12:
        return None
    if reorders(sem, expr) or drops_middle_dim(sem, expr):
        return Reordered(expr)
    if isinstance(expr, ast.Name):
        value = _assigned_value(sem, expr)
        if value is None:
            return _passed(sem, expr, _depth)
        return reordered(sem, value, _depth + 1)
    inner: ast.expr | None = None
    sliced = False
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if _keeps_layout(sem, expr):
            inner = expr.func.value
    elif isinstance(expr, ast.BinOp) and isinstance(expr.op, _LAYOUT_KEEPING_OPS):
        inner = expr.right if _is_number(expr.left) else expr.left
    elif isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        inner = expr.comparators[0] if _is_number(expr.left) else expr.left
    elif isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub | ast.Invert):
        inner = expr.operand
    elif isinstance(expr, ast.Subscript) and _basic_slice(expr.slice):
        inner, sliced = expr.value, True
    found = None if inner is None else reordered(sem, inner, _depth + 1)
    if found is None or not _steps_keep(found.source):
        return None
    return Reordered(found.source, sliced=found.sliced or sliced, direct=False)


def _steps_keep(source: ast.expr) -> bool:
    """Whether elementwise steps and slices keep the layout ``source`` made: a transposition's
    (a dense, permuted tensor), not an ``.expand()``'s or a dropped middle dimension's."""
    return not isinstance(source, ast.Subscript) and method_name(source) != "expand"


def drops_middle_dim(sem: Semantic, expr: ast.expr) -> bool:
    """``x[:, c, ...]``, ``x[:, c, :]``, ``x[:, :, c, :]``: an index that takes the dimensions
    before it whole, drops a middle one with an integer (a literal, or a name the code shows
    holds one: not a tensor of indices, which would copy) and keeps at least one dimension
    after it (a slice or ``...``)."""
    if not isinstance(expr, ast.Subscript) or not isinstance(expr.slice, ast.Tuple):
        return False
    parts = expr.slice.elts
    for i, part in enumerate(parts):
        if isinstance(part, ast.Slice):
            if not _whole(part):
                return False
            continue
        if i == 0 or not _integer(sem, part):
            return False
        after = parts[i + 1 :]
        return bool(after) and all(
            _whole(p) or (isinstance(p, ast.Constant) and p.value is Ellipsis) for p in after
        )
    return False


def _integer(sem: Semantic, expr: ast.expr) -> bool:
    """A literal integer, a name assigned one, or the counter of a loop over ``range(...)``."""
    if isinstance(expr, ast.Constant):
        return type(expr.value) is int
    if not isinstance(expr, ast.Name):
        return False
    binding = sem.lookup(expr.id, expr)
    if binding is None:
        return False
    if binding.how == "assign" and binding.index is None:
        value = binding.value
        return isinstance(value, ast.Constant) and type(value.value) is int
    loop = sem.parent(binding.node) if binding.how == "loop" else None
    if not isinstance(loop, ast.For | ast.comprehension) or loop.target is not binding.node:
        return False
    it = loop.iter
    return (
        isinstance(it, ast.Call)
        and isinstance(it.func, ast.Name)
        and it.func.id == "range"
        and sem.lookup("range", it.func) is None
    )


def _passed(sem: Semantic, name: ast.Name, depth: int) -> Reordered | None:
    """The layout a parameter of a function of the file gets from a call of the function in
    the file that passes it a reordered value (the first such call)."""
    binding = sem.lookup(name.id, name)
    if binding is None or binding.how != "param" or not isinstance(binding.scope, FUNCTION_NODES):
        return None
    func = binding.scope
    if sem.scope_of(name).node is not func or isinstance(sem.parent(func), ast.ClassDef):
        return None
    signature = arguments.signature_of(func)
    for call in sem.calls_by_name.get(func.name, ()):
        if sem.local_function(call.func) is not func:
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or has_star_kwargs(call):
            continue
        value = arguments.bind(call, signature).value(binding.name)
        found = None if value is None else reordered(sem, value, depth + 1)
        if found is not None:
            return Reordered(found.source, sliced=found.sliced, direct=False)
    return None


def keeps_order(call: ast.Call, skip: int) -> bool:
    """``permute(0, 1, 2)`` or ``transpose(1, 1)``: literal dimensions that change nothing."""
    args = call.args[skip:]
    dims = [a.value for a in args if isinstance(a, ast.Constant) and type(a.value) is int]
    if not args or len(dims) != len(args) or call.keywords:
        return False
    name = method_name(call)
    if name == "permute":
        return dims == list(range(len(dims)))
    if name in ("transpose", "swapaxes", "swapdims", "movedim"):
        return len(dims) == 2 and dims[0] == dims[1]
    return False


def _keeps_layout(sem: Semantic, call: ast.Call) -> bool:
    func = call.func
    assert isinstance(func, ast.Attribute)
    if func.attr not in LAYOUT_KEEPING_METHODS or sem.qualname(func) is not None:
        return False
    if func.attr == "type" and not call.args and not call.keywords:
        return False  # ``x.type()`` is the type's name
    return not (
        func.attr in _FORMAT_METHODS and any(k.arg == "memory_format" for k in call.keywords)
    )


def _is_number(expr: ast.expr) -> bool:
    if isinstance(expr, ast.UnaryOp):
        expr = expr.operand
    return isinstance(expr, ast.Constant) and type(expr.value) in (int, float)


def _basic_slice(index: ast.expr) -> bool:
    """``[:k]``, ``[:k, :]``, ``[..., 1:]``: slices and ellipses only, none of them a literal
    range of at most one element (``[:1]``, ``[2:3]``)."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    for part in parts:
        if isinstance(part, ast.Constant) and part.value is Ellipsis:
            continue
        if not isinstance(part, ast.Slice):
            return False
        lower, upper = _literal(part.lower, 0), _literal(part.upper, None)
        if lower is not None and upper is not None and upper - lower <= 1 and lower >= 0:
            return False
    return True


def _literal(expr: ast.expr | None, default: int | None) -> int | None:
    if expr is None:
        return default
    if isinstance(expr, ast.Constant) and type(expr.value) is int:
        return expr.value
    return None


def _assigned_value(sem: Semantic, name: ast.Name) -> ast.expr | None:
    """The value a plain assignment of the same function gave ``name`` before this use
    (comprehensions read their function's names)."""
    binding = sem.lookup(name.id, name)
    if (
        binding is None
        or binding.how != "assign"
        or binding.index is not None
        or binding.value is None
        or binding.pos >= (name.lineno, name.col_offset)
    ):
        return None
    scope = sem.scope_of(name)
    while isinstance(scope.node, _COMPREHENSIONS) and scope.parent is not None:
        scope = scope.parent
    return binding.value if scope.node is binding.scope else None


def dim(sem: Semantic, tensor: ast.expr, index: int, _depth: int = 0) -> tuple[int, int] | None:
    """A token for dimension ``index`` of the tensor a name holds: equal tokens are the same
    size. A basic slice keeps the sizes of the dimensions it takes whole (``x = x[:, :, 1:]``
    keeps dimensions 0, 1, 3, ...), so they keep their tokens."""
    if not isinstance(tensor, ast.Name) or index < 0 or _depth > 8:
        return None
    binding = sem.lookup(tensor.id, tensor)
    if binding is None or binding.pos >= (tensor.lineno, tensor.col_offset):
        return None
    value = binding.value
    if binding.how == "assign" and binding.index is None and isinstance(value, ast.Subscript):
        parts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
        if all(isinstance(p, ast.Slice) for p in parts):
            whole = index >= len(parts) or _whole(parts[index])
            return dim(sem, value.value, index, _depth + 1) if whole else None
    return (id(binding), index)


def size_of(sem: Semantic, expr: ast.expr) -> tuple[int, int] | None:
    """The dimension whose size ``expr`` is (a token as ``dim`` gives): ``x.size(1)``,
    ``x.shape[1]``, or a name unpacked from ``x.shape`` / ``x.size()`` (``b, c, h, w =
    x.shape``)."""
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if (
            binding is None
            or binding.how != "assign"
            or binding.value is None
            or binding.pos >= (expr.lineno, expr.col_offset)
        ):
            return None
        if binding.index is None:
            return _size_expr(sem, binding.value, None)
        return _size_expr(sem, binding.value, binding.index)
    return _size_expr(sem, expr, None)


def _size_expr(sem: Semantic, expr: ast.expr, unpacked: int | None) -> tuple[int, int] | None:
    if isinstance(expr, ast.Subscript) and unpacked is None:
        index = _literal(expr.slice, None)
        return None if index is None else _shape_of(sem, expr.value, index)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr != "size" or expr.keywords:
            return None
        if unpacked is not None:
            return None if expr.args else dim(sem, expr.func.value, unpacked)
        index = _literal(expr.args[0], None) if len(expr.args) == 1 else None
        return None if index is None else dim(sem, expr.func.value, index)
    if unpacked is not None:
        return _shape_of(sem, expr, unpacked)
    return None


def _shape_of(sem: Semantic, expr: ast.expr, index: int) -> tuple[int, int] | None:
    if isinstance(expr, ast.Attribute) and expr.attr == "shape":
        return dim(sem, expr.value, index)
    return None


def _whole(part: ast.expr) -> bool:
    return isinstance(part, ast.Slice) and part.lower is part.upper is part.step is None


def breaks(source: ast.expr) -> int | None:
    """A lower bound of the places where neighbouring dimensions of the transposed tensor are
    not neighbours in memory (the input taken as contiguous); None when the code does not say."""
    if isinstance(source, ast.Subscript):
        return 1  # the dimensions around the dropped one
    name = method_name(source)
    if isinstance(source, ast.Attribute) or name in ("t", "expand"):
        return 1  # ``.T``/``.mT``/``.t()`` swap two dimensions; ``expand`` adds stride-0 ones
    assert isinstance(source, ast.Call)
    skip = 0 if isinstance(source.func, ast.Attribute) and name in REORDERING_METHODS else 1
    dims = int_args(source.args[skip:])
    if dims is None or source.keywords:
        return None
    if name == "permute":
        n = len(dims)
        if n == 0 or sorted(d % n for d in dims) != list(range(n)):
            return None
        order = [d % n for d in dims]
    elif len(dims) == 2 and (min(dims) >= 0 or max(dims) < 0):
        # Only the dimensions up to the larger one (or from the smaller negative one) are known.
        n = max(dims) + 1 if min(dims) >= 0 else -min(dims)
        a, b = (d % n for d in dims)
        order = list(range(n))
        if name == "movedim":
            order.remove(a)
            order.insert(b, a)
        else:
            order[a], order[b] = b, a
    else:
        return None
    return sum(1 for x, y in itertools.pairwise(order) if y != x + 1)


def int_args(args: list[ast.expr]) -> list[int] | None:
    if len(args) == 1 and isinstance(args[0], ast.Tuple | ast.List):
        args = list(args[0].elts)
    out: list[int] = []
    for arg in args:
        if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub):
            inner = int_args([arg.operand])
            if inner is None:
                return None
            out.append(-inner[0])
        elif isinstance(arg, ast.Constant) and type(arg.value) is int:
            out.append(arg.value)
        else:
            return None
    return out


def receiver(expr: ast.expr) -> ast.expr | None:
    """What a transposing expression transposes (or an index indexes)."""
    if isinstance(expr, ast.Attribute | ast.Subscript):
        return expr.value
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in REORDERING_METHODS:
            return expr.func.value
        return expr.args[0] if expr.args else None
    return None


def method_name(expr: ast.expr) -> str:
    """``permute`` for ``x.permute(...)`` and ``torch.permute(x, ...)``, ``T`` for ``x.T``,
    ``[]`` for an index that drops a middle dimension."""
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Subscript):
        return "[]"
    assert isinstance(expr, ast.Call)
    func = expr.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else "transpose"

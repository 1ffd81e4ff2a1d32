"""What the live rules (TDR901-TDR904) share: which names can be judged by their live value, the
operands they look at, and what to ask the kernel for. No kernel, no torch, no
``jupyter_client`` here; kernel facts come from the analysis context (``ctx.live``).

A name is judged by its live value only where that value is what the code would see: the use is
module-level code (not inside a function, lambda or class body), the name is not an import,
and the cell (notebook cell, ``# %%`` region, or the whole file) neither rebinds it nor calls a
method that moves or reshapes it in place. Anything else stays silent.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from ..core import kinds, training
from ..core.kinds import Kind
from ..core.live_facts import FactDict, LiveFacts, ProbeRequest, ViewItem, is_valid_name
from ..core.model import Text
from ..core.semantic import FUNCTION_NODES, dotted, int_literal

if TYPE_CHECKING:
    from ..core.context import Context

LIVE_CODES = frozenset({"TDR901", "TDR902", "TDR903", "TDR904"})
MAX_NAMES = 64

# Methods that change a tensor's or a module's device, dtype, shape or strides in place.
MUTATING_METHODS = frozenset({
    "to", "cuda", "cpu", "half", "float", "double", "bfloat16", "type", "to_empty", "xpu", "mps",
    "apply", "load_state_dict", "share_memory_", "requires_grad_", "train", "eval",
    "t_", "transpose_", "resize_", "resize_as_", "as_strided_", "set_", "squeeze_", "unsqueeze_",
    "swapdims_", "swapaxes_", "detach_", "module",
})  # fmt: skip
# Torch functions that take tensors but do not require them on one device.
_NOT_DEVICE_STRICT = frozenset({
    "torch.save", "torch.load", "torch.device", "torch.tensor", "torch.as_tensor", "torch.is_tensor",
    "torch.numel", "torch.typename", "torch.set_default_device", "torch.manual_seed",
    "torch.compile", "torch.no_grad", "torch.inference_mode", "torch.autocast", "torch.Size",
    "torch.set_grad_enabled", "torch.is_floating_point", "torch.is_complex", "torch.sym_int",
})  # fmt: skip
_DEVICE_STRICT_METHODS = frozenset({
    "matmul", "mm", "bmm", "dot", "add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne",
    "lt", "le", "gt", "ge", "expand_as", "masked_fill", "where",
})  # fmt: skip
_MATMUL_FUNCS = frozenset({
    "torch.matmul", "torch.mm", "torch.bmm", "torch.nn.functional.linear", "torch.mv",
    "torch.addmm", "torch.baddbmm",
})  # fmt: skip
_MATMUL_METHODS = frozenset({"matmul", "mm", "bmm", "mv"})
FLOATING = ("torch.float16", "torch.bfloat16", "torch.float32", "torch.float64")
_CELL_MARKER = re.compile(r"^#\s*%%")
_BUILTINS = frozenset(dir(builtins))


# -- facts from the caller ---------------------------------------------------------------
def judge_for(ctx: Context) -> Judge | None:
    """A judge of the kernel facts the caller attached, or None (live rules stay silent)."""
    live = live_from(ctx)
    return Judge(ctx, live) if live is not None else None


def live_from(ctx: Context) -> LiveFacts | None:
    """The kernel facts of the analysis, or None (live rules stay silent)."""
    return ctx.live


def stamp(live: LiveFacts) -> Text:
    """``Live (after In [7])``: the prefix of every live message."""
    n = live.execution_count
    if n is None:
        return Text("Live", "实时")
    return Text(f"Live (after In [{n}])", f"实时（In [{n}] 之后）")


def message(live: LiveFacts, en: str, zh: str) -> Text:
    prefix = stamp(live)
    return Text(f"{prefix.en}: {en}", f"{prefix.zh}：{zh}")


# -- which names can be judged by their live value ---------------------------------------
class _CellFacts:
    """Per cell: root names rebound or mutated there."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._cache: dict[tuple[int, int], frozenset[str]] = {}
        self._script_cells: list[tuple[int, int]] | None = None

    def bounds(self, row: int) -> tuple[int, int]:
        nb = self.ctx.notebook
        if nb is not None:
            cell = nb.cell_at(row)
            if cell is not None:
                return cell.start_row, cell.start_row + cell.rows - 1
            return row, row
        if self._script_cells is None:
            lines = self.ctx.source.lines
            starts = [i + 1 for i, line in enumerate(lines) if _CELL_MARKER.match(line)]
            if not starts or starts[0] != 1:
                starts.insert(0, 1)
            ends = [s - 1 for s in starts[1:]] + [len(lines)]
            self._script_cells = list(zip(starts, ends, strict=True))
        for first, last in self._script_cells:
            if first <= row <= last:
                return first, last
        return row, row

    def unstable(self, row: int) -> frozenset[str]:
        key = self.bounds(row)
        if key not in self._cache:
            self._cache[key] = _unstable_roots(self.ctx.tree, *key)
        return self._cache[key]


def _root(expr: ast.AST) -> str | None:
    while isinstance(expr, ast.Attribute | ast.Subscript | ast.Call):
        expr = expr.value if not isinstance(expr, ast.Call) else expr.func
    return expr.id if isinstance(expr, ast.Name) else None


def _unstable_roots(tree: ast.Module, first: int, last: int) -> frozenset[str]:
    out: set[str] = set()
    for stmt in tree.body:
        if stmt.end_lineno is None or stmt.end_lineno < first or stmt.lineno > last:
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
                out.add(node.id)
            elif isinstance(node, ast.Attribute | ast.Subscript) and isinstance(
                node.ctx, ast.Store | ast.Del
            ):
                root = _root(node)
                if root:
                    out.add(root)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    out.add((alias.asname or alias.name).split(".")[0])
            elif isinstance(node, (*FUNCTION_NODES, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, ast.Global | ast.Nonlocal):
                out.update(node.names)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in MUTATING_METHODS
            ):
                root = _root(node.func.value)
                if root:
                    out.add(root)
    return frozenset(out)


def _at_module_level(ctx: Context, node: ast.AST) -> bool:
    for anc in ctx.sem.ancestors(node):
        if isinstance(anc, (*FUNCTION_NODES, ast.Lambda, ast.ClassDef)):
            return False
    return True


def _name_node(expr: ast.AST) -> str | None:
    """``x`` or ``model.fc.weight`` (Names and attributes only)."""
    name = dotted(expr) if isinstance(expr, ast.Name | ast.Attribute) else None
    return name if name and is_valid_name(name) else None


class Judge:
    """Answers "what is the live value of this expression", or None when unsure."""

    def __init__(self, ctx: Context, live: LiveFacts) -> None:
        self.ctx = ctx
        self.live = live
        self.cells = _CellFacts(ctx)

    def name(self, expr: ast.AST) -> str | None:
        name = _name_node(expr)
        if name is None:
            return None
        root = name.split(".")[0]
        binding = self.ctx.sem.lookup(root, expr)
        if binding is None and root in _BUILTINS:
            return None
        if binding is not None and (
            binding.how in ("import", "def", "class") or binding.scope is not self.ctx.tree
        ):
            return None
        if not _at_module_level(self.ctx, expr):
            return None
        if root in self.cells.unstable(getattr(expr, "lineno", 0)):
            return None
        return name

    def tensor(self, expr: ast.AST) -> tuple[str, FactDict] | None:
        name = self.name(expr)
        facts = self.live.tensor(name) if name else None
        return (name, facts) if name and facts else None

    def module(self, expr: ast.AST) -> tuple[str, FactDict] | None:
        name = self.name(expr)
        facts = self.live.module(name) if name else None
        return (name, facts) if name and facts else None


def size_ref(expr: ast.AST) -> tuple[ast.AST, int] | None:
    """``x.size(0)``, ``x.shape[0]``, ``x.size()[-1]`` -> (``x``, dim)."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
        if expr.func.attr == "size" and len(expr.args) == 1 and not expr.keywords:
            dim = int_literal(expr.args[0])
            if dim is not None:
                return expr.func.value, dim
    if isinstance(expr, ast.Subscript):
        dim = int_literal(expr.slice)
        if dim is None:
            return None
        base = expr.value
        if isinstance(base, ast.Attribute) and base.attr == "shape":
            return base.value, dim
        if (
            isinstance(base, ast.Call)
            and isinstance(base.func, ast.Attribute)
            and base.func.attr == "size"
            and not base.args
            and not base.keywords
        ):
            return base.func.value, dim
    return None


def view_args(call: ast.Call) -> list[ast.expr] | None:
    """The size arguments of ``x.view(...)``: ``view(a, b)`` or ``view((a, b))``."""
    if call.keywords or not call.args or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    if len(call.args) == 1 and isinstance(call.args[0], ast.Tuple | ast.List):
        elts = call.args[0].elts
        return None if any(isinstance(e, ast.Starred) for e in elts) else list(elts)
    return list(call.args)


def view_spec(args: Sequence[ast.expr], name_of: Any) -> tuple[ViewItem, ...] | None:
    spec: list[ViewItem] = []
    for arg in args:
        value = int_literal(arg)
        if value is not None:
            if value < -1:
                return None
            spec.append(value)
            continue
        ref = size_ref(arg)
        if ref is None:
            return None
        other = name_of(ref[0])
        if other is None:
            return None
        spec.append((other, ref[1]))
    return tuple(spec) if spec else None


def view_calls(ctx: Context) -> Iterator[ast.Call]:
    for call in ctx.sem.calls_by_attr.get("view", ()):
        if isinstance(call.func, ast.Attribute):
            yield call


def outside_autocast(ctx: Context, node: ast.AST) -> bool:
    for with_node in ctx.sem.enclosing_withs(node):
        if any(training.is_autocast(ctx.sem, item.context_expr) for item in with_node.items):
            return False
    return True


def is_zero_dim_cpu(facts: FactDict) -> bool:
    return facts.get("shape") == [] and facts.get("device") == "cpu"


def module_device(facts: FactDict) -> str | None:
    device = facts.get("first_device")
    return device if isinstance(device, str) else None


def module_dtype(facts: FactDict) -> str | None:
    """The one floating dtype of a module's parameters, or None when mixed or unknown."""
    dtypes = [d for d in facts.get("dtypes") or () if d in FLOATING]
    return dtypes[0] if len(dtypes) == 1 else None


def short(dtype: object) -> str:
    return str(dtype).removeprefix("torch.")


# -- device and dtype operands -----------------------------------------------------------
def device_operands(ctx: Context, judge: Judge) -> Iterator[tuple[ast.AST, list[ast.AST]]]:
    """Expressions whose tensor operands must share one device, with those operands."""
    sem = ctx.sem
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.BinOp):
            yield node, [node.left, node.right]
        elif (
            isinstance(node, ast.Compare)
            and len(node.comparators) == 1
            and isinstance(node.ops[0], ast.Eq | ast.NotEq | ast.Lt | ast.LtE | ast.Gt | ast.GtE)
        ):
            yield node, [node.left, node.comparators[0]]
        elif isinstance(node, ast.Call):
            qual = sem.qualname(node.func)
            if qual is not None:
                parts = qual.split(".")
                strict = (len(parts) == 2 and parts[0] == "torch") or qual.startswith(
                    "torch.nn.functional."
                )
                if strict and qual not in _NOT_DEVICE_STRICT and not qual.endswith("_like"):
                    yield node, _tensor_args(node)
                continue
            func = node.func
            if judge.module(func) is not None:
                yield node, [func, *node.args]
            elif (
                isinstance(func, ast.Attribute)
                and func.attr in _DEVICE_STRICT_METHODS
                and len(node.args) >= 1
            ):
                yield node, [func.value, *node.args]


def _tensor_args(call: ast.Call) -> list[ast.AST]:
    out: list[ast.AST] = []
    for arg in [*call.args, *(k.value for k in call.keywords if k.arg)]:
        if isinstance(arg, ast.List | ast.Tuple):
            out.extend(arg.elts)
        else:
            out.append(arg)
    return out


def matmul_operands(ctx: Context) -> Iterator[tuple[ast.AST, list[ast.AST]]]:
    """Matrix products: ``a @ b``, ``torch.matmul(a, b)``, ``F.linear(x, w)``, ``a.mm(b)``,
    and calls of modules (``model(x)``: operands are the module and its first argument)."""
    sem = ctx.sem
    for node in ast.walk(ctx.tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            yield node, [node.left, node.right]
        elif isinstance(node, ast.Call) and not node.keywords:
            qual = sem.qualname(node.func)
            if qual in _MATMUL_FUNCS:
                args = node.args[:2] if qual != "torch.addmm" else node.args[1:3]
                if qual == "torch.baddbmm":
                    args = node.args[1:3]
                yield node, list(args)
            elif (
                qual is None
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MATMUL_METHODS
            ):
                yield node, [node.func.value, *node.args[:1]]
            elif qual is None and node.args:
                yield node, [node.func, node.args[0]]


# -- what to ask the kernel ----------------------------------------------------------------
def probe_request(ctx: Context, limit: int = MAX_NAMES) -> ProbeRequest:
    """What to ask the kernel for the document of ``ctx``: the names worth probing (operands of
    the expressions the live rules look at) and the ``view`` shapes to replay."""
    judge = Judge(ctx, LiveFacts())
    names: dict[str, None] = {}
    views: list[tuple[str, tuple[ViewItem, ...]]] = []

    def add(expr: ast.AST) -> None:
        name = judge.name(expr)
        if name is not None and len(names) < limit:
            names.setdefault(name, None)

    for call in view_calls(ctx):
        assert isinstance(call.func, ast.Attribute)
        target = judge.name(call.func.value)
        args = view_args(call)
        if target is None or args is None:
            continue
        spec = view_spec(args, judge.name)
        if spec is not None and len(views) < limit:
            views.append((target, spec))
    for _node, operands in device_operands(ctx, judge):
        for op in operands:
            add(op)
    for node, operands in matmul_operands(ctx):
        if (
            isinstance(node, ast.Call)
            and operands
            and operands[0] is node.func
            and not (isinstance(node.func, ast.Name) and judge.name(node.func))
        ):
            continue  # a call of something other than a plain name: not a model call
        for op in operands:
            add(op)
    return ProbeRequest.of(list(names), views, kernel=True)


# -- small helpers shared by the rules ----------------------------------------------------
def dataset_class(ctx: Context, expr: ast.expr | None) -> ast.ClassDef | None:
    """The ``Dataset`` subclass defined in this document that ``expr`` is an instance of."""
    if expr is None:
        return None
    value: ast.expr | None = expr
    if isinstance(expr, ast.Name):
        binding = ctx.sem.lookup(expr.id, expr)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return None
        value = binding.value
    if not isinstance(value, ast.Call):
        return None
    cls = ctx.sem.local_class(value.func)
    if cls is None or kinds.class_kind(ctx.sem, cls) is not Kind.DATASET:
        return None
    return cls

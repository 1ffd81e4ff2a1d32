"""Deprecated and removed PyTorch APIs, as data: one row per symbol, read by the TDR8xx rules.

Each row was checked against torch 2.13's own sources: the warning it raises (``warnings.warn``,
``@deprecated(..., category=FutureWarning)``), the error a removed function's stub raises, or,
for APIs that only the documentation marks as deprecated, the ``.. warning::`` of the docstring
(``how`` says which). ``since`` is the first version torchdoctor reports the row for (the version
the deprecation is known to apply to; earlier targets are not told), ``removed`` the version from
which a call fails.

Fix templates (``fix``):

- ``rename``: replace the callee by ``replacement`` (``max_args`` / ``kwargs`` limit the
  arguments it applies to; ``extra`` adds keywords, e.g. ``mode="nearest"``),
- ``qr``, ``cholesky``, ``chain_matmul``, ``range``, ``legacy_ctor``: argument rewrites,
- ``attr_call`` / ``attr_rename``: a deprecated attribute (not a call) becomes a call / a name.
- ``weight_norm``: ``rename``, unless the file relies on what only the old function makes.

A fix spells new names through the names the file already has (``F.interpolate`` after
``import torch.nn.functional as F``, ``T.linalg.qr`` after ``import torch as T``), adds
``import torch`` when the file has no ``torch`` name, and offers nothing when that name is taken.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial

from ..core import fixes, kinds, torch_version
from ..core.context import Context
from ..core.model import Applicability, Edit, Fix, Text
from ..core.semantic import (
    argument,
    canonical,
    has_star_kwargs,
    int_literal,
    keyword,
)

SAFE, UNSAFE = Applicability.SAFE, Applicability.UNSAFE

# TorchFix codes whose rule lives outside the TDR8xx modules (the TDR8xx rules declare their
# own ``aliases``). A tuple means the TorchFix check is split over several rules, the one about
# what the TorchFix check is about first (``torchdoctor rule TOR102`` starts with it).
TORCHFIX_ALIASES: dict[str, str | tuple[str, ...]] = {
    "TOR003": "TDR405",
    "TOR102": ("TDR603", "TDR602"),
    "TOR401": "TDR310",
}


@dataclass(frozen=True)
class ApiEntry:
    symbol: str  # canonical qualified name
    replacement: str | None  # what to use instead (a qualified name, or advice in backticks)
    since: str | None = None  # first torch version this row applies to
    removed: str | None = None  # version from which calling it fails
    fix: str | None = None  # fix template, see the module docstring
    safety: Applicability = SAFE
    max_args: int | None = None  # rename: most positional arguments the fix accepts
    kwargs: frozenset[str] | None = None  # rename: keywords the fix accepts (None: any)
    extra: str = ""  # rename: keywords the fix adds
    drop_in: bool = False  # same signature and behaviour: imports may be rewritten too
    when_keyword: tuple[str, object] | None = None  # only calls passing this literal keyword
    how: str = "warning"  # how torch 2.13 marks it: warning | error | docs | legacy
    torchfix: bool = False  # also in TorchFix 0.7's table
    note: Text | None = None

    @property
    def opt_in(self) -> bool:
        """Reported by TDR813 (off by default), not TDR804: the deprecation is in the docs
        only, or a legacy spelling that behaves the same, or TorchScript, whose warning the
        code using it can rarely act on."""
        return self.how in ("docs", "legacy") or self.symbol.startswith("torch.jit.")

    @property
    def is_attribute(self) -> bool:
        return self.fix in ("attr_call", "attr_rename")

    def status(self, ctx: Context) -> str | None:
        """``removed``, ``deprecated`` or None (not yet deprecated for the target version)."""
        if self.removed and torch_version.at_least(ctx.settings, self.removed):
            return "removed"
        if torch_version.at_least(ctx.settings, self.since):
            return "deprecated"
        return None


def _t(en: str, zh: str) -> Text:
    return Text(en, zh)


_NO_ARGS = frozenset[str]()
_LINALG_19 = "1.9"
_FUNCTORCH = ("vmap", "grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functionalize")
_LEGACY_DTYPES = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "ByteTensor": "uint8",
    "CharTensor": "int8",
    "ShortTensor": "int16",
    "IntTensor": "int32",
    "LongTensor": "int64",
    "BoolTensor": "bool",
}
_JIT = {
    "script": "torch.compile` or `torch.export",
    "trace": "torch.compile` or `torch.export",
    "trace_module": "torch.compile` or `torch.export",
    "script_method": "torch.compile` or `torch.export",
    "save": "torch.export.save",
    "load": "torch.export.load",
    "freeze": "torch.compile",
    "optimize_for_inference": "torch.compile",
    "fork": "torch.compile",
    "wait": "torch.compile",
    "interface": "torch.compile",
}

ENTRIES: tuple[ApiEntry, ...] = (
    # -- removed (the functions are stubs that raise RuntimeError) ---------------------------
    ApiEntry(
        "torch.solve",
        "torch.linalg.solve",
        _LINALG_19,
        "1.13",
        how="error",
        torchfix=True,
        note=_t(
            "note the swapped arguments: `torch.solve(B, A).solution` is "
            "`torch.linalg.solve(A, B)`",
            "注意参数顺序相反：`torch.solve(B, A).solution` 即 `torch.linalg.solve(A, B)`",
        ),
    ),
    ApiEntry(
        "torch.symeig",
        "torch.linalg.eigh",
        _LINALG_19,
        "1.13",
        how="error",
        torchfix=True,
        note=_t(
            '`torch.linalg.eigh` reads the lower triangle by default (`UPLO="L"`)',
            '`torch.linalg.eigh` 默认读取下三角（`UPLO="L"`）',
        ),
    ),
    ApiEntry(
        "torch.matrix_rank",
        "torch.linalg.matrix_rank",
        _LINALG_19,
        "1.13",
        how="error",
        torchfix=True,
    ),
    ApiEntry(
        "torch.lstsq",
        "torch.linalg.lstsq",
        _LINALG_19,
        "1.13",
        how="error",
        torchfix=True,
        note=_t(
            "note the swapped arguments: `torch.lstsq(B, A)` is `torch.linalg.lstsq(A, B)`",
            "注意参数顺序相反：`torch.lstsq(B, A)` 即 `torch.linalg.lstsq(A, B)`",
        ),
    ),
    ApiEntry(
        "torch.eig",
        "torch.linalg.eig",
        _LINALG_19,
        "1.13",
        how="error",
        note=_t("`torch.linalg.eig` returns complex tensors", "`torch.linalg.eig` 返回复数张量"),
    ),
    # -- deprecated, from TorchFix's table ----------------------------------------------------
    ApiEntry("torch.qr", "torch.linalg.qr", _LINALG_19, fix="qr", torchfix=True),
    ApiEntry("torch.cholesky", "torch.linalg.cholesky", _LINALG_19, fix="cholesky", torchfix=True),
    ApiEntry(
        "torch.chain_matmul",
        "torch.linalg.multi_dot",
        _LINALG_19,
        fix="chain_matmul",
        torchfix=True,
    ),
    ApiEntry(
        "torch.ger", "torch.outer", "1.10", fix="rename", drop_in=True, how="docs", torchfix=True
    ),
    ApiEntry(
        "torch.lu_solve",
        "torch.linalg.lu_solve",
        "1.13",
        torchfix=True,
        note=_t(
            "`torch.linalg.lu_solve(LU, pivots, B)` takes the right-hand side last",
            "`torch.linalg.lu_solve(LU, pivots, B)` 把右端项放在最后",
        ),
    ),
    ApiEntry(
        "torch.lu",
        "torch.linalg.lu_factor",
        "1.13",
        fix="rename",
        max_args=1,
        kwargs=frozenset({"pivot"}),
        torchfix=True,
    ),
    ApiEntry(
        "torch.triangular_solve",
        "torch.linalg.solve_triangular",
        "1.11",
        torchfix=True,
        note=_t(
            "`torch.linalg.solve_triangular(A, B, upper=...)` takes the matrix first "
            "and returns only the solution",
            "`torch.linalg.solve_triangular(A, B, upper=...)` 先传矩阵，且只返回解",
        ),
    ),
    ApiEntry(
        "torch.norm",
        "torch.linalg.vector_norm` or `torch.linalg.matrix_norm",
        "1.10",
        how="docs",
        torchfix=True,
    ),
    ApiEntry(
        "torch.svd",
        "torch.linalg.svd",
        _LINALG_19,
        how="docs",
        torchfix=True,
        note=_t(
            "`torch.linalg.svd` returns `Vh`, not `V`, and computes full matrices by "
            "default (`full_matrices=False` matches `some=True`)",
            "`torch.linalg.svd` 返回 `Vh` 而非 `V`，且默认计算完整矩阵"
            "（`full_matrices=False` 对应 `some=True`）",
        ),
    ),
    ApiEntry(
        "torch.range",
        "torch.arange",
        "1.0",
        fix="range",
        safety=UNSAFE,
        torchfix=True,
        note=_t("`torch.arange` excludes the end value", "`torch.arange` 不包含终点值"),
    ),
    ApiEntry(
        "torch.nn.UpsamplingNearest2d",
        "torch.nn.Upsample",
        "1.0",
        fix="rename",
        max_args=2,
        kwargs=frozenset({"size", "scale_factor"}),
        extra='mode="nearest"',
        how="docs",
        torchfix=True,
    ),
    ApiEntry(
        "torch.nn.UpsamplingBilinear2d",
        "torch.nn.Upsample",
        "1.0",
        fix="rename",
        max_args=2,
        kwargs=frozenset({"size", "scale_factor"}),
        extra='mode="bilinear", align_corners=True',
        how="docs",
        torchfix=True,
    ),
    ApiEntry(
        "torch.testing.assert_allclose",
        "torch.testing.assert_close",
        "1.12",
        fix="rename",
        safety=UNSAFE,
        torchfix=True,
        note=_t(
            "`assert_close` also checks dtypes and uses tighter default tolerances",
            "`assert_close` 还会检查 dtype，且默认容差更严格",
        ),
    ),
    ApiEntry(
        "torch.nn.utils.weight_norm",
        "torch.nn.utils.parametrizations.weight_norm",
        "2.1",
        fix="weight_norm",
        safety=UNSAFE,
        torchfix=True,
        note=_t(
            "`weight_g`/`weight_v` become `parametrizations.weight.original0/1`, in the state "
            "dict too, and `remove_weight_norm` becomes `parametrize.remove_parametrizations`: "
            "code that uses the old names must change with it",
            "`weight_g`/`weight_v` 变为 `parametrizations.weight.original0/1`（state dict 中也是如此），"
            "`remove_weight_norm` 变为 `parametrize.remove_parametrizations`：用到旧名字的代码必须一并修改",
        ),
    ),
    ApiEntry(
        "torch.utils._pytree._register_pytree_node",
        "torch.utils._pytree.register_pytree_node",
        "2.2",
        fix="rename",
        max_args=3,
        kwargs=frozenset({"flatten_with_keys_fn"}),
        torchfix=True,
    ),
    ApiEntry(
        "torch.backends.cuda.sdp_kernel",
        "torch.nn.attention.sdpa_kernel",
        "2.3",
        torchfix=True,
        note=_t(
            "`sdpa_kernel` takes a list of `SDPBackend` values instead of booleans",
            "`sdpa_kernel` 接受 `SDPBackend` 列表，而不是布尔参数",
        ),
    ),
    *(
        ApiEntry(
            f"functorch.{name}",
            f"torch.func.{name}",
            "2.0",
            fix="rename",
            drop_in=True,
            torchfix=True,
        )
        for name in _FUNCTORCH
    ),
    # -- deprecated, beyond TorchFix (from torch 2.13's warnings and docs) ---------------------
    ApiEntry(
        "torch.nn.functional.upsample",
        "torch.nn.functional.interpolate",
        "1.0",
        fix="rename",
        drop_in=True,
    ),
    ApiEntry(
        "torch.nn.functional.upsample_nearest",
        "torch.nn.functional.interpolate",
        "1.0",
        fix="rename",
        max_args=3,
        kwargs=frozenset({"input", "size", "scale_factor"}),
        extra='mode="nearest"',
    ),
    ApiEntry(
        "torch.nn.functional.upsample_bilinear",
        "torch.nn.functional.interpolate",
        "1.0",
        fix="rename",
        max_args=3,
        kwargs=frozenset({"input", "size", "scale_factor"}),
        extra='mode="bilinear", align_corners=True',
    ),
    ApiEntry(
        "torch.set_default_tensor_type",
        "torch.set_default_dtype` and `torch.set_default_device",
        "2.1",
    ),
    ApiEntry(
        "torch.autograd.Variable",
        "the tensor itself",
        "1.0",
        how="docs",
        note=_t(
            "tensors track gradients themselves since PyTorch 0.4: "
            "`Variable(x, requires_grad=True)` is `x.requires_grad_()`",
            "自 PyTorch 0.4 起张量自己记录梯度：`Variable(x, requires_grad=True)` "
            "即 `x.requires_grad_()`",
        ),
    ),
    *(
        ApiEntry(
            f"torch.{name}", "torch.tensor` or `torch.empty", "2.0", fix="legacy_ctor", how="legacy"
        )
        for name in _LEGACY_DTYPES
    ),
    *(
        ApiEntry(
            f"torch.cuda.{name}",
            "torch.tensor` or `torch.empty",
            "2.0",
            fix="legacy_ctor",
            how="warning",  # "torch.cuda.*DtypeTensor constructors are no longer recommended"
        )
        for name in _LEGACY_DTYPES
    ),
    ApiEntry(
        "torch.cuda.memory_cached", "torch.cuda.memory_reserved", "1.4", fix="rename", drop_in=True
    ),
    ApiEntry(
        "torch.cuda.max_memory_cached",
        "torch.cuda.max_memory_reserved",
        "1.4",
        fix="rename",
        drop_in=True,
    ),
    ApiEntry(
        "torch.nn.utils.stateless.functional_call",
        "torch.func.functional_call",
        "2.0",
        fix="rename",
        drop_in=True,
    ),
    ApiEntry("torch.has_cuda", "torch.backends.cuda.is_built", "2.1", fix="attr_call"),
    ApiEntry("torch.has_cudnn", "torch.backends.cudnn.is_available", "2.1", fix="attr_call"),
    ApiEntry("torch.has_mps", "torch.backends.mps.is_built", "2.1", fix="attr_call"),
    ApiEntry("torch.has_mkldnn", "torch.backends.mkldnn.is_available", "2.1", fix="attr_call"),
    ApiEntry("torch.distributed.reduce_op", "torch.distributed.ReduceOp", "1.0", fix="attr_rename"),
    ApiEntry(
        "torch.distributed.all_gather_into_tensor",
        "torch.distributed.all_gather_single",
        "2.13",
        fix="rename",
        drop_in=True,
    ),
    ApiEntry(
        "torch.distributed.reduce_scatter_tensor",
        "torch.distributed.reduce_scatter_single",
        "2.13",
        fix="rename",
        drop_in=True,
    ),
    ApiEntry(
        "torch.distributed._all_gather_base",
        "torch.distributed.all_gather_single",
        "2.13",
        fix="rename",
        drop_in=True,
    ),
    ApiEntry(
        "torch.distributed._reduce_scatter_base",
        "torch.distributed.reduce_scatter_single",
        "2.13",
        fix="rename",
        drop_in=True,
    ),
    ApiEntry(
        "torch.onnx.export",
        "torch.onnx.export(..., dynamo=True)",
        "2.9",
        when_keyword=("dynamo", False),
        note=_t(
            "the TorchScript-based exporter is deprecated; the `torch.export`-based "
            "one is the default since 2.9",
            "基于 TorchScript 的导出器已弃用；自 2.9 起默认使用基于 `torch.export` 的导出器",
        ),
    ),
    *(
        ApiEntry(
            f"torch.jit.{name}",
            advice,
            "2.13",
            note=_t("TorchScript is deprecated", "TorchScript 已弃用"),
        )
        for name, advice in _JIT.items()
    ),
)

BY_SYMBOL: dict[str, ApiEntry] = {}
for _entry in ENTRIES:
    BY_SYMBOL.setdefault(_entry.symbol, _entry)
del _entry


# ---------------------------------------------------------------------------- finding uses --
# The table's functions and its attributes, by symbol (computed once).
_CALL_ENTRIES = {e.symbol: e for e in ENTRIES if not e.is_attribute}
_ATTRIBUTE_ENTRIES = {e.symbol: e for e in ENTRIES if e.is_attribute}


def entry_uses(ctx: Context) -> Iterator[tuple[ast.AST, ApiEntry]]:
    """Calls of the table's functions (and decorators naming them), and loads of its
    attributes, with their rows."""
    by_symbol = _CALL_ENTRIES
    seen: set[int] = set()
    for call in ctx.sem.calls_to(*by_symbol):
        if id(call) in seen or isinstance(call.func, ast.Call):
            continue
        seen.add(id(call))
        entry = by_symbol[ctx.qualname(call.func) or ""]
        if entry.when_keyword is not None:
            name, value = entry.when_keyword
            kw = keyword(call, name)
            if kw is None or not (isinstance(kw.value, ast.Constant) and kw.value.value is value):
                continue
        yield call, entry
    for ref in ctx.sem.references_to(*by_symbol):
        parent = ctx.sem.parent(ref)
        if (
            isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and (ref in parent.decorator_list)
        ) or _handed_on(ctx, ref, parent, by_symbol[ctx.qualname(ref) or ""]):
            entry = by_symbol[ctx.qualname(ref) or ""]
            if entry.when_keyword is None and id(ref) not in seen:
                seen.add(id(ref))
                yield ref, entry
    attr_symbols = _ATTRIBUTE_ENTRIES
    for ref in ctx.sem.references_to(*attr_symbols):
        if id(ref) not in seen:
            seen.add(id(ref))
            yield ref, attr_symbols[ctx.qualname(ref) or ""]


def _handed_on(ctx: Context, ref: ast.AST, parent: ast.AST | None, entry: ApiEntry) -> bool:
    """A function of the table used as a value that the code calls later: assigned
    (``norm_f = nn.utils.weight_norm``), chosen (``a if c else nn.utils.weight_norm``),
    returned or passed on (``layer.apply(fn)``). A legacy constructor is also a type
    (``x.type(torch.cuda.FloatTensor)``, ``isinstance``): it counts only when the name it is
    assigned to is called. Not a fallback for other torch versions (``sem.in_version_fallback``:
    after ``hasattr(...)`` or a version test, in an ``except`` clause)."""
    node = ref
    if isinstance(parent, ast.IfExp):
        if ref is parent.test:
            return False
        node, parent = parent, ctx.sem.parent(parent)
    if isinstance(parent, ast.Assign) and node is parent.value:
        if entry.fix == "legacy_ctor" and not _called(ctx, parent):
            return False
    elif entry.fix == "legacy_ctor":
        return False
    elif isinstance(parent, ast.Call):
        if node not in parent.args or ctx.qualname(parent.func) in _TYPE_TAKING:
            return False
    elif not isinstance(parent, ast.Return | ast.keyword | ast.IfExp):
        return False
    return not ctx.sem.in_version_fallback(ref, ("AttributeError", "ImportError"))


_TYPE_TAKING = frozenset({"getattr", "hasattr", "isinstance", "issubclass", "type"})


def _called(ctx: Context, assign: ast.Assign) -> bool:
    """Whether a name the assignment binds is called afterwards (``Tensor(...)``)."""
    for target in assign.targets:
        if not isinstance(target, ast.Name):
            continue
        for call in ctx.sem.calls_by_name.get(target.id, ()):
            binding = ctx.sem.lookup(target.id, call.func)
            if binding is not None and binding.node is target:
                return True
    return False


def entry_imports(ctx: Context) -> Iterator[tuple[ast.ImportFrom, ast.alias, ApiEntry]]:
    """``from torch import qr``-style imports of the table's symbols."""
    for node, alias, qual in ctx.sem.imports:
        if not isinstance(node, ast.ImportFrom) or not qual:
            continue
        entry = BY_SYMBOL.get(canonical(qual))
        if entry is not None and entry.when_keyword is None:
            yield node, alias, entry


def describe(entry: ApiEntry) -> tuple[str, str]:
    """The advice part of a message, in English and Chinese."""
    if entry.replacement is None:
        return "", ""
    if entry.replacement == "the tensor itself":
        en, zh = "use the tensor itself", "直接使用张量"
    else:
        en, zh = f"use `{entry.replacement}` instead", f"请改用 `{entry.replacement}`"
    if entry.note is not None:
        en, zh = f"{en} ({entry.note.en})", f"{zh}（{entry.note.zh}）"
    return en, zh


def display(entry: ApiEntry) -> str:
    if entry.when_keyword is not None:
        name, value = entry.when_keyword
        return f"{entry.symbol}(..., {name}={value!r})"
    return entry.symbol


# ---------------------------------------------------------------------------- spelling ------
def spell(ctx: Context, expr: ast.AST, new: str) -> tuple[str, list[Edit]] | None:
    """How to write qualified name ``new`` in place of ``expr`` (a name or attribute chain):
    through the longest prefix of ``expr`` that names a parent of ``new``, else through the
    top-level module's name (imported if missing). None when that name is taken."""
    base = expr.value if isinstance(expr, ast.Attribute) else None
    while base is not None:
        qual = ctx.qualname(base)
        if qual and new.startswith(qual + "."):
            return ctx.segment(base) + new[len(qual) :], []
        base = base.value if isinstance(base, ast.Attribute) else None
    top = new.split(".")[0]
    ref = fixes.module_ref(ctx.sem, ctx.source, top, ctx.notebook)
    if ref is None:
        return None
    name, edits = ref
    return name + new[len(top) :], edits


def _plain_args(call: ast.Call) -> bool:
    return not has_star_kwargs(call) and not any(isinstance(a, ast.Starred) for a in call.args)


def _literal_bool(expr: ast.expr | None) -> bool | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, bool):
        return expr.value
    return None


def _fix(title_en: str, title_zh: str, edits: list[Edit], safety: Applicability) -> Fix:
    return Fix(Text(title_en, title_zh), tuple(edits), safety)


def call_fix(ctx: Context, node: ast.AST, entry: ApiEntry) -> Fix | None:
    """The fix for one use of a table row, or None when it cannot be made safely."""
    kind = entry.fix
    if kind is None or entry.replacement is None:
        return None
    if entry.is_attribute:
        if not isinstance(node, ast.Name | ast.Attribute):
            return None
        spelled = spell(ctx, node, entry.replacement)
        if spelled is None:
            return None
        text, edits = spelled
        if kind == "attr_call":
            text += "()"
        return _fix(
            f"Replace with `{text}`",
            f"替换为 `{text}`",
            [fixes.replace(ctx.source, node, text), *edits],
            entry.safety,
        )
    if not isinstance(node, ast.Call) or not _plain_args(node):
        return None
    builder = _BUILDERS.get(kind)
    return builder(ctx, node, entry) if builder is not None else None


def _rename(ctx: Context, call: ast.Call, entry: ApiEntry) -> Fix | None:
    assert entry.replacement is not None
    if entry.max_args is not None and len(call.args) > entry.max_args:
        return None
    if entry.kwargs is not None and any(k.arg not in entry.kwargs for k in call.keywords):
        return None
    spelled = spell(ctx, call.func, entry.replacement)
    if spelled is None:
        return None
    text, edits = spelled
    edits = [fixes.replace(ctx.source, call.func, text), *edits]
    if entry.extra:
        edits.append(fixes.add_keyword(ctx.source, call, entry.extra))
    shown = f"{text}(..., {entry.extra})" if entry.extra else text
    return _fix(f"Replace with `{shown}`", f"替换为 `{shown}`", edits, entry.safety)


def _replace_call(
    ctx: Context, call: ast.Call, entry: ApiEntry, new: str, args: str, suffix: str = ""
) -> Fix | None:
    spelled = spell(ctx, call.func, new)
    if spelled is None:
        return None
    text, edits = spelled
    code = f"{text}({args}){suffix}"
    title = f"{text}(...){suffix}"
    return _fix(
        f"Replace with `{title}`",
        f"替换为 `{title}`",
        [fixes.replace(ctx.source, call, code), *edits],
        entry.safety,
    )


def _qr(ctx: Context, call: ast.Call, entry: ApiEntry) -> Fix | None:
    if len(call.args) > 2 or any(k.arg not in ("input", "some", "out") for k in call.keywords):
        return None
    source = argument(call, "input", 0)
    if source is None:
        return None
    parts = [ctx.segment(source)]
    some = argument(call, "some", 1)
    if some is not None:
        flag = _literal_bool(some)
        if flag is None:
            return None
        if flag is False:
            parts.append('mode="complete"')
    out = keyword(call, "out")
    if out is not None:
        parts.append(f"out={ctx.segment(out.value)}")
    return _replace_call(ctx, call, entry, "torch.linalg.qr", ", ".join(parts))


def _cholesky(ctx: Context, call: ast.Call, entry: ApiEntry) -> Fix | None:
    if len(call.args) > 2 or any(k.arg not in ("input", "upper") for k in call.keywords):
        return None
    source = argument(call, "input", 0)
    if source is None:
        return None
    upper = argument(call, "upper", 1)
    flag = False if upper is None else _literal_bool(upper)
    if flag is None:
        return None
    return _replace_call(
        ctx, call, entry, "torch.linalg.cholesky", ctx.segment(source), ".mH" if flag else ""
    )


def _chain_matmul(ctx: Context, call: ast.Call, entry: ApiEntry) -> Fix | None:
    if len(call.args) < 2 or any(k.arg != "out" for k in call.keywords):
        return None
    args = "[" + ", ".join(ctx.segment(a) for a in call.args) + "]"
    out = keyword(call, "out")
    if out is not None:
        args += f", out={ctx.segment(out.value)}"
    return _replace_call(ctx, call, entry, "torch.linalg.multi_dot", args)


def _range(ctx: Context, call: ast.Call, entry: ApiEntry) -> Fix | None:
    # torch.range(start, end, step=1, ...): both ends included. arange excludes `end`, so for
    # integer steps the end moves by one towards the step's direction.
    if len(call.args) > 3:
        return None
    start, end, step = (
        argument(call, "start", 0),
        argument(call, "end", 1),
        argument(call, "step", 2),
    )
    if start is None or end is None:
        return None
    if any(isinstance(e, ast.Constant) and isinstance(e.value, float) for e in (start, end)):
        return None
    step_value = 1 if step is None else int_literal(step)
    if not step_value:
        return None
    delta = 1 if step_value > 0 else -1
    end_value = int_literal(end)
    if end_value is not None:
        new_end = str(end_value + delta)
    elif (
        isinstance(end, ast.BinOp)
        and isinstance(end.op, ast.Sub if delta > 0 else ast.Add)
        and int_literal(end.right) == 1
    ):
        new_end = ctx.segment(end.left)
        if isinstance(end.left, ast.BinOp | ast.BoolOp | ast.IfExp | ast.Lambda | ast.NamedExpr):
            new_end = f"({new_end})"
    else:
        inner = ctx.segment(end)
        if not isinstance(end, ast.Name | ast.Attribute | ast.Call | ast.Subscript | ast.Constant):
            inner = f"({inner})"
        new_end = f"{inner} {'+' if delta > 0 else '-'} 1"
    spelled = spell(ctx, call.func, "torch.arange")
    if spelled is None:
        return None
    text, edits = spelled
    edits = [
        fixes.replace(ctx.source, call.func, text),
        fixes.replace(ctx.source, end, new_end),
        *edits,
    ]
    return _fix(
        "Replace with `torch.arange` and move the end past the last value (the result's dtype "
        "then follows the arguments)",
        "替换为 `torch.arange` 并把终点后移一位（结果的 dtype 将随参数而定）",
        edits,
        entry.safety,
    )


def _legacy_ctor(ctx: Context, call: ast.Call, entry: ApiEntry) -> Fix | None:
    if call.keywords:
        return None
    parts = entry.symbol.split(".")
    dtype_name = _LEGACY_DTYPES.get(parts[-1])
    if dtype_name is None:
        return None
    torch_ref = spell(ctx, call.func, "torch.empty")
    if torch_ref is None:
        return None
    text, edits = torch_ref
    prefix = text[: -len(".empty")]
    extra = f"dtype={prefix}.{dtype_name}"
    if parts[1] == "cuda":
        extra += ', device="cuda"'
    if not call.args:
        code = f"{prefix}.empty(0, {extra})"
    elif all(int_literal(a) is not None for a in call.args):
        code = f"{prefix}.empty({', '.join(ctx.segment(a) for a in call.args)}, {extra})"
    elif len(call.args) == 1 and isinstance(call.args[0], ast.List | ast.Tuple):
        code = f"{prefix}.tensor({ctx.segment(call.args[0])}, {extra})"
    else:
        return None
    return _fix(
        f"Replace with `{code}`",
        f"替换为 `{code}`",
        [fixes.replace(ctx.source, call, code), *edits],
        entry.safety,
    )


def _weight_norm(ctx: Context, call: ast.Call, entry: ApiEntry) -> Fix | None:
    """``nn.utils.weight_norm(m)`` -> ``nn.utils.parametrizations.weight_norm(m)`` (unsafe: the
    state-dict keys and the module's class change). Not offered where the file relies on what
    only the old function makes: ``<name>_g``/``<name>_v`` (attributes, state-dict keys, any
    mention), ``remove_weight_norm``, ``torch.jit.script`` or pickling a whole module with
    ``torch.save`` (parametrized modules support neither); nor for a computed ``name=``."""
    name = argument(call, "name", 1)
    if name is None:
        attr = "weight"
    elif isinstance(name, ast.Constant) and isinstance(name.value, str):
        attr = name.value
    else:
        return None
    if _relies_on_old_weight_norm(ctx, attr):
        return None
    return _rename(ctx, call, entry)


def _relies_on_old_weight_norm(ctx: Context, attr: str) -> bool:
    key = ("old-weight-norm", attr)
    known = ctx.sem.memo.get(key)
    if isinstance(known, bool):
        return known
    text = ctx.source.text
    sem = ctx.sem
    found = (
        re.search(rf"\b{re.escape(attr)}_[gv]\b", text) is not None
        or "remove_weight_norm" in text
        or next(sem.calls_to("torch.jit.script"), None) is not None
        or any(
            call.args and kinds.kind(sem, call.args[0]) is kinds.Kind.MODULE
            for call in sem.calls_to("torch.save")
        )
    )
    sem.memo[key] = found
    return found


_BUILDERS = {
    "weight_norm": _weight_norm,
    "rename": _rename,
    "qr": _qr,
    "cholesky": _cholesky,
    "chain_matmul": _chain_matmul,
    "range": _range,
    "legacy_ctor": _legacy_ctor,
}


def import_fix(ctx: Context, node: ast.ImportFrom, status: str) -> Fix | None:
    """Rewrite ``from functorch import vmap, grad`` to ``from torch.func import vmap, grad``:
    only when every imported name has a drop-in replacement of the same name in one module."""
    modules: set[str] = set()
    for alias in node.names:
        qual = f"{node.module}.{alias.name}" if node.module and not node.level else None
        entry = BY_SYMBOL.get(canonical(qual)) if qual else None
        if (
            entry is None
            or not entry.drop_in
            or entry.replacement is None
            or entry.status(ctx) != status
            or entry.replacement.rsplit(".", 1)[-1] != alias.name
        ):
            return None
        modules.add(entry.replacement.rsplit(".", 1)[0])
    segment = ctx.segment(node)
    if len(modules) != 1 or "#" in segment or "\\" in segment:
        return None
    module = modules.pop()
    names = ", ".join(f"{a.name} as {a.asname}" if a.asname else a.name for a in node.names)
    code = f"from {module} import {names}"
    return _fix(
        f"Import from `{module}`",
        f"改为从 `{module}` 导入",
        [fixes.replace(ctx.source, node, code)],
        SAFE,
    )


def report_uses(ctx: Context, status: str, *, opt_in: bool = False) -> None:
    """Shared check of TDR801 (``status="removed"``), TDR804 (``"deprecated"``) and TDR813
    (``"deprecated"`` rows that are ``opt_in``)."""
    for node, entry in entry_uses(ctx):
        if entry.status(ctx) != status or (status != "removed" and entry.opt_in != opt_in):
            continue
        advice_en, advice_zh = describe(entry)
        shown = display(entry)
        if status == "removed":
            target = torch_version.format_version(torch_version.target_version(ctx.settings))
            en = f"`{shown}` was removed in PyTorch {entry.removed} and fails on {target}"
            zh = f"`{shown}` 已在 PyTorch {entry.removed} 中移除，在 {target} 上调用会失败"
        elif entry.fix == "legacy_ctor":
            en = f"`{shown}(...)` is a legacy constructor (sizes give uninitialised memory)"
            zh = f"`{shown}(...)` 是旧式构造函数（传入尺寸时得到未初始化的内存）"
        else:
            en, zh = f"`{shown}` is deprecated", f"`{shown}` 已弃用"
        if advice_en:
            en, zh = f"{en}: {advice_en}", f"{zh}：{advice_zh}"
        ctx.report(
            node, Text(en, zh), fixes=partial(call_fix, ctx, node, entry), symbol=entry.symbol
        )


def _import_fix_once(
    cache: dict[int, Fix | None], ctx: Context, node: ast.ImportFrom, status: str
) -> Fix | None:
    """The fix of an import statement, built once for all the names it imports."""
    if id(node) not in cache:
        cache[id(node)] = import_fix(ctx, node, status)
    return cache[id(node)]


def report_imports(ctx: Context, status: str) -> None:
    """Shared check of TDR803 (``status="removed"``) and TDR805 (``"deprecated"``)."""
    fixes_by_node: dict[int, Fix | None] = {}
    for node, alias, entry in entry_imports(ctx):
        if entry.status(ctx) != status or (status != "removed" and entry.opt_in):
            continue
        advice_en, advice_zh = describe(entry)
        if status == "removed":
            en = f"Import of `{entry.symbol}`, removed in PyTorch {entry.removed}"
            zh = f"导入了已在 PyTorch {entry.removed} 中移除的 `{entry.symbol}`"
        else:
            en, zh = f"Import of deprecated `{entry.symbol}`", f"导入了已弃用的 `{entry.symbol}`"
        if advice_en:
            en, zh = f"{en}: {advice_en}", f"{zh}：{advice_zh}"
        ctx.report(
            alias,
            Text(en, zh),
            fixes=partial(_import_fix_once, fixes_by_node, ctx, node, status),
            symbol=entry.symbol,
        )

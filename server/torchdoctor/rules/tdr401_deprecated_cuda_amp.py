from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import partial

from ..core import fixes
from ..core.context import Context
from ..core.model import Applicability, Edit, Fix, Pos, Text
from ..core.semantic import FUNCTION_NODES, Semantic, canonical
from .base import Invalid, Rule, Valid


@dataclass(frozen=True)
class _Old:
    short: str  # the name in torch.amp
    device: str
    # Positional parameters of the old API, turned into keywords by the fix (the new API takes
    # the device first); None for custom_fwd/custom_bwd, whose positional argument is unchanged.
    params: tuple[str, ...] | None

    def new(self, module: str = "torch") -> str:
        if self.params is None:
            return f'`{module}.amp.{self.short}(..., device_type="{self.device}")`'
        return f'`{module}.amp.{self.short}("{self.device}", ...)`'


_AUTOCAST = ("enabled", "dtype", "cache_enabled")
_SCALER = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")
OLD = {
    "torch.cuda.amp.autocast": _Old("autocast", "cuda", _AUTOCAST),
    "torch.cpu.amp.autocast": _Old("autocast", "cpu", _AUTOCAST),
    "torch.cuda.amp.GradScaler": _Old("GradScaler", "cuda", _SCALER),
    "torch.cpu.amp.GradScaler": _Old("GradScaler", "cpu", _SCALER),
    "torch.cuda.amp.custom_fwd": _Old("custom_fwd", "cuda", None),
    "torch.cuda.amp.custom_bwd": _Old("custom_bwd", "cuda", None),
}
_MODULE_IN_IMPORT = re.compile(r"^from\s+(torch\s*\.\s*(?:cuda|cpu)\s*\.\s*amp(?:\s*\.\s*\w+)?)\s")
_COMMENT = re.compile(r"#[^\n]*")
_FALLBACK_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "AttributeError", "Exception"})


class DeprecatedCudaAmp(Rule):
    """## What it does
    Checks for uses of the device-specific mixed-precision APIs `torch.cuda.amp.autocast`,
    `torch.cuda.amp.GradScaler`, `torch.cpu.amp.autocast`, `torch.cpu.amp.GradScaler`,
    `torch.cuda.amp.custom_fwd` and `torch.cuda.amp.custom_bwd`, whether spelled out or
    imported with `from torch.cuda.amp import ...`.

    ## Why is this bad?
    They are deprecated in favour of the device-generic `torch.amp` and emit a `FutureWarning`
    (shown to end users by default) when they are used. PyTorch 2.13 says, for example:
    `` `torch.cuda.amp.autocast(args...)` is deprecated. Please use
    `torch.amp.autocast('cuda', args...)` instead. `` and `` `torch.cuda.amp.GradScaler(args...)`
    is deprecated. Please use `torch.amp.GradScaler('cuda', args...)` instead. ``
    Deprecated APIs are removed eventually, and the warnings bury the ones that matter.

    The guide says that PyTorch provides `autocast` and `GradScaler` through `torch.cuda.amp`;
    since PyTorch 2.4 those spellings are deprecated: use `torch.amp.autocast` and
    `torch.amp.GradScaler`, which take the device type as their first argument.

    ## Example
    ```python
    import torch

    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast(dtype=torch.bfloat16):
        loss = model(inputs).sum()
    ```

    ## Use instead
    ```python
    import torch

    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda", dtype=torch.bfloat16):
        loss = model(inputs).sum()
    ```

    ## Fix safety
    The fix is safe: the old classes are thin subclasses that call the new ones with the device
    filled in. It adds the device argument, and turns positional arguments into keywords
    because their order differs (`torch.cuda.amp.autocast(enabled, dtype, cache_enabled)` but
    `torch.amp.autocast(device_type, dtype, enabled, cache_enabled)`; `GradScaler` gains a
    leading `device`). `@torch.cuda.amp.custom_fwd` becomes
    `@torch.amp.custom_fwd(device_type="cuda")`. For `from torch.cuda.amp import ...` one fix
    rewrites the import and every use of the imported names. One nuance: without `dtype=`,
    `torch.amp.autocast` reads the default from `torch.get_autocast_dtype` (float16 on CUDA,
    bfloat16 on CPU, the same values the old classes hard-code) unless the program changes it
    with `torch.set_autocast_dtype`. References that are not calls, decorators or annotations
    (`cls = torch.cuda.amp.GradScaler`) are reported without a fix.

    ## References
    - [Automatic Mixed Precision package - `torch.amp`](https://pytorch.org/docs/stable/amp.html)
    - [Automatic Mixed Precision examples](https://pytorch.org/docs/stable/notes/amp_examples.html)
    """

    code = "TDR401"
    name = "deprecated-cuda-amp"
    fix_safety = Applicability.SAFE
    tags = ("deprecated",)
    aliases = ("TOR101",)  # TorchFix reports these APIs as deprecated functions

    VALID = (
        # Code that recognises the old objects to handle callers still using them (torch._dynamo).
        "import torch\ndef f(func):\n"
        "    if func in [torch.amp.autocast, torch.cuda.amp.autocast, torch.cpu.amp.autocast]:\n"
        "        return 'cuda' if func is torch.cuda.amp.autocast else 'cpu'\n",
        "import torch\ndef f(func):\n    return func == torch.cuda.amp.GradScaler\n",
        "import torch\nscaler = torch.amp.GradScaler('cuda')\n"
        "with torch.amp.autocast('cuda', dtype=torch.bfloat16):\n    y = model(x)\n",
        "import torch\nwith torch.autocast(device_type='cuda'):\n    y = model(x)\n",
        "from torch.amp import autocast, GradScaler\nimport torch\n"
        "with autocast('cuda'):\n    y = model(x)\nscaler = GradScaler('cuda')\n",
        "import torch\n@torch.amp.custom_fwd(device_type='cuda', cast_inputs=torch.float32)\n"
        "def forward(ctx, x):\n    return x\n",
        # A local function named autocast, and a parameter shadowing an import.
        "import torch\ndef autocast(enabled=True):\n    return nullcontext()\n"
        "with autocast(False):\n    y = model(x)\n",
        "import torch\ndef make(torch):\n    return torch.cuda.amp.GradScaler()\n",
        # Other libraries' amp modules.
        "import torch\nfrom apex import amp\nmodel, opt = amp.initialize(model, opt)\n",
        "import torch\nimport mylib.cuda.amp as amp\nwith amp.autocast():\n    pass\n",
        # Fallback for old PyTorch versions.
        "try:\n    from torch.amp import GradScaler\n"
        "except ImportError:\n    from torch.cuda.amp import GradScaler\n",
        "import torch\nif hasattr(torch, 'amp'):\n    scaler = torch.amp.GradScaler('cuda')\n"
        "else:\n    scaler = torch.cuda.amp.GradScaler()\n",
        # Not deprecated.
        "import torch\nok = torch.cuda.amp.common.amp_definitely_not_available()\n",
        Valid("import torch\nscaler = torch.amp.GradScaler('cuda')\n", notebook=True),
    )
    INVALID = (
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler()\n",
            fixed='import torch\nscaler = torch.amp.GradScaler("cuda")\n',
            lines=(2,),
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(dtype=torch.bfloat16):\n    y = model(x)\n",
            fixed='import torch\nwith torch.amp.autocast("cuda", dtype=torch.bfloat16):\n'
            "    y = model(x)\n",
            lines=(2,),
        ),
        # Positional arguments become keywords: the order differs.
        Invalid(
            "import torch as T\nwith T.cuda.amp.autocast(use_amp, T.bfloat16):\n    y = model(x)\n",
            fixed='import torch as T\nwith T.amp.autocast("cuda", enabled=use_amp, dtype=T.bfloat16):\n'
            "    y = model(x)\n",
            lines=(2,),
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler(\n    2.0**10,  # small start\n"
            "    enabled=use_amp,\n)\n",
            fixed='import torch\nscaler = torch.amp.GradScaler(\n    "cuda", init_scale=2.0**10,'
            "  # small start\n    enabled=use_amp,\n)\n",
            lines=(2,),
        ),
        Invalid(
            "import torch\nwith torch.cpu.amp.autocast():\n    y = model(x)\n",
            fixed='import torch\nwith torch.amp.autocast("cpu"):\n    y = model(x)\n',
            lines=(2,),
        ),
        Invalid(
            "import torch\nscaler = torch.cpu.amp.GradScaler(**cfg)\n",
            fixed='import torch\nscaler = torch.amp.GradScaler("cpu", **cfg)\n',
            lines=(2,),
        ),
        # Decorators, bare and called.
        Invalid(
            "import torch\nclass F(torch.autograd.Function):\n"
            "    @staticmethod\n    @torch.cuda.amp.custom_fwd\n    def forward(ctx, x):\n"
            "        return x\n",
            fixed="import torch\nclass F(torch.autograd.Function):\n"
            '    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda")\n'
            "    def forward(ctx, x):\n        return x\n",
            lines=(4,),
        ),
        Invalid(
            "import torch\n@torch.cuda.amp.custom_fwd(cast_inputs=torch.float32)\n"
            "def forward(ctx, x):\n    return x\n",
            fixed="import torch\n"
            '@torch.amp.custom_fwd(cast_inputs=torch.float32, device_type="cuda")\n'
            "def forward(ctx, x):\n    return x\n",
            lines=(2,),
        ),
        Invalid(
            "import torch\n@torch.cuda.amp.custom_bwd\ndef backward(ctx, g):\n    return g\n",
            fixed='import torch\n@torch.amp.custom_bwd(device_type="cuda")\n'
            "def backward(ctx, g):\n    return g\n",
            lines=(2,),
        ),
        # A module alias: `import torch` is added for the new spelling.
        Invalid(
            "import torch.cuda.amp as amp\nscaler = amp.GradScaler()\n",
            fixed="import torch\nimport torch.cuda.amp as amp\n"
            'scaler = torch.amp.GradScaler("cuda")\n',
            lines=(2,),
        ),
        # from-import: one fix for the import and every use.
        Invalid(
            "import torch\nfrom torch.cuda.amp import autocast, GradScaler as GS\n"
            "scaler = GS(enabled=True)\n"
            "def step(x):\n    with autocast(True, torch.float16):\n        return model(x)\n",
            fixed="import torch\nfrom torch.amp import autocast, GradScaler as GS\n"
            'scaler = GS("cuda", enabled=True)\n'
            'def step(x):\n    with autocast("cuda", enabled=True, dtype=torch.float16):\n'
            "        return model(x)\n",
            lines=(2,),
        ),
        Invalid(
            "from torch.cuda.amp import custom_fwd, custom_bwd\nimport torch\n"
            "class F(torch.autograd.Function):\n"
            "    @staticmethod\n    @custom_fwd(cast_inputs=torch.float32)\n"
            "    def forward(ctx, x):\n        return x\n"
            "    @staticmethod\n    @custom_bwd\n    def backward(ctx, g):\n        return g\n",
            fixed="from torch.amp import custom_fwd, custom_bwd\nimport torch\n"
            "class F(torch.autograd.Function):\n"
            '    @staticmethod\n    @custom_fwd(cast_inputs=torch.float32, device_type="cuda")\n'
            "    def forward(ctx, x):\n        return x\n"
            '    @staticmethod\n    @custom_bwd(device_type="cuda")\n'
            "    def backward(ctx, g):\n        return g\n",
            lines=(1,),
        ),
        Invalid(
            "from torch.cuda.amp.grad_scaler import GradScaler\n"
            "def build(s: GradScaler | None = None) -> GradScaler:\n    return s or GradScaler()\n",
            fixed="from torch.amp import GradScaler\n"
            'def build(s: GradScaler | None = None) -> GradScaler:\n    return s or GradScaler("cuda")\n',
            lines=(1,),
        ),
        # An uncalled use of an imported name: reported, the import is not rewritten.
        Invalid(
            "from torch.cuda.amp import GradScaler\nfactory = GradScaler\n",
            fixed=None,
            lines=(1,),
        ),
        # Uncalled references: reported without a fix, except annotations.
        Invalid("import torch\ncls = torch.cuda.amp.GradScaler\n", fixed=None, lines=(2,)),
        Invalid(
            "import torch\ndef f(s: torch.cuda.amp.GradScaler):\n    return s\n",
            fixed="import torch\ndef f(s: torch.amp.GradScaler):\n    return s\n",
            lines=(2,),
        ),
        # Star-args cannot be mapped to the new order.
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(*args):\n    pass\n", fixed=None, lines=(2,)
        ),
        # Also imports that mix in a name torch.amp lacks.
        Invalid(
            "from torch.cuda.amp import autocast, amp_definitely_not_available\n"
            "with autocast():\n    pass\n",
            fixed=None,
            lines=(1,),
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler()\n",
            fixed='import torch\nscaler = torch.amp.GradScaler("cuda")\n',
            notebook=True,
            lines=(2,),
        ),
        Invalid(
            "from torch.cuda.amp import autocast\nimport torch\n"
            "with autocast(dtype=torch.bfloat16):\n    y = model(x)\n",
            fixed="from torch.amp import autocast\nimport torch\n"
            'with autocast("cuda", dtype=torch.bfloat16):\n    y = model(x)\n',
            notebook=True,
            lines=(1,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        imports: dict[ast.ImportFrom, None] = {}
        seen: set[int] = set()
        for ref in sem.references_to(*OLD):
            if (
                id(ref) in seen
                or sem.in_version_fallback(ref, _FALLBACK_ERRORS)
                or _recognised_only(sem, ref)
            ):
                continue
            seen.add(id(ref))
            if isinstance(ref, ast.Name):
                binding = sem.lookup(ref.id, ref)
                stmt = sem.parent(binding.node) if binding is not None else None
                if isinstance(stmt, ast.ImportFrom):
                    imports[stmt] = None
                continue
            qual = ctx.qualname(ref)
            if qual in OLD:
                self._report_reference(ctx, ref, qual)
        for node, _alias, qual in sem.imports:
            if (
                isinstance(node, ast.ImportFrom)
                and qual
                and canonical(qual) in OLD
                and not sem.in_version_fallback(node, _FALLBACK_ERRORS)
            ):
                imports[node] = None
        for stmt in imports:
            self._report_import(ctx, stmt)

    @staticmethod
    def _report_reference(ctx: Context, ref: ast.Attribute, qual: str) -> None:
        old = OLD[qual]
        ctx.report(
            ref,
            Text(
                f"`{qual}` is deprecated (it warns with a `FutureWarning`); use {old.new()}",
                f"`{qual}` 已弃用（使用时会发出 `FutureWarning`）；请改用 {old.new()}",
            ),
            fixes=partial(_reference_fix, ctx, ref, old),
        )

    @staticmethod
    def _report_import(ctx: Context, stmt: ast.ImportFrom) -> None:
        names = ", ".join(f"`{a.name}`" for a in stmt.names if _qualname(stmt, a) in OLD)
        module = stmt.module or ""
        ctx.report(
            stmt,
            Text(
                f"`{module}` provides deprecated APIs (they warn with a `FutureWarning`); import "
                f"{names} from `torch.amp` and pass the device type",
                f"`{module}` 中的 API 已弃用（使用时会发出 `FutureWarning`）；请从 `torch.amp` 导入 "
                f"{names} 并传入设备类型",
            ),
            fixes=partial(_import_fix, ctx, stmt),
        )


def _import_fix(ctx: Context, stmt: ast.ImportFrom) -> Fix | None:
    """Rewrite ``from torch.cuda.amp import ...`` to ``torch.amp`` and every use of its names."""
    sem, source = ctx.sem, ctx.source
    if not fixes.starts_line(source, stmt):
        return None
    start = source.start(stmt)
    match = _MODULE_IN_IMPORT.match(source.line(start.row)[start.col :])
    if match is None:
        return None
    edits = [
        Edit(
            Pos(start.row, start.col + match.start(1)),
            Pos(start.row, start.col + match.end(1)),
            "torch.amp",
        )
    ]
    for alias in stmt.names:
        qual = _qualname(stmt, alias)
        if qual not in OLD:
            return None
        old = OLD[qual]
        bound = alias.asname or alias.name
        for ref in sem.names.get(bound, ()):
            binding = sem.lookup(bound, ref)
            if binding is None or binding.node is not alias:
                continue
            use = _use_edits(ctx, ref, old, None)
            if use is None:
                return None
            edits += use
    return Fix(
        Text(
            "Import from `torch.amp` and pass the device type",
            "改为从 `torch.amp` 导入并传入设备类型",
        ),
        tuple(edits),
        Applicability.SAFE,
    )


def _qualname(stmt: ast.ImportFrom, alias: ast.alias) -> str | None:
    return canonical(f"{stmt.module}.{alias.name}") if stmt.module and not stmt.level else None


def _use_edits(ctx: Context, ref: ast.expr, old: _Old, new_func: str | None) -> list[Edit] | None:
    """Edits that turn one use of an old API into the new one (``new_func`` replaces the
    reference; None keeps it, for names whose import is rewritten). None when not mechanical."""
    sem, source = ctx.sem, ctx.source
    rename = [fixes.replace(source, ref, new_func)] if new_func else []
    parent = sem.parent(ref)
    device = f'"{old.device}"'
    if isinstance(parent, ast.Call) and parent.func is ref:
        if old.params is None:
            return [*rename, fixes.add_keyword(source, parent, f"device_type={device}")]
        args = _device_first(ctx, parent, old.params, device)
        return None if args is None else [*rename, *args]
    if (
        old.params is None
        and isinstance(parent, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and ref in parent.decorator_list
    ):
        call = f"(device_type={device})"
        if new_func:
            return [fixes.replace(source, ref, new_func + call)]
        return [fixes.insert(source.end(ref), call)]
    if _in_annotation(sem, ref):
        return rename
    return None


def _device_first(
    ctx: Context, call: ast.Call, params: tuple[str, ...], device: str
) -> list[Edit] | None:
    """Insert the device as the first argument and name the positional arguments."""
    source = ctx.source
    if len(call.args) > len(params) or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    inserts: dict[Pos, str] = {}
    previous = source.end(call.func)
    for i, arg in enumerate(call.args):
        # Only plain arguments can take a name: `f((x))` would become `f((name=x))`.
        between = _COMMENT.sub("", source.slice(previous, source.start(arg))).strip()
        if between != ("(" if i == 0 else ","):
            return None
        inserts[source.start(arg)] = f"{params[i]}="
        previous = source.end(arg)
    items: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    items.sort(key=lambda n: (n.lineno, n.col_offset))
    if items:
        first = source.start(items[0])
        inserts[first] = f"{device}, " + inserts.get(first, "")
    else:
        end = source.end(call)
        inserts[Pos(end.row, end.col - 1)] = device
    return [fixes.insert(pos, text) for pos, text in inserts.items()]


def _in_annotation(sem: Semantic, node: ast.AST) -> bool:
    child = node
    for anc in sem.ancestors(node):
        if isinstance(anc, ast.arg | ast.AnnAssign) and child is anc.annotation:
            return True
        if isinstance(anc, FUNCTION_NODES) and child is anc.returns:
            return True
        if isinstance(anc, ast.stmt):
            return False
        child = anc
    return False


def _recognised_only(sem: Semantic, node: ast.AST) -> bool:
    """``func is torch.cuda.amp.autocast`` or ``func in [torch.cuda.amp.autocast, ...]``: code that
    recognises the old object (to handle callers that still use it) without using it."""
    parent = sem.parent(node)
    if isinstance(parent, ast.List | ast.Tuple | ast.Set):
        parent = sem.parent(parent)
        return isinstance(parent, ast.Compare) and all(
            isinstance(op, ast.In | ast.NotIn) for op in parent.ops
        )
    return isinstance(parent, ast.Compare) and all(
        isinstance(op, ast.Is | ast.IsNot | ast.Eq | ast.NotEq) for op in parent.ops
    )


def _reference_fix(ctx: Context, ref: ast.Attribute, old: _Old) -> Fix | None:
    """Use the ``torch.amp`` API instead of the deprecated one ``ref`` names."""
    spelled = fixes.module_ref(ctx.sem, ctx.source, "torch", ctx.notebook)
    if spelled is None:
        return None
    module, import_edits = spelled
    edits = _use_edits(ctx, ref, old, f"{module}.amp.{old.short}")
    if edits is None:
        return None
    return Fix(
        Text(f"Use {old.new(module)}", f"改用 {old.new(module)}"),
        (*edits, *import_edits),
        Applicability.SAFE,
    )

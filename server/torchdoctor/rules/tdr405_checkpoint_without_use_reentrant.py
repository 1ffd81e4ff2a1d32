from __future__ import annotations

import ast

from ..core import arguments, fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import dotted
from .base import Invalid, Rule, Valid

CHECKPOINT = arguments.CHECKPOINT
CHECKPOINT_SEQUENTIAL = arguments.CHECKPOINT_SEQUENTIAL
KEY = "use_reentrant"


class CheckpointWithoutUseReentrant(Rule):
    """## What it does
    Checks for `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)` calls
    that do not pass `use_reentrant=`.

    A call that passes `**kwargs` is reported too, with a lower severity (information), unless
    the code shows that the dictionary holds `use_reentrant`: a dict display or `dict(...)` call
    with that key, or a name that an assignment (`kw = {...}`, `kw["use_reentrant"] = ...`) or an
    update (`kw.setdefault(...)`, `kw.update(use_reentrant=...)`) in its scope gives the key.

    ## Why is this bad?
    Without `use_reentrant`, PyTorch 2.13 still falls back to the old reentrant implementation
    and warns on every call: `torch.utils.checkpoint: the use_reentrant parameter should be
    passed explicitly. ... use_reentrant=False is recommended, but if you need to preserve the
    current default behavior, you can pass use_reentrant=True.` The warning announced an
    exception "starting in PyTorch 2.9"; as of 2.13 the call still only warns, so code that
    relies on the default may start failing in a future release.

    The reentrant variant has real limits: it needs at least one input with
    `requires_grad=True` (otherwise the checkpointed layers get no gradients and only a
    warning, `None of the inputs have requires_grad=True. Gradients will be None`, says so: a
    classic trap when checkpointing the first block of a model whose inputs are data), it
    supports only `backward()` without `inputs=` (not `torch.autograd.grad`), and it rejects
    keyword arguments for the wrapped function. `use_reentrant=False` has none of these limits
    and stops recomputation early.

    The guide wraps modules in `torch.utils.checkpoint` without choosing a variant; PyTorch now
    asks for an explicit choice (verified on 2.13: the call warns), and `use_reentrant=False`
    is the one its documentation recommends. The guide's warning about dropout is handled by
    `preserve_rng_state=True`, the default in both variants.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    def forward(self, x):
        return checkpoint(self.block, x)
    ```

    ## Use instead
    ```python
    from torch.utils.checkpoint import checkpoint

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
    ```

    ## Fix safety
    The fix adds `use_reentrant=False`. It is unsafe: the non-reentrant variant records the
    autograd graph differently, so layers that got no gradient before (inputs without
    `requires_grad`) start training, and hooks or custom autograd code inside the block may
    behave differently. Pass `use_reentrant=True` instead if you must keep the old behaviour.
    Calls that pass `**kwargs` get no fix: if the dictionary already holds `use_reentrant`, an
    added keyword would make the call fail with `got multiple values for keyword argument`. Add
    the key where the dictionary is built instead.

    ## References
    - [`torch.utils.checkpoint`](https://pytorch.org/docs/stable/checkpoint.html)
    """

    code = "TDR405"
    name = "checkpoint-without-use-reentrant"
    fix_safety = Applicability.UNSAFE
    aliases = ("TOR003",)

    VALID = (
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(block, x, use_reentrant=False)",
        "import torch.utils.checkpoint\ny = torch.utils.checkpoint.checkpoint(f, x, use_reentrant=True)",
        "import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
        "y = checkpoint_sequential(model, 2, x, use_reentrant=False)",
        # use_reentrant passed positionally to checkpoint_sequential.
        "import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
        "y = checkpoint_sequential(model, 2, x, False)",
        # The ** operand visibly holds use_reentrant.
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(block, x, **{'use_reentrant': False})",
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(block, x, **dict(use_reentrant=False, preserve_rng_state=False))",
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "kw = {'use_reentrant': False}\ny = checkpoint(block, x, **kw)",
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "def run(block, x, **kwargs):\n    kwargs['use_reentrant'] = False\n"
        "    return checkpoint(block, x, **kwargs)",
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "def run(block, x, **kwargs):\n    kwargs.setdefault('use_reentrant', False)\n"
        "    return checkpoint(block, x, **kwargs)",
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "def run(block, x, **kwargs):\n    kwargs.update(use_reentrant=False)\n"
        "    return checkpoint(block, x, **kwargs)",
        # Only on versions that have the parameter (a common guard).
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "ckpt_kwargs = {'use_reentrant': False} if new_torch else {}\n"
        "def forward(self, x):\n    return checkpoint(self.block, x, **ckpt_kwargs)",
        # Built in __init__, used in forward.
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.ckpt = {'preserve_rng_state': True}\n"
        "        self.ckpt.update({'use_reentrant': False})\n"
        "    def forward(self, x):\n        return checkpoint(self.block, x, **self.ckpt)",
        # A local function named checkpoint (e.g. saving a training checkpoint).
        "import torch\ndef checkpoint(model, path):\n    torch.save(model.state_dict(), path)\n"
        "checkpoint(model, 'm.pt')",
        # A parameter shadowing the import.
        "from torch.utils.checkpoint import checkpoint\n"
        "def run(checkpoint, x):\n    return checkpoint(x)",
        # Other libraries' checkpoint helpers.
        "import torch\nimport deepspeed\ny = deepspeed.checkpointing.checkpoint(block, x)",
        Valid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(block, x, use_reentrant=False)",
            notebook=True,
        ),
        # `use_reentrant` is checkpoint_sequential's fourth parameter.
        "from torch.utils.checkpoint import checkpoint_sequential\n"
        "y = checkpoint_sequential(fs, 2, x, False)\n",
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)",
            fixed="import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(block, x, use_reentrant=False)",
            lines=(3,),
        ),
        Invalid(
            "import torch.utils.checkpoint\ny = torch.utils.checkpoint.checkpoint(f, x, y)",
            fixed="import torch.utils.checkpoint\n"
            "y = torch.utils.checkpoint.checkpoint(f, x, y, use_reentrant=False)",
            lines=(2,),
        ),
        Invalid(
            "import torch\nimport torch.utils.checkpoint as cp\n"
            "def forward(self, x):\n    return cp.checkpoint(self.layer, x, preserve_rng_state=False)\n",
            fixed="import torch\nimport torch.utils.checkpoint as cp\n"
            "def forward(self, x):\n"
            "    return cp.checkpoint(self.layer, x, preserve_rng_state=False, use_reentrant=False)\n",
            lines=(4,),
        ),
        Invalid(
            "from torch.utils.checkpoint import checkpoint as ckpt\ny = ckpt(block, *inputs)",
            fixed="from torch.utils.checkpoint import checkpoint as ckpt\n"
            "y = ckpt(block, *inputs, use_reentrant=False)",
            lines=(2,),
        ),
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
            "y = checkpoint_sequential(model.layers, 4, x)",
            fixed="import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
            "y = checkpoint_sequential(model.layers, 4, x, use_reentrant=False)",
            lines=(3,),
        ),
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)",
            fixed="import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(block, x, use_reentrant=False)",
            notebook=True,
            lines=(3,),
        ),
        # **kwargs that may lack the key: reported without a fix.
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "def forward(block, x, **kwargs):\n    return checkpoint(block, x, **kwargs)",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch.utils.checkpoint as cp\n"
            "kw = {'preserve_rng_state': False}\ny = cp.checkpoint(block, x, **kw)",
            fixed=None,
            lines=(3,),
        ),
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
            "def run(model, x, **kw):\n"
            "    kw['preserve_rng_state'] = False\n"
            "    return checkpoint_sequential(model, 2, x, **kw)",
            fixed=None,
            lines=(5,),
        ),
        # The key is set on another dictionary with the same name in another function.
        Invalid(
            "import torch\nfrom torch.utils.checkpoint import checkpoint\n"
            "def a(**kw):\n    kw['use_reentrant'] = False\n    return kw\n"
            "def b(block, x, **kw):\n    return checkpoint(block, x, **kw)",
            fixed=None,
            lines=(7,),
        ),
        # checkpoint's extra positional arguments go to the function, not to `use_reentrant`.
        Invalid(
            "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x, False)\n",
            fixed="from torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(f, x, False, use_reentrant=False)\n",
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to(CHECKPOINT, CHECKPOINT_SEQUENTIAL):
            sequential = ctx.qualname(call.func) == CHECKPOINT_SEQUENTIAL
            bound = arguments.bind(call, CHECKPOINT_SEQUENTIAL if sequential else CHECKPOINT)
            if bound.value("use_reentrant") is not None or "use_reentrant" in bound.maybe:
                continue  # given, or a `*args` spread reaches its position
            name = "checkpoint_sequential" if sequential else "checkpoint"
            spread = [kw.value for kw in call.keywords if kw.arg is None]
            if spread:
                if any(_carries(ctx, value, call) for value in spread):
                    continue
                # The dictionary may hold the key after all: no fix (adding the keyword would
                # then raise "got multiple values"), and a lower severity.
                label = dotted(spread[0])
                operand = f"`**{label}`" if label else "the `**` argument"
                operand_zh = f"`**{label}`" if label else "`**` 参数"
                ctx.report(
                    call,
                    Text(
                        f"`{name}` gets no explicit `use_reentrant=`; if {operand} does not carry "
                        "it, PyTorch warns on every call and uses the reentrant variant",
                        f"`{name}` 未显式传入 `use_reentrant=`；若 {operand_zh} 中也没有，"
                        "PyTorch 会在每次调用时警告并使用可重入实现",
                    ),
                    severity=Severity.INFO,
                )
                continue
            fix = Fix(
                Text("Add `use_reentrant=False`", "添加 `use_reentrant=False`"),
                (fixes.add_keyword(ctx.source, call, "use_reentrant=False"),),
                Applicability.UNSAFE,
            )
            ctx.report(
                call,
                Text(
                    f"`{name}` without `use_reentrant=` warns and silently uses the reentrant "
                    "variant; pass `use_reentrant=False` (recommended) or `True` explicitly",
                    f"`{name}` 未指定 `use_reentrant=`：会发出警告并默默使用可重入实现；"
                    "请显式传入 `use_reentrant=False`（推荐）或 `True`",
                ),
                fixes=[fix],
            )


def _carries(ctx: Context, expr: ast.expr, at: ast.AST, depth: int = 0) -> bool:
    """Whether the ``**`` operand ``expr`` can be seen to hold a ``use_reentrant`` key: a dict
    display or ``dict(...)`` call with it, or a name (or ``self.attr``) that an assignment or an
    update in its scope gives it (anywhere in that scope: unsure means "holds it")."""
    if depth > 4:
        return False
    if isinstance(expr, ast.IfExp):
        return _carries(ctx, expr.body, at, depth + 1) or _carries(ctx, expr.orelse, at, depth + 1)
    if isinstance(expr, ast.Dict):
        return any(
            _is_key(k) or (k is None and _carries(ctx, v, at, depth + 1))
            for k, v in zip(expr.keys, expr.values, strict=True)
        )
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Name) and func.id == "dict" and ctx.sem.lookup("dict", at) is None:
            return any(
                kw.arg == KEY or (kw.arg is None and _carries(ctx, kw.value, at, depth + 1))
                for kw in expr.keywords
            ) or any(_carries(ctx, a, at, depth + 1) for a in expr.args)
        return False
    target = dotted(expr)
    if target is None:
        return False
    if isinstance(expr, ast.Name):
        binding = ctx.sem.lookup(expr.id, at)
        scope = binding.scope if binding is not None else ctx.sem.scope_of(at).node
    else:
        scope = ctx.tree
    for node in ctx.sem.walk(scope, into_functions=True):
        if _sets_key(ctx, node, target, at, depth):
            return True
    return False


def _sets_key(ctx: Context, node: ast.AST, target: str, at: ast.AST, depth: int) -> bool:
    """Whether ``node`` gives the dictionary named ``target`` a ``use_reentrant`` key."""
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and dotted(t.value) == target and _is_key(t.slice):
                return True  # kw["use_reentrant"] = ...
            if dotted(t) == target and node.value is not None:
                if _carries(ctx, node.value, at, depth + 1):
                    return True  # kw = {...}, kw |= {...}
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and dotted(node.func.value) == target
    ):
        method, args = node.func.attr, node.args
        if method in ("setdefault", "__setitem__"):
            return bool(args) and _is_key(args[0])
        if method == "update":
            return any(kw.arg == KEY for kw in node.keywords) or any(
                _carries(ctx, a, at, depth + 1) for a in args
            )
    return False


def _is_key(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value == KEY

from __future__ import annotations

import ast
from functools import partial

from ..core import fixes, kinds, training
from ..core.context import Context
from ..core.kinds import MODULE_SELF_METHODS, Kind
from ..core.model import Applicability, Edit, Fix, Severity, Text
from ..core.semantic import dotted, keyword
from .base import Invalid, Rule

_FLOAT16 = frozenset({"torch.float16", "torch.half"})
_FLOAT32 = frozenset({"torch.float32", "torch.float"})
_HEAD = "import torch\nfrom torch import nn\n"
# Libraries whose fp16 optimizers keep float32 master weights of a `.half()` model.
_MASTER_WEIGHT_LIBRARIES = frozenset({"apex", "deepspeed"})


class HalfModelTraining(Rule):
    """## What it does
    Checks for a model converted to float16 with `model.half()` or `model.to(torch.float16)`
    that is then trained: an optimizer is built over its parameters and the file runs
    `.backward()` after the conversion.

    ## Why is this bad?
    This is "pure" fp16 training: the weights, their gradients and the optimizer's state all
    live in float16, with no float32 master copy. float16 has 10 mantissa bits: near 1.0 its
    values are 0.0005 to 0.001 apart, so an update below about 0.00025 is rounded away and
    the weight does not move at all. Adam's default `eps=1e-8` is below float16's smallest
    positive value and becomes zero, so a parameter whose gradient is zero or small turns
    into NaN or inf on the first step. Checked on CPU with `bench/cpu_half_training.py` (one
    step on weights of 1.0, lr 1e-3, gradients 0, 1e-3, 0.1, 0.4): SGD leaves the float16
    weights with gradients 1e-3 and 0.1 unchanged (updates of 1e-6 and 1e-4, which float32
    applies), and Adam turns the weights with gradients 0 and 1e-3 into NaN and -inf.

    Mixed precision gets the speed without this: keep the model in float32 and run the
    forward pass under `torch.autocast("cuda")` with a `GradScaler` (or
    `dtype=torch.bfloat16`); autocast computes in float16 while the optimizer updates the
    float32 weights. A model converted with `.half()` only for evaluation or export is not
    reported, nor one whose parameters no `torch.optim` optimizer of the file updates
    directly, nor files that use apex or DeepSpeed, whose fp16 optimizers keep float32
    master copies of a `.half()` model.

    ## Example
    ```python
    model = Net().cuda().half()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for inputs, targets in loader:
        loss = criterion(model(inputs.cuda().half()), targets.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    model = Net().cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda")
    for inputs, targets in loader:
        with torch.autocast("cuda"):
            loss = criterion(model(inputs.cuda()), targets.cuda())
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Fix safety
    The suggestion removes the conversion (`.half()`, or the float16 argument of `.to(...)`),
    so the model trains in float32. It is never applied in bulk: the model then runs slower
    and uses more memory until you add `torch.autocast` and a `GradScaler` as shown above,
    and inputs converted with `.half()` elsewhere must be left in float32 too.

    ## References
    - [Automatic Mixed Precision examples](https://pytorch.org/docs/stable/notes/amp_examples.html)
    - [`torch.autocast`](https://pytorch.org/docs/stable/amp.html#torch.autocast)
    - [Mixed precision training (Micikevicius et al., 2018)](https://arxiv.org/abs/1710.03740)
    """

    code = "TDR407"
    name = "half-model-training"
    severity = Severity.INFO
    fix_safety = Applicability.SUGGESTION

    VALID = (
        # Only evaluated after .half().
        _HEAD + "model = nn.Linear(2, 2).cuda().half().eval()\n"
        "with torch.inference_mode():\n    y = model(x.half())\n",
        # Trained first, converted for export afterwards.
        _HEAD + "model = nn.Linear(2, 2)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n    opt.step()\n"
        "model.half()\ntorch.save(model.state_dict(), 'fp16.pt')\n",
        # Another model is trained (a frozen fp16 teacher).
        _HEAD + "teacher = nn.Linear(2, 2).half()\nstudent = nn.Linear(2, 2)\n"
        "opt = torch.optim.AdamW(student.parameters())\n"
        "for x in loader:\n    loss = (student(x) - teacher(x.half()).float()).pow(2).mean()\n"
        "    loss.backward()\n    opt.step()\n",
        # float32 master weights kept by hand.
        _HEAD + "model = nn.Linear(2, 2).half()\n"
        "master = [p.detach().clone().float() for p in model.parameters()]\n"
        "opt = torch.optim.SGD(master, lr=0.1)\n"
        "for x in loader:\n    model(x).sum().backward()\n    opt.step()\n",
        # An optimizer wrapper that keeps float32 master weights.
        _HEAD + "from apex.fp16_utils import FP16_Optimizer\n"
        "model = nn.Linear(2, 2).cuda().half()\n"
        "opt = FP16_Optimizer(torch.optim.SGD(model.parameters(), lr=0.1))\n"
        "for x in loader:\n    opt.backward(model(x).sum())\n    loss.backward()\n    opt.step()\n",
        _HEAD + "from apex.optimizers import FP16_Optimizer\n"
        "model = nn.Linear(2, 2).cuda().half()\n"
        "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "optimizer = FP16_Optimizer(optimizer, dynamic_loss_scale=True)\n"
        "for x in loader:\n    optimizer.backward(model(x).sum())\n    loss.backward()\n"
        "    optimizer.step()\n",
        # Tensors, not modules; bfloat16 and float32 models.
        _HEAD + "x = torch.randn(3).half()\nw = torch.randn(3, requires_grad=True)\n"
        "opt = torch.optim.SGD([w])\n(w * x.float()).sum().backward()\nopt.step()\n",
        _HEAD + "model = nn.Linear(2, 2).to(torch.bfloat16)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel(x).sum().backward()\n",
        _HEAD + "model = nn.Linear(2, 2).to('cuda', torch.float32)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel(x).sum().backward()\n",
        # Converted back to float32 before training.
        _HEAD + "model = nn.Linear(2, 2)\nmodel.half()\nmodel.float()\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel(x).sum().backward()\n",
        # No backward pass in the file.
        _HEAD + "model = nn.Linear(2, 2).half()\nopt = torch.optim.SGD(model.parameters())\n",
        # A `half` method of something that is not a module.
        _HEAD + "class Box:\n    def half(self):\n        return self\n"
        "model = Box().half()\nopt = torch.optim.SGD(params)\nloss.backward()\n",
    )
    INVALID = (
        Invalid(
            _HEAD + "model = nn.Linear(2, 2).cuda().half()\n"
            "opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
            "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n"
            "    opt.step()\n",
            fixed=_HEAD + "model = nn.Linear(2, 2).cuda()\n"
            "opt = torch.optim.Adam(model.parameters(), lr=1e-3)\n"
            "for x, y in loader:\n    loss = crit(model(x), y)\n    loss.backward()\n"
            "    opt.step()\n",
            lines=(3,),
        ),
        # Converted in place after the optimizer was built; training in a helper.
        Invalid(
            "import torch as T\nimport torchvision\n"
            "def train(model, opt):\n    for x, y in loader:\n"
            "        T.nn.functional.cross_entropy(model(x), y).backward()\n        opt.step()\n"
            "net = torchvision.models.resnet18()\n"
            "sgd = T.optim.SGD(net.parameters(), lr=0.1)\nnet.half()\ntrain(net, sgd)\n",
            fixed="import torch as T\nimport torchvision\n"
            "def train(model, opt):\n    for x, y in loader:\n"
            "        T.nn.functional.cross_entropy(model(x), y).backward()\n        opt.step()\n"
            "net = torchvision.models.resnet18()\n"
            "sgd = T.optim.SGD(net.parameters(), lr=0.1)\ntrain(net, sgd)\n",
            lines=(9,),
        ),
        # .to(device, dtype) and parameter groups of a sub-module.
        Invalid(
            _HEAD + "model = nn.Sequential(nn.Linear(2, 2))\n"
            "model = model.to('cuda', dtype=torch.float16)\n"
            "opt = torch.optim.SGD([{'params': model[0].parameters()}], lr=0.1)\n"
            "model(x).sum().backward()\nopt.step()\n",
            fixed=_HEAD + "model = nn.Sequential(nn.Linear(2, 2))\n"
            "model = model.to('cuda')\n"
            "opt = torch.optim.SGD([{'params': model[0].parameters()}], lr=0.1)\n"
            "model(x).sum().backward()\nopt.step()\n",
            lines=(4,),
        ),
        # The only statement of a block becomes `pass`.
        Invalid(
            _HEAD + "model = nn.Linear(2, 2)\nif fp16:\n    model.half()\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel(x).sum().backward()\n",
            fixed=_HEAD + "model = nn.Linear(2, 2)\nif fp16:\n    pass\n"
            "opt = torch.optim.SGD(model.parameters(), lr=0.1)\nmodel(x).sum().backward()\n",
            lines=(5,),
        ),
        # A trainer class: converted in __init__, trained in another method.
        Invalid(
            _HEAD + "class Trainer:\n"
            "    def __init__(self):\n"
            "        self.model = nn.Linear(2, 2)\n"
            "        self.model.to(torch.half)\n"
            "        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)\n"
            "    def step(self, x):\n"
            "        self.model(x).sum().backward()\n        self.opt.step()\n",
            fixed=_HEAD + "class Trainer:\n"
            "    def __init__(self):\n"
            "        self.model = nn.Linear(2, 2)\n"
            "        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)\n"
            "    def step(self, x):\n"
            "        self.model(x).sum().backward()\n        self.opt.step()\n",
            lines=(6,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        backwards = [
            c for c in sem.calls_by_attr.get("backward", ()) if training.is_backward(sem, c)
        ]
        backwards += list(sem.calls_to("torch.autograd.backward"))
        if not backwards or any(
            (qual or "").split(".")[0] in _MASTER_WEIGHT_LIBRARIES for _n, _a, qual in sem.imports
        ):
            return
        for call in (*sem.calls_by_attr.get("half", ()), *sem.calls_by_attr.get("to", ())):
            assert isinstance(call.func, ast.Attribute)
            if not _to_float16(ctx, call) or kinds.kind(sem, call.func.value) is not Kind.MODULE:
                continue
            name = _model_name(ctx, call)
            if name is None or not _trained(ctx, call, name, backwards):
                continue
            ctx.report(
                call,
                Text(
                    f"`{name}` is trained in pure float16, without float32 master weights: "
                    "small updates round away; train in float32 under `torch.autocast` with "
                    "a `GradScaler`",
                    f"`{name}` 以纯 float16 训练，没有 float32 主权重：较小的更新会被舍入掉；请保持 "
                    "float32，在 `torch.autocast` 下配合 `GradScaler` 训练",
                ),
                fixes=partial(_fix, ctx, call, name),
            )


def _to_float16(ctx: Context, call: ast.Call) -> bool:
    """``m.half()`` or ``m.to(..., torch.float16 / dtype=torch.half)``."""
    assert isinstance(call.func, ast.Attribute)
    if call.func.attr == "half":
        return not call.args and not call.keywords
    values = [*call.args, *(k.value for k in call.keywords if k.arg == "dtype")]
    return any(ctx.qualname(v) in _FLOAT16 for v in values)


def _chain_base(expr: ast.expr) -> ast.expr:
    """``model`` for ``model.cuda().half()``: strip calls of methods returning the module."""
    while (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr in MODULE_SELF_METHODS
    ):
        expr = expr.func.value
    return expr


def _model_name(ctx: Context, call: ast.Call) -> str | None:
    """The name the converted model is known by afterwards: the assignment's target, or the
    converted name itself (``model.half()`` converts in place)."""
    stmt = ctx.sem.statement_of(call)
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return dotted(stmt.targets[0]) if _in_chain(stmt.value, call) else None
    if isinstance(stmt, ast.Expr) and _in_chain(stmt.value, call):
        return dotted(_chain_base(call))
    return None


def _in_chain(expr: ast.expr, call: ast.Call) -> bool:
    while True:
        if expr is call:
            return True
        if not (
            isinstance(expr, ast.Call)
            and isinstance(expr.func, ast.Attribute)
            and expr.func.attr in MODULE_SELF_METHODS
        ):
            return False
        expr = expr.func.value


def _same_owner(ctx: Context, a: ast.AST, b: ast.AST, name: str) -> bool:
    """Whether ``name`` means the same thing at ``a`` and ``b``: same function, or a
    ``self.`` attribute in the same class."""
    sem = ctx.sem
    if name.startswith("self."):
        return sem.enclosing_class(a) is sem.enclosing_class(b) is not None
    return sem.enclosing_function(a) is sem.enclosing_function(b)


def _trained(ctx: Context, call: ast.Call, name: str, backwards: list[ast.Call]) -> bool:
    sem = ctx.sem
    for other in (*sem.calls_by_attr.get("float", ()), *sem.calls_by_attr.get("to", ())):
        assert isinstance(other.func, ast.Attribute)
        converts_back = other.func.attr == "float" or any(
            ctx.qualname(v) in _FLOAT32 for v in (*other.args, *(k.value for k in other.keywords))
        )
        if (
            converts_back
            and dotted(other.func.value) == name
            and _same_owner(ctx, other, call, name)
        ):
            return False
    optimized = False
    for opt in sem.calls:
        if kinds.kind(sem, opt) is not Kind.OPTIMIZER or not _same_owner(ctx, opt, call, name):
            continue
        if isinstance(sem.parent(opt), ast.Call | ast.keyword):
            continue  # wrapped by a master-weights optimizer (apex's FP16_Optimizer)
        for node in ast.walk(opt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("parameters", "named_parameters")
                and _owned_by(node.func.value, name)
            ):
                optimized = True
    if not optimized:
        return False
    here = sem.enclosing_function(call)
    return any(
        sem.enclosing_function(b) is not here
        or (b.lineno, b.col_offset) > (call.lineno, call.col_offset)
        for b in backwards
        if not training.grad_disabled(sem, b)
    )


def _owned_by(expr: ast.expr, name: str) -> bool:
    """``model``, ``model.backbone``, ``model[0]`` for the name ``model``."""
    while isinstance(expr, ast.Subscript | ast.Attribute):
        if dotted(expr) == name:
            return True
        expr = expr.value
    return dotted(expr) == name


def _fix(ctx: Context, call: ast.Call, name: str) -> Fix | None:
    assert isinstance(call.func, ast.Attribute)
    sem, source = ctx.sem, ctx.source
    receiver = call.func.value
    dtype_args = [a for a in call.args if ctx.qualname(a) in _FLOAT16]
    dtype_kw = keyword(call, "dtype")
    edit: Edit | None
    if call.func.attr == "to" and len(call.args) + len(call.keywords) > 1:
        item: ast.AST | None = dtype_args[0] if dtype_args else dtype_kw
        edit = fixes.remove_argument(source, call, item) if item is not None else None
    else:
        # `model.half()` / `model = model.half()` go; in a chain only the call goes.
        stmt = sem.statement_of(call)
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else None
        same = dotted(receiver) == name and (target is None or dotted(target) == name)
        if isinstance(stmt, ast.Expr | ast.Assign) and same and stmt.value is call:
            if len(sem.block_of(stmt)[0]) > 1:
                edit = fixes.delete_statement(source, stmt)
            else:
                edit = fixes.replace(source, stmt, "pass")
        else:
            edit = fixes.replace(source, call, ctx.segment(receiver))
    if edit is None:
        return None
    return Fix(
        Text(f"Keep `{name}` in float32", f"让 `{name}` 保持 float32"),
        (edit,),
        Applicability.SUGGESTION,
    )

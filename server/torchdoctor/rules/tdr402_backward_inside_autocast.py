from __future__ import annotations

import ast
from functools import partial

from ..core import fixes, training
from ..core.context import Context, Fixes
from ..core.model import Applicability, Fix, Related, Text
from ..core.semantic import FUNCTION_NODES, Semantic
from .base import Invalid, Rule, Valid


class BackwardInsideAutocast(Rule):
    """## What it does
    Checks for `.backward()` calls (including `scaler.scale(loss).backward()`) that run inside
    a `with torch.autocast(...)` block, or inside a function decorated with autocast.

    ## Why is this bad?
    Autocast should wrap only the forward pass and the loss. PyTorch's own documentation says:
    "Backward passes under autocast are not recommended. Backward ops run in the same type that
    autocast used for corresponding forward ops." Running `backward()` inside the region buys
    nothing, and any extra computation there (a gradient penalty, a second forward in a closure,
    metrics on the gradients) is silently cast to half precision too.

    The guide puts "the forward pass in the autocast context, loss and backward with a
    GradScaler"; this rule checks that the backward call really sits outside the context.

    ## Example
    ```python
    with torch.autocast("cuda"):
        output = model(inputs)
        loss = criterion(output, targets)
        scaler.scale(loss).backward()
    ```

    ## Use instead
    ```python
    with torch.autocast("cuda"):
        output = model(inputs)
        loss = criterion(output, targets)
    scaler.scale(loss).backward()
    ```

    ## Fix safety
    When the backward statements are the last statements of the `with` block (and the block
    keeps at least one statement), the fix moves them out of the block by dedenting them. It is
    safe: the backward pass already runs in the types autocast chose for the forward ops, and
    nothing else moves. No fix is offered when other statements follow the backward call, when
    it is nested deeper (in an `if`), or when the `with` statement also enters other context
    managers.

    ## References
    - [`torch.autocast`](https://pytorch.org/docs/stable/amp.html#torch.autocast)
    - [Automatic Mixed Precision examples](https://pytorch.org/docs/stable/notes/amp_examples.html)
    """

    code = "TDR402"
    name = "backward-inside-autocast"
    fix_safety = Applicability.SAFE

    VALID = (
        # Backward after the block.
        "import torch\n"
        "with torch.autocast('cuda'):\n    out = model(x)\n    loss = crit(out, y)\n"
        "loss.backward()\n",
        "import torch\n"
        "with torch.amp.autocast(device_type='cuda'):\n    loss = model(x).sum()\n"
        "scaler.scale(loss).backward()\nscaler.step(opt)\nscaler.update()\n",
        # Autocast explicitly disabled (the usual way to leave a region for a part of it).
        "import torch\n"
        "with torch.autocast('cuda'):\n    out = model(x)\n"
        "    with torch.autocast('cuda', enabled=False):\n        loss = crit(out.float(), y)\n"
        "        loss.backward()\n",
        "from torch.cuda.amp import autocast\n"
        "with autocast(enabled=False):\n    loss = model(x).sum()\n    loss.backward()\n",
        "import torch\n"
        "with torch.autocast('cuda', torch.float16, False):\n    loss = model(x).sum()\n"
        "    loss.backward()\n",
        # A local function named autocast, and a non-torch context manager named so.
        "import torch\nimport contextlib\n"
        "@contextlib.contextmanager\ndef autocast():\n    yield\n"
        "with autocast():\n    loss = model(x).sum()\n    loss.backward()\n",
        "import torch\nfrom contextlib import nullcontext as autocast\n"
        "with autocast():\n    loss = model(x).sum()\n    loss.backward()\n",
        # A closure defined inside the block runs later, outside it.
        "import torch\n"
        "with torch.autocast('cuda'):\n    out = model(x)\n"
        "    def closure():\n        loss = crit(model(x), y)\n        loss.backward()\n"
        "        return loss\n"
        "opt.step(closure)\n",
        # torch.no_grad is not autocast.
        "import torch\nwith torch.no_grad():\n    y = model(x)\nloss.backward()\n",
        Valid(
            "import torch\nwith torch.autocast('cuda'):\n    loss = model(x).sum()\nloss.backward()\n",
            notebook=True,
        ),
        # Accelerate's autocast around the forward only; one made with full precision.
        "import torch\nfrom accelerate import Accelerator\n"
        "accelerator = Accelerator(mixed_precision='fp16')\n"
        "for x, y in loader:\n"
        "    with accelerator.autocast():\n"
        "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
        "    accelerator.backward(loss)\n",
        "import torch\nfrom accelerate import Accelerator\n"
        "accelerator = Accelerator(mixed_precision='no')\n"
        "for x, y in loader:\n"
        "    with accelerator.autocast():\n"
        "        accelerator.backward(model(x).sum())\n",
        # An object of the project's own class, whatever its name, is not a launcher.
        "import torch\n"
        "class Accelerator:\n"
        "    def autocast(self):\n        return open('log.txt')\n"
        "accelerator = Accelerator()\n"
        "for x in loader:\n"
        "    with accelerator.autocast():\n"
        "        model(x).sum().backward()\n",
    )
    INVALID = (
        Invalid(
            "import torch\n"
            "for x, y in loader:\n"
            "    with torch.autocast('cuda'):\n"
            "        out = model(x)\n"
            "        loss = crit(out, y)\n"
            "        loss.backward()\n"
            "    opt.step()\n",
            fixed="import torch\n"
            "for x, y in loader:\n"
            "    with torch.autocast('cuda'):\n"
            "        out = model(x)\n"
            "        loss = crit(out, y)\n"
            "    loss.backward()\n"
            "    opt.step()\n",
            lines=(6,),
        ),
        Invalid(
            "import torch as T\n"
            "with T.amp.autocast(device_type='cuda', dtype=T.bfloat16):\n"
            "    loss = model(x).sum()\n"
            "    scaler.scale(loss).backward()\n",
            fixed="import torch as T\n"
            "with T.amp.autocast(device_type='cuda', dtype=T.bfloat16):\n"
            "    loss = model(x).sum()\n"
            "scaler.scale(loss).backward()\n",
            lines=(4,),
        ),
        Invalid(
            "from torch.cuda.amp import autocast as ac\n"
            "with ac():\n"
            "    loss = model(x).sum()\n"
            "    # two losses\n"
            "    loss.backward(retain_graph=True)\n"
            "    aux.backward()\n",
            fixed="from torch.cuda.amp import autocast as ac\n"
            "with ac():\n"
            "    loss = model(x).sum()\n"
            "    # two losses\n"
            "loss.backward(retain_graph=True)\n"
            "aux.backward()\n",
            lines=(5, 6),
        ),
        Invalid(
            "import torch\n"
            "with torch.autocast('cuda'):\n"
            "    loss = model(x).sum()\n"
            "    torch.autograd.backward(loss)\n",
            fixed="import torch\n"
            "with torch.autocast('cuda'):\n"
            "    loss = model(x).sum()\n"
            "torch.autograd.backward(loss)\n",
            lines=(4,),
        ),
        # Statements after the backward call: no fix.
        Invalid(
            "import torch\n"
            "with torch.autocast('cuda'):\n"
            "    loss = model(x).sum()\n"
            "    loss.backward()\n"
            "    opt.step()\n",
            fixed=None,
            lines=(4,),
        ),
        # The backward call is the whole block: no fix.
        Invalid(
            "import torch\nwith torch.autocast('cuda'):\n    loss.backward()\n",
            fixed=None,
            lines=(3,),
        ),
        # Nested in an if.
        Invalid(
            "import torch\n"
            "with torch.autocast('cuda'):\n"
            "    loss = model(x).sum()\n"
            "    if train:\n"
            "        loss.backward()\n",
            fixed=None,
            lines=(5,),
        ),
        # Other context managers on the same with statement.
        Invalid(
            "import torch\n"
            "with torch.autocast('cuda'), profiler:\n"
            "    loss = model(x).sum()\n"
            "    loss.backward()\n",
            fixed=None,
            lines=(4,),
        ),
        # A training step decorated with autocast.
        Invalid(
            "import torch\n"
            "@torch.autocast('cuda')\n"
            "def step(x):\n"
            "    loss = model(x).sum()\n"
            "    loss.backward()\n",
            fixed=None,
            lines=(5,),
        ),
        Invalid(
            "import torch\nwith torch.autocast('cuda'):\n    loss = model(x).sum()\n"
            "    loss.backward()\n",
            fixed="import torch\nwith torch.autocast('cuda'):\n    loss = model(x).sum()\n"
            "loss.backward()\n",
            notebook=True,
            lines=(4,),
        ),
        # Accelerate: `accelerator.autocast()` and `accelerator.backward(loss)`.
        Invalid(
            "import torch\nfrom accelerate import Accelerator\n"
            "accelerator = Accelerator(mixed_precision='bf16')\n"
            "model, opt, loader = accelerator.prepare(model, opt, loader)\n"
            "for x, y in loader:\n"
            "    with accelerator.autocast():\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "        accelerator.backward(loss)\n"
            "    opt.step()\n",
            fixed="import torch\nfrom accelerate import Accelerator\n"
            "accelerator = Accelerator(mixed_precision='bf16')\n"
            "model, opt, loader = accelerator.prepare(model, opt, loader)\n"
            "for x, y in loader:\n"
            "    with accelerator.autocast():\n"
            "        loss = torch.nn.functional.cross_entropy(model(x), y)\n"
            "    accelerator.backward(loss)\n"
            "    opt.step()\n",
            lines=(8,),
        ),
        # Lightning Fabric, handed to a helper under another name: told by its construction.
        Invalid(
            "import torch\nimport lightning as L\n"
            "def fit(runner, model, loader, opt):\n"
            "    for x, y in loader:\n"
            "        with runner.autocast():\n"
            "            loss = torch.nn.functional.mse_loss(model(x), y)\n"
            "            runner.backward(loss)\n"
            "        opt.step()\n"
            "fit(L.Fabric(precision='16-mixed'), model, loader, opt)\n",
            fixed="import torch\nimport lightning as L\n"
            "def fit(runner, model, loader, opt):\n"
            "    for x, y in loader:\n"
            "        with runner.autocast():\n"
            "            loss = torch.nn.functional.mse_loss(model(x), y)\n"
            "        runner.backward(loss)\n"
            "        opt.step()\n"
            "fit(L.Fabric(precision='16-mixed'), model, loader, opt)\n",
            lines=(7,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        calls = [*sem.calls_by_attr.get("backward", ()), *sem.calls_by_name.get("backward", ())]
        for call in calls:
            if not training.is_backward(sem, call):
                continue
            with_ = training.enclosing_autocast(sem, call)
            if with_ is not None:
                region: ast.AST = with_.items[0].context_expr
                fix: Fixes = partial(_dedent_fix, ctx, call, with_)
            else:
                decorator = _autocast_decorator(sem, call)
                if decorator is None:
                    continue
                region, fix = decorator, ()
            ctx.report(
                call,
                Text(
                    "`.backward()` runs inside an `autocast` region; call it after the "
                    "`with` block, autocast should cover only the forward pass and the loss",
                    "`.backward()` 在 `autocast` 区域内执行；请在 `with` 块之后调用，"
                    "autocast 只应包住前向传播和损失计算",
                ),
                fixes=fix,
                related=[
                    Related(ctx.range(region), Text("autocast starts here", "autocast 从这里开始"))
                ],
            )


def _is_backward_statement(sem: Semantic, stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and training.is_backward(sem, stmt.value)
    )


def _dedent_fix(ctx: Context, call: ast.Call, with_: ast.With | ast.AsyncWith) -> Fix | None:
    sem, source = ctx.sem, ctx.source
    stmt = sem.statement_of(call)
    body = with_.body
    if len(with_.items) != 1 or stmt not in body:
        return None
    first = len(body)
    while first > 0 and _is_backward_statement(sem, body[first - 1]):
        first -= 1
    tail = body[first:]
    if first == 0 or stmt not in tail:
        return None
    if not fixes.starts_line(source, with_) or not all(fixes.starts_line(source, s) for s in tail):
        return None
    remove = len(source.indent_of(stmt.lineno)) - len(source.indent_of(with_.lineno))
    if remove <= 0:
        return None
    start, end = fixes.block_rows(tail)
    edits = fixes.reindent_rows(source, start, end, remove=remove)
    if not edits:
        return None
    return Fix(
        Text("Move the backward call out of the `autocast` block", "把反向调用移出 `autocast` 块"),
        tuple(edits),
        Applicability.SAFE,
    )


def _autocast_decorator(sem: Semantic, call: ast.Call) -> ast.expr | None:
    """The autocast decorator of the function running ``call``, when no ``with`` autocast is
    nearer (a nearer one decides, enabled or not)."""
    for with_ in sem.enclosing_withs(call):
        if any(training.is_autocast(sem, item.context_expr) for item in with_.items):
            return None
    function = sem.enclosing_function(call)
    if function is None or not isinstance(function, FUNCTION_NODES):
        return None
    for anc in sem.ancestors(call):
        if isinstance(anc, ast.Lambda | ast.ClassDef):
            return None
        if anc is function:
            break
    for decorator in function.decorator_list:
        if training.is_autocast(sem, decorator) and not training.autocast_disabled(sem, decorator):
            return decorator
    return None

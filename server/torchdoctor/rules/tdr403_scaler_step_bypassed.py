from __future__ import annotations

import ast
from collections.abc import Iterator

from ..core import fixes, kinds, training
from ..core.context import Context
from ..core.kinds import Kind
from ..core.model import Applicability, Edit, Fix, Severity, Text
from ..core.semantic import FUNCTION_NODES, terminal_name
from .base import Invalid, Rule, Valid


class ScalerStepBypassed(Rule):
    """## What it does
    Checks training code that calls `scaler.scale(loss).backward()` and then either steps the
    optimizer directly with `optimizer.step()` instead of `scaler.step(optimizer)`, or calls
    `scaler.step(...)` without a `scaler.update()` after it.

    ## Why is this bad?
    `scaler.scale(loss)` multiplies the loss, and so every gradient, by the scale factor (65,536
    at the start). Only `scaler.step(optimizer)` divides the gradients back and skips the
    update when they contain inf or NaN. With `optimizer.step()` the parameters move by
    scaled gradients: with SGD each update is 65,536 times too large, and overflowing steps
    write inf/NaN into the weights. Measured on CPU with `bench/cpu_scaler_bypass.py` (a linear
    regression trained with SGD): the first bypassed update has an L2 norm of 12,610 instead of
    0.19, and the loss is NaN after 20 steps, while with `scaler.step` it falls from 70 to 26.

    `scaler.update()` adjusts the scale after each step. Without it the scale never adapts, and
    the second `scaler.step()` on the same optimizer fails with `RuntimeError: step() has
    already been called since the last update().`

    As the guide says, GradScaler skips the steps whose gradients overflowed and lowers the
    scale; that only happens through `scaler.step()` and `scaler.update()`.

    ## Example
    ```python
    for inputs, targets in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = criterion(model(inputs), targets)
        scaler.scale(loss).backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for inputs, targets in loader:
        optimizer.zero_grad()
        with torch.autocast("cuda"):
            loss = criterion(model(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    ```

    ## Fix safety
    The fixes replace `optimizer.step()` with `scaler.step(optimizer)` (adding `scaler.update()`
    after it when the body has none), or insert `scaler.update()` after an existing
    `scaler.step(...)`. Inserting the update is safe: without it the second `scaler.step()`
    raises. Replacing the step is safe only where the code fails today: a `scaler.update()`
    that follows the step in the same block, with no `scaler.step(...)` of another optimizer,
    raises `AssertionError: No inf checks were recorded prior to update.` Otherwise the
    replacement is unsafe: the program trains today, with scaled gradients, and every update
    changes (to the intended one; in a CPU run with `init_scale=1024`, the update norm goes from
    6,144 to 6). It is unsafe too when the scaled backward runs only in one branch
    (`if use_amp:`) and the step is shared, because on the other path the scaler may not exist.
    With a disabled scaler (`enabled=False`) both calls reduce to a plain `optimizer.step()`.

    ## References
    - [`torch.amp.GradScaler`](https://pytorch.org/docs/stable/amp.html#gradient-scaling)
    - [Automatic Mixed Precision examples](https://pytorch.org/docs/stable/notes/amp_examples.html)
    """

    code = "TDR403"
    name = "scaler-step-bypassed"
    severity = Severity.ERROR
    fix_safety = Applicability.UNSAFE

    VALID = (
        "import torch\nscaler = torch.amp.GradScaler('cuda')\n"
        "for x, y in loader:\n"
        "    optimizer.zero_grad()\n"
        "    with torch.autocast('cuda'):\n        loss = crit(model(x), y)\n"
        "    scaler.scale(loss).backward()\n"
        "    scaler.step(optimizer)\n"
        "    scaler.update()\n"
        "    scheduler.step()\n",
        # Gradient accumulation: step and update under a condition.
        "import torch\n"
        "for i, (x, y) in enumerate(loader):\n"
        "    scaler.scale(loss_fn(model(x), y) / 4).backward()\n"
        "    if (i + 1) % 4 == 0:\n"
        "        scaler.step(opt)\n"
        "        scaler.update()\n"
        "        opt.zero_grad()\n",
        # Micro-batches in an inner loop, step in the outer loop.
        "import torch\n"
        "for batch in loader:\n"
        "    for micro in batch.split(8):\n"
        "        scaler.scale(model(micro).sum()).backward()\n"
        "    scaler.unscale_(optimizer)\n"
        "    scaler.step(optimizer)\n"
        "    scaler.update()\n",
        # Plain training without a scaler.
        "import torch\n"
        "for x, y in loader:\n"
        "    loss = crit(model(x), y)\n    loss.backward()\n    optimizer.step()\n",
        # Unrelated .step() calls: schedulers, environments.
        "import torch\n"
        "def train(scaler, optimizer, scheduler, env):\n"
        "    for x in loader:\n"
        "        scaler.scale(model(x).sum()).backward()\n"
        "        scaler.step(optimizer)\n"
        "        scaler.update()\n"
        "        scheduler.step()\n"
        "        opt_scheduler.step()\n"
        "        env.step()\n",
        # The update lives in a helper method.
        "import torch\n"
        "class Trainer:\n"
        "    def finish(self):\n        self.scaler.update()\n"
        "    def fit(self):\n"
        "        for x in self.loader:\n"
        "            self.scaler.scale(self.model(x).sum()).backward()\n"
        "            self.scaler.step(self.optimizer)\n"
        "            self.finish()\n",
        # The step happens in a helper; the scheduler is not an optimizer.
        "import torch\n"
        "for x in loader:\n"
        "    scaler.scale(model(x).sum()).backward()\n"
        "    optimizer_step()\n"
        "    scheduler.step()\n",
        # The plain step belongs to the branch without a scaler.
        "import torch\n"
        "for x in loader:\n"
        "    loss = model(x).sum()\n"
        "    if use_amp:\n"
        "        scaler.scale(loss).backward()\n"
        "        amp_step(scaler, optimizer)\n"
        "    else:\n"
        "        loss.backward()\n"
        "        optimizer.step()\n",
        # A scaler class of this file or of another library, with its own step logic.
        "import torch\n"
        "class LossScaler:\n"
        "    def scale(self, loss):\n        return loss * 1024\n"
        "    def step(self, opt):\n        opt.step()\n"
        "scaler = LossScaler()\n"
        "for x in loader:\n"
        "    scaler.scale(model(x).sum()).backward()\n"
        "    scaler.step(optimizer)\n",
        "import torch\nfrom mylib import DynamicScaler\n"
        "scaler = DynamicScaler()\n"
        "for x in loader:\n"
        "    scaler.scale(model(x).sum()).backward()\n"
        "    scaler.step(optimizer)\n",
        # .scale() of something that is not a scaler.
        "import torch\nimport torch.nn as nn\n"
        "layer = nn.Linear(2, 2)\n"
        "for x in loader:\n    layer.scale(x).backward()\n    optimizer.step()\n",
        # A closure-taking optimizer step is not the bypass pattern.
        "import torch\n"
        "for x in loader:\n    scaler.scale(model(x).sum()).backward()\n    optimizer.step(closure)\n",
        Valid(
            "import torch\nfor x in loader:\n    scaler.scale(model(x).sum()).backward()\n"
            "    scaler.step(opt)\n    scaler.update()\n",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\nscaler = torch.amp.GradScaler('cuda')\n"
            "for x, y in loader:\n"
            "    optimizer.zero_grad()\n"
            "    with torch.autocast('cuda'):\n        loss = crit(model(x), y)\n"
            "    scaler.scale(loss).backward()\n"
            "    optimizer.step()\n"
            "    scheduler.step()\n",
            fixed="import torch\nscaler = torch.amp.GradScaler('cuda')\n"
            "for x, y in loader:\n"
            "    optimizer.zero_grad()\n"
            "    with torch.autocast('cuda'):\n        loss = crit(model(x), y)\n"
            "    scaler.scale(loss).backward()\n"
            "    scaler.step(optimizer)\n"
            "    scaler.update()\n"
            "    scheduler.step()\n",
            lines=(8,),
        ),
        # update already present: only the step is replaced.
        Invalid(
            "import torch\n"
            "def step(self, loss):\n"
            "    self.scaler.scale(loss).backward()\n"
            "    self.opt.step()\n"
            "    self.scaler.update()\n",
            fixed="import torch\n"
            "def step(self, loss):\n"
            "    self.scaler.scale(loss).backward()\n"
            "    self.scaler.step(self.opt)\n"
            "    self.scaler.update()\n",
            lines=(4,),
        ),
        # A deprecated scaler constructor, known optimizer kind with an unusual name.
        Invalid(
            "import torch\nfrom torch.cuda.amp import GradScaler\n"
            "sc = GradScaler()\nsgd = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for x in loader:\n"
            "    sc.scale(model(x).sum()).backward()\n"
            "    if ready:\n"
            "        sgd.step()\n"
            "        sc.update()\n",
            fixed="import torch\nfrom torch.cuda.amp import GradScaler\n"
            "sc = GradScaler()\nsgd = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for x in loader:\n"
            "    sc.scale(model(x).sum()).backward()\n"
            "    if ready:\n"
            "        sc.step(sgd)\n"
            "        sc.update()\n",
            lines=(8,),
        ),
        # The update runs only on some iterations: the others train with scaled gradients
        # today, so the replacement is unsafe.
        Invalid(
            "import torch\n"
            "for i, x in enumerate(loader):\n"
            "    scaler.scale(model(x).sum()).backward()\n"
            "    optimizer.step()\n"
            "    if i % 100 == 0:\n"
            "        scaler.update()\n",
            fixed="import torch\n"
            "for i, x in enumerate(loader):\n"
            "    scaler.scale(model(x).sum()).backward()\n"
            "    scaler.step(optimizer)\n"
            "    if i % 100 == 0:\n"
            "        scaler.update()\n",
            lines=(4,),
        ),
        # A step shared by both branches still bypasses the scaler when it is used.
        Invalid(
            "import torch\n"
            "for x in loader:\n"
            "    loss = model(x).sum()\n"
            "    if use_amp:\n"
            "        scaler.scale(loss).backward()\n"
            "    else:\n"
            "        loss.backward()\n"
            "    optimizer.step()\n",
            fixed="import torch\n"
            "for x in loader:\n"
            "    loss = model(x).sum()\n"
            "    if use_amp:\n"
            "        scaler.scale(loss).backward()\n"
            "    else:\n"
            "        loss.backward()\n"
            "    scaler.step(optimizer)\n"
            "    scaler.update()\n",
            lines=(8,),
        ),
        # scaler.step without update.
        Invalid(
            "import torch\n"
            "for x, y in loader:\n"
            "    scaler.scale(crit(model(x), y)).backward()\n"
            "    scaler.step(optimizer)  # apply\n"
            "    optimizer.zero_grad()\n",
            fixed="import torch\n"
            "for x, y in loader:\n"
            "    scaler.scale(crit(model(x), y)).backward()\n"
            "    scaler.step(optimizer)  # apply\n"
            "    scaler.update()\n"
            "    optimizer.zero_grad()\n",
            lines=(4,),
        ),
        # update before the step does not count.
        Invalid(
            "import torch\n"
            "for x in loader:\n"
            "    scaler.update()\n"
            "    scaler.scale(model(x).sum()).backward()\n"
            "    scaler.step(optimizer)\n",
            fixed="import torch\n"
            "for x in loader:\n"
            "    scaler.update()\n"
            "    scaler.scale(model(x).sum()).backward()\n"
            "    scaler.step(optimizer)\n"
            "    scaler.update()\n",
            lines=(5,),
        ),
        # The step is not a statement of its own line: reported, no fix.
        Invalid(
            "import torch\n"
            "for x in loader:\n"
            "    scaler.scale(model(x).sum()).backward()\n"
            "    scaler.step(optimizer); log()\n",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch\nfor x in loader:\n    scaler.scale(model(x).sum()).backward()\n"
            "    opt.step()\n",
            fixed="import torch\nfor x in loader:\n    scaler.scale(model(x).sum()).backward()\n"
            "    scaler.step(opt)\n    scaler.update()\n",
            notebook=True,
            lines=(4,),
        ),
    )

    def check(self, ctx: Context) -> None:
        seen: set[ast.Call] = set()
        for call in ctx.sem.calls_by_attr.get("backward", ()):
            scaler = training.scaled_backward_scaler(call)
            if scaler is None or not _maybe_grad_scaler(ctx, scaler):
                continue
            name = ctx.segment(scaler)
            region, steps, bypass = _find_steps(ctx, call, name)
            updates = [c for c in _calls(ctx, region, "update") if _receiver(ctx, c) == name]
            stepped = {ctx.segment(s.args[0]) for s in steps if s.args}
            for opt_step in bypass:
                if opt_step in seen or _receiver(ctx, opt_step) in stepped:
                    continue
                seen.add(opt_step)
                self._report_bypass(ctx, opt_step, name, call, updates, failing=not steps)
            for step in steps:
                if step in seen:
                    continue
                seen.add(step)
                if any(_after(u, step) for u in updates) or _helper_updates(ctx, region, scaler):
                    continue
                self._report_missing_update(ctx, step, name)

    @staticmethod
    def _report_bypass(
        ctx: Context,
        opt_step: ast.Call,
        name: str,
        backward: ast.Call,
        updates: list[ast.Call],
        failing: bool,
    ) -> None:
        """``failing``: no ``step`` of the scaler runs in the region, so its ``update()`` calls
        raise."""
        optimizer = _receiver(ctx, opt_step)
        edits: list[Edit] = [fixes.replace(ctx.source, opt_step, f"{name}.step({optimizer})")]
        title = Text(
            f"Replace with `{name}.step({optimizer})`", f"替换为 `{name}.step({optimizer})`"
        )
        if not any(_after(u, opt_step) for u in updates):
            insert = _insert_update(ctx, opt_step, name)
            if insert is not None:
                edits.append(insert)
                title = Text(
                    f"Replace with `{name}.step({optimizer})` and add `{name}.update()`",
                    f"替换为 `{name}.step({optimizer})` 并添加 `{name}.update()`",
                )
        ctx.report(
            opt_step,
            Text(
                f"`{optimizer}.step()` bypasses the GradScaler after `{name}.scale(...).backward()`:"
                f" parameters move by scaled gradients; use `{name}.step({optimizer})`",
                f"在 `{name}.scale(...).backward()` 之后 `{optimizer}.step()` 绕过了 GradScaler："
                f"参数会按放大后的梯度更新；请使用 `{name}.step({optimizer})`",
            ),
            fixes=[
                Fix(
                    title,
                    tuple(edits),
                    _bypass_fix_safety(ctx, opt_step, backward, updates if failing else []),
                )
            ],
            related=[ctx.related(backward, Text("scaled backward", "缩放后的反向传播"))],
        )

    @staticmethod
    def _report_missing_update(ctx: Context, step: ast.Call, name: str) -> None:
        insert = _insert_update(ctx, step, name)
        fix = (
            Fix(
                Text(
                    f"Add `{name}.update()` after the step", f"在 step 之后添加 `{name}.update()`"
                ),
                (insert,),
                Applicability.SAFE,
            )
            if insert is not None
            else None
        )
        ctx.report(
            step,
            Text(
                f"`{name}.step(...)` is not followed by `{name}.update()`: the scale never adapts "
                f"and the next `{name}.step()` raises `RuntimeError`",
                f"`{name}.step(...)` 之后没有调用 `{name}.update()`：缩放因子不会调整，"
                f"下一次 `{name}.step()` 会抛出 `RuntimeError`",
            ),
            fixes=[fix],
        )


def _maybe_grad_scaler(ctx: Context, expr: ast.expr) -> bool:
    """A GradScaler, or a name whose value is not known here (a parameter, an attribute); not
    an instance of another class (a custom scaler may update inside its own ``step``)."""
    kind = ctx.kind(expr)
    if kind is not None:
        return kind is Kind.SCALER
    call = kinds.constructor_call(ctx.sem, expr)
    return call is None or (
        ctx.qualname(call.func) is None and ctx.sem.local_class(call.func) is None
    )


def _bypass_fix_safety(
    ctx: Context, opt_step: ast.Call, backward: ast.Call, updates: list[ast.Call]
) -> Applicability:
    """Safe only where the code fails today: an ``update()`` follows the step in its block
    (without a ``scaler.step`` it raises ``No inf checks were recorded``). Otherwise the
    optimizer trains with scaled gradients today and the fix changes every update. Unsafe, too,
    when the scaled backward runs only under a condition that the step is outside of: on the
    other path the scaler may not exist (``scaler = ... if amp else None``)."""
    for anc in ctx.sem.ancestors(backward):
        if ctx.sem.is_inside(opt_step, anc):
            break
        if isinstance(anc, ast.If | ast.Try | ast.Match):
            return Applicability.UNSAFE
    try:
        block, index = ctx.sem.block_of(ctx.sem.statement_of(opt_step))
    except ValueError:
        return Applicability.UNSAFE
    for later in block[index + 1 :]:
        if any(isinstance(n, _JUMPS) for n in ctx.sem.walk(later)):
            break
        if any(ctx.sem.statement_of(u) is later for u in updates):
            return Applicability.SAFE
    return Applicability.UNSAFE


_JUMPS = (ast.Return, ast.Continue, ast.Break, ast.Raise)


def _regions(ctx: Context, node: ast.AST) -> Iterator[list[ast.stmt]]:
    """Bodies around ``node``, innermost first: its loops, then its function (or module)."""
    for loop in training.enclosing_loops(ctx.sem, node):
        yield loop.node.body
    function = ctx.sem.enclosing_function(node)
    yield function.body if function is not None else ctx.tree.body


def _calls(ctx: Context, region: list[ast.stmt], attr: str) -> list[ast.Call]:
    return [
        node
        for node in ctx.sem.walk_body(region)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == attr
    ]


def _receiver(ctx: Context, call: ast.Call) -> str:
    assert isinstance(call.func, ast.Attribute)
    return ctx.segment(call.func.value)


def _after(a: ast.AST, b: ast.AST) -> bool:
    return (a.lineno, a.col_offset) > (b.lineno, b.col_offset)  # type: ignore[attr-defined]


def _find_steps(
    ctx: Context, backward: ast.Call, name: str
) -> tuple[list[ast.stmt], list[ast.Call], list[ast.Call]]:
    """The nearest body around ``backward`` that steps: its ``name.step(...)`` calls and its
    plain ``optimizer.step()`` calls after the backward call."""
    region: list[ast.stmt] = []
    for region in _regions(ctx, backward):
        steps, bypass = [], []
        for call in _calls(ctx, region, "step"):
            receiver = _receiver(ctx, call)
            if receiver == name:
                steps.append(call)
            elif (
                _is_plain_optimizer_step(ctx, call)
                and _after(call, backward)
                and not ctx.sem.exclusive_branches(call, backward)
            ):
                bypass.append(call)
        if steps or bypass:
            return region, steps, bypass
    return region, [], []


def _is_plain_optimizer_step(ctx: Context, call: ast.Call) -> bool:
    if call.args or call.keywords:
        return False
    assert isinstance(call.func, ast.Attribute)
    return kinds.is_optimizer(ctx.sem, call.func.value)


def _insert_update(ctx: Context, call: ast.Call, name: str) -> Edit | None:
    stmt = ctx.sem.statement_of(call)
    if not isinstance(stmt, ast.Expr | ast.Assign) or stmt.value is not call:
        return None
    return fixes.insert_statement_after(ctx.source, stmt, f"{name}.update()")


def _helper_updates(ctx: Context, region: list[ast.stmt], scaler: ast.expr) -> bool:
    """Whether a function of this file called in ``region`` updates a scaler of the same name."""
    want = terminal_name(scaler)
    for node in ctx.sem.walk_body(region):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        target: ast.AST | None = ctx.sem.local_function(func)
        if (
            target is None
            and isinstance(func, ast.Attribute)
            and terminal_name(func.value) == "self"
        ):
            cls = ctx.sem.enclosing_class(node)
            target = next(
                (
                    s
                    for s in (cls.body if cls else [])
                    if isinstance(s, FUNCTION_NODES) and s.name == func.attr
                ),
                None,
            )
        if target is None:
            continue
        for inner in ctx.sem.walk(target):
            if (
                isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Attribute)
                and inner.func.attr == "update"
                and terminal_name(inner.func.value) == want
            ):
                return True
    return False

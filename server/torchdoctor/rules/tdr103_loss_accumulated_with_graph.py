from __future__ import annotations

import ast

from ..core import fixes, running_totals, summaries, training, value_flow
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import Semantic, dotted
from .base import Rule
from .examples import tdr103


class LossAccumulatedWithGraph(Rule):
    """## What it does
    Checks training loops that accumulate a loss tensor — `total += loss`,
    `total = total + loss`, `losses.append(loss)` — without `.item()` or `.detach()`. A loss
    is the result of `criterion(...)` where `criterion` is an `nn.*Loss`, of
    `F.cross_entropy(...)`/`F.*_loss(...)`, of `nn.MSELoss()(...)`, arithmetic on one, or a
    tensor that is `.backward()`-ed.

    The loss may come from a helper, of this file or of another module: a training step that
    returns its loss after `backward()` (`total += train_step(...)`), a dict whose `'loss'` was
    backpropagated, the values of `.items()` of a returned dict (also a dict whose values a
    loss function sums into the loss it returns, when that loss is backpropagated: `loss, terms
    = loss_fn(...)`, `loss.backward()`, `return terms`), or the parts unpacked from an
    object returned after the backward pass of one of its attributes (`losses.total.backward()`
    then `return losses`, a trainer's method called on its instance), or a term of the loss a
    helper returns with it, when that loss is backpropagated (`total, coarse = step(...)` after
    `total = coarse + fine` in `step`, then `total.backward()`).

    A running meter counts as an accumulator: a method of an object (of this file or of another
    module) that adds what it is handed into an attribute of its instance (`self.sum += val *
    n`, or each item of a list: `for i, v in enumerate(values): self._sum[i] += v`), called
    with a loss in a training loop, or in a training step (a method that runs a backward pass
    and an optimizer step) on an object kept on `self`: `self.losses.update([coarse * 1000,
    fine * 1000])`. Its fixes are unsafe: the meter's own code reads what it kept.

    ## Why is this bad?
    A loss tensor carries its autograd graph. Adding it to a running total (or keeping it in a
    list) links every iteration's graph to an object that outlives the iteration, so none of
    them is freed: memory grows with every batch until the epoch ends, or until the process runs
    out of memory. When the loss was never backpropagated (evaluation with gradients on, or a
    logged auxiliary loss) every saved activation stays alive: measured on an H200, summing the
    losses of 50 iterations of an MLP (1024→4096→10, batch 512) peaked at 409 MiB as tensors and
    24 MiB with `.item()`; on a CPU (`bench/cpu_loss_accumulation.py`, torch 2.13) the surviving
    graphs hold 403 MiB after 50 iterations, and 0 MiB with `.item()`. After `.backward()` the
    activations are freed, but the total still requires grad and the chain of autograd nodes
    behind it grows by every operation of every iteration. The PyTorch FAQ shows this exact loop as the first cause of memory
    growth.

    It is a leak even when the total is only printed or logged later. The rule stays silent
    when the accumulation runs under `torch.no_grad()`/`torch.inference_mode()` (or the loss
    was computed there), when the accumulator is reset inside the loop, when the accumulated
    value is itself backpropagated, and when it is returned from a loop that has no backward
    pass of its own (summing the losses of an unrolled sequence for one backward pass by the
    caller is intended), also through other totals (`loc += part / n` in a loss module's
    `forward`, then `return loc`). A total returned from a loop that trains is still reported.

    ## Example
    ```python
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss
    ```

    ## Use instead
    ```python
    total = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    ```

    ## Fix safety
    Two fixes: `.detach()` keeps a tensor with the same values, dtype and device, only without
    the graph; `.item()` turns the total into a Python float.

    `.detach()` is safe where the rule can follow every read of the total (and of the values
    computed from it: arithmetic, containers, a plain name assigned from it, and in a notebook
    the calls of the function that returns it; a `.py` module's function may be called from
    another module, so a returned total is not proven there) to a use that only reads the
    number: an f-string or `str.format`, `print`/`str`/`float`/`int`/`len`, a
    comparison or an `if`, `.item()`/`.tolist()`/`.detach()`, tensor methods such as
    `.cpu()`/`.mean()` and `torch.*` functions whose results end the same way, or a logger
    call (`add_scalar`, `log`, `log_metric`, `info`, `set_postfix`...). A printed tensor then
    no longer shows `grad_fn=<...>`, the graph the finding is about; nothing else changes.
    Anywhere else (the total is an attribute or a dict item, is returned to callers the file
    does not show, is stored, pickled, passed to another function, or its `.requires_grad`,
    `.grad_fn` or `.numpy()` is used) it is unsafe: that code might differentiate it or notice.
    It is the first fix when it is safe, so `--fix` applies it. For `append` the same
    conditions hold for every read of the list (`append`/`extend` themselves read nothing).

    `.item()` is always unsafe: the sum is then made in Python's double precision instead of
    the loss's float32, so the digits printed can differ (a `:.4f` average of 100 losses differs
    in about one run of 200), a printed value loses its `tensor(...)` form, `.item()` waits
    for the GPU on every iteration, and it raises on a loss with more than one element
    (`reduction="none"`). It is not offered when a read of the total needs a tensor (a tensor
    method or attribute, indexing, a `torch.*` function): the float would break it.

    ## References
    - [PyTorch FAQ: accumulating history across the training loop](https://pytorch.org/docs/stable/notes/faq.html#my-model-reports-cuda-runtime-error-2-out-of-memory)
    - [`Tensor.item`](https://pytorch.org/docs/stable/generated/torch.Tensor.item.html)
    - [`Tensor.detach`](https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html)
    """

    code = "TDR103"
    name = "loss-accumulated-with-graph"
    severity = Severity.WARNING
    fix_safety = Applicability.UNSAFE

    VALID = tdr103.VALID
    INVALID = tdr103.INVALID

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        for node, acc, value in training.accumulations(sem):
            name = training.accumulator_name(acc)
            if name is None:
                continue
            held: str | None = summaries.TENSOR if training.holds_loss(sem, value) else None
            loop = None
            if held is None:
                # Through what helpers return (`total += train_step(...)`, `out["loss"]`):
                # asked only inside a loop that runs with gradients on.
                loop = summaries.iteration_loop(sem, node)
                if loop is None or training.grad_disabled(sem, node):
                    continue
                held = summaries.carried_graph(sem, value)
                if held is None or (held == summaries.CONTAINER and not isinstance(node, ast.Call)):
                    continue
            loop = loop or summaries.iteration_loop(sem, node)
            if loop is None or training.grad_disabled(sem, node):
                continue
            scope = sem.enclosing_function(node) or sem.tree
            # A loop that backpropagates each iteration (itself or in a helper it calls) cannot
            # mean to differentiate the total later; one that does not may be summing an
            # unrolled sequence for its caller.
            trains = summaries.trains(sem, loop.node.body)
            if training.rebound_in(sem, name, loop.node.body, node) or training.escapes(
                sem, name, scope, returns=not trains
            ):
                continue
            if isinstance(node, ast.Call) and not value_flow.is_list(ctx.sem, acc):
                continue
            flow = value_flow.follow(sem, acc, whole=ctx.notebook is not None)
            if not trains and flow.returned:
                continue  # terms of the loss a function returns (a loss module's forward)
            self._report(ctx, node, value, flow, tensor=held == summaries.TENSOR)
        # Only a method of an instance the code made can keep what it is handed.
        for calls in list(sem.calls_by_attr.values()):
            for call in calls:
                func = call.func
                if (
                    (call.args or call.keywords)
                    and isinstance(func, ast.Attribute)
                    and summaries.may_hold_instance(sem, func.value)
                ):
                    self._check_kept(ctx, call)

    def _check_kept(self, ctx: Context, call: ast.Call) -> None:
        """``meter.update(loss)``: a method that adds what it is handed into an attribute of
        its instance, called once per iteration (in a training loop, or in a training step:
        a method that runs a backward pass and an optimizer step) with a loss tensor."""
        sem = ctx.sem
        assert isinstance(call.func, ast.Attribute)
        meter = call.func.value
        on_self = isinstance(meter, ast.Attribute) and dotted(meter.value) == "self"
        if not on_self and not training.in_loop(sem, call):
            return  # neither kept across steps nor called again and again
        values = running_totals.kept_arguments(sem, call)
        if not values or training.grad_disabled(sem, call):
            return
        loop = summaries.iteration_loop(sem, call)
        if loop is not None:
            name = training.accumulator_name(meter)
            if name is None or training.rebound_in(sem, name, loop.node.body, call):
                return
        elif not _training_step_state(sem, call, meter):
            return
        for value in values:
            if summaries.carried_graph(sem, value) != summaries.TENSOR:
                continue
            self._report(ctx, call, value, value_flow.Flow(unsafe=True), kept=call)

    @staticmethod
    def _report(
        ctx: Context,
        node: ast.AST,
        value: ast.expr,
        flow: value_flow.Flow,
        *,
        tensor: bool = True,
        kept: ast.Call | None = None,
    ) -> None:
        if not tensor:
            # A dict (or a value of one) that holds the loss: `.detach()` would not apply.
            ctx.report(
                value,
                Text(
                    "This value holds a loss with its autograd graph: every iteration's graph "
                    "stays in memory; keep `loss.detach()` or `loss.item()` instead",
                    "这个值带着损失及其计算图：每次迭代的计算图都留在内存里；"
                    "请改为保存 `loss.detach()` 或 `loss.item()`",
                ),
            )
            return
        text = ctx.segment(value)
        if not isinstance(value, ast.Name | ast.Attribute | ast.Call | ast.Subscript):
            text = f"({text})"
        detach = Fix(
            Text("Add `.detach()`", "加上 `.detach()`"),
            (fixes.replace(ctx.source, value, f"{text}.detach()"),),
            Applicability.UNSAFE if flow.unsafe else Applicability.SAFE,
        )
        if kept is not None:
            callee = ctx.segment(kept.func)
            callee = callee if len(callee) <= 40 else "update"
            message = Text(
                f"`{callee}(...)` adds the loss to a running total it keeps, with its autograd "
                "graph: every iteration's graph stays in memory; pass `loss.item()`",
                f"`{callee}(...)` 把损失连同其计算图累加进它保存的累计值：每次迭代的计算图都"
                "留在内存里；请传入 `loss.item()`",
            )
            item = Fix(
                Text("Add `.item()`", "加上 `.item()`"),
                (fixes.replace(ctx.source, value, f"{text}.item()"),),
                Applicability.UNSAFE,
            )
            choices = [item, detach]
        elif isinstance(node, ast.Call):
            message = Text(
                "The loss is kept in a list with its autograd graph: every iteration's graph "
                "stays in memory; append `loss.detach()`",
                "损失连同其计算图被保存在列表中：每次迭代的计算图都留在内存里；请追加 `loss.detach()`",
            )
            choices = [detach]
        elif flow.tensor:
            # `.item()` would break a use that needs a tensor (`total.cpu()`, `torch.stack`).
            message = Text(
                "The loss is accumulated with its autograd graph: every iteration's graph "
                "stays in memory; add `loss.detach()`",
                "累加损失时带上了它的计算图：每次迭代的计算图都留在内存里；请加上 `loss.detach()`",
            )
            choices = [detach]
        else:
            message = Text(
                "The loss is accumulated with its autograd graph: every iteration's graph "
                "stays in memory; add `loss.item()` (or `loss.detach()`)",
                "累加损失时带上了它的计算图：每次迭代的计算图都留在内存里；请加上 `loss.item()`"
                "（或 `loss.detach()`）",
            )
            item = Fix(
                Text("Add `.item()`", "加上 `.item()`"),
                (fixes.replace(ctx.source, value, f"{text}.item()"),),
                Applicability.UNSAFE,
            )
            choices = [item, detach] if flow.unsafe else [detach, item]
        ctx.report(value, message, fixes=choices)


def _training_step_state(sem: Semantic, call: ast.Call, meter: ast.expr) -> bool:
    """The call is in a method that runs once per batch (it runs a backward pass and steps an
    optimizer, itself or through helpers), on an object kept on ``self``: the object outlives
    the step, and adds every step's value."""
    func = sem.enclosing_function(call)
    if func is None or not (
        isinstance(meter, ast.Attribute)
        and isinstance(meter.value, ast.Name)
        and meter.value.id == "self"
    ):
        return False
    key = ("tdr103-training-step", func)
    known = sem.memo.get(key)
    if not isinstance(known, bool):
        known = summaries.trains(sem, func.body) and bool(summaries.step_calls(sem, func))
        sem.memo[key] = known
    return known

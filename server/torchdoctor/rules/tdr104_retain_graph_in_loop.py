from __future__ import annotations

import ast

from ..core import arguments, graph_reach, summaries, training
from ..core.context import Context
from ..core.model import Severity, Text
from ..core.semantic import dotted, is_true
from .base import Rule
from .examples import tdr104

_GRAD_FUNCS = ("torch.autograd.backward", "torch.autograd.grad")


class RetainGraphInLoop(Rule):
    """## What it does
    Checks for `.backward(retain_graph=True)` (or `torch.autograd.grad/backward(...,
    retain_graph=True)`) inside a loop when nothing needs the graph afterwards: the loss is
    built in the iteration, no later backward pass of the iteration goes through it, and it
    reaches no graph that outlives the iteration.

    `retain_graph=True` is needed, and not reported, when:

    - a later backward pass of the same iteration goes through the same graph: two losses
      sharing a trunk, a GAN whose generator loss uses the discriminator's outputs on fakes
      that were not detached for the discriminator;
    - the loss goes through a tensor made before the loop with autograd on: the loss itself,
      or style targets made from a network's features by a helper (of this module or
      another), backpropagated again at every step.

    When the loss goes through a value carried from the previous iteration, `retain_graph=True`
    is needed only because that value is not detached: an RNN state read before the statement
    that rebinds it (`s.detach()` whose result is thrown away detaches nothing), a
    `self.hidden` the loop assigns, a model whose `forward` keeps its state on itself. Each
    backward pass then goes through every earlier iteration's graph, and all of them stay
    alive: the finding names the value to detach.

    Values are followed through assignments, tuple unpacking, comprehensions, list appends,
    the returns of the project's functions (overriding methods of subclasses too) and what the
    callers in the file pass for a function's (or method's) parameters. `.detach()`, `.data`,
    `.item()`, tensor factories and code under `torch.no_grad()` end a graph; a call of a
    module (or of a callable the analysis cannot name) makes one. A name the analysis cannot
    see defined leaves the question open, and nothing is reported; an argument passed through
    `**kwargs`, or a parameter with no caller in the file, is taken as data.

    ## Why is this bad?
    `retain_graph=True` keeps the whole autograd graph — every saved activation — alive after
    the backward pass. It is needed only when a second backward pass goes through the same graph
    in the same iteration (two losses sharing a trunk, a GAN step). Added "to make an error go
    away", it keeps each iteration's graph until the next one replaces it, and when the graph is
    also reachable from a tensor carried across iterations (a hidden state, an accumulated loss)
    memory grows every step.

    ## Example
    ```python
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    ```
    For recurrent models that carry state across batches, detach it: `hidden = hidden.detach()`.

    ## Fix safety
    No fix is offered: whether the graph is needed again can only be decided by reading the
    code.

    ## References
    - [`Tensor.backward`](https://pytorch.org/docs/stable/generated/torch.Tensor.backward.html)
    - [Autograd mechanics](https://pytorch.org/docs/stable/notes/autograd.html)
    """

    code = "TDR104"
    name = "retain-graph-in-loop"
    severity = Severity.WARNING

    VALID = tdr104.VALID
    INVALID = tdr104.INVALID

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        candidates = dict.fromkeys(sem.calls_by_attr.get("backward", ()))
        candidates.update(dict.fromkeys(sem.calls_to(*_GRAD_FUNCS)))
        for call in candidates:
            qual = ctx.qualname(call.func)
            api = qual if qual in _GRAD_FUNCS else arguments.TENSOR_BACKWARD
            bound = arguments.bind(call, api)
            if not is_true(bound.value("retain_graph")):
                continue
            loops = training.enclosing_loops(sem, call)
            if not loops or _graph_built_before(ctx, loops[0].node, call):
                continue
            loop = loops[0].node
            mine = graph_reach.reach(sem, _differentiated(ctx, call), loop)
            if mine.unknown or mine.kept is not None:
                continue  # a graph made before the loop is backpropagated again
            if _later_backward_shares(ctx, loop, call, mine):
                continue
            ctx.report(bound.node("retain_graph") or call, _message(mine.carried))


def _message(carried: ast.AST | None) -> Text:
    if carried is None:
        return Text(
            "`retain_graph=True` on the last backward pass through this iteration's graph "
            "keeps the graph and its activations alive",
            "本次迭代计算图的最后一次反向传播使用了 `retain_graph=True`，会让计算图及其激活值继续占用内存",
        )
    name = dotted(carried) or "the state"
    return Text(
        f"`{name}` carries the graphs of earlier iterations into this backward pass, which is "
        "why it needs `retain_graph=True`: every step backpropagates through all of them and "
        f"keeps them alive; detach `{name}` once per iteration and drop `retain_graph=True`",
        f"`{name}` 把之前各次迭代的计算图带进了这次反向传播，所以才需要 `retain_graph=True`："
        f"每一步都要反向传播经过之前所有迭代，并让它们的图一直占用内存；请在每次迭代中分离（detach）"
        f"`{name}` 一次，并去掉 `retain_graph=True`",
    )


def _differentiated(ctx: Context, call: ast.Call) -> list[ast.expr]:
    """The tensors a backward call differentiates (for ``torch.autograd.grad``: its outputs)."""
    func = call.func
    if isinstance(func, ast.Attribute) and ctx.qualname(func) is None:
        # loss.backward(...), accelerator.backward(loss, ...)
        tensor = training.tensor_of_backward(call, ctx.sem)
        return [tensor] if tensor is not None else []
    bound = arguments.bind_as(call, ctx.qualname(func))
    first = bound.value("outputs") or bound.value("tensors")
    return [first] if first is not None else list(call.args[:1])


def _later_backward_shares(
    ctx: Context, loop: ast.AST, call: ast.Call, mine: graph_reach.Reach
) -> bool:
    """A later backward pass of the iteration (or a helper that runs one on what it is given)
    goes through the graph ``call`` differentiates: it needs ``retain_graph=True``."""
    sem = ctx.sem
    here = (call.lineno, call.col_offset)
    for node in sem.walk(loop):
        if node is call or not isinstance(node, ast.Call):
            continue
        if (node.lineno, node.col_offset) <= here:
            continue
        if training.is_backward(sem, node) or ctx.qualname(node.func) in _GRAD_FUNCS:
            exprs = _differentiated(ctx, node)
        else:
            found = summaries.summary(sem, node.func)
            if found is None or not found.autograd:
                continue
            exprs = [*node.args, *(k.value for k in node.keywords)]
        theirs = graph_reach.reach(sem, exprs, loop)
        if theirs.unknown or theirs.nodes & mine.nodes:
            return True
    return False


def _graph_built_before(ctx: Context, loop: ast.AST, call: ast.Call) -> bool:
    """The differentiated tensors are names bound before the loop and never reassigned in it:
    the loop backpropagates one graph many times, which needs ``retain_graph=True``."""
    func = call.func
    if isinstance(func, ast.Attribute) and ctx.qualname(func) is None:
        # loss.backward(...), accelerator.backward(loss, ...)
        tensor = training.tensor_of_backward(call, ctx.sem)
        exprs = [tensor] if tensor is not None else []
    else:
        exprs = list(call.args)  # torch.autograd.backward(loss, ...), dist_autograd.backward(...)
    names = [n for e in exprs for n in ast.walk(e) if isinstance(n, ast.Name)]
    if not names:
        return False
    stored = {
        n.id for n in ctx.sem.walk(loop) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    start = (getattr(loop, "lineno", 0), getattr(loop, "col_offset", 0))
    for name in names:
        binding = ctx.sem.lookup(name.id, name)
        if name.id in stored or binding is None or binding.pos >= start:
            return False
    return True

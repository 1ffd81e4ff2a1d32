from __future__ import annotations

import ast

from ..core import arguments, training
from ..core.context import Context
from ..core.model import Severity, Text
from ..core.semantic import is_true
from .base import Invalid, Rule

_GRAD_FUNCS = ("torch.autograd.backward", "torch.autograd.grad")


class RetainGraphInLoop(Rule):
    """## What it does
    Checks for `.backward(retain_graph=True)` (or `torch.autograd.grad/backward(...,
    retain_graph=True)`) inside a training loop when it is the last backward pass of the
    iteration. A loop that backpropagates the same graph again and again (the loss is built
    before the loop and not reassigned in it) needs `retain_graph=True` and is not reported.

    Off by default (`extend-select = ["TDR104"]` turns it on): on real code half of its findings needed `retain_graph` (a loss over tensors built before the loop).

    ## Why is this bad?
    `retain_graph=True` keeps the whole autograd graph — every saved activation — alive after
    the backward pass. It is needed only when a second backward pass goes through the same graph
    in the same iteration (two losses sharing a trunk, a GAN step). Added "to make an error go
    away", it keeps each iteration's graph until the next one replaces it, and when the graph is
    also reachable from a tensor carried across iterations (a hidden state, an accumulated loss)
    memory grows every step.

    A `retain_graph=True` followed by another backward pass in the same iteration is not
    reported.

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
    default = False
    name = "retain-graph-in-loop"
    severity = Severity.INFO

    VALID = (
        "import torch\nfor x in loader:\n    loss = model(x).sum()\n    loss.backward()",
        # Two backward passes through one graph: retain_graph is needed.
        "import torch\nfor x in loader:\n    a, b = model(x)\n    a.backward(retain_graph=True)\n"
        "    b.backward()\n    opt.step()",
        "import torch\nfor x in loader:\n    g = torch.autograd.grad(l1, p, retain_graph=True)\n"
        "    torch.autograd.grad(l2, p)",
        # Outside a loop.
        "import torch\nloss.backward(retain_graph=True)",
        "import torch\nfor x in loader:\n    loss.backward(retain_graph=False)",
        # One graph, built before the loop, backpropagated many times (torch's autograd tests).
        "import torch\ndef f(model, x):\n    loss = model(x).sum()\n    for _ in range(10):\n"
        "        loss.backward(retain_graph=True)\n",
        "import torch\nimport torch.distributed.autograd as dist_autograd\n"
        "def f(context_id, t):\n    loss = (t * 2).sum()\n    for _ in range(100):\n"
        "        dist_autograd.backward(context_id, [loss], retain_graph=True)\n",
        # Fabric's backward with a second backward pass after it.
        "import torch\nfrom lightning.fabric import Fabric\nfabric = Fabric()\n"
        "for x in loader:\n"
        "    loss = model(x).sum()\n"
        "    fabric.backward(loss, retain_graph=True)\n"
        "    fabric.backward(loss * 2)\n",
    )
    INVALID = (
        Invalid(
            "import torch\nfor x, y in loader:\n    loss = crit(model(x), y)\n"
            "    loss.backward(retain_graph=True)\n    opt.step()",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch\nfor step in range(100):\n"
            "    torch.autograd.backward(loss, retain_graph=True)",
            fixed=None,
            lines=(3,),
        ),
        # `retain_graph` passed by position: Tensor.backward(gradient, retain_graph).
        Invalid(
            "import torch\nfor x, y in loader:\n    loss = crit(model(x), y)\n"
            "    loss.backward(None, True)\n    opt.step()",
            fixed=None,
            lines=(4,),
        ),
        # Fabric's backward: the loss is built in the loop (the launcher is not the tensor).
        Invalid(
            "import torch\nfrom lightning.fabric import Fabric\nfabric = Fabric()\n"
            "for x in loader:\n"
            "    loss = model(x).sum()\n"
            "    fabric.backward(loss, retain_graph=True)\n"
            "    opt.step()\n",
            fixed=None,
            lines=(6,),
        ),
    )

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
            loop = training.repeating_loop(sem, call)
            if loop is None or self._later_backward(ctx, loop.node, call):
                continue
            if _graph_built_before(ctx, loop.node, call):
                continue
            ctx.report(
                bound.node("retain_graph") or call,
                Text(
                    "`retain_graph=True` on the last backward pass of the iteration keeps its "
                    "whole graph and activations alive",
                    "本次迭代最后一次反向传播使用了 `retain_graph=True`，会让整张计算图及其激活值继续占用内存",
                ),
            )

    @staticmethod
    def _later_backward(ctx: Context, loop: ast.AST, call: ast.Call) -> bool:
        here = (call.lineno, call.col_offset)
        for node in ctx.sem.walk(loop):
            if node is call or not isinstance(node, ast.Call):
                continue
            is_backward = isinstance(node.func, ast.Attribute) and node.func.attr == "backward"
            if not is_backward and ctx.qualname(node.func) not in _GRAD_FUNCS:
                continue
            if (node.lineno, node.col_offset) > here:
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

from __future__ import annotations

from ..core import training
from ..core.context import Context
from ..core.model import Severity, Text
from .base import Invalid, Rule


class CompileInLoop(Rule):
    """## What it does
    Checks for `torch.compile(...)` called inside a training or evaluation loop (a loop over a
    DataLoader, an epoch loop around one, a `while` loop, or a `for` over `range(...)`).

    ## Why is this bad?
    `torch.compile` returns a new wrapper each time it is called. Calling it on every iteration
    throws away the wrapper (and often its compiled graphs) and pays Dynamo's tracing and
    Inductor's compilation again and again — seconds to minutes each time — or silently runs the
    eager code while the cache limit is hit. Compile once, before the loop, and reuse the result.

    Loops over a collection (`for m in models: compiled[m] = torch.compile(m)`) are not
    reported: compiling each item once is fine.

    ## Example
    ```python
    for epoch in range(epochs):
        for x, y in loader:
            loss = loss_fn(torch.compile(model)(x), y)
    ```

    ## Use instead
    ```python
    compiled = torch.compile(model)
    for epoch in range(epochs):
        for x, y in loader:
            loss = loss_fn(compiled(x), y)
    ```

    ## Fix safety
    No fix is offered: where the compiled object should live depends on the program.

    ## References
    - [`torch.compile`](https://pytorch.org/docs/stable/generated/torch.compile.html)
    - [torch.compile troubleshooting: recompilation](https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html)
    """

    code = "TDR201"
    name = "compile-in-loop"
    severity = Severity.WARNING

    VALID = (
        "import torch\ncompiled = torch.compile(model)\nfor x in loader:\n    compiled(x)",
        # One compile per item of a collection.
        "import torch\ncompiled = {}\nfor name, m in model.named_children():\n"
        "    compiled[name] = torch.compile(m)",
        # A local function named compile is not torch.compile.
        "import torch\ndef compile(m):\n    return m\nfor x in loader:\n    compile(model)(x)",
        # re.compile in a loop.
        "import re\nimport torch\nfor line in range(10):\n    re.compile('a')",
        # Inside a function defined in the loop body: runs when called, not per iteration.
        "import torch\nfor x in loader:\n    def make():\n        return torch.compile(model)",
    )
    INVALID = (
        Invalid(
            "import torch\nfor epoch in range(3):\n    for x, y in loader:\n"
            "        out = torch.compile(model)(x)",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "from torch import compile as tc\nwhile True:\n    step = tc(train_step)\n    step()",
            fixed=None,
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to("torch.compile"):
            loop = training.repeating_loop(ctx.sem, call)
            if loop is None:
                continue
            ctx.report(
                call,
                Text(
                    "`torch.compile` inside a loop wraps (and may recompile) the model on every "
                    "iteration; compile once before the loop",
                    "在循环中调用 `torch.compile` 会在每次迭代时重新包装（并可能重新编译）模型；应在循环前编译一次",
                ),
                related=[ctx.related(loop.node, Text("the loop", "所在的循环"))],
            )

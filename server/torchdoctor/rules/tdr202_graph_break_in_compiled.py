from __future__ import annotations

import ast

from ..core import graphs
from ..core.context import Context
from ..core.model import Severity, Text
from ..core.semantic import Semantic
from .base import Invalid, Rule, Valid


class GraphBreakInCompiled(Rule):
    """## What it does
    Checks code that `torch.compile` compiles for constructs that always cause a graph break:
    a branch (`if`, `while`, conditional expression, comprehension filter) on a tensor's value
    (`if x.sum() > 0:`, `if mask.any():`, `if torch.equal(a, b):`), `.item()` and `.tolist()`,
    and the builtin `print(...)`. Compiled code is a function decorated with `@torch.compile`
    (any form), a local function passed to `torch.compile(fn)`, and the `forward` of a class of
    the same file whose instance is passed to `torch.compile(...)` or gets `.compile()`.

    ## Why is this bad?
    Dynamo cannot put a Python decision that depends on tensor data into a graph: it ends the
    graph there, runs the statement in Python and starts a new graph after it (with
    `fullgraph=True` it raises instead). Each break splits kernels that Inductor could have fused;
    on a GPU, deciding `if x.sum() > 0:` in Python also waits for every queued kernel.

    To see the breaks of a run, set `TORCH_LOGS=graph_breaks` (each break is printed with its
    reason and line), or call `torch._dynamo.explain(fn)(*inputs)` and read `graph_break_count`
    and `break_reasons`.

    On a CPU the break itself is cheap: `bench/cpu_graph_break.py` (1M elements, 2 threads)
    measured 0.43 ms per call with the break vs 0.46 ms without the branch, and 0.67 ms for the
    `torch.where` rewrite, which computes both sides.

    The reasons PyTorch 2.13 reports for these constructs (verified) are `Data-dependent
    branching` ("Detected data-dependent branching (e.g. `if my_tensor.sum() > 0:`)"),
    `Unsupported Tensor.item() call with capture_scalar_outputs=False`, `Tensor.tolist() with
    non-integer tensor` and `Failed to trace builtin operator` for `print`.

    Not reported, because they compile without a break (verified on 2.13): branches on shapes
    (`x.shape[0] > 2`, `x.dim()`, `x.numel()`), on Python flags, `None` checks and
    `self.training`; `assert` on a tensor; `.cpu()`; and `.numpy()` (traced through
    `torch._numpy`). The guide's advice to read the compile logs to find what was skipped stands;
    this rule points at the usual suspects before the first run. Code under an
    `if torch.compiler.is_compiling():` check, functions marked `@torch.compiler.disable`, and
    `.item()`/`.tolist()` in a file that sets `capture_scalar_outputs` are not reported. Nor are
    `print`, `.item()` and `.tolist()` inside an `if` branch or an `except` handler: such code is
    usually debug output behind a flag, and Dynamo traces it away when the flag is off.

    ## Example
    ```python
    @torch.compile
    def step(x):
        if x.sum() > 0:
            x = x * 2
        print(x.mean().item())
        return x
    ```

    ## Use instead
    ```python
    @torch.compile
    def step(x):
        x = torch.where(x.sum() > 0, x * 2, x)
        return x

    out = step(x)
    print(out.mean().item())  # outside the compiled function
    ```
    When the branches differ in structure, `torch.cond(pred, true_fn, false_fn, (x,))` keeps
    both in one graph; `torch.export` accepts the same `torch.cond`.

    ## Fix safety
    No fix is offered: rewriting a branch with `torch.where` evaluates both sides, and moving a
    `print` or `.item()` out of the function changes the program.

    ## References
    - [`torch.compile` troubleshooting: graph breaks](https://pytorch.org/docs/stable/torch.compiler_troubleshooting.html)
    - [`torch.cond`](https://pytorch.org/docs/stable/generated/torch.cond.html)
    - [`torch.where`](https://pytorch.org/docs/stable/generated/torch.where.html)
    """

    code = "TDR202"
    name = "graph-break-in-compiled"
    severity = Severity.INFO

    VALID = (
        # Branches on shapes, flags, None and self.training compile without a break.
        "import torch\n@torch.compile\ndef f(x, y=None, scale=True):\n"
        "    if x.shape[0] > 2 and x.dim() == 2:\n        x = x + 1\n"
        "    if y is not None:\n        x = x + y\n"
        "    if scale:\n        x = x * 2\n    return x\n",
        "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        if self.training:\n            x = x * 0.5\n"
        "        if x.numel() > 0:\n            x = x.relu()\n        return x\n"
        "model = torch.compile(Net())\n",
        # assert on a tensor, .cpu() and .numpy() do not break.
        "import torch\n@torch.compile\ndef f(x):\n    assert (x > -100).all()\n"
        "    return x.cpu() + 1\n",
        # .item() and print outside compiled code.
        "import torch\n@torch.compile\ndef f(x):\n    return x * 2\n"
        "y = f(x)\nprint(y.sum().item())\nif y.sum() > 0:\n    pass\n",
        # The forward of a class that is never compiled.
        "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        if x.sum() > 0:\n            return x\n        return -x\n"
        "model = Net()\nout = model(x)\n",
        # Compiling a function does not compile an unrelated module's forward.
        "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        print(x.item())\n        return x\n"
        "def step(x):\n    return x * 2\nnet = Net()\nfast = torch.compile(step)\n",
        # Another class compiled, a function named compile, re.compile, disable=True.
        "import torch\nimport re\nclass A(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x\nclass B(torch.nn.Module):\n    def forward(self, x):\n"
        "        if x.any():\n            return x\n        return x + 1\n"
        "a = torch.compile(A())\npat = re.compile('x')\nb = torch.compile(B(), disable=True)\n",
        "import torch\ndef compile(f):\n    return f\n@compile\ndef g(x):\n    print(x)\n"
        "    return x.item()\n",
        # Deliberately eager paths.
        "import torch\n@torch.compile\ndef f(x):\n"
        "    if not torch.compiler.is_compiling():\n        print(x.sum().item())\n"
        "    return x + 1\n",
        "import torch\nclass Net(torch.nn.Module):\n    @torch.compiler.disable\n"
        "    def forward(self, x):\n        print(x)\n        return x\n"
        "m = torch.compile(Net())\n",
        # Debug output behind a flag, or in an except handler.
        "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
        "        if self.debug:\n            print('mean', x.mean().item())\n"
        "        try:\n            y = x.relu()\n        except RuntimeError:\n"
        "            print(x.tolist())\n            raise\n        return y\n"
        "net = torch.compile(Net())\n",
        # capture_scalar_outputs puts .item() into the graph.
        "import torch\ntorch._dynamo.config.capture_scalar_outputs = True\n"
        "@torch.compile\ndef f(x):\n    n = x.sum().item()\n    return x * n\n",
        # A local function named print, numpy's any, a nested function never called here.
        "import torch\nimport numpy as np\ndef print(*a):\n    pass\n@torch.compile\n"
        "def f(x):\n    print(x)\n    if np.any(FLAGS):\n        x = x + 1\n"
        "    def later(y):\n        return y.item()\n    return x\n",
        Valid(
            "import torch\n@torch.compile(mode='max-autotune')\ndef f(x):\n"
            "    return torch.where(x.sum() > 0, x * 2, x)\n",
            notebook=True,
        ),
    )
    INVALID = (
        Invalid(
            "import torch\n@torch.compile\ndef f(x):\n    if x.sum() > 0:\n"
            "        return x * 2\n    return x\n",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch\n@torch.compile(fullgraph=True)\ndef f(x):\n    n = x.max().item()\n"
            "    return x / n\n",
            fixed=None,
            lines=(4,),
        ),
        # The forward of a class whose instance is compiled, through a name and .cuda().
        Invalid(
            "import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n"
            "    def forward(self, x):\n        print('shape', x.shape)\n        return x\n"
            "model = Net().cuda()\nmodel = torch.compile(model)\n",
            fixed=None,
            lines=(5,),
        ),
        # Inherited forward, alias of torch.compile, while on a tensor.
        Invalid(
            "import torch\nfrom torch import compile as tc\nclass Base(torch.nn.Module):\n"
            "    def forward(self, x):\n        while x.abs().max() > 1:\n            x = x / 2\n"
            "        return x\nclass Net(Base):\n    pass\nnet = tc(Net())\n",
            fixed=None,
            lines=(5,),
        ),
        # A function passed to torch.compile; tolist.
        Invalid(
            "import torch\ndef step(x):\n    values = x.tolist()\n    return torch.tensor(values)\n"
            "fast_step = torch.compile(step)\n",
            fixed=None,
            lines=(3,),
        ),
        # nn.Module.compile(), torch.equal, conditional expression.
        Invalid(
            "import torch\nclass Net(torch.nn.Module):\n    def forward(self, x, y):\n"
            "        return x if torch.equal(x, y) else y\nnet = Net()\nnet.compile()\n",
            fixed=None,
            lines=(4,),
        ),
        Invalid(
            "import torch\n@torch.compile\ndef f(x, mask):\n    if not mask.any():\n"
            "        return x\n    return x[mask]\n",
            fixed=None,
            notebook=True,
            lines=(4,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        compiled = graphs.compiled_functions(sem)
        if not compiled:
            return
        text = ctx.source.text.lower()
        capture = "capture_scalar_outputs" in text
        reorder_print = "reorderable_logging_functions" in text
        for func, where in compiled.items():
            related = [ctx.related(where, Text("compiled here", "在此处编译"))]
            for test, call in graphs.data_dependent_branches(sem, func):
                if _method(call) in ("item", "tolist") and not capture:
                    continue  # reported below as the `.item()` call
                ctx.report(
                    test,
                    Text(
                        f"Branching on a tensor value (`{ctx.segment(test)}`) in compiled code "
                        "causes a graph break; use `torch.where` or `torch.cond`",
                        f"在被编译的代码中基于张量值分支（`{ctx.segment(test)}`）会导致图中断；"
                        "请改用 `torch.where` 或 `torch.cond`",
                    ),
                    related=related,
                )
            for node in sem.walk_body(func.body):
                if not isinstance(node, ast.Call) or _conditional(sem, node, func):
                    continue
                method = _method(node)
                if method in ("item", "tolist") and not capture and not node.args:
                    if ctx.qualname(node.func) is not None:
                        continue
                    ctx.report(
                        node,
                        Text(
                            f"`.{method}()` in compiled code causes a graph break; keep the "
                            "value as a tensor, or read it after the compiled call",
                            f"在被编译的代码中调用 `.{method}()` 会导致图中断；请保持为张量，"
                            "或在编译调用之后再读取",
                        ),
                        related=related,
                    )
                elif (
                    isinstance(node.func, ast.Name)
                    and node.func.id == "print"
                    and not reorder_print
                    and sem.lookup("print", node) is None
                ):
                    ctx.report(
                        node,
                        Text(
                            "`print(...)` in compiled code causes a graph break; print outside "
                            "the compiled function",
                            "在被编译的代码中调用 `print(...)` 会导致图中断；请在被编译的函数之外打印",
                        ),
                        related=related,
                    )


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _conditional(sem: Semantic, node: ast.AST, func: ast.AST) -> bool:
    """Whether ``node`` runs only on some calls: in a branch of an ``if`` or conditional
    expression, or in an ``except`` handler (debug output behind a flag is traced away when the
    flag is off)."""
    child = node
    for anc in sem.ancestors(node):
        if anc is func:
            return False
        if isinstance(anc, ast.If | ast.IfExp) and child is not anc.test:
            return True
        if isinstance(anc, ast.ExceptHandler):
            return True
        child = anc
    return False

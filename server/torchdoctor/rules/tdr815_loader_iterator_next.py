from __future__ import annotations

import ast

from ..core import fixes, kinds, torch_version
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import Semantic
from .base import Invalid, Rule


class LoaderIteratorNext(Rule):
    """## What it does
    Checks for `.next()` called on an iterator of a `DataLoader`: `it = iter(loader)` then
    `it.next()` (also `iter(loader).next()`, and an iterator kept on `self`).

    Not reported when the target torch version (`target-version`, else the installed one) is
    older than 1.13, where the method still existed.

    ## Why is this bad?
    Python 3 iterators have no `next` method: `next(it)` calls `it.__next__()`. The DataLoader's
    iterators kept a `.next()` alias for Python 2 until PyTorch 1.13 removed it, so code written
    against older tutorials now fails when that line runs:

    ```
    AttributeError: '_SingleProcessDataLoaderIter' object has no attribute 'next'
    ```

    It often sits in code that runs rarely (a visualisation cell, a fallback when the main
    iterator is exhausted), so the failure shows up late.

    ## Example
    ```python
    data_iter = iter(train_loader)
    images, labels = data_iter.next()
    ```

    ## Use instead
    ```python
    data_iter = iter(train_loader)
    images, labels = next(data_iter)
    ```

    ## Fix safety
    The fix replaces `it.next()` with `next(it)`. It is safe: the builtin calls the same
    `__next__` the removed alias did (and raises `StopIteration` the same way at the end). No
    fix is offered where the name `next` is bound to something other than the builtin.

    ## References
    - [`torch.utils.data.DataLoader`](https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader)
    - [Python `next()`](https://docs.python.org/3/library/functions.html#next)
    """

    code = "TDR815"
    name = "loader-iterator-next"
    severity = Severity.ERROR
    fix_safety = Applicability.SAFE
    tags = ("deprecated",)

    VALID = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "loader = DataLoader(ds, batch_size=4)\nit = iter(loader)\nx, y = next(it)\n",
        # Not a loader's iterator: a class of the file with its own `next` method.
        "import torch\nclass Stream:\n    def __iter__(self):\n        return self\n"
        "    def next(self):\n        return 1\ns = Stream()\nx = iter(s).next()\n",
        "import torch\nx = parser.next()\ny = tokens.next()\n",
        # Rebound to something else before the call.
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "it = iter(DataLoader(ds))\nit = Reader()\nx = it.next()\n",
    )
    INVALID = (
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, batch_size=4)\ndataiter = iter(loader)\n"
            "images, labels = dataiter.next()\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, batch_size=4)\ndataiter = iter(loader)\n"
            "images, labels = next(dataiter)\n",
            lines=(5,),
        ),
        Invalid(
            "import torch\ntrainloader = torch.utils.data.DataLoader(trainset, batch_size=4)\n"
            "x = iter(trainloader).next()\n",
            fixed="import torch\ntrainloader = torch.utils.data.DataLoader(trainset, batch_size=4)\n"
            "x = next(iter(trainloader))\n",
            lines=(3,),
        ),
        # Kept on `self`, restarted when exhausted.
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\nclass Trainer:\n"
            "    def __init__(self, ds):\n        self.loader = DataLoader(ds, shuffle=True)\n"
            "        self.it = iter(self.loader)\n"
            "    def batch(self):\n        try:\n            return self.it.next()\n"
            "        except StopIteration:\n            self.it = iter(self.loader)\n"
            "            return self.it.next()\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\nclass Trainer:\n"
            "    def __init__(self, ds):\n        self.loader = DataLoader(ds, shuffle=True)\n"
            "        self.it = iter(self.loader)\n"
            "    def batch(self):\n        try:\n            return next(self.it)\n"
            "        except StopIteration:\n            self.it = iter(self.loader)\n"
            "            return self.it.next()\n",
            lines=(9, 12),
        ),
        Invalid(
            "import torch\nfrom torch.utils.data import DataLoader\n"
            "dl = DataLoader(ds)\nit = iter(dl)\nbatch = it.next()\n",
            fixed="import torch\nfrom torch.utils.data import DataLoader\n"
            "dl = DataLoader(ds)\nit = iter(dl)\nbatch = next(it)\n",
            notebook=True,
            lines=(5,),
        ),
    )

    def check(self, ctx: Context) -> None:
        if torch_version.before(ctx.settings, "1.13"):
            return
        sem = ctx.sem
        for call in sem.calls_by_attr.get("next", ()):
            func = call.func
            assert isinstance(func, ast.Attribute)
            if call.args or call.keywords or not _loader_iterator(sem, func.value):
                continue
            receiver = ctx.segment(func.value)
            fix = None
            if sem.lookup("next", call) is None:
                fix = Fix(
                    Text(f"Replace with `next({receiver})`", f"改为 `next({receiver})`"),
                    (fixes.replace(ctx.source, call, f"next({receiver})"),),
                    Applicability.SAFE,
                )
            ctx.report(
                call,
                Text(
                    f"`{receiver}.next()`: DataLoader iterators have no `next` method since "
                    f"PyTorch 1.13 (`AttributeError`); use `next({receiver})`",
                    f"`{receiver}.next()`：自 PyTorch 1.13 起 DataLoader 的迭代器没有 `next` 方法"
                    f"（`AttributeError`）；请使用 `next({receiver})`",
                ),
                fixes=[fix],
            )


def _loader_iterator(sem: Semantic, expr: ast.expr, depth: int = 0) -> bool:
    """Whether ``expr`` holds ``iter(loader)`` of a DataLoader: the call itself, a name bound
    to it where it is read, or an attribute of ``self`` every assignment of which is one."""
    if depth > 3:
        return False
    if isinstance(expr, ast.Call):
        func = expr.func
        if (
            isinstance(func, ast.Name)
            and func.id == "iter"
            and sem.lookup("iter", func) is None
            and len(expr.args) == 1
            and not expr.keywords
        ):
            return kinds.is_loader(sem, expr.args[0])
        if isinstance(func, ast.Attribute) and func.attr == "__iter__" and not expr.args:
            return kinds.is_loader(sem, func.value)
        return False
    if isinstance(expr, ast.Name):
        binding = sem.lookup(expr.id, expr)
        if binding is None or binding.how != "assign" or binding.index is not None:
            return False
        return binding.value is not None and _loader_iterator(sem, binding.value, depth + 1)
    if (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    ):
        values = sem.self_attr_values.get((sem.enclosing_class(expr), expr.attr), [])  # type: ignore[arg-type]
        return bool(values) and all(_loader_iterator(sem, v, depth + 1) for v in values)
    return False

from __future__ import annotations

import ast

from ..core import arguments, kinds
from ..core.context import Context
from ..core.data import uses_workers
from ..core.model import Severity, Text
from ..core.semantic import FUNCTION_NODES, keyword
from .base import Invalid, Rule, Valid

_CALLABLE_ARGS = ("collate_fn", "worker_init_fn")
_TRANSFORM_ARGS = ("transform", "target_transform", "transforms")
_AUG_PY = (
    "from torchvision import transforms\n"
    "def build_transforms():\n"
    "    return transforms.Compose([transforms.ToTensor(), transforms.Lambda(lambda x: x * 2)])\n"
    "def build_plain():\n"
    "    return transforms.Compose([transforms.ToTensor()])\n"
)
_TRANSFORM_MODULES = ("torchvision.transforms.", "torchaudio.transforms.", "torchvision.transforms")


class UnpicklableWorkerCallable(Rule):
    """## What it does
    Checks for a DataLoader with workers that is given a `lambda` or a nested function as
    `collate_fn=` or `worker_init_fn=`, or whose dataset was built with a `lambda` transform
    or with a pipeline that holds one (`transforms.Compose([transforms.Lambda(lambda x: ...)])`,
    through a name, or returned by a function of the file or of another module of the project).

    ## Why is this bad?
    Under the `spawn` start method — the default on macOS and Windows, and what many cluster
    setups choose — the DataLoader pickles these callables to send them to each worker. Lambdas
    and functions defined inside other functions cannot be pickled, and iteration fails with
    `AttributeError: Can't pickle local object '...<lambda>'` (or `Can't get local object`). The
    code works on a Linux laptop (fork) and breaks on the next machine.

    ## Example
    ```python
    loader = DataLoader(ds, num_workers=4, collate_fn=lambda batch: pad(batch, 0))
    ```

    ## Use instead
    ```python
    import functools

    loader = DataLoader(ds, num_workers=4, collate_fn=functools.partial(pad, value=0))
    ```
    or define the function at module level.

    ## Fix safety
    No fix is offered: the callable has to move to module level or become a `functools.partial`.

    ## References
    - [Platform-specific behaviours of multi-process data loading](https://pytorch.org/docs/stable/data.html#platform-specific-behaviors)
    """

    code = "TDR308"
    name = "unpicklable-worker-callable"
    severity = Severity.WARNING

    VALID = (
        "from torch.utils.data import DataLoader\ndef collate(b):\n    return b\n"
        "DataLoader(ds, num_workers=4, collate_fn=collate)",
        # No workers: nothing is pickled.
        "from torch.utils.data import DataLoader\nDataLoader(ds, collate_fn=lambda b: b)",
        "from torch.utils.data import DataLoader\n"
        "DataLoader(ds, num_workers=0, collate_fn=lambda b: b)",
        "import functools\nfrom torch.utils.data import DataLoader\n"
        "DataLoader(ds, num_workers=2, collate_fn=functools.partial(pad, value=0))",
        # A method of a module-level class pickles fine.
        "from torch.utils.data import DataLoader\nclass C:\n    def __call__(self, b):\n"
        "        return b\nDataLoader(ds, num_workers=2, collate_fn=C())",
        # A pipeline of another module without lambdas; no workers for one with a lambda.
        Valid(
            "from torch.utils.data import DataLoader\nfrom torchvision import datasets\n"
            "from aug import build_plain, build_transforms\n"
            "ds = datasets.CIFAR10('data', transform=build_plain())\n"
            "loader = DataLoader(ds, num_workers=4)\n"
            "ds2 = datasets.CIFAR10('data', transform=build_transforms())\n"
            "loader2 = DataLoader(ds2, num_workers=0)\n",
            files=(("aug.py", _AUG_PY),),
        ),
    )
    INVALID = (
        Invalid(
            "from torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, num_workers=4, collate_fn=lambda b: b)",
            fixed=None,
            lines=(2,),
        ),
        Invalid(
            "import torch\ndef make(ds):\n    def init(worker_id):\n        pass\n"
            "    return torch.utils.data.DataLoader(ds, num_workers=2, worker_init_fn=init)",
            fixed=None,
            lines=(5,),
        ),
        Invalid(
            "from torch.utils.data import DataLoader\n"
            "train_ds = ImageFolder(root, transform=lambda img: img.convert('RGB'))\n"
            "loader = DataLoader(train_ds, num_workers=8)",
            fixed=None,
            lines=(2,),
        ),
        # A lambda inside a Compose pipeline, through a name.
        Invalid(
            "from torch.utils.data import DataLoader\nfrom torchvision import datasets, transforms\n"
            "tf = transforms.Compose([transforms.Lambda(lambda im: im.convert('RGB')), "
            "transforms.ToTensor()])\n"
            "ds = datasets.CIFAR10('data', transform=tf)\n"
            "loader = DataLoader(ds, num_workers=4)\n",
            fixed=None,
            lines=(3,),
        ),
        # The pipeline is built by a function of another module: reported where it is passed.
        Invalid(
            "from torch.utils.data import DataLoader\nfrom torchvision import datasets\n"
            "from aug import build_transforms\n"
            "ds = datasets.CIFAR10('data', transform=build_transforms())\n"
            "loader = DataLoader(ds, num_workers=4)\n",
            fixed=None,
            files=(("aug.py", _AUG_PY),),
            lines=(4,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to("torch.utils.data.DataLoader"):
            if not uses_workers(call):
                continue
            bound = arguments.bind(call, arguments.DATALOADER)
            for name in _CALLABLE_ARGS:
                given = bound.value(name)
                if given is not None and self._unpicklable(ctx, given):
                    self._report(ctx, given, f"`{name}`")
            dataset = bound.value("dataset")
            made = kinds.constructor_call(ctx.sem, dataset) if dataset is not None else None
            if made is not None:
                for name in _TRANSFORM_ARGS:
                    kw = keyword(made, name)
                    if kw is None:
                        continue
                    if isinstance(kw.value, ast.Lambda):
                        self._report(ctx, kw.value, f"the dataset's `{name}`")
                        continue
                    for where, node in _inner_lambdas(ctx, kw.value):
                        self._report(ctx, node, f"the dataset's `{name}`", inside=where)

    @staticmethod
    def _unpicklable(ctx: Context, value: ast.expr) -> bool:
        if isinstance(value, ast.Lambda):
            return True
        if isinstance(value, ast.Name):
            func = ctx.sem.local_function(value)
            if func is not None:
                return any(
                    isinstance(a, (*FUNCTION_NODES, ast.Lambda)) for a in ctx.sem.ancestors(func)
                )
        return False

    @staticmethod
    def _report(ctx: Context, node: ast.AST, what: str, inside: str | None = None) -> None:
        if inside is None:
            en, zh = f"{what} is a lambda or nested function", f"{what} 是 lambda 或嵌套函数"
        else:  # a lambda inside a transform pipeline (``Compose([Lambda(lambda x: ...)])``)
            place = f" ({inside})" if inside else ""
            en, zh = f"{what} holds a lambda{place}", f"{what} 中含有 lambda{place}"
        ctx.report(
            node,
            Text(
                f"{en}: with the `spawn` start method (macOS, "
                "Windows) workers fail with `Can't pickle local object`",
                f"{zh}：在 `spawn` 启动方式下（macOS、Windows），worker 会因 "
                "`Can't pickle local object` 而失败",
            ),
        )


def _inner_lambdas(ctx: Context, value: ast.expr) -> list[tuple[str, ast.AST]]:
    """Lambdas inside a transform pipeline that pickling the dataset would meet: in the list of
    ``transforms.Compose([...])`` and the arguments of torchvision's transforms, through names
    assigned once, and in what a function (of this file or another module) returns. Each as
    (where it is, for one in another module; "" for one here, the node to report)."""
    found: list[tuple[str, ast.AST]] = []
    seen: set[ast.AST] = set()
    todo: list[tuple[ast.AST | None, int]] = [(value, 0)]  # depth first, in source order
    while todo:
        expr, depth = todo.pop()
        if expr is None or depth > 6 or expr in seen:
            continue
        seen.add(expr)
        sem = ctx.sem.owner(expr)
        inner: list[ast.AST | None] = []
        if isinstance(expr, ast.Lambda):
            where = ctx.elsewhere(expr)
            if where is None:
                found.append(("", expr))
            elif not any(node is value for _w, node in found):
                found.append((where, value))
        elif isinstance(expr, ast.List | ast.Tuple):
            inner = list(expr.elts)
        elif isinstance(expr, ast.Name):
            binding = sem.lookup(expr.id, expr)
            if binding is not None and binding.how == "assign" and binding.index is None:
                inner = [binding.value]
        elif isinstance(expr, ast.Call):
            qual = sem.qualname(expr.func) or ""
            if qual.startswith(_TRANSFORM_MODULES):
                inner = [*expr.args, *(k.value for k in expr.keywords)]
            else:
                defined = sem.function_def(expr.func)
                if defined is not None:
                    inner = list(defined[0].returns(defined[1]))
        todo.extend((node, depth + 1) for node in reversed(inner))
    return found

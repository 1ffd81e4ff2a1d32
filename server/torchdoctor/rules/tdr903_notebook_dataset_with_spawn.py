from __future__ import annotations

import ast

from ..core import arguments, fixes
from ..core.context import Context
from ..core.live_facts import LiveFacts
from ..core.model import Applicability, Fix, Text
from . import live as L
from .base import Invalid, Rule, Valid

_SPAWN = LiveFacts({}, execution_count=5, kernel={"start_method": "spawn", "torch": "2.13.0"})
_FORK = LiveFacts({}, execution_count=5, kernel={"start_method": "fork", "torch": "2.13.0"})
_DS = (
    "import torch\n"
    "from torch.utils.data import DataLoader, Dataset\n"
    "class Squares(Dataset):\n"
    "    def __len__(self):\n"
    "        return 100\n"
    "    def __getitem__(self, i):\n"
    "        return i * i\n"
)
_LOADERS = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
_SPAWNING = ("spawn", "forkserver")


class NotebookDatasetWithSpawn(Rule):
    """## What it does
    Checks notebooks that define a `Dataset` class in a cell and load it with a `DataLoader` that
    has worker processes (`num_workers` not 0), while the running kernel's multiprocessing start
    method is `spawn` or `forkserver` (the default on macOS and Windows; `forkserver` is the
    default on Linux from Python 3.14), or the loader asks for one with
    `multiprocessing_context=`. Runs only while the kernel bridge is connected.

    ## Why is this bad?
    A spawned worker pickles the dataset and unpickles it in a fresh interpreter, which imports
    the class from its module. A class defined in a notebook cell lives in the kernel's
    `__main__`, which the worker cannot import: every worker dies with `AttributeError: Can't
    get attribute 'Squares' on <module '__main__' (built-in)>`, and the notebook shows only a
    generic "DataLoader worker exited unexpectedly", because the workers' output goes to the
    kernel's terminal.

    ## Example
    ```python
    class Squares(Dataset):  # defined in a notebook cell
        ...

    loader = DataLoader(Squares(), batch_size=8, num_workers=2)
    ```

    ## Use instead
    ```python
    from squares import Squares  # the class moved to squares.py next to the notebook

    loader = DataLoader(Squares(), batch_size=8, num_workers=2)
    ```

    ## Fix safety
    Moving the class into a `.py` module is the real fix and cannot be done as an edit of the
    notebook. The fix offered is a suggestion, `num_workers=0`, which loads in the kernel
    process: it works, but loses the parallel loading.

    ## References
    - [Multi-process data loading, platform-specific behaviours](https://pytorch.org/docs/stable/data.html#platform-specific-behaviors)
    - [`multiprocessing` start methods](https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods)
    """

    code = "TDR903"
    name = "notebook-dataset-with-spawn"
    fix_safety = Applicability.SUGGESTION
    scripts = False

    VALID = (
        # No kernel facts.
        Valid(_DS + "loader = DataLoader(Squares(), num_workers=2)", notebook=True),
        # fork: workers inherit `__main__`.
        Valid(_DS + "loader = DataLoader(Squares(), num_workers=2)", notebook=True, live=_FORK),
        Valid(
            _DS + "loader = DataLoader(Squares(), num_workers=2, multiprocessing_context='fork')",
            notebook=True,
            live=_SPAWN,
        ),
        # No workers.
        Valid(_DS + "loader = DataLoader(Squares(), num_workers=0)", notebook=True, live=_SPAWN),
        Valid(_DS + "loader = DataLoader(Squares(), batch_size=4)", notebook=True, live=_SPAWN),
        # A dataset imported from a module is fine.
        Valid(
            "import torch\nfrom torch.utils.data import DataLoader\nfrom data import Squares\n"
            "loader = DataLoader(Squares(), num_workers=2)",
            notebook=True,
            live=_SPAWN,
        ),
        # A class that is not a Dataset, passed to something that is not torch's DataLoader.
        Valid(
            "import torch\nclass Squares:\n    pass\nfrom mylib import DataLoader\n"
            "loader = DataLoader(Squares(), num_workers=2)",
            notebook=True,
            live=_SPAWN,
        ),
        # Scripts are TDR301's business.
        Valid(_DS + "loader = DataLoader(Squares(), num_workers=2)", live=_SPAWN),
    )
    INVALID = (
        Invalid(
            _DS + "loader = DataLoader(Squares(), batch_size=8, num_workers=2)",
            fixed=_DS + "loader = DataLoader(Squares(), batch_size=8, num_workers=0)",
            notebook=True,
            live=_SPAWN,
            lines=(8,),
        ),
        Invalid(
            _DS + "ds = Squares()\nloader = DataLoader(ds, num_workers=4)",
            fixed=_DS + "ds = Squares()\nloader = DataLoader(ds, num_workers=0)",
            notebook=True,
            live=LiveFacts({}, kernel={"start_method": "forkserver"}),
            lines=(9,),
        ),
        Invalid(
            _DS.replace(
                "from torch.utils.data import DataLoader, Dataset", "import torch.utils.data as tud"
            ).replace("(Dataset)", "(tud.Dataset)")
            + "loader = tud.DataLoader(dataset=Squares(), num_workers=2, "
            "multiprocessing_context='spawn')",
            fixed=_DS.replace(
                "from torch.utils.data import DataLoader, Dataset", "import torch.utils.data as tud"
            ).replace("(Dataset)", "(tud.Dataset)")
            + "loader = tud.DataLoader(dataset=Squares(), num_workers=0, "
            "multiprocessing_context='spawn')",
            notebook=True,
            live=_FORK,
            lines=(8,),
        ),
    )

    def check(self, ctx: Context) -> None:
        live = L.live_from(ctx)
        if live is None or not ctx.is_notebook:
            return
        kernel_method = live.kernel.get("start_method")
        for call in ctx.sem.calls_to(*_LOADERS):
            bound = arguments.bind(call, arguments.DATALOADER)
            workers = bound.value("num_workers")
            if workers is None or (isinstance(workers, ast.Constant) and workers.value == 0):
                continue
            context = bound.value("multiprocessing_context")
            if context is None:
                method = kernel_method
            elif isinstance(context, ast.Constant) and isinstance(context.value, str):
                method = context.value
            else:
                continue
            if method not in _SPAWNING:
                continue
            cls = L.dataset_class(ctx, bound.value("dataset"))
            if cls is None or not ctx.sem.at_module_level(cls):
                continue
            fix = None
            if isinstance(workers, ast.expr):
                fix = Fix(
                    Text("Set `num_workers=0`", "设置 `num_workers=0`"),
                    (fixes.replace(ctx.source, workers, "0"),),
                    Applicability.SUGGESTION,
                )
            ctx.report(
                call,
                L.message(
                    live,
                    f"the kernel starts workers with `{method}`, so they cannot load "
                    f"`{cls.name}`, which is defined in the notebook; move it into a `.py` module",
                    f"内核用 `{method}` 启动工作进程，它们无法加载定义在 notebook 中的 "
                    f"`{cls.name}`；请把它移到 `.py` 模块中",
                ),
                fixes=[fix],
                related=[ctx.related(cls, Text("defined here", "定义于此"))],
                execution_count=live.execution_count,
                start_method=method,
            )

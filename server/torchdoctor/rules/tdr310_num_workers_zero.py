from __future__ import annotations

import ast

from ..core import arguments
from ..core.context import Context
from ..core.model import Severity, Text
from .base import Invalid, Rule


class NumWorkersZero(Rule):
    """## What it does
    Checks for a DataLoader created without `num_workers` or with `num_workers=0`. Off by
    default; the same check as TorchFix's TOR401.

    ## Why is this bad?
    With no workers, every batch is loaded, decoded and augmented in the training process,
    between two steps: the GPU waits for the CPU. With `num_workers > 0`, batches are prepared in
    parallel while the model trains. Small in-memory datasets may not need workers, which is why
    this rule is off by default.

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    ```

    ## Use instead
    ```python
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
    ```
    Guard the script's entry point with `if __name__ == "__main__":` (TDR301).

    ## Fix safety
    No fix is offered: the right number of workers depends on the machine and the dataset.

    ## References
    - [Single- and multi-process data loading](https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading)
    - [Performance tuning guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    code = "TDR310"
    name = "num-workers-zero"
    severity = Severity.INFO
    default = False
    aliases = ("TOR401",)

    VALID = (
        "from torch.utils.data import DataLoader\nDataLoader(ds, num_workers=4)",
        "from torch.utils.data import DataLoader\nDataLoader(ds, num_workers=args.workers)",
        "from torch.utils.data import DataLoader\nDataLoader(ds, **loader_kwargs)",
        "import torch\nfrom mylib import DataLoader\nDataLoader(ds)",
        # Positional: num_workers is DataLoader's sixth parameter.
        "import torch\nloader = torch.utils.data.DataLoader(ds, 10, False, None, None, 2)",
        "from torch.utils.data import DataLoader\nDataLoader(ds, 10, *rest)",
    )
    INVALID = (
        Invalid(
            "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)",
            lines=(2,),
        ),
        Invalid(
            "import torch\nloader = torch.utils.data.DataLoader(ds, num_workers=0)", lines=(2,)
        ),
        Invalid(
            "import torch\nloader = torch.utils.data.DataLoader(ds, 10, False, None, None, 0)",
            lines=(2,),
        ),
        Invalid(
            "from torch.utils.data import DataLoader as DL\nloader = DL(ds, 10, False)",
            lines=(2,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to(arguments.DATALOADER):
            bound = arguments.bind(call, arguments.DATALOADER)
            if bound.unknown("num_workers"):
                continue  # `*args` / `**kwargs` may hold it
            value = bound.value("num_workers")
            if value is not None and not (isinstance(value, ast.Constant) and value.value == 0):
                continue
            ctx.report(
                bound.node("num_workers") or call.func,
                Text(
                    "DataLoader without worker processes: batches are prepared between training "
                    "steps while the GPU waits",
                    "DataLoader 没有 worker 进程：batch 在训练步骤之间准备，GPU 只能等待",
                ),
            )

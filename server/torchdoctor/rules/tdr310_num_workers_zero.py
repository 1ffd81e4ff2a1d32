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

    zh = """## 功能
    检查未指定 `num_workers` 或 `num_workers=0` 的 DataLoader。默认关闭；与 TorchFix 的 TOR401 检查相同。

    ## 为什么不好？
    没有 worker 时，每个 batch 都在训练进程中、在两步之间完成读取、解码和增强：GPU 在等 CPU。`num_workers > 0`
    时，batch 会在模型训练的同时并行准备好。小型的内存数据集可能用不着 worker，所以该规则默认关闭。

    ## 示例
    ```python
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    ```

    ## 改为
    ```python
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
    ```
    并用 `if __name__ == "__main__":` 保护脚本入口（TDR301）。

    ## 修复安全性
    不提供修复：合适的 worker 数取决于机器和数据集。

    ## 参考
    - [单进程与多进程数据加载](https://pytorch.org/docs/stable/data.html#single-and-multi-process-data-loading)
    - [性能调优指南](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
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

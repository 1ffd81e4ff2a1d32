from __future__ import annotations

import os

from ..core.context import Context
from ..core.model import Severity, Text
from .base import Invalid, Rule, Valid


class DataParallel(Rule):
    """## What it does
    Checks for `nn.DataParallel(...)` (also spelled `torch.nn.parallel.DataParallel`), except
    in tests (`unittest.TestCase` classes, `test_*.py` files), which wrap models in it on
    purpose to check that checkpoints and wrappers still work with it.

    Off by default (`extend-select = ["TDR501"]` turns it on): on real code most `DataParallel` calls are a fallback next to a `DistributedDataParallel` branch, or in inference scripts, where the advice does not apply.

    ## Why is this bad?
    `DataParallel` runs one Python process that scatters each batch to the GPUs, replicates the
    model on every forward pass and gathers outputs and gradients on GPU 0. The GIL, the
    replication and the imbalance on GPU 0 make it slower than `DistributedDataParallel` even on a
    single machine, and it does not scale beyond one. PyTorch's documentation recommends
    `DistributedDataParallel` instead (there is no runtime deprecation warning in PyTorch 2.13).

    ## Example
    ```python
    model = nn.DataParallel(model).cuda()
    ```

    ## Use instead
    ```python
    # torchrun --nproc-per-node=NUM_GPUS train.py
    import os
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = DDP(model.cuda(local_rank), device_ids=[local_rank])
    ```
    Give the DataLoader a `DistributedSampler` and call `sampler.set_epoch(epoch)` each epoch
    (TDR502).

    ## Fix safety
    No fix is offered: moving to DDP changes how the script is launched.

    ## References
    - [`DataParallel`](https://pytorch.org/docs/stable/generated/torch.nn.DataParallel.html)
    - [Use DistributedDataParallel instead of DataParallel](https://pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead)
    """

    zh = """## 功能
    检查 `nn.DataParallel(...)`（也写作 `torch.nn.parallel.DataParallel`），测试代码除外（`unittest.TestCase`
    类、`test_*.py` 文件）：测试会有意用它包装模型，以检查检查点和包装器仍然兼容。

    默认关闭（`extend-select = ["TDR501"]` 开启）：在真实代码中，大多数 `DataParallel` 调用是 `DistributedDataParallel` 分支旁的后备路径，或出现在推理脚本中，这条建议并不适用。

    ## 为什么不好？
    `DataParallel` 在单个 Python 进程中把每个 batch 分发到各 GPU，每次前向都复制一遍模型，并在 0 号卡上汇总
    输出和梯度。GIL、模型复制以及 0 号卡的负载不均，使它即使在单机上也比 `DistributedDataParallel` 慢，而且无法
    扩展到多机。PyTorch 文档推荐改用 `DistributedDataParallel`（PyTorch 2.13 在运行时并不会给出弃用警告）。

    ## 示例
    ```python
    model = nn.DataParallel(model).cuda()
    ```

    ## 改为
    ```python
    # torchrun --nproc-per-node=NUM_GPUS train.py
    import os
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = DDP(model.cuda(local_rank), device_ids=[local_rank])
    ```
    并为 DataLoader 配上 `DistributedSampler`，每个 epoch 调用 `sampler.set_epoch(epoch)`（TDR502）。

    ## 修复安全性
    不提供修复：改用 DDP 会改变脚本的启动方式。

    ## 参考
    - [`DataParallel`](https://pytorch.org/docs/stable/generated/torch.nn.DataParallel.html)
    - [用 DistributedDataParallel 代替 DataParallel](https://pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead)
    """

    code = "TDR501"
    default = False
    name = "data-parallel"
    severity = Severity.INFO

    VALID = (
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(model)",
        # Tests that check code still handles a DataParallel-wrapped model.
        "import unittest\nimport torch\nfrom torch import nn\n"
        "class TestCheckpointer(unittest.TestCase):\n"
        "    def test_wrapped(self):\n        m = nn.DataParallel(nn.Linear(2, 2))\n",
        Valid(
            "import torch\ndef test_load():\n    m = torch.nn.DataParallel(model)\n",
            filename="test_checkpoint.py",
        ),
        # A user class of the same name.
        "import torch\nclass DataParallel:\n    pass\nm = DataParallel()",
        "import torch\nfrom mylib import DataParallel\nm = DataParallel(model)",
    )
    INVALID = (
        Invalid(
            "import torch.nn as nn\nmodel = nn.DataParallel(model).cuda()", fixed=None, lines=(2,)
        ),
        Invalid(
            "import torch\nmodel = torch.nn.parallel.DataParallel(model, device_ids=[0, 1])",
            fixed=None,
            lines=(2,),
        ),
        Invalid("from torch.nn import DataParallel as DP\nnet = DP(net)", fixed=None, lines=(2,)),
    )

    def check(self, ctx: Context) -> None:
        base = os.path.basename(ctx.path)
        if base.startswith("test_") or base.endswith("_test.py"):
            return
        for call in ctx.sem.calls_to("torch.nn.DataParallel"):
            cls = ctx.sem.enclosing_class(call)
            if cls is not None and any(
                b.rsplit(".", 1)[-1] == "TestCase" for b in ctx.sem.class_bases(cls)
            ):
                continue
            ctx.report(
                call.func,
                Text(
                    "`nn.DataParallel` is slower than `DistributedDataParallel` even on one machine; "
                    "PyTorch recommends DDP",
                    "`nn.DataParallel` 即使在单机上也比 `DistributedDataParallel` 慢；PyTorch 推荐使用 DDP",
                ),
            )

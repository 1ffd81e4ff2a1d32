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

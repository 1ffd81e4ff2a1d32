from __future__ import annotations

import ast

from ..core import arguments, fixes
from ..core.context import Context
from ..core.model import Applicability, Fix, Severity, Text
from .base import Invalid, Rule

CLI_LIMIT = 32


class NumWorkersOversubscribed(Rule):
    """## What it does
    Checks for a DataLoader with a literal `num_workers=N` larger than the number of CPUs of the
    machine the editor runs on (in the command line, where the training machine is unknown,
    larger than 32).

    ## Why is this bad?
    Each worker is a full process with its own copy of the dataset object. More workers than
    cores do not load faster: they compete for the same cores (and with the main training
    process), multiply memory use, and can exhaust shared memory (`/dev/shm`) with "bus error"
    or "DataLoader worker (pid X) is killed by signal" as the symptom. PyTorch itself warns when
    `num_workers` exceeds the CPUs available to the process ("This DataLoader will create N
    worker processes in total. Our suggested max number of worker in current system is M").

    ## Example
    ```python
    loader = DataLoader(dataset, batch_size=64, num_workers=64)
    ```

    ## Use instead
    ```python
    import os

    loader = DataLoader(dataset, batch_size=64, num_workers=min(64, os.cpu_count() or 1))
    ```

    ## Fix safety
    The fix caps the number with `min(N, os.cpu_count() or 1)` (adding `import os`). It is
    unsafe: on a machine with at least N cores the cap changes nothing; on one with fewer,
    fewer workers load the data, at another speed. A map-style dataset still gives the same
    batches in the same order, but an `IterableDataset` that splits its items by worker
    (`get_worker_info()`) gives other batches, in another order.

    ## References
    - [`torch.utils.data.DataLoader`](https://pytorch.org/docs/stable/data.html#multi-process-data-loading)
    """

    code = "TDR302"
    name = "num-workers-oversubscribed"
    severity = Severity.INFO
    fix_safety = Applicability.UNSAFE

    VALID = (
        "from torch.utils.data import DataLoader\nDataLoader(ds, num_workers=8)",
        "from torch.utils.data import DataLoader\nDataLoader(ds, num_workers=args.workers)",
        "from torch.utils.data import DataLoader\nimport os\n"
        "DataLoader(ds, num_workers=os.cpu_count())",
        # Not torch's DataLoader.
        "import torch\nfrom mylib import DataLoader\nDataLoader(ds, num_workers=128)",
    )
    INVALID = (
        Invalid(
            "from torch.utils.data import DataLoader\nloader = DataLoader(ds, num_workers=64)",
            fixed="import os\n\nfrom torch.utils.data import DataLoader\n"
            "loader = DataLoader(ds, num_workers=min(64, os.cpu_count() or 1))",
            lines=(2,),
        ),
        Invalid(
            "import os\nimport torch\nl = torch.utils.data.DataLoader(ds, 32, num_workers=48)",
            fixed="import os\nimport torch\n"
            "l = torch.utils.data.DataLoader(ds, 32, num_workers=min(48, os.cpu_count() or 1))",
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        limit = ctx.settings.machine_cpus or CLI_LIMIT
        for call in ctx.sem.calls_to("torch.utils.data.DataLoader"):
            bound = arguments.bind(call, arguments.DATALOADER)
            given = bound.value("num_workers")
            if not isinstance(given, ast.Constant):
                continue
            n = given.value
            if not isinstance(n, int) or isinstance(n, bool) or n <= limit:
                continue
            fix = None
            ref = fixes.module_ref(ctx.sem, ctx.source, "os", ctx.notebook)
            if ref is not None:
                os_name, extra = ref
                fix = Fix(
                    Text(
                        f"Cap with `min({n}, {os_name}.cpu_count() or 1)`",
                        f"用 `min({n}, {os_name}.cpu_count() or 1)` 加以限制",
                    ),
                    (
                        fixes.replace(ctx.source, given, f"min({n}, {os_name}.cpu_count() or 1)"),
                        *extra,
                    ),
                    Applicability.UNSAFE,
                )
            where = (
                f"this machine's {limit} CPUs"
                if ctx.settings.machine_cpus
                else f"{limit}, more than most machines have"
            )
            where_zh = (
                f"本机的 {limit} 个 CPU"
                if ctx.settings.machine_cpus
                else f"{limit}（多数机器没有这么多核心）"
            )
            ctx.report(
                bound.node("num_workers") or given,
                Text(
                    f"`num_workers={n}` exceeds {where}: extra workers compete for cores and memory",
                    f"`num_workers={n}` 超过了{where_zh}：多出的 worker 会争抢 CPU 和内存",
                ),
                fixes=[fix],
            )

from __future__ import annotations

import ast
from functools import partial

from ..core import arguments, checkpoints, fixes, summaries
from ..core.context import Context
from ..core.distributed import (
    INIT_PROCESS_GROUP,
    callers,
    depends_on_rank,
    dist_ref,
    in_rank_process,
    joins_group,
    rank_functions,
    rank_guarded,
)
from ..core.model import Applicability, Fix, Text
from ..core.semantic import Semantic
from .base import Invalid, Rule, Valid

_HEAD = "import torch\nimport torch.distributed as dist\n"
_SAVE_HELPER = "import torch\ndef save_checkpoint(state, path):\n    torch.save(state, path)\n"


class SaveOnEveryRank(Rule):
    """## What it does
    Checks for `torch.save(...)` in code that runs in every process of a distributed job (code
    that calls `torch.distributed.init_process_group`, itself or through a helper of another
    module such as `utils.init_distributed_mode(args)`, or that takes part in a collective such
    as `dist.barrier()` that every rank must run) without a rank check around it:
    `if rank == 0:`, `if dist.get_rank() == 0:`, `if is_main_process():`,
    `if local_rank in (-1, 0):`, a flag set from such a test (`args.save_logs = args.logs and
    is_master(args)`), an earlier `return` on the other ranks, or a helper that is only called
    under such a check. A save that the same function loads back (each process
    round-tripping its own temporary file) is not reported. A saving helper of another module
    of the project (`save_checkpoint(...)` from `utils.py`) is reported where it is called when
    it saves without a rank check of its own; one that checks the rank (`save_on_master`) is not.
    So is a saving method inherited from a trainer class of another module. When some calls of
    a saving function of the file check the rank and others do not, the unchecked calls are
    reported.

    ## Why is this bad?
    Under `torchrun` or `mp.spawn` every rank runs the same code, so every rank writes the same
    checkpoint to the same path at the same time. With 8 GPUs the file is written 8 times, the
    writes race on shared storage (a reader, or a resumed job, can see a truncated file), and
    the job waits for the slowest copy. Save from rank 0 only, as PyTorch's DDP tutorial does:
    the weights are the same on every rank after DDP's gradient all-reduce, so nothing is lost.

    Only code that runs after the file sets up a process group, or that takes part in its
    collectives, is checked: the function that calls `init_process_group` (or `barrier`,
    `all_reduce`... outside a rank check, or a helper of another module that does), the
    functions it calls or that call it, and the methods of its class or of a class created
    there. Saves whose path names the rank (`f"shard_{rank}.pt"`, or an index taken
    from the rank's own share) are per-rank files on purpose, and saves into an `io.BytesIO` buffer serialise data to send; neither is
    reported. Nor is code that shows no process group (Lightning, Accelerate and other
    launchers save from the main process for you), nor a helper function that is never called
    in the file and takes part in no collective.

    ## Example
    ```python
    import torch
    import torch.distributed as dist

    def main():
        dist.init_process_group("nccl")
        model = build_model()
        for epoch in range(epochs):
            train_one_epoch(model)
            torch.save(model.module.state_dict(), "ckpt.pt")
    ```

    ## Use instead
    ```python
    import torch
    import torch.distributed as dist

    def main():
        dist.init_process_group("nccl")
        model = build_model()
        for epoch in range(epochs):
            train_one_epoch(model)
            if dist.get_rank() == 0:
                torch.save(model.module.state_dict(), "ckpt.pt")
    ```

    ## Fix safety
    The fix wraps the statement in `if dist.get_rank() == 0:`, spelling `torch.distributed`
    the way the file imports it (adding `import torch.distributed as dist` when the name is
    free); when the file sets the group up only under a condition (`if args.distributed:`),
    or not itself, the test is `not dist.is_initialized() or dist.get_rank() == 0`, so
    single-process runs still save. It is unsafe: `dist.get_rank()` raises when no process group is initialised,
    which the plain test does not guard against; and if the other ranks read the file right
    after (a `barrier()` then `torch.load`), they must still wait for rank 0. No fix is offered when the save is not a statement of its own, or
    when `torch.distributed` cannot be named.

    ## References
    - [Save and load checkpoints with DDP](https://pytorch.org/tutorials/intermediate/ddp_tutorial.html#save-and-load-checkpoints)
    - [`torch.distributed.get_rank`](https://pytorch.org/docs/stable/distributed.html#torch.distributed.get_rank)
    """

    code = "TDR505"
    name = "save-on-every-rank"
    fix_safety = Applicability.UNSAFE

    VALID = (
        # Each process saves its own temporary file and reads it back.
        "import tempfile\nimport torch\nimport torch.distributed as dist\n"
        "def check(model):\n    dist.init_process_group('nccl')\n"
        "    with tempfile.NamedTemporaryFile() as tmp:\n        torch.save(model, tmp.name)\n"
        "        model = torch.load(tmp.name, weights_only=False)\n",
        # Guarded in the common spellings.
        _HEAD + "def main():\n    dist.init_process_group('nccl')\n    rank = dist.get_rank()\n"
        "    if rank == 0:\n        torch.save(model.state_dict(), 'm.pt')\n",
        _HEAD + "def main():\n    dist.init_process_group('nccl')\n"
        "    if dist.get_rank() == 0:\n        torch.save(model.state_dict(), 'm.pt')\n",
        _HEAD + "from utils import is_main_process\n"
        "def main():\n    dist.init_process_group('nccl')\n"
        "    for epoch in range(3):\n        train()\n"
        "        if is_main_process():\n            torch.save(model.state_dict(), 'm.pt')\n",
        _HEAD + "def main(args):\n    dist.init_process_group('nccl')\n"
        "    if args.local_rank in (-1, 0):\n        torch.save(model.state_dict(), 'm.pt')\n",
        _HEAD + "def main(args):\n    dist.init_process_group('nccl')\n"
        "    if not args.distributed or args.rank % 8 == 0:\n"
        "        torch.save(model.state_dict(), 'm.pt')\n",
        # An early return on the other ranks.
        _HEAD + "def main():\n    dist.init_process_group('nccl')\n    train()\n"
        "    if dist.get_rank() != 0:\n        return\n    torch.save(model.state_dict(), 'm.pt')\n",
        # A helper only called under a rank check, or named / decorated as main-only.
        _HEAD + "def save_checkpoint(state, path):\n    torch.save(state, path)\n"
        "def main():\n    dist.init_process_group('nccl')\n"
        "    if dist.get_rank() == 0:\n        save_checkpoint({'m': 1}, 'c.pt')\n",
        _HEAD + "def save_on_master(*args, **kwargs):\n    torch.save(*args, **kwargs)\n"
        "def main():\n    dist.init_process_group('nccl')\n    save_on_master({'m': 1}, 'c.pt')\n",
        _HEAD + "from lightning.pytorch.utilities import rank_zero_only\n"
        "@rank_zero_only\ndef dump(state):\n    torch.save(state, 'c.pt')\n"
        "def main():\n    dist.init_process_group('nccl')\n    dump({})\n",
        # Per-rank files on purpose.
        _HEAD + "def main():\n    dist.init_process_group('nccl')\n    rank = dist.get_rank()\n"
        "    torch.save(optimizer.state_dict(), f'optim_rank{rank}.pt')\n",
        # No process group in this file: Accelerate / Lightning / single-process scripts.
        "import torch\nfrom accelerate import Accelerator\naccelerator = Accelerator()\n"
        "torch.save(model.state_dict(), 'm.pt')\n",
        "import torch\ntorch.save(model.state_dict(), 'm.pt')\n",
        # The launcher process saves once before spawning the workers.
        _HEAD + "import torch.multiprocessing as mp\n"
        "def worker(rank, world):\n    dist.init_process_group('nccl', rank=rank, world_size=world)\n"
        "    if rank == 0:\n        torch.save(model.state_dict(), 'm.pt')\n"
        "if __name__ == '__main__':\n    torch.save(config, 'config.pt')\n"
        "    mp.spawn(worker, args=(2,), nprocs=2)\n",
        # The single-process path of a script that also has a distributed one.
        _HEAD + "def train(model):\n    pass\n"
        "def main_single(model):\n    train(model)\n    torch.save(model.state_dict(), 'm.pt')\n"
        "def main_ddp(model, rank):\n    dist.init_process_group('nccl')\n    train(model)\n"
        "    if rank == 0:\n        torch.save(model.state_dict(), 'm.pt')\n",
        # A method never called in this file: who calls it is unknown.
        _HEAD + "class Trainer:\n"
        "    def __init__(self):\n        dist.init_process_group('nccl')\n"
        "    def save(self, path):\n        torch.save(self.model.state_dict(), path)\n",
        # A method called only under a rank check, from outside its class.
        _HEAD + "class Trainer:\n"
        "    def __init__(self):\n        dist.init_process_group('nccl')\n"
        "    def save(self, path):\n        torch.save(self.model.state_dict(), path)\n"
        "def main():\n    trainer = Trainer()\n"
        "    if trainer.rank == 0:\n        trainer.save('m.pt')\n",
        # A local function named like torch.save.
        _HEAD + "def save(obj, path):\n    pass\n"
        "def main():\n    dist.init_process_group('nccl')\n    save(model.state_dict(), 'm.pt')\n",
        # Serialising into memory to send to other ranks.
        _HEAD + "import io\ndef main():\n    dist.init_process_group('nccl')\n"
        "    buffer = io.BytesIO()\n    torch.save(obj, buffer)\n    send(buffer.getvalue())\n",
        # Accelerate's / Lightning's own flag.
        _HEAD + "def main(accelerator):\n    dist.init_process_group('nccl')\n"
        "    if accelerator.is_main_process:\n        torch.save(model.state_dict(), 'm.pt')\n",
        # Saving helpers of another module that check the rank themselves.
        Valid(
            _HEAD + "from utils import save_checkpoint, save_on_master\n"
            "def main():\n    dist.init_process_group('nccl')\n"
            "    save_checkpoint({'m': 1}, 'c.pt', rank=dist.get_rank())\n"
            "    save_on_master({'m': 1}, 'c.pt')\n",
            files=(
                (
                    "utils.py",
                    "import torch\n"
                    "def save_checkpoint(state, path, rank):\n"
                    "    if rank == 0:\n        torch.save(state, path)\n"
                    "def save_on_master(*args, **kwargs):\n    torch.save(*args, **kwargs)\n",
                ),
            ),
        ),
        # The helper of another module, called under a rank check here.
        Valid(
            _HEAD + "from utils import save_checkpoint\n"
            "def main():\n    dist.init_process_group('nccl')\n"
            "    if dist.get_rank() == 0:\n        save_checkpoint({'m': 1}, 'c.pt')\n",
            files=(("utils.py", _SAVE_HELPER),),
        ),
        # A helper of another module that serialises into memory (to read back at once).
        Valid(
            _HEAD + "import utils\n"
            "def main(args):\n    utils.init_distributed_mode(args)\n"
            "    utils.load_ema(ema, torch.load(args.resume, map_location='cpu'))\n",
            files=(
                (
                    "utils.py",
                    "import io\nimport torch\nimport torch.distributed as dist\n"
                    "def init_distributed_mode(args):\n"
                    "    dist.init_process_group('nccl')\n"
                    "def load_ema(ema, state):\n"
                    "    buffer = io.BytesIO()\n    torch.save(state, buffer)\n"
                    "    buffer.seek(0)\n    ema.load(buffer)\n",
                ),
            ),
        ),
        # A trainer that takes part in collectives, and saves from the main process only.
        _HEAD + "class Runner:\n"
        "    def save(self, epoch):\n        torch.save(self.state(), f'ckpt_{epoch}.pt')\n"
        "    def train(self):\n"
        "        for epoch in range(3):\n            self.train_epoch()\n"
        "            if dist.get_rank() == 0:\n                self.save(epoch)\n"
        "            dist.barrier()\n",
        # A collective under a rank check says nothing about who runs the code around it.
        _HEAD + "def main(model):\n"
        "    if dist.get_rank() == 0:\n        dist.broadcast(model.weight, 0)\n"
        "    torch.save(model.state_dict(), 'm.pt')\n",
        # Another object's `save` runs unchecked; this class's saving method only under a check.
        _HEAD + "class Runner:\n"
        "    def save(self, epoch):\n        torch.save(self.state(), f'ckpt_{epoch}.pt')\n"
        "    def train(self):\n"
        "        for epoch in range(3):\n"
        "            if dist.get_rank() == 0:\n                self.save(epoch)\n"
        "            self.plot.save('loss.png')\n"
        "            dist.barrier()\n",
        # The rank check is kept in a flag set earlier.
        _HEAD + "from utils import is_master\n"
        "def main(args):\n    dist.init_process_group('nccl')\n"
        "    args.save_logs = args.logs and is_master(args)\n"
        "    for epoch in range(3):\n"
        "        if args.save_logs:\n            torch.save(model.state_dict(), 'm.pt')\n",
        # Each rank writes the shards it owns: the path comes from the rank's own indices.
        _HEAD + "class Checkpointer:\n"
        "    def __init__(self, mapping, rank):\n"
        "        self.indices = mapping['embedding'][rank]\n"
        "    def save(self, model, folder):\n"
        "        for index in self.indices:\n"
        "            torch.save(model.embeddings[index], f'{folder}/embedding_{index}.pt')\n"
        "        dist.barrier()\n",
    )
    INVALID = (
        # The group is set up by a helper of another module.
        Invalid(
            _HEAD + "import utils\n"
            "def train(args):\n    utils.init_distributed_mode(args)\n"
            "    for epoch in range(3):\n"
            "        torch.save(model.state_dict(), 'checkpoint.pth')\n",
            fixed=_HEAD + "import utils\n"
            "def train(args):\n    utils.init_distributed_mode(args)\n"
            "    for epoch in range(3):\n"
            "        if not dist.is_initialized() or dist.get_rank() == 0:\n"
            "            torch.save(model.state_dict(), 'checkpoint.pth')\n",
            files=(
                (
                    "utils.py",
                    "import torch.distributed as dist\n"
                    "def init_distributed_mode(args):\n"
                    "    dist.init_process_group('nccl', init_method=args.dist_url)\n",
                ),
            ),
            lines=(7,),
        ),
        # A runner whose loop waits at a barrier (every rank runs it; the group is set up by
        # the script that makes it): one call of its save checks the rank, the other does not.
        Invalid(
            _HEAD + "class Runner:\n"
            "    def save(self, epoch):\n        torch.save(self.state(), f'ckpt_{epoch}.pt')\n"
            "    def train(self):\n"
            "        for epoch in range(3):\n"
            "            if self.has_val:\n"
            "                if dist.get_rank() == 0:\n                    self.save(epoch)\n"
            "            else:\n                self.save(epoch)\n"
            "            dist.barrier()\n",
            fixed=_HEAD + "class Runner:\n"
            "    def save(self, epoch):\n        torch.save(self.state(), f'ckpt_{epoch}.pt')\n"
            "    def train(self):\n"
            "        for epoch in range(3):\n"
            "            if self.has_val:\n"
            "                if dist.get_rank() == 0:\n                    self.save(epoch)\n"
            "            else:\n"
            "                if not dist.is_initialized() or dist.get_rank() == 0:\n"
            "                    self.save(epoch)\n"
            "            dist.barrier()\n",
            lines=(12,),
        ),
        # A trainer that synchronises through a helper of another module, and saves through a
        # method inherited from a base class of a third one.
        Invalid(
            "import torch\nfrom base import BaseTrainer\nfrom comm import synchronize\n"
            "class Trainer(BaseTrainer):\n"
            "    def run(self):\n"
            "        for epoch in range(3):\n"
            "            synchronize()\n"
            "            if self.evaluate() > self.best:\n"
            "                self.save_best()\n",
            fixed="import torch\nfrom base import BaseTrainer\nfrom comm import synchronize\n"
            "class Trainer(BaseTrainer):\n"
            "    def run(self):\n"
            "        for epoch in range(3):\n"
            "            synchronize()\n"
            "            if self.evaluate() > self.best:\n"
            "                if not torch.distributed.is_initialized() or "
            "torch.distributed.get_rank() == 0:\n"
            "                    self.save_best()\n",
            files=(
                (
                    "base.py",
                    "import torch\n"
                    "class BaseTrainer:\n"
                    "    def _save(self, tag):\n"
                    "        torch.save(self.state(), f'checkpoint_{tag}.pth')\n"
                    "    def save_best(self):\n        self._save('best')\n",
                ),
                (
                    "comm.py",
                    "import torch.distributed as dist\n"
                    "def synchronize():\n"
                    "    if not dist.is_initialized():\n        return\n"
                    "    dist.barrier()\n",
                ),
            ),
            lines=(9,),
        ),
        Invalid(
            _HEAD + "def main():\n    dist.init_process_group('nccl')\n"
            "    for epoch in range(3):\n        train()\n"
            "        torch.save(model.state_dict(), 'm.pt')\n",
            fixed=_HEAD + "def main():\n    dist.init_process_group('nccl')\n"
            "    for epoch in range(3):\n        train()\n"
            "        if dist.get_rank() == 0:\n"
            "            torch.save(model.state_dict(), 'm.pt')\n",
            lines=(7,),
        ),
        # The group is optional: single-process runs keep saving.
        Invalid(
            _HEAD + "def main(args):\n    if args.distributed:\n"
            "        dist.init_process_group('nccl')\n"
            "    train()\n    torch.save(model.state_dict(), 'm.pt')\n",
            fixed=_HEAD + "def main(args):\n    if args.distributed:\n"
            "        dist.init_process_group('nccl')\n"
            "    train()\n    if not dist.is_initialized() or dist.get_rank() == 0:\n"
            "        torch.save(model.state_dict(), 'm.pt')\n",
            lines=(7,),
        ),
        # Aliases: torch.distributed reached through `import torch as T`.
        Invalid(
            "import torch as T\n"
            "def main():\n    T.distributed.init_process_group(backend='nccl')\n"
            "    T.save({'model': model.state_dict()}, 'ckpt.pt')  # final\n",
            fixed="import torch as T\n"
            "def main():\n    T.distributed.init_process_group(backend='nccl')\n"
            "    if T.distributed.get_rank() == 0:\n"
            "        T.save({'model': model.state_dict()}, 'ckpt.pt')  # final\n",
            lines=(4,),
        ),
        # An imported get_rank, and a helper called unguarded from the worker (mp.spawn).
        Invalid(
            "import torch\nimport torch.multiprocessing as mp\n"
            "from torch.distributed import init_process_group, get_rank\n"
            "def save_checkpoint(state):\n    torch.save(state, 'c.pt')\n"
            "def worker(rank, world):\n    init_process_group('nccl', rank=rank, world_size=world)\n"
            "    save_checkpoint({'epoch': 1})\n"
            "if __name__ == '__main__':\n    mp.spawn(worker, args=(2,), nprocs=2)\n",
            fixed="import torch\nimport torch.multiprocessing as mp\n"
            "from torch.distributed import init_process_group, get_rank\n"
            "def save_checkpoint(state):\n    if get_rank() == 0:\n"
            "        torch.save(state, 'c.pt')\n"
            "def worker(rank, world):\n    init_process_group('nccl', rank=rank, world_size=world)\n"
            "    save_checkpoint({'epoch': 1})\n"
            "if __name__ == '__main__':\n    mp.spawn(worker, args=(2,), nprocs=2)\n",
            lines=(5,),
        ),
        # The group is set up by a helper; `torch.distributed` through `import torch`.
        Invalid(
            "import torch\nfrom torch.distributed import init_process_group\n"
            "def setup():\n    init_process_group('nccl')\n"
            "def main():\n    setup()\n    torch.save(model.state_dict(), 'm.pt')\n"
            "if __name__ == '__main__':\n    main()\n",
            fixed="import torch\nfrom torch.distributed import init_process_group\n"
            "def setup():\n    init_process_group('nccl')\n"
            "def main():\n    setup()\n    if torch.distributed.get_rank() == 0:\n"
            "        torch.save(model.state_dict(), 'm.pt')\n"
            "if __name__ == '__main__':\n    main()\n",
            lines=(7,),
        ),
        # No module name for torch.distributed yet: `import torch.distributed as dist` is added.
        Invalid(
            "from torch import save\nfrom torch.distributed import init_process_group\n"
            "def main():\n    init_process_group('nccl')\n    save({}, 'c.pt')\n",
            fixed="import torch.distributed as dist\nfrom torch import save\n"
            "from torch.distributed import init_process_group\ndef main():\n"
            "    init_process_group('nccl')\n    if dist.get_rank() == 0:\n"
            "        save({}, 'c.pt')\n",
            lines=(5,),
        ),
        # A trainer class: the method is called from another method.
        Invalid(
            _HEAD + "class Trainer:\n"
            "    def __init__(self):\n        dist.init_process_group('nccl')\n"
            "    def save(self):\n        torch.save(self.model.state_dict(), 'm.pt')\n"
            "    def fit(self):\n        self.save()\n",
            fixed=_HEAD + "class Trainer:\n"
            "    def __init__(self):\n        dist.init_process_group('nccl')\n"
            "    def save(self):\n        if dist.get_rank() == 0:\n"
            "            torch.save(self.model.state_dict(), 'm.pt')\n"
            "    def fit(self):\n        self.save()\n",
            lines=(7,),
        ),
        # A torchrun script: top-level code after the group is set up; not its own line.
        Invalid(
            _HEAD
            + "dist.init_process_group('nccl')\ntrain(); torch.save(model.state_dict(), 'm.pt')\n",
            fixed=None,
            lines=(4,),
        ),
        # `dist` names something else and torch.distributed has no usable name: no fix.
        Invalid(
            "from torch import save\nfrom torch.distributed import init_process_group\n"
            "dist = 4\n"
            "def main():\n    init_process_group('nccl')\n    save({}, 'c.pt')\n",
            fixed=None,
            lines=(6,),
        ),
        # A saving helper of another module, without a rank check of its own.
        Invalid(
            _HEAD + "from utils import save_checkpoint\n"
            "def main():\n    dist.init_process_group('nccl')\n"
            "    for epoch in range(3):\n"
            "        save_checkpoint(model.state_dict(), 'c.pt')\n",
            fixed=_HEAD + "from utils import save_checkpoint\n"
            "def main():\n    dist.init_process_group('nccl')\n"
            "    for epoch in range(3):\n"
            "        if dist.get_rank() == 0:\n"
            "            save_checkpoint(model.state_dict(), 'c.pt')\n",
            files=(("utils.py", _SAVE_HELPER),),
            lines=(7,),
        ),
    )

    def check(self, ctx: Context) -> None:
        sem = ctx.sem
        saves = list(sem.calls_to("torch.save"))
        if not saves and sem.project is None:
            return  # nothing saves here, and no helper of another module can
        regions = rank_functions(sem)
        if not regions:
            return  # no process group here: every save runs once
        helpers = _helpers_saving_elsewhere(ctx)
        if not saves and not helpers:
            return
        # Where to report: the save itself, or a call that runs it (with the helper's summary
        # when it is known).
        sites: dict[ast.Call, tuple[bool, summaries.Summary | None]] = {}
        for call in saves:
            if not in_rank_process(sem, call, regions) or rank_guarded(sem, call):
                continue
            target = arguments.value(call, arguments.SAVE, "f")
            if depends_on_rank(sem, target) or summaries.in_memory(sem, call):
                continue
            if _never_called(ctx, call):
                continue
            if checkpoints.round_trip(sem, call):
                continue
            unguarded = _unguarded_callers(sem, call)
            if unguarded:  # other calls of its function check the rank: these calls do not
                helper = summaries.called_summary(sem, unguarded[0].func)
                for caller in unguarded:
                    if in_rank_process(sem, caller, regions):
                        sites[caller] = (True, helper)
            else:
                sites[call] = (False, None)
        for call, helper in helpers:
            if in_rank_process(sem, call, regions) and not rank_guarded(sem, call):
                if not _never_called(ctx, call):
                    sites[call] = (True, helper)
        for call, (via, helper) in sorted(sites.items(), key=lambda s: _pos(s[0])):
            if not via:
                message = Text(
                    "`torch.save` runs on every rank of the process group; save from rank 0 only",
                    "`torch.save` 会在进程组的每个 rank 上运行；请只在 rank 0 保存",
                )
            else:
                name = ctx.segment(call.func)
                where = ctx.elsewhere(helper.func) if helper and helper.sem is not sem else None
                said = f"`{name}` ({where})" if where else f"`{name}`"
                said_zh = f"`{name}`（{where}）" if where else f"`{name}`"
                message = Text(
                    f"{said} calls `torch.save` on every rank of the process group; "
                    "call it from rank 0 only",
                    f"{said_zh} 会在进程组的每个 rank 上调用 `torch.save`；请只在 rank 0 调用",
                )
            ctx.report(call, message, fixes=partial(_fix, ctx, call))


def _pos(node: ast.expr) -> tuple[int, int]:
    return node.lineno, node.col_offset


def _helpers_saving_elsewhere(ctx: Context) -> list[tuple[ast.Call, summaries.Summary]]:
    """Calls of a helper of another project module that saves without a rank check of its own
    (``save_checkpoint(...)`` from ``utils.py``, a method inherited from a trainer class of
    ``base.py``)."""
    sem = ctx.sem
    if sem.project is None:
        return []
    out = []
    for call in sem.calls:
        if not isinstance(call.func, ast.Name | ast.Attribute):
            continue
        helper = summaries.called_summary(sem, call.func)
        if helper is None or helper.sem is sem or not helper.saves_on_every_rank:
            continue
        out.append((call, helper))
    return out


def _unguarded_callers(sem: Semantic, save: ast.Call) -> list[ast.Call]:
    """The calls of the function around ``save`` (of this file) that run without a rank check,
    when some other call of it has one (``if is_main_process(): self.save_checkpoint(...)`` in
    one branch, a bare ``self.save_checkpoint(...)`` in the other): the unchecked calls are
    what to fix."""
    func = sem.enclosing_function(save)
    calls = callers(sem, func) if func is not None else None
    if not calls:
        return []
    unguarded = [c for c in calls if not rank_guarded(sem, c)]
    if len(unguarded) == len(calls):
        return []
    # Only calls known to run this function (``self.save(...)``, not ``image.save(...)``).
    return [
        c for c in unguarded if (summaries.called_function(sem, c.func) or (None, None))[1] is func
    ]


def _never_called(ctx: Context, call: ast.Call) -> bool:
    """A method or helper of this file that nothing in the file calls or passes on, and that
    does not set up the group itself: its callers may well check the rank."""
    sem = ctx.sem
    func = sem.enclosing_function(call)
    if func is None or joins_group(sem, func):
        return False
    return callers(sem, func) == []


def _group_is_optional(ctx: Context) -> bool:
    """Every ``init_process_group`` call runs under a condition (``if args.distributed:``)."""
    sem = ctx.sem
    return all(
        any(isinstance(a, ast.If | ast.IfExp) for a in sem.ancestors(c))
        for c in sem.calls_to(INIT_PROCESS_GROUP)
    )


def _fix(ctx: Context, call: ast.Call) -> Fix | None:
    stmt = ctx.sem.statement_of(call)
    if not isinstance(stmt, ast.Expr) or stmt.value is not call:
        return None
    ref = dist_ref(ctx.sem, ctx.source, ctx.notebook)
    if ref is None:
        return None
    get_rank, edits = ref
    test = f"{get_rank}() == 0"
    if get_rank.endswith(".get_rank") and _group_is_optional(ctx):
        test = f"not {get_rank.removesuffix('.get_rank')}.is_initialized() or {test}"
    wrap = fixes.wrap_statements(ctx.source, [stmt], f"if {test}")
    if wrap is None:
        return None
    return Fix(
        Text(f"Save only when `{test}`", f"仅在 `{test}` 时保存"),
        (*edits, *wrap),
        Applicability.UNSAFE,
    )

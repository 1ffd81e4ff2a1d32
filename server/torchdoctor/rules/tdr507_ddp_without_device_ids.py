from __future__ import annotations

import ast

from ..core import arguments, fixes
from ..core.context import Context
from ..core.distributed import mentions_rank
from ..core.kinds import MODULE_SELF_METHODS
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import argument, dotted
from .base import Invalid, Rule

DDP = "torch.nn.parallel.DistributedDataParallel"
_HEAD = "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"


class DdpWithoutDeviceIds(Rule):
    """## What it does
    Checks for `DistributedDataParallel(model)` without `device_ids=` where the model was
    moved to one GPU chosen by the process's rank (`.cuda(local_rank)`, `.to(rank)`,
    `.to(device)` with `device = torch.device("cuda", local_rank)`): the one-GPU-per-process
    setup that PyTorch documents with `device_ids=[i]`.

    ## Why is this bad?
    For a module on a single GPU, `device_ids=[i]` tells DDP which device the process owns.
    With it, DDP moves the forward pass's inputs onto that device itself and sets
    `output_device`; without it (`device_ids=None`) DDP moves nothing, so every input must
    already sit on exactly the right GPU, and code that relies on the current device (a
    `.cuda()` without an index, collectives with no device bound) falls back to GPU 0
    unless `torch.cuda.set_device` was called: all ranks then create a context on GPU 0 or
    hang in a collective. PyTorch's documentation and DDP tutorial construct DDP with
    `device_ids=[rank]` for this setup. The code works when everything else is placed
    correctly, so this rule is off by default.

    The model's GPU must be read from the file: models moved with a plain `.cuda()`, moved
    to a device that does not name a rank, spread over several GPUs, or kept on the CPU
    (where `device_ids` must stay `None`) are not reported.

    ## Example
    ```python
    local_rank = int(os.environ["LOCAL_RANK"])
    model = Net().cuda(local_rank)
    model = DDP(model)
    ```

    ## Use instead
    ```python
    local_rank = int(os.environ["LOCAL_RANK"])
    model = Net().cuda(local_rank)
    model = DDP(model, device_ids=[local_rank])
    ```

    ## Fix safety
    The suggestion adds `device_ids=[<the model's device>]`, reusing the expression the
    model was moved with. It is never applied in bulk: with `device_ids` set, DDP also moves
    the inputs, which changes where tensors passed to the model end up.

    ## References
    - [`DistributedDataParallel`](https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html)
    - [Getting started with distributed data parallel](https://pytorch.org/tutorials/intermediate/ddp_tutorial.html)
    """

    code = "TDR507"
    name = "ddp-without-device-ids"
    severity = Severity.INFO
    default = False
    fix_safety = Applicability.SUGGESTION

    VALID = (
        _HEAD + "model = Net().cuda(local_rank)\nmodel = DDP(model, device_ids=[local_rank])\n",
        _HEAD + "model = DDP(Net().to(rank), [rank])\n",
        # CPU (gloo) training: device_ids must stay None.
        _HEAD + "model = DDP(Net())\n",
        _HEAD + "model = Net().to('cpu')\nmodel = DDP(model)\n",
        # The device is not per-rank (or unknown): nothing to suggest.
        _HEAD + "torch.cuda.set_device(local_rank)\nmodel = DDP(Net().cuda())\n",
        _HEAD + "model = Net().to(device)\nmodel = DDP(model)\n",
        # Options passed through **kwargs.
        _HEAD + "model = DDP(Net().cuda(rank), **ddp_kwargs)\n",
        # A local class named DDP.
        "import torch\nclass DDP:\n    def __init__(self, m):\n        self.m = m\n"
        "model = DDP(Net().cuda(rank))\n",
        # `device_ids` passed by position.
        "import torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "dist.init_process_group('nccl')\nmodel = DDP(model.cuda(), [local_rank])\n",
    )
    INVALID = (
        Invalid(
            "import os\n" + _HEAD + "local_rank = int(os.environ['LOCAL_RANK'])\n"
            "model = Net().cuda(local_rank)\nmodel = DDP(model)\n",
            fixed="import os\n" + _HEAD + "local_rank = int(os.environ['LOCAL_RANK'])\n"
            "model = Net().cuda(local_rank)\nmodel = DDP(model, device_ids=[local_rank])\n",
            lines=(6,),
        ),
        # A device built from the rank; the full name of DDP; other keywords kept.
        Invalid(
            "import torch as T\n"
            "def main(rank):\n    device = T.device('cuda', rank)\n"
            "    model = Net()\n    model.to(device)\n"
            "    model = T.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)\n",
            fixed="import torch as T\n"
            "def main(rank):\n    device = T.device('cuda', rank)\n"
            "    model = Net()\n    model.to(device)\n"
            "    model = T.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True, "
            "device_ids=[device])\n",
            lines=(6,),
        ),
        # Moved inline, with an f-string device.
        Invalid(
            _HEAD + "ddp = DDP(Net().to(f'cuda:{args.local_rank}'))\n",
            fixed=_HEAD + "ddp = DDP(Net().to(f'cuda:{args.local_rank}'), "
            "device_ids=[args.local_rank])\n",
            lines=(3,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to(DDP):
            bound = arguments.bind(call, arguments.DDP)
            model = bound.value("module")
            if model is None or bound.may_pass("device_ids"):
                continue
            device = _rank_device(ctx, model, call)
            if device is None:
                continue
            ctx.report(
                call,
                Text(
                    "`DistributedDataParallel` of a model on one GPU per process without "
                    f"`device_ids=`; pass `device_ids=[{device}]`",
                    f"每进程一张 GPU 的模型在 `DistributedDataParallel` 中缺少 `device_ids=`；请传入 "
                    f"`device_ids=[{device}]`",
                ),
                fixes=[
                    Fix(
                        Text(f"Add `device_ids=[{device}]`", f"添加 `device_ids=[{device}]`"),
                        (fixes.add_keyword(ctx.source, call, f"device_ids=[{device}]"),),
                        Applicability.SUGGESTION,
                    )
                ],
            )


def _rank_device(ctx: Context, model: ast.expr, at: ast.Call, depth: int = 0) -> str | None:
    """The rank-dependent device the model was moved to, as source text: ``local_rank`` for
    ``.cuda(local_rank)``, ``device`` for ``.to(device)`` with ``device`` built from a rank,
    ``r`` for ``.to(f"cuda:{r}")``; through names assigned in the same scope and in-place
    ``model.to(...)`` statements before ``at``."""
    sem = ctx.sem
    if depth > 6:
        return None
    if isinstance(model, ast.Call) and isinstance(model.func, ast.Attribute):
        func = model.func
        if func.attr in ("cuda", "to"):
            found = _device_text(ctx, argument(model, "device", 0))
            if found is not None:
                return found
        if func.attr in MODULE_SELF_METHODS:
            return _rank_device(ctx, func.value, at, depth + 1)
        return None
    if isinstance(model, ast.Name):
        binding = sem.lookup(model.id, model)
        if binding is None:
            return None
        name = model.id
        moves: list[ast.Call] = [
            *sem.calls_by_attr.get("cuda", []),
            *sem.calls_by_attr.get("to", []),
        ]
        for move in moves:
            assert isinstance(move.func, ast.Attribute)
            stmt = sem.statement_of(move)
            if (
                dotted(move.func.value) == name
                and isinstance(stmt, ast.Expr)
                and stmt.value is move
                and sem.lookup(name, move) is binding
                and (move.lineno, move.col_offset) < (at.lineno, at.col_offset)
            ):
                found = _device_text(ctx, argument(move, "device", 0))
                if found is not None:
                    return found
        if binding.how == "assign" and binding.index is None and binding.value is not None:
            return _rank_device(ctx, binding.value, at, depth + 1)
    return None


def _device_text(ctx: Context, device: ast.expr | None) -> str | None:
    """How to name a rank-dependent CUDA device in ``device_ids``, or None."""
    if device is None:
        return None
    if isinstance(device, ast.JoinedStr):
        values = [v.value for v in device.values if isinstance(v, ast.FormattedValue)]
        lead = device.values[0] if device.values else None
        if (
            len(values) == 1
            and isinstance(lead, ast.Constant)
            and str(lead.value).startswith("cuda")
            and mentions_rank(values[0])
        ):
            return ctx.segment(values[0])
        return None
    if isinstance(device, ast.Name | ast.Attribute) and mentions_rank(device):
        return ctx.segment(device)
    if isinstance(device, ast.Name):
        binding = ctx.sem.lookup(device.id, device)
        value = binding.value if binding is not None and binding.how == "assign" else None
        if (
            isinstance(value, ast.Call)
            and ctx.qualname(value.func) == "torch.device"
            and mentions_rank(value)
            and not any(isinstance(n, ast.Constant) and n.value == "cpu" for n in ast.walk(value))
        ):
            return device.id
    return None

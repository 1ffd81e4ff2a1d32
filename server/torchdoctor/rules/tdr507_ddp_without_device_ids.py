from __future__ import annotations

import ast

from ..core import arguments, fixes
from ..core.context import Context
from ..core.distributed import chooses_cuda_device, mentions_rank, nccl_group
from ..core.kinds import MODULE_CONVERTERS, MODULE_SELF_METHODS
from ..core.model import Applicability, Fix, Severity, Text
from ..core.semantic import argument, dotted
from .base import Invalid, Rule, Valid

DDP = "torch.nn.parallel.DistributedDataParallel"
_HEAD = "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
_DIST = "import torch.distributed as dist\n" + _HEAD
# A helper of another module that chooses the process's GPU (the multi-file example's).
_PIN_PY = "import torch\ndef pin(args):\n    torch.cuda.set_device(args.local_rank)\n"


class DdpWithoutDeviceIds(Rule):
    """## What it does
    Checks for `DistributedDataParallel(model)` without `device_ids=` in a one-GPU-per-process
    script that never chooses the process's current GPU (`torch.cuda.set_device`).

    The model is on a GPU chosen by the process's rank (`.cuda(local_rank)`, `.to(rank)`,
    `.to(device)` with `device = torch.device("cuda", local_rank)`), or was moved with a plain
    `.cuda()` in a file that sets up an NCCL process group; and nothing calls
    `torch.cuda.set_device`, enters `torch.cuda.device(...)` or sets `CUDA_VISIBLE_DEVICES`, in
    the file or in a project helper it calls.

    ## Why is this bad?
    For a module on a single GPU, `device_ids=[i]` tells DDP which device the process owns.
    With it, DDP moves the forward pass's inputs onto that device itself and sets
    `output_device`; without it (`device_ids=None`) DDP moves nothing, and whatever relies
    on the current device (a `.cuda()` without an index, collectives and barriers with no
    device bound, `torch.cuda` memory calls) uses GPU 0, since nothing chose another one:
    every rank creates a CUDA context on GPU 0 and keeps memory there, or hangs in a
    collective. A model moved with a plain `.cuda()` under NCCL is worse: every process puts
    its whole model on GPU 0. PyTorch's documentation and DDP tutorial pair
    `torch.cuda.set_device(rank)` with `device_ids=[rank]` for this setup.

    The model's GPU must be read from the file: models moved to a device that does not name
    a rank, spread over several GPUs, or kept on the CPU (where `device_ids` must stay
    `None`) are not reported, nor are models moved in another branch of an `if` than the
    wrap. Code that does choose the process's GPU is not reported: there DDP without
    `device_ids` works as long as the inputs are placed, and a misplaced input fails loudly.
    A plain `.cuda()` is reported only under an NCCL group (one GPU per process), where the
    wrap runs as part of the file's program; no edit is offered there, since the model has to
    move as well.

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
    severity = Severity.WARNING
    default = True
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
        # An NCCL group whose process's GPU is chosen: here, or by a helper of another module.
        _DIST + "dist.init_process_group('nccl')\ntorch.cuda.set_device(args.local_rank)\n"
        "model = DDP(Net().cuda())\n",
        Valid(
            _DIST + "from dist_utils import pin\ndist.init_process_group('nccl')\npin(args)\n"
            "model = DDP(Net().cuda())\n",
            files=(("dist_utils.py", _PIN_PY),),
        ),
        # Gloo: the processes may run on the CPU, or share a GPU on purpose.
        _DIST + "dist.init_process_group('gloo')\nmodel = DDP(Net().cuda())\n",
        # A method of a class: its callers (elsewhere) may choose the GPU first.
        _DIST + "dist.init_process_group('nccl')\n"
        "class Trainer:\n    def wrap(self, net):\n        return DDP(net.cuda())\n",
        # The process's GPU is chosen: inputs and collectives find it without `device_ids`.
        _HEAD + "torch.cuda.set_device(local_rank)\nmodel = Net().cuda(local_rank)\n"
        "model = DDP(model)\n",
        _HEAD + "with torch.cuda.device(rank):\n    model = DDP(Net().to(rank))\n",
        Valid(
            _HEAD + "from dist_utils import pin\npin(args)\n"
            "model = DDP(Net().cuda(args.local_rank))\n",
            files=(("dist_utils.py", _PIN_PY),),
        ),
        # The rank's GPU is the other branch's: the wrapped model is on the current device
        # (and no NCCL group says one GPU per process).
        _HEAD + "def main(args):\n    model = Net()\n    if args.gpu is not None:\n"
        "        model = model.cuda(args.gpu)\n    elif args.distributed:\n"
        "        model.cuda()\n        model = DDP(model)\n",
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
        # An NCCL group and a plain `.cuda()` that nothing points at the process's GPU: every
        # process uses GPU 0. Through `convert_sync_batchnorm`; no edit (the model moves too).
        Invalid(
            _DIST + "dist.init_process_group(backend='nccl', rank=args.local_rank, world_size=2)\n"
            "net = Net().cuda()\nnet = torch.nn.SyncBatchNorm.convert_sync_batchnorm(net)\n"
            "net = DDP(net)\n",
            fixed=None,
            lines=(7,),
        ),
        # `device_index` made without `with` chooses nothing; the rank's GPU from both
        # branches of an `if` before the wrap.
        Invalid(
            _HEAD + "def run(rank, args):\n    torch.accelerator.device_index(rank)\n"
            "    model = Net()\n    if args.sync_bn:\n"
            "        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
            "    model.to(rank)\n    return DDP(model)\n",
            fixed=_HEAD + "def run(rank, args):\n    torch.accelerator.device_index(rank)\n"
            "    model = Net()\n    if args.sync_bn:\n"
            "        model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)\n"
            "    model.to(rank)\n    return DDP(model, device_ids=[rank])\n",
            lines=(9,),
        ),
        # A worker handed to `mp.spawn`, moved in place.
        Invalid(
            "import torch.multiprocessing as mp\n" + _DIST + "def worker(gpu):\n"
            "    dist.init_process_group('nccl', rank=gpu, world_size=2)\n"
            "    model = Net()\n    model.cuda()\n    ddp = DDP(model)\n"
            "mp.spawn(worker, nprocs=2)\n",
            fixed=None,
            lines=(9,),
        ),
    )

    def check(self, ctx: Context) -> None:
        for call in ctx.sem.calls_to(DDP):
            bound = arguments.bind(call, arguments.DDP)
            model = bound.value("module")
            if model is None or bound.may_pass("device_ids"):
                continue
            moves = _moves(ctx, model, call)
            device = _rank_device(ctx, moves)
            if device is None:
                if _current_device(moves) and _every_rank_on_gpu0(ctx, call):
                    ctx.report(
                        call,
                        Text(
                            "`DistributedDataParallel` of a model moved with `.cuda()` while "
                            "nothing chooses this process's GPU: every process of the NCCL "
                            "group puts its model on GPU 0; call `torch.cuda.set_device(rank)` "
                            "first and pass `device_ids=[rank]`",
                            "`DistributedDataParallel` 包装的模型用 `.cuda()` 移动，但没有代码为本进程"
                            "选择 GPU：NCCL 进程组的每个进程都把模型放在 GPU 0 上；请先调用 "
                            "`torch.cuda.set_device(rank)`，并传入 `device_ids=[rank]`",
                        ),
                    )
                continue
            if chooses_cuda_device(ctx.sem):
                continue  # the inputs' `.cuda()` and the collectives find the process's GPU
            ctx.report(
                call,
                Text(
                    "`DistributedDataParallel` of a model on one GPU per process without "
                    "`device_ids=`, and nothing chooses this process's GPU: inputs moved with "
                    "`.cuda()` and collectives use GPU 0 in every process; pass "
                    f"`device_ids=[{device}]`",
                    f"每进程一张 GPU 的模型在 `DistributedDataParallel` 中缺少 `device_ids=`，且没有代码"
                    "为本进程选择 GPU：用 `.cuda()` 移动的输入和集合通信在每个进程中都使用 GPU 0；"
                    f"请传入 `device_ids=[{device}]`",
                ),
                fixes=[
                    Fix(
                        Text(f"Add `device_ids=[{device}]`", f"添加 `device_ids=[{device}]`"),
                        (fixes.add_keyword(ctx.source, call, f"device_ids=[{device}]"),),
                        Applicability.SUGGESTION,
                    )
                ],
            )


def _every_rank_on_gpu0(ctx: Context, call: ast.Call) -> bool:
    """The file runs one process per GPU (an NCCL group), never chooses the process's current
    device, and wraps the model as part of its own program."""
    return nccl_group(ctx.sem) and not chooses_cuda_device(ctx.sem) and _reached_here(ctx, call)


def _rank_device(ctx: Context, moves: list[ast.Call]) -> str | None:
    """The rank-dependent device the model was moved to, as source text: ``local_rank`` for
    ``.cuda(local_rank)``, ``device`` for ``.to(device)`` with ``device`` built from a rank,
    ``r`` for ``.to(f"cuda:{r}")``."""
    for move in moves:
        found = _device_text(ctx, argument(move, "device", 0))
        if found is not None:
            return found
    return None


def _current_device(moves: list[ast.Call]) -> bool:
    """Every move names no GPU: ``.cuda()``, ``.to("cuda")``: the current device."""
    return bool(moves) and all(
        (_attr(m) == "cuda" and not m.args and not m.keywords)
        or (
            _attr(m) == "to"
            and len(m.args) == 1
            and not m.keywords
            and isinstance(m.args[0], ast.Constant)
            and m.args[0].value == "cuda"
        )
        for m in moves
    )


def _attr(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _moves(ctx: Context, model: ast.expr, at: ast.Call, depth: int = 0) -> list[ast.Call]:
    """The ``.cuda(...)``/``.to(...)`` calls that placed the model, nearest first: inline,
    through names assigned in the same scope, in-place ``model.to(...)`` statements before
    ``at``, and converters that return the module they are given."""
    sem = ctx.sem
    if depth > 6:
        return []
    if isinstance(model, ast.Call) and isinstance(model.func, ast.Attribute):
        func = model.func
        found = [model] if func.attr in ("cuda", "to") else []
        if func.attr in MODULE_SELF_METHODS:
            return found + _moves(ctx, func.value, at, depth + 1)
        if ctx.qualname(func) in MODULE_CONVERTERS and model.args:
            return _moves(ctx, model.args[0], at, depth + 1)
        return found
    if isinstance(model, ast.Name):
        # What a run that reaches ``model`` may have bound: not a sibling branch's binding.
        reaching = sem.may_reach(model.id, model)
        if not reaching:
            return []
        name = model.id
        found = []
        for move in [*sem.calls_by_attr.get("cuda", []), *sem.calls_by_attr.get("to", [])]:
            assert isinstance(move.func, ast.Attribute)
            stmt = sem.statement_of(move)
            if (
                dotted(move.func.value) == name
                and isinstance(stmt, ast.Expr)
                and stmt.value is move
                and (move.lineno, move.col_offset) < (at.lineno, at.col_offset)
                and not sem.exclusive_branches(move, at)
                and any(b in reaching for b in sem.may_reach(name, move))
            ):
                found.append(move)
        found.sort(key=lambda m: (m.lineno, m.col_offset), reverse=True)
        binding = reaching[0]
        if binding.how == "assign" and binding.index is None and binding.value is not None:
            found += _moves(ctx, binding.value, at, depth + 1)
        return found
    return []


def _reached_here(ctx: Context, call: ast.Call) -> bool:
    """The wrap runs as part of this file's program: at module level, or in a function
    whose name the file uses (calls it, hands it to ``mp.spawn``)."""
    func = ctx.sem.enclosing_function(call)
    if func is None:
        return True
    return not isinstance(ctx.sem.parent(func), ast.ClassDef) and bool(ctx.sem.names.get(func.name))


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
